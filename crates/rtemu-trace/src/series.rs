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
//!
//! # Streaming
//!
//! A series of any length is read in constant memory: [`SeriesReader`] parses it a line at a
//! time, and [`SeriesStream`] reads it ahead on its own thread (the ring of
//! [`crate::readahead`]) while the packet path looks up arrival times, which only go forward,
//! holding just the samples around the current time. If the next sample is not read yet when
//! a packet needs it, that is an under-run, counted and answered by the
//! [`UnderrunPolicy`]: `pass` (no delay, not lost), `drop` (lost), `hold-last` (the current
//! sample's step value) or `wait` (the simulator's: block until it is read).

use std::fs::File;
use std::io::{Read, Seek};
use std::path::Path;

use rtemu_model::units::parse_duration_ns;

use crate::action::Action;
use crate::error::{syntax, ErrorKind, TraceError};
use crate::lines::Lines;
use crate::prefetch::UnderrunPolicy;
use crate::readahead::{BlockSource, Pull, ReadAhead, Ring};

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

/// Parses one line of the text form; `None` for a blank or comment line. `prev` is the time of
/// the sample before, which this one must come after.
fn parse_sample(line: &str, line_no: u64, prev: Option<u64>) -> Result<Option<Sample>, TraceError> {
    let body = line.split('#').next().unwrap_or("");
    let mut fields = body
        .split(char::is_whitespace)
        .filter(|f| !f.is_empty())
        .map(|f| (f.as_ptr() as usize - body.as_ptr() as usize, f));
    let Some((tcol, time)) = fields.next() else {
        return Ok(None);
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
        .map_err(|m| syntax(line_no, col(tcol), m.to_string()))?;
    let delay_ns = parse_duration_ns(delay, Some(1_000_000))
        .map_err(|m| syntax(line_no, col(dcol), m.to_string()))?;
    let lost = match fields.next() {
        None => false,
        Some((_, "0" | "ok")) => false,
        Some((_, "1" | "lost")) => true,
        Some((c, _)) => {
            return Err(syntax(
                line_no,
                col(c),
                "expected 0, 1, ok or lost".to_owned(),
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
    if let Some(prev) = prev.filter(|&p| time_ns <= p) {
        return Err(syntax(
            line_no,
            col(tcol),
            format!(
                "time {time} does not come after the previous sample's ({prev} ns); the series goes backwards"
            ),
        ));
    }
    Ok(Some(Sample {
        time_ns,
        delay_ns,
        lost,
    }))
}

/// Reads the samples of a series's text form one at a time, checking that times increase.
/// Errors give the line and column (and the file, when opened from one).
#[derive(Debug)]
pub struct SeriesReader<R> {
    lines: Lines<R>,
    prev: Option<u64>,
}

impl SeriesReader<File> {
    /// Opens a series file.
    pub fn open(path: &Path) -> Result<Self, TraceError> {
        Ok(SeriesReader {
            lines: Lines::open(path)?,
            prev: None,
        })
    }
}

impl<R: Read> SeriesReader<R> {
    /// Reads the series in `src`.
    pub fn new(src: R) -> Self {
        SeriesReader {
            lines: Lines::new(src),
            prev: None,
        }
    }

    /// The next sample, or `None` at the end of the text.
    pub fn next_sample(&mut self) -> Result<Option<Sample>, TraceError> {
        loop {
            let parsed = match self.lines.next_line()? {
                None => return Ok(None),
                Some((line_no, line)) => parse_sample(line, line_no, self.prev),
            };
            match parsed {
                Ok(Some(s)) => {
                    self.prev = Some(s.time_ns);
                    return Ok(Some(s));
                }
                Ok(None) => {}
                Err(e) => return Err(self.lines.named(e)),
            }
        }
    }
}

impl<R: Read + Seek + Send + 'static> BlockSource for SeriesReader<R> {
    type Item = Sample;

    fn read_block(&mut self, out: &mut Vec<Sample>, max: usize) -> Result<usize, TraceError> {
        let mut n = 0;
        while n < max {
            let Some(s) = self.next_sample()? else {
                break;
            };
            out.push(s);
            n += 1;
        }
        Ok(n)
    }

    fn rewind(&mut self) -> Result<(), TraceError> {
        self.lines.rewind()?;
        self.prev = None;
        Ok(())
    }
}

/// Every sample of a series's text form, in memory: for tools and tests that need the whole
/// series at once. An empty series is an error.
pub fn read_all(src: impl Read) -> Result<Vec<Sample>, TraceError> {
    let mut r = SeriesReader::new(src);
    let mut out = Vec::new();
    while let Some(s) = r.next_sample()? {
        out.push(s);
    }
    if out.is_empty() {
        return Err(ErrorKind::Empty.into());
    }
    Ok(out)
}

/// What the series says at `t_ns`, given the sample `cur` in force then (the last at or before
/// `t_ns`, or the first if `t_ns` is earlier) and the sample after it, if any.
#[inline]
pub fn interpolate(cur: Sample, next: Option<Sample>, t_ns: u64, how: Interpolation) -> Lookup {
    let delay_ns = match (how, next) {
        (Interpolation::Linear, Some(n)) if t_ns > cur.time_ns => {
            let span = u128::from(n.time_ns - cur.time_ns);
            let dt = u128::from(t_ns.min(n.time_ns) - cur.time_ns);
            if n.delay_ns >= cur.delay_ns {
                cur.delay_ns + (u128::from(n.delay_ns - cur.delay_ns) * dt / span) as u64
            } else {
                cur.delay_ns - (u128::from(cur.delay_ns - n.delay_ns) * dt).div_ceil(span) as u64
            }
        }
        _ => cur.delay_ns,
    };
    Lookup {
        delay_ns,
        lost: cur.lost,
    }
}

/// Samples per block of a [`SeriesStream`]'s ring: 24 bytes each, so 384 KiB in all.
const STREAM_RING: Ring = Ring {
    block_items: 4096,
    blocks: 4,
    looping: false,
};

/// The sample after the current one, as far as the stream knows.
#[derive(Debug, Clone, Copy)]
enum Upcoming {
    Sample(Sample),
    /// Not taken from the ring yet.
    Unknown,
    /// The current sample is the last.
    End,
}

/// A series streamed from a file: lookups at non-decreasing times in constant memory. See the
/// [module docs](self).
#[derive(Debug)]
pub struct SeriesStream {
    ahead: ReadAhead<Sample>,
    cur: Sample,
    next: Upcoming,
    interpolation: Interpolation,
    underrun: UnderrunPolicy,
    underruns: u64,
}

impl SeriesStream {
    /// Opens a series file and starts reading it ahead; returns once its first sample is read
    /// (an empty or unreadable series fails here, naming the file).
    pub fn open(
        path: &Path,
        interpolation: Interpolation,
        underrun: UnderrunPolicy,
    ) -> Result<SeriesStream, TraceError> {
        let reader = SeriesReader::open(path)?;
        let path = path.to_owned();
        Self::spawn(reader, interpolation, underrun, move |e| e.with_path(&path))
    }

    /// Starts reading `reader` ahead; `annotate` is applied to the reader thread's errors.
    pub fn spawn<R: Read + Seek + Send + 'static>(
        reader: SeriesReader<R>,
        interpolation: Interpolation,
        underrun: UnderrunPolicy,
        annotate: impl Fn(TraceError) -> TraceError + Send + 'static,
    ) -> Result<SeriesStream, TraceError> {
        let mut ahead = ReadAhead::spawn(reader, STREAM_RING, annotate)?;
        let Pull::Item(first) = ahead.pull(true)? else {
            return Err(ErrorKind::Empty.into());
        };
        Ok(SeriesStream {
            ahead,
            cur: first,
            next: Upcoming::Unknown,
            interpolation,
            underrun,
            underruns: 0,
        })
    }

    /// What the series says at `t_ns`. Times must not go back: an earlier time than the last
    /// call's is answered as if it were that time's interval. A read error is returned once;
    /// afterwards the last sample read holds.
    #[inline]
    pub fn at(&mut self, t_ns: u64) -> Result<Lookup, TraceError> {
        loop {
            if let Upcoming::Unknown = self.next {
                self.next = match self.ahead.pull(self.underrun == UnderrunPolicy::Wait)? {
                    Pull::Item(s) => Upcoming::Sample(s),
                    Pull::NotReady => {
                        self.underruns += 1;
                        return Ok(self.substitute());
                    }
                    Pull::Ended => Upcoming::End,
                };
            }
            match self.next {
                Upcoming::Sample(n) if n.time_ns <= t_ns => {
                    self.cur = n;
                    self.next = Upcoming::Unknown;
                }
                _ => break,
            }
        }
        let next = match self.next {
            Upcoming::Sample(n) => Some(n),
            _ => None,
        };
        Ok(interpolate(self.cur, next, t_ns, self.interpolation))
    }

    /// Whether `t_ns` lies after the series's last sample (known only once a lookup at `t_ns`
    /// reached it).
    pub fn past_end(&self, t_ns: u64) -> bool {
        matches!(self.next, Upcoming::End) && t_ns > self.cur.time_ns
    }

    fn substitute(&self) -> Lookup {
        match self.underrun {
            UnderrunPolicy::Pass | UnderrunPolicy::Wait => Lookup {
                delay_ns: 0,
                lost: false,
            },
            UnderrunPolicy::Drop => Lookup {
                delay_ns: 0,
                lost: true,
            },
            UnderrunPolicy::HoldLast => interpolate(self.cur, None, 0, Interpolation::Step),
        }
    }

    /// Samples taken from the file so far.
    pub fn samples_read(&self) -> u64 {
        self.ahead.taken()
    }

    /// Lookups answered by the under-run policy.
    pub fn underruns(&self) -> u64 {
        self.underruns
    }
}

/// The per-packet action trace a series implies for packets sent at `rate_pps` from time 0
/// through the last sample's time: packet `k` arrives at `⌊k·10⁹/rate⌋` ns and gets `drop` if
/// lost there, else `pass` with the delay rounded to a multiple of `resolution_ns`. Streams: the
/// series should wait for its reader ([`UnderrunPolicy::Wait`]), so that no record is a
/// substitute.
pub fn actions_at_rate(
    series: SeriesStream,
    rate_pps: u64,
    resolution_ns: u64,
) -> impl Iterator<Item = Result<Action, TraceError>> {
    let rate = u128::from(rate_pps.max(1));
    let r = resolution_ns.max(1);
    let mut series = series;
    let mut k: u128 = 0;
    let mut done = false;
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        let t = u64::try_from(k * 1_000_000_000 / rate).unwrap_or(u64::MAX);
        let l = match series.at(t) {
            Ok(l) => l,
            Err(e) => {
                done = true;
                return Some(Err(e));
            }
        };
        if series.past_end(t) || t == u64::MAX {
            done = true;
            return None;
        }
        k += 1;
        Some(Ok(if l.lost {
            Action::Drop
        } else {
            Action::Pass {
                delay_ns: (l.delay_ns + r / 2) / r * r,
            }
        }))
    })
}

/// What `rtemu trace stats` says of a delay series.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Summary {
    /// Samples in the series.
    pub samples: u64,
    /// From the first sample to the last, s.
    pub duration_s: f64,
    /// The share of samples that say lost.
    pub lost_fraction: f64,
    /// The mean delay, ms.
    pub delay_mean_ms: f64,
    /// The least delay, ms.
    pub delay_min_ms: f64,
    /// The greatest delay, ms.
    pub delay_max_ms: f64,
}

impl Summary {
    /// Reads the series at `path` in one pass, in constant memory; an empty series is an
    /// error.
    pub fn read(path: &Path) -> Result<Summary, TraceError> {
        let mut r = SeriesReader::open(path)?;
        let Some(first) = r.next_sample()? else {
            return Err(TraceError::new(ErrorKind::Empty).with_path(path));
        };
        let ms = |ns: u64| ns as f64 / 1e6;
        let (mut n, mut lost, mut sum_ms) = (0u64, 0u64, 0.0);
        let (mut min_ms, mut max_ms) = (f64::INFINITY, 0.0f64);
        let mut last = first;
        let mut sample = Some(first);
        while let Some(x) = sample {
            n += 1;
            lost += u64::from(x.lost);
            sum_ms += ms(x.delay_ns);
            min_ms = min_ms.min(ms(x.delay_ns));
            max_ms = max_ms.max(ms(x.delay_ns));
            last = x;
            sample = r.next_sample()?;
        }
        Ok(Summary {
            samples: n,
            duration_s: (last.time_ns - first.time_ns) as f64 / 1e9,
            lost_fraction: lost as f64 / n as f64,
            delay_mean_ms: sum_ms / n as f64,
            delay_min_ms: min_ms,
            delay_max_ms: max_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::io::Cursor;

    #[test]
    fn a_summary_gives_the_delay_range_and_the_lost_share() {
        let dir = std::env::temp_dir().join(format!("rtemu-series-summary-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("probe.txt");
        std::fs::write(&path, "0 10\n1 12 1\n2 8\n").unwrap();
        let s = Summary::read(&path).unwrap();
        assert_eq!((s.samples, s.duration_s), (3, 2.0));
        assert!((s.lost_fraction - 1.0 / 3.0).abs() < 1e-12, "{s:?}");
        assert_eq!(
            (s.delay_mean_ms, s.delay_min_ms, s.delay_max_ms),
            (10.0, 8.0, 12.0)
        );
        std::fs::write(&path, "# nothing\n").unwrap();
        assert!(Summary::read(&path).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    const MS: u64 = 1_000_000;
    const TEXT: &str = "# probe log\n0 10\n0.5 20 0\n1.0s 5ms lost\n2 8\n";

    fn stream(text: &str, interp: Interpolation) -> SeriesStream {
        let r = SeriesReader::new(Cursor::new(text.as_bytes().to_vec()));
        SeriesStream::spawn(r, interp, UnderrunPolicy::Wait, |e| e).unwrap()
    }

    /// The lookup at `t` by search over every sample: what the stream must agree with.
    fn reference(samples: &[Sample], t: u64, interp: Interpolation) -> Lookup {
        let i = samples
            .partition_point(|s| s.time_ns <= t)
            .saturating_sub(1);
        interpolate(samples[i], samples.get(i + 1).copied(), t, interp)
    }

    #[test]
    fn step_lookup_holds_each_sample() {
        let mut s = stream(TEXT, Interpolation::Step);
        let mut at = |t| {
            let l = s.at(t).unwrap();
            (l.delay_ns / MS, l.lost)
        };
        assert_eq!(at(0), (10, false));
        assert_eq!(at(499 * MS), (10, false));
        assert_eq!(at(500 * MS), (20, false));
        assert_eq!(at(1_500 * MS), (5, true));
        assert_eq!(at(2_000 * MS), (8, false));
        assert_eq!(at(9_000 * MS), (8, false));
        assert!(s.past_end(9_000 * MS) && !s.past_end(2_000 * MS));
        assert_eq!((s.samples_read(), s.underruns()), (4, 0));
    }

    #[test]
    fn linear_lookup_interpolates_delay_not_loss() {
        let mut s = stream(TEXT, Interpolation::Linear);
        assert_eq!(s.at(250 * MS).unwrap().delay_ns, 15 * MS);
        // From 20 ms at 0.5 s down to 5 ms at 1 s.
        assert_eq!(s.at(750 * MS).unwrap().delay_ns, 12_500_000);
        assert!(!s.at(999 * MS).unwrap().lost);
        let l = s.at(1_500 * MS).unwrap();
        assert_eq!((l.delay_ns, l.lost), (6_500_000, true));
        assert_eq!(s.at(5_000 * MS).unwrap().delay_ns, 8 * MS);
    }

    #[test]
    fn bad_series_say_where() {
        let err = |text: &str| read_all(text.as_bytes()).unwrap_err();
        let e = err("0 1\n1 2\n0.5 3\n").to_string();
        assert!(
            e.starts_with("line 3, column 1:") && e.contains("goes backwards"),
            "{e}"
        );
        let e = err("0 1 maybe\n").to_string();
        assert!(e.starts_with("line 1, column 5:"), "{e}");
        let e = err("0\n").to_string();
        assert!(e.contains("expected `time delay [lost]`"), "{e}");
        assert!(matches!(err("\n").kind(), ErrorKind::Empty));
        let r = SeriesReader::new(Cursor::new(b"# nothing\n".to_vec()));
        let e =
            SeriesStream::spawn(r, Interpolation::Step, UnderrunPolicy::Wait, |e| e).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::Empty));
    }

    #[test]
    fn an_error_past_the_start_reaches_the_lookup_once() {
        let mut s = stream("0 1\n1 2\n0.5 3\n", Interpolation::Step);
        assert_eq!(s.at(0).unwrap().delay_ns, MS);
        let e = s.at(2_000 * MS).unwrap_err().to_string();
        assert!(e.starts_with("line 3, column 1:"), "{e}");
        // The samples read before the error hold.
        assert_eq!(s.at(3_000 * MS).unwrap().delay_ns, 2 * MS);
    }

    #[test]
    fn a_series_becomes_an_action_trace_at_a_packet_rate() {
        // 4 packets per second over 0..=2 s: arrivals at 0, 0.25, …, 2.0 s.
        let s = stream(TEXT, Interpolation::Step);
        let got: Vec<Action> = actions_at_rate(s, 4, 1_000_000)
            .collect::<Result<_, _>>()
            .unwrap();
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
        fn the_stream_agrees_with_a_search_over_every_sample(
            deltas in proptest::collection::vec((1u64..1_000_000, 0u64..1_000_000_000, any::<bool>()), 1..50),
            probes in proptest::collection::vec(0u64..60_000_000, 1..100),
            linear in any::<bool>(),
        ) {
            let mut t = 0;
            let samples: Vec<Sample> = deltas.iter().map(|&(dt, delay_ns, lost)| {
                t += dt;
                Sample { time_ns: t, delay_ns, lost }
            }).collect();
            let text: String = samples
                .iter()
                .map(|s| format!("{}ns {}ns {}\n", s.time_ns, s.delay_ns, u8::from(s.lost)))
                .collect();
            let interp = if linear { Interpolation::Linear } else { Interpolation::Step };
            let mut stream = stream(&text, interp);
            let mut probes = probes;
            probes.sort_unstable();
            let lo = samples.iter().map(|x| x.delay_ns).min().unwrap();
            let hi = samples.iter().map(|x| x.delay_ns).max().unwrap();
            for p in probes {
                let l = stream.at(p).unwrap();
                prop_assert_eq!(l, reference(&samples, p, interp));
                // Interpolated delays lie between the smallest and largest sample delays.
                prop_assert!(lo <= l.delay_ns && l.delay_ns <= hi);
            }
        }
    }
}
