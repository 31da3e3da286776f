//! `rtemu lab`: the timing lab. Can this machine keep real time, and how precisely?
//!
//! The experiments live in `rtemu-lab`; this module parses the flags, applies the real-time
//! set-up, shows progress between measurements and prints the reports (tables in µs, JSON in
//! integer ns, CSV of raw samples).

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

use anyhow::Context as _;
use clap::Subcommand;
use indicatif::{ProgressBar, ProgressStyle};
use rtemu_clock::rt;
use rtemu_clock::time::{format_duration_ns, parse_duration_ns};
use rtemu_clock::WaitStrategy;
use rtemu_lab::deadline::{self, DeadlineConfig, DeadlineResult, Mode};
use rtemu_lab::doctor::{self, Facts};
use rtemu_lab::env::{BusyLoad, Header, RtRequest, RtSetup};
use rtemu_lab::latency::{self, Class, InversionLock, InversionResult, LatencyConfig, LatencyRow};
use rtemu_lab::linerate::{self, Pacer, PointConfig, PointResult};
use rtemu_lab::rtt::{self, Echo, Endpoint, Mac, RttConfig, SizeResult, Sweep};
use rtemu_lab::sleep::{self, MethodResult, SleepConfig, Workload};
use rtemu_lab::stats::{Distribution, Histogram};
use rtemu_lab::tire::{Tire, TireParams};
use serde::Serialize;

use super::plot;

/// Arguments of `rtemu lab`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  rtemu lab doctor
  rtemu lab sleep --methods nanosleep,spin,hybrid --count 500
  rtemu lab linerate --rates 1M,10M,100M --json
  rtemu lab deadline --mode both --steps 300
  rtemu lab rtt --max-size 1024 --step 256
  sudo rtemu lab latency --cpu 1 --json")]
pub struct LabArgs {
    // Boxed: the subcommands' flags are large, and LabArgs sits in the CLI's command enum.
    #[command(subcommand)]
    command: Box<LabCommand>,
}

#[derive(Debug, Subcommand)]
enum LabCommand {
    /// Sleep accuracy per wait method (the timing paper's Table 1).
    Sleep(SleepArgs),
    /// Requested vs achieved line rate per wait method and pacer (the timing paper's Figure 1).
    Linerate(LinerateArgs),
    /// Task-switch, preemption and IPC latencies under SCHED_OTHER and SCHED_FIFO, and the
    /// priority-inversion test (the RTOS paper's Table 1).
    Latency(LatencyArgs),
    /// Real time vs real fast: the RTOS paper's tire model at a fixed rate against absolute
    /// deadlines, and as fast as possible.
    Deadline(DeadlineArgs),
    /// A one-screen verdict: what timing this machine can promise, and what to change.
    Doctor(DoctorArgs),
    /// UDP and/or raw Ethernet round trips per size against `rtemu lab echo` (the real-time
    /// UDP paper's benchmark), with the kernel's view beside the application's; UDP without
    /// --to runs against an echo server on loopback.
    Rtt(RttArgs),
    /// A UDP or raw Ethernet echo server for `rtemu lab rtt`, bounded in time.
    Echo(EchoArgs),
}

/// Real-time set-up and load, shared by every lab command.
#[derive(Debug, clap::Args)]
struct RtArgs {
    /// Measure under SCHED_FIFO at this priority (1–99); default SCHED_OTHER.
    #[arg(long, value_name = "PRIO", value_parser = clap::value_parser!(u8).range(1..=99))]
    fifo: Option<u8>,
    /// Pin the measuring thread to this CPU.
    #[arg(long, value_name = "CPU")]
    cpu: Option<usize>,
    /// Do not lock memory with mlockall.
    #[arg(long)]
    no_mlock: bool,
    /// Do not hold /dev/cpu_dma_latency at 0 while measuring.
    #[arg(long)]
    no_dma_latency: bool,
    /// Set the measuring thread's timer slack (e.g. 1ns; the default is the kernel's, 50us).
    #[arg(long, value_name = "DURATION", value_parser = duration_in(1..=1_000_000_000))]
    timer_slack: Option<u64>,
    /// Run busy threads while measuring, kept off --cpu; without a number, one per CPU.
    #[arg(long, value_name = "THREADS", num_args = 0..=1)]
    load: Option<Option<usize>>,
}

/// Output formats, shared by every lab command.
#[derive(Debug, clap::Args)]
struct OutputArgs {
    /// Print the report as JSON (times in integer ns) instead of tables.
    #[arg(long)]
    json: bool,
    /// Write every raw sample to this CSV file.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
    /// Draw the results to this SVG or PNG file, by its extension (sleep: the timing paper's
    /// Figure 3; linerate: its Figure 1; rtt: round trip vs size; deadline: missed deadlines
    /// per configuration).
    #[arg(long, value_name = "FILE.svg|FILE.png")]
    plot: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  rtemu lab sleep
  rtemu lab sleep --methods nanosleep,timerfd,spin,hybrid:50us --workload fixed:100us --count 1000 --timer-slack 1ns
  rtemu lab sleep --workload uniform:10us-1ms --load 2 --json --csv sleep.csv --histogram sleep-hist.txt
  sudo rtemu lab sleep --workload paper --count 1000 --fifo 80 --cpu 1 --plot sleep.svg")]
struct SleepArgs {
    /// Wait methods to compare, comma-separated: select, nanosleep, sleep (clock-abs), timerfd,
    /// epoll, slack, spin (busy), hybrid[:MARGIN].
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "select,nanosleep,sleep,timerfd,epoll,slack,spin,hybrid"
    )]
    methods: Vec<WaitStrategy>,
    /// Requested sleeps: paper (uniform 0–100 ms), micro (uniform 10us–2ms), fixed:DURATION,
    /// uniform:MIN-MAX.
    #[arg(long, default_value = "micro")]
    workload: Workload,
    /// Requests per method (the paper used 1000).
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    count: u64,
    /// Seed of the request generator.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Stop each method after this long even if requests remain (1ms to 1h).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration_in(latency::TIME_LIMIT_RANGE_NS))]
    time_limit: u64,
    /// Write a cyclictest-style histogram of the error (one row per µs, one column per
    /// method, up to --histogram-max µs) to this file.
    #[arg(long, value_name = "FILE")]
    histogram: Option<PathBuf>,
    /// Microsecond buckets of --histogram.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    histogram_max: u64,
    #[command(flatten)]
    rt: RtArgs,
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  rtemu lab linerate
  rtemu lab linerate --methods sleep,spin --pacers absolute --rates 1M,10M,100M --packet-size 1000 --json
  rtemu lab linerate --rates 1k,10k,100k,1M,10M,100M --time 200ms --csv linerate.csv --plot linerate.svg
  sudo rtemu lab linerate --fifo 80 --cpu 1 --load")]
struct LinerateArgs {
    /// Wait methods to compare, comma-separated (see `rtemu lab sleep --help`).
    #[arg(long, value_delimiter = ',', default_value = "nanosleep,sleep,spin")]
    methods: Vec<WaitStrategy>,
    /// Pacers: absolute (deadline start + k·interval, as the engine does) and relative (a
    /// naive sleep of one interval per packet).
    #[arg(long, value_delimiter = ',', default_value = "absolute,relative")]
    pacers: Vec<Pacer>,
    /// Requested line rates in bit/s, comma-separated, with k/M/G (the paper: 1k to 100M).
    #[arg(long, value_delimiter = ',', default_value = "100k,1M,10M,100M", value_parser = parse_rate)]
    rates: Vec<u64>,
    /// Packet size in bytes (the paper used 100).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=65_535))]
    packet_size: u32,
    /// Time to spend on each rate × method × pacer (1ms to 60s; a slow rate takes longer, to
    /// pace --min-packets).
    #[arg(long, value_name = "DURATION", default_value = "50ms", value_parser = duration_in(1_000_000..=60_000_000_000))]
    time: u64,
    /// Fewest packets per point, however slow the rate.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(2..=1_000_000))]
    min_packets: u64,
    /// Most packets per point, however fast the rate.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(2..=10_000_000))]
    max_packets: u64,
    #[command(flatten)]
    rt: RtArgs,
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  rtemu lab latency
  rtemu lab latency --iterations 10000 --period 500us --json
  rtemu lab latency --csv latency.csv
  sudo rtemu lab latency --cpu 1 --load --watchdog 100ms")]
struct LatencyArgs {
    /// The CPU every test thread is pinned to (default: the last one allowed).
    #[arg(long, value_name = "CPU")]
    cpu: Option<usize>,
    /// Samples per test and scheduling class.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    iterations: u64,
    /// Wake-up period of the preemption test (10us to 1s).
    #[arg(long, value_name = "DURATION", default_value = "1ms", value_parser = duration_in(latency::PERIOD_RANGE_NS))]
    period: u64,
    /// Bound on each test, and on the spinning medium thread of the priority-inversion test
    /// (1ms to 1h).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration_in(latency::TIME_LIMIT_RANGE_NS))]
    time_limit: u64,
    /// How long the priority-inversion test lets an inversion last before ending it (1ms to
    /// 60s).
    #[arg(long, value_name = "DURATION", default_value = "300ms", value_parser = duration_in(1_000_000..=60_000_000_000))]
    watchdog: u64,
    /// Do not lock memory with mlockall.
    #[arg(long)]
    no_mlock: bool,
    /// Do not hold /dev/cpu_dma_latency at 0 while measuring.
    #[arg(long)]
    no_dma_latency: bool,
    /// Run busy threads on the other CPUs while measuring; without a number, one per CPU.
    #[arg(long, value_name = "THREADS", num_args = 0..=1)]
    load: Option<Option<usize>>,
    /// Print the report as JSON (times in integer ns) instead of tables.
    #[arg(long)]
    json: bool,
    /// Write one row per test and class (and per priority-inversion run) to this CSV file.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum DeadlineMode {
    /// Steps released at --rate against absolute deadlines.
    Realtime,
    /// Steps back to back.
    Fast,
    /// Both, one after the other.
    Both,
}

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  rtemu lab deadline
  rtemu lab deadline --mode fast --quadrant-nodes 250 --threads 2 --steps 1000 --json
  rtemu lab deadline --mode realtime --rate 200 --steps 2000 --csv steps.csv
  sudo rtemu lab deadline --sweep --sweep-sizes 25,250 --sweep-threads 1,2 --plot deadline.svg")]
struct DeadlineArgs {
    /// Tire nodes per quadrant (the tire has 4× as many).
    #[arg(long, default_value_t = 25, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    quadrant_nodes: u64,
    /// Solver threads.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1024))]
    threads: u64,
    /// Steps to run (the paper: 6000, 60 s at 100 Hz).
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    steps: u64,
    /// Release rate of real-time steps, Hz, and so the model's time step (the paper: 100;
    /// at least 100, because the explicit solver is stable only up to 10 ms steps).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(100..=100_000))]
    rate: u64,
    /// Which benchmark to run.
    #[arg(long, value_enum, default_value_t = DeadlineMode::Both)]
    mode: DeadlineMode,
    /// Run the solver threads under SCHED_FIFO at this priority (1–99).
    #[arg(long, value_name = "PRIO", value_parser = clap::value_parser!(u8).range(1..=99))]
    fifo: Option<u8>,
    /// Sweep model sizes × thread counts × SCHED_OTHER/SCHED_FIFO in real-time mode and show
    /// missed deadlines as a table (the paper's Figures 9–12).
    #[arg(long)]
    sweep: bool,
    /// Sizes for --sweep, in nodes per quadrant.
    #[arg(long, value_delimiter = ',', default_value = "25,250,2500")]
    sweep_sizes: Vec<usize>,
    /// Thread counts for --sweep (default: 1, one per CPU, two per CPU).
    #[arg(long, value_delimiter = ',')]
    sweep_threads: Vec<usize>,
    /// Do not lock memory with mlockall.
    #[arg(long)]
    no_mlock: bool,
    /// Do not hold /dev/cpu_dma_latency at 0 while measuring.
    #[arg(long)]
    no_dma_latency: bool,
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  rtemu lab doctor
  rtemu lab doctor --duration 2s --json
  rtemu lab doctor --csv doctor.csv
  sudo rtemu lab doctor --duration 10s")]
struct DoctorArgs {
    /// Length of the sleep test (50ms to 10m).
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = duration_in(doctor::DURATION_RANGE_NS))]
    duration: u64,
    /// Print the verdict as JSON (times in integer ns).
    #[arg(long)]
    json: bool,
    /// Write the facts and the sleep test's figures as one CSV row to this file.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
}

/// The round trips `rtemu lab rtt` measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Protocol {
    /// UDP datagrams to `rtemu lab echo --listen`.
    Udp,
    /// Raw Ethernet frames to `rtemu lab echo --raw`.
    Raw,
    /// UDP, then raw Ethernet, reported side by side.
    Both,
}

impl Protocol {
    /// Whether a UDP sweep runs.
    fn udp(self) -> bool {
        matches!(self, Protocol::Udp | Protocol::Both)
    }

    /// Whether a raw Ethernet sweep runs.
    fn raw(self) -> bool {
        matches!(self, Protocol::Raw | Protocol::Both)
    }

    /// As `--protocol` spells it.
    fn name(self) -> &'static str {
        match self {
            Protocol::Udp => "udp",
            Protocol::Raw => "raw",
            Protocol::Both => "both",
        }
    }
}

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  rtemu lab rtt
  rtemu lab rtt --min-size 64 --max-size 1024 --step 64 --count 1000 --json --plot rtt.png
  rtemu lab echo --listen 0.0.0.0:7777 --duration 10m     # on the far host, then here:
  rtemu lab rtt --to 192.0.2.10:7777 --half-rtt --csv rtt.csv
  sudo rtemu lab echo --raw eth0 --duration 10m           # on the far host, then here:
  sudo rtemu lab rtt --raw eth0 --peer 02:00:5e:10:00:01 --plot raw.svg
  sudo rtemu lab rtt --protocol both --to 192.0.2.10:7777 --raw eth0 --peer 02:00:5e:10:00:01
  sudo rtemu lab rtt --lab demo --from a --to b --count 1000
  sudo rtemu lab rtt --lab demo --from a --to b --protocol both --plot rtt.svg")]
struct RttArgs {
    /// Which round trips: udp, raw (Ethernet frames), or both, UDP first [default: udp, or
    /// raw when --raw is given].
    #[arg(long, value_enum)]
    protocol: Option<Protocol>,
    /// The UDP echo server (`rtemu lab echo`), ADDR:PORT; with --from, the lab node to start
    /// the echo servers in. Default: a UDP echo started on 127.0.0.1 for the run.
    #[arg(long, value_name = "ADDR:PORT|NODE")]
    to: Option<String>,
    /// Run the sweeps inside this node of a running lab, against echo servers started in the
    /// --to node for the run (raw Ethernet: on the interface facing this node).
    #[arg(long, value_name = "NODE", requires = "to", conflicts_with = "raw")]
    from: Option<String>,
    /// The lab of --from and --to (default: the only one running).
    #[arg(long, value_name = "LAB", requires = "from")]
    lab: Option<String>,
    /// The UDP port of the echo server started with --from.
    #[arg(long, default_value_t = 7777, requires = "from")]
    port: u16,
    /// The interface raw Ethernet frames (EtherType 0x88b5) leave on, to the
    /// `rtemu lab echo --raw` at --peer (needs CAP_NET_RAW).
    #[arg(long, value_name = "IFACE", requires = "peer")]
    raw: Option<String>,
    /// The MAC address of the raw echo's interface (`ip link` on its host shows it).
    #[arg(long, value_name = "MAC", requires = "raw")]
    peer: Option<Mac>,
    /// Smallest size, bytes, in each protocol's own unit: UDP payload (12–1472, default 16)
    /// or Ethernet frame for raw (60–1514, default 64).
    #[arg(long)]
    min_size: Option<usize>,
    /// Largest size, bytes (default 1472 for UDP, 1514 for raw).
    #[arg(long)]
    max_size: Option<usize>,
    /// Size increment, bytes (default 182 for UDP, 145 for raw: nine and eleven sizes).
    #[arg(long)]
    step: Option<usize>,
    /// Measured round trips per size (the paper's NUM_MEASUREMENTS).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    count: u64,
    /// Discarded round trips before each size.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    warmup: u64,
    /// How long to wait for each reply before counting the probe lost (1ms to 60s).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = duration_in(1_000_000..=60_000_000_000))]
    timeout: u64,
    /// Report one-way times (half the round trip).
    #[arg(long)]
    half_rtt: bool,
    #[command(flatten)]
    rt: RtArgs,
    #[command(flatten)]
    output: OutputArgs,
}

impl RttArgs {
    /// The sweep towards `target`, sizes defaulting to the protocol's.
    fn config(&self, target: Endpoint) -> RttConfig {
        let (min, max, step) = match target {
            Endpoint::Udp(_) => (16, 1472, 182),
            Endpoint::Raw { .. } => (64, 1514, 145),
        };
        RttConfig {
            target,
            min_size: self.min_size.unwrap_or(min),
            max_size: self.max_size.unwrap_or(max),
            step: self.step.unwrap_or(step),
            count: self.count as usize,
            warmup: self.warmup as usize,
            timeout_ns: self.timeout,
        }
    }

    /// The protocols to run, checked against the echo servers named: `--raw IFACE --peer MAC`
    /// names the raw one, `--to ADDR:PORT` the UDP one (`--from` finds both in a lab), and a
    /// flag the chosen protocols would not use is refused rather than ignored.
    fn protocol(&self) -> anyhow::Result<Protocol> {
        let in_lab = self.from.is_some();
        let protocol = self.protocol.unwrap_or(match self.raw {
            Some(_) => Protocol::Raw,
            None => Protocol::Udp,
        });
        if !protocol.raw() && self.raw.is_some() {
            anyhow::bail!(
                "--raw names a raw Ethernet echo, which --protocol udp does not measure: add \
                 --protocol both, or leave out --raw"
            );
        }
        if protocol.raw() && !in_lab && self.raw.is_none() {
            anyhow::bail!(
                "--protocol {} needs the raw echo's interface and MAC address: add --raw IFACE \
                 --peer MAC (--to ADDR:PORT names a UDP echo only); between two nodes of a lab, \
                 --lab LAB --from A --to B finds them",
                protocol.name()
            );
        }
        if !protocol.udp() && !in_lab && self.to.is_some() {
            anyhow::bail!(
                "--to names a UDP echo, which a raw Ethernet run does not measure: add \
                 --protocol both, or leave out --to"
            );
        }
        Ok(protocol)
    }
}

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  rtemu lab echo
  rtemu lab echo --listen 0.0.0.0:7777 --duration 10m     # then, on another host:
  rtemu lab rtt --to 192.0.2.1:7777
  sudo rtemu lab echo --raw eth0 --duration 10m           # then, on another host:
  sudo rtemu lab rtt --raw eth0 --peer MAC-OF-THIS-ETH0")]
struct EchoArgs {
    /// Address to listen on.
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:7777")]
    listen: std::net::SocketAddr,
    /// Echo raw Ethernet frames (EtherType 0x88b5) addressed to this interface, with the
    /// addresses swapped, instead of UDP (needs CAP_NET_RAW).
    #[arg(long, value_name = "IFACE", conflicts_with = "listen")]
    raw: Option<String>,
    /// Stop after this long (1ms to 24h).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = duration_in(1_000_000..=86_400_000_000_000))]
    duration: u64,
}

fn parse_duration(text: &str) -> Result<u64, String> {
    parse_duration_ns(text).map_err(|e| e.to_string())
}

/// A duration flag's parser that takes only `range` (ns), naming it in the error: a period of
/// 0 that would loop for ever, or a limit of 0 that measures nothing, is refused up front.
fn duration_in(
    range: std::ops::RangeInclusive<u64>,
) -> impl Fn(&str) -> Result<u64, String> + Clone + Send + Sync + 'static {
    move |text| {
        let ns = parse_duration(text)?;
        if range.contains(&ns) {
            Ok(ns)
        } else {
            Err(format!(
                "{} is out of range: give {} to {} (a number with ns, us, ms, s or m)",
                format_duration_ns(ns),
                format_duration_ns(*range.start()),
                format_duration_ns(*range.end())
            ))
        }
    }
}

fn parse_rate(text: &str) -> Result<u64, String> {
    linerate::parse_rate_bps(text).map_err(|e| e.to_string())
}

/// Runs `rtemu lab`.
pub fn run(args: &LabArgs) -> anyhow::Result<()> {
    match args.command.as_ref() {
        LabCommand::Sleep(args) => run_sleep(args),
        LabCommand::Linerate(args) => run_linerate(args),
        LabCommand::Latency(args) => run_latency(args),
        LabCommand::Deadline(args) => run_deadline(args),
        LabCommand::Doctor(args) => run_doctor(args),
        LabCommand::Rtt(args) => run_rtt(args),
        LabCommand::Echo(args) => run_echo(args),
    }
}

/// The longest any busy load may outlive its measurement by mistake.
const LOAD_BOUND_NS: u64 = 600_000_000_000;

/// Applies the real-time set-up and starts the load; keep both alive while measuring.
fn prepare(rt: &RtArgs) -> anyhow::Result<(RtSetup, Option<BusyLoad>, Header)> {
    let request = RtRequest {
        fifo_priority: rt.fifo,
        cpu: rt.cpu,
        mlock: !rt.no_mlock,
        dma_latency: !rt.no_dma_latency,
        timer_slack_ns: rt.timer_slack,
    };
    prepare_with(&request, rt.load, rt.cpu)
}

/// Applies `request`, then starts `load` busy threads kept off `avoid_cpu`.
fn prepare_with(
    request: &RtRequest,
    load: Option<Option<usize>>,
    avoid_cpu: Option<usize>,
) -> anyhow::Result<(RtSetup, Option<BusyLoad>, Header)> {
    let setup = request.apply().context("real-time set-up")?;
    let load = load
        .map(|threads| {
            let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
            BusyLoad::start(threads.unwrap_or(cpus), avoid_cpu, LOAD_BOUND_NS)
        })
        .transpose()
        .context("--load")?;
    let header = Header::probe(&setup, load.as_ref().map_or(0, BusyLoad::threads));
    Ok((setup, load, header))
}

fn progress(len: usize) -> ProgressBar {
    let bar = ProgressBar::new(len as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}").expect("the template is valid"),
    );
    bar
}

fn us(ns: f64) -> String {
    format!("{:.1}", ns / 1_000.0)
}

fn us_i(ns: i64) -> String {
    us(ns as f64)
}

fn print_header(out: &mut impl Write, title: &str, h: &Header) -> io::Result<()> {
    writeln!(out, "{title}")?;
    writeln!(
        out,
        "kernel      {} {} (preemption: {})",
        h.kernel_release, h.kernel_version, h.preemption
    )?;
    let slack = h.timer_slack_ns.map_or("unknown".to_owned(), |ns| {
        format_duration_ns(ns).to_string()
    });
    writeln!(
        out,
        "clock       clocksource {}, timer slack {slack}, one clock read {} ns median, {} ns p99, {} ns max",
        h.clocksource, h.clock_read_ns.p50_ns, h.clock_read_ns.p99_ns, h.clock_read_ns.max_ns
    )?;
    let runtime = match h.rt_runtime_us {
        Some(-1) => "unlimited".to_owned(),
        Some(us) => format!("{us} µs/s"),
        None => "unknown".to_owned(),
    };
    writeln!(
        out,
        "scheduling  {} on CPUs {} ({} online), mlockall {}, cpu_dma_latency {}, RT runtime {runtime}",
        h.policy,
        h.affinity,
        h.cpus,
        if h.mlockall { "yes" } else { "no" },
        if h.dma_latency_held { "held at 0" } else { "not held" },
    )?;
    let load = match h.load_threads {
        0 => "none".to_owned(),
        n => format!("{n} busy threads"),
    };
    writeln!(
        out,
        "machine     virtualisation {}, load {load}",
        h.virtualization.as_deref().unwrap_or("none detected")
    )?;
    for notice in &h.notices {
        writeln!(out, "notice      {notice}")?;
    }
    writeln!(out)
}

#[derive(Serialize)]
struct SleepReport<'a> {
    header: &'a Header,
    workload: String,
    count: u64,
    seed: u64,
    time_limit_ns: u64,
    results: &'a [MethodResult],
}

fn run_sleep(args: &SleepArgs) -> anyhow::Result<()> {
    let config = SleepConfig {
        methods: args.methods.clone(),
        workload: args.workload,
        count: args.count as usize,
        seed: args.seed,
        time_limit_ns: args.time_limit,
    };
    if let Some(path) = &args.output.plot {
        plot::Format::of(path)?;
    }
    let (setup, load, header) = prepare(&args.rt)?;
    let bar = progress(config.methods.len());
    let samples = sleep::run(&config, &mut |i, method| {
        bar.set_position(i as u64);
        bar.set_message(method.to_string());
    })?;
    bar.finish_and_clear();
    drop(load);
    drop(setup);
    let results: Vec<MethodResult> = samples
        .iter()
        .map(|s| MethodResult::from_samples(s, config.count))
        .collect();
    if let Some(path) = &args.output.csv {
        write_csv(path, |out| {
            writeln!(out, "method,index,requested_ns,actual_ns,error_ns")?;
            for s in &samples {
                for (i, (x, y)) in s.requested.iter().zip(&s.actual).enumerate() {
                    writeln!(out, "{},{i},{x},{y},{}", s.method, *y as i64 - *x as i64)?;
                }
            }
            Ok(())
        })?;
    }
    if let Some(path) = &args.output.plot {
        figures::sleep(path, &samples)?;
    }
    if let Some(path) = &args.histogram {
        let histograms: Vec<Histogram> = samples
            .iter()
            .map(|s| {
                let errors: Vec<i64> = s
                    .requested
                    .iter()
                    .zip(&s.actual)
                    .map(|(&x, &y)| y as i64 - x as i64)
                    .collect();
                Histogram::per_microsecond(&errors, args.histogram_max as usize)
            })
            .collect();
        write_csv(path, |out| {
            // cyclictest -h layout: comments, then "µs count count …", then the totals.
            write!(out, "# error in µs")?;
            for s in &samples {
                write!(out, " {}", s.method)?;
            }
            writeln!(out)?;
            for bucket in 0..args.histogram_max as usize {
                write!(out, "{bucket:06}")?;
                for h in &histograms {
                    write!(out, " {:06}", h.counts[bucket])?;
                }
                writeln!(out)?;
            }
            for (label, pick) in [
                (
                    "# below 0:",
                    (|h: &Histogram| h.underflows) as fn(&Histogram) -> u64,
                ),
                ("# overflows:", |h: &Histogram| h.overflows),
            ] {
                write!(out, "{label}")?;
                for h in &histograms {
                    write!(out, " {:05}", pick(h))?;
                }
                writeln!(out)?;
            }
            Ok(())
        })?;
    }
    let empty: Vec<String> = results
        .iter()
        .filter(|r| r.completed == 0)
        .map(|r| r.method.clone())
        .collect();
    let measured_nothing = || {
        no_samples(
            &empty,
            &format!(
                "completed no request within --time-limit {}",
                format_duration_ns(args.time_limit)
            ),
        )
    };
    let mut out = io::stdout().lock();
    if args.output.json {
        let report = SleepReport {
            header: &header,
            workload: config.workload.to_string(),
            count: args.count,
            seed: args.seed,
            time_limit_ns: args.time_limit,
            results: &results,
        };
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
        return measured_nothing();
    }
    let title = format!(
        "rtemu lab sleep: workload {}, {} requests per method, seed {}",
        config.workload, config.count, config.seed
    );
    print_header(&mut out, &title, &header)?;
    writeln!(
        out,
        "{:<14} {:>6} {:>10} {:>12} {:>9} {:>9} │ {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} │ {:>5}",
        "method",
        "n",
        "abs mean",
        "abs var",
        "rel mean",
        "rel var",
        "p50",
        "p90",
        "p99",
        "p99.9",
        "p99.99",
        "max",
        "cpu"
    )?;
    writeln!(
        out,
        "{:<14} {:>6} {:>10} {:>12} {:>9} {:>9} │ {:>62} │",
        "", "", "µs", "µs²", "", "", "error y − x in µs"
    )?;
    for r in &results {
        if r.completed == 0 {
            writeln!(
                out,
                "{:<14} {:>6}   no samples (cut by --time-limit)",
                r.method, 0
            )?;
            continue;
        }
        let d = &r.error_ns;
        writeln!(
            out,
            "{:<14} {:>6} {:>10} {:>12.1} {:>9.4} {:>9.4} │ {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} │ {:>4.0}%{}",
            r.method,
            r.completed,
            us(r.errors.abs_mean_ns),
            r.errors.abs_var_ns2 / 1e6,
            r.errors.rel_mean,
            r.errors.rel_var,
            us_i(d.p50_ns),
            us_i(d.p90_ns),
            us_i(d.p99_ns),
            us_i(d.p99_9_ns),
            us_i(d.p99_99_ns),
            us_i(d.max_ns),
            r.cpu_share() * 100.0,
            if r.truncated { "  (cut by --time-limit)" } else { "" },
        )?;
    }
    measured_nothing()
}

/// Fails when some series measured nothing (`what` names them): a run with no samples has
/// no figures to report, never a perfect 0. The report is printed first, saying "no samples".
fn no_samples(what: &[String], why: &str) -> anyhow::Result<()> {
    if what.is_empty() {
        return Ok(());
    }
    anyhow::bail!("no samples: {} {why}", what.join(", "))
}

#[derive(Serialize)]
struct LinerateReport<'a> {
    header: &'a Header,
    packet_size: u32,
    time_per_point_ns: u64,
    results: &'a [PointResult],
}

fn run_linerate(args: &LinerateArgs) -> anyhow::Result<()> {
    let mut points = Vec::new();
    for &rate_bps in &args.rates {
        for &method in &args.methods {
            for &pacer in &args.pacers {
                points.push(PointConfig {
                    method,
                    pacer,
                    rate_bps,
                    packet_bytes: args.packet_size,
                    packets: linerate::packets_for(
                        args.time,
                        args.packet_size,
                        rate_bps,
                        args.min_packets as usize,
                        args.max_packets as usize,
                    ),
                });
            }
        }
    }
    let expected_ns = linerate::sweep_time_ns(&points);
    if expected_ns > linerate::MAX_SWEEP_NS {
        let slowest = points
            .iter()
            .max_by_key(|p| p.min_time_ns())
            .context("no point to measure")?;
        anyhow::bail!(
            "this sweep would take at least {} ({} points; the slowest, {} bit/s, paces {} \
             packets of {} bytes in {} alone), more than the {} a sweep may take: raise the \
             slowest of --rates, or lower --min-packets, --time or --packet-size",
            format_duration_ns(expected_ns),
            points.len(),
            slowest.rate_bps,
            slowest.packets,
            slowest.packet_bytes,
            format_duration_ns(slowest.min_time_ns()),
            format_duration_ns(linerate::MAX_SWEEP_NS)
        );
    }
    if let Some(path) = &args.output.plot {
        plot::Format::of(path)?;
    }
    let (setup, load, header) = prepare(&args.rt)?;
    let bar = progress(points.len());
    let mut results = Vec::with_capacity(points.len());
    for point in &points {
        bar.set_message(format!(
            "{} {} {} bit/s",
            point.method, point.pacer, point.rate_bps
        ));
        results.push(linerate::measure(point)?);
        bar.inc(1);
    }
    bar.finish_and_clear();
    drop(load);
    drop(setup);
    if let Some(path) = &args.output.csv {
        write_csv(path, |out| {
            writeln!(
                out,
                "method,pacer,requested_bps,achieved_bps,ratio,packets,interval_ns,late_p50_ns,late_p99_ns,late_max_ns,cpu_ns"
            )?;
            for r in &results {
                let l = &r.lateness_ns;
                writeln!(
                    out,
                    "{},{},{},{:.0},{:.6},{},{},{},{},{},{}",
                    r.method,
                    r.pacer,
                    r.requested_bps,
                    r.achieved_bps,
                    r.ratio,
                    r.packets,
                    r.interval_ns,
                    l.p50_ns,
                    l.p99_ns,
                    l.max_ns,
                    r.cpu_ns
                )?;
            }
            Ok(())
        })?;
    }
    if let Some(path) = &args.output.plot {
        figures::linerate(path, &results)?;
    }
    let mut out = io::stdout().lock();
    if args.output.json {
        let report = LinerateReport {
            header: &header,
            packet_size: args.packet_size,
            time_per_point_ns: args.time,
            results: &results,
        };
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
        return Ok(());
    }
    let title = format!(
        "rtemu lab linerate: {}-byte packets, about {} per point",
        args.packet_size,
        format_duration_ns(args.time)
    );
    print_header(&mut out, &title, &header)?;
    writeln!(
        out,
        "{:<14} {:<9} {:>12} {:>14} {:>8} {:>8} │ {:>10} {:>10} {:>10}",
        "method",
        "pacer",
        "requested",
        "achieved",
        "ratio",
        "packets",
        "late p50",
        "late p99",
        "late max"
    )?;
    writeln!(
        out,
        "{:<14} {:<9} {:>12} {:>14} {:>8} {:>8} │ {:>32}",
        "", "", "bit/s", "bit/s", "", "", "vs start + k·interval, µs"
    )?;
    for r in &results {
        let l: &Distribution = &r.lateness_ns;
        writeln!(
            out,
            "{:<14} {:<9} {:>12} {:>14.0} {:>8.4} {:>8} │ {:>10} {:>10} {:>10}",
            r.method,
            r.pacer,
            r.requested_bps,
            r.achieved_bps,
            r.ratio,
            r.packets,
            us_i(l.p50_ns),
            us_i(l.p99_ns),
            us_i(l.max_ns),
        )?;
    }
    Ok(())
}

#[derive(Serialize)]
struct LatencyReport<'a> {
    header: &'a Header,
    cpu: usize,
    iterations: u64,
    period_ns: u64,
    results: &'a [LatencyRow],
    priority_inversion: &'a [InversionResult],
    skipped: &'a [String],
}

fn run_latency(args: &LatencyArgs) -> anyhow::Result<()> {
    let allowed = rt::affinity().context("reading the CPU affinity")?;
    let cpu = match args.cpu {
        Some(cpu) if allowed.contains(&cpu) => cpu,
        Some(cpu) => anyhow::bail!(
            "--cpu {cpu} is not one this process may use: pick one of {}",
            rt::format_cpu_list(&allowed)
        ),
        None => *allowed.last().context("no CPU allowed")?,
    };
    let config = LatencyConfig {
        cpu,
        iterations: args.iterations as usize,
        period_ns: args.period,
        time_limit_ns: args.time_limit,
    };
    let request = RtRequest {
        mlock: !args.no_mlock,
        dma_latency: !args.no_dma_latency,
        ..RtRequest::default()
    };
    let (setup, load, header) = prepare_with(&request, args.load, Some(cpu))?;
    let mut skipped = Vec::new();
    let fifo = rt::fifo_permitted();
    let classes: &[Class] = if fifo {
        &[Class::Other, Class::Fifo]
    } else {
        skipped.push(
            "SCHED_FIFO not permitted (run as root or grant CAP_SYS_NICE): SCHED_FIFO rows and \
             the priority-inversion test skipped"
                .to_owned(),
        );
        &[Class::Other]
    };
    let bar = progress(classes.len() * latency::TESTS.len() + InversionLock::ALL.len());
    let rows = latency::run(&config, classes, &mut |test, class| {
        bar.set_message(format!("{test} {class:?}"));
        bar.inc(1);
    })?;
    let mut inversion = Vec::new();
    if fifo && allowed.len() < 2 {
        skipped.push("priority inversion needs a second CPU to start its threads: skipped".into());
    } else if fifo {
        for lock in InversionLock::ALL {
            bar.set_message(format!("priority inversion, {}", lock.name()));
            bar.inc(1);
            inversion.push(latency::priority_inversion_with(lock, cpu, args.watchdog)?);
        }
    }
    bar.finish_and_clear();
    drop(load);
    drop(setup);
    if let Some(path) = &args.csv {
        write_csv(path, |out| {
            writeln!(
                out,
                "test,class,n,min_ns,mean_ns,p50_ns,p90_ns,p99_ns,p99_9_ns,max_ns,watchdog_fired"
            )?;
            for r in &rows {
                let d = &r.latency_ns;
                let class = match r.class {
                    Class::Other => "SCHED_OTHER",
                    Class::Fifo => "SCHED_FIFO",
                };
                writeln!(
                    out,
                    "{},{class},{},{},{:.0},{},{},{},{},{},",
                    r.test,
                    d.n,
                    d.min_ns,
                    r.mean_ns,
                    d.p50_ns,
                    d.p90_ns,
                    d.p99_ns,
                    d.p99_9_ns,
                    d.max_ns
                )?;
            }
            // One run each: the high thread's wait is every column's value.
            for r in &inversion {
                let w = r.high_wait_ns;
                writeln!(
                    out,
                    "priority-inversion:{},SCHED_FIFO,1,{w},{w},{w},{w},{w},{w},{w},{}",
                    inversion_lock(r).replace(' ', "-"),
                    r.watchdog_fired
                )?;
            }
            Ok(())
        })?;
    }
    let empty: Vec<String> = rows
        .iter()
        .filter(|r| r.latency_ns.n == 0)
        .map(|r| format!("{} {:?}", r.test, r.class))
        .collect();
    let measured_nothing = || {
        no_samples(
            &empty,
            &format!(
                "took no sample within --time-limit {}",
                format_duration_ns(args.time_limit)
            ),
        )
    };
    let mut out = io::stdout().lock();
    if args.json {
        let report = LatencyReport {
            header: &header,
            cpu,
            iterations: args.iterations,
            period_ns: args.period,
            results: &rows,
            priority_inversion: &inversion,
            skipped: &skipped,
        };
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
        return measured_nothing();
    }
    let title = format!(
        "rtemu lab latency: threads pinned to CPU {cpu}, {} samples per test, preemption period {}",
        args.iterations,
        format_duration_ns(args.period)
    );
    print_header(&mut out, &title, &header)?;
    writeln!(
        out,
        "{:<12} {:<12} {:>7} │ {:>9} {:>9} {:>9} {:>9} {:>9} {:>10}",
        "test", "class", "n", "min", "avg", "p50", "p99", "p99.9", "max"
    )?;
    writeln!(
        out,
        "{:<12} {:<12} {:>7} │ {:>61}",
        "", "", "", "latency in µs"
    )?;
    for r in &rows {
        let d = &r.latency_ns;
        let class = match r.class {
            Class::Other => "SCHED_OTHER",
            Class::Fifo => "SCHED_FIFO",
        };
        if d.n == 0 {
            writeln!(out, "{:<12} {:<12} {:>7} │ no samples", r.test, class, 0)?;
            continue;
        }
        writeln!(
            out,
            "{:<12} {:<12} {:>7} │ {:>9} {:>9} {:>9} {:>9} {:>9} {:>10}",
            r.test,
            class,
            d.n,
            us_i(d.min_ns),
            us(r.mean_ns),
            us_i(d.p50_ns),
            us_i(d.p99_ns),
            us_i(d.p99_9_ns),
            us_i(d.max_ns),
        )?;
    }
    if !inversion.is_empty() {
        writeln!(
            out,
            "\npriority inversion (SCHED_FIFO 10/20/30 on CPU {cpu}, critical section 2 ms, watchdog {}):",
            format_duration_ns(args.watchdog)
        )?;
        for r in &inversion {
            let protocol = inversion_lock(r);
            let verdict = match (r.watchdog_fired, r.lock) {
                (true, InversionLock::Spin) => {
                    "INVERSION: the spinning waiter kept the lock holder off the CPU until the \
                     watchdog ended it"
                }
                (true, _) => {
                    "INVERSION: the medium thread starved the lock holder until the watchdog \
                     ended it"
                }
                (false, InversionLock::Inherit) => {
                    "no inversion: the holder was boosted and released the lock"
                }
                (false, _) => "no inversion: the holder released the lock in time",
            };
            writeln!(
                out,
                "  {protocol:<21} high thread waited {:>10} µs   {verdict}",
                us(r.high_wait_ns as f64)
            )?;
        }
    }
    for line in &skipped {
        writeln!(out, "skipped     {line}")?;
    }
    measured_nothing()
}

/// The lock of a priority-inversion run, as the report names it.
fn inversion_lock(r: &InversionResult) -> &'static str {
    r.lock.name()
}

#[derive(Serialize)]
struct DeadlineReport<'a> {
    header: &'a Header,
    results: &'a [DeadlineResult],
    skipped: &'a [String],
}

fn run_deadline(args: &DeadlineArgs) -> anyhow::Result<()> {
    let period_ns = 1_000_000_000 / args.rate;
    let request = RtRequest {
        mlock: !args.no_mlock,
        dma_latency: !args.no_dma_latency,
        ..RtRequest::default()
    };
    if let Some(path) = &args.output.plot {
        plot::Format::of(path)?;
    }
    let (setup, _load, header) = prepare_with(&request, None, None)?;
    let mut runs = Vec::new();
    let mut skipped = Vec::new();
    if args.sweep {
        let cpus = header.cpus;
        let threads = if args.sweep_threads.is_empty() {
            vec![1, cpus, 2 * cpus]
        } else {
            args.sweep_threads.clone()
        };
        let mut policies = vec![None];
        if rt::fifo_permitted() {
            policies.push(Some(args.fifo.unwrap_or(80)));
        } else {
            skipped.push("SCHED_FIFO not permitted (run as root or grant CAP_SYS_NICE): SCHED_FIFO column skipped".to_owned());
        }
        for &size in &args.sweep_sizes {
            for &t in &threads {
                for &fifo in &policies {
                    runs.push((size, t, Mode::RealTime { period_ns }, fifo));
                }
            }
        }
    } else {
        let size = args.quadrant_nodes as usize;
        let t = args.threads as usize;
        if matches!(args.mode, DeadlineMode::Realtime | DeadlineMode::Both) {
            runs.push((size, t, Mode::RealTime { period_ns }, args.fifo));
        }
        if matches!(args.mode, DeadlineMode::Fast | DeadlineMode::Both) {
            runs.push((size, t, Mode::RealFast, args.fifo));
        }
    }
    let bar = progress(runs.len());
    let mut results = Vec::with_capacity(runs.len());
    for &(size, threads, mode, fifo_priority) in &runs {
        bar.set_message(format!("{} nodes, {threads} threads", 4 * size));
        // The model's time step is the release period, as in the paper (10 ms at 100 Hz,
        // 0.5 ms for its 2 kHz pretest).
        let params = TireParams {
            dt: period_ns as f64 / 1e9,
            ..TireParams::with_quadrant_nodes(size)
        };
        let tire = Tire::new(params)?;
        let config = DeadlineConfig {
            threads,
            steps: args.steps as usize,
            mode,
            fifo_priority,
        };
        results.push(deadline::run(&tire, &config)?.0);
        bar.inc(1);
    }
    bar.finish_and_clear();
    drop(setup);
    if let Some(path) = &args.output.csv {
        write_csv(path, |out| {
            writeln!(out, "nodes,threads,policy,mode,steps,missed,longest_miss_run,release_p99_ns,compute_p50_ns,compute_max_ns,response_p50_ns,response_p99_ns,response_max_ns,total_ns")?;
            for r in &results {
                let mode = match r.mode {
                    Mode::RealTime { .. } => "real-time",
                    Mode::RealFast => "real-fast",
                };
                let (missed, run) = r.misses.map_or((0, 0), |m| (m.missed, m.longest_run));
                writeln!(
                    out,
                    "{},{},{},{mode},{},{missed},{run},{},{},{},{},{},{},{}",
                    r.nodes,
                    r.threads,
                    r.policy,
                    r.steps,
                    r.release_latency_ns.p99_ns,
                    r.compute_ns.p50_ns,
                    r.compute_ns.max_ns,
                    r.response_ns.p50_ns,
                    r.response_ns.p99_ns,
                    r.response_ns.max_ns,
                    r.total_ns
                )?;
            }
            Ok(())
        })?;
    }
    if let Some(path) = &args.output.plot {
        figures::deadline_sweep(path, &results)?;
    }
    let mut out = io::stdout().lock();
    if args.output.json {
        let report = DeadlineReport {
            header: &header,
            results: &results,
            skipped: &skipped,
        };
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
        return Ok(());
    }
    let title = format!(
        "rtemu lab deadline: tire model, {} steps, real-time period {} ({} Hz)",
        args.steps,
        format_duration_ns(period_ns),
        args.rate
    );
    print_header(&mut out, &title, &header)?;
    writeln!(
        out,
        "{:>7} {:>7} {:<13} {:<9} │ {:>7} {:>7} {:>7} │ {:>9} {:>9} {:>9} {:>9} │ {:>8} {:>9} {:>8}",
        "nodes", "threads", "policy", "mode", "missed", "%", "run", "rel p99", "comp p50", "resp p99",
        "resp max", "total s", "steps/s", "× RT"
    )?;
    writeln!(
        out,
        "{:>7} {:>7} {:<13} {:<9} │ {:>23} │ {:>39} │",
        "", "", "", "", "deadlines", "µs"
    )?;
    for r in &results {
        let (mode, missed, pct, run) = match r.misses {
            Some(m) => (
                "real-time",
                m.missed.to_string(),
                format!("{:.1}", 100.0 * m.missed as f64 / r.steps as f64),
                m.longest_run.to_string(),
            ),
            None => ("real-fast", "-".into(), "-".into(), "-".into()),
        };
        writeln!(
            out,
            "{:>7} {:>7} {:<13} {:<9} │ {:>7} {:>7} {:>7} │ {:>9} {:>9} {:>9} {:>9} │ {:>8.2} {:>9.0} {:>8.1}",
            r.nodes,
            r.threads,
            r.policy,
            mode,
            missed,
            pct,
            run,
            match r.misses {
                Some(_) => us_i(r.release_latency_ns.p99_ns),
                None => "-".to_owned(),
            },
            us_i(r.compute_ns.p50_ns),
            us_i(r.response_ns.p99_ns),
            us_i(r.response_ns.max_ns),
            r.total_ns as f64 / 1e9,
            r.steps_per_s,
            r.times_real_time,
        )?;
    }
    for line in &skipped {
        writeln!(out, "skipped     {line}")?;
    }
    Ok(())
}

#[derive(Serialize)]
struct DoctorReport<'a> {
    header: &'a Header,
    facts: &'a Facts,
    sleep_test: &'a MethodResult,
    advice: &'a [String],
}

fn run_doctor(args: &DoctorArgs) -> anyhow::Result<()> {
    let facts = Facts::probe();
    let bar = ProgressBar::new_spinner();
    bar.set_message(format!("sleep test, {}", format_duration_ns(args.duration)));
    let test = doctor::sleep_test(args.duration, facts.fifo_permitted)?;
    bar.finish_and_clear();
    let advice = doctor::advise(&facts);
    // The verdict is about the machine as it is: the header shows this process unchanged.
    let header = Header::probe(&RtSetup::default(), 0);
    if let Some(path) = &args.csv {
        write_csv(path, |out| {
            writeln!(
                out,
                "preemption,clocksource,hz,timer_slack_ns,rt_runtime_us,isolated_cpus,virtualization,\
                 fifo_permitted,mlock_permitted,method,completed,min_ns,p50_ns,p90_ns,p99_ns,\
                 p99_9_ns,max_ns"
            )?;
            let text = |v: Option<String>| v.unwrap_or_default().replace(',', ";");
            let d = &test.error_ns;
            writeln!(
                out,
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                facts.preemption.replace(',', ";"),
                text(facts.clocksource.clone()),
                text(facts.hz.map(|hz| hz.to_string())),
                text(facts.timer_slack_ns.map(|ns| ns.to_string())),
                text(facts.rt_runtime_us.map(|us| us.to_string())),
                text(facts.isolated_cpus.clone()),
                text(facts.virtualization.clone()),
                facts.fifo_permitted,
                facts.mlock_permitted,
                test.method,
                test.completed,
                d.min_ns,
                d.p50_ns,
                d.p90_ns,
                d.p99_ns,
                d.p99_9_ns,
                d.max_ns
            )
        })?;
    }
    let mut out = io::stdout().lock();
    if args.json {
        let report = DoctorReport {
            header: &header,
            facts: &facts,
            sleep_test: &test,
            advice: &advice,
        };
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
        return Ok(());
    }
    let yes = |b: bool| if b { "yes" } else { "no" };
    let or_unknown = |v: Option<String>| v.unwrap_or_else(|| "unknown".to_owned());
    print_header(
        &mut out,
        &format!(
            "rtemu lab doctor: a {} sleep test, then the verdict",
            format_duration_ns(args.duration)
        ),
        &header,
    )?;
    writeln!(out, "preemption     {}", facts.preemption)?;
    writeln!(
        out,
        "clocksource    {}",
        or_unknown(facts.clocksource.clone())
    )?;
    writeln!(
        out,
        "HZ             {}",
        or_unknown(facts.hz.map(|hz| hz.to_string()))
    )?;
    writeln!(
        out,
        "timer slack    {}",
        or_unknown(
            facts
                .timer_slack_ns
                .map(|ns| format_duration_ns(ns).to_string())
        )
    )?;
    writeln!(
        out,
        "RT throttling  {}",
        match facts.rt_runtime_us {
            Some(-1) => "off".to_owned(),
            Some(us) => format!("{us} µs per second"),
            None => "unknown".to_owned(),
        }
    )?;
    writeln!(
        out,
        "isolated CPUs  {}",
        match facts.isolated_cpus.as_deref() {
            Some("") | None => "none",
            Some(list) => list,
        }
    )?;
    writeln!(
        out,
        "virtualised    {}",
        facts.virtualization.as_deref().unwrap_or("no")
    )?;
    writeln!(
        out,
        "SCHED_FIFO     {}    mlockall {}",
        yes(facts.fifo_permitted),
        yes(facts.mlock_permitted)
    )?;
    let d = &test.error_ns;
    writeln!(
        out,
        "\nsleep test     {} requests with {}{}: late by {} µs median, {} µs p99, {} µs max",
        test.completed,
        test.method,
        if facts.fifo_permitted {
            " under SCHED_FIFO, timer slack 1ns"
        } else {
            " under SCHED_OTHER"
        },
        us_i(d.p50_ns),
        us_i(d.p99_ns),
        us_i(d.max_ns),
    )?;
    writeln!(
        out,
        "verdict        rtemu can release packets within {} µs of their time in 99 % of cases \
         and within {} µs in every case measured",
        us_i(d.p99_ns),
        us_i(d.max_ns)
    )?;
    if !advice.is_empty() {
        writeln!(out, "\nto do better:")?;
        for line in &advice {
            writeln!(out, "  - {line}")?;
        }
    }
    Ok(())
}

#[derive(Serialize)]
struct RttReport<'a> {
    header: &'a Header,
    protocol: &'a str,
    target: String,
    half_rtt: bool,
    /// Why the kernel's columns are empty, when they are.
    kernel_timestamps: Option<&'a str>,
    results: &'a [SizeResult],
}

impl<'a> RttReport<'a> {
    fn of(header: &'a Header, half_rtt: bool, run: &'a RttRun) -> RttReport<'a> {
        RttReport {
            header,
            protocol: run.config.target.protocol(),
            target: run.config.target.to_string(),
            half_rtt,
            kernel_timestamps: run.sweep.kernel_notice.as_deref(),
            results: &run.sweep.results,
        }
    }
}

/// Several protocols' reports as one JSON object, each under its protocol's name (`udp`,
/// `raw`), in the order they ran.
struct ByProtocol<'a>(Vec<RttReport<'a>>);

impl Serialize for ByProtocol<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|r| (r.protocol, r)))
    }
}

/// One protocol's sweep: what was asked and what came back.
struct RttRun {
    config: RttConfig,
    sweep: Sweep,
}

fn run_rtt(args: &RttArgs) -> anyhow::Result<()> {
    let protocol = args.protocol()?;
    if let Some(from) = &args.from {
        return lab_rtt::run(args, protocol, from);
    }
    let to: Option<std::net::SocketAddr> = args
        .to
        .as_deref()
        .map(|to| {
            to.parse().with_context(|| {
                format!("--to {to}: expected ADDR:PORT (a node name needs --from)")
            })
        })
        .transpose()?;
    // The local echo lives for the run at most; ten minutes bounds a forgotten one.
    let local = match (protocol.udp(), to) {
        (true, None) => Some(Echo::udp("127.0.0.1:0".parse()?, 600_000_000_000)?),
        _ => None,
    };
    let configs: Vec<RttConfig> = rtt_targets(args, protocol, to, local.as_ref())
        .into_iter()
        .map(|target| args.config(target))
        .collect();
    let sizes = total_sizes(&configs)?;
    if let Some(path) = &args.output.plot {
        plot::Format::of(path)?;
    }
    let (setup, load, header) = prepare(&args.rt)?;
    let sweeps = measure_rtt(&configs, sizes);
    drop(load);
    drop(setup);
    let local_echo = local.is_some();
    drop(local);
    let mut runs: Vec<RttRun> = configs
        .into_iter()
        .zip(sweeps?)
        .map(|(config, sweep)| RttRun { config, sweep })
        .collect();
    if args.half_rtt {
        for run in &mut runs {
            run.sweep.results.iter_mut().for_each(SizeResult::halve);
        }
    }
    if let Some(path) = &args.output.csv {
        write_csv(path, |out| write_rtt_csv(out, &runs))?;
    }
    if let Some(path) = &args.output.plot {
        figures::rtt(path, &runs)?;
    }
    let unanswered: Vec<String> = runs
        .iter()
        .flat_map(|run| {
            let protocol = run.config.target.protocol();
            run.sweep
                .results
                .iter()
                .filter(|r| r.received == 0)
                .map(move |r| format!("{protocol} size {}", r.size))
        })
        .collect();
    let measured_nothing = || {
        no_samples(
            &unanswered,
            &format!(
                "got no reply within --timeout {}",
                format_duration_ns(args.timeout)
            ),
        )
    };
    let mut out = io::stdout().lock();
    if args.output.json {
        let report = |run| RttReport::of(&header, args.half_rtt, run);
        // One protocol keeps its report's own shape; both nest theirs by protocol.
        match runs.as_slice() {
            [run] => serde_json::to_writer_pretty(&mut out, &report(run))?,
            runs => serde_json::to_writer_pretty(
                &mut out,
                &ByProtocol(runs.iter().map(report).collect()),
            )?,
        }
        writeln!(out)?;
        return measured_nothing();
    }
    print_rtt(&mut out, args, &header, local_echo, &runs)?;
    measured_nothing()
}

/// How many sizes the sweeps measure in all; an error for sizes one protocol cannot sweep.
fn total_sizes(configs: &[RttConfig]) -> anyhow::Result<usize> {
    let sizes = configs
        .iter()
        .map(|c| c.sizes().map(|s| s.len()))
        .sum::<Result<usize, _>>();
    match sizes {
        Err(e) if configs.len() > 1 => Err(anyhow::Error::new(e).context(
            "--min-size, --max-size and --step apply to each protocol in its own unit (UDP \
             payload, Ethernet frame)",
        )),
        sizes => Ok(sizes?),
    }
}

/// Where the sweeps of `protocol` go, UDP first: `--to`, else the `local` echo; the raw echo at
/// `--raw`/`--peer`. [`RttArgs::protocol`] made sure the flags each needs are there.
fn rtt_targets(
    args: &RttArgs,
    protocol: Protocol,
    to: Option<std::net::SocketAddr>,
    local: Option<&Echo>,
) -> Vec<Endpoint> {
    let mut targets = Vec::new();
    if protocol.udp() {
        targets.extend(
            to.map(Endpoint::Udp)
                .or_else(|| local.map(|echo| echo.local().clone())),
        );
    }
    if protocol.raw() {
        if let (Some(interface), Some(mac)) = (&args.raw, args.peer) {
            targets.push(Endpoint::Raw {
                interface: interface.clone(),
                mac,
            });
        }
    }
    targets
}

/// Runs each sweep in turn behind one progress bar of `sizes` steps.
fn measure_rtt(configs: &[RttConfig], sizes: usize) -> Result<Vec<Sweep>, rtt::RttError> {
    let bar = progress(sizes);
    let sweeps = configs
        .iter()
        .map(|config| {
            let protocol = config.target.protocol();
            rtt::run(config, &mut |size| {
                bar.set_message(format!("{protocol} {size} bytes"));
                bar.inc(1);
            })
        })
        .collect();
    bar.finish_and_clear();
    sweeps
}

/// One row per protocol and size, the protocol first.
fn write_rtt_csv(out: &mut impl Write, runs: &[RttRun]) -> io::Result<()> {
    writeln!(
        out,
        "protocol,size,sent,received,lost,duplicates,reordered,best_ns,mean_ns,worst_ns,\
         p50_ns,p99_ns,p99_9_ns,kernel_stamped,kernel_best_ns,kernel_mean_ns,\
         kernel_worst_ns,kernel_p50_ns,kernel_p99_ns,kernel_p99_9_ns"
    )?;
    for run in runs {
        let protocol = run.config.target.protocol();
        for r in &run.sweep.results {
            let d = &r.rtt_ns;
            // Empty kernel fields when the kernel gave no stamps.
            let kernel = match (&r.kernel_rtt_ns, r.kernel_mean_ns) {
                (Some(k), Some(mean)) => format!(
                    "{},{},{mean:.0},{},{},{},{}",
                    k.n, k.min_ns, k.max_ns, k.p50_ns, k.p99_ns, k.p99_9_ns
                ),
                _ => "0,,,,,,".to_owned(),
            };
            // Empty figures, not zeros, for a size with no reply.
            let app = if d.n == 0 {
                ",,,,,".to_owned()
            } else {
                format!(
                    "{},{:.0},{},{},{},{}",
                    d.min_ns, r.mean_ns, d.max_ns, d.p50_ns, d.p99_ns, d.p99_9_ns
                )
            };
            writeln!(
                out,
                "{protocol},{},{},{},{},{},{},{app},{kernel}",
                r.size, r.sent, r.received, r.lost, r.duplicates, r.reordered,
            )?;
        }
    }
    Ok(())
}

/// The text report: the header once, then a table per protocol (titled by its target when
/// there are two).
fn print_rtt(
    out: &mut impl Write,
    args: &RttArgs,
    header: &Header,
    local_echo: bool,
    runs: &[RttRun],
) -> io::Result<()> {
    let targets: Vec<String> = runs
        .iter()
        .map(|run| match (&run.config.target, local_echo) {
            (Endpoint::Udp(_), true) => format!("{} (local echo)", run.config.target),
            (target, _) => target.to_string(),
        })
        .collect();
    let title = format!(
        "rtemu lab rtt: {}, {} probes per size after {} discarded, {}",
        targets.join(", then "),
        args.count,
        args.warmup,
        if args.half_rtt {
            "one-way (half the round trip)"
        } else {
            "round trip"
        }
    );
    print_header(out, &title, header)?;
    for (run, target) in runs.iter().zip(&targets) {
        if runs.len() > 1 {
            let what = run.config.target.size_limits().what;
            writeln!(out, "{target}: size = {what}\n")?;
        }
        print_rtt_table(out, &run.sweep)?;
        if runs.len() > 1 {
            writeln!(out)?;
        }
    }
    Ok(())
}

/// One sweep's table: the counts, the application's figures and the kernel's.
fn print_rtt_table(out: &mut impl Write, sweep: &Sweep) -> io::Result<()> {
    if let Some(notice) = &sweep.kernel_notice {
        writeln!(out, "notice      {notice}\n")?;
    }
    writeln!(
        out,
        "{:>6} {:>6} {:>6} {:>5} {:>5} {:>5} │ {:>9} {:>9} {:>9} │ {:>9} {:>9} {:>9} │ {:>9} {:>9} {:>9} │ {:>9}",
        "size",
        "sent",
        "recv",
        "lost",
        "dup",
        "reord",
        "best",
        "average",
        "worst",
        "p50",
        "p99",
        "p99.9",
        "best",
        "average",
        "worst",
        "own"
    )?;
    writeln!(
        out,
        "{:>6} {:>31} │ {:>63} │ {:>29} │ {:>9}",
        "bytes", "", "application, µs", "kernel stamps, µs", "app−kern"
    )?;
    for r in &sweep.results {
        if r.received == 0 {
            writeln!(
                out,
                "{:>6} {:>6} {:>6} {:>5} {:>5} {:>5} │ no replies, no samples",
                r.size, r.sent, r.received, r.lost, r.duplicates, r.reordered
            )?;
            continue;
        }
        let d = &r.rtt_ns;
        let (k_best, k_mean, k_worst, own) = match (&r.kernel_rtt_ns, r.kernel_mean_ns) {
            (Some(k), Some(mean)) => (
                us_i(k.min_ns),
                us(mean),
                us_i(k.max_ns),
                us(r.mean_ns - mean),
            ),
            _ => Default::default(),
        };
        writeln!(
            out,
            "{:>6} {:>6} {:>6} {:>5} {:>5} {:>5} │ {:>9} {:>9} {:>9} │ {:>9} {:>9} {:>9} │ {:>9} {:>9} {:>9} │ {:>9}",
            r.size,
            r.sent,
            r.received,
            r.lost,
            r.duplicates,
            r.reordered,
            us_i(d.min_ns),
            us(r.mean_ns),
            us_i(d.max_ns),
            us_i(d.p50_ns),
            us_i(d.p99_ns),
            us_i(d.p99_9_ns),
            k_best,
            k_mean,
            k_worst,
            own,
        )?;
    }
    Ok(())
}

fn run_echo(args: &EchoArgs) -> anyhow::Result<()> {
    let echo = match &args.raw {
        Some(interface) => Echo::raw(interface, args.duration)?,
        None => Echo::udp(args.listen, args.duration)?,
    };
    eprintln!(
        "rtemu lab echo: echoing {} for {}",
        echo.local(),
        format_duration_ns(args.duration)
    );
    let echoed = echo.wait()?;
    eprintln!("rtemu lab echo: {echoed} probes echoed");
    Ok(())
}

fn write_csv(
    path: &std::path::Path,
    body: impl FnOnce(&mut BufWriter<super::output::Output>) -> io::Result<()>,
) -> anyhow::Result<()> {
    let mut out = BufWriter::new(super::output::Output::create(path, &[])?);
    body(&mut out)
        .and_then(|()| out.flush())
        .with_context(|| format!("writing {}", path.display()))?;
    out.into_inner().map_err(|e| e.into_error())?.commit()
}

/// `rtemu lab rtt --lab LAB --from A --to B`: the sweep between two nodes of a running lab.
mod lab_rtt {
    use std::ffi::OsString;
    use std::io::{BufRead as _, BufReader};
    use std::net::{IpAddr, SocketAddr};
    use std::process::{Child, Stdio};

    use anyhow::Context as _;
    use rtemu_lab::rtt::{Endpoint, Mac};
    use rtemu_topo::lab;
    use rtemu_topo::state::State;
    use rtemu_topo::topology::Topology;

    use super::{Protocol, RttArgs};

    /// The address `to` is reached at from `from`: its first address on a link or LAN both are
    /// on (IPv4 before IPv6), else its first address at all. `None` when a node is unknown or
    /// `to` has no address.
    pub fn peer_address(topo: &Topology, from: &str, to: &str) -> Option<IpAddr> {
        let index = |name: &str| topo.nodes.iter().position(|n| n.name == name);
        let (a, b) = (index(from)?, index(to)?);
        let first = |m: &rtemu_topo::topology::Attachment| {
            m.ipv4
                .map(|n| IpAddr::V4(n.addr()))
                .or(m.ipv6.map(|n| IpAddr::V6(n.addr())))
        };
        let shared = topo
            .segments
            .iter()
            .filter(|seg| seg.members.iter().any(|m| m.node == a))
            .flat_map(|seg| seg.members.iter().filter(|m| m.node == b))
            .find_map(first);
        shared
            .or_else(|| {
                topo.segments
                    .iter()
                    .flat_map(|seg| seg.members.iter().filter(|m| m.node == b))
                    .find_map(first)
            })
            .or_else(|| topo.nodes[b].loopback.first().map(|n| n.addr()))
    }

    /// The interfaces of `from` and `to` on the first link or LAN both are on, in that
    /// order: where raw Ethernet frames leave `from` and arrive at `to` (they cross no
    /// router). `None` when a node is unknown or the two share no segment.
    pub fn facing_interfaces(topo: &Topology, from: &str, to: &str) -> Option<(String, String)> {
        let index = |name: &str| topo.nodes.iter().position(|n| n.name == name);
        let (a, b) = (index(from)?, index(to)?);
        topo.segments.iter().find_map(|seg| {
            let on = |node: usize| seg.members.iter().find(|m| m.node == node);
            Some((on(a)?.ifname.clone(), on(b)?.ifname.clone()))
        })
    }

    /// This command's arguments without `--lab`, `--from`, `--to`, `--port` and `--protocol`
    /// (and their values), for the sweeps run inside the `--from` node, which are given
    /// their protocol and echo servers explicitly.
    pub fn forwarded_args(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
        const DROP: [&str; 5] = ["--lab", "--from", "--to", "--port", "--protocol"];
        let mut out = Vec::new();
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let text = arg.to_string_lossy();
            if DROP.contains(&text.as_ref()) {
                args.next();
            } else if !DROP
                .iter()
                .any(|flag| text.starts_with(&format!("{flag}=")))
            {
                out.push(arg);
            }
        }
        out
    }

    /// An echo server in the `--to` node: killed and reaped when dropped, whatever happened.
    struct EchoServer(Child);

    impl Drop for EchoServer {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    /// Starts the echo server `argv` (`rtemu lab echo …`) in node `node` and waits until it
    /// serves.
    fn start_echo(state: &State, node: &str, argv: &[String]) -> anyhow::Result<EchoServer> {
        let mut cmd = lab::node_command(state, node, argv)?;
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut echo = EchoServer(
            cmd.spawn()
                .with_context(|| format!("starting `rtemu lab echo` in node `{node}`"))?,
        );
        // It says so once it serves; an error or an early exit closes the pipe instead.
        let mut first = String::new();
        let stderr = echo.0.stderr.take().context("the echo server's stderr")?;
        BufReader::new(stderr)
            .read_line(&mut first)
            .context("reading the echo server's output")?;
        if !first.contains("echoing") {
            anyhow::bail!(
                "`rtemu lab echo` in node `{node}` did not start: {}",
                first.trim()
            );
        }
        Ok(echo)
    }

    /// The Ethernet address of `interface` in node `node`, read from the node's own sysfs.
    fn interface_mac(state: &State, node: &str, interface: &str) -> anyhow::Result<Mac> {
        let path = format!("/sys/class/net/{interface}/address");
        let what = || format!("reading {path} in node `{node}`");
        let out = lab::node_command(state, node, &["cat".to_owned(), path.clone()])?
            .stdin(Stdio::null())
            .output()
            .with_context(what)?;
        if !out.status.success() {
            anyhow::bail!(
                "{}: {}",
                what(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .with_context(what)
    }

    /// One sweep between the two nodes: where the probes go from `--from`, the arguments of
    /// the echo server in `--to`, and where it runs, in words.
    struct Leg {
        target: Endpoint,
        echo_args: Vec<String>,
        description: String,
    }

    /// The UDP sweep: to `to`'s address towards `from`, at `--port`.
    fn udp_leg(state: &State, args: &RttArgs, from: &str, to: &str) -> anyhow::Result<Leg> {
        let addr = peer_address(&state.topology, from, to).with_context(|| {
            format!(
                "lab `{}`: no address of node `{to}` (or no node `{from}` or `{to}`)",
                state.lab
            )
        })?;
        let target = SocketAddr::new(addr, args.port);
        Ok(Leg {
            target: Endpoint::Udp(target),
            echo_args: vec!["--listen".into(), target.to_string()],
            description: format!("from node `{from}` to node `{to}` at {target}"),
        })
    }

    /// The raw Ethernet sweep: from `from`'s interface facing `to` to the MAC address of
    /// `to`'s interface facing `from`.
    fn raw_leg(state: &State, from: &str, to: &str) -> anyhow::Result<Leg> {
        let (near, far) = facing_interfaces(&state.topology, from, to).with_context(|| {
            format!(
                "lab `{}`: nodes `{from}` and `{to}` share no link or LAN (or one is not a \
                 node), and raw Ethernet frames cross no router: pick two nodes on one \
                 segment, or use --protocol udp",
                state.lab
            )
        })?;
        let mac = interface_mac(state, to, &far)?;
        Ok(Leg {
            description: format!(
                "raw Ethernet from node `{from}`'s {near} to node `{to}`'s {far} at {mac}"
            ),
            echo_args: vec!["--raw".into(), far],
            target: Endpoint::Raw {
                interface: near,
                mac,
            },
        })
    }

    pub fn run(args: &RttArgs, protocol: Protocol, from: &str) -> anyhow::Result<()> {
        let to = args.to.as_deref().context("--from needs --to NODE")?;
        let state = lab::resolve_lab(args.lab.as_deref())?;
        let mut legs = Vec::new();
        if protocol.udp() {
            legs.push(udp_leg(&state, args, from, to)?);
        }
        if protocol.raw() {
            legs.push(raw_leg(&state, from, to)?);
        }
        // Refuse bad sizes here, before anything starts in the lab.
        let configs: Vec<_> = legs
            .iter()
            .map(|leg| args.config(leg.target.clone()))
            .collect();
        let sizes = super::total_sizes(&configs)? as u64;
        let exe = std::env::current_exe().context("finding this program")?;
        let exe = exe.to_string_lossy().into_owned();
        // The echo servers' own bound: the longest the sweeps can take, plus a minute. They
        // are killed as soon as the sweeps end; the bound covers this process being killed.
        let bound_ns = sizes
            .saturating_mul(args.count + args.warmup)
            .saturating_mul(args.timeout)
            .saturating_add(60_000_000_000);
        let mut echoes = Vec::with_capacity(legs.len());
        for leg in &legs {
            let mut argv = vec![exe.clone(), "lab".into(), "echo".into()];
            argv.extend(leg.echo_args.iter().cloned());
            argv.extend(["--duration".into(), format!("{bound_ns}ns")]);
            echoes.push(start_echo(&state, to, &argv)?);
            eprintln!("rtemu lab rtt: lab `{}`, {}", state.lab, leg.description);
        }
        let mut argv = vec![exe];
        argv.extend(
            forwarded_args(std::env::args_os().skip(1))
                .into_iter()
                .map(|a| a.to_string_lossy().into_owned()),
        );
        argv.extend(["--protocol".to_owned(), protocol.name().to_owned()]);
        for leg in &legs {
            match &leg.target {
                Endpoint::Udp(target) => argv.extend(["--to".to_owned(), target.to_string()]),
                Endpoint::Raw { interface, mac } => argv.extend([
                    "--raw".to_owned(),
                    interface.clone(),
                    "--peer".to_owned(),
                    mac.to_string(),
                ]),
            }
        }
        let status = lab::node_command(&state, from, &argv)?
            .status()
            .with_context(|| format!("running the sweep in node `{from}`"))?;
        drop(echoes);
        anyhow::ensure!(
            status.success(),
            "the sweep in node `{from}` failed: {status}"
        );
        Ok(())
    }
}

/// The lab's figures, built from its results and drawn by [`super::plot`].
mod figures {
    use std::path::Path;

    use rtemu_lab::deadline::DeadlineResult;
    use rtemu_lab::linerate::PointResult;
    use rtemu_lab::rtt::{Endpoint, SizeResult};
    use rtemu_lab::sleep::SleepSamples;

    use super::RttRun;
    use crate::cmd::plot::{Axis, Cell, Chart, HeatMap, Series, Style};

    /// Requests shown per method, as in the paper's Figure 3.
    const FIRST_REQUESTS: usize = 100;

    /// A heat map of missed deadlines: model sizes × (threads, policy), the RTOS paper's
    /// Figures 11–12. Real-time results only.
    pub fn deadline_sweep(path: &Path, results: &[DeadlineResult]) -> anyhow::Result<()> {
        let timed: Vec<&DeadlineResult> = results.iter().filter(|r| r.misses.is_some()).collect();
        let mut rows: Vec<usize> = timed.iter().map(|r| r.nodes).collect();
        rows.sort_unstable();
        rows.dedup();
        let mut columns: Vec<(usize, String)> = timed
            .iter()
            .map(|r| (r.threads, r.policy.clone()))
            .collect();
        columns.sort();
        columns.dedup();
        if rows.is_empty() {
            anyhow::bail!("--plot: no real-time results to draw");
        }
        let cells = timed
            .iter()
            .map(|r| {
                let missed = r.misses.map_or(0, |m| m.missed);
                let share = missed as f64 / r.steps.max(1) as f64;
                Cell {
                    column: columns
                        .iter()
                        .position(|c| c.0 == r.threads && c.1 == r.policy)
                        .unwrap_or_default(),
                    row: rows.iter().position(|&n| n == r.nodes).unwrap_or_default(),
                    heat: share,
                    label: format!("{:.1}", 100.0 * share),
                }
            })
            .collect();
        HeatMap {
            title: "missed deadlines (% of steps)".into(),
            columns: columns
                .iter()
                .map(|(t, p)| format!("{t} thr {p}"))
                .collect(),
            rows: rows.iter().map(|n| format!("{n} nodes")).collect(),
            cells,
        }
        .draw(path)
    }

    /// Requested vs actual sleep of the first requests of each method (Figure 3).
    pub fn sleep(path: &Path, samples: &[SleepSamples]) -> anyhow::Result<()> {
        let series = samples
            .iter()
            .map(|s| {
                let points = s.requested.iter().zip(&s.actual).take(FIRST_REQUESTS);
                let points = points.map(|(&x, &y)| (x as f64 / 1e3, y as f64 / 1e3));
                Series {
                    name: s.method.to_string(),
                    points: points.collect(),
                    style: Style::Points,
                }
            })
            .collect();
        Chart {
            title: "requested vs actual sleep, first 100 requests per method".into(),
            x: Axis::linear("requested, µs"),
            y: Axis::linear("actual, µs"),
            series,
            diagonal: true,
        }
        .draw(path)
    }

    /// Requested vs achieved line rate per method and pacer (Figure 1).
    pub fn linerate(path: &Path, results: &[PointResult]) -> anyhow::Result<()> {
        let mut series: Vec<Series> = Vec::new();
        for r in results {
            let name = format!("{} {}", r.method, r.pacer);
            let point = (r.requested_bps as f64, r.achieved_bps);
            match series.iter_mut().find(|s| s.name == name) {
                Some(s) => s.points.push(point),
                None => series.push(Series {
                    name,
                    points: vec![point],
                    style: Style::Points,
                }),
            }
        }
        Chart {
            title: "requested vs achieved line rate".into(),
            x: Axis::log("requested, bit/s"),
            y: Axis::log("achieved, bit/s"),
            series,
            diagonal: true,
        }
        .draw(path)
    }

    /// Best, average and worst round trip vs size (the UDP paper's figures): for one
    /// protocol against its own size (UDP payload or Ethernet frame) with the kernel's
    /// average where it stamped the probes; for both against the Ethernet frame that carries
    /// the probe, so that the two compare size for size.
    pub fn rtt(path: &Path, runs: &[RttRun]) -> anyhow::Result<()> {
        let chart = match runs {
            [run] => one_protocol(run),
            runs => protocols_compared(runs),
        };
        chart.draw(path)
    }

    /// A curve over the sizes that got replies: `x` and `y` of each, `y` in ns.
    fn curve(
        name: String,
        results: &[SizeResult],
        x: &dyn Fn(&SizeResult) -> f64,
        y: &dyn Fn(&SizeResult) -> Option<f64>,
    ) -> Series {
        Series {
            name,
            points: results
                .iter()
                .filter(|r| r.received > 0)
                .filter_map(|r| Some((x(r), y(r)? / 1e3)))
                .collect(),
            style: Style::Lines,
        }
    }

    /// The paper's three curves, each named `PREFIXbest` and so on.
    fn three_curves(
        prefix: &str,
        results: &[SizeResult],
        x: &dyn Fn(&SizeResult) -> f64,
    ) -> Vec<Series> {
        vec![
            curve(format!("{prefix}best"), results, x, &|r| {
                Some(r.rtt_ns.min_ns as f64)
            }),
            curve(format!("{prefix}average"), results, x, &|r| Some(r.mean_ns)),
            curve(format!("{prefix}worst"), results, x, &|r| {
                Some(r.rtt_ns.max_ns as f64)
            }),
        ]
    }

    /// Log: the worst case is often orders of magnitude above the best.
    fn rtt_axis() -> Axis {
        Axis::log("round trip, µs")
    }

    fn one_protocol(run: &RttRun) -> Chart {
        let results = &run.sweep.results;
        let size = |r: &SizeResult| r.size as f64;
        let mut series = three_curves("", results, &size);
        series.push(curve("kernel average".into(), results, &size, &|r| {
            r.kernel_mean_ns
        }));
        series.retain(|s| !s.points.is_empty());
        let (title, size) = match run.config.target {
            Endpoint::Raw { .. } => ("raw Ethernet round trip vs frame size", "frame, bytes"),
            Endpoint::Udp(_) => ("UDP round trip vs payload size", "payload, bytes"),
        };
        Chart {
            title: title.into(),
            x: Axis::linear(size),
            y: rtt_axis(),
            series,
            diagonal: false,
        }
    }

    fn protocols_compared(runs: &[RttRun]) -> Chart {
        let mut series = Vec::new();
        let mut overheads = Vec::new();
        for run in runs {
            let target = &run.config.target;
            let frame = |r: &SizeResult| target.frame_len(r.size) as f64;
            let name = match target {
                Endpoint::Udp(_) => "UDP",
                Endpoint::Raw { .. } => "raw",
            };
            series.extend(three_curves(
                &format!("{name} "),
                &run.sweep.results,
                &frame,
            ));
            if let Endpoint::Udp(_) = target {
                overheads.push(format!("UDP: payload + {}", target.frame_overhead()));
            }
        }
        series.retain(|s| !s.points.is_empty());
        overheads.push("at least 60".into());
        Chart {
            title: "UDP and raw Ethernet round trip vs frame size".into(),
            x: Axis::linear(format!(
                "Ethernet frame without FCS, bytes ({})",
                overheads.join(", ")
            )),
            y: rtt_axis(),
            series,
            diagonal: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        lab: LabArgs,
    }

    fn parse(args: &[&str]) -> Result<LabCommand, clap::Error> {
        Cli::try_parse_from(std::iter::once("lab").chain(args.iter().copied()))
            .map(|c| *c.lab.command)
    }

    #[test]
    fn sleep_defaults_are_small_and_complete() {
        let LabCommand::Sleep(args) = parse(&["sleep"]).unwrap() else {
            panic!("not sleep");
        };
        assert_eq!(args.methods.len(), WaitStrategy::ALL.len());
        assert_eq!(args.workload, Workload::Micro);
        assert_eq!(args.count, 200);
        assert_eq!(args.rt.load, None);
    }

    #[test]
    fn series_with_no_samples_fail_the_run_by_name() {
        assert!(no_samples(&[], "measured nothing").is_ok());
        let e = no_samples(
            &["task-switch Fifo".into(), "ipc Other".into()],
            "took no sample within --time-limit 1ms",
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "no samples: task-switch Fifo, ipc Other took no sample within --time-limit 1ms"
        );
    }

    #[test]
    fn duration_flags_take_only_their_range() {
        let parse = duration_in(1_000..=1_000_000);
        assert_eq!(parse("1us"), Ok(1_000));
        assert_eq!(parse("1ms"), Ok(1_000_000));
        for bad in ["0s", "999ns", "2ms"] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains("out of range: give 1us to 1ms"), "{bad}: {e}");
        }
        assert!(parse("5").unwrap_err().contains("unit"));
    }

    #[test]
    fn load_takes_an_optional_thread_count() {
        let LabCommand::Sleep(args) = parse(&["sleep", "--load"]).unwrap() else {
            panic!("not sleep");
        };
        assert_eq!(args.rt.load, Some(None));
        let LabCommand::Sleep(args) = parse(&["sleep", "--load", "3"]).unwrap() else {
            panic!("not sleep");
        };
        assert_eq!(args.rt.load, Some(Some(3)));
    }

    #[test]
    fn deadline_defaults_are_short_and_sweeps_take_lists() {
        let LabCommand::Deadline(args) = parse(&["deadline"]).unwrap() else {
            panic!("not deadline");
        };
        assert_eq!(
            (args.steps, args.rate, args.mode),
            (300, 100, DeadlineMode::Both)
        );
        let LabCommand::Deadline(args) = parse(&[
            "deadline",
            "--sweep",
            "--sweep-sizes",
            "1,10",
            "--sweep-threads",
            "1,4",
        ])
        .unwrap() else {
            panic!("not deadline");
        };
        assert!(args.sweep);
        assert_eq!(
            (args.sweep_sizes, args.sweep_threads),
            (vec![1, 10], vec![1, 4])
        );
        assert!(parse(&["deadline", "--threads", "0"]).is_err());
    }

    #[test]
    fn bad_values_are_refused_with_the_reason() {
        let err = parse(&["sleep", "--methods", "spin,sleeep"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown wait strategy `sleeep`"), "{err}");
        let err = parse(&["sleep", "--fifo", "0"]).unwrap_err().to_string();
        assert!(err.contains("1..=99") || err.contains("1..100"), "{err}");
        let err = parse(&["linerate", "--rates", "10x"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a line rate"), "{err}");
        let err = parse(&["sleep", "--workload", "fixed:5"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("no known unit"), "{err}");
    }

    #[test]
    fn rtt_raw_needs_a_peer_and_defaults_to_frame_sizes() {
        let LabCommand::Rtt(args) =
            parse(&["rtt", "--raw", "eth0", "--peer", "02:00:5e:10:00:01"]).unwrap()
        else {
            panic!("not rtt");
        };
        let mac: Mac = "02:00:5e:10:00:01".parse().unwrap();
        let config = args.config(Endpoint::Raw {
            interface: "eth0".into(),
            mac,
        });
        let sizes = config.sizes().unwrap();
        assert_eq!((sizes.len(), sizes[0], sizes[10]), (11, 64, 1514));
        let config = args.config(Endpoint::Udp("127.0.0.1:9".parse().unwrap()));
        let sizes = config.sizes().unwrap();
        assert_eq!((sizes.len(), sizes[0], sizes[8]), (9, 16, 1472));
        for bad in [
            &["rtt", "--raw", "eth0"][..],
            &["rtt", "--peer", "02:00:5e:10:00:01"],
            &["rtt", "--protocol", "tcp"],
            &["echo", "--raw", "eth0", "--listen", "0.0.0.0:7"],
            // A lab finds the interfaces itself.
            &[
                "rtt",
                "--from",
                "a",
                "--to",
                "b",
                "--raw",
                "eth0",
                "--peer",
                "02:00:5e:10:00:01",
            ],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        let err = parse(&["rtt", "--raw", "eth0", "--peer", "02:00:5e:10:00"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("bad MAC address"), "{err}");
    }

    /// The protocols `rtt ARGS` runs, or the error's message.
    fn protocol(args: &[&str]) -> Result<Protocol, String> {
        let LabCommand::Rtt(args) = parse(&[&["rtt"][..], args].concat()).unwrap() else {
            panic!("not rtt");
        };
        args.protocol().map_err(|e| e.to_string())
    }

    #[test]
    fn rtt_protocols_default_to_udp_and_need_their_echo() {
        const RAW: [&str; 4] = ["--raw", "eth0", "--peer", "02:00:5e:10:00:01"];
        let both_raw = [&["--protocol", "both"][..], &RAW].concat();
        let both_to = [&both_raw[..], &["--to", "192.0.2.1:7"]].concat();
        let lab = ["--lab", "t", "--from", "a", "--to", "b"];
        for (args, expected) in [
            (&[][..], Protocol::Udp),
            (&["--to", "192.0.2.1:7"], Protocol::Udp),
            (&RAW, Protocol::Raw),
            (&[&["--protocol", "raw"][..], &RAW].concat(), Protocol::Raw),
            (&both_raw, Protocol::Both),
            (&both_to, Protocol::Both),
            (&lab, Protocol::Udp),
            (&[&lab[..], &["--protocol", "raw"]].concat(), Protocol::Raw),
            (
                &[&lab[..], &["--protocol", "both"]].concat(),
                Protocol::Both,
            ),
        ] {
            assert_eq!(protocol(args), Ok(expected), "{args:?}");
        }
        for (args, says) in [
            (&["--protocol", "raw"][..], "add --raw IFACE --peer MAC"),
            (
                &["--protocol", "raw", "--to", "192.0.2.1:7"],
                "--to ADDR:PORT names a UDP echo only",
            ),
            (
                &["--protocol", "both"],
                "--lab LAB --from A --to B finds them",
            ),
            (
                &[&RAW[..], &["--to", "192.0.2.1:7"]].concat(),
                "leave out --to",
            ),
            (
                &[&["--protocol", "udp"][..], &RAW].concat(),
                "leave out --raw",
            ),
        ] {
            let err = protocol(args).unwrap_err();
            assert!(err.contains(says), "{args:?}: {err}");
        }
    }

    #[test]
    fn lab_rtt_finds_the_peer_on_a_shared_segment_first() {
        const SRC: &str = r#"
lab = "t"
ip = "ipv4"
[nodes.a]
[nodes.b]
[nodes.c]
[[links]]
endpoints = ["b", "c"]
ipv4 = "10.0.0.0/30"
[[links]]
endpoints = ["a", "b"]
ipv4 = "10.0.1.0/30"
"#;
        let topo = rtemu_topo::Topology::parse("t.toml", SRC).unwrap();
        // Whether `addr` lies in the /30 `net` of this file.
        let on = |net: &str, addr: std::net::IpAddr| match addr {
            std::net::IpAddr::V4(v4) => {
                let [a, b, c, d] = v4.octets();
                net == format!("{a}.{b}.{c}.0/30") && d < 4
            }
            std::net::IpAddr::V6(_) => false,
        };
        let b = lab_rtt::peer_address(&topo, "a", "b").unwrap();
        assert!(on("10.0.1.0/30", b), "{b}");
        // No segment shared with c: its first address at all.
        let c = lab_rtt::peer_address(&topo, "a", "c").unwrap();
        assert!(on("10.0.0.0/30", c), "{c}");
        assert_eq!(lab_rtt::peer_address(&topo, "a", "nobody"), None);
        // Raw frames need a shared segment: b is a's only neighbour, on b's second interface.
        assert_eq!(
            lab_rtt::facing_interfaces(&topo, "a", "b"),
            Some(("eth0".into(), "eth1".into()))
        );
        assert_eq!(
            lab_rtt::facing_interfaces(&topo, "b", "a"),
            Some(("eth1".into(), "eth0".into()))
        );
        assert_eq!(lab_rtt::facing_interfaces(&topo, "a", "c"), None);
        assert_eq!(lab_rtt::facing_interfaces(&topo, "a", "nobody"), None);
    }

    #[test]
    fn lab_rtt_forwards_every_flag_but_the_lab_ones() {
        let args = [
            "lab",
            "rtt",
            "--lab",
            "t",
            "--from=a",
            "--to",
            "b",
            "--port",
            "9",
            "--count",
            "5",
            "--protocol",
            "both",
            "--json",
            "--protocol=raw",
        ]
        .map(std::ffi::OsString::from);
        let out: Vec<_> = lab_rtt::forwarded_args(args)
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect();
        assert_eq!(out, ["lab", "rtt", "--count", "5", "--json"]);
        let command = parse(&["rtt", "--lab", "t", "--from", "a", "--to", "b"]).unwrap();
        assert!(matches!(command, LabCommand::Rtt(a) if a.from.as_deref() == Some("a")));
        assert!(parse(&["rtt", "--from", "a"]).is_err());
    }
}
