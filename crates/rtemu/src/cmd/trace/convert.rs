//! `rtemu trace convert`: a trace in another form, or the trace a delay series or two
//! captures imply.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};
use rtemu_report::trace::{ConvertSummary, TraceOutput};
use rtemu_sim::capture::CaptureReader;
use rtemu_sim::capture_pair::actions_from_captures;
use rtemu_sim::source::FrameSource;
use rtemu_trace::series::{actions_at_rate, Interpolation, SeriesStream};
use rtemu_trace::{Format, Header, RecordReader, TimeUnit, UnderrunPolicy};

use super::HeaderArgs;

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  rtemu trace convert fgn.rpl fgn.txt
  rtemu trace convert fgn.txt fgn.rplx --unit ns --json
  rtemu trace convert probe.txt probe.rpl --series-pps 1000 --interp linear
  rtemu trace convert sent.pcap path.txt --receiver received.pcap --json
  rtemu trace convert path.txt path.rplx --flow 'src=192.0.2.0/24 proto=udp' --provenance 'lab path A'")]
pub(super) struct ConvertArgs {
    /// Input trace.
    input: PathBuf,
    /// Output trace.
    output: PathBuf,
    /// Input form, if detection would guess wrong.
    #[arg(long)]
    from: Option<Format>,
    /// Output form; default from the extension.
    #[arg(long)]
    to: Option<Format>,
    /// Time unit of a framed output (ns, us, ms); default the input's, or us.
    #[arg(long)]
    unit: Option<String>,
    /// Read the input as a delay/loss time series (`time delay [lost]` per line) and write
    /// the action trace it implies for packets at this rate (packets per second).
    #[arg(long, value_name = "PPS")]
    series_pps: Option<u64>,
    /// Interpolation of the series between samples: step or linear.
    #[arg(long, default_value = "step", requires = "series_pps")]
    interp: Interpolation,
    /// Read the input as a capture (pcap/pcapng) taken where packets were sent, and this one
    /// as a capture of the same packets where they arrived; write the action trace they
    /// imply (delays, drops, duplicates, matched by content). Both clocks must agree.
    #[arg(long, value_name = "CAPTURE", conflicts_with = "series_pps")]
    receiver: Option<PathBuf>,
    /// Print a JSON summary on stdout (input and output with their forms, records written)
    /// instead of the one-line note on stderr.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    header: HeaderArgs,
}

pub(super) fn run(a: &ConvertArgs) -> anyhow::Result<()> {
    let to = Format::for_output(&a.output, a.to)?;
    let unit = a
        .unit
        .as_deref()
        .map(|u| {
            u.parse::<TimeUnit>()
                .with_context(|| format!("--unit {u:?}"))
        })
        .transpose()?;
    let out = a.output.display().to_string();
    if let Some(receiver) = &a.receiver {
        return captures(a, receiver, to, unit.unwrap_or(TimeUnit::Us));
    }
    if let Some(pps) = a.series_pps {
        if pps == 0 {
            bail!("--series-pps must be at least 1");
        }
        // Waiting for the reader: every record is the series's, none a substitute.
        let series = SeriesStream::open(&a.input, a.interp, UnderrunPolicy::Wait)?;
        let mut header = Header {
            unit: unit.unwrap_or(TimeUnit::Us),
            flow: None,
            provenance: format!(
                "delay series {} at {pps} packets/s, {:?} interpolation",
                a.input.display(),
                a.interp
            ),
        };
        a.header.apply(&mut header, to, &a.output)?;
        let resolution = to.resolution_ns(header.unit);
        let mut w = TraceOutput::create(&a.output, &[&a.input], to, &header)?;
        for x in actions_at_rate(series, pps, resolution) {
            w.write(x?)?;
        }
        let n = w.commit()?;
        if a.json {
            let mut summary = ConvertSummary::new(&a.input, &a.output, "series", to, &header, n);
            summary.series = Some(serde_json::json!({
                "packets_per_second": pps,
                "interpolation": format!("{:?}", a.interp).to_lowercase(),
            }));
            return rtemu_report::text::print_json(&summary);
        }
        eprintln!("rtemu: wrote {n} records to {out} ({} form)", to.name());
        return Ok(());
    }
    let mut r = RecordReader::open(&a.input, a.from)?;
    let mut header = r.header().cloned().unwrap_or_default();
    if let Some(u) = unit {
        header.unit = u;
    }
    if header.provenance.is_empty() {
        header.provenance = format!("converted from {}", a.input.display());
    }
    if let (Some(flow), false) = (header.flow, to == Format::Framed) {
        eprintln!(
            "rtemu: note: the flow of {} ({flow}) is not kept: only the framed form stores one",
            a.input.display()
        );
    }
    a.header.apply(&mut header, to, &a.output)?;
    let mut w = TraceOutput::create(&a.output, &[&a.input], to, &header)?;
    r.for_each_record(|x| w.write(x))?;
    let n = w.commit()?;
    if a.json {
        let summary = ConvertSummary::new(&a.input, &a.output, r.format().name(), to, &header, n);
        return rtemu_report::text::print_json(&summary);
    }
    eprintln!("rtemu: converted {n} records to {out} ({} form)", to.name());
    Ok(())
}

/// `convert SENDER.pcap OUT --receiver RECEIVER.pcap`: the action trace two captures imply.
fn captures(a: &ConvertArgs, receiver: &Path, to: Format, unit: TimeUnit) -> anyhow::Result<()> {
    let mut header = Header {
        unit,
        flow: None,
        provenance: format!(
            "sender capture {}, receiver capture {}",
            a.input.display(),
            receiver.display()
        ),
    };
    a.header.apply(&mut header, to, &a.output)?;
    let resolution = to.resolution_ns(unit);
    let mut w = TraceOutput::create(&a.output, &[&a.input, receiver], to, &header)?;
    let mut written = Ok(());
    let mut receiver_capture = CaptureReader::open(receiver)
        .with_context(|| format!("receiver capture {}", receiver.display()))?;
    let stats = actions_from_captures(
        || Ok(Box::new(CaptureReader::open(&a.input)?) as Box<dyn FrameSource>),
        &mut receiver_capture,
        |action| {
            if written.is_ok() {
                written = w.write(action.rounded(resolution));
            }
        },
    )?;
    written?;
    let n = w.commit()?;
    if a.json {
        let mut summary = ConvertSummary::new(&a.input, &a.output, "capture", to, &header, n);
        let mut captures = serde_json::to_value(stats)?;
        captures["receiver"] = receiver.display().to_string().into();
        summary.captures = Some(captures);
        return rtemu_report::text::print_json(&summary);
    }
    let out = a.output.display();
    eprintln!("rtemu: {stats}; wrote {out} ({} form)", to.name());
    Ok(())
}
