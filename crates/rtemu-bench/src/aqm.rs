//! `rtemu bench aqm`: bufferbloat and its cures, in virtual time. The same upload and the same
//! "game" flow cross a 10 Mbit/s link behind each queue rtemu models; the table gives the game
//! flow's queueing delay and what each queue did to the upload.
//!
//! The models are driven in time order as the simulator drives them (departures due by an
//! arrival first), so every figure is a function of the seed: the same on any machine. The
//! simulator replays traffic and has no TCP, so the upload is unresponsive: Poisson arrivals of
//! 1500-byte frames 20 % over the link's rate, the overload a bulk TCP flow presents to a
//! queue between its window's growth and its loss. That is the hardest case for a queue: a
//! responsive flow backs off when the queue drops or marks, this one never does. A lab with
//! real TCP is the root test `aqm_lab` in `crates/rtemu/tests`.

use std::io::Write;

use rtemu_model::link::NoTables;
use rtemu_model::{netem, FlowKey, LinkModel, Model, Outcome, PacketMeta, Stream};
use serde::Serialize;

use crate::BenchArgs;

/// The queues compared, each on `rate 10mbit`.
const QUEUES: [(&str, &str); 7] = [
    ("drop-tail, 500 ms", "limit 500ms"),
    ("drop-tail, 1000 packets", "limit 1000"),
    ("CoDel", "codel"),
    ("FQ-CoDel", "fq_codel"),
    ("PIE", "pie"),
    ("DOCSIS-PIE", "pie docsis"),
    ("DualPI2", "dualpi2"),
];

/// The link's rate, bit/s.
const RATE: f64 = 10e6;
/// The upload's frames and their mean rate: 1000 pps of 1500 bytes, 12 Mbit/s.
const UPLOAD_BYTES: u32 = 1500;
const UPLOAD_PPS: f64 = 1000.0;
/// The game flow: 50 pps of 100 bytes, evenly spaced.
const GAME_BYTES: u32 = 100;
const GAME_GAP_NS: u64 = 20_000_000;
/// Simulated time, and the start of what is measured (the queues have settled by then).
const SECONDS: u64 = 60;
const MEASURED_FROM_NS: u64 = 10_000_000_000;

#[derive(Debug, Serialize)]
struct Row {
    queue: &'static str,
    model: String,
    /// The game flow's time through the link (its wait and its own 80 µs serialization) over
    /// the measured time, ms (nearest-rank percentiles).
    game_p50_ms: f64,
    game_p99_ms: f64,
    game_max_ms: f64,
    /// Game frames the queue dropped, %.
    game_lost_percent: f64,
    /// The upload's delivered rate over the measured time, Mbit/s.
    upload_mbit_s: f64,
    /// Upload frames dropped, %.
    upload_dropped_percent: f64,
}

/// One packet of the run: which flow, when it arrived, and when it left (`None`: dropped).
struct Packet {
    game: bool,
    arrival_ns: u64,
    left_ns: Option<u64>,
}

/// Runs the upload and the game flow through `model` with `seed`.
fn run_one(model: &str, seed: u64) -> anyhow::Result<Vec<Packet>> {
    let mut m = LinkModel::new(&netem::parse(model)?, &NoTables, seed, 0)?;
    let mut arrivals = Stream::new(seed, 0x4255_4c4b); // "BULK"
    let end = SECONDS * 1_000_000_000;
    let mut packets: Vec<Packet> = Vec::new();
    let (mut upload_at, mut game_at) = (0u64, 3_000_000u64);
    let settle = |m: &mut LinkModel, now: u64, packets: &mut Vec<Packet>| {
        while let Some(d) = m.depart_by(now) {
            if let Outcome::Delivered(del) = d.outcome {
                packets[d.seq as usize].left_ns = Some(del.at_ns);
            }
        }
    };
    while upload_at < end || game_at < end {
        let game = game_at <= upload_at;
        let arrival_ns = if game { game_at } else { upload_at };
        settle(&mut m, arrival_ns, &mut packets);
        let seq = packets.len() as u64;
        let p = PacketMeta {
            len: if game { GAME_BYTES } else { UPLOAD_BYTES },
            flow: FlowKey {
                src_port: if game { 7000 } else { 5201 },
                protocol: if game { 17 } else { 6 },
                ..FlowKey::default()
            },
            arrival_ns,
            seq,
            ecn: Default::default(),
        };
        let fate = m.decide(&p);
        packets.push(Packet {
            game,
            arrival_ns,
            left_ns: fate.delivered.as_slice().first().map(|d| d.at_ns),
        });
        if game {
            game_at += GAME_GAP_NS;
        } else {
            let gap = -arrivals.open01().ln() / UPLOAD_PPS;
            upload_at += (gap * 1e9) as u64;
        }
    }
    settle(&mut m, u64::MAX, &mut packets);
    Ok(packets)
}

/// The `p`-quantile of sorted `xs`, nearest rank.
fn percentile(xs: &[u64], p: f64) -> u64 {
    xs[((xs.len() as f64 * p).ceil() as usize).clamp(1, xs.len()) - 1]
}

/// The game flow's delays and the upload's fate over the measured time.
fn row(queue: &'static str, model: String, packets: &[Packet]) -> Row {
    let measured = packets.iter().filter(|p| p.arrival_ns >= MEASURED_FROM_NS);
    let (game, upload): (Vec<&Packet>, Vec<&Packet>) = measured.partition(|p| p.game);
    let mut delays: Vec<u64> = game
        .iter()
        .filter_map(|p| p.left_ns.map(|t| t - p.arrival_ns))
        .collect();
    delays.sort_unstable();
    let ms = |ns: u64| ns as f64 / 1e6;
    let lost = |ps: &[&Packet]| {
        100.0 * ps.iter().filter(|p| p.left_ns.is_none()).count() as f64 / ps.len().max(1) as f64
    };
    let upload_bytes =
        upload.iter().filter(|p| p.left_ns.is_some()).count() as f64 * f64::from(UPLOAD_BYTES);
    let seconds = (SECONDS * 1_000_000_000 - MEASURED_FROM_NS) as f64 / 1e9;
    Row {
        queue,
        model,
        game_p50_ms: ms(percentile(&delays, 0.5)),
        game_p99_ms: ms(percentile(&delays, 0.99)),
        game_max_ms: ms(*delays.last().unwrap_or(&0)),
        game_lost_percent: lost(&game),
        upload_mbit_s: upload_bytes * 8.0 / seconds / 1e6,
        upload_dropped_percent: lost(&upload),
    }
}

/// Runs `rtemu bench aqm`.
pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    for (queue, words) in QUEUES {
        let model = format!("rate 10mbit {words}");
        let packets = run_one(&model, args.seed)?;
        rows.push(row(queue, model, &packets));
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &rows)?;
        writeln!(out)?;
        return Ok(());
    }
    writeln!(
        out,
        "rtemu bench aqm (seed {}): an unresponsive upload of {:.0} Mbit/s ({UPLOAD_BYTES}-byte \
         frames, Poisson) and a game flow of 50 pps × {GAME_BYTES} bytes through rate {:.0}mbit, \
         {SECONDS} s simulated, measured from {} s",
        args.seed,
        UPLOAD_PPS * f64::from(UPLOAD_BYTES) * 8.0 / 1e6,
        RATE / 1e6,
        MEASURED_FROM_NS / 1_000_000_000
    )?;
    writeln!(
        out,
        "| queue | game delay p50 (ms) | p99 (ms) | max (ms) | game lost | upload (Mbit/s) | upload dropped |"
    )?;
    writeln!(out, "| --- | ---: | ---: | ---: | ---: | ---: | ---: |")?;
    for r in &rows {
        writeln!(
            out,
            "| {} | {:.1} | {:.1} | {:.1} | {:.1} % | {:.2} | {:.1} % |",
            r.queue,
            r.game_p50_ms,
            r.game_p99_ms,
            r.game_max_ms,
            r.game_lost_percent,
            r.upload_mbit_s,
            r.upload_dropped_percent
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table's two ends, and that a seed decides every figure: behind 500 ms of drop-tail
    /// the game waits about 500 ms, behind FQ-CoDel about one upload frame's serialization.
    #[test]
    fn drop_tail_bloats_fq_codel_cures_and_the_seed_decides() {
        let bloated = row(
            "",
            String::new(),
            &run_one("rate 10mbit limit 500ms", 5).unwrap(),
        );
        assert!(
            (450.0..=500.5).contains(&bloated.game_p50_ms),
            "{bloated:?}"
        );
        let cured = row(
            "",
            String::new(),
            &run_one("rate 10mbit fq_codel", 5).unwrap(),
        );
        assert!(cured.game_p99_ms < 2.5, "{cured:?}");
        assert_eq!(cured.game_lost_percent, 0.0);
        // Both keep the link busy; the overload is dropped.
        for r in [&bloated, &cured] {
            assert!(
                r.upload_mbit_s > 9.5 && r.upload_dropped_percent > 10.0,
                "{r:?}"
            );
        }
        let again = row(
            "",
            String::new(),
            &run_one("rate 10mbit fq_codel", 5).unwrap(),
        );
        assert_eq!(format!("{cured:?}"), format!("{again:?}"));
    }
}
