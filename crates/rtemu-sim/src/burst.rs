//! Burst absorption (RFC 7928 §6), in virtual time: a queue should let a short burst through
//! rather than drop it. Once a second a burst of [`BURST_FRAMES`] frames arrives at 1 Gbit/s
//! (a video key frame, or a TCP sender's window released at once) onto [`LINK`](crate::bufferbloat::LINK), which
//! already carries half its rate of unresponsive background traffic; each queue of
//! [`QUEUES`] is measured on the burst's losses and on how long the burst takes to get
//! through, and on what it did to the background. `rtemu-bench aqm` tabulates it beside the
//! bufferbloat scenario.
//!
//! RFC 7928 §6 asks for bursts of several sizes and kinds; this is one: a burst well under
//! every queue's buffer (100 frames, 150 kB: 120 ms of the link), so whatever it loses, the
//! queue's controller dropped, not its buffer. The burst comes every second, long enough for
//! each controller to calm down in between, so every burst meets the same queue.

use rtemu_model::Stream;
use serde::Serialize;

use crate::bufferbloat::{drive, flow, percentile, Link, Queue, ScenarioError, LINK, RATE};

pub use crate::bufferbloat::QUEUES;

/// Frames per burst.
pub const BURST_FRAMES: u64 = 100;
/// A burst's frames and the background's.
pub const FRAME_BYTES: u32 = 1500;
/// The gap between a burst's frames, ns: 1500 bytes at 1 Gbit/s.
pub const BURST_GAP_NS: u64 = 12_000;
/// A burst begins every this many ns.
pub const BURST_EVERY_NS: u64 = 1_000_000_000;
/// The first burst's start, ns: the background has filled what it fills by then.
pub const FIRST_BURST_NS: u64 = 5_000_000_000;
/// The background's share of the link's rate (Poisson arrivals, unresponsive).
pub const BACKGROUND_SHARE: f64 = 0.5;
/// Simulated time, s.
pub const SECONDS: u64 = 60;

/// One queue's figures over every burst.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// The queue's name.
    pub queue: &'static str,
    /// The link's netem text.
    pub model: String,
    /// Bursts sent.
    pub bursts: u64,
    /// Burst frames the queue dropped, %.
    pub burst_lost_percent: f64,
    /// Bursts that lost at least one frame, %.
    pub bursts_hit_percent: f64,
    /// From a burst's first frame arriving to its last delivered frame leaving, ms: the
    /// median over the bursts (nearest rank).
    pub burst_time_p50_ms: f64,
    /// Its maximum, ms.
    pub burst_time_max_ms: f64,
    /// Background frames dropped over the bursts' seconds, %.
    pub background_dropped_percent: f64,
}

/// Runs the background and the bursts through [`LINK`](crate::bufferbloat::LINK) behind `queue`, with `seed`.
pub fn run(queue: Queue, seed: u64) -> Result<Summary, ScenarioError> {
    let Link {
        model: mut m, text, ..
    } = Link::queued(LINK, queue, seed)?;
    let end = SECONDS * 1_000_000_000;
    let background_pps = RATE * BACKGROUND_SHARE / f64::from(FRAME_BYTES * 8);
    let mut gaps = Stream::new(seed, 0x4247_4e44); // "BGND"
    let mut background_at = 0u64;
    // The next burst frame: (burst, frame within it).
    let mut next = (0u64, 0u64);
    let burst_frame_at =
        |(b, f): (u64, u64)| FIRST_BURST_NS + b * BURST_EVERY_NS + f * BURST_GAP_NS;
    // Per packet: Some(burst) for a burst frame, None for the background.
    let mut kinds: Vec<(u64, Option<u64>)> = Vec::new();
    let arrivals = std::iter::from_fn(|| {
        let burst_at = burst_frame_at(next);
        if background_at >= end && burst_at >= end {
            return None;
        }
        if burst_at <= background_at {
            let burst = next.0;
            next = match next.1 + 1 {
                BURST_FRAMES => (next.0 + 1, 0),
                f => (next.0, f),
            };
            Some((burst_at, Some(burst)))
        } else {
            let at = background_at;
            background_at += (-gaps.open01().ln() / background_pps * 1e9) as u64;
            Some((at, None))
        }
    });
    let left = drive(
        &mut m,
        arrivals.map(|(at, burst)| {
            kinds.push((at, burst));
            let port = if burst.is_some() { 8000 } else { 5201 };
            (at, FRAME_BYTES, flow(port, burst.is_some()))
        }),
    );
    Ok(summarize(queue, text, &kinds, &left))
}

/// The figures of one run: `kinds` (arrival, burst or background) and `left` (when each
/// packet left, `None`: dropped), both in arrival order.
fn summarize(
    queue: Queue,
    model: String,
    kinds: &[(u64, Option<u64>)],
    left: &[Option<u64>],
) -> Summary {
    let bursts = kinds.iter().filter_map(|k| k.1).max().map_or(0, |b| b + 1);
    // Per burst: its first arrival, its last departure, its frames lost.
    let mut per: Vec<(u64, u64, u64)> = vec![(u64::MAX, 0, 0); bursts as usize];
    let (mut background, mut background_lost) = (0u64, 0u64);
    for (&(at, burst), &gone) in kinds.iter().zip(left) {
        match burst {
            Some(b) => {
                let p = &mut per[b as usize];
                p.0 = p.0.min(at);
                match gone {
                    Some(t) => p.1 = p.1.max(t),
                    None => p.2 += 1,
                }
            }
            // The background is counted while the bursts come.
            None if at >= FIRST_BURST_NS => {
                background += 1;
                background_lost += u64::from(gone.is_none());
            }
            None => {}
        }
    }
    // A whole burst can be complete only when some frame of it got through.
    let mut times: Vec<u64> = per.iter().filter(|p| p.1 > 0).map(|p| p.1 - p.0).collect();
    times.sort_unstable();
    let lost: u64 = per.iter().map(|p| p.2).sum();
    let percent = |n: u64, of: u64| 100.0 * n as f64 / of.max(1) as f64;
    let ms = |ns: u64| ns as f64 / 1e6;
    Summary {
        queue: queue.name,
        model,
        bursts,
        burst_lost_percent: percent(lost, bursts * BURST_FRAMES),
        bursts_hit_percent: percent(per.iter().filter(|p| p.2 > 0).count() as u64, bursts),
        burst_time_p50_ms: ms(percentile(&times, 0.5)),
        burst_time_max_ms: ms(percentile(&times, 1.0)),
        background_dropped_percent: percent(background_lost, background),
    }
}

/// Every queue of [`QUEUES`], in order, with `seed`.
pub fn run_all(seed: u64) -> Result<Vec<Summary>, ScenarioError> {
    QUEUES.iter().map(|&q| run(q, seed)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(name: &str) -> Queue {
        *QUEUES.iter().find(|q| q.name == name).unwrap()
    }

    /// Every burst is counted, and a buffer far larger than the burst loses nothing of it:
    /// drop-tail of 1000 packets holds a 100-frame burst on top of a background that leaves
    /// half the link free. The burst then takes at least its own 120 ms on the link (100 ×
    /// 1500 bytes at 10 Mbit/s) and, sharing the link with the background, at most about twice
    /// that plus what the background had queued.
    #[test]
    fn a_large_drop_tail_buffer_absorbs_every_burst() {
        let r = run(queue("drop-tail, 1000 packets"), 7).unwrap();
        assert_eq!(
            r.bursts,
            (SECONDS * 1_000_000_000 - FIRST_BURST_NS) / BURST_EVERY_NS
        );
        assert_eq!(r.burst_lost_percent, 0.0, "{r:?}");
        assert_eq!(r.bursts_hit_percent, 0.0);
        assert!(
            r.burst_time_p50_ms >= 120.0 && r.burst_time_max_ms < 400.0,
            "{r:?}"
        );
        // The background alone never fills it either.
        assert_eq!(r.background_dropped_percent, 0.0, "{r:?}");
    }

    /// What the RFCs' controllers promise for a burst shorter than their allowance. PIE
    /// (RFC 8033 §4.3) drops nothing while its burst allowance (150 ms, refilled once the queue
    /// has been short and the drop probability zero) lasts: the 120 ms burst passes whole.
    /// CoDel (RFC 8289) drops only once the sojourn time has stayed above its 5 ms target for
    /// a whole 100 ms interval, and then at most once more per interval / √count: the burst's
    /// queue stays above the target for about 115 ms, so it loses a frame or two at its tail,
    /// never more.
    #[test]
    fn pie_absorbs_the_burst_and_codel_drops_only_at_its_tail() {
        for seed in [1, 2] {
            let pie = run(queue("PIE"), seed).unwrap();
            assert_eq!(pie.burst_lost_percent, 0.0, "{pie:?}");
            let codel = run(queue("CoDel"), seed).unwrap();
            let per_burst = codel.burst_lost_percent / 100.0 * BURST_FRAMES as f64;
            assert!(per_burst > 0.0 && per_burst <= 2.0, "{codel:?}");
            // Whatever it drops, the burst is through in about its own time on the link.
            assert!(codel.burst_time_max_ms < 130.0, "{codel:?}");
        }
    }

    /// The seed decides every figure; another seed gives other background arrivals.
    #[test]
    fn the_seed_decides() {
        let q = queue("PIE");
        assert_eq!(run(q, 3).unwrap(), run(q, 3).unwrap());
        assert_ne!(run(q, 3).unwrap(), run(q, 4).unwrap());
    }

    /// The figures of a hand-made run: two bursts of which the second lost a frame, and
    /// background before and during the bursts.
    #[test]
    fn the_summary_counts_each_burst_by_its_first_arrival_and_last_departure() {
        let b = FIRST_BURST_NS;
        let kinds = [
            (1, None),
            (b, Some(0)),
            (b + 5, None),
            (b + 10, Some(0)),
            (b + 100, Some(1)),
            (b + 110, Some(1)),
            (b + 120, None),
        ];
        let left = [
            Some(2),
            Some(b + 1000),
            None,
            Some(b + 3000),
            Some(b + 2100),
            None,
            Some(b + 5000),
        ];
        let q = queue("CoDel");
        let s = summarize(q, "m".into(), &kinds, &left);
        assert_eq!(s.bursts, 2);
        assert_eq!(
            s.burst_lost_percent,
            100.0 * 1.0 / (2 * BURST_FRAMES) as f64
        );
        assert_eq!(s.bursts_hit_percent, 50.0);
        // Burst 0: 3000 ns; burst 1: 2000 ns. The median of two is the lower (nearest rank).
        assert_eq!(s.burst_time_p50_ms, 2000.0 / 1e6);
        assert_eq!(s.burst_time_max_ms, 3000.0 / 1e6);
        // Of the background since the first burst (2 frames), one was dropped.
        assert_eq!(s.background_dropped_percent, 50.0);
    }
}
