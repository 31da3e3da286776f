//! rtemu's benchmark harness, the `rtemu-bench` binary: how fast the link models decide and the
//! simulator runs (`sim`), what the real-time engine does in labs (`engine`, root) and how long
//! labs take to come up and go down (`topo`, root; with `--hosts N`, over N agents on this
//! machine against one host, and a VXLAN-stitched link against a local one). Everything is
//! measured and printed, never asserted, except by the soak, which fails when the engine's
//! counters or memory are off.
//!
//! The benchmarks are a binary of their own (the `rtemu` package's `rtemu-bench`, whose `main` is
//! [`main`]), so the user's `rtemu` does not carry them. The lab parts drive the `rtemu` built
//! beside them ([`rtemu`]): its subcommands, and its hidden `engine` for the labs they bring up
//! themselves.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod aqm;
pub mod cluster;
mod engine;
mod precision;
mod relay;
mod sim;
mod stitch;
mod topo;

/// Measure the link models and the simulator (`sim`), or the real-time engine in labs
/// (`engine`, root).
#[derive(Debug, clap::Parser)]
#[command(
    name = "rtemu-bench",
    version,
    max_term_width = 100,
    after_help = "Examples:
  rtemu-bench sim
  rtemu-bench sim --packets 20000000 --repeat 7 --json
  sudo rtemu-bench engine --pings 200 --seconds 5
  sudo rtemu-bench engine --part soak --minutes 10
  sudo rtemu-bench topo
  sudo rtemu-bench topo --hosts 3
  sudo rtemu-bench topo --hosts 2 --nodes 10 --pings 20 --seconds 1
  sudo rtemu-bench precision --seconds 5 --rounds 3
  sudo rtemu-bench precision --precision-part idle --seconds 10
  rtemu-bench aqm
  rtemu-bench aqm --seed 2 --json
  sudo rtemu-bench cluster --hosts 3

The lab benchmarks run the rtemu executable beside this one (cargo builds both into
target/release)."
)]
pub struct BenchArgs {
    /// What to measure: `sim` (decisions per second of the models, the simulator's packets per
    /// second), `engine` (per-hop latency through chains of impaired links, rate accuracy with
    /// iperf3, CPU and release error against offered load, throughput beside the kernel's own
    /// forwarding; with `--part soak`, N minutes of 2× overload on a rate link with the
    /// engine's counters and memory checked; needs root) or `topo` (`up` and
    /// `down` of 10 to 1000 nodes against plain `ip` commands; with `--hosts N`, against the
    /// same labs spread over N agents, and a stitched link against a local one; needs root).
    /// `precision` (root): an independent probe through impaired links, idle and beside busy
    /// programs, the engine as it was before real-time scheduling against today's default,
    /// alternated; the engine's CPU with no traffic; many links over one or two release
    /// threads. `aqm`: an upload and a game flow through a 10 Mbit/s link behind drop-tail,
    /// CoDel, FQ-CoDel, PIE, DOCSIS-PIE and DualPI2 in virtual time: the game's delay and the
    /// upload's fate; then bursts onto the same link (RFC 7928 §6): what each queue lets
    /// through (deterministic for a seed).
    /// `cluster` (root) measures nothing: it holds `--hosts` agents (default 2) and a
    /// coordinating server on this machine until Ctrl-C, for trying labs across hosts and for
    /// the tests of the Python package and the web view; it prints how to reach them as JSON.
    #[arg(value_parser = ["sim", "engine", "topo", "precision", "aqm", "cluster"], default_value = "sim")]
    pub what: String,

    /// precision: rounds of the probe part (each runs both engines, alternating their order).
    #[arg(long, default_value_t = 3)]
    pub rounds: u32,

    /// engine: pings per chain; topo --hosts: pings per path of the link table.
    #[arg(long, default_value_t = 100)]
    pub pings: u32,

    /// engine: seconds per row (each rate, each load, each throughput path); topo --hosts:
    /// seconds of iperf3 each way per path of the link table.
    #[arg(long, default_value_t = 3)]
    pub seconds: u32,

    /// engine: only these parts (repeatable; default: all but `soak`, which runs only when
    /// asked for).
    #[arg(long = "part", value_name = "PART", value_parser = ["per-hop", "rate", "load", "throughput", "soak"])]
    pub parts: Vec<String>,

    /// precision: an older `rtemu` binary (e.g. built from an earlier commit) whose engine is
    /// measured alternately with this one's, as it shipped.
    #[arg(long, value_name = "RTEMU")]
    pub before: Option<std::path::PathBuf>,

    /// precision: `up --engine-io` for every engine measured (`af-packet`, `af-xdp`).
    #[arg(long, value_name = "IO", value_parser = ["af-packet", "af-xdp"])]
    pub engine_io: Option<String>,

    /// precision: record the release thread's CPU in the kernel's trace during each probe
    /// run and say why its late wake-ups were late (the CPU absent, the guest's own work, a
    /// wait for the CPU: `rtemu lab sleep --trace`'s analysis).
    #[arg(long)]
    pub trace: bool,

    /// precision: only these parts (repeatable; default: all).
    #[arg(long = "precision-part", value_name = "PART", value_parser = ["probe", "idle", "links"])]
    pub precision_parts: Vec<String>,

    /// engine: how long the soak part runs, minutes (fractions allowed, e.g. 0.5).
    #[arg(long, value_name = "N", default_value_t = 10.0)]
    pub minutes: f64,

    /// engine: how the engine waits (default: as `rtemu up`).
    #[arg(long, value_name = "STRATEGY")]
    pub engine_wait: Option<rtemu_clock::WaitStrategy>,

    /// topo: spread each lab over this many hosts (2 to 8; network namespaces on an underlay
    /// bridge, each running `rtemu serve` as its agent, on this machine) and measure it
    /// against one host, then an ideal link stitched between two hosts against a local one.
    /// cluster: how many hosts to hold (2 to 8, default 2).
    #[arg(long, value_name = "N")]
    pub hosts: Option<usize>,

    /// topo: only labs of this many nodes (2 to 9999; repeatable; default: 10, 100 and 1000).
    #[arg(long = "nodes", value_name = "N")]
    pub nodes: Vec<usize>,

    /// Packets per measurement.
    #[arg(long, default_value_t = 5_000_000)]
    pub packets: u64,

    /// Measurements per case; the median is reported.
    #[arg(long, default_value_t = 5)]
    pub repeat: usize,

    /// aqm: the seed of the upload's arrivals and of the queues' own draws.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,

    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// The `rtemu` executable the lab benchmarks drive: the one beside this executable, where
/// `cargo build` puts both (`target/release/rtemu` and `target/release/rtemu-bench`).
pub fn rtemu() -> anyhow::Result<std::path::PathBuf> {
    use anyhow::Context;
    let me = std::env::current_exe().context("finding this executable")?;
    let rtemu = me.with_file_name("rtemu");
    anyhow::ensure!(
        rtemu.is_file(),
        "{} is missing: the lab benchmarks run the rtemu built beside them (`cargo build \
         --release` builds both)",
        rtemu.display()
    );
    Ok(rtemu)
}

/// The `rtemu-bench` binary: runs the benchmark `args` (parsed by the binary, as `rtemu` parses
/// its own) and says how it ended: 0, or 2 after an error printed on stderr (as `rtemu` does).
pub fn main(args: &BenchArgs) -> std::process::ExitCode {
    match run(args) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) if rtemu_control::error::is_closed_pipe(&err) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            // An error may quote a file, a command line or a reply: shown, never obeyed.
            let message = rtemu_control::error::message(err.as_ref());
            eprintln!(
                "rtemu-bench: error: {}",
                rtemu_sys::terminal::printable(&message)
            );
            std::process::ExitCode::from(2)
        }
    }
}

/// Runs the benchmark `args` asks for.
pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    if args.what == "topo" {
        if let Some(hosts) = args.hosts {
            anyhow::ensure!(
                (2..=8).contains(&hosts),
                "--hosts {hosts}: give 2 to 8 hosts"
            );
        }
        if let Some(n) = args.nodes.iter().find(|n| !(2..=9999).contains(*n)) {
            anyhow::bail!("--nodes {n}: give 2 to 9999 nodes");
        }
        anyhow::ensure!(
            args.pings > 0 && args.seconds > 0,
            "--pings and --seconds must be at least 1"
        );
        return topo::run(&topo::Options {
            json: args.json,
            nodes: args.nodes.clone(),
            hosts: args.hosts,
            pings: args.pings,
            seconds: args.seconds,
        });
    }
    if args.what == "cluster" {
        let hosts = args.hosts.unwrap_or(2);
        anyhow::ensure!(
            (2..=8).contains(&hosts),
            "--hosts {hosts}: give 2 to 8 hosts"
        );
        return cluster::hold(hosts);
    }
    if args.what == "precision" {
        anyhow::ensure!(
            args.seconds > 0 && args.rounds > 0,
            "--seconds and --rounds must be at least 1"
        );
        return precision::run(&precision::Options {
            seconds: args.seconds,
            rounds: args.rounds,
            parts: args.precision_parts.clone(),
            json: args.json,
            before: args.before.clone(),
            io: args.engine_io.clone(),
            trace: args.trace,
        });
    }
    if args.what == "engine" {
        anyhow::ensure!(
            args.pings > 0 && args.seconds > 0,
            "--pings and --seconds must be at least 1"
        );
        anyhow::ensure!(
            args.minutes.is_finite() && args.minutes >= 0.05 && args.minutes <= 1440.0,
            "--minutes {}: give the soak's length from 0.05 (3 s) to 1440 (a day)",
            args.minutes
        );
        return engine::run(&engine::Options {
            pings: args.pings,
            seconds: args.seconds,
            wait: args.engine_wait,
            parts: args.parts.clone(),
            soak_minutes: args.minutes,
        });
    }
    if args.what == "aqm" {
        return aqm::run(args);
    }
    sim::run(args)
}
