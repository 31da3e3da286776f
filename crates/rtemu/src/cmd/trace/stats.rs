//! `rtemu trace stats`: a trace's statistics.

use std::io::Write;
use std::path::PathBuf;

use anyhow::bail;
use rtemu_report::text::{json, print_summary};
use rtemu_report::{output, plot, trace};
use rtemu_trace::format::Content;
use rtemu_trace::stats::{StatsBuilder, DEFAULT_MAX_SERIES};
use rtemu_trace::{mahimahi, series, Format, RecordReader};

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
    // `--kind`, else an action trace under `--format`, else the kind the file's name or
    // content shows (a file of no kind is an error naming its line).
    let kind = match (a.kind, a.format) {
        (Some(k), _) => k,
        (None, Some(_)) => TraceKind::Actions,
        (None, None) => match Content::sniff_file(&a.file)? {
            Content::Actions(_) => TraceKind::Actions,
            Content::Series => TraceKind::Series,
            Content::Mahimahi => TraceKind::Mahimahi,
        },
    };
    if let Some(path) = &a.plot {
        if kind != TraceKind::Actions {
            bail!(
                "--plot draws the delays of an action trace; {} is a {} trace",
                a.file.display(),
                format!("{kind:?}").to_lowercase()
            );
        }
        plot::Format::of(path)?;
        output::refuse_inputs(path, &[&a.file])?;
    }
    match kind {
        TraceKind::Mahimahi => return print_summary(a.json, &mahimahi::Summary::read(&a.file)?),
        TraceKind::Series => return print_summary(a.json, &series::Summary::read(&a.file)?),
        TraceKind::Actions => {}
    }
    let mut r = RecordReader::open(&a.file, a.format)?;
    let mut b = StatsBuilder::new(a.max_series);
    r.for_each_record(|x| {
        b.add(x);
        anyhow::Ok(())
    })?;
    let s = b.finish();
    if s.records == 0 {
        bail!("{}: the trace holds no records", a.file.display());
    }
    if let Some(path) = &a.plot {
        trace::variance_time_chart(&a.file, &s)?.draw(path)?;
    }
    if a.json {
        json(out, &trace::stats_json(&s, r.format(), r.header())?)
    } else {
        Ok(trace::write_stats(
            out,
            &a.file,
            r.format(),
            r.header(),
            &s,
        )?)
    }
}
