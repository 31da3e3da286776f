//! `rtemu bench engine`: the real-time engine in labs, with real programs, measured side by
//! side in one run and printed as Markdown tables, never asserted.
//!
//! * **Per-hop latency** (the vimage paper's Figure 6b): ping round trips along chains of 1–8
//!   links, every link impaired with `delay 0ms` (each hop through the engine), beside the same
//!   chains with ideal links (kernel veth pairs). The difference over 2 × hops is what one pass
//!   through the engine costs; measured for both packet I/O layers, `AF_PACKET` and AF_XDP.
//! * **CPU against offered load** (RplTrc's Table II): iperf3 UDP at 1k–200k packets/s through
//!   `delay 1ms`: received packets/s, the engine process's CPU, its release-error percentiles,
//!   late copies and drops.
//! * **Throughput**: iperf3 UDP as fast as it sends, through the kernel's own forwarding (a
//!   direct veth, a router namespace) and through the engine (`delay 0ms`, `delay 10ms`, each
//!   over `AF_PACKET` and over AF_XDP), for 64- and 1400-byte datagrams, in one run.
//!
//! The load and rate parts run the engine on its default I/O (`AF_PACKET`).
//! * **Rate accuracy** (the timing paper's Figure 1): iperf3 UDP through a `rate R` link at
//!   1.25 × R offered, for R from 64 kbit/s to 1 Gbit/s (one lab, the rate changed with
//!   `link set` between points), against the payload rate R implies for 1400-byte datagrams.

use std::io::Write;
use std::process::Output;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use rtemu_clock::WaitStrategy;
use rtemu_topo::lab;
use rtemu_topo::state::State;
use rtemu_topo::Topology;
use serde_json::Value;

use super::engine::{self, IoKind};
use super::topo::{bring_up, bring_up_io};

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

/// Options of `rtemu bench engine`.
#[derive(Debug, Clone)]
pub struct Options {
    /// Pings per chain.
    pub pings: u32,
    /// Seconds per rate.
    pub seconds: u32,
    /// The engine's wait strategy (default: the machine's, as for `up`).
    pub wait: Option<WaitStrategy>,
    /// The parts to run (`per-hop`, `rate`, `load`, `throughput`); empty: all.
    pub parts: Vec<String>,
}

impl Options {
    fn runs(&self, part: &str) -> bool {
        self.parts.is_empty() || self.parts.iter().any(|p| p == part)
    }
}

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
    let _ = engine::stop(lab);
    let _ = lab::down(lab);
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
    let rtts: Vec<f64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split("time=").nth(1))
        .filter_map(|t| t.trim_end_matches(" ms").parse().ok())
        .collect();
    if rtts.is_empty() {
        bail!("no ping crossed the {hops}-hop chain");
    }
    Ok(rtts)
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
    let state = bring_up_io(&topo, "chain", opts.wait, None, io)?;
    let measured = match io {
        Some(io) => check_io(&name, io).and_then(|()| chain_rtts(&state, hops, opts.pings)),
        None => chain_rtts(&state, hops, opts.pings),
    };
    remove(&name);
    measured
}

/// Fails when lab `lab`'s engine does not run on `io` (AF_XDP could not be set up).
fn check_io(lab: &str, io: IoKind) -> Result<()> {
    let stats = engine::stats(lab)?;
    match stats["io"].as_str() {
        Some(got) if got == io.as_str() => Ok(()),
        got => bail!(
            "lab {lab}'s engine runs on {}, not {} (see /run/rtemu/{lab}/engine.log)",
            got.unwrap_or("?"),
            io.as_str()
        ),
    }
}

/// The median and 99th percentile of `rtts` (ms), in µs.
fn p50_p99(mut rtts: Vec<f64>) -> (f64, f64) {
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
    writeln!(
        out,
        "| hops | ideal RTT p50 µs | AF_PACKET RTT p50 µs | p99 µs | added per hop µs | AF_XDP RTT p50 µs | p99 µs | added per hop µs |"
    )?;
    writeln!(
        out,
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    )?;
    for hops in CHAINS {
        let (ideal, _) = p50_p99(chain_run(opts, hops, None)?);
        write!(out, "| {hops} | {ideal:.1} |")?;
        for io in IOS {
            let (p50, p99) = p50_p99(chain_run(opts, hops, Some(io))?);
            write!(
                out,
                " {p50:.1} | {p99:.1} | {:.1} |",
                (p50 - ideal) / (2 * hops) as f64
            )?;
        }
        writeln!(out)?;
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
    let state = bring_up(
        &Topology::parse("rate.toml", &src)?,
        "rate",
        opts.wait,
        None,
    )?;
    let result = rate_rows(&state, opts, out);
    remove(name);
    result
}

fn rate_rows(state: &State, opts: &Options, out: &mut impl Write) -> Result<()> {
    writeln!(
        out,
        "\n### Rate accuracy: iperf3 UDP ({PAYLOAD}-byte datagrams) through `rate R`, offered 1.25 × R, {} s per row\n",
        opts.seconds
    )?;
    writeln!(
        out,
        "| rate R | queue limit | expected goodput | measured goodput | measured / expected | lost % (iperf3) | queue-full | pool-exhausted | kernel drops |"
    )?;
    writeln!(
        out,
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    )?;
    let frame = PAYLOAD + 8 + 20 + 14;
    for (row, rate) in RATES.into_iter().enumerate() {
        let limit = queue_limit(rate);
        let set = format!("set ab both rate {} limit {limit}", rate_text(rate));
        engine::ask(&state.lab, &set, Duration::from_secs(5))?;
        // A port per row: the last row's server may still be receiving its backlog.
        let port = IPERF_PORT + row as u16;
        udp_server(state, "b", port)?;
        let before = engine::stats(&state.lab)?;
        let json = udp_client(state, "b", port, rate + rate / 4, PAYLOAD, opts.seconds)?;
        let after = engine::stats(&state.lab)?;
        let sum = &json["end"]["sum"];
        // iperf3's receiver-side rate is over the sender's interval; its bytes over the
        // same seconds are what arrived.
        let received_bps = json["end"]["sum_received"]["bits_per_second"]
            .as_f64()
            .or_else(|| sum["bits_per_second"].as_f64())
            .unwrap_or(f64::NAN);
        let lost = sum["lost_percent"].as_f64().unwrap_or(f64::NAN);
        let expected = rate as f64 * PAYLOAD as f64 / frame as f64;
        // Every drop a→b, by any reason (the rate queue's, the pool's …), and the kernel's.
        let drops = |s: &Value, reason: &str| -> u64 {
            s["directions"]
                .as_array()
                .map(|ds| {
                    ds.iter()
                        .filter(|d| d["from"] == "a")
                        .map(|d| {
                            if reason == "kernel" {
                                d["kernel_drops"].as_u64().unwrap_or(0)
                            } else {
                                d["dropped"][reason].as_u64().unwrap_or(0)
                            }
                        })
                        .sum()
                })
                .unwrap_or(0)
        };
        let delta = |reason: &str| drops(&after, reason) - drops(&before, reason);
        writeln!(
            out,
            "| {} | {limit} | {:.1} kbit/s | {:.1} kbit/s | {:.3} | {lost:.1} | {} | {} | {} |",
            rate_text(rate),
            expected / 1e3,
            received_bps / 1e3,
            received_bps / expected,
            delta("queue-full"),
            delta("pool-exhausted"),
            delta("kernel"),
        )?;
        out.flush()?;
        // Let the backlog (at most the 100 ms queue) drain.
        std::thread::sleep(Duration::from_millis(300));
    }
    Ok(())
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
    writeln!(
        out,
        "| link | offered pps | received pps | engine CPU % | release p50 µs | p99 µs | p99.9 µs | max µs | late (>100 µs) | dropped | kernel drops | trace under-runs |"
    )?;
    writeln!(
        out,
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    )?;
    // The trace-driven row: fractional Gaussian noise (Hurst 0.8) around 1 ms, streamed from
    // a file of a million records.
    let dir = std::env::temp_dir().join(format!("rtemu-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let result = load_rows(opts, &dir.join("lrd.rpl"), out);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// The rows of [`load`], with the trace-driven rows' trace written to `trace`.
fn load_rows(opts: &Options, trace: &std::path::Path, out: &mut impl Write) -> Result<()> {
    let gen = std::process::Command::new(std::env::current_exe()?)
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
        let state = bring_up(
            &Topology::parse("load.toml", &src)?,
            "load",
            opts.wait,
            None,
        )?;
        let row = load_row(&state, opts, pps);
        remove(name);
        let (received_pps, cpu, d) = row?;
        let f = &d["fidelity"];
        let r = &f["released"];
        let us = |v: &Value| v.as_f64().unwrap_or(f64::NAN) / 1e3;
        let dropped: u64 = d["dropped"]
            .as_object()
            .map(|m| m.values().filter_map(Value::as_u64).sum())
            .unwrap_or(0);
        let shown = if link.starts_with("trace") {
            "fGn trace, 1 ms ± 0.1 ms, H 0.8"
        } else {
            "`delay 1ms`"
        };
        writeln!(
            out,
            "| {shown} | {pps} | {received_pps:.0} | {cpu:.0} | {:.1} | {:.1} | {:.1} | {:.1} | {} | {dropped} | {} | {} |",
            us(&r["p50_ns"]),
            us(&r["p99_ns"]),
            us(&r["p999_ns"]),
            us(&r["max_ns"]),
            f["late"],
            d["kernel_drops"],
            d["trace_underruns"],
        )?;
        out.flush()?;
    }
    Ok(())
}

/// One load row: iperf3 at `pps`; returns the receiver's packets per second, the engine's CPU
/// % over the run, and the a→b direction's stats at the end.
fn load_row(state: &State, opts: &Options, pps: u64) -> Result<(f64, f64, Value)> {
    udp_server(state, "b", IPERF_PORT)?;
    let before = engine::stats(&state.lab)?;
    let started = std::time::Instant::now();
    let bps = pps * SMALL_PAYLOAD * 8;
    let json = udp_client(state, "b", IPERF_PORT, bps, SMALL_PAYLOAD, opts.seconds)?;
    let after = engine::stats(&state.lab)?;
    let wall_ns = started.elapsed().as_nanos() as f64;
    let cpu_ns = after["process_cpu_ns"].as_f64().unwrap_or(f64::NAN)
        - before["process_cpu_ns"].as_f64().unwrap_or(f64::NAN);
    let packets = json["end"]["sum"]["packets"].as_f64().unwrap_or(f64::NAN);
    let lost = json["end"]["sum"]["lost_packets"]
        .as_f64()
        .unwrap_or(f64::NAN);
    let seconds = json["end"]["sum"]["seconds"].as_f64().unwrap_or(f64::NAN);
    let d = after["directions"]
        .as_array()
        .and_then(|ds| ds.iter().find(|d| d["from"] == "a").cloned())
        .context("no a→b direction in the engine's stats")?;
    Ok(((packets - lost) / seconds, cpu_ns / wall_ns * 100.0, d))
}

/// The paths of the throughput comparison: a label, the chain's link lines, the node the
/// traffic ends at, and the engine's I/O (`None`: no engine on the path).
const PATHS: [(&str, &str, &str, Option<IoKind>); 6] = [
    (
        "kernel: direct veth",
        "[[links]]\nendpoints = [\"a\", \"b\"]\n",
        "b",
        None,
    ),
    (
        "kernel: router namespace",
        "[[links]]\nendpoints = [\"a\", \"r\"]\n[[links]]\nendpoints = [\"r\", \"b\"]\n",
        "b",
        None,
    ),
    (
        "engine (AF_PACKET): `delay 0ms`",
        "[[links]]\nname = \"ab\"\nendpoints = [\"a\", \"b\"]\nnetem = \"delay 0ms\"\n",
        "b",
        Some(IoKind::AfPacket),
    ),
    (
        "engine (AF_XDP): `delay 0ms`",
        "[[links]]\nname = \"ab\"\nendpoints = [\"a\", \"b\"]\nnetem = \"delay 0ms\"\n",
        "b",
        Some(IoKind::AfXdp),
    ),
    (
        "engine (AF_PACKET): `delay 10ms`",
        "[[links]]\nname = \"ab\"\nendpoints = [\"a\", \"b\"]\nnetem = \"delay 10ms\"\n",
        "b",
        Some(IoKind::AfPacket),
    ),
    (
        "engine (AF_XDP): `delay 10ms`",
        "[[links]]\nname = \"ab\"\nendpoints = [\"a\", \"b\"]\nnetem = \"delay 10ms\"\n",
        "b",
        Some(IoKind::AfXdp),
    ),
];

/// Packets per second through the kernel's own forwarding and through the engine, side by
/// side: iperf3 UDP offered as fast as it can send, for each frame size.
fn throughput(opts: &Options, out: &mut impl Write) -> Result<()> {
    writeln!(
        out,
        "\n### Throughput: iperf3 UDP as fast as it sends, {} s per row, kernel forwarding beside the engine\n",
        opts.seconds
    )?;
    writeln!(
        out,
        "| path | payload B | sent pps | received pps | received Mbit/s (payload) | lost % |"
    )?;
    writeln!(out, "| --- | ---: | ---: | ---: | ---: | ---: |")?;
    for payload in [SMALL_PAYLOAD, PAYLOAD] {
        for (label, links, to, io) in PATHS {
            let name = "btput";
            remove(name);
            let src = format!(
                "lab = \"{name}\"\nneighbours = \"static\"\nip = \"ipv4\"\n[nodes.a]\n[nodes.r]\n[nodes.b]\n{links}"
            );
            let state = bring_up_io(
                &Topology::parse("tput.toml", &src)?,
                "tput",
                opts.wait,
                None,
                io,
            )?;
            let row = io
                .map_or(Ok(()), |io| check_io(name, io))
                .and_then(|()| udp_server(&state, to, IPERF_PORT))
                .and_then(|()| udp_client(&state, to, IPERF_PORT, 0, payload, opts.seconds));
            remove(name);
            let json = row?;
            let sum = &json["end"]["sum"];
            let f = |k: &str| sum[k].as_f64().unwrap_or(f64::NAN);
            let seconds = f("seconds");
            let sent = f("packets") / seconds;
            let received = (f("packets") - f("lost_packets")) / seconds;
            writeln!(
                out,
                "| {label} | {payload} | {sent:.0} | {received:.0} | {:.1} | {:.1} |",
                received * payload as f64 * 8.0 / 1e6,
                f("lost_percent"),
            )?;
            out.flush()?;
        }
    }
    Ok(())
}

/// Starts a one-shot iperf3 server in node `node` on `port`, and gives it time to listen.
fn udp_server(state: &State, node: &str, port: u16) -> Result<()> {
    let server = run_in(
        state,
        node,
        &["iperf3", "-s", "-D", "-1", "-p", &port.to_string()],
    )?;
    if !server.status.success() {
        bail!("iperf3 -s: {}", String::from_utf8_lossy(&server.stderr));
    }
    std::thread::sleep(Duration::from_millis(300));
    Ok(())
}

/// Runs iperf3 UDP from node `a` to node `to` on `port` at `bps` (0: as fast as it can) with
/// `payload` bytes per datagram, and returns its JSON report.
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
        ],
    )?;
    serde_json::from_slice(&client.stdout)
        .with_context(|| format!("iperf3 -c: {}", String::from_utf8_lossy(&client.stderr)))
}

/// Runs `rtemu bench engine`.
pub fn run(opts: &Options) -> Result<()> {
    super::need_root("rtemu bench engine")?;
    let wait = opts.wait.unwrap_or_else(engine::default_wait);
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "rtemu bench engine: {} CPUs, engine wait {wait}, {} pings per chain\n",
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
    Ok(())
}
