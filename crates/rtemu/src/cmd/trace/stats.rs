//! `rtemu trace stats`: a trace's statistics.

use std::io::Write;
use std::path::PathBuf;

use rtemu_report::trace::{self, Kind};
use rtemu_trace::stats::DEFAULT_MAX_SERIES;
use rtemu_trace::Format;

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  rtemu trace stats fgn.rpl
  rtemu trace stats fgn.rpl --json
  rtemu trace stats trace.dat --format raw --max-series 100000
  rtemu trace stats link.down --kind mahimahi
  rtemu trace stats probe.txt --kind series --json
  rtemu trace stats fgn.rpl --plot fgn-variance-time.svg")]
pub(super) struct StatsArgs {
    /// The trace.
    file: PathBuf,
    /// Its form, if detection would guess wrong.
    #[arg(long)]
    format: Option<Format>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Delays kept for autocorrelation and Hurst estimates (the first ones).
    #[arg(long, default_value_t = DEFAULT_MAX_SERIES)]
    max_series: usize,
    /// The kind of trace: actions (per-packet), mahimahi (delivery opportunities) or series
    /// (delay/loss time series). Default: read from the file (name, then content).
    #[arg(long)]
    kind: Option<TraceKind>,
    /// Draw the delays' variance-time plot (action traces), with the aggregated-variance fit
    /// and the slope of short-range dependence, to this .svg or .png file.
    #[arg(long, value_name = "FILE.svg|FILE.png")]
    plot: Option<PathBuf>,
}

/// The kinds of trace `stats` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum TraceKind {
    Actions,
    Mahimahi,
    Series,
}

/// `rtemu trace stats`; an action trace's statistics go to `out`.
pub(super) fn run(a: &StatsArgs, out: &mut impl Write) -> anyhow::Result<()> {
    // `--kind`, else an action trace under `--format`, else the file says.
    let kind = match (a.kind, a.format) {
        (Some(TraceKind::Actions), format) | (None, format @ Some(_)) => {
            Some(Kind::Actions(format))
        }
        (Some(TraceKind::Series), _) => Some(Kind::Series),
        (Some(TraceKind::Mahimahi), _) => Some(Kind::Mahimahi),
        (None, None) => None,
    };
    let options = (a.max_series, a.plot.as_deref(), a.json);
    trace::stats(out, &a.file, kind, options)
}
