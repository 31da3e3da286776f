//! `rtemu-bench engine`: the real-time engine in labs, with real programs, measured side by
//! side in one run and printed as Markdown tables, never asserted.
//!
//! * **Per-hop latency** (the vimage paper's Figure 6b): ping round trips along chains of 1–8
//!   links, every link impaired with `delay 0ms` (each hop through the engine), beside the same
//!   chains with ideal links (kernel veth pairs). The difference over 2 × hops is what one pass
//!   through the engine costs; measured for both packet I/O layers, `AF_PACKET` and AF_XDP.
//! * **Rate accuracy** (the timing paper's Figure 1): iperf3 UDP through a `rate R` link at
//!   1.25 × R offered, for R from 64 kbit/s to 1 Gbit/s (one lab, the rate changed with
//!   `link set` between points), against the payload rate R implies for 1400-byte datagrams,
//!   measured by iperf3's receiver over the steady part of each row (see [`steady_goodput`]).
//! * **CPU against offered load** (RplTrc's Table II): iperf3 UDP at 1k–200k packets/s through
//!   `delay 1ms`: received packets/s, the engine process's CPU, its release-error percentiles,
//!   late copies and drops.
//! * **Throughput** (issue 5's benchmark 2): one cheap generator for every row, an
//!   `AF_PACKET` transmit-ring flood from node A pinned to CPU 0 for `--seconds`
//!   ([`rtemu_engine::bench::flood`]), and one cheap sink: the frames carry a MAC address no
//!   interface has, so B's kernel drops them on sight, and B's interface counters say how many
//!   arrived. Rows, for 64- and 1400-byte frames: the kernel's own forwarding (a direct veth
//!   A–B; a router namespace A → R → B, where R forwards to an address in the benchmarking
//!   range through a static route and a permanent neighbour entry, so without ARP), a bare
//!   relay over each of the engine's I/O layers (the lab's engine ends, no engine:
//!   [`rtemu_engine::bench::relay`]) and the lab's engine (`delay 0ms`, `delay 10ms`) over
//!   each. Columns: offered and delivered packets/s, the engine's or relay's own counts (drops
//!   by reason, frames lost to a full receive ring) and where the CPU went: the generator's
//!   thread, the engine process or relay thread (pinned to the last CPU), softirq and busy
//!   time of all CPUs from `/proc/stat`. A second table gives the issue's goals as ratios.
//!
//! * **Soak** (issue 11, only when asked for with `--part soak`): UDP at twice the rate of a
//!   `rate 10mbit` link with a bounded queue for `--minutes`, the engine's counters read every
//!   few seconds: every snapshot must balance (received + duplicates = delivered + dropped by
//!   reason + in flight, in each direction), at the end B's receiver and B's interface must
//!   have counted exactly what the engine delivered, and the engine's resident memory
//!   (`VmRSS`) must not grow by more than [`SOAK_RSS_GROWTH_KIB`] from the first snapshot.
//!   Unlike the other parts it fails (non-zero exit) when a check fails.
//!
//! The load and rate parts run the engine on its default I/O (`AF_PACKET`); the throughput
//! part's engine has the wait strategy of every part (`--engine-wait`, else the machine's). On
//! a kernel without IRQ time accounting, softirq work is charged both to the softirq column and
//! to the thread it ran in (the generator's sends run the receiving side's stack), so the CPU
//! columns overlap; the busy column does not.
//!
//! Every lab is taken down after its row, also when the row fails (the throughput rows hold a
//! guard, which covers a panic too), so nothing of a run stays behind but what it printed.

use std::io::Write;
use std::net::Ipv4Addr;
use std::process::Output;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use rtemu_clock::{rt, WaitStrategy};

use rtemu_control::engine::{self, EngineOptions, IoKind};
use rtemu_control::message::{Direction, Stats};
use rtemu_engine::afpacket::{AfPacket, AfPacketConfig};
use rtemu_engine::bench::{self, UdpFrame, Work};
use rtemu_engine::io::PacketIo;
use rtemu_engine::xdp::{AfXdp, AfXdpConfig};
use rtemu_engine::{ifcounters, netns, offload};
use rtemu_lab::cputime::CpuTicks;
use rtemu_model::direction::Ways;
use rtemu_report::text::{Align, Table};
use rtemu_topo::lab::{self, engine_ends, lab_netns, node_netns};
use rtemu_topo::state::{LabName, State};
use rtemu_topo::topology::{Attachment, Mac, Netem};
use rtemu_topo::Topology;
use serde_json::Value;

/// The chain lengths of the per-hop benchmark.
const CHAINS: [usize; 4] = [1, 2, 4, 8];

/// Link rates of the rate benchmark, bits per second.
const RATES: [u64; 6] = [
    64_000,
    256_000,
    1_000_000,
    10_000_000,
    100_000_000,
    1_000_000_000,
];

/// UDP payload of the rate benchmark, bytes; its frame adds UDP 8, IPv4 20, Ethernet 14.
const PAYLOAD: u64 = 1400;

/// Options of `rtemu-bench engine`.
#[derive(Debug, Clone)]
pub struct Options {
    /// Pings per chain.
    pub pings: u32,
    /// Seconds per row of the rate, load and throughput parts.
    pub seconds: u32,
    /// The engine's wait strategy (default: the machine's, as for `up`).
    pub wait: Option<WaitStrategy>,
    /// The parts to run (`per-hop`, `rate`, `load`, `throughput`, `soak`); empty: all but
    /// `soak`.
    pub parts: Vec<String>,
    /// How long the soak part runs, minutes.
    pub soak_minutes: f64,
}

impl Options {
    fn runs(&self, part: &str) -> bool {
        match self.parts.is_empty() {
            true => part != "soak",
            false => self.parts.iter().any(|p| p == part),
        }
    }

    /// The engine as `up` would start it, with this benchmark's wait strategy.
    fn engine(&self) -> EngineOptions {
        EngineOptions {
            wait: self.wait,
            ..EngineOptions::default()
        }
    }
}

/// The packet rate the throughput rows' engine buffers are sized for (`up --engine-pps`): the
/// flood offers up to about 0.6 Mpps here, and 10 ms of it must fit, or the `delay 10ms` rows
/// measure the default sizing (100 kpps) rather than the engine.
const TPUT_SIZING_PPS: u64 = 1_000_000;

fn chain_topology(lab: &str, hops: usize, impaired: bool) -> Result<Topology> {
    let mut src = format!("lab = \"{lab}\"\nneighbours = \"static\"\nip = \"ipv4\"\n");
    for i in 0..=hops {
        src.push_str(&format!("[nodes.n{i}]\n"));
    }
    for i in 1..=hops {
        src.push_str(&format!(
            "[[links]]\nendpoints = [\"n{}\", \"n{i}\"]\n{}",
            i - 1,
            if impaired {
                "netem = \"delay 0ms\"\n"
            } else {
                ""
            }
        ));
    }
    Ok(Topology::parse("chain.toml", &src)?)
}

fn run_in(state: &State, node: &str, argv: &[&str]) -> Result<Output> {
    let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
    lab::node_command(state, node, &argv)?
        .output()
        .with_context(|| format!("running {} in {node}", argv[0]))
}

fn remove(lab: &str) {
    // The benchmark's own lab names are all valid.
    if let Ok(lab) = LabName::new(lab) {
        let _ = rtemu_control::lab::down(&lab);
    }
}

/// Brings `topo` up with its engine (run from the `rtemu` beside the benchmarks) and says so
/// on standard error, as `rtemu up` does.
fn bring_up(topo: &Topology, file: &str, engine: &EngineOptions) -> Result<State> {
    let engine = EngineOptions {
        program: Some(crate::rtemu()?),
        ..engine.clone()
    };
    let up = rtemu_control::lab::up(topo, file, &engine)?;
    eprintln!("{up}");
    Ok(up.state)
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// The round trips (ms) of `count` pings from the chain's first node to its last.
fn chain_rtts(state: &State, hops: usize, count: u32) -> Result<Vec<f64>> {
    let last = format!("n{hops}");
    // A first ping warms routes and caches; it is not measured.
    run_in(state, "n0", &["ping", "-c", "1", "-W", "2", &last])?;
    let out = run_in(
        state,
        "n0",
        &[
            "ping",
            "-n",
            "-c",
            &count.to_string(),
            "-i",
            "0.01",
            "-W",
            "2",
            &last,
        ],
    )?;
    let rtts = ping_rtts(&String::from_utf8_lossy(&out.stdout));
    if rtts.is_empty() {
        bail!("no ping crossed the {hops}-hop chain");
    }
    Ok(rtts)
}

/// The round trips (ms) of `ping`'s output, one per reply line (`time=0.052 ms`).
pub(crate) fn ping_rtts(text: &str) -> Vec<f64> {
    text.lines()
        .filter_map(|l| l.split("time=").nth(1))
        .filter_map(|t| t.trim_end_matches(" ms").parse().ok())
        .collect()
}

/// The engine's I/O layers, in the order the tables show them.
const IOS: [IoKind; 2] = [IoKind::AfPacket, IoKind::AfXdp];

/// Brings a chain up with ideal links (`io` `None`) or impaired ones over `io`, pings along
/// it, and takes it down; returns the round trips (ms).
fn chain_run(opts: &Options, hops: usize, io: Option<IoKind>) -> Result<Vec<f64>> {
    let name = format!(
        "bh{hops}{}",
        match io {
            None => "k",
            Some(IoKind::AfPacket) => "p",
            Some(IoKind::AfXdp) => "x",
        }
    );
    remove(&name);
    let topo = chain_topology(&name, hops, io.is_some())?;
    let engine = EngineOptions {
        wait: opts.wait,
        io,
        ..EngineOptions::default()
    };
    let state = bring_up(&topo, "chain", &engine)?;
    let measured = match io {
        Some(io) => check_io(&name, io).and_then(|()| chain_rtts(&state, hops, opts.pings)),
        None => chain_rtts(&state, hops, opts.pings),
    };
    remove(&name);
    measured
}

/// Fails when lab `lab`'s engine does not run on `io` (AF_XDP could not be set up).
fn check_io(lab: &str, io: IoKind) -> Result<()> {
    let stats = engine::stats(&LabName::new(lab)?)?;
    if stats.io != io.as_str() {
        bail!(
            "lab {lab}'s engine runs on {}, not {} (see /run/rtemu/{lab}/engine.log)",
            stats.io,
            io.as_str()
        );
    }
    Ok(())
}

/// The median and 99th percentile of `rtts` (ms, at least one), in µs.
pub(crate) fn p50_p99(mut rtts: Vec<f64>) -> (f64, f64) {
    rtts.sort_by(f64::total_cmp);
    let p99 = rtts[(rtts.len() * 99 / 100).min(rtts.len() - 1)];
    (median(rtts) * 1e3, p99 * 1e3)
}

/// Per chain: the ideal round trip, and for each I/O layer the engine's round trip and what
/// one pass through the engine adds.
fn per_hop(opts: &Options, out: &mut impl Write) -> Result<()> {
    writeln!(
        out,
        "### Per-hop latency: ping along a chain, `delay 0ms` on every link vs ideal links\n"
    )?;
    let table = Table::start(
        out,
        &[
            "hops",
            "ideal RTT p50 µs",
            "AF_PACKET RTT p50 µs",
            "p99 µs",
            "added per hop µs",
            "AF_XDP RTT p50 µs",
            "p99 µs",
            "added per hop µs",
        ]
        .map(|h| (h, Align::Right)),
    )?;
    for hops in CHAINS {
        let (ideal, _) = p50_p99(chain_run(opts, hops, None)?);
        let mut row = vec![hops.to_string(), format!("{ideal:.1}")];
        for io in IOS {
            let (p50, p99) = p50_p99(chain_run(opts, hops, Some(io))?);
            row.extend([
                format!("{p50:.1}"),
                format!("{p99:.1}"),
                format!("{:.1}", (p50 - ideal) / (2 * hops) as f64),
            ]);
        }
        table.row(out, &row)?;
        out.flush()?;
    }
    Ok(())
}

/// The rate rows' queue at `rate`: about 100 ms of full-size frames (at least 5), so a row's
/// backlog drains before the next one starts.
fn queue_limit(rate: u64) -> u64 {
    (rate / 10 / ((PAYLOAD + 8 + 20 + 14) * 8)).max(5)
}

fn rate_text(bps: u64) -> String {
    match bps {
        b if b >= 1_000_000_000 && b % 1_000_000_000 == 0 => format!("{}gbit", b / 1_000_000_000),
        b if b >= 1_000_000 && b % 1_000_000 == 0 => format!("{}mbit", b / 1_000_000),
        b => format!("{}kbit", b / 1000),
    }
}

fn rate_accuracy(opts: &Options, out: &mut impl Write) -> Result<()> {
    let name = "brate";
    remove(name);
    // The link starts with the fastest rate and its queue, so `up` gives each direction
    // buffers for the longest queue a row sets.
    let fastest = RATES[RATES.len() - 1];
    let src = format!(
        "lab = \"{name}\"\nneighbours = \"static\"\nip = \"ipv4\"\n[nodes.a]\n[nodes.b]\n\
         [[links]]\nname = \"ab\"\nendpoints = [\"a\", \"b\"]\nnetem = \"rate {} limit {}\"\n",
        rate_text(fastest),
        queue_limit(fastest)
    );
    let state = bring_up(&Topology::parse("rate.toml", &src)?, "rate", &opts.engine())?;
    let result = rate_rows(&state, opts, out);
    remove(name);
    result
}

fn rate_rows(state: &State, opts: &Options, out: &mut impl Write) -> Result<()> {
    writeln!(
        out,
        "\n### Rate accuracy: iperf3 UDP ({PAYLOAD}-byte datagrams) through `rate R`, offered 1.25 × R, at least {} s per row (longer where the steady part, after the first second, would carry fewer than {STEADY_DATAGRAMS} datagrams); goodput measured by the receiver over the steady part\n",
        opts.seconds
    )?;
    let table = Table::start(
        out,
        &[
            "rate R",
            "queue limit",
            "expected goodput",
            "measured goodput",
            "measured / expected",
            "lost % (iperf3)",
            "queue-full",
            "pool-exhausted",
            "kernel drops",
        ]
        .map(|h| (h, Align::Right)),
    )?;
    for (row, rate) in RATES.into_iter().enumerate() {
        let limit = queue_limit(rate);
        let netem = format!("rate {} limit {limit}", rate_text(rate));
        let netem = Netem::parse(&netem).with_context(|| format!("netem {netem:?}"))?;
        rtemu_control::lab::set_link(&state.lab, "ab", Ways::Both, &netem)?;
        // A port per row: the last row's server may still be receiving its backlog.
        let port = IPERF_PORT + row as u16;
        udp_server(state, "b", port)?;
        let before = engine::stats(&state.lab)?;
        let seconds = rate_row_seconds(rate, opts.seconds);
        let json = udp_client(state, "b", port, rate + rate / 4, PAYLOAD, seconds)?;
        let after = engine::stats(&state.lab)?;
        let lost = json["end"]["sum"]["lost_percent"]
            .as_f64()
            .unwrap_or(f64::NAN);
        let expected = rate as f64 * PAYLOAD as f64 / (PAYLOAD + 8 + 20 + 14) as f64;
        let received_bps = steady_goodput(&server_intervals(&json), f64::from(seconds))
            .with_context(|| format!("iperf3 gave no receiver intervals at {rate} bit/s"))?;
        // Every drop a→b, by any reason (the rate queue's, the pool's …), and the kernel's.
        let drops = |s: &Stats, reason: &str| -> u64 {
            s.directions
                .iter()
                .filter(|d| d.from == "a")
                .map(|d| {
                    if reason == "kernel" {
                        d.kernel_drops.unwrap_or(0)
                    } else {
                        d.dropped.get(reason).copied().unwrap_or(0)
                    }
                })
                .sum()
        };
        let delta = |reason: &str| drops(&after, reason) - drops(&before, reason);
        table.row(
            out,
            &[
                rate_text(rate),
                limit.to_string(),
                format!("{:.1} kbit/s", expected / 1e3),
                format!("{:.1} kbit/s", received_bps / 1e3),
                format!("{:.3}", received_bps / expected),
                format!("{lost:.1}"),
                delta("queue-full").to_string(),
                delta("pool-exhausted").to_string(),
                delta("kernel").to_string(),
            ],
        )?;
        out.flush()?;
        // Let the backlog (at most the 100 ms queue) drain.
        std::thread::sleep(Duration::from_millis(300));
    }
    Ok(())
}

/// Datagrams the steady part of a rate row carries at the least: one more or fewer in it is
/// then at most 0.5 %.
const STEADY_DATAGRAMS: u64 = 200;

/// Seconds a rate row runs at `rate`: `seconds`, or longer where the steady part (all but the
/// first second) would carry fewer than [`STEADY_DATAGRAMS`].
fn rate_row_seconds(rate: u64, seconds: u32) -> u32 {
    let frame_bits = (PAYLOAD + 8 + 20 + 14) * 8;
    let steady = (STEADY_DATAGRAMS * frame_bits).div_ceil(rate.max(1));
    seconds.max(u32::try_from(steady + 1).unwrap_or(u32::MAX))
}

/// The receiver's goodput in the steady part of a run of `seconds`: the payload bytes of the
/// receiver's one-second intervals from 1 s to the end of sending, over their duration. The
/// first second holds the queue filling up; after `seconds`, the queue drains while iperf3's
/// end of test travels over its control connection, whose segments wait in (or are dropped by)
/// the same saturated queue: at 1 Mbit/s that made the receiver's whole-run rate 4 % low on a
/// link that carried exactly its rate. `intervals` are (start, end, bytes); `None` without a
/// steady interval.
fn steady_goodput(intervals: &[(f64, f64, f64)], seconds: f64) -> Option<f64> {
    let steady = intervals
        .iter()
        .filter(|&&(start, end, _)| start >= 1.0 - 1e-3 && end <= seconds + 1e-3);
    let (bytes, span) = steady.fold((0.0, 0.0), |(b, t), &(start, end, bytes)| {
        (b + bytes, t + (end - start))
    });
    (span > 0.0).then(|| bytes * 8.0 / span)
}

/// The receiver's intervals from iperf3's report with `--get-server-output`.
fn server_intervals(report: &Value) -> Vec<(f64, f64, f64)> {
    report["server_output_json"]["intervals"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| {
            let s = &i["sum"];
            Some((
                s["start"].as_f64()?,
                s["end"].as_f64()?,
                s["bytes"].as_f64()?,
            ))
        })
        .collect()
}

/// iperf3's port (rows that may overlap use the ones above it).
const IPERF_PORT: u16 = 5201;

/// Offered loads of the CPU benchmark, packets per second.
const LOADS: [u64; 5] = [1_000, 10_000, 50_000, 100_000, 200_000];

/// UDP payload of the CPU benchmark, bytes (a 106-byte frame).
const SMALL_PAYLOAD: u64 = 64;

/// CPU, fidelity and losses of one `delay 1ms` link against offered load (RplTrc's Table II),
/// a fresh lab per row so each row's percentiles are its own.
fn load(opts: &Options, out: &mut impl Write) -> Result<()> {
    writeln!(
        out,
        "\n### CPU against offered load: iperf3 UDP ({SMALL_PAYLOAD}-byte datagrams) through `delay 1ms` and a trace-driven link, {} s per row\n",
        opts.seconds
    )?;
    let table = Table::start_figures(
        out,
        &[
            "link",
            "offered pps",
            "received pps",
            "engine CPU %",
            "release p50 µs",
            "p99 µs",
            "p99.9 µs",
            "max µs",
            "late (>100 µs)",
            "dropped",
            "kernel drops",
            "trace under-runs",
        ],
    )?;
    // The trace-driven row: fractional Gaussian noise (Hurst 0.8) around 1 ms, streamed from
    // a file of a million records.
    let dir = std::env::temp_dir().join(format!("rtemu-bench-{}", std::process::id()));
    // New and private: in a shared /tmp a directory someone else made first could hold links.
    std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
        .create(&dir)
        .with_context(|| format!("creating {}", dir.display()))?;
    let result = load_rows(opts, &dir.join("lrd.rpl"), &table, out);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// The rows of [`load`], with the trace-driven rows' trace written to `trace`.
fn load_rows(
    opts: &Options,
    trace: &std::path::Path,
    table: &Table,
    out: &mut impl Write,
) -> Result<()> {
    let gen = std::process::Command::new(crate::rtemu()?)
        .args([
            "trace", "gen", "fgn", "--hurst", "0.8", "--mean", "1ms", "--std", "100us",
        ])
        .args(["--count", "1000000", "--seed", "7", "-o"])
        .arg(trace)
        .output()?;
    if !gen.status.success() {
        bail!("trace gen: {}", String::from_utf8_lossy(&gen.stderr));
    }
    let rows = LOADS
        .iter()
        .map(|&pps| ("delay 1ms".to_owned(), pps))
        .chain([10_000, 100_000].map(|pps| (format!("trace {}", trace.display()), pps)));
    for (link, pps) in rows {
        let name = "bload";
        remove(name);
        let imp = match link.strip_prefix("trace ") {
            Some(path) => format!("trace = \"{path}\""),
            None => format!("netem = \"{link}\""),
        };
        let src = format!(
            "lab = \"{name}\"\nneighbours = \"static\"\nip = \"ipv4\"\n[nodes.a]\n[nodes.b]\n\
             [[links]]\nname = \"ab\"\nendpoints = [\"a\", \"b\"]\n{imp}\n"
        );
        let state = bring_up(&Topology::parse("load.toml", &src)?, "load", &opts.engine())?;
        let row = load_row(&state, opts, pps);
        remove(name);
        let (received_pps, cpu, d) = row?;
        let r = &d.fidelity.released;
        let us = |ns: u64| ns as f64 / 1e3;
        // An unknown kernel count shows as it always has, as JSON's `null`.
        let kernel_drops = d.kernel_drops.map_or("null".to_owned(), |k| k.to_string());
        let shown = if link.starts_with("trace") {
            "fGn trace, 1 ms ± 0.1 ms, H 0.8"
        } else {
            "`delay 1ms`"
        };
        table.row(
            out,
            &[
                shown.to_owned(),
                pps.to_string(),
                format!("{received_pps:.0}"),
                format!("{cpu:.0}"),
                format!("{:.1}", us(r.p50_ns)),
                format!("{:.1}", us(r.p99_ns)),
                format!("{:.1}", us(r.p999_ns)),
                format!("{:.1}", us(r.max_ns)),
                d.fidelity.late.to_string(),
                d.dropped_total().to_string(),
                kernel_drops,
                d.trace_underruns.to_string(),
            ],
        )?;
        out.flush()?;
    }
    Ok(())
}

/// One load row: iperf3 at `pps`; returns the receiver's packets per second, the engine's CPU
/// % over the run, and the a→b direction's stats at the end.
fn load_row(state: &State, opts: &Options, pps: u64) -> Result<(f64, f64, Direction)> {
    udp_server(state, "b", IPERF_PORT)?;
    let before = engine::stats(&state.lab)?;
    let started = std::time::Instant::now();
    let bps = pps * SMALL_PAYLOAD * 8;
    let json = udp_client(state, "b", IPERF_PORT, bps, SMALL_PAYLOAD, opts.seconds)?;
    let after = engine::stats(&state.lab)?;
    let wall_ns = started.elapsed().as_nanos() as f64;
    let cpu_ns = cpu_ns(&after) - cpu_ns(&before);
    let packets = json["end"]["sum"]["packets"].as_f64().unwrap_or(f64::NAN);
    let lost = json["end"]["sum"]["lost_packets"]
        .as_f64()
        .unwrap_or(f64::NAN);
    let seconds = json["end"]["sum"]["seconds"].as_f64().unwrap_or(f64::NAN);
    let d = a_to_b(&after)?.clone();
    Ok(((packets - lost) / seconds, cpu_ns / wall_ns * 100.0, d))
}

/// Frame lengths of the throughput part, bytes on the wire (the FCS included).
const TPUT_WIRE: [usize; 2] = [64, 1400];

/// Where the throughput part's frames are addressed, in RFC 2544's benchmarking range: no node
/// has it. The router row's router forwards to it (a static route and a permanent neighbour
/// entry with [`bench::FOREIGN_MAC`]), so its B drops the frames as every other row's B does.
const SINK_ADDR: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 99);

/// UDP port of the throughput part's frames (nothing listens: B drops them by MAC first).
const SINK_PORT: u16 = 9000;

/// How long after a flood its last frames may still be on their way to B (`delay 10ms`, and
/// the time to release a backlog).
const DRAIN: Duration = Duration::from_millis(60);

/// The lab name of the throughput part.
const TPUT_LAB: &str = "btput";

/// One path of the throughput part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Path {
    /// A veth pair from A to B: the kernel's cheapest path between two namespaces.
    Veth,
    /// A → R → B over two veth pairs, R forwarding with the kernel's IPv4 stack.
    Router,
    /// The engine's two ends joined by [`bench::relay`] over the I/O layer, no engine: the
    /// limit of that I/O path.
    Relay(IoKind),
    /// The lab's engine on the link, with this netem text, over the I/O layer.
    Engine(IoKind, &'static str),
}

impl Path {
    /// The rows of one frame size, in the order the table shows them.
    const ALL: [Path; 8] = [
        Path::Veth,
        Path::Router,
        Path::Relay(IoKind::AfPacket),
        Path::Engine(IoKind::AfPacket, "delay 0ms"),
        Path::Engine(IoKind::AfPacket, "delay 10ms"),
        Path::Relay(IoKind::AfXdp),
        Path::Engine(IoKind::AfXdp, "delay 0ms"),
        Path::Engine(IoKind::AfXdp, "delay 10ms"),
    ];

    fn label(self) -> String {
        match self {
            Path::Veth => "kernel: direct veth".to_owned(),
            Path::Router => "kernel: router namespace".to_owned(),
            Path::Relay(io) => format!("bare relay ({})", io_name(io)),
            Path::Engine(io, netem) => format!("engine ({}): `{netem}`", io_name(io)),
        }
    }

    /// The lab of this row: nodes A and B, and R between them for the router.
    fn topology(self) -> Result<Topology> {
        let impaired = |netem: &str| {
            format!("[[links]]\nname = \"ab\"\nendpoints = [\"a\", \"b\"]\nnetem = \"{netem}\"\n")
        };
        let (r, links) = match self {
            Path::Veth => ("", "[[links]]\nendpoints = [\"a\", \"b\"]\n".to_owned()),
            Path::Router => (
                "[nodes.r]\n",
                "[[links]]\nendpoints = [\"a\", \"r\"]\n[[links]]\nendpoints = [\"r\", \"b\"]\n"
                    .to_owned(),
            ),
            // The relay needs the engine's two ends, which only an impaired link has.
            Path::Relay(_) => ("", impaired("delay 0ms")),
            Path::Engine(_, netem) => ("", impaired(netem)),
        };
        Ok(Topology::parse(
            "tput.toml",
            &format!(
                "lab = \"{TPUT_LAB}\"\nneighbours = \"static\"\nip = \"ipv4\"\n[nodes.a]\n{r}[nodes.b]\n{links}"
            ),
        )?)
    }

    /// The node A's frames reach first.
    fn after_a(self) -> &'static str {
        if self == Path::Router {
            "r"
        } else {
            "b"
        }
    }

    /// The node B's frames come from.
    fn before_b(self) -> &'static str {
        if self == Path::Router {
            "r"
        } else {
            "a"
        }
    }
}

/// How the tables name an I/O layer.
fn io_name(io: IoKind) -> &'static str {
    match io {
        IoKind::AfPacket => "AF_PACKET",
        IoKind::AfXdp => "AF_XDP",
    }
}

/// The CPU the engine and the relay are pinned to: the last (the generator has the first).
fn last_cpu() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()) - 1
}

/// A lab that is removed (its engine stopped, its namespaces and veths deleted) when dropped,
/// so a row that fails or panics leaves nothing behind.
struct LabGuard(State);

impl Drop for LabGuard {
    fn drop(&mut self) {
        remove(&self.0.lab);
    }
}

/// Brings up the lab of `path`: with its engine pinned to the last CPU for an engine row, with
/// none for the others.
fn tput_lab(opts: &Options, path: Path) -> Result<LabGuard> {
    remove(TPUT_LAB);
    let topo = path.topology()?;
    let guard = LabGuard(match path {
        Path::Engine(io, _) => {
            let engine = EngineOptions {
                wait: opts.wait,
                cpus: Some(vec![last_cpu()]),
                io: Some(io),
                sizing_pps: Some(TPUT_SIZING_PPS),
                ..EngineOptions::default()
            };
            bring_up(&topo, "tput", &engine)?
        }
        _ => lab::up(&topo, "tput")?,
    });
    if let Path::Engine(io, _) = path {
        check_io(TPUT_LAB, io)?;
    }
    Ok(guard)
}

/// Node `node`'s interface on the link that joins it to `peer`.
fn interface<'a>(state: &'a State, node: &str, peer: &str) -> Result<&'a Attachment> {
    let t = &state.topology;
    let (n, p) = (t.node_index(node), t.node_index(peer));
    t.segments
        .iter()
        .filter(|s| s.members.iter().any(|m| Some(m.node) == p))
        .flat_map(|s| &s.members)
        .find(|m| Some(m.node) == n)
        .with_context(|| format!("no link joins {node} to {peer} in lab {}", state.lab))
}

/// The frame A floods on `path`: to [`bench::FOREIGN_MAC`] (B drops it at once), or for the
/// router to R's MAC, which forwards it on to [`SINK_ADDR`].
fn tput_frame(state: &State, path: Path, wire: usize) -> Result<Vec<u8>> {
    let a = interface(state, "a", path.after_a())?;
    let dst_mac = match path {
        Path::Router => interface(state, "r", "a")?.mac.0,
        _ => bench::FOREIGN_MAC,
    };
    let spec = UdpFrame {
        dst_mac,
        src_mac: a.mac.0,
        src: a.ipv4.context("node a has no IPv4 address")?.addr(),
        dst: SINK_ADDR,
        port: SINK_PORT,
    };
    Ok(bench::udp_frame(&spec, wire)?)
}

/// Runs `ip ARGS…` in the host's namespace.
fn ip(args: &[&str]) -> Result<()> {
    let out = std::process::Command::new("ip")
        .args(args)
        .output()
        .context("running ip (iproute2)")?;
    if !out.status.success() {
        bail!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Makes R forward [`SINK_ADDR`] onto its link to B, to a MAC no interface has, without a
/// neighbour lookup on the wire: a /32 route on the link and a permanent neighbour entry.
fn route_to_sink(state: &State) -> Result<()> {
    let ns = node_netns(&state.lab, "r");
    let dev = &interface(state, "r", "b")?.ifname;
    let sink = SINK_ADDR.to_string();
    let mac = Mac(bench::FOREIGN_MAC).to_string();
    ip(&["-n", &ns, "route", "add", &format!("{sink}/32"), "dev", dev])?;
    ip(&[
        "-n",
        &ns,
        "neigh",
        "replace",
        &sink,
        "lladdr",
        &mac,
        "dev",
        dev,
        "nud",
        "permanent",
    ])
}

/// What one flood did, from A, at B, and on the CPUs.
struct Flooded {
    /// The generator's frames, time and CPU.
    generator: Work,
    /// Frames that reached B's interface from the flood's start until [`DRAIN`] after its end.
    at_b: u64,
    /// Softirq time of all CPUs over the flood, % of one core.
    softirq: f64,
    /// Busy time of all CPUs over the flood, % of one core.
    busy: f64,
}

/// Floods `frame` from A's interface on `path` for `secs` with [`bench::flood`] on CPU 0, and
/// counts what reached B's interface.
fn flood_once(state: &State, path: Path, frame: Vec<u8>, secs: u32) -> Result<Flooded> {
    let b_ns = netns::named(&node_netns(&state.lab, "b"));
    let b_if = &interface(state, "b", path.before_b())?.ifname;
    let a_ns = netns::named(&node_netns(&state.lab, "a"));
    let a_if = interface(state, "a", path.after_a())?.ifname.clone();
    let before = ifcounters::interface_counters(&b_ns, b_if)?.rx_packets;
    let cpu0 = CpuTicks::read()?;
    let generator = netns::run_in(&a_ns, move || -> Result<Work> {
        rt::set_affinity(&[0]).context("pinning the generator to CPU 0")?;
        let mut tx = AfPacket::open(&a_if, &AfPacketConfig::default())?;
        Ok(bench::flood(
            &mut tx,
            &frame,
            u64::from(secs) * 1_000_000_000,
        )?)
    })??;
    let cpu1 = CpuTicks::read()?;
    std::thread::sleep(DRAIN);
    let after = ifcounters::interface_counters(&b_ns, b_if)?.rx_packets;
    let (softirq, busy) = cpu0.shares(cpu1, last_cpu() + 1);
    Ok(Flooded {
        generator,
        at_b: after.saturating_sub(before),
        softirq,
        busy,
    })
}

/// What the engine or the relay counted over a row.
struct PathCounts {
    received: u64,
    sent: u64,
    /// Drops by reason (`reason n, …`), or `0`.
    drops: String,
    /// Frames lost to a full receive ring before the engine or relay read them.
    kernel_drops: Option<u64>,
    /// Its CPU time over the row, % of one core.
    cpu: f64,
}

/// One row of the throughput table.
struct TputRow {
    flooded: Flooded,
    /// The engine's or relay's counts; `None` for the kernel's rows.
    counts: Option<PathCounts>,
}

impl TputRow {
    /// Frames per second that reached B.
    fn delivered_pps(&self) -> f64 {
        self.flooded.at_b as f64 * 1e9 / self.flooded.generator.elapsed_ns.max(1) as f64
    }
}

/// Measures one row: brings its lab up, floods, reads the counters, takes the lab down.
fn tput_row(opts: &Options, path: Path, wire: usize) -> Result<TputRow> {
    let lab = tput_lab(opts, path)?;
    let state = &lab.0;
    let frame = tput_frame(state, path, wire)?;
    match path {
        Path::Veth => kernel_row(state, path, frame, opts.seconds),
        Path::Router => {
            route_to_sink(state).and_then(|()| kernel_row(state, path, frame, opts.seconds))
        }
        Path::Relay(IoKind::AfPacket) => relay_row(state, path, frame, opts.seconds, |name| {
            Ok(AfPacket::open(name, &AfPacketConfig::default())?)
        }),
        Path::Relay(IoKind::AfXdp) => relay_row(state, path, frame, opts.seconds, |name| {
            let config =
                AfXdpConfig::for_mtu(1500).context("no AF_XDP chunk holds a 1500-byte MTU")?;
            Ok(AfXdp::open(name, &config)?)
        }),
        Path::Engine(..) => engine_row(state, path, frame, opts.seconds),
    }
}

fn kernel_row(state: &State, path: Path, frame: Vec<u8>, secs: u32) -> Result<TputRow> {
    Ok(TputRow {
        flooded: flood_once(state, path, frame, secs)?,
        counts: None,
    })
}

/// Switches offloads off on the impaired link's four ends, as the engine does before it opens
/// them, so the relay moves the same frames the engine would.
fn disable_offloads(state: &State) -> Result<()> {
    let (si, seg, _) = engine::impaired(state)
        .into_iter()
        .next()
        .context("the relay's lab has no impaired link")?;
    let lab_ns = netns::named(&lab_netns(&state.lab));
    for (m, end) in seg.members.iter().zip(engine_ends(si)) {
        netns::run_in(&lab_ns, move || offload::disable(&end))??;
        let node = &state.topology.nodes[m.node].name;
        let ifname = m.ifname.clone();
        netns::run_in(&netns::named(&node_netns(&state.lab, node)), move || {
            offload::disable(&ifname)
        })??;
    }
    Ok(())
}

/// Relays the impaired link's engine ends, opened with `open`, on the last CPU while A floods.
fn relay_row<P: PacketIo + Send + 'static>(
    state: &State,
    path: Path,
    frame: Vec<u8>,
    secs: u32,
    open: fn(&str) -> Result<P>,
) -> Result<TputRow> {
    disable_offloads(state)?;
    let [ea, eb] = engine_ends(0);
    let (mut a, mut b) = netns::run_in(&netns::named(&lab_netns(&state.lab)), move || {
        Ok::<_, anyhow::Error>((open(&ea)?, open(&eb)?))
    })??;
    let mut probe = a.drop_probe();
    let stop = Arc::new(AtomicBool::new(false));
    let relay = {
        let stop = Arc::clone(&stop);
        let cpu = last_cpu();
        std::thread::spawn(move || -> Result<Work> {
            rt::set_affinity(&[cpu]).with_context(|| format!("pinning the relay to CPU {cpu}"))?;
            Ok(bench::relay(&mut a, &mut b, &stop)?)
        })
    };
    std::thread::sleep(Duration::from_millis(20));
    let flooded = flood_once(state, path, frame, secs);
    // Stopped before any error is returned, so no relay outlives its row.
    stop.store(true, Ordering::Relaxed);
    let work = relay
        .join()
        .map_err(|_| anyhow::anyhow!("the relay thread panicked"))??;
    let lost = work.received - work.sent;
    Ok(TputRow {
        flooded: flooded?,
        counts: Some(PathCounts {
            received: work.received,
            sent: work.sent,
            drops: if lost == 0 {
                "0".to_owned()
            } else {
                format!("tx ring full {lost}")
            },
            kernel_drops: probe.as_mut().and_then(|p| p.take().ok()),
            cpu: work.cpu_percent(),
        }),
    })
}

/// The a→b direction in a `stats` reply.
fn a_to_b(stats: &Stats) -> Result<&Direction> {
    stats
        .directions
        .iter()
        .find(|d| d.from == "a")
        .context("no a→b direction in the engine's stats")
}

/// The engine process's CPU time in a `stats` reply, ns (NaN when it could not be read).
fn cpu_ns(stats: &Stats) -> f64 {
    stats.process_cpu_ns.map_or(f64::NAN, |ns| ns as f64)
}

/// The drops by reason from `before` to `after` (directions), those that happened, or `0`.
fn drops_between(before: &Direction, after: &Direction) -> String {
    let happened: Vec<String> = after
        .dropped
        .iter()
        .filter_map(|(reason, &n)| {
            let n = n.saturating_sub(before.dropped.get(reason).copied().unwrap_or(0));
            (n > 0).then(|| format!("{reason} {n}"))
        })
        .collect();
    if happened.is_empty() {
        "0".to_owned()
    } else {
        happened.join(", ")
    }
}

/// Floods through the lab's engine and reads its counters and CPU before and after.
fn engine_row(state: &State, path: Path, frame: Vec<u8>, secs: u32) -> Result<TputRow> {
    let before = engine::stats(&state.lab)?;
    let started = std::time::Instant::now();
    let flooded = flood_once(state, path, frame, secs)?;
    let after = engine::stats(&state.lab)?;
    let wall_ns = started.elapsed().as_nanos() as f64;
    let (d0, d1) = (a_to_b(&before)?, a_to_b(&after)?);
    Ok(TputRow {
        flooded,
        counts: Some(PathCounts {
            received: d1.received.saturating_sub(d0.received),
            sent: d1.delivered.saturating_sub(d0.delivered),
            drops: drops_between(d0, d1),
            kernel_drops: d1
                .kernel_drops
                .map(|k| k.saturating_sub(d0.kernel_drops.unwrap_or(0))),
            cpu: (cpu_ns(&after) - cpu_ns(&before)) / wall_ns * 100.0,
        }),
    })
}

/// Packets per second from one cheap generator through the kernel's own forwarding, a bare
/// relay over each of the engine's I/O layers and the engine itself, side by side, with where
/// the CPU went; then the issue's two goals as ratios.
fn throughput(opts: &Options, out: &mut impl Write) -> Result<()> {
    writeln!(
        out,
        "\n### Throughput: an AF_PACKET flood from A (CPU 0) to a sink B drops at once, {} s per row; engine and relay on CPU {}\n",
        opts.seconds,
        last_cpu()
    )?;
    let columns = [
        ("path", Align::Left),
        ("frame B", Align::Right),
        ("offered pps", Align::Right),
        ("delivered pps at B", Align::Right),
        ("delivered %", Align::Right),
        ("engine/relay received pps", Align::Right),
        ("engine/relay sent pps", Align::Right),
        ("drops", Align::Left),
        ("kernel ring drops", Align::Right),
        ("generator CPU %", Align::Right),
        ("engine/relay CPU %", Align::Right),
        ("softirq CPU %", Align::Right),
        ("busy CPU %", Align::Right),
    ];
    let table = Table::start(out, &columns)?;
    let mut delivered = Vec::new();
    let mut failed = 0;
    for wire in TPUT_WIRE {
        for path in Path::ALL {
            match tput_row(opts, path, wire) {
                Ok(row) => {
                    table.row(out, &row_cells(path, wire, &row))?;
                    delivered.push((wire, path, row.delivered_pps()));
                }
                Err(e) => {
                    failed += 1;
                    let mut cells = vec!["—".to_owned(); columns.len()];
                    cells[0] = path.label();
                    cells[1] = wire.to_string();
                    cells[2] = format!("failed: {e:#}");
                    table.row(out, &cells)?;
                }
            }
            out.flush()?;
        }
    }
    goals(&delivered, out)?;
    if failed > 0 {
        bail!("{failed} throughput rows failed (their lines say why)");
    }
    Ok(())
}

/// One row of the throughput table.
fn row_cells(path: Path, wire: usize, row: &TputRow) -> Vec<String> {
    let f = &row.flooded;
    let secs = f.generator.elapsed_ns.max(1) as f64 / 1e9;
    let offered = f.generator.sent_per_s();
    let at_b = row.delivered_pps();
    let none = || "—".to_owned();
    let counts = match &row.counts {
        Some(c) => [
            format!("{:.0}", c.received as f64 / secs),
            format!("{:.0}", c.sent as f64 / secs),
            c.drops.to_string(),
            c.kernel_drops.map_or_else(none, |k| k.to_string()),
        ],
        None => [none(), none(), none(), none()],
    };
    let path_cpu = row
        .counts
        .as_ref()
        .map_or_else(none, |c| format!("{:.0}", c.cpu));
    let mut cells = vec![
        path.label(),
        wire.to_string(),
        format!("{offered:.0}"),
        format!("{at_b:.0}"),
        format!("{:.1}", at_b * 100.0 / offered.max(1.0)),
    ];
    cells.extend(counts);
    cells.extend([
        format!("{:.0}", f.generator.cpu_percent()),
        path_cpu,
        format!("{:.0}", f.softirq),
        format!("{:.0}", f.busy),
    ]);
    cells
}

/// The issue's goals per engine row: delivered packets/s over the bare relay's on the same I/O
/// (goal ≥ 0.90) and over the router namespace's (goal > 1).
fn goals(delivered: &[(usize, Path, f64)], out: &mut impl Write) -> Result<()> {
    let find = |wire: usize, path: Path| {
        delivered
            .iter()
            .find(|(w, p, _)| *w == wire && *p == path)
            .map(|(_, _, pps)| *pps)
    };
    writeln!(out)?;
    let table = Table::start_figures(
        out,
        &[
            "engine row",
            "frame B",
            "/ bare relay, same I/O (goal ≥ 0.90)",
            "/ router namespace (goal > 1)",
        ],
    )?;
    for &(wire, path, pps) in delivered {
        let Path::Engine(io, _) = path else {
            continue;
        };
        let ratio =
            |base: Option<f64>| base.map_or("—".to_owned(), |b| format!("{:.2}", pps / b));
        table.row(
            out,
            &[
                path.label(),
                wire.to_string(),
                ratio(find(wire, Path::Relay(io))),
                ratio(find(wire, Path::Router)),
            ],
        )?;
    }
    Ok(())
}
/// Starts a one-shot iperf3 server in node `node` on `port`, and gives it time to listen.
fn udp_server(state: &State, node: &str, port: u16) -> Result<()> {
    let server = run_in(
        state,
        node,
        &[
            "iperf3",
            "-s",
            "-D",
            "-1",
            "--idle-timeout",
            "60",
            "-J",
            "-p",
            &port.to_string(),
        ],
    )?;
    if !server.status.success() {
        bail!("iperf3 -s: {}", String::from_utf8_lossy(&server.stderr));
    }
    std::thread::sleep(Duration::from_millis(300));
    Ok(())
}

/// Runs iperf3 UDP from node `a` to node `to` on `port` at `bps` (0: as fast as it can) with
/// `payload` bytes per datagram, and returns its JSON report, the receiver's included.
fn udp_client(
    state: &State,
    to: &str,
    port: u16,
    bps: u64,
    payload: u64,
    seconds: u32,
) -> Result<Value> {
    let client = run_in(
        state,
        "a",
        &[
            "iperf3",
            "-c",
            to,
            "-p",
            &port.to_string(),
            "-u",
            "-b",
            &bps.to_string(),
            "-l",
            &payload.to_string(),
            "-t",
            &seconds.to_string(),
            "-J",
            "--get-server-output",
        ],
    )?;
    serde_json::from_slice(&client.stdout)
        .with_context(|| format!("iperf3 -c: {}", String::from_utf8_lossy(&client.stderr)))
}

/// Runs `rtemu-bench engine`.
pub fn run(opts: &Options) -> Result<()> {
    rtemu_control::root::need_root("rtemu-bench engine")?;
    let wait = opts.wait.unwrap_or_else(engine::default_wait);
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "rtemu-bench engine: {} CPUs, engine wait {wait}, {} pings per chain\n",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        opts.pings
    )?;
    if opts.runs("per-hop") {
        per_hop(opts, &mut out)?;
    }
    if opts.runs("rate") {
        rate_accuracy(opts, &mut out)?;
    }
    if opts.runs("load") {
        load(opts, &mut out)?;
    }
    if opts.runs("throughput") {
        throughput(opts, &mut out)?;
    }
    if opts.runs("soak") {
        soak(opts, &mut out)?;
    }
    Ok(())
}

/// The soak's link rate, bits/s.
const SOAK_RATE_BPS: u64 = 10_000_000;

/// The soak's UDP payload, bytes: a 1042-byte frame.
const SOAK_PAYLOAD: usize = 1000;

/// The soak's frame on the link (UDP 8, IPv4 20, Ethernet 14 added), bytes.
const SOAK_FRAME: u64 = SOAK_PAYLOAD as u64 + 8 + 20 + 14;

/// The soak's queue limit, frames: about 100 ms at the link's rate.
const SOAK_LIMIT: u64 = SOAK_RATE_BPS / 10 / (SOAK_FRAME * 8);

/// The soak's UDP port at B.
const SOAK_PORT: u16 = 9100;

/// How much the engine's resident memory may grow over a soak, from its first snapshot to its
/// largest, KiB. The engine's buffers are allocated and locked at start, so steady operation
/// should add nothing; the bound leaves room for the allocator's arenas of the control thread
/// (each `stats` reply is built in memory) and the kernel's accounting of touched pages.
const SOAK_RSS_GROWTH_KIB: u64 = 4096;

/// How long the soak waits for the queue to drain after the sender stops.
const SOAK_DRAIN: Duration = Duration::from_secs(2);

/// One reading of the engine during the soak.
#[derive(Debug, Clone)]
struct SoakSnapshot {
    /// Seconds since the traffic started.
    t_s: f64,
    /// The a→b direction's counters since the traffic started: received, delivered, queue-full
    /// drops, other drops, in flight.
    received: u64,
    delivered: u64,
    queue_full: u64,
    other_drops: u64,
    in_flight: u64,
    /// Whether every direction's counters balanced in this snapshot.
    balanced: bool,
    /// The engine process's resident memory, KiB.
    rss_kib: u64,
}

/// Whether one direction's counters in a `stats` reply account for every copy:
/// received + duplicates = delivered + dropped + in flight.
fn balanced(d: &Direction) -> bool {
    d.received + d.duplicates == d.delivered + d.dropped_total() + d.in_flight
}

/// The resident memory of process `pid`, KiB, from `VmRSS` in `/proc/<pid>/status`.
fn rss_kib(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status (has the engine died?)"))?;
    vm_rss_kib(&status).with_context(|| format!("no VmRSS in /proc/{pid}/status"))
}

/// `VmRSS` in the text of a `/proc/<pid>/status`, KiB.
fn vm_rss_kib(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().strip_suffix("kB")?.trim().parse().ok())
}

/// UDP datagrams the kernel of namespace `ns` dropped because a socket's receive buffer was
/// full (`RcvbufErrors` in `/proc/net/snmp`).
fn udp_rcvbuf_errors(ns: &std::path::Path) -> Result<u64> {
    let snmp = netns::run_in(ns, || std::fs::read_to_string("/proc/thread-self/net/snmp"))??;
    rcvbuf_errors(&snmp).context("no Udp RcvbufErrors in /proc/net/snmp")
}

/// `RcvbufErrors` of the `Udp:` lines (names, then values) of `/proc/net/snmp`'s text.
fn rcvbuf_errors(snmp: &str) -> Option<u64> {
    let mut udp = snmp.lines().filter_map(|l| l.strip_prefix("Udp:"));
    let (names, values) = (udp.next()?, udp.next()?);
    let at = names.split_whitespace().position(|n| n == "RcvbufErrors")?;
    values.split_whitespace().nth(at)?.parse().ok()
}

/// The soak's snapshot of `stats` against `base` (the a→b direction before the traffic).
fn soak_snapshot(stats: &Stats, base: &Direction, t_s: f64) -> Result<SoakSnapshot> {
    let d = a_to_b(stats)?;
    let queue_full = |d: &Direction| d.dropped.get("queue-full").copied().unwrap_or(0);
    let queue_full = queue_full(d).saturating_sub(queue_full(base));
    let dropped = d.dropped_total().saturating_sub(base.dropped_total());
    Ok(SoakSnapshot {
        t_s,
        received: d.received.saturating_sub(base.received),
        delivered: d.delivered.saturating_sub(base.delivered),
        queue_full,
        other_drops: dropped.saturating_sub(queue_full),
        in_flight: d.in_flight,
        balanced: stats.directions.iter().all(balanced),
        rss_kib: rss_kib(stats.pid)?,
    })
}

/// Sends UDP datagrams of [`SOAK_PAYLOAD`] bytes from `socket` to `to` at `bps` (frame bits)
/// until `end` or `stop`, paced against absolute deadlines; returns how many the kernel took.
fn soak_sender(
    socket: std::net::UdpSocket,
    to: std::net::SocketAddr,
    bps: u64,
    end: std::time::Instant,
    stop: &AtomicBool,
) -> u64 {
    let payload = [0x5a_u8; SOAK_PAYLOAD];
    let gap = Duration::from_nanos(SOAK_FRAME * 8 * 1_000_000_000 / bps);
    let mut sent = 0u64;
    let mut due = std::time::Instant::now();
    while due < end && !stop.load(Ordering::Relaxed) {
        let now = std::time::Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        // A full socket buffer (ENOBUFS) loses the datagram before the link: not offered.
        if socket.send_to(&payload, to).is_ok() {
            sent += 1;
        }
        due += gap;
    }
    sent
}

/// The soak: 2× overload on a rate link for `opts.soak_minutes`, checked at every snapshot.
fn soak(opts: &Options, out: &mut impl Write) -> Result<()> {
    let name = format!("bsoak{}", std::process::id() % 100_000);
    remove(&name);
    let netem = format!("rate {} limit {SOAK_LIMIT}", rate_text(SOAK_RATE_BPS));
    let src = format!(
        "lab = \"{name}\"\nneighbours = \"static\"\nip = \"ipv4\"\n[nodes.a]\n[nodes.b]\n\
         [[links]]\nname = \"ab\"\nendpoints = [\"a\", \"b\"]\nnetem = \"{netem}\"\n"
    );
    let guard = LabGuard(bring_up(
        &Topology::parse("soak.toml", &src)?,
        "soak",
        &opts.engine(),
    )?);
    soak_run(&guard.0, opts, &netem, out)
}

fn soak_run(state: &State, opts: &Options, netem: &str, out: &mut impl Write) -> Result<()> {
    let duration = Duration::from_secs_f64(opts.soak_minutes * 60.0);
    let every = (duration / 6).clamp(Duration::from_secs(1), Duration::from_secs(5));
    let offered = 2 * SOAK_RATE_BPS;
    let b_addr = interface(state, "b", "a")?
        .ipv4
        .context("node b has no IPv4 address")?
        .addr();
    let b_if = interface(state, "b", "a")?.ifname.clone();
    let (a_ns, b_ns) = (
        netns::named(&node_netns(&state.lab, "a")),
        netns::named(&node_netns(&state.lab, "b")),
    );
    // The nodes keep IPv6 link-local addresses even with `ip = "ipv4"`, and their router
    // solicitations would cross the link too: without IPv6, the soak's datagrams are the only
    // frames a→b, so B's receiver must count exactly what the engine delivered.
    for ns in [&a_ns, &b_ns] {
        netns::run_in(ns, || {
            ["all", "default"].iter().try_for_each(|conf| {
                std::fs::write(format!("/proc/sys/net/ipv6/conf/{conf}/disable_ipv6"), "1")
            })
        })?
        .context("switching IPv6 off in the soak's nodes")?;
    }
    // Sockets keep the namespace they were made in, so threads anywhere can use them.
    let rx = netns::run_in(&b_ns, || std::net::UdpSocket::bind(("0.0.0.0", SOAK_PORT)))??;
    rx.set_read_timeout(Some(Duration::from_millis(100)))?;
    let tx = netns::run_in(&a_ns, || std::net::UdpSocket::bind(("0.0.0.0", 0)))??;
    let stop = Arc::new(AtomicBool::new(false));
    let receiver = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            let mut got = 0u64;
            while !stop.load(Ordering::Relaxed) {
                if let Ok(n) = rx.recv(&mut buf) {
                    got += u64::from(n == SOAK_PAYLOAD);
                }
            }
            got
        })
    };
    writeln!(
        out,
        "\n### Soak: UDP ({SOAK_PAYLOAD}-byte datagrams, {} frames) at {} Mbit/s through `{netem}` for {:.1} min, a snapshot every {} s\n",
        SOAK_FRAME,
        offered / 1_000_000,
        opts.soak_minutes,
        every.as_secs_f64()
    )?;
    let mut columns = [
        "t s",
        "received",
        "delivered",
        "queue-full",
        "other drops",
        "in flight",
        "balanced",
        "engine RSS KiB",
    ]
    .map(|h| (h, Align::Right));
    columns[6].1 = Align::Left;
    let table = Table::start(out, &columns)?;
    let base_stats = engine::stats(&state.lab)?;
    let base = a_to_b(&base_stats)?.clone();
    let b_before = ifcounters::interface_counters(&b_ns, &b_if)?.rx_packets;
    let socket_drops_before = udp_rcvbuf_errors(&b_ns)?;
    let started = std::time::Instant::now();
    let end = started + duration;
    let sender = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || soak_sender(tx, (b_addr, SOAK_PORT).into(), offered, end, &stop))
    };
    let mut snaps = Vec::new();
    let mut next = started + every;
    let row = |snaps: &mut Vec<SoakSnapshot>, out: &mut dyn Write| -> Result<()> {
        let stats = engine::stats(&state.lab)?;
        let s = soak_snapshot(&stats, &base, started.elapsed().as_secs_f64())?;
        table.row(
            out,
            &[
                format!("{:.0}", s.t_s),
                s.received.to_string(),
                s.delivered.to_string(),
                s.queue_full.to_string(),
                s.other_drops.to_string(),
                s.in_flight.to_string(),
                if s.balanced { "yes" } else { "NO" }.to_owned(),
                s.rss_kib.to_string(),
            ],
        )?;
        out.flush()?;
        snaps.push(s);
        Ok(())
    };
    let mut failed = None;
    while next <= end {
        std::thread::sleep(next.saturating_duration_since(std::time::Instant::now()));
        if let Err(e) = row(&mut snaps, out) {
            failed = Some(e);
            break;
        }
        next += every;
    }
    if failed.is_some() {
        stop.store(true, Ordering::Relaxed);
    }
    let sent = sender
        .join()
        .map_err(|_| anyhow::anyhow!("the soak's sender panicked"))?;
    if let Some(e) = failed {
        return Err(e);
    }
    // The queue holds at most 100 ms; wait until nothing is in flight.
    let drained = std::time::Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let s = soak_snapshot(
            &engine::stats(&state.lab)?,
            &base,
            started.elapsed().as_secs_f64(),
        )?;
        if s.in_flight == 0 || drained.elapsed() > SOAK_DRAIN {
            break;
        }
    }
    row(&mut snaps, out)?;
    // The receiver's last reads (its timeout is 100 ms).
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let received_by_b = receiver
        .join()
        .map_err(|_| anyhow::anyhow!("the soak's receiver panicked"))?;
    // A receiver descheduled too long (the machine is shared) loses datagrams to its full
    // socket buffer: the kernel counts them, and they were delivered all the same.
    let socket_drops = udp_rcvbuf_errors(&b_ns)?.saturating_sub(socket_drops_before);
    let at_b_if = ifcounters::interface_counters(&b_ns, &b_if)?
        .rx_packets
        .saturating_sub(b_before);
    let last = snaps.last().context("no snapshot")?.clone();
    let rss: Vec<u64> = snaps.iter().map(|s| s.rss_kib).collect();
    let (rss_first, rss_last, rss_max) =
        (rss[0], last.rss_kib, rss.iter().copied().max().unwrap_or(0));
    let secs = duration.as_secs_f64();
    let delivered_bps = last.delivered as f64 * (SOAK_FRAME * 8) as f64 / secs;
    let mut problems = Vec::new();
    let unbalanced = snaps.iter().filter(|s| !s.balanced).count();
    if unbalanced > 0 {
        problems.push(format!(
            "{unbalanced} of {} snapshots did not balance",
            snaps.len()
        ));
    }
    if last.in_flight != 0 {
        problems.push(format!(
            "{} frames still in flight after the drain",
            last.in_flight
        ));
    }
    if received_by_b + socket_drops != last.delivered {
        problems.push(format!(
            "B's receiver got {received_by_b} datagrams and its socket dropped {socket_drops}, \
             the engine delivered {}",
            last.delivered
        ));
    }
    if at_b_if != last.delivered {
        problems.push(format!(
            "B's interface received {at_b_if} frames, the engine delivered {}",
            last.delivered
        ));
    }
    if last.queue_full == 0 {
        problems.push("no queue-full drop: the link was not overloaded".to_owned());
    }
    if rss_max > rss_first + SOAK_RSS_GROWTH_KIB {
        problems.push(format!(
            "the engine's RSS grew from {rss_first} KiB to {rss_max} KiB, more than {SOAK_RSS_GROWTH_KIB} KiB"
        ));
    }
    writeln!(out)?;
    let table = Table::start(
        out,
        &[
            "sent",
            "received by engine",
            "delivered",
            "received by B (+ socket drops)",
            "at B's interface",
            "queue-full",
            "other drops",
            "delivered rate",
            "RSS first / last / max KiB",
            "snapshots balanced",
        ]
        .map(|h| (h, Align::Right)),
    )?;
    table.row(
        out,
        &[
            sent.to_string(),
            last.received.to_string(),
            last.delivered.to_string(),
            format!("{received_by_b} (+ {socket_drops})"),
            at_b_if.to_string(),
            last.queue_full.to_string(),
            last.other_drops.to_string(),
            format!("{:.3} Mbit/s", delivered_bps / 1e6),
            format!("{rss_first} / {rss_last} / {rss_max}"),
            format!("{} of {}", snaps.len() - unbalanced, snaps.len()),
        ],
    )?;
    writeln!(out)?;
    let summary = serde_json::json!({
        "part": "soak",
        "minutes": opts.soak_minutes,
        "link": netem,
        "offered_bps": offered,
        "frame_bytes": SOAK_FRAME,
        "sent": sent,
        "received": last.received,
        "delivered": last.delivered,
        "delivered_bps": delivered_bps,
        "received_by_b": received_by_b,
        "socket_drops_at_b": socket_drops,
        "at_b_interface": at_b_if,
        "queue_full": last.queue_full,
        "other_drops": last.other_drops,
        "snapshots": snaps.len(),
        "snapshots_balanced": snaps.len() - unbalanced,
        "rss_kib": { "first": rss_first, "last": rss_last, "max": rss_max, "bound_growth": SOAK_RSS_GROWTH_KIB },
        "ok": problems.is_empty(),
        "problems": problems,
    });
    writeln!(out, "{summary}")?;
    out.flush()?;
    if !problems.is_empty() {
        bail!("soak failed: {}", problems.join("; "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The a→b direction with these counters and drops, everything else zero.
    fn direction(
        received: u64,
        duplicates: u64,
        delivered: u64,
        in_flight: u64,
        dropped: &[(&str, u64)],
    ) -> Direction {
        let zero = rtemu_control::message::Percentiles {
            max_ns: 0,
            p50_ns: 0,
            p999_ns: 0,
            p99_ns: 0,
        };
        Direction {
            buffers: None,
            conserved: true,
            corrupted: 0,
            cut: false,
            delivered,
            delivered_bytes: 0,
            dir: "a-b".to_owned(),
            dropped: dropped.iter().map(|&(r, n)| (r.to_owned(), n)).collect(),
            duplicates,
            fidelity: rtemu_control::message::Fidelity {
                arrival_lag: zero,
                count: 0,
                early: 0,
                late: 0,
                late_after_ns: 0,
                lost: 0,
                released: zero,
                released_histogram: rtemu_control::message::Histogram {
                    counts: vec![0],
                    edges_ns: vec![],
                },
                started: zero,
            },
            from: "a".to_owned(),
            in_flight,
            kernel_drops: None,
            link: "ab".to_owned(),
            marked: 0,
            netem: None,
            received,
            received_bytes: 0,
            resolution_passed: 0,
            thread: Some(0),
            to: "b".to_owned(),
            trace_underruns: 0,
            tx_busy: 0,
            underlay: None,
        }
    }

    #[test]
    fn a_direction_balances_only_when_every_copy_is_accounted_for() {
        let d = direction(100, 2, 60, 12, &[("queue-full", 25), ("loss", 5)]);
        assert!(balanced(&d));
        let short = Direction {
            in_flight: 11,
            ..d.clone()
        };
        assert!(!balanced(&short));
    }

    #[test]
    fn a_soak_snapshot_counts_from_its_base_and_checks_every_direction() {
        let base = direction(10, 0, 8, 0, &[("queue-full", 2), ("loss", 0)]);
        let now = direction(110, 0, 58, 12, &[("queue-full", 37), ("loss", 3)]);
        let mut back = direction(5, 0, 5, 0, &[]);
        back.from = "b".to_owned();
        let stats = Stats {
            directions: vec![back.clone(), now],
            io: "af-packet".to_owned(),
            lab: LabName::new("bsoak1").unwrap(),
            monotonic_ns: 1,
            pid: std::process::id(),
            process_cpu_ns: None,
            threads: Vec::new(),
        };
        let s = soak_snapshot(&stats, &base, 2.0).unwrap();
        assert_eq!(
            (s.received, s.delivered, s.queue_full, s.other_drops),
            (100, 50, 35, 3)
        );
        assert_eq!(s.in_flight, 12);
        assert!(s.balanced);
        assert!(s.rss_kib > 0);
        // One direction short of a copy: the snapshot does not balance.
        let mut unbalanced = stats.clone();
        unbalanced.directions[0].delivered = 4;
        assert!(!soak_snapshot(&unbalanced, &base, 2.0).unwrap().balanced);
        // Without an a→b direction there is nothing to measure.
        let mut none = stats;
        none.directions = vec![back];
        assert!(soak_snapshot(&none, &base, 2.0).is_err());
    }

    #[test]
    fn udp_receive_buffer_drops_are_read_from_snmp() {
        let snmp = "Ip: Forwarding DefaultTTL\nIp: 1 64\n\
                    Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors\n\
                    Udp: 719549 0 217 3 217 0\nUdpLite: InDatagrams RcvbufErrors\nUdpLite: 0 0\n";
        assert_eq!(rcvbuf_errors(snmp), Some(217));
        assert_eq!(rcvbuf_errors("Ip: Forwarding\nIp: 1\n"), None);
    }

    #[test]
    fn vm_rss_is_read_from_the_status_text() {
        let status = "Name:\trtemu\nVmPeak:\t  99999 kB\nVmRSS:\t   54488 kB\nThreads:\t4\n";
        assert_eq!(vm_rss_kib(status), Some(54488));
        assert_eq!(vm_rss_kib("Name:\tkthreadd\n"), None);
        assert_eq!(vm_rss_kib("VmRSS:\tlots\n"), None);
    }

    #[test]
    fn the_soak_runs_only_when_asked_for() {
        let opts = |parts: &[&str]| Options {
            pings: 1,
            seconds: 1,
            wait: None,
            parts: parts.iter().map(|p| p.to_string()).collect(),
            soak_minutes: 1.0,
        };
        assert!(opts(&[]).runs("rate") && !opts(&[]).runs("soak"));
        assert!(opts(&["soak"]).runs("soak") && !opts(&["soak"]).runs("rate"));
    }

    #[test]
    fn the_steady_goodput_leaves_out_the_first_second_and_the_drain() {
        // The receiver of a 3 s run at 1 Mbit/s: 86 and 87 datagrams in the steady seconds.
        let intervals = [
            (0.0, 1.0, 102.0 * 1400.0),
            (1.0, 2.0, 86.0 * 1400.0),
            (2.0, 3.0, 87.0 * 1400.0),
            (3.0, 3.21, 10.0 * 1400.0),
        ];
        let bps = steady_goodput(&intervals, 3.0).unwrap();
        assert!((bps - 86.5 * 1400.0 * 8.0).abs() < 1e-6, "{bps}");
        assert_eq!(steady_goodput(&intervals[..1], 3.0), None);
        // Rows run long enough for 200 steady datagrams: 64 kbit/s needs 38 s.
        assert_eq!(rate_row_seconds(64_000, 3), 38);
        assert_eq!(rate_row_seconds(1_000_000, 3), 4);
        assert_eq!(rate_row_seconds(100_000_000, 3), 3);
    }

    fn up_state(path: Path) -> State {
        State {
            lab: LabName::new(TPUT_LAB).unwrap(),
            file: "tput.toml".to_owned(),
            namespaces: Vec::new(),
            nodes: Vec::new(),
            handovers: Vec::new(),
            cgroups: Vec::new(),
            programs: None,
            complete: true,
            topology: path.topology().unwrap(),
            part: None,
        }
    }

    #[test]
    fn every_path_has_its_lab_and_interfaces() {
        for path in Path::ALL {
            let state = up_state(path);
            let impaired = state.topology.impaired_links().count();
            assert_eq!(
                impaired,
                usize::from(matches!(path, Path::Relay(_) | Path::Engine(..))),
                "{path:?}"
            );
            let a = interface(&state, "a", path.after_a()).unwrap();
            let b = interface(&state, "b", path.before_b()).unwrap();
            assert_ne!(a.mac, b.mac);
        }
        assert!(interface(&up_state(Path::Router), "a", "b").is_err());
    }

    #[test]
    fn the_router_row_addresses_r_and_the_others_a_foreign_mac() {
        let router = up_state(Path::Router);
        let frame = tput_frame(&router, Path::Router, 64).unwrap();
        assert_eq!(frame[0..6], interface(&router, "r", "a").unwrap().mac.0);
        assert_eq!(frame[6..12], interface(&router, "a", "r").unwrap().mac.0);
        assert_eq!(frame[30..34], SINK_ADDR.octets());
        let veth = up_state(Path::Veth);
        let frame = tput_frame(&veth, Path::Veth, 1400).unwrap();
        assert_eq!(frame[0..6], bench::FOREIGN_MAC);
        assert_eq!(frame.len(), 1396);
        assert!(tput_frame(&veth, Path::Veth, 20).is_err());
    }

    #[test]
    fn drops_are_listed_by_reason_when_they_happened() {
        let before = direction(0, 0, 0, 0, &[("model", 1), ("pool-exhausted", 5)]);
        let after = direction(0, 0, 0, 0, &[("model", 1), ("pool-exhausted", 12)]);
        assert_eq!(drops_between(&before, &after), "pool-exhausted 7");
        assert_eq!(drops_between(&after, &after), "0");
        // A reason the earlier reply did not have counts from zero.
        let later = direction(0, 0, 0, 0, &[("model", 1), ("queue-full", 3)]);
        assert_eq!(drops_between(&before, &later), "queue-full 3");
    }
}
