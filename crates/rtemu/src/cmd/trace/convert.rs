//! `rtemu trace convert`: a trace in another form, or the trace a delay series or two
//! captures imply.

use std::path::PathBuf;

use anyhow::{bail, Context as _};
use rtemu_report::trace::{convert, Source};
use rtemu_trace::series::Interpolation;
use rtemu_trace::{Format, Header, TimeUnit};

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
    let source = match (&a.receiver, a.series_pps) {
        (Some(receiver), _) => Source::Captures { receiver },
        (None, Some(0)) => bail!("--series-pps must be at least 1"),
        (None, Some(pps)) => Source::Series(pps, a.interp),
        (None, None) => Source::Trace(a.from),
    };
    let (flow, provenance) = (a.header.flow, a.header.provenance.as_deref());
    let annotate = |h: &mut Header| Ok(h.annotate(flow, provenance, to, &a.output)?);
    let input = a.input.display();
    let lost_flow = |flow| {
        eprintln!("rtemu: note: the flow of {input} ({flow}) is not kept: only the framed form stores one")
    };
    let summary = convert(&a.input, source, (&a.output, to), unit, annotate, lost_flow)?;
    if a.json {
        return rtemu_report::text::print_json(&summary);
    }
    eprintln!("rtemu: {summary}");
    Ok(())
}
