//! `rtemu-bench sim`: how fast the models decide, measured and printed, never asserted.

use std::hint::black_box;
use std::io::Write;
use std::time::Instant;

use anyhow::Context as _;
use rtemu_model::link::NoTables;
use rtemu_model::{netem, Departure, DropReason, LinkModel, Model, Outcome, PacketMeta};
use rtemu_sim::engine::{self, Discard};
use rtemu_sim::fatelog::FateLog;
use rtemu_sim::traffic::{TrafficGen, TrafficSpec};
use serde::Serialize;

use crate::BenchArgs;

/// The model sets the issue asks about, from cheapest to the full netem set, then the queue
/// disciplines. The traffic is 1000-byte packets at 100 kpps, 800 Mbit/s, in 16 flows (the
/// UDP source port goes round 16 values): the first rate queue (10 Gbit/s) never fills, the
/// second (500 Mbit/s, 1.6× overloaded) stays full and drops tail, which exercises the queue's
/// drop path and its backlog bookkeeping. A discipline's decision is the packet's `decide`
/// and its `depart`, both timed.
const CASES: [(&str, &str); 11] = [
    ("delay only", "delay 10ms"),
    ("delay + jitter + loss", "delay 10ms 2ms loss 1%"),
    ("delay + loss (correlated)", "delay 10ms 2ms 25% distribution normal loss 1% 25%"),
    (
        "full netem set + rate queue",
        "delay 20ms 5ms 25% distribution normal loss 1% 25% duplicate 0.5% corrupt 0.1% reorder 10% 50% rate 10gbit limit 1000",
    ),
    (
        "full netem set + overloaded queue",
        "delay 20ms 5ms 25% distribution normal loss 1% 25% duplicate 0.5% corrupt 0.1% reorder 10% 50% rate 500mbit limit 1000",
    ),
    ("codel, overloaded", "rate 500mbit codel delay 10ms"),
    ("fq_codel, 16 flows, overloaded", "rate 500mbit fq_codel delay 10ms"),
    ("fq_codel, 16 flows, never full", "rate 10gbit fq_codel delay 10ms"),
    ("pie, overloaded", "rate 500mbit pie limit 10000 delay 10ms"),
    ("pie docsis, overloaded", "rate 500mbit pie docsis limit 10000 delay 10ms"),
    ("dualpi2, classic, overloaded", "rate 500mbit dualpi2 delay 10ms"),
];

/// The case the whole-simulator measurement runs: the full set with a queue that never fills.
const SIM_CASE: usize = 3;

#[derive(Debug, Serialize)]
struct Case {
    name: &'static str,
    model: &'static str,
    /// Median decisions per second over the repetitions.
    decisions_per_s: f64,
    /// Slowest and fastest repetition.
    min_per_s: f64,
    max_per_s: f64,
    /// Offered load over the rate queue's rate (800 Mbit/s of packets before loss and
    /// duplicates, over the configured rate); absent without `rate`. Above 1: overloaded.
    offered_load: Option<f64>,
    /// Whether the rate queue is offered more than it serves, so it fills and drops tail.
    overloaded: bool,
    /// Of the packets, the fraction that lost a copy to a full rate queue (from one untimed
    /// run over the same packets, with the same seed as the timed ones).
    queue_full_fraction: f64,
    /// Of the packets, the fraction that lost a copy to the queue discipline (`aqm`), in the
    /// same run.
    aqm_fraction: f64,
    /// The rate queue's largest backlog in that run, packets.
    max_backlog_packets: u64,
}

#[derive(Debug, Serialize)]
struct Report {
    packets: u64,
    repeat: usize,
    cases: Vec<Case>,
    /// Whole simulator (generator, model, in-flight heap, discard sink), packets per second.
    sim_packets_per_s: f64,
    /// Peak resident memory after a run of `packets` and after one ten times longer, in KiB:
    /// the simulator streams, so the two should be about equal.
    peak_rss_kib: (u64, u64),
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// The benchmark's packets: 1000 bytes, back to back at 100 kpps (800 Mbit/s).
const PACKET_BYTES: u32 = 1000;
const INTERVAL_NS: u64 = 10_000;

fn packet(i: u64) -> PacketMeta {
    PacketMeta {
        len: PACKET_BYTES,
        flow: rtemu_model::FlowKey {
            src_port: (i % 16) as u16,
            ..Default::default()
        },
        arrival_ns: i * INTERVAL_NS,
        seq: i,
        ecn: Default::default(),
    }
}

/// Decisions per second for one model over `n` of the benchmark's packets.
fn decide_rate(args: &str, n: u64) -> anyhow::Result<f64> {
    let mut model = LinkModel::new(&netem::parse(args)?, &NoTables, 1, 0)?;
    let start = Instant::now();
    for i in 0..n {
        let p = packet(i);
        while let Some(d) = model.depart_by(p.arrival_ns) {
            black_box(d);
        }
        black_box(model.decide(black_box(&p)));
    }
    while let Some(d) = model.depart_by(u64::MAX) {
        black_box(d);
    }
    Ok(n as f64 / start.elapsed().as_secs_f64())
}

/// What the rate queue did over `n` of the benchmark's packets, outside the timed runs: the
/// offered load over the rate (none without `rate`), the fractions of packets that lost a copy
/// to a full queue and to the discipline, and the largest backlog in packets.
fn queue_behaviour(args: &str, n: u64) -> anyhow::Result<(Option<f64>, [f64; 2], u64)> {
    let config = netem::parse(args)?;
    let offered_bps = f64::from(PACKET_BYTES) * 8.0 * 1e9 / INTERVAL_NS as f64;
    let load = config
        .rate
        .as_ref()
        .map(|r| offered_bps / r.rate.0.max(1) as f64);
    let mut model = LinkModel::new(&config, &NoTables, 1, 0)?;
    // Packets that lost a copy to a full queue, and to the discipline.
    let mut lost = [0u64; 2];
    let reasons = [DropReason::QueueFull, DropReason::Aqm];
    let count = |lost: &mut [u64; 2], d: Departure| {
        for (n, r) in lost.iter_mut().zip(reasons) {
            *n += u64::from(d.outcome == Outcome::Dropped(r) && d.copy == 0);
        }
    };
    for i in 0..n {
        let p = packet(i);
        while let Some(d) = model.depart_by(p.arrival_ns) {
            count(&mut lost, d);
        }
        let fate = model.decide(&p);
        for (n, r) in lost.iter_mut().zip(reasons) {
            *n += u64::from(fate.drops().any(|d| d == r));
        }
    }
    while let Some(d) = model.depart_by(u64::MAX) {
        count(&mut lost, d);
    }
    Ok((
        load,
        lost.map(|l| l as f64 / n as f64),
        model.counters().max_backlog_packets,
    ))
}

/// The `VmHWM` line of `/proc/self/status`: peak resident memory in KiB.
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn sim_run(packets: u64) -> anyhow::Result<f64> {
    let seconds = packets as f64 / 1e6;
    let spec: TrafficSpec = format!("cbr 1000000pps 1000B {seconds}s").parse()?;
    let mut model = LinkModel::new(&netem::parse(CASES[SIM_CASE].1)?, &NoTables, 1, 0)?;
    let start = Instant::now();
    let s = engine::run(
        &mut TrafficGen::new(&spec, 1),
        &mut model,
        &mut Discard,
        None::<&mut FateLog<std::io::Sink>>,
        &mut |_| {},
    )?;
    Ok(s.packets_in as f64 / start.elapsed().as_secs_f64())
}

/// Runs `rtemu-bench sim`.
pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.packets > 0 && args.repeat > 0,
        "--packets and --repeat must be at least 1"
    );
    let mut cases = Vec::new();
    for (name, model) in CASES {
        let rates = (0..args.repeat)
            .map(|_| decide_rate(model, args.packets))
            .collect::<anyhow::Result<Vec<_>>>()
            .with_context(|| format!("case {name}"))?;
        let (lo, hi) = (
            rates.iter().copied().fold(f64::MAX, f64::min),
            rates.iter().copied().fold(0.0, f64::max),
        );
        let (offered_load, [queue_full_fraction, aqm_fraction], max_backlog_packets) =
            queue_behaviour(model, args.packets).with_context(|| format!("case {name}"))?;
        cases.push(Case {
            name,
            model,
            decisions_per_s: median(rates),
            min_per_s: lo,
            max_per_s: hi,
            offered_load,
            overloaded: offered_load.is_some_and(|l| l > 1.0),
            queue_full_fraction,
            aqm_fraction,
            max_backlog_packets,
        });
    }
    let sim_packets_per_s = median(
        (0..args.repeat)
            .map(|_| sim_run(args.packets))
            .collect::<anyhow::Result<_>>()?,
    );
    let short = peak_rss_kib();
    sim_run(args.packets * 10)?;
    let report = Report {
        packets: args.packets,
        repeat: args.repeat,
        cases,
        sim_packets_per_s,
        peak_rss_kib: (short, peak_rss_kib()),
    };

    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
        return Ok(());
    }
    writeln!(
        out,
        "rtemu-bench sim: {} packets per measurement, median of {}, one core",
        report.packets, report.repeat
    )?;
    writeln!(
        out,
        "{:<36}{:>14}{:>20}   rate queue (offered 800 Mbit/s)",
        "model", "decisions/s", "range"
    )?;
    for c in &report.cases {
        let queue = match c.offered_load {
            None => "none".to_owned(),
            Some(load) => format!(
                "{}: load {load:.2}, peak {} pkts, {:.2} % queue-full, {:.2} % aqm drops",
                if c.overloaded {
                    "OVERLOADED"
                } else {
                    "never full"
                },
                c.max_backlog_packets,
                100.0 * c.queue_full_fraction,
                100.0 * c.aqm_fraction
            ),
        };
        writeln!(
            out,
            "{:<36}{:>12.2} M{:>10.2} – {:.2} M   {queue}",
            c.name,
            c.decisions_per_s / 1e6,
            c.min_per_s / 1e6,
            c.max_per_s / 1e6
        )?;
    }
    writeln!(
        out,
        "{:<36}{:>12.2} M  (generator → {} → delay line → discard)",
        "simulator, packets/s",
        report.sim_packets_per_s / 1e6,
        CASES[SIM_CASE].0
    )?;
    writeln!(
        out,
        "{:<36}{:>10} KiB after {} packets, {} KiB after {}",
        "peak memory",
        report.peak_rss_kib.0,
        report.packets,
        report.peak_rss_kib.1,
        report.packets * 10
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_overloaded_queue_fills_and_drops_tail() {
        let (load, [full, aqm], backlog) = queue_behaviour(CASES[3].1, 20_000).unwrap();
        // 800 Mbit/s offered to 10 Gbit/s.
        assert!((load.unwrap() - 0.08).abs() < 1e-9, "{load:?}");
        assert_eq!((full, aqm), (0.0, 0.0));
        assert!(backlog < 1000, "{backlog}");
        let (load, [full, aqm], backlog) = queue_behaviour(CASES[4].1, 20_000).unwrap();
        assert!((load.unwrap() - 1.6).abs() < 1e-9, "{load:?}");
        // Once full, 1 - 1/1.6 of the packets find no room.
        assert!(full > 0.25 && full < 0.4 && aqm == 0.0, "{full}");
        assert!(backlog > 900 && backlog <= 1000, "{backlog}");
        assert_eq!(
            queue_behaviour(CASES[0].1, 100).unwrap(),
            (None, [0.0; 2], 0)
        );
        // FQ-CoDel against 16 unresponsive flows 1.6× over the rate: CoDel's drop rate grows
        // too slowly to hold them, so the 10 240-packet limit is reached and drops from the
        // fattest queues (together with CoDel's, about 1 − 1/1.6 of the packets).
        let (load, [full, aqm], backlog) = queue_behaviour(CASES[6].1, 200_000).unwrap();
        assert!((load.unwrap() - 1.6).abs() < 1e-9, "{load:?}");
        assert!(full > 0.2 && full < 0.4 && aqm > 0.0, "{full} {aqm}");
        assert!(backlog <= 10_240, "{backlog}");
        // PIE holds the same overload mostly by its own drops (the tail drops while its
        // probability grows in the first of these 2 s).
        for case in &CASES[8..10] {
            let (_, [full, aqm], _) = queue_behaviour(case.1, 200_000).unwrap();
            assert!(
                aqm > 0.25 && full < aqm / 2.0 && full + aqm < 0.4,
                "{}: {full} {aqm}",
                case.0
            );
        }
        // DualPI2's classic probability stops at 1/k² (25 %), short of the 37.5 % this
        // overload needs: the tail drops the rest.
        let (_, [full, aqm], _) = queue_behaviour(CASES[10].1, 200_000).unwrap();
        assert!(aqm > 0.1 && aqm < 0.26 && full > 0.1, "{full} {aqm}");
    }
}
