//! `rtemu trace`: generate, inspect, convert and benchmark traces (the work is in
//! `rtemu-trace`).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use rtemu_model::units::parse_duration_ns;
use rtemu_sim::capture::CaptureReader;
use rtemu_sim::capture_pair::actions_from_captures;
use rtemu_sim::source::FrameSource;
use rtemu_trace::duration::format_duration;
use rtemu_trace::fgn::{Fgn, FgnDelays, DEFAULT_BLOCK};
use rtemu_trace::flow::FlowPattern;
use rtemu_trace::iid::{Dist, GilbertElliott, IidTrace};
use rtemu_trace::mahimahi::{self, OpportunityReader};
use rtemu_trace::onoff::{OnOffConfig, OnOffDelays};
use rtemu_trace::series::{actions_at_rate, Interpolation, SeriesReader, SeriesStream};
use rtemu_trace::stats::{StatsBuilder, TraceStats, DEFAULT_MAX_SERIES};
use rtemu_trace::{
    Action, EndPolicy, ErrorKind, Format, Header, PrefetchConfig, Prefetcher, RecordReader,
    RecordWriter, TimeUnit, TraceError, UnderrunPolicy,
};

use rtemu_report::output::{self, Output};
use rtemu_report::plot;

/// Generate, inspect, convert and benchmark per-packet action traces.
///
/// Forms: raw RplTrc `.rpl` (headerless, big-endian words, µs), framed `.rplx` (header with
/// unit, flow and provenance) and text (`drop`, `pass 1234us`, `dup 100us`); see
/// docs/formats.md. The form of an input is detected; that of an output follows its extension
/// (`.rpl`, `.rplx`, `.txt`) unless `--format` says.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  rtemu trace gen fgn --hurst 0.8 --mean 5ms --std 1ms --count 1000000 --seed 7 -o fgn.rpl
  rtemu trace gen onoff --sources 50 --alpha 1.4 --count 1000000 -o onoff.rplx
  rtemu trace gen iid --dist pareto --mean 5ms --std 2ms --ge-p 0.01 --ge-r 0.2 -o iid.rpl
  rtemu trace stats fgn.rpl --json
  rtemu trace convert fgn.rpl fgn.txt
  rtemu trace convert probe.txt probe.rpl --series-pps 1000 --interp linear
  rtemu trace cat fgn.rpl | head
  rtemu trace bench big.rpl --cold
  rtemu trace bench big.rpl --cold --underrun pass --pace 1000000 --limit 10000000")]
pub struct TraceArgs {
    #[command(subcommand)]
    command: TraceCommand,
}

#[derive(Debug, clap::Subcommand)]
enum TraceCommand {
    /// Generate a synthetic trace.
    Gen(GenArgs),
    /// Print a trace's statistics: counts, delay moments and percentiles, autocorrelation,
    /// Hurst estimates.
    Stats(StatsArgs),
    /// Convert a trace between the raw, framed and text forms.
    Convert(ConvertArgs),
    /// Print a trace in the text form.
    Cat(CatArgs),
    /// Measure how fast a trace streams through the prefetching reader.
    Bench(BenchArgs),
}

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  rtemu trace gen fgn --hurst 0.8 --mean 5ms --std 1ms --count 1000000 --seed 7 -o fgn.rpl
  rtemu trace gen onoff --sources 50 --alpha 1.4 --count 1000000 -o onoff.rplx
  rtemu trace gen iid --dist pareto --mean 5ms --std 2ms --count 100000 -o iid.rpl --json
  rtemu trace gen fgn --count 100000 --flow 'dst=10.0.0.0/8 proto=udp' --provenance 'lab path A' -o a.rplx")]
struct GenArgs {
    #[command(subcommand)]
    kind: GenKind,
}

#[derive(Debug, clap::Subcommand)]
enum GenKind {
    /// Fractional Gaussian noise delays (exact, Davies–Harte), every record a pass.
    Fgn(FgnArgs),
    /// Queueing delay behind superposed heavy-tailed ON/OFF sources (H = (3 − α)/2).
    Onoff(OnOffArgs),
    /// i.i.d. delays from a distribution, optionally with Gilbert–Elliott loss (baselines).
    Iid(IidArgs),
    /// The fates a netem-style model gives packets at a steady rate, recorded as actions: any
    /// of the model's distributions (paretonormal, `.dist` tables), correlations, losses and
    /// duplicates, in a form that replays without the model.
    Netem(NetemGenArgs),
}

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  rtemu trace gen netem --model \"delay 20ms 5ms distribution paretonormal\" --count 100000 -o pn.rpl
  rtemu trace gen netem --model \"delay 10ms 2ms 25% loss 1% 25% duplicate 0.5%\" --pps 10000 --count 100000 -o m.rplx --json")]
struct NetemGenArgs {
    /// The model, in netem's syntax (`distribution NAME` finds `.dist` tables as `rtemu sim`
    /// does). Delays are rounded to the microsecond; corruption is not recorded (an action
    /// trace has no field for it).
    #[arg(long)]
    model: String,
    /// Packets per second offered to the model (matters for `rate` and time-based stages).
    #[arg(long, default_value_t = 1000)]
    pps: u64,
    /// Bytes per packet offered to the model.
    #[arg(long, default_value_t = 1000)]
    size: u32,
    #[command(flatten)]
    out: OutputArgs,
}

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  rtemu trace gen iid --dist pareto --mean 5ms --std 2ms --count 100000 -o iid.rpl
  rtemu trace gen iid --dist constant --mean 10ms --ge-p 0.01 --ge-r 0.3 --count 100000 -o ge.rplx --json
  rtemu trace gen iid --dist normal --mean 20ms --std 4ms --count 1000 --seed 3 -o iid.txt")]
struct IidArgs {
    /// Distribution: constant, uniform, normal, exponential, pareto.
    #[arg(long, default_value = "normal")]
    dist: Dist,
    /// Mean delay.
    #[arg(long, default_value = "5ms")]
    mean: String,
    /// Standard deviation of the delay.
    #[arg(long, default_value = "1ms")]
    std: String,
    /// Gilbert–Elliott: probability per packet of going from Good to Bad (enables loss).
    #[arg(long)]
    ge_p: Option<f64>,
    /// Gilbert–Elliott: probability per packet of going from Bad to Good.
    #[arg(long, default_value_t = 1.0, requires = "ge_p")]
    ge_r: f64,
    /// Gilbert–Elliott: loss probability in Good.
    #[arg(long, default_value_t = 0.0, requires = "ge_p")]
    ge_loss_good: f64,
    /// Gilbert–Elliott: loss probability in Bad.
    #[arg(long, default_value_t = 1.0, requires = "ge_p")]
    ge_loss_bad: f64,
    #[command(flatten)]
    out: OutputArgs,
}

/// Options every generator shares.
#[derive(Debug, clap::Args)]
struct OutputArgs {
    /// Records to generate.
    #[arg(long, default_value_t = 1_000_000)]
    count: u64,
    /// Seed; the same seed gives the same trace.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output file.
    #[arg(short = 'o', long)]
    output: PathBuf,
    /// Output form (raw, framed, text); default from the extension.
    #[arg(long)]
    format: Option<Format>,
    /// Print a JSON summary on stdout (records written, output, generator, parameters, seed)
    /// instead of the one-line note on stderr.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    header: HeaderArgs,
}

/// What a framed output's header says beyond the records.
#[derive(Debug, Clone, clap::Args)]
struct HeaderArgs {
    /// The flow this trace applies to, stored in the framed header (framed form only), e.g.
    /// 'dst=10.0.0.0/8 dport=443 proto=tcp'; see docs/formats.md for the syntax.
    #[arg(long, value_name = "PATTERN")]
    flow: Option<FlowPattern>,
    /// Free text put first in the framed header's provenance, before what rtemu writes there
    /// itself (the command line, or the input's provenance) (framed form only).
    #[arg(long, value_name = "TEXT")]
    provenance: Option<String>,
}

impl HeaderArgs {
    /// Puts the flow and provenance into `header`, or fails if they were given for an output
    /// whose form has no header.
    fn apply(&self, header: &mut Header, format: Format, output: &Path) -> anyhow::Result<()> {
        let given: Vec<&str> = [
            self.flow.is_some().then_some("--flow"),
            self.provenance.is_some().then_some("--provenance"),
        ]
        .into_iter()
        .flatten()
        .collect();
        if format != Format::Framed && !given.is_empty() {
            bail!(
                "{} can only be stored in the header of the framed form, but {} is written in the {} form: \
                 name it .rplx or add --format framed",
                given.join(" and "),
                output.display(),
                format.name()
            );
        }
        if let Some(flow) = self.flow {
            header.flow = Some(flow);
        }
        if let Some(text) = &self.provenance {
            header.provenance = if header.provenance.is_empty() {
                text.clone()
            } else {
                format!("{text}; {}", header.provenance)
            };
        }
        Ok(())
    }
}

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  rtemu trace gen fgn --hurst 0.8 --mean 5ms --std 1ms --count 1000000 --seed 7 -o fgn.rpl
  rtemu trace gen fgn --hurst 0.9 --mean 20ms --std 5ms --count 100000 -o fgn.rplx --json
  rtemu trace gen fgn --count 1000 --format text -o fgn.dat")]
struct FgnArgs {
    /// Hurst parameter, in (0, 1).
    #[arg(long, default_value_t = 0.8)]
    hurst: f64,
    /// Mean delay (e.g. 5ms).
    #[arg(long, default_value = "5ms")]
    mean: String,
    /// Standard deviation of the delay (e.g. 1ms).
    #[arg(long, default_value = "1ms")]
    std: String,
    /// Samples per exact block (a power of two); correlation is exact within a block.
    #[arg(long, default_value_t = DEFAULT_BLOCK)]
    block: usize,
    #[command(flatten)]
    out: OutputArgs,
}

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  rtemu trace gen onoff --sources 50 --alpha 1.4 --count 1000000 -o onoff.rplx
  rtemu trace gen onoff --sources 100 --link-rate 60e6 --buffer 200000 --interval 100us --count 100000 -o onoff.rpl --json")]
struct OnOffArgs {
    /// Number of ON/OFF sources.
    #[arg(long, default_value_t = 50)]
    sources: u32,
    /// Pareto shape of the ON and OFF periods, in (1, 2).
    #[arg(long, default_value_t = 1.4)]
    alpha: f64,
    /// Mean ON period.
    #[arg(long, default_value = "50ms")]
    mean_on: String,
    /// Mean OFF period.
    #[arg(long, default_value = "50ms")]
    mean_off: String,
    /// Each source's rate while ON, bit/s.
    #[arg(long, default_value_t = 1e6)]
    source_rate: f64,
    /// The bottleneck's rate, bit/s.
    #[arg(long, default_value_t = 30e6)]
    link_rate: f64,
    /// Queue capacity, bytes.
    #[arg(long, default_value_t = 1e6)]
    buffer: f64,
    /// Size of the packet whose fate each record gives, bytes.
    #[arg(long, default_value_t = 1500.0)]
    probe: f64,
    /// Time between records.
    #[arg(long, default_value = "1ms")]
    interval: String,
    /// Delay added to every delivered packet.
    #[arg(long, default_value = "10ms")]
    base: String,
    #[command(flatten)]
    out: OutputArgs,
}

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  rtemu trace stats fgn.rpl
  rtemu trace stats fgn.rpl --json
  rtemu trace stats trace.dat --format raw --max-series 100000
  rtemu trace stats link.down --kind mahimahi
  rtemu trace stats probe.txt --kind series --json
  rtemu trace stats fgn.rpl --plot fgn-variance-time.svg")]
struct StatsArgs {
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

#[derive(Debug, serde::Serialize)]
struct MahimahiSummary {
    opportunities: u64,
    period_ms: f64,
    mean_rate_mbps_at_1500_bytes: f64,
}

#[derive(Debug, serde::Serialize)]
struct SeriesSummary {
    samples: u64,
    duration_s: f64,
    lost_fraction: f64,
    delay_mean_ms: f64,
    delay_min_ms: f64,
    delay_max_ms: f64,
}

/// Prints `value` as pretty JSON on stdout. Serialized first, so that a closed pipe
/// (`… --json | head`) surfaces as the I/O error the caller treats as no error.
fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    writeln!(io::stdout().lock(), "{text}")?;
    Ok(())
}

fn print_summary(json: bool, summary: &impl serde::Serialize) -> anyhow::Result<()> {
    let value = serde_json::to_value(summary)?;
    if json {
        print_json(&value)?;
    } else if let serde_json::Value::Object(fields) = value {
        for (k, v) in fields {
            println!("{:<30} {v}", k.replace('_', " "));
        }
    }
    Ok(())
}

/// The kind `stats` reads: `--kind`, else an action trace under `--format`, else the kind
/// the file's name or content shows (a file of no kind is an error naming its line).
fn stats_kind(a: &StatsArgs) -> anyhow::Result<TraceKind> {
    use rtemu_trace::format::Content;
    Ok(match (a.kind, a.format) {
        (Some(k), _) => k,
        (None, Some(_)) => TraceKind::Actions,
        (None, None) => match Content::sniff_file(&a.file)? {
            Content::Actions(_) => TraceKind::Actions,
            Content::Series => TraceKind::Series,
            Content::Mahimahi => TraceKind::Mahimahi,
        },
    })
}

/// Statistics of a delivery-opportunity trace or a delay series, read in one pass in constant
/// memory.
fn stats_other(a: &StatsArgs, kind: TraceKind) -> anyhow::Result<()> {
    if kind == TraceKind::Mahimahi {
        let mut r = OpportunityReader::open(&a.file)?;
        let (mut opportunities, mut period_ms) = (0u64, 0);
        while let Some(t) = r.next_time()? {
            opportunities += 1;
            period_ms = t;
        }
        if opportunities == 0 {
            return Err(TraceError::new(ErrorKind::Empty).with_path(&a.file).into());
        }
        return print_summary(
            a.json,
            &MahimahiSummary {
                opportunities,
                period_ms: period_ms as f64,
                mean_rate_mbps_at_1500_bytes: mahimahi::mean_rate_bps(
                    opportunities,
                    period_ms,
                    1500,
                ) / 1e6,
            },
        );
    }
    let mut r = SeriesReader::open(&a.file)?;
    let Some(first) = r.next_sample()? else {
        return Err(TraceError::new(ErrorKind::Empty).with_path(&a.file).into());
    };
    let ms = |ns: u64| ns as f64 / 1e6;
    let (mut n, mut lost, mut sum_ms) = (0u64, 0u64, 0.0);
    let (mut min_ms, mut max_ms) = (f64::INFINITY, 0.0f64);
    let mut last = first;
    let mut sample = Some(first);
    while let Some(x) = sample {
        n += 1;
        lost += u64::from(x.lost);
        sum_ms += ms(x.delay_ns);
        min_ms = min_ms.min(ms(x.delay_ns));
        max_ms = max_ms.max(ms(x.delay_ns));
        last = x;
        sample = r.next_sample()?;
    }
    print_summary(
        a.json,
        &SeriesSummary {
            samples: n,
            duration_s: (last.time_ns - first.time_ns) as f64 / 1e9,
            lost_fraction: lost as f64 / n as f64,
            delay_mean_ms: sum_ms / n as f64,
            delay_min_ms: min_ms,
            delay_max_ms: max_ms,
        },
    )
}

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  rtemu trace convert fgn.rpl fgn.txt
  rtemu trace convert fgn.txt fgn.rplx --unit ns --json
  rtemu trace convert probe.txt probe.rpl --series-pps 1000 --interp linear
  rtemu trace convert sent.pcap path.txt --receiver received.pcap --json
  rtemu trace convert path.txt path.rplx --flow 'src=192.0.2.0/24 proto=udp' --provenance 'lab path A'")]
struct ConvertArgs {
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

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  rtemu trace cat fgn.rpl | head
  rtemu trace cat trace.dat --format raw > trace.txt")]
struct CatArgs {
    /// The trace.
    file: PathBuf,
    /// Its form, if detection would guess wrong.
    #[arg(long)]
    format: Option<Format>,
}

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  rtemu trace bench big.rpl
  rtemu trace bench big.rpl --cold --json
  rtemu trace bench big.rpl --cold --underrun pass --pace 1000000 --limit 10000000")]
struct BenchArgs {
    /// The trace to stream (make it larger than the page cache for a true cold figure).
    file: PathBuf,
    /// Drop the file from the page cache first (fsync, then posix_fadvise DONTNEED), so the
    /// first pass reads from the disk.
    #[arg(long)]
    cold: bool,
    /// Passes over the file after the first (warm cache), 0 to 100.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(0..=100))]
    warm_passes: u32,
    /// Records per prefetch block, 1 to 4194304 (blocks × records at most 16777216, 256 MiB).
    #[arg(long, default_value_t = 1 << 16, value_parser = clap::value_parser!(u64).range(1..=1 << 22))]
    block_records: u64,
    /// Blocks in the prefetch ring, 2 to 256.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(2..=256))]
    blocks: u64,
    /// Under-run policy: wait (measure the reader's throughput), or pass, drop, hold-last
    /// (measure how often a consumer of the given pace would find no record ready).
    #[arg(long, default_value = "wait")]
    underrun: UnderrunPolicy,
    /// Consume at this many records per second (busy-waiting between records), as a link
    /// would, 1 to 1000000000; default: as fast as possible. A paced run that would take more
    /// than 10 minutes is refused (bound it with --limit).
    #[arg(long, value_name = "RPS", value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    pace: Option<u64>,
    /// Stop each pass after this many actions.
    #[arg(long)]
    limit: Option<u64>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `rtemu trace`.
pub fn run(args: &TraceArgs) -> anyhow::Result<()> {
    match &args.command {
        TraceCommand::Gen(g) => match &g.kind {
            GenKind::Fgn(a) => gen_fgn(a),
            GenKind::Onoff(a) => gen_onoff(a),
            GenKind::Iid(a) => gen_iid(a),
            GenKind::Netem(a) => gen_netem(a),
        },
        TraceCommand::Stats(a) => stats(a, &mut io::stdout().lock()),
        TraceCommand::Convert(a) => convert(a),
        TraceCommand::Cat(a) => cat(a, &mut BufWriter::new(io::stdout().lock())),
        TraceCommand::Bench(a) => bench(a),
    }
}

fn duration(flag: &str, value: &str) -> anyhow::Result<u64> {
    parse_duration_ns(value, None).map_err(|e| anyhow::anyhow!("--{flag}: {e}"))
}

fn output_format(path: &Path, given: Option<Format>) -> anyhow::Result<Format> {
    match given.or_else(|| Format::from_extension(path)) {
        Some(f) => Ok(f),
        None => bail!(
            "cannot tell the form of {} from its extension: use .rpl, .rplx or .txt, or --format raw|framed|text",
            path.display()
        ),
    }
}

/// Starts writing `path` (whole or not at all), which must not be one of `inputs`.
fn create(path: &Path, inputs: &[&Path]) -> anyhow::Result<Output> {
    Output::create(path, inputs)
}

/// Writes `count` records from `next` to the output, returning the form written and the
/// writer's record count.
fn write_generated(
    out: &OutputArgs,
    header: &mut Header,
    mut next: impl FnMut() -> Action,
) -> anyhow::Result<(Format, u64)> {
    let format = output_format(&out.output, out.format)?;
    out.header.apply(header, format, &out.output)?;
    let written = (|| {
        let mut w = RecordWriter::new(create(&out.output, &[])?, format, header)
            .with_context(|| format!("writing {}", out.output.display()))?;
        for _ in 0..out.count {
            w.write(next())
                .with_context(|| format!("writing {}", out.output.display()))?;
        }
        let records = w.records_written();
        w.finish()
            .with_context(|| format!("writing {}", out.output.display()))?
            .commit()?;
        Ok((format, records))
    })();
    written
}

/// The `--json` summary of `rtemu trace gen`.
#[derive(Debug, serde::Serialize)]
struct GenSummary<'a> {
    /// The generator: fgn, onoff, iid or netem.
    kind: &'static str,
    /// Records written.
    records: u64,
    output: String,
    /// The output's form: raw, framed or text.
    format: &'static str,
    seed: u64,
    /// The generator's parameters as it used them (durations in ns).
    parameters: serde_json::Value,
    /// What the generator reports about its run (clamped delays, dropped probes, …).
    outcome: serde_json::Value,
    /// The command line that regenerates the trace, after the text of `--provenance` if given
    /// (also in a framed output's header).
    provenance: &'a str,
    /// The flow pattern of a framed output's header (`--flow`).
    #[serde(skip_serializing_if = "Option::is_none")]
    flow: Option<String>,
}

/// Prints what `rtemu trace gen` wrote (`written`: the output's form and its records): the
/// JSON summary, or `note` on stderr.
fn report_generated(
    out: &OutputArgs,
    written: (Format, u64),
    header: &Header,
    kind: &'static str,
    parameters: serde_json::Value,
    outcome: serde_json::Value,
    note: std::fmt::Arguments,
) -> anyhow::Result<()> {
    let summary = GenSummary {
        kind,
        records: written.1,
        output: out.output.display().to_string(),
        format: written.0.name(),
        seed: out.seed,
        parameters,
        outcome,
        provenance: &header.provenance,
        flow: header.flow.map(|f| f.to_string()),
    };
    if out.json {
        print_json(&summary)?;
    } else {
        eprintln!(
            "rtemu: wrote {} records to {} ({note})",
            summary.records, summary.output
        );
    }
    Ok(())
}

fn gen_fgn(a: &FgnArgs) -> anyhow::Result<()> {
    let mean = duration("mean", &a.mean)?;
    let std = duration("std", &a.std)?;
    // A trace that fits in one block is exact throughout.
    let block = a.block.min(a.out.count.max(2).next_power_of_two() as usize);
    let fgn = Fgn::new(a.hurst, block, a.out.seed).context("--hurst/--block")?;
    let mut delays = FgnDelays::new(fgn, mean as f64, std as f64, 1_000)?;
    let mut header = Header {
        unit: TimeUnit::Us,
        flow: None,
        provenance: format!(
            "rtemu trace gen fgn --hurst {} --mean {} --std {} --count {} --seed {} --block {block}",
            a.hurst,
            format_duration(mean),
            format_duration(std),
            a.out.count,
            a.out.seed
        ),
    };
    let (format, records) = write_generated(&a.out, &mut header, || Action::Pass {
        delay_ns: delays.next_delay_ns(),
    })?;
    let clamped = delays.clamped();
    report_generated(
        &a.out,
        (format, records),
        &header,
        "fgn",
        serde_json::json!({
            "hurst": a.hurst,
            "mean_ns": mean,
            "std_ns": std,
            "block": block,
        }),
        serde_json::json!({ "clamped_negative_delays": clamped }),
        format_args!("{clamped} negative delays clamped to 0"),
    )
}

fn gen_onoff(a: &OnOffArgs) -> anyhow::Result<()> {
    let cfg = OnOffConfig {
        sources: a.sources,
        alpha: a.alpha,
        mean_on_ns: duration("mean-on", &a.mean_on)? as f64,
        mean_off_ns: duration("mean-off", &a.mean_off)? as f64,
        source_rate_bps: a.source_rate,
        link_rate_bps: a.link_rate,
        buffer_bytes: a.buffer,
        probe_bytes: a.probe,
        interval_ns: duration("interval", &a.interval)?,
        base_delay_ns: duration("base", &a.base)?,
        resolution_ns: 1_000,
    };
    let mut g = OnOffDelays::new(cfg, a.out.seed)?;
    let mut header = Header {
        unit: TimeUnit::Us,
        flow: None,
        provenance: format!(
            "rtemu trace gen onoff --sources {} --alpha {} --mean-on {} --mean-off {} --source-rate {} --link-rate {} --buffer {} --probe {} --interval {} --base {} --count {} --seed {}",
            a.sources, a.alpha, a.mean_on, a.mean_off, a.source_rate, a.link_rate, a.buffer,
            a.probe, a.interval, a.base, a.out.count, a.out.seed
        ),
    };
    let (format, records) = write_generated(&a.out, &mut header, || g.next_action())?;
    report_generated(
        &a.out,
        (format, records),
        &header,
        "onoff",
        serde_json::json!({
            "sources": cfg.sources,
            "alpha": cfg.alpha,
            "mean_on_ns": cfg.mean_on_ns,
            "mean_off_ns": cfg.mean_off_ns,
            "source_rate_bps": cfg.source_rate_bps,
            "link_rate_bps": cfg.link_rate_bps,
            "buffer_bytes": cfg.buffer_bytes,
            "probe_bytes": cfg.probe_bytes,
            "interval_ns": cfg.interval_ns,
            "base_delay_ns": cfg.base_delay_ns,
        }),
        serde_json::json!({
            "offered_load": cfg.load(),
            "target_hurst": cfg.hurst(),
            "probes_dropped": g.dropped(),
        }),
        format_args!(
            "offered load {:.3}, target H {:.2}, {} probes dropped",
            cfg.load(),
            cfg.hurst(),
            g.dropped()
        ),
    )
}

fn gen_iid(a: &IidArgs) -> anyhow::Result<()> {
    let mean = duration("mean", &a.mean)?;
    let std = duration("std", &a.std)?;
    let loss = a
        .ge_p
        .map(|p| GilbertElliott::new(p, a.ge_r, a.ge_loss_good, a.ge_loss_bad))
        .transpose()?;
    let mut g = IidTrace::new(a.dist, mean as f64, std as f64, 1_000, loss, a.out.seed)?;
    let ge = match a.ge_p {
        Some(p) => format!(
            " --ge-p {p} --ge-r {} --ge-loss-good {} --ge-loss-bad {}",
            a.ge_r, a.ge_loss_good, a.ge_loss_bad
        ),
        None => String::new(),
    };
    let mut header = Header {
        unit: TimeUnit::Us,
        flow: None,
        provenance: format!(
            "rtemu trace gen iid --dist {:?} --mean {} --std {}{ge} --count {} --seed {}",
            a.dist, a.mean, a.std, a.out.count, a.out.seed
        )
        .to_lowercase(),
    };
    let (format, records) = write_generated(&a.out, &mut header, || g.next_action())?;
    let gilbert_elliott = a.ge_p.map(|p| {
        serde_json::json!({
            "p": p,
            "r": a.ge_r,
            "loss_good": a.ge_loss_good,
            "loss_bad": a.ge_loss_bad,
        })
    });
    report_generated(
        &a.out,
        (format, records),
        &header,
        "iid",
        serde_json::json!({
            "dist": format!("{:?}", a.dist).to_lowercase(),
            "mean_ns": mean,
            "std_ns": std,
            "gilbert_elliott": gilbert_elliott,
        }),
        serde_json::json!({ "clamped_negative_delays": g.clamped() }),
        format_args!("{} negative delays clamped to 0", g.clamped()),
    )
}

fn gen_netem(a: &NetemGenArgs) -> anyhow::Result<()> {
    use rtemu_model::{netem, LinkModel, Model, PacketMeta};
    anyhow::ensure!(a.pps > 0, "--pps must be at least 1");
    let cfg = netem::parse(&a.model).with_context(|| format!("--model {:?}", a.model))?;
    let tables = rtemu_sim::tables::FileTables::from_env();
    let mut model = LinkModel::new(&cfg, &tables, a.out.seed, 0).context("the model")?;
    let period_ns = 1_000_000_000 / a.pps;
    // One packet's records: its copies' fates (a `dup` before each further copy), or a drop.
    let mut pending: std::collections::VecDeque<Action> = std::collections::VecDeque::new();
    let (mut packets, mut written, mut dropped, mut duplicated) = (0u64, 0u64, 0u64, 0u64);
    let count = a.out.count;
    let next = || {
        if pending.is_empty() {
            let arrival_ns = packets * period_ns;
            let fate = model.decide(&PacketMeta {
                len: a.size,
                flow: Default::default(),
                arrival_ns,
                seq: packets,
            });
            packets += 1;
            let copies = fate.delivered.as_slice();
            if copies.is_empty() {
                dropped += 1;
                pending.push_back(Action::Drop);
            }
            for (i, d) in copies.iter().enumerate() {
                // To the microsecond, the raw form's unit (RplTrc's resolution).
                let delay_ns = (d.at_ns - arrival_ns + 500) / 1000 * 1000;
                let last = i + 1 == copies.len();
                duplicated += u64::from(!last);
                pending.push_back(if last {
                    Action::Pass { delay_ns }
                } else {
                    Action::Dup { delay_ns }
                });
            }
        }
        written += 1;
        let action = pending.pop_front().expect("refilled above");
        // The last record never announces a copy that the trace would not hold.
        match action {
            Action::Dup { delay_ns } if written == count => Action::Pass { delay_ns },
            other => other,
        }
    };
    let mut header = Header {
        unit: TimeUnit::Us,
        flow: None,
        provenance: format!(
            "rtemu trace gen netem --model {:?} --pps {} --size {} --count {} --seed {}",
            a.model, a.pps, a.size, count, a.out.seed
        ),
    };
    let (format, records) = write_generated(&a.out, &mut header, next)?;
    report_generated(
        &a.out,
        (format, records),
        &header,
        "netem",
        serde_json::json!({
            "model": a.model,
            "pps": a.pps,
            "size": a.size,
        }),
        serde_json::json!({
            "packets": packets,
            "dropped": dropped,
            "duplicated": duplicated,
        }),
        format_args!("{packets} packets, {dropped} dropped, {duplicated} duplicated"),
    )
}

fn open(path: &Path, format: Option<Format>) -> anyhow::Result<RecordReader<File>> {
    Ok(RecordReader::open(path, format)?)
}

/// Feeds every record of `r` to `f`, in blocks.
fn for_each(
    r: &mut RecordReader<File>,
    mut f: impl FnMut(Action) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut block = Vec::with_capacity(1 << 16);
    loop {
        block.clear();
        if r.read_block(&mut block, 1 << 16)? == 0 {
            return Ok(());
        }
        for &a in &block {
            f(a)?;
        }
    }
}

/// `rtemu trace stats`; an action trace's statistics go to `out`.
fn stats(a: &StatsArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let kind = stats_kind(a)?;
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
    if kind != TraceKind::Actions {
        return stats_other(a, kind);
    }
    let mut r = open(&a.file, a.format)?;
    let mut b = StatsBuilder::new(a.max_series);
    for_each(&mut r, |x| {
        b.add(x);
        Ok(())
    })?;
    let s = b.finish();
    if s.records == 0 {
        bail!("{}: the trace holds no records", a.file.display());
    }
    if let Some(path) = &a.plot {
        variance_time_chart(&a.file, &s)?.draw(path)?;
    }
    if a.json {
        // The statistics, and what the framed header says (null for other forms).
        let mut v = serde_json::to_value(&s)?;
        if let serde_json::Value::Object(fields) = &mut v {
            fields.insert("format".into(), r.format().name().into());
            fields.insert(
                "header".into(),
                r.header().map_or(serde_json::Value::Null, |h| {
                    serde_json::json!({
                        "unit": h.unit.to_string(),
                        "flow": h.flow.map(|f| f.to_string()),
                        "provenance": h.provenance,
                    })
                }),
            );
        }
        let text = serde_json::to_string_pretty(&v)?;
        writeln!(out, "{text}")?;
    } else {
        print_stats(out, &a.file, r.format(), r.header(), &s)?;
    }
    Ok(())
}

/// The variance-time plot of `s`: the variance of the block means of `m` delays against `m`,
/// on log-log axes, with the aggregated-variance fit (slope `2H − 2`) and, for comparison, the
/// slope −1 of a series without long-range dependence, both through the first point.
fn variance_time_chart(file: &Path, s: &TraceStats) -> anyhow::Result<plot::Chart> {
    let fit = s.hurst.iter().find(|h| h.method == "aggregated-variance");
    let (Some(fit), [first, .., last]) = (fit, &s.variance_time[..]) else {
        bail!(
            "--plot: {} delays are too few for a variance-time plot (at least 256)",
            s.series_len
        );
    };
    // Variances in ms².
    let ms2 = |v: f64| v / 1e12;
    let line = |slope: f64| {
        [first.0, last.0]
            .iter()
            .map(|&m| {
                (
                    m as f64,
                    ms2(first.1) * (m as f64 / first.0 as f64).powf(slope),
                )
            })
            .collect()
    };
    Ok(plot::Chart {
        title: format!("Variance-time plot: {}", file.display()),
        x: plot::Axis::log("aggregation level m (delays per block)"),
        y: plot::Axis::log("variance of the block means (ms²)"),
        series: vec![
            plot::Series {
                name: "measured".into(),
                points: s
                    .variance_time
                    .iter()
                    .map(|&(m, v)| (m as f64, ms2(v)))
                    .collect(),
                style: plot::Style::Points,
            },
            plot::Series {
                name: format!("aggregated-variance fit, H = {:.3}", fit.hurst),
                points: line(2.0 * fit.hurst - 2.0),
                style: plot::Style::Lines,
            },
            plot::Series {
                name: "H = 0.5 (slope −1)".into(),
                points: line(-1.0),
                style: plot::Style::Lines,
            },
        ],
        diagonal: false,
    })
}

/// Writes `text` with each line after the first indented by `indent` spaces.
fn write_indented(out: &mut impl Write, text: &str, indent: usize) -> io::Result<()> {
    for (i, line) in text.lines().enumerate() {
        if i > 0 {
            write!(out, "\n{:indent$}", "")?;
        }
        write!(out, "{line}")?;
    }
    writeln!(out)
}

fn ms(ns: f64) -> String {
    format!("{:.3} ms", ns / 1e6)
}

fn print_stats(
    out: &mut impl Write,
    path: &Path,
    format: Format,
    header: Option<&Header>,
    s: &TraceStats,
) -> io::Result<()> {
    writeln!(out, "{} ({} form)", path.display(), format.name())?;
    if let Some(h) = header {
        match h.flow {
            Some(f) => writeln!(out, "flow        {f}")?,
            None => writeln!(out, "flow        none (the trace names no flow)")?,
        }
        write!(out, "provenance  ")?;
        write_indented(out, &h.provenance, 12)?;
        writeln!(out, "unit        {}", h.unit)?;
    }
    writeln!(
        out,
        "records     {}   pass {}   drop {} ({:.4} %)   dup {} ({:.4} %)",
        s.records,
        s.passes,
        s.drops,
        100.0 * s.drop_fraction,
        s.dups,
        100.0 * s.dup_fraction
    )?;
    if let Some(d) = &s.delay {
        writeln!(
            out,
            "delay       mean {}   std {}   min {}   max {}",
            ms(d.mean_ns),
            ms(d.std_ns),
            ms(d.min_ns as f64),
            ms(d.max_ns as f64)
        )?;
        let p: Vec<String> = d
            .percentiles_ns
            .iter()
            .map(|(p, v)| format!("p{p} {}", ms(*v as f64)))
            .collect();
        writeln!(out, "percentiles {}", p.join("   "))?;
    }
    let ac: Vec<String> = s
        .autocorrelation
        .iter()
        .map(|(lag, r)| format!("lag {lag}: {r:.4}"))
        .collect();
    writeln!(
        out,
        "autocorr.   {}   (first {} delays)",
        ac.join("   "),
        s.series_len
    )?;
    for h in &s.hurst {
        writeln!(
            out,
            "Hurst       {:.3}  {} (scales {}..{}, {} points)",
            h.hurst, h.method, h.fit_min, h.fit_max, h.points
        )?;
    }
    if s.hurst.is_empty() {
        let why = if s.series_len < 128 {
            "too few delays (need 128)"
        } else {
            "the delays are constant"
        };
        writeln!(out, "Hurst       no estimate: {why}")?;
    }
    Ok(())
}

/// The `--json` summary of `rtemu trace convert`.
#[derive(Debug, serde::Serialize)]
struct ConvertSummary {
    input: String,
    /// The input's form: raw, framed or text for a trace, `series` with --series-pps,
    /// `capture` with --receiver.
    input_format: String,
    output: String,
    /// The output's form: raw, framed or text.
    output_format: &'static str,
    /// Time unit of a framed output's header.
    #[serde(skip_serializing_if = "Option::is_none")]
    unit: Option<String>,
    /// Flow pattern of a framed output's header (`--flow`, or the input's).
    #[serde(skip_serializing_if = "Option::is_none")]
    flow: Option<String>,
    /// Provenance of a framed output's header.
    #[serde(skip_serializing_if = "Option::is_none")]
    provenance: Option<String>,
    /// Records written.
    records: u64,
    /// With --series-pps: the packet rate and the interpolation.
    #[serde(skip_serializing_if = "Option::is_none")]
    series: Option<serde_json::Value>,
    /// With --receiver: the receiver capture and what matching the two captures found.
    #[serde(skip_serializing_if = "Option::is_none")]
    captures: Option<serde_json::Value>,
}

impl ConvertSummary {
    fn new(a: &ConvertArgs, input_format: &str, to: Format, header: &Header, records: u64) -> Self {
        let framed = to == Format::Framed;
        ConvertSummary {
            input: a.input.display().to_string(),
            input_format: input_format.to_owned(),
            output: a.output.display().to_string(),
            output_format: to.name(),
            unit: framed.then(|| header.unit.to_string()),
            flow: header.flow.filter(|_| framed).map(|f| f.to_string()),
            provenance: framed.then(|| header.provenance.clone()),
            records,
            series: None,
            captures: None,
        }
    }

    /// Prints the summary as JSON on stdout.
    fn print(&self) -> anyhow::Result<()> {
        print_json(self)
    }
}

fn convert(a: &ConvertArgs) -> anyhow::Result<()> {
    let to = output_format(&a.output, a.to)?;
    let unit = match a.unit.as_deref() {
        None => None,
        Some("ns") => Some(TimeUnit::Ns),
        Some("us" | "µs") => Some(TimeUnit::Us),
        Some("ms") => Some(TimeUnit::Ms),
        Some(u) => bail!("--unit {u:?}: valid units are ns, us, ms"),
    };
    let out = a.output.display().to_string();
    if let Some(receiver) = &a.receiver {
        return convert_captures(a, receiver, to, unit.unwrap_or(TimeUnit::Us));
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
        // Round to what the output form holds exactly: µs for raw, the unit for framed.
        let resolution = match to {
            Format::Raw => TimeUnit::Us.ns(),
            Format::Framed => header.unit.ns(),
            Format::Text => 1,
        };
        let mut w = RecordWriter::new(create(&a.output, &[&a.input])?, to, &header)?;
        for x in actions_at_rate(series, pps, resolution) {
            w.write(x?).with_context(|| format!("writing {out}"))?;
        }
        let n = w.records_written();
        w.finish()
            .with_context(|| format!("writing {out}"))?
            .commit()?;
        if a.json {
            let mut summary = ConvertSummary::new(a, "series", to, &header, n);
            summary.series = Some(serde_json::json!({
                "packets_per_second": pps,
                "interpolation": format!("{:?}", a.interp).to_lowercase(),
            }));
            return summary.print();
        }
        eprintln!("rtemu: wrote {n} records to {out} ({} form)", to.name());
        return Ok(());
    }
    let mut r = open(&a.input, a.from)?;
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
    let mut w = RecordWriter::new(create(&a.output, &[&a.input])?, to, &header)?;
    for_each(&mut r, |x| {
        w.write(x).with_context(|| format!("writing {out}"))?;
        Ok(())
    })?;
    let n = w.records_written();
    w.finish()
        .with_context(|| format!("writing {out}"))?
        .commit()?;
    if a.json {
        return ConvertSummary::new(a, r.format().name(), to, &header, n).print();
    }
    eprintln!("rtemu: converted {n} records to {out} ({} form)", to.name());
    Ok(())
}

/// `convert SENDER.pcap OUT --receiver RECEIVER.pcap`: the action trace two captures imply.
fn convert_captures(
    a: &ConvertArgs,
    receiver: &Path,
    to: Format,
    unit: TimeUnit,
) -> anyhow::Result<()> {
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
    // Round to what the output form holds exactly: µs for raw, the unit for framed.
    let r = match to {
        Format::Raw => TimeUnit::Us.ns(),
        Format::Framed => unit.ns(),
        Format::Text => 1,
    };
    let round = |d: u64| (d + r / 2) / r * r;
    let mut w = RecordWriter::new(create(&a.output, &[&a.input, receiver])?, to, &header)?;
    let mut write_error = None;
    let mut receiver_capture = CaptureReader::open(receiver)
        .with_context(|| format!("receiver capture {}", receiver.display()))?;
    let stats = actions_from_captures(
        || Ok(Box::new(CaptureReader::open(&a.input)?) as Box<dyn FrameSource>),
        &mut receiver_capture,
        |action| {
            let action = match action {
                Action::Pass { delay_ns } => Action::Pass {
                    delay_ns: round(delay_ns),
                },
                Action::Dup { delay_ns } => Action::Dup {
                    delay_ns: round(delay_ns),
                },
                Action::Drop => Action::Drop,
            };
            if write_error.is_none() {
                write_error = w.write(action).err();
            }
        },
    )?;
    if let Some(e) = write_error {
        return Err(e).with_context(|| format!("writing {out}"));
    }
    let n = w.records_written();
    w.finish()
        .with_context(|| format!("writing {out}"))?
        .commit()?;
    if a.json {
        let mut summary = ConvertSummary::new(a, "capture", to, &header, n);
        summary.captures = Some(serde_json::json!({
            "receiver": receiver.display().to_string(),
            "sent": stats.sent,
            "delivered": stats.delivered,
            "dropped": stats.dropped,
            "duplicates": stats.duplicates,
            "unmatched": stats.unmatched,
            "negative_delays": stats.negative_delays,
        }));
        return summary.print();
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

/// `rtemu trace cat`: the text form on `out`. A framed header's flow, provenance and unit come
/// first as `#` comments, so the output is still a text trace.
fn cat(a: &CatArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let mut r = open(&a.file, a.format)?;
    if let Some(h) = r.header() {
        match h.flow {
            Some(f) => writeln!(out, "# flow: {f}")?,
            None => writeln!(out, "# flow: none")?,
        }
        for (i, line) in h.provenance.lines().enumerate() {
            let label = if i == 0 { "provenance:" } else { "           " };
            writeln!(out, "# {label} {line}")?;
        }
        writeln!(out, "# unit: {}", h.unit)?;
    }
    for_each(&mut r, |x| {
        rtemu_trace::text::write_action(&mut *out, x)?;
        Ok(())
    })?;
    out.flush()?;
    Ok(())
}

#[derive(Debug, serde::Serialize)]
struct BenchPass {
    pass: String,
    records: u64,
    underruns: u64,
    seconds: f64,
    records_per_second: f64,
    /// Of 4-byte words: the raw form's bytes.
    megabytes_per_second: f64,
}

/// The most records a `trace bench` ring may hold (256 MiB of actions).
const BENCH_RING_RECORDS: u64 = 1 << 24;

/// The longest a paced `trace bench` may run.
const BENCH_PACED_NS: u64 = 600_000_000_000;

fn bench(a: &BenchArgs) -> anyhow::Result<()> {
    let bytes = std::fs::metadata(&a.file)
        .with_context(|| format!("reading {}", a.file.display()))?
        .len();
    if a.blocks * a.block_records > BENCH_RING_RECORDS {
        bail!(
            "--blocks {} × --block-records {} is {} records in the ring: at most \
             {BENCH_RING_RECORDS} (256 MiB); lower either",
            a.blocks,
            a.block_records,
            a.blocks * a.block_records
        );
    }
    if let Some(rate) = a.pace {
        // Every record takes at least 4 bytes in any form, so this bounds the records read.
        let records = a.limit.unwrap_or(u64::MAX).min(bytes / 4);
        let passes = 1 + u64::from(a.warm_passes);
        let ns = u128::from(records) * u128::from(passes) * 1_000_000_000 / u128::from(rate);
        if ns > u128::from(BENCH_PACED_NS) {
            bail!(
                "--pace {rate} over up to {records} records × {passes} passes would take up to \
                 {:.0} s, more than the {} s a paced run may take: raise --pace, or bound each \
                 pass with --limit",
                ns as f64 / 1e9,
                BENCH_PACED_NS / 1_000_000_000
            );
        }
    }
    let mut passes = Vec::new();
    let labels = std::iter::once(if a.cold { "cold" } else { "first" })
        .chain(std::iter::repeat_n("warm", a.warm_passes as usize));
    for label in labels {
        if label == "cold" {
            rtemu_trace::cache::evict(&a.file)
                .with_context(|| format!("dropping {} from the page cache", a.file.display()))?;
        }
        let cfg = PrefetchConfig {
            block_records: a.block_records as usize,
            blocks: a.blocks as usize,
            underrun: a.underrun,
            end: EndPolicy::Stop,
            ..PrefetchConfig::default()
        };
        let start = Instant::now();
        let mut p = Prefetcher::open(&a.file, None, cfg)?;
        p.prime()?;
        // A paced consumer starts its schedule once records are ready, as a link would.
        let schedule = Instant::now();
        // Sum the delays so the loop cannot be optimised away, and as a checksum.
        let mut sum = 0u64;
        let mut taken = 0u64;
        while a.limit.is_none_or(|l| taken < l) {
            if let Some(rate) = a.pace {
                let due = schedule
                    + Duration::from_nanos(
                        (u128::from(taken) * 1_000_000_000 / u128::from(rate)) as u64,
                    );
                while Instant::now() < due {
                    std::hint::spin_loop();
                }
            }
            let Some(x) = p.next_action()? else { break };
            sum = sum.wrapping_add(x.delay_ns().unwrap_or(1));
            taken += 1;
        }
        let seconds = start.elapsed().as_secs_f64();
        let records = p.counters().records;
        std::hint::black_box(sum);
        passes.push(BenchPass {
            pass: label.to_owned(),
            records,
            underruns: p.counters().underruns,
            seconds,
            records_per_second: records as f64 / seconds,
            megabytes_per_second: records as f64 * 4.0 / seconds / 1e6,
        });
    }
    if a.json {
        return print_json(&passes);
    }
    println!(
        "{}: {} bytes; prefetch blocks of {} records x {}; under-run policy {}; pace {}",
        a.file.display(),
        bytes,
        a.block_records,
        a.blocks,
        a.underrun,
        a.pace
            .map_or("unlimited".to_owned(), |r| format!("{r} records/s"))
    );
    if a.cold {
        println!(
            "cold pass: file dropped from the page cache first (fsync + posix_fadvise DONTNEED)"
        );
    }
    for p in &passes {
        println!(
            "{:<6} {:>12} records in {:>8.3} s: {:>8.1} M records/s, {:>7.1} MB/s, {} under-runs",
            p.pass,
            p.records,
            p.seconds,
            p.records_per_second / 1e6,
            p.megabytes_per_second,
            p.underruns
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        trace: TraceArgs,
    }

    fn rtemu_trace(args: &[&str]) -> anyhow::Result<()> {
        let cli = Cli::try_parse_from(std::iter::once("trace").chain(args.iter().copied()))?;
        run(&cli.trace)
    }

    /// A scratch directory removed when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Scratch {
            let dir =
                std::env::temp_dir().join(format!("rtemu-trace-{name}-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            Scratch(dir)
        }

        fn path(&self, file: &str) -> String {
            self.0.join(file).to_str().unwrap().to_owned()
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn records(path: &str) -> Vec<Action> {
        let mut r = RecordReader::open(Path::new(path), None).unwrap();
        let mut out = Vec::new();
        while r.read_block(&mut out, 1 << 16).unwrap() > 0 {}
        out
    }

    #[test]
    fn generated_traces_are_reproducible_and_convert_losslessly() {
        let d = Scratch::new("gen");
        let (a, b, c) = (d.path("a.rpl"), d.path("b.rpl"), d.path("c.rpl"));
        let gen = |out: &str, seed: &str| {
            rtemu_trace(&[
                "gen", "fgn", "--hurst", "0.7", "--mean", "5ms", "--std", "1ms", "--count", "5000",
                "--seed", seed, "-o", out,
            ])
        };
        gen(&a, "7").unwrap();
        gen(&b, "7").unwrap();
        gen(&c, "8").unwrap();
        let bytes = std::fs::read(&a).unwrap();
        assert_eq!(bytes.len(), 5000 * 4);
        assert_eq!(bytes, std::fs::read(&b).unwrap());
        assert_ne!(bytes, std::fs::read(&c).unwrap());
        let (txt, rplx, back) = (d.path("a.txt"), d.path("a.rplx"), d.path("back.rpl"));
        rtemu_trace(&["convert", &a, &txt]).unwrap();
        rtemu_trace(&["convert", &txt, &rplx, "--unit", "ns"]).unwrap();
        rtemu_trace(&["convert", &rplx, &back]).unwrap();
        assert_eq!(records(&txt), records(&a));
        assert_eq!(records(&rplx), records(&a));
        assert_eq!(std::fs::read(&back).unwrap(), bytes);
        let onoff = d.path("o.rplx");
        rtemu_trace(&["gen", "onoff", "--count", "3000", "-o", &onoff]).unwrap();
        assert_eq!(records(&onoff).len(), 3000);
        let iid = d.path("i.txt");
        rtemu_trace(&[
            "gen", "iid", "--dist", "constant", "--mean", "2ms", "--ge-p", "1", "--ge-r", "0",
            "--count", "3", "-o", &iid,
        ])
        .unwrap();
        // Good to Bad at once and never back, all lost in Bad.
        assert_eq!(records(&iid), vec![Action::Drop; 3]);
    }

    #[test]
    fn other_kinds_load_and_bad_ones_say_where() {
        let d = Scratch::new("kinds");
        let mm = d.path("trace.down");
        // A Mahimahi trace exactly as its tools write them.
        std::fs::write(&mm, "1\n1\n2\n4\n").unwrap();
        rtemu_trace(&["stats", "--kind", "mahimahi", &mm]).unwrap();
        std::fs::write(&mm, "1\n3\n2\n").unwrap();
        let e = format!(
            "{:#}",
            rtemu_trace(&["stats", "--kind", "mahimahi", &mm]).unwrap_err()
        );
        assert!(e.contains("trace.down: line 3, column 1"), "{e}");
        let series = d.path("probe.txt");
        std::fs::write(&series, "0 10\n1 12 1\n0.5 11\n").unwrap();
        let e = format!(
            "{:#}",
            rtemu_trace(&["stats", "--kind", "series", &series]).unwrap_err()
        );
        assert!(
            e.contains("probe.txt: line 3, column 1") && e.contains("backwards"),
            "{e}"
        );
    }

    #[test]
    fn bad_inputs_are_errors_naming_the_file() {
        let d = Scratch::new("bad");
        let bad = d.path("bad.rpl");
        std::fs::write(&bad, [0x40, 0, 0, 1, 0xc0]).unwrap();
        let e = format!("{:#}", rtemu_trace(&["stats", &bad]).unwrap_err());
        assert!(e.contains("bad.rpl: 1 stray byte(s) at byte 4"), "{e}");
        let empty = d.path("empty.rpl");
        std::fs::write(&empty, []).unwrap();
        let e = format!("{:#}", rtemu_trace(&["stats", &empty]).unwrap_err());
        assert!(e.contains("holds no records"), "{e}");
        let e = rtemu_trace(&["gen", "fgn", "--hurst", "1.5", "-o", &d.path("x.rpl")]).unwrap_err();
        assert!(format!("{e:#}").contains("outside (0, 1)"), "{e:#}");
        let e = rtemu_trace(&["convert", &bad, &d.path("x.dat")]).unwrap_err();
        assert!(format!("{e:#}").contains("--format"), "{e:#}");
    }

    /// Runs `rtemu trace stats|cat ARGS`, returning what it writes.
    fn output_of(args: &[&str]) -> String {
        let cli =
            Cli::try_parse_from(std::iter::once("trace").chain(args.iter().copied())).unwrap();
        let mut out = Vec::new();
        match &cli.trace.command {
            TraceCommand::Stats(a) => stats(a, &mut out).unwrap(),
            TraceCommand::Cat(a) => cat(a, &mut out).unwrap(),
            c => panic!("not stats or cat: {c:?}"),
        }
        String::from_utf8(out).unwrap()
    }

    fn header_of(path: &str) -> Header {
        RecordReader::open(Path::new(path), None)
            .unwrap()
            .header()
            .cloned()
            .unwrap()
    }

    #[test]
    fn a_flow_and_provenance_go_into_the_framed_header_and_come_back_out() {
        let d = Scratch::new("flow");
        let a = d.path("a.rplx");
        rtemu_trace(&[
            "gen",
            "fgn",
            "--count",
            "300",
            "--seed",
            "3",
            "--flow",
            "dst=10.1.2.3/16  proto=UDP",
            "--provenance",
            "lab path A",
            "-o",
            &a,
        ])
        .unwrap();
        let flow = "dst=10.1.0.0/16 proto=udp";
        let h = header_of(&a);
        assert_eq!(h.flow, Some(flow.parse().unwrap()));
        assert!(
            h.provenance
                .starts_with("lab path A; rtemu trace gen fgn --hurst 0.8"),
            "{}",
            h.provenance
        );
        // `stats` shows them, as text and as JSON.
        let text = output_of(&["stats", &a]);
        assert!(text.contains(&format!("\nflow        {flow}\n")), "{text}");
        assert!(
            text.contains("\nprovenance  lab path A; rtemu trace gen fgn"),
            "{text}"
        );
        let v: serde_json::Value =
            serde_json::from_str(&output_of(&["stats", &a, "--json"])).unwrap();
        assert_eq!(v["records"], 300);
        assert_eq!(v["format"], "framed");
        assert_eq!(v["header"]["flow"], flow);
        assert_eq!(v["header"]["unit"], "us");
        assert_eq!(v["header"]["provenance"], h.provenance.as_str());
        // `cat` shows them as comments, so its output is still a text trace of the records.
        let cat = output_of(&["cat", &a]);
        assert!(
            cat.starts_with(&format!(
                "# flow: {flow}\n# provenance: {}\n# unit: us\npass ",
                h.provenance
            )),
            "{cat}"
        );
        let txt = d.path("a.txt");
        std::fs::write(&txt, &cat).unwrap();
        assert_eq!(records(&txt), records(&a));
        // `convert` keeps the input's flow, or sets a new one, and puts provenance first.
        let (b, c) = (d.path("b.rplx"), d.path("c.rplx"));
        rtemu_trace(&["convert", &a, &b, "--unit", "ns"]).unwrap();
        assert_eq!(header_of(&b).flow, h.flow);
        assert_eq!(header_of(&b).provenance, h.provenance);
        rtemu_trace(&[
            "convert",
            &b,
            &c,
            "--flow",
            "sport=5000-5999",
            "--provenance",
            "copy",
        ])
        .unwrap();
        let hc = header_of(&c);
        assert_eq!(hc.flow, Some("sport=5000-5999".parse().unwrap()));
        assert_eq!(hc.provenance, format!("copy; {}", h.provenance));
        assert_eq!(records(&c), records(&a));
        // A series converted to a framed trace takes a flow too.
        let series = d.path("probe.series");
        std::fs::write(&series, "0 10\n1 12\n").unwrap();
        let s = d.path("s.rplx");
        rtemu_trace(&[
            "convert",
            &series,
            &s,
            "--series-pps",
            "10",
            "--flow",
            "proto=tcp",
        ])
        .unwrap();
        assert_eq!(header_of(&s).flow, Some("proto=tcp".parse().unwrap()));
        // Raw and text forms have no header: asking for one is an error, and nothing is written.
        let raw = d.path("x.rpl");
        let e = rtemu_trace(&[
            "gen",
            "iid",
            "--count",
            "5",
            "--flow",
            "proto=udp",
            "-o",
            &raw,
        ])
        .unwrap_err();
        let e = format!("{e:#}");
        assert!(
            e.contains("--flow can only be stored in the header of the framed form")
                && e.contains("raw form"),
            "{e}"
        );
        assert!(!Path::new(&raw).exists());
        let e = rtemu_trace(&["convert", &a, &d.path("y.txt"), "--provenance", "p"]).unwrap_err();
        assert!(format!("{e:#}").contains("--provenance can only"), "{e:#}");
        // A bad pattern is refused with the column of the bad field.
        let e = rtemu_trace(&["gen", "fgn", "--flow", "proto=udp port=1", "-o", &a]).unwrap_err();
        assert!(format!("{e:#}").contains("column 11"), "{e:#}");
        // Other forms show no header.
        let plain = d.path("plain.rpl");
        rtemu_trace(&["convert", &a, &plain]).unwrap();
        assert!(!output_of(&["stats", &plain]).contains("\nflow "));
        assert!(!output_of(&["cat", &plain]).starts_with('#'));
    }

    #[test]
    fn output_form_follows_the_extension_or_the_flag() {
        assert_eq!(
            output_format(Path::new("a.rpl"), None).unwrap(),
            Format::Raw
        );
        assert_eq!(
            output_format(Path::new("a.dat"), Some(Format::Text)).unwrap(),
            Format::Text
        );
        let e = output_format(Path::new("a.dat"), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--format raw|framed|text"), "{e}");
    }
}
