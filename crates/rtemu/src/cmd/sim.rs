//! `rtemu sim`: run a link model in virtual time over a capture or generated traffic.

use std::io::Write;
use std::path::PathBuf;

use rtemu_control::assemble::{TraceKind, TraceOptions};
use rtemu_control::sim;
use rtemu_model::rng::DEFAULT_SEED;
use rtemu_report::progress::RunBar;
use rtemu_sim::traffic::TRAFFIC_HELP;
use rtemu_trace::prefetch::{EndPolicy, UnderrunPolicy};
use rtemu_trace::series::Interpolation;

/// Run a link model in virtual time, as fast as the CPU allows.
///
/// Reads frames from a pcap/pcapng file (arrival = capture timestamp) or from the built-in
/// traffic generator, decides each frame's fate with the model, and writes the delivered frames
/// (duplicates included, corrupted bits flipped) to a pcap stamped with their delivery times.
/// The same seed gives byte-identical outputs.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  rtemu sim
      the built-in traffic and model, printing the report
  rtemu sim in.pcap --model \"delay 20ms 5ms loss 1%\" --seed 7 --out out.pcap --log fates.csv
  rtemu sim --traffic \"cbr 10000pps 1000B 10s\" --model \"rate 10mbit limit 100\" --json
  rtemu sim --traffic \"poisson 10000pps 64B,1500B 10s\" --model-file link.toml --out out.pcap
  rtemu sim in.pcap --trace delays.rpl --model \"rate 10mbit\" --out out.pcap
  rtemu sim --traffic \"cbr 1000000pps 64B 100s\" --trace lrd.rpl --end stop --json
  rtemu sim in.pcap --flow-trace \"proto=udp dport=5004=video.rpl\" --model \"delay 10ms\"

Model syntax (netem's): delay TIME [JITTER [CORR]] distribution uniform|normal|pareto|paretonormal|TABLE
  loss [random] P [CORR] | loss state P13 [P31 [P32 [P23 [P14]]]] | loss gemodel P [R [1-H [1-K]]]
  duplicate P [CORR]  corrupt P [CORR]  ber RATE  reorder P [CORR] [gap N]
  rate RATE [OVERHEAD [CELLSIZE [CELLOVERHEAD]]]  limit PACKETS  limit-bytes SIZE  ordered  tables exact|netem
Jitter is uniform unless a distribution is named (netem's default). rtemu's distributions have their
real tails; `tables netem` uses iproute2's tables, clipped as netem's are. `limit` bounds only the
rate queue: a delay alone never drops.")]
pub struct SimArgs {
    /// Input capture (pcap or pcapng). Without it, --traffic generates the input.
    pub input: Option<PathBuf>,

    /// Generated traffic: `cbr|poisson|onoff RATE SIZES DURATION [on TIME off TIME [exp]]`
    /// (--help shows the grammar). Default when no input is given: "cbr 1000pps 1000B 10s".
    #[arg(long, conflicts_with = "input", long_help = TRAFFIC_HELP)]
    pub traffic: Option<String>,

    /// The link model in netem syntax. Default: "delay 20ms 5ms distribution normal loss 1% rate
    /// 10mbit", or an ideal link under --trace.
    #[arg(long, short = 'm', conflicts_with = "model_file")]
    pub model: Option<String>,

    /// The link model as a TOML or JSON file (the structured form of the netem fields, held
    /// to the same rules): a regular file of at most 1 MiB.
    #[arg(long)]
    pub model_file: Option<PathBuf>,

    /// Draw from the random streams of this link of a lab (its name in the topology file), so
    /// the simulator decides as the real-time engine did for the same frames and seed.
    #[arg(long, value_name = "LINK")]
    pub link: Option<String>,

    /// With --link: the direction, `a-b` (from the link's first endpoint) or `b-a`.
    #[arg(long, value_name = "DIR", requires = "link", value_parser = ["a-b", "b-a"], default_value = "a-b")]
    pub dir: String,

    /// Seed of every random decision. The same seed gives the same output.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    pub seed: u64,

    /// Write delivered frames to this pcap (nanosecond timestamps).
    #[arg(long, short = 'o')]
    pub out: Option<PathBuf>,

    /// Write every decision to this file: CSV, or JSON lines if it ends in .jsonl/.json.
    #[arg(long)]
    pub log: Option<PathBuf>,

    /// Drive the link from a trace: a per-packet action trace (.rpl raw RplTrc words, .rplx
    /// with a header, or the text form), a delay/loss time series, or a Mahimahi
    /// delivery-opportunity trace. The trace decides drop, duplication and delay; --model may
    /// add rate, limit, corrupt, ber and ordered.
    #[arg(long, conflicts_with = "model_file")]
    pub trace: Option<PathBuf>,

    /// A trace for one flow: `PATTERN=FILE`, e.g. "proto=udp dport=5000=voice.rpl" (the last
    /// `=` separates the file). Repeatable; the first matching pattern wins, other packets use
    /// --trace or the model.
    #[arg(long = "flow-trace", value_name = "PATTERN=FILE")]
    pub flow_traces: Vec<String>,

    /// What a trace file holds; by default the extension decides (.rpl, .rplx, .txt/.rplt:
    /// actions; .series: time series; .up/.down/.mahimahi: delivery opportunities), and for
    /// other names the content (action traces only).
    #[arg(long, value_enum, default_value_t = TraceKindArg::Auto)]
    pub trace_kind: TraceKindArg,

    /// When a trace has no record ready: `wait` (the simulator's default, so results never
    /// depend on the disk), `pass`, `drop` or `hold-last`.
    #[arg(long, default_value = "wait")]
    pub underrun: UnderrunPolicy,

    /// After an action trace's last record: `loop`, `stop` (end the run) or `pass`.
    #[arg(long, default_value = "loop")]
    pub end: EndPolicy,

    /// How a time series gives the delay between samples: `step` or `linear`.
    #[arg(long, default_value = "step")]
    pub interpolation: Interpolation,

    /// Print the summary as JSON instead of a table.
    #[arg(long)]
    pub json: bool,

    /// Never show a progress bar.
    #[arg(long)]
    pub no_progress: bool,
}

/// What a trace file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TraceKindArg {
    /// Decide from the file name, then from the content.
    Auto,
    /// Raw RplTrc words.
    Rpl,
    /// RplTrc words behind a header.
    Rplx,
    /// The text form of an action trace.
    Text,
    /// A delay/loss time series (`time delay [lost]`).
    Series,
    /// A Mahimahi delivery-opportunity trace.
    Mahimahi,
}

impl From<TraceKindArg> for TraceKind {
    fn from(kind: TraceKindArg) -> TraceKind {
        match kind {
            TraceKindArg::Auto => TraceKind::Auto,
            TraceKindArg::Rpl => TraceKind::Rpl,
            TraceKindArg::Rplx => TraceKind::Rplx,
            TraceKindArg::Text => TraceKind::Text,
            TraceKindArg::Series => TraceKind::Series,
            TraceKindArg::Mahimahi => TraceKind::Mahimahi,
        }
    }
}

/// Runs `rtemu sim`.
pub fn run(args: &SimArgs) -> anyhow::Result<()> {
    let request = sim::Request {
        input: args.input.as_deref(),
        traffic: args.traffic.as_deref(),
        model: args.model.as_deref(),
        model_file: args.model_file.as_deref(),
        flow_traces: &args.flow_traces,
        trace: args.trace.as_deref(),
        trace_kind: TraceKind::from(args.trace_kind),
        options: TraceOptions {
            seed: args.seed,
            underrun: args.underrun,
            end: args.end,
            interpolation: args.interpolation,
        },
        link: args.link.as_deref().map(|link| (link, args.dir == "b-a")),
        out: args.out.as_deref(),
        log: args.log.as_deref(),
    };
    let run = sim::Run::new(&request)?;
    let bar = RunBar::new(!args.no_progress && !args.json);
    let report = run.run(&mut |p| bar.show(p))?;
    bar.finish();
    // An empty output is a result (a link that loses everything), but not one to take for a
    // run that delivered: said apart, as `capture -w` says a capture of nothing.
    if let (Some(path), 0) = (&args.out, report.summary.delivered) {
        eprintln!(
            "rtemu: warning: no frame was delivered: {} holds none",
            path.display()
        );
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else {
        write!(out, "{report}")?;
    }
    Ok(())
}
