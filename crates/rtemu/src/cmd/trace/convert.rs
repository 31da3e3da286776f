//! `rtemu trace convert`: a trace in another form, or the trace a delay series or two
//! captures imply.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};
use rtemu_report::output::Output;
use rtemu_report::trace::ConvertSummary;
use rtemu_sim::capture::CaptureReader;
use rtemu_sim::capture_pair::actions_from_captures;
use rtemu_sim::source::FrameSource;
use rtemu_trace::series::{actions_at_rate, Interpolation, SeriesStream};
use rtemu_trace::{Format, Header, RecordWriter, TimeUnit, UnderrunPolicy};

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

/// The output's writer: `a.output`, written whole or not at all, never over `inputs`.
fn writer(
    a: &ConvertArgs,
    inputs: &[&Path],
    to: Format,
    header: &Header,
) -> anyhow::Result<RecordWriter<Output>> {
    Ok(RecordWriter::new(
        Output::create(&a.output, inputs)?,
        to,
        header,
    )?)
}

/// Finishes the output, returning the records written.
fn finish(w: RecordWriter<Output>, out: &str) -> anyhow::Result<u64> {
    let n = w.records_written();
    w.finish()
        .with_context(|| format!("writing {out}"))?
        .commit()?;
    Ok(n)
}

pub(super) fn run(a: &ConvertArgs) -> anyhow::Result<()> {
    let to = super::output_format(&a.output, a.to)?;
    let unit = match a.unit.as_deref() {
        None => None,
        Some("ns") => Some(TimeUnit::Ns),
        Some("us" | "µs") => Some(TimeUnit::Us),
        Some("ms") => Some(TimeUnit::Ms),
        Some(u) => bail!("--unit {u:?}: valid units are ns, us, ms"),
    };
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
        let mut w = writer(a, &[&a.input], to, &header)?;
        for x in actions_at_rate(series, pps, resolution) {
            w.write(x?).with_context(|| format!("writing {out}"))?;
        }
        let n = finish(w, &out)?;
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
    let mut r = super::open(&a.input, a.from)?;
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
    let mut w = writer(a, &[&a.input], to, &header)?;
    r.for_each_record(|x| w.write(x).with_context(|| format!("writing {out}")))?;
    let n = finish(w, &out)?;
    if a.json {
        let summary = ConvertSummary::new(&a.input, &a.output, r.format().name(), to, &header, n);
        return rtemu_report::text::print_json(&summary);
    }
    eprintln!("rtemu: converted {n} records to {out} ({} form)", to.name());
    Ok(())
}

/// `convert SENDER.pcap OUT --receiver RECEIVER.pcap`: the action trace two captures imply.
fn captures(a: &ConvertArgs, receiver: &Path, to: Format, unit: TimeUnit) -> anyhow::Result<()> {
    let out = a.output.display().to_string();
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
    let mut w = writer(a, &[&a.input, receiver], to, &header)?;
    let mut write_error = None;
    let mut receiver_capture = CaptureReader::open(receiver)
        .with_context(|| format!("receiver capture {}", receiver.display()))?;
    let stats = actions_from_captures(
        || Ok(Box::new(CaptureReader::open(&a.input)?) as Box<dyn FrameSource>),
        &mut receiver_capture,
        |action| {
            if write_error.is_none() {
                write_error = w.write(action.rounded(resolution)).err();
            }
        },
    )?;
    if let Some(e) = write_error {
        return Err(e).with_context(|| format!("writing {out}"));
    }
    let n = finish(w, &out)?;
    if a.json {
        let mut summary = ConvertSummary::new(&a.input, &a.output, "capture", to, &header, n);
        summary.captures = Some(serde_json::json!({
            "receiver": receiver.display().to_string(),
            "sent": stats.sent,
            "delivered": stats.delivered,
            "dropped": stats.dropped,
            "duplicates": stats.duplicates,
            "unmatched": stats.unmatched,
            "negative_delays": stats.negative_delays,
        }));
        return rtemu_report::text::print_json(&summary);
    }
    eprintln!(
        "rtemu: {} packets sent: {} delivered, {} dropped, {} extra copies; {} receiver frames matched nothing; \
         {} copies seen before they were sent (delay 0); wrote {out} ({} form)",
        stats.sent,
        stats.delivered,
        stats.dropped,
        stats.duplicates,
        stats.unmatched,
        stats.negative_delays,
        to.name()
    );
    Ok(())
}
