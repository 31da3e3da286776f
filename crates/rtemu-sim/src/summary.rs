//! What a simulation run reports: counts by fate and reason, delay percentiles, throughput.

use std::collections::BTreeMap;
use std::fmt;

use hdrhistogram::Histogram;
use rtemu_model::link::LinkCounters;
use rtemu_model::trace::FeedCounters;
use rtemu_model::DropReason;
use serde::Serialize;

/// Delay percentiles reported, as in the timing lab: the headline is the maximum.
pub const PERCENTILES: [f64; 4] = [50.0, 90.0, 99.0, 99.9];

/// Per-packet delay statistics, in integer nanoseconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DelayStats {
    /// Copies measured.
    pub count: u64,
    /// Smallest delay.
    pub min_ns: u64,
    /// Mean delay.
    pub mean_ns: u64,
    /// Delay at each of [`PERCENTILES`] (keys `p50`, `p90`, `p99`, `p99.9`), to three
    /// significant digits.
    pub percentiles_ns: BTreeMap<String, u64>,
    /// Largest delay, exact.
    pub max_ns: u64,
}

/// The summary of one run. Every copy a model decides is either delivered or dropped for one
/// reason: `packets_in + duplicates = delivered + Σ dropped`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Frames read from the input.
    pub packets_in: u64,
    /// Bytes read from the input (original frame lengths).
    pub bytes_in: u64,
    /// Copies delivered (originals and duplicates).
    pub delivered: u64,
    /// Bytes delivered.
    pub bytes_delivered: u64,
    /// Packets that were duplicated (one extra copy decided).
    pub duplicated: u64,
    /// Copies dropped, by reason.
    pub dropped: BTreeMap<&'static str, u64>,
    /// Delivered copies with at least one flipped bit.
    pub corrupted: u64,
    /// Delivered copies marked "congestion experienced" (ECN) instead of dropped.
    pub marked: u64,
    /// Delivered copies the reorder stage sent ahead.
    pub reordered: u64,
    /// Input frames whose timestamp went backwards; they were taken to arrive at the previous
    /// frame's time, since a model needs arrivals in order.
    pub input_time_regressions: u64,
    /// Delay from arrival to delivery of every delivered copy.
    pub delay: DelayStats,
    /// Offered load: input bits over the input's time span, in bit/s (0 for a single instant).
    pub offered_bps: f64,
    /// Achieved throughput: delivered bits over the span from the first arrival to the last
    /// delivery, in bit/s.
    pub throughput_bps: f64,
    /// Most copies in flight at once (decided, not yet delivered): the memory the run needed.
    pub max_in_flight: u64,
    /// Whether the run stopped before the end of its input because the model's trace ended
    /// (the `stop` policy) or failed.
    pub stopped_early: bool,
    /// Delays the distribution drew below zero, clamped to zero.
    pub delays_clamped_at_zero: u64,
    /// Largest rate-queue backlog, packets.
    pub max_queue_packets: u64,
    /// Largest rate-queue backlog, bytes.
    pub max_queue_bytes: u64,
    /// What the streamed traces driving the link did (under-runs, loops, records after the
    /// end); `None` when no streamed trace drives it.
    pub trace: Option<FeedCounters>,
}

/// Accumulates a [`Summary`] while a run goes.
#[derive(Debug)]
pub struct Tally {
    pub(crate) packets_in: u64,
    pub(crate) bytes_in: u64,
    pub(crate) delivered: u64,
    pub(crate) bytes_delivered: u64,
    pub(crate) duplicated: u64,
    pub(crate) dropped: [u64; DropReason::ALL.len()],
    pub(crate) corrupted: u64,
    pub(crate) marked: u64,
    pub(crate) reordered: u64,
    pub(crate) regressions: u64,
    pub(crate) stopped_early: bool,
    pub(crate) delays: Histogram<u64>,
    pub(crate) delay_sum: u128,
    pub(crate) first_arrival: Option<u64>,
    pub(crate) last_arrival: u64,
    pub(crate) last_delivery: u64,
    pub(crate) max_in_flight: u64,
}

impl Default for Tally {
    fn default() -> Self {
        Tally {
            packets_in: 0,
            bytes_in: 0,
            delivered: 0,
            bytes_delivered: 0,
            duplicated: 0,
            dropped: [0; DropReason::ALL.len()],
            corrupted: 0,
            marked: 0,
            reordered: 0,
            regressions: 0,
            stopped_early: false,
            // Three significant digits from 1 ns; values beyond the top saturate.
            delays: Histogram::new_with_bounds(1, 1 << 50, 3)
                .expect("static histogram bounds are valid"),
            delay_sum: 0,
            first_arrival: None,
            last_arrival: 0,
            last_delivery: 0,
            max_in_flight: 0,
        }
    }
}

impl Tally {
    pub(crate) fn drop(&mut self, reason: DropReason) {
        let i = DropReason::ALL
            .iter()
            .position(|r| *r == reason)
            .unwrap_or(0);
        self.dropped[i] += 1;
    }

    pub(crate) fn finish(&self, counters: LinkCounters, trace: Option<FeedCounters>) -> Summary {
        let h = &self.delays;
        let count = h.len();
        let delay = DelayStats {
            count,
            min_ns: if count == 0 { 0 } else { h.min() },
            mean_ns: if count == 0 {
                0
            } else {
                (self.delay_sum / count as u128) as u64
            },
            percentiles_ns: PERCENTILES
                .iter()
                .map(|&p| {
                    (
                        format!("p{p}"),
                        if count == 0 {
                            0
                        } else {
                            h.value_at_percentile(p)
                        },
                    )
                })
                .collect(),
            max_ns: if count == 0 { 0 } else { h.max() },
        };
        let first = self.first_arrival.unwrap_or(0);
        let per_second = |bits: f64, span: u64| {
            if span == 0 {
                0.0
            } else {
                bits * 1e9 / span as f64
            }
        };
        Summary {
            packets_in: self.packets_in,
            bytes_in: self.bytes_in,
            delivered: self.delivered,
            bytes_delivered: self.bytes_delivered,
            duplicated: self.duplicated,
            dropped: DropReason::ALL
                .iter()
                .zip(self.dropped)
                .map(|(r, n)| (r.as_str(), n))
                .collect(),
            corrupted: self.corrupted,
            marked: self.marked,
            reordered: self.reordered,
            input_time_regressions: self.regressions,
            delay,
            offered_bps: per_second(self.bytes_in as f64 * 8.0, self.last_arrival - first),
            throughput_bps: per_second(
                self.bytes_delivered as f64 * 8.0,
                self.last_delivery.saturating_sub(first),
            ),
            max_in_flight: self.max_in_flight,
            stopped_early: self.stopped_early,
            delays_clamped_at_zero: counters.clamped_delays,
            max_queue_packets: counters.max_backlog_packets,
            max_queue_bytes: counters.max_backlog_bytes,
            trace,
        }
    }
}

impl Summary {
    /// Copies dropped for every reason together.
    pub fn dropped_total(&self) -> u64 {
        self.dropped.values().sum()
    }
}

/// A duration in the unit that reads best.
fn time(ns: u64) -> String {
    match ns {
        0..=9_999 => format!("{ns} ns"),
        10_000..=9_999_999 => format!("{:.1} µs", ns as f64 / 1e3),
        10_000_000..=9_999_999_999 => format!("{:.3} ms", ns as f64 / 1e6),
        _ => format!("{:.3} s", ns as f64 / 1e9),
    }
}

fn rate(bps: f64) -> String {
    match bps {
        b if b >= 1e9 => format!("{:.3} Gbit/s", b / 1e9),
        b if b >= 1e6 => format!("{:.3} Mbit/s", b / 1e6),
        b if b >= 1e3 => format!("{:.3} kbit/s", b / 1e3),
        b => format!("{b:.0} bit/s"),
    }
}

fn pct(n: u64, of: u64) -> String {
    if of == 0 {
        "-".into()
    } else {
        format!("{:.3}%", n as f64 * 100.0 / of as f64)
    }
}

impl fmt::Display for Summary {
    /// The report for people: one quantity a line, aligned.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let copies = self.packets_in + self.duplicated;
        writeln!(f, "{:<22}{:>14}", "packets in", self.packets_in)?;
        writeln!(
            f,
            "{:<22}{:>14}   {}",
            "delivered",
            self.delivered,
            pct(self.delivered, copies)
        )?;
        writeln!(
            f,
            "{:<22}{:>14}   {}",
            "dropped",
            self.dropped_total(),
            pct(self.dropped_total(), copies)
        )?;
        for (reason, n) in self.dropped.iter().filter(|(_, n)| **n > 0) {
            writeln!(f, "  {:<20}{:>14}   {}", reason, n, pct(*n, copies))?;
        }
        writeln!(
            f,
            "{:<22}{:>14}   {}",
            "duplicated",
            self.duplicated,
            pct(self.duplicated, self.packets_in)
        )?;
        writeln!(
            f,
            "{:<22}{:>14}   {}",
            "corrupted",
            self.corrupted,
            pct(self.corrupted, self.delivered)
        )?;
        writeln!(
            f,
            "{:<22}{:>14}   {}",
            "marked (ECN CE)",
            self.marked,
            pct(self.marked, self.delivered)
        )?;
        writeln!(
            f,
            "{:<22}{:>14}   {}",
            "reordered",
            self.reordered,
            pct(self.reordered, self.delivered)
        )?;
        let d = &self.delay;
        if d.count == 0 {
            // No copy delivered: no delay to report, rather than a perfect 0.
            writeln!(
                f,
                "delay (arrival → delivery)   no copy delivered, no samples"
            )?;
        } else {
            writeln!(f, "delay (arrival → delivery, {} copies)", d.count)?;
            writeln!(f, "  {:<20}{:>14}", "min", time(d.min_ns))?;
            writeln!(f, "  {:<20}{:>14}", "mean", time(d.mean_ns))?;
            for p in PERCENTILES {
                let key = format!("p{p}");
                writeln!(
                    f,
                    "  {:<20}{:>14}",
                    key,
                    time(d.percentiles_ns.get(&key).copied().unwrap_or(0))
                )?;
            }
            writeln!(f, "  {:<20}{:>14}", "max", time(d.max_ns))?;
        }
        writeln!(f, "{:<22}{:>14}", "offered load", rate(self.offered_bps))?;
        writeln!(f, "{:<22}{:>14}", "throughput", rate(self.throughput_bps))?;
        writeln!(f, "{:<22}{:>14}", "max in flight", self.max_in_flight)?;
        if self.max_queue_packets > 0 {
            writeln!(
                f,
                "{:<22}{:>14}   ({} bytes)",
                "max rate queue", self.max_queue_packets, self.max_queue_bytes
            )?;
        }
        if self.delays_clamped_at_zero > 0 {
            writeln!(
                f,
                "{:<22}{:>14}",
                "delays clamped at 0", self.delays_clamped_at_zero
            )?;
        }
        if let Some(t) = &self.trace {
            writeln!(
                f,
                "trace: underruns {}, loops {}, after_end {}   ({} records)",
                t.underruns, t.loops, t.after_end, t.records
            )?;
            if t.cut_cascades > 0 {
                writeln!(
                    f,
                    "trace: {} packets' cascades of dup records cut at {} records",
                    t.cut_cascades,
                    rtemu_trace::action::MAX_FATE_RECORDS
                )?;
            }
        }
        if self.stopped_early {
            writeln!(f, "stopped early: the trace ended before the input")?;
        }
        if self.input_time_regressions > 0 {
            writeln!(
                f,
                "{:<22}{:>14}",
                "input time went back", self.input_time_regressions
            )?;
        }
        Ok(())
    }
}
/// What `rtemu sim` prints: the run's input, model, traces and seed, then its [`Summary`].
/// Serialises as the `--json` report; displays as the text one.
#[derive(Debug, Serialize)]
pub struct Report {
    /// The input capture's path, or `traffic SPEC`.
    pub input: String,
    /// The model in netem syntax (empty: an ideal link).
    pub model: String,
    /// Each trace as `FILE` or `FILE for PATTERN`.
    pub traces: Vec<String>,
    /// The seed of the run's random decisions (`--seed`): the traffic's, the traces', and the
    /// model's unless it names its own.
    pub seed: u64,
    /// The seed the model draws from when it names its own (`seed N` in its text), which
    /// then decides instead of [`Report::seed`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_seed: Option<u64>,
    /// What the run did.
    pub summary: Summary,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "rtemu sim: {}", self.input)?;
        let model = if self.model.is_empty() {
            "ideal"
        } else {
            &self.model
        };
        match self.model_seed {
            Some(own) => writeln!(
                f,
                "model: {model}  (seed {own}; traffic and traces seed {})",
                self.seed
            )?,
            None => writeln!(f, "model: {model}  (seed {})", self.seed)?,
        }
        for t in &self.traces {
            writeln!(f, "trace: {t}")?;
        }
        write!(f, "{}", self.summary)
    }
}
