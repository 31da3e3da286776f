//! `rtemu trace`: generate, inspect, convert and benchmark traces. The work is in
//! `rtemu-trace` (and `rtemu-sim` for captures and models), the statistics' text and plot in
//! `rtemu-report`; each module here parses one subcommand's flags, calls and prints.

mod bench;
mod cat;
mod convert;
mod gen;
mod stats;

use rtemu_trace::flow::FlowPattern;

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
    Gen(gen::GenArgs),
    /// Print a trace's statistics: counts, delay moments and percentiles, autocorrelation,
    /// Hurst estimates.
    Stats(stats::StatsArgs),
    /// Convert a trace between the raw, framed and text forms.
    Convert(convert::ConvertArgs),
    /// Print a trace in the text form.
    Cat(cat::CatArgs),
    /// Measure how fast a trace streams through the prefetching reader.
    Bench(bench::BenchArgs),
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

/// Runs `rtemu trace`.
pub fn run(args: &TraceArgs) -> anyhow::Result<()> {
    match &args.command {
        TraceCommand::Gen(a) => gen::run(a),
        TraceCommand::Stats(a) => stats::run(a, &mut std::io::stdout().lock()),
        TraceCommand::Convert(a) => convert::run(a),
        TraceCommand::Cat(a) => cat::run(a, &mut std::io::BufWriter::new(std::io::stdout().lock())),
        TraceCommand::Bench(a) => bench::run(a),
    }
}
