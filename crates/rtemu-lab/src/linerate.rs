//! `rtemu lab linerate`: can a wait method keep a slow link's line rate? The timing paper's
//! Figure 1.
//!
//! A link of `rate` bit/s sends a `packet_bytes` packet every `interval = 8·bytes / rate`. The
//! emulator waits that long per packet. A naive pacer waits the interval *from now*
//! ([`Pacer::Relative`]): every oversleep is lost for good and the achieved rate falls short. An
//! absolute pacer waits until `start + k·interval` ([`Pacer::Absolute`]), as rtemu's engine does:
//! a late wake-up is made up by the next packet, so the rate holds whatever the method's error.
//! Packets are not actually sent: the measurement isolates the pacing.

use std::fmt;
use std::str::FromStr;

use rtemu_clock::time::{format_duration_ns, thread_cpu_time_ns};
use rtemu_clock::wait::WaitError;
use rtemu_clock::{Instant, WaitStrategy, Waiter};
use rtemu_model::units::Rate;
use serde::Serialize;

use crate::stats::Distribution;

/// How the next packet's deadline is set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Pacer {
    /// `start + k·interval`: errors do not accumulate.
    Absolute,
    /// `now + interval`: the naive sleep per packet.
    Relative,
}

impl fmt::Display for Pacer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Pacer::Absolute => "absolute",
            Pacer::Relative => "relative",
        })
    }
}

/// A pacer name that could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown pacer `{0}`: use absolute (or abs) or relative (or rel)")]
pub struct ParsePacerError(String);

impl FromStr for Pacer {
    type Err = ParsePacerError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim() {
            "absolute" | "abs" => Ok(Pacer::Absolute),
            "relative" | "rel" => Ok(Pacer::Relative),
            other => Err(ParsePacerError(other.to_owned())),
        }
    }
}

/// The gap between packets of `packet_bytes` at `rate_bps`, in ns, at least 1.
pub fn packet_interval_ns(packet_bytes: u32, rate_bps: u64) -> u64 {
    let bits = u128::from(packet_bytes) * 8 * 1_000_000_000;
    (bits / u128::from(rate_bps.max(1))).max(1) as u64
}

/// The rate achieved by `packets` packets of `packet_bytes` sent over `elapsed_ns`, bit/s.
pub fn achieved_rate_bps(packets: u64, packet_bytes: u32, elapsed_ns: u64) -> f64 {
    if elapsed_ns == 0 {
        return f64::INFINITY;
    }
    (packets * u64::from(packet_bytes) * 8) as f64 * 1e9 / elapsed_ns as f64
}

/// One rate, method and pacer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PointConfig {
    /// The wait method.
    pub method: WaitStrategy,
    /// The pacer.
    pub pacer: Pacer,
    /// The requested line rate, bit/s.
    pub rate_bps: u64,
    /// Packet size, bytes.
    pub packet_bytes: u32,
    /// Packets to pace.
    pub packets: usize,
}

impl PointConfig {
    /// The least time pacing this point takes, ns: its packets, one per interval.
    pub fn min_time_ns(&self) -> u64 {
        (self.packets as u64).saturating_mul(packet_interval_ns(self.packet_bytes, self.rate_bps))
    }
}

/// The longest sweep a caller should start without asking, ns (10 minutes): a slow rate with
/// the fewest packets still takes `packets × 8·bytes / rate` (5 packets of 100 B at 1 bit/s
/// take over an hour), so a sweep's length is known, and stated, before it starts.
pub const MAX_SWEEP_NS: u64 = 600_000_000_000;

/// The least time pacing every point of `points` takes, ns.
pub fn sweep_time_ns(points: &[PointConfig]) -> u64 {
    points
        .iter()
        .fold(0u64, |sum, p| sum.saturating_add(p.min_time_ns()))
}

/// A sweep that would take longer than [`MAX_SWEEP_NS`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "this sweep would take at least {} ({points} points; the slowest, {} bit/s, paces {} \
     packets of {} bytes in {} alone), more than the {} a sweep may take: raise the \
     slowest of --rates, or lower --min-packets, --time or --packet-size",
    format_duration_ns(*expected_ns),
    slowest.rate_bps,
    slowest.packets,
    slowest.packet_bytes,
    format_duration_ns(slowest.min_time_ns()),
    format_duration_ns(MAX_SWEEP_NS)
)]
pub struct SweepTooLong {
    /// The least time the sweep takes, ns.
    pub expected_ns: u64,
    /// Its points.
    pub points: usize,
    /// The point that takes longest.
    pub slowest: PointConfig,
}

/// The points of a sweep, every rate × method × pacer in that order, each pacing the
/// packets of `packet_bytes` that fill about `time_ns` (within `packets`, fewest to most);
/// an error when they would take longer than [`MAX_SWEEP_NS`].
pub fn sweep_points(
    rates_bps: &[u64],
    methods: &[WaitStrategy],
    pacers: &[Pacer],
    packet_bytes: u32,
    time_ns: u64,
    packets: (usize, usize),
) -> Result<Vec<PointConfig>, SweepTooLong> {
    let mut points = Vec::new();
    for &rate_bps in rates_bps {
        for &method in methods {
            for &pacer in pacers {
                points.push(PointConfig {
                    method,
                    pacer,
                    rate_bps,
                    packet_bytes,
                    packets: packets_for(time_ns, packet_bytes, rate_bps, packets.0, packets.1),
                });
            }
        }
    }
    let expected_ns = sweep_time_ns(&points);
    match points.iter().max_by_key(|p| p.min_time_ns()) {
        Some(slowest) if expected_ns > MAX_SWEEP_NS => Err(SweepTooLong {
            expected_ns,
            points: points.len(),
            slowest: slowest.clone(),
        }),
        _ => Ok(points),
    }
}

/// The outcome of one point.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PointResult {
    /// The wait method's name.
    pub method: String,
    /// The pacer.
    pub pacer: Pacer,
    /// Requested rate, bit/s.
    pub requested_bps: u64,
    /// Achieved rate, bit/s.
    pub achieved_bps: f64,
    /// Achieved over requested.
    pub ratio: f64,
    /// Packets paced.
    pub packets: usize,
    /// Packet interval, ns.
    pub interval_ns: u64,
    /// How late each packet left against the ideal schedule `start + k·interval`, ns. Grows
    /// without bound for a relative pacer that oversleeps.
    pub lateness_ns: Distribution,
    /// CPU time burned, ns.
    pub cpu_ns: u64,
}

/// Paces `config.packets` packets and reports the achieved rate.
pub fn measure(config: &PointConfig) -> Result<PointResult, WaitError> {
    let interval = packet_interval_ns(config.packet_bytes, config.rate_bps);
    let mut waiter = Waiter::new(config.method)?;
    let mut sent = vec![Instant::default(); config.packets];
    let cpu_start = thread_cpu_time_ns();
    let start = Instant::now();
    for (k, slot) in (1u64..).zip(sent.iter_mut()) {
        let deadline = match config.pacer {
            Pacer::Absolute => start + k * interval,
            Pacer::Relative => Instant::now() + interval,
        };
        waiter.wait_until(deadline)?;
        *slot = Instant::now();
    }
    let cpu_ns = thread_cpu_time_ns().saturating_sub(cpu_start);
    let elapsed = sent.last().map_or(0, |last| last.nanos_since(start));
    let lateness: Vec<i64> = (1u64..)
        .zip(&sent)
        .map(|(k, t)| t.signed_nanos_since(start + k * interval))
        .collect();
    let achieved = achieved_rate_bps(config.packets as u64, config.packet_bytes, elapsed);
    Ok(PointResult {
        method: config.method.to_string(),
        pacer: config.pacer,
        requested_bps: config.rate_bps,
        achieved_bps: achieved,
        ratio: achieved / config.rate_bps as f64,
        packets: config.packets,
        interval_ns: interval,
        lateness_ns: Distribution::compute(&lateness),
        cpu_ns,
    })
}

/// Measures each of `points` in turn; `before_each` is told each before it runs (for a
/// progress display).
pub fn run(
    points: &[PointConfig],
    before_each: &mut dyn FnMut(&PointConfig),
) -> Result<Vec<PointResult>, WaitError> {
    points
        .iter()
        .map(|point| {
            before_each(point);
            measure(point)
        })
        .collect()
}

/// A line rate that could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a line rate: give bit/s from 1 to 100G as a number with an optional k, M or G, or in tc's units, e.g. 64k, 1.5M or 10mbit")]
pub struct ParseRateError(String);

/// The largest rate accepted, bit/s: beyond it a 1-byte packet's interval rounds to 0 ns.
pub const MAX_RATE_BPS: u64 = 100_000_000_000;

/// Parses a line rate in bit/s with rtemu's one rate parser ([`Rate::parse`]): `1000`, `64k`,
/// `1.5M`, `1G`, `10mbit` (decimal prefixes, as tc uses), from 1 bit/s to [`MAX_RATE_BPS`].
pub fn parse_rate_bps(text: &str) -> Result<u64, ParseRateError> {
    Rate::parse(text)
        .ok()
        .map(|r| r.0)
        .filter(|r| (1..=MAX_RATE_BPS).contains(r))
        .ok_or_else(|| ParseRateError(text.trim().to_owned()))
}

/// The packets to pace at `rate_bps` to fill about `time_ns`, within `min ..= max`.
pub fn packets_for(
    time_ns: u64,
    packet_bytes: u32,
    rate_bps: u64,
    min: usize,
    max: usize,
) -> usize {
    let fit = time_ns / packet_interval_ns(packet_bytes, rate_bps);
    (fit as usize).clamp(min, max.max(min))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_and_rates_are_inverse() {
        assert_eq!(packet_interval_ns(100, 1_000), 800_000_000); // the paper's 1 kbit/s
        assert_eq!(packet_interval_ns(100, 100_000_000), 8_000);
        assert_eq!(packet_interval_ns(100, u64::MAX), 1);
        assert!((achieved_rate_bps(10, 100, 80_000) - 100e6).abs() < 1e-3);
        assert_eq!(packets_for(100_000_000, 100, 1_000_000, 5, 10_000), 125);
        assert_eq!(packets_for(100_000_000, 100, 1_000, 5, 10_000), 5);
        assert_eq!(
            packets_for(10_000_000_000, 100, 100_000_000, 5, 10_000),
            10_000
        );
    }

    #[test]
    fn a_sweep_too_long_is_refused_naming_its_slowest_point() {
        let methods = [WaitStrategy::Sleep, WaitStrategy::Spin];
        let pacers = [Pacer::Absolute];
        let points = sweep_points(
            &[1_000_000, 1_000],
            &methods,
            &pacers,
            100,
            50_000_000,
            (5, 1000),
        )
        .unwrap();
        let rates: Vec<u64> = points.iter().map(|p| p.rate_bps).collect();
        assert_eq!(rates, [1_000_000, 1_000_000, 1_000, 1_000]);
        assert_eq!(points[0].packets, 62);
        // 5 packets of 100 bytes at 1 bit/s: 4000 s.
        let e =
            sweep_points(&[1, 1_000], &methods, &pacers, 100, 50_000_000, (5, 1000)).unwrap_err();
        assert_eq!((e.points, e.slowest.rate_bps), (4, 1));
        let text = e.to_string();
        assert!(
            text.starts_with("this sweep would take at least ")
                && text.contains("the slowest, 1 bit/s, paces 5 packets of 100 bytes"),
            "{text}"
        );
    }

    #[test]
    fn a_sweeps_length_is_known_before_it_runs() {
        let point = |rate_bps, packets| PointConfig {
            method: WaitStrategy::Sleep,
            pacer: Pacer::Absolute,
            rate_bps,
            packet_bytes: 100,
            packets,
        };
        // 5 packets of 100 B at 1 kbit/s: 0.8 s each.
        assert_eq!(point(1_000, 5).min_time_ns(), 4_000_000_000);
        let slow = [point(1_000, 5), point(1, 5)];
        // At 1 bit/s the five packets alone take 4000 s: far beyond the bound.
        assert_eq!(sweep_time_ns(&slow), 4_000_000_000 + 4_000_000_000_000);
        assert!(sweep_time_ns(&slow) > MAX_SWEEP_NS);
        assert!(sweep_time_ns(&[point(100_000_000, 100_000)]) < MAX_SWEEP_NS);
    }

    #[test]
    fn rates_parse_with_decimal_prefixes() {
        assert_eq!(parse_rate_bps("1000"), Ok(1_000));
        assert_eq!(parse_rate_bps("64k"), Ok(64_000));
        assert_eq!(parse_rate_bps("10M"), Ok(10_000_000));
        assert_eq!(parse_rate_bps("1G"), Ok(1_000_000_000));
        assert_eq!(parse_rate_bps("1.5M"), Ok(1_500_000));
        assert_eq!(parse_rate_bps("10m"), Ok(10_000_000));
        assert_eq!(parse_rate_bps("10mbit"), Ok(10_000_000));
        for bad in ["", "k", "0", "10x", "-1k", "101G", "99999999999999999999G"] {
            assert_eq!(
                parse_rate_bps(bad),
                Err(ParseRateError(bad.into())),
                "{bad}"
            );
        }
    }

    proptest::proptest! {
        /// Every rate the one formatter prints, the lab reads back to the same bit/s.
        #[test]
        fn printed_rates_read_back(bits in 1..=MAX_RATE_BPS) {
            let text = Rate(bits).to_string();
            proptest::prop_assert_eq!(parse_rate_bps(&text), Ok(bits), "{}", text);
        }
    }

    #[test]
    fn pacers_parse() {
        assert_eq!("abs".parse(), Ok(Pacer::Absolute));
        assert_eq!("relative".parse(), Ok(Pacer::Relative));
        assert_eq!(
            "naive".parse::<Pacer>(),
            Err(ParsePacerError("naive".into()))
        );
    }

    /// The absolute pacer's k-th packet never leaves before `start + k·interval` (the waits
    /// never return early), so the achieved rate can never exceed the requested one; and
    /// because lateness does not accumulate, the rate holds: 200 packets at 1 ms need 200 ms,
    /// and only a stall of more than 200 ms (a whole run's worth) would bring the ratio below
    /// 0.5 — a sanity bound that a loaded 2-core VM keeps.
    #[test]
    fn absolute_pacer_holds_the_requested_rate() {
        for method in [WaitStrategy::Sleep, WaitStrategy::Nanosleep] {
            let result = measure(&PointConfig {
                method,
                pacer: Pacer::Absolute,
                rate_bps: 800_000, // 100 B every 1 ms
                packet_bytes: 100,
                packets: 200,
            })
            .unwrap();
            assert!(result.lateness_ns.min_ns >= 0, "{method} sent early");
            assert!(result.ratio <= 1.0, "{method} ratio {}", result.ratio);
            assert!(result.ratio > 0.5, "{method} ratio {}", result.ratio);
        }
    }

    /// A relative pacer's lateness only grows: the last packet is at least as late as any
    /// sleep's own error, and never early.
    #[test]
    fn relative_pacer_never_runs_ahead() {
        let result = measure(&PointConfig {
            method: WaitStrategy::Nanosleep,
            pacer: Pacer::Relative,
            rate_bps: 8_000_000, // 100 µs
            packet_bytes: 100,
            packets: 100,
        })
        .unwrap();
        assert!(result.lateness_ns.min_ns >= 0);
        assert!(result.ratio <= 1.0);
    }

    #[test]
    fn a_run_measures_each_point_in_order_and_says_which_comes_next() {
        let point = |rate_bps| PointConfig {
            method: WaitStrategy::Spin,
            pacer: Pacer::Absolute,
            rate_bps,
            packet_bytes: 100,
            packets: 10,
        };
        let points = [point(8_000_000), point(80_000_000)];
        let mut told = Vec::new();
        let results = run(&points, &mut |p| told.push(p.rate_bps)).unwrap();
        assert_eq!(told, [8_000_000, 80_000_000]);
        let requested: Vec<_> = results.iter().map(|r| r.requested_bps).collect();
        assert_eq!(requested, told);
    }
}
