//! Delay/loss time series: one-way delay (and loss) as a function of time, as probing a real
//! path records it, looked up at each packet's arrival time.
//!
//! # Text form
//!
//! One sample per line: `time delay [lost]`, whitespace-separated, `#` comments.
//!
//! * `time`: when the sample was taken, relative to the start of the trace. A number with a
//!   unit (`ns`, `us`, `ms`, `s`); a bare number is in **seconds**. Times must increase
//!   strictly.
//! * `delay`: the one-way delay then; a bare number is in **milliseconds** (what `ping`
//!   prints).
//! * `lost` (optional): `0` or `1` (also `ok`/`lost`); a lost probe still gives a delay field,
//!   which is used only for interpolation (write the neighbour's delay, or `0`).
//!
//! # Lookup ([`Interpolation`])
//!
//! For a packet arriving at `t`, with samples `i` at `t_i ≤ t < t_{i+1}`:
//!
//! * **step**: delay `d_i`;
//! * **linear**: `d_i + (d_{i+1} − d_i)(t − t_i)/(t_{i+1} − t_i)`, rounded down to the ns.
//!
//! Loss is always step-wise: the packet is lost if sample `i` is lost. Before the first sample
//! the first applies; after the last, the last holds.

use std::io::BufRead;
use std::path::Path;

use crate::action::Action;
use crate::duration::parse_duration_ns;
use crate::error::{syntax, ErrorKind, TraceError};

/// How to find the delay between two samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Interpolation {
    /// The last sample at or before the time.
    #[default]
    Step,
    /// The straight line between the samples around the time.
    Linear,
}

impl std::str::FromStr for Interpolation {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "step" => Ok(Interpolation::Step),
            "linear" => Ok(Interpolation::Linear),
            _ => Err(format!("unknown interpolation {s:?} (step, linear)")),
        }
    }
}

/// One sample of a series.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sample {
    /// When, in ns from the start of the trace.
    pub time_ns: u64,
    /// One-way delay in ns.
    pub delay_ns: u64,
    /// Whether the probe was lost.
    pub lost: bool,
}

/// What the series says about a packet arriving at some time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Lookup {
    /// The delay to apply, in ns.
    pub delay_ns: u64,
    /// Whether the packet is lost.
    pub lost: bool,
}

/// A delay/loss series: a pure lookup structure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelaySeries {
    samples: Vec<Sample>,
    interpolation: Interpolation,
}

impl DelaySeries {
    /// A series from samples whose times increase strictly.
    pub fn new(samples: Vec<Sample>, interpolation: Interpolation) -> Result<Self, TraceError> {
        if samples.is_empty() {
            return Err(ErrorKind::Empty.into());
        }
        if let Some(i) = samples
            .windows(2)
            .position(|w| w[1].time_ns <= w[0].time_ns)
        {
            return Err(syntax(
                i as u64 + 2,
                1,
                format!(
                    "time {} ns does not come after the previous {} ns; times must increase",
                    samples[i + 1].time_ns,
                    samples[i].time_ns
                ),
            ));
        }
        Ok(DelaySeries {
            samples,
            interpolation,
        })
    }

    /// Parses the text form. Errors give the line and column.
    pub fn parse(text: impl BufRead, interpolation: Interpolation) -> Result<Self, TraceError> {
        let mut samples: Vec<Sample> = Vec::new();
        let mut line_no = 0;
        for line in text.lines() {
            line_no += 1;
            let line = line.map_err(|e| match e.kind() {
                std::io::ErrorKind::InvalidData => syntax(line_no, 1, "the line is not UTF-8 text"),
                _ => e.into(),
            })?;
            let body = line.split('#').next().unwrap_or("");
            let mut fields = body
                .split(char::is_whitespace)
                .filter(|f| !f.is_empty())
                .map(|f| (f.as_ptr() as usize - body.as_ptr() as usize, f));
            let Some((tcol, time)) = fields.next() else {
                continue;
            };
            let col = |byte: usize| body[..byte].chars().count() as u64 + 1;
            let (dcol, delay) = fields.next().ok_or_else(|| {
                syntax(
                    line_no,
                    col(tcol + time.len()),
                    "expected `time delay [lost]`",
                )
            })?;
            let time_ns = parse_duration_ns(time, Some(1_000_000_000))
                .map_err(|m| syntax(line_no, col(tcol), m))?;
            let delay_ns = parse_duration_ns(delay, Some(1_000_000))
                .map_err(|m| syntax(line_no, col(dcol), m))?;
            let lost = match fields.next() {
                None => false,
                Some((_, "0" | "ok")) => false,
                Some((_, "1" | "lost")) => true,
                Some((c, other)) => {
                    return Err(syntax(
                        line_no,
                        col(c),
                        format!("expected 0, 1, ok or lost, found {other:?}"),
                    ))
                }
            };
            if let Some((c, extra)) = fields.next() {
                return Err(syntax(
                    line_no,
                    col(c),
                    format!("unexpected {extra:?} after the sample"),
                ));
            }
            if let Some(prev) = samples.last() {
                if time_ns <= prev.time_ns {
                    return Err(syntax(
                        line_no,
                        col(tcol),
                        format!(
                            "time {time} does not come after the previous sample's ({} ns); the series goes backwards",
                            prev.time_ns
                        ),
                    ));
                }
            }
            samples.push(Sample {
                time_ns,
                delay_ns,
                lost,
            });
        }
        DelaySeries::new(samples, interpolation)
    }

    /// Loads a series file; errors name it.
    pub fn load(path: &Path, interpolation: Interpolation) -> Result<Self, TraceError> {
        let file = std::fs::File::open(path).map_err(|e| TraceError::from(e).with_path(path))?;
        Self::parse(std::io::BufReader::new(file), interpolation).map_err(|e| e.with_path(path))
    }

    /// The samples.
    pub fn samples(&self) -> &[Sample] {
        &self.samples
    }

    /// What the series says at `t_ns`. O(log n); for increasing times use [`SeriesCursor`].
    pub fn at(&self, t_ns: u64) -> Lookup {
        let i = self
            .samples
            .partition_point(|s| s.time_ns <= t_ns)
            .saturating_sub(1);
        self.lookup(i, t_ns)
    }

    /// A cursor for lookups at non-decreasing times, O(1) amortised each.
    pub fn cursor(&self) -> SeriesCursor<'_> {
        SeriesCursor {
            series: self,
            index: 0,
        }
    }

    #[inline]
    fn lookup(&self, i: usize, t_ns: u64) -> Lookup {
        let s = self.samples[i];
        let delay_ns = match (self.interpolation, self.samples.get(i + 1)) {
            (Interpolation::Linear, Some(n)) if t_ns > s.time_ns => {
                let span = u128::from(n.time_ns - s.time_ns);
                let dt = u128::from(t_ns.min(n.time_ns) - s.time_ns);
                if n.delay_ns >= s.delay_ns {
                    s.delay_ns + (u128::from(n.delay_ns - s.delay_ns) * dt / span) as u64
                } else {
                    s.delay_ns - (u128::from(s.delay_ns - n.delay_ns) * dt).div_ceil(span) as u64
                }
            }
            _ => s.delay_ns,
        };
        Lookup {
            delay_ns,
            lost: s.lost,
        }
    }
}

/// The per-packet action trace a series implies for packets sent at `rate_pps` from time 0
/// through the last sample's time: packet `k` arrives at `⌊k·10⁹/rate⌋` ns and gets `drop` if
/// lost there, else `pass` with the delay rounded to a multiple of `resolution_ns`.
pub fn actions_at_rate(
    series: &DelaySeries,
    rate_pps: u64,
    resolution_ns: u64,
) -> impl Iterator<Item = Action> + '_ {
    let rate = u128::from(rate_pps.max(1));
    let last = u128::from(series.samples[series.samples.len() - 1].time_ns);
    let packets = last * rate / 1_000_000_000 + 1;
    let r = resolution_ns.max(1);
    let mut cursor = series.cursor();
    (0..packets).map(move |k| {
        let t = (k * 1_000_000_000 / rate) as u64;
        let l = cursor.at(t);
        if l.lost {
            Action::Drop
        } else {
            Action::Pass {
                delay_ns: (l.delay_ns + r / 2) / r * r,
            }
        }
    })
}

/// Lookups at non-decreasing times, walking the series forward. `Copy`, no allocation.
#[derive(Debug, Clone, Copy)]
pub struct SeriesCursor<'a> {
    series: &'a DelaySeries,
    index: usize,
}

impl SeriesCursor<'_> {
    /// What the series says at `t_ns`, which must not be before the previous call's time (an
    /// earlier time gets the answer for the previous time's interval, never a panic).
    #[inline]
    pub fn at(&mut self, t_ns: u64) -> Lookup {
        let s = &self.series.samples;
        while self.index + 1 < s.len() && s[self.index + 1].time_ns <= t_ns {
            self.index += 1;
        }
        self.series.lookup(self.index, t_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MS: u64 = 1_000_000;

    fn series(interp: Interpolation) -> DelaySeries {
        DelaySeries::parse(
            &b"# probe log\n0 10\n0.5 20 0\n1.0s 5ms lost\n2 8\n"[..],
            interp,
        )
        .unwrap()
    }

    #[test]
    fn step_lookup_holds_each_sample() {
        let s = series(Interpolation::Step);
        let at = |t| {
            let l = s.at(t);
            (l.delay_ns / MS, l.lost)
        };
        assert_eq!(at(0), (10, false));
        assert_eq!(at(499 * MS), (10, false));
        assert_eq!(at(500 * MS), (20, false));
        assert_eq!(at(1_500 * MS), (5, true));
        assert_eq!(at(2_000 * MS), (8, false));
        assert_eq!(at(9_000 * MS), (8, false));
    }

    #[test]
    fn linear_lookup_interpolates_delay_not_loss() {
        let s = series(Interpolation::Linear);
        assert_eq!(s.at(250 * MS).delay_ns, 15 * MS);
        // From 20 ms at 0.5 s down to 5 ms at 1 s.
        assert_eq!(s.at(750 * MS).delay_ns, 12_500_000);
        assert!(!s.at(999 * MS).lost);
        let l = s.at(1_500 * MS);
        assert_eq!((l.delay_ns, l.lost), (6_500_000, true));
        assert_eq!(s.at(5_000 * MS).delay_ns, 8 * MS);
    }

    #[test]
    fn bad_series_say_where() {
        let e = DelaySeries::parse(&b"0 1\n1 2\n0.5 3\n"[..], Interpolation::Step)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("line 3, column 1:") && e.contains("goes backwards"),
            "{e}"
        );
        let e = DelaySeries::parse(&b"0 1 maybe\n"[..], Interpolation::Step)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("line 1, column 5:"), "{e}");
        let e = DelaySeries::parse(&b"0\n"[..], Interpolation::Step)
            .unwrap_err()
            .to_string();
        assert!(e.contains("expected `time delay [lost]`"), "{e}");
        let e = DelaySeries::parse(&b"\n"[..], Interpolation::Step).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::Empty));
    }

    #[test]
    fn a_series_becomes_an_action_trace_at_a_packet_rate() {
        // 4 packets per second over 0..=2 s: arrivals at 0, 0.25, …, 2.0 s.
        let s = series(Interpolation::Step);
        let got: Vec<Action> = actions_at_rate(&s, 4, 1_000_000).collect();
        let pass = |ms: u64| Action::Pass { delay_ns: ms * MS };
        assert_eq!(
            got,
            vec![
                pass(10),
                pass(10),
                pass(20),
                pass(20),
                Action::Drop,
                Action::Drop,
                Action::Drop,
                Action::Drop,
                pass(8)
            ]
        );
    }

    proptest! {
        #[test]
        fn cursor_agrees_with_random_access(
            deltas in proptest::collection::vec((1u64..1_000_000, 0u64..1_000_000_000, any::<bool>()), 1..50),
            probes in proptest::collection::vec(0u64..60_000_000, 1..100),
            linear in any::<bool>(),
        ) {
            let mut t = 0;
            let samples = deltas.iter().map(|&(dt, delay_ns, lost)| {
                t += dt;
                Sample { time_ns: t, delay_ns, lost }
            }).collect();
            let interp = if linear { Interpolation::Linear } else { Interpolation::Step };
            let s = DelaySeries::new(samples, interp).unwrap();
            let mut probes = probes;
            probes.sort_unstable();
            let mut c = s.cursor();
            for p in probes {
                let l = c.at(p);
                prop_assert_eq!(l, s.at(p));
                // Interpolated delays lie between the smallest and largest sample delays.
                let lo = s.samples().iter().map(|x| x.delay_ns).min().unwrap();
                let hi = s.samples().iter().map(|x| x.delay_ns).max().unwrap();
                prop_assert!(lo <= l.delay_ns && l.delay_ns <= hi);
            }
        }
    }
}
