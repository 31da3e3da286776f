//! Delivery-opportunity traces, as Mahimahi's link shell reads them.
//!
//! Each line is a time in milliseconds (a non-negative integer) at which one MTU-sized packet
//! may leave the link; a time repeated *k* times gives *k* opportunities in that millisecond.
//! Times never decrease. The trace loops: after its last line, it starts again shifted by the
//! last time, so a trace whose last line is `T` has period `T` ms (which must be positive). This
//! reads existing Mahimahi files unchanged; as an extension, blank lines and `#` comments are
//! ignored.
//!
//! # Streaming
//!
//! A trace of any length is read in constant memory: [`OpportunityReader`] parses it a line
//! at a time, and [`OpportunityStream`] reads it ahead on its own thread, looping (the ring of
//! [`crate::readahead`]), while the link walks the opportunities in time order. A link that
//! sat idle skips the opportunities it missed; once the period is known (after the first
//! pass), whole periods are skipped by arithmetic, so an idle hour costs at most one pass.

use std::fs::File;
use std::io::{Read, Seek};
use std::path::Path;

use crate::error::{syntax, ErrorKind, TraceError};
use crate::lines::Lines;
use crate::readahead::{BlockSource, Pull, ReadAhead, Ring};

const NS_PER_MS: u64 = 1_000_000;

/// The largest time a line may hold, in ms (about 292 years): its time in ns, and the period's,
/// then fit in 63 bits, so that cursor arithmetic cannot overflow.
pub const MAX_TIME_MS: u64 = (i64::MAX as u64) / NS_PER_MS;

/// Parses one line; `None` for a blank or comment line. `prev` is the time before, which this
/// one must not be earlier than.
fn parse_time(line: &str, line_no: u64, prev: u64) -> Result<Option<u64>, TraceError> {
    let body = line.split('#').next().unwrap_or("");
    let value = body.trim();
    if value.is_empty() {
        return Ok(None);
    }
    // In characters, as every column in an error.
    let leading = body.len() - body.trim_start().len();
    let column = body[..leading].chars().count() as u64 + 1;
    let t: u64 = value
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| value.parse().ok())
        .flatten()
        .ok_or_else(|| {
            syntax(
                line_no,
                column,
                "expected a time in ms (a non-negative integer)".to_owned(),
            )
        })?;
    if t > MAX_TIME_MS {
        return Err(syntax(
            line_no,
            column,
            format!("time {t} ms is too late: at most {MAX_TIME_MS} ms (about 292 years)"),
        ));
    }
    if t < prev {
        return Err(syntax(
            line_no,
            column,
            format!("time {t} ms is before the previous {prev} ms; times must not decrease"),
        ));
    }
    Ok(Some(t))
}

/// Reads the opportunity times (ms) of a trace one at a time, checking that they do not
/// decrease and that the last (the period) is positive. Errors give the line and column (and
/// the file, when opened from one).
#[derive(Debug)]
pub struct OpportunityReader<R> {
    lines: Lines<R>,
    /// The last time read in this pass, and its line.
    prev: u64,
    prev_line: u64,
}

impl OpportunityReader<File> {
    /// Opens a trace file.
    pub fn open(path: &Path) -> Result<Self, TraceError> {
        Ok(OpportunityReader {
            lines: Lines::open(path)?,
            prev: 0,
            prev_line: 0,
        })
    }
}

impl<R: Read> OpportunityReader<R> {
    /// Reads the trace in `src`.
    pub fn new(src: R) -> Self {
        OpportunityReader {
            lines: Lines::new(src),
            prev: 0,
            prev_line: 0,
        }
    }

    /// The next opportunity's time in ms, or `None` at the end of the trace.
    pub fn next_time(&mut self) -> Result<Option<u64>, TraceError> {
        loop {
            let parsed = match self.lines.next_line()? {
                None if self.prev_line > 0 && self.prev == 0 => Err(syntax(
                    self.prev_line,
                    1,
                    "the last time is the trace's period and must be positive",
                )),
                None => return Ok(None),
                Some((line_no, line)) => parse_time(line, line_no, self.prev)
                    .map(|t| t.inspect(|_| self.prev_line = line_no)),
            };
            match parsed {
                Ok(Some(t)) => {
                    self.prev = t;
                    return Ok(Some(t));
                }
                Ok(None) => {}
                Err(e) => return Err(self.lines.named(e)),
            }
        }
    }
}

impl<R: Read + Seek + Send + 'static> BlockSource for OpportunityReader<R> {
    type Item = u64;

    fn read_block(&mut self, out: &mut Vec<u64>, max: usize) -> Result<usize, TraceError> {
        let mut n = 0;
        while n < max {
            let Some(t) = self.next_time()? else {
                break;
            };
            out.push(t);
            n += 1;
        }
        Ok(n)
    }

    fn rewind(&mut self) -> Result<(), TraceError> {
        self.lines.rewind()?;
        self.prev = 0;
        self.prev_line = 0;
        Ok(())
    }
}

/// Every opportunity time (ms) of a trace, in memory: for tools and tests that need the whole
/// trace at once. An empty trace is an error.
pub fn read_all(src: impl Read) -> Result<Vec<u64>, TraceError> {
    let mut r = OpportunityReader::new(src);
    let mut out = Vec::new();
    while let Some(t) = r.next_time()? {
        out.push(t);
    }
    if out.is_empty() {
        return Err(ErrorKind::Empty.into());
    }
    Ok(out)
}

/// Mean capacity in bits per second of `opportunities` per period of `period_ms`, each
/// carrying `bytes`.
pub fn mean_rate_bps(opportunities: u64, period_ms: u64, bytes: u32) -> f64 {
    opportunities as f64 * f64::from(bytes) * 8.0 / (period_ms as f64 * 1e-3)
}

/// Opportunity times per block of an [`OpportunityStream`]'s ring: 8 bytes each, 256 KiB in
/// all.
const STREAM_RING: Ring = Ring {
    block_items: 8192,
    blocks: 4,
    looping: true,
};

/// A trace streamed from a file: its opportunities in time order, looping, in constant memory.
/// See the [module docs](self).
#[derive(Debug)]
pub struct OpportunityStream {
    ahead: ReadAhead<u64>,
    /// Added to the current pass's times: the periods before it, passed or skipped.
    base_ns: u64,
    /// The current opportunity's time, ns since the trace started.
    cur_ns: u64,
    /// The current opportunity's time as the file gives it, ms.
    cur_ms: u64,
    /// Known once the stream has wrapped around the first time.
    period_ns: Option<u64>,
    /// Periods skipped by arithmetic.
    skipped: u64,
    wait: bool,
}

impl OpportunityStream {
    /// Opens a trace file and starts reading it ahead; returns once its first opportunity is
    /// read (an empty or unreadable trace fails here, naming the file). With `wait`, a
    /// movement waits for the reader instead of failing for want of data (the simulator's
    /// choice).
    pub fn open(path: &Path, wait: bool) -> Result<OpportunityStream, TraceError> {
        let reader = OpportunityReader::open(path)?;
        let path = path.to_owned();
        Self::spawn(reader, wait, move |e| e.with_path(&path))
    }

    /// Starts reading `reader` ahead; `annotate` is applied to the reader thread's errors.
    pub fn spawn<R: Read + Seek + Send + 'static>(
        reader: OpportunityReader<R>,
        wait: bool,
        annotate: impl Fn(TraceError) -> TraceError + Send + 'static,
    ) -> Result<OpportunityStream, TraceError> {
        let mut ahead = ReadAhead::spawn(reader, STREAM_RING, annotate)?;
        let Pull::Item(first) = ahead.pull(true)? else {
            return Err(ErrorKind::Empty.into());
        };
        Ok(OpportunityStream {
            ahead,
            base_ns: 0,
            cur_ns: first * NS_PER_MS,
            cur_ms: first,
            period_ns: None,
            skipped: 0,
            wait,
        })
    }

    /// The time of the current opportunity, in ns since the trace started.
    #[inline]
    pub fn time_ns(&self) -> u64 {
        self.cur_ns
    }

    /// Uses up the current opportunity and moves to the next: `Ok(false)`, without moving, if
    /// the reader has not read it yet (an under-run; never with `wait`) or the trace failed
    /// earlier. A read error is returned once.
    #[inline]
    pub fn advance(&mut self) -> Result<bool, TraceError> {
        let Pull::Item(ms) = self.ahead.pull(self.wait)? else {
            return Ok(false);
        };
        if self.ahead.starts_pass() {
            // The pass before ended with its period.
            let period = self.cur_ms * NS_PER_MS;
            self.period_ns = Some(period);
            self.base_ns = self.base_ns.saturating_add(period);
        }
        self.cur_ms = ms;
        self.cur_ns = self.base_ns.saturating_add(ms * NS_PER_MS);
        Ok(true)
    }

    /// Moves to the first opportunity at or after `t_ns`, skipping the ones before (they passed
    /// unused). `Ok(false)` as for [`OpportunityStream::advance`], stopped short of `t_ns`.
    pub fn skip_to(&mut self, t_ns: u64) -> Result<bool, TraceError> {
        if let Some(p) = self
            .period_ns
            .filter(|&p| t_ns > self.cur_ns.saturating_add(p))
        {
            // The same place whole periods later, still before `t_ns` (strictly, so that no
            // opportunity at `t_ns` itself is jumped over).
            let k = (t_ns - self.cur_ns - 1) / p;
            self.base_ns = self.base_ns.saturating_add(k * p);
            self.cur_ns = self.cur_ns.saturating_add(k * p);
            self.skipped += k;
        }
        while self.cur_ns < t_ns {
            if !self.advance()? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Opportunity lines taken from the file so far.
    pub fn records(&self) -> u64 {
        self.ahead.taken()
    }

    /// Times the trace started again, whether walked through or skipped.
    pub fn loops(&self) -> u64 {
        self.ahead.loops() + self.skipped
    }
}

/// What `rtemu trace stats` says of a delivery-opportunity trace.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Summary {
    /// Delivery opportunities in one period.
    pub opportunities: u64,
    /// The period: the last opportunity's time, ms.
    pub period_ms: f64,
    /// The mean rate it allows for 1500-byte packets, Mbit/s.
    pub mean_rate_mbps_at_1500_bytes: f64,
}

impl Summary {
    /// Reads the trace at `path` in one pass, in constant memory; an empty trace is an error.
    pub fn read(path: &Path) -> Result<Summary, TraceError> {
        let mut r = OpportunityReader::open(path)?;
        let (mut opportunities, mut period_ms) = (0u64, 0);
        while let Some(t) = r.next_time()? {
            opportunities += 1;
            period_ms = t;
        }
        if opportunities == 0 {
            return Err(TraceError::new(ErrorKind::Empty).with_path(path));
        }
        Ok(Summary {
            opportunities,
            period_ms: period_ms as f64,
            mean_rate_mbps_at_1500_bytes: mean_rate_bps(opportunities, period_ms, 1500) / 1e6,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    #[test]
    fn a_summary_counts_one_period_and_an_empty_trace_is_an_error() {
        let dir = std::env::temp_dir().join(format!("rtemu-mm-summary-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("link.down");
        std::fs::write(&path, "1\n1\n2\n4\n").unwrap();
        let s = Summary::read(&path).unwrap();
        assert_eq!((s.opportunities, s.period_ms), (4, 4.0));
        // Four 1500-byte packets in 4 ms: 12 Mbit/s.
        assert!(
            (s.mean_rate_mbps_at_1500_bytes - 12.0).abs() < 1e-9,
            "{s:?}"
        );
        std::fs::write(&path, "").unwrap();
        let e = Summary::read(&path).unwrap_err();
        assert!(e.to_string().contains("link.down"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn stream(text: &str) -> OpportunityStream {
        let r = OpportunityReader::new(Cursor::new(text.as_bytes().to_vec()));
        OpportunityStream::spawn(r, true, |e| e).unwrap()
    }

    /// The next `n` opportunities in ms, using each up.
    fn times(s: &mut OpportunityStream, n: usize) -> Vec<u64> {
        (0..n)
            .map(|_| {
                let t = s.time_ns() / NS_PER_MS;
                assert!(s.advance().unwrap());
                t
            })
            .collect()
    }

    #[test]
    fn a_mahimahi_file_loads_and_loops() {
        // The shape of Mahimahi's bundled traces: integers, one per line, repeats allowed.
        let text = "0\n1\n1\n3\n";
        assert_eq!(read_all(text.as_bytes()).unwrap(), vec![0, 1, 1, 3]);
        let mut s = stream(text);
        assert_eq!(times(&mut s, 9), vec![0, 1, 1, 3, 3, 4, 4, 6, 6]);
        assert_eq!((s.records(), s.loops()), (10, 2));
        let mut s = stream(text);
        assert!(s.skip_to(2 * NS_PER_MS).unwrap());
        assert_eq!(times(&mut s, 3), vec![3, 3, 4]);
        let mut s = stream(text);
        assert!(s.skip_to(3 * NS_PER_MS + 1).unwrap());
        assert_eq!(times(&mut s, 2), vec![4, 4]);
        assert!((mean_rate_bps(4, 3, 1500) - 4.0 * 1500.0 * 8.0 / 0.003).abs() < 1e-6);
    }

    #[test]
    fn an_idle_link_skips_whole_periods_without_reading_them() {
        let mut s = stream("2\n5\n5\n10\n");
        // The first pass is walked; it teaches the stream the period.
        assert!(s.skip_to(11 * NS_PER_MS).unwrap());
        assert_eq!(s.time_ns(), 12 * NS_PER_MS);
        let read = s.records();
        // A day later: the same place in the trace, found by arithmetic.
        let day = 86_400_000 * NS_PER_MS;
        assert!(s.skip_to(day + 4 * NS_PER_MS).unwrap());
        assert_eq!(s.time_ns(), day + 5 * NS_PER_MS);
        assert!(s.records() - read <= 4, "{} lines read", s.records() - read);
        assert_eq!(times(&mut s, 3), vec![86_400_005, 86_400_005, 86_400_010]);
        // Now at 86 400 012 ms: the first line of pass 8 640 001.
        assert_eq!(s.time_ns(), day + 12 * NS_PER_MS);
        assert_eq!(s.loops(), 8_640_001);
    }

    #[test]
    fn bad_traces_say_where() {
        let err = |text: &str| read_all(text.as_bytes()).unwrap_err();
        let e = err("1\n5\n4\n").to_string();
        assert!(
            e.starts_with("line 3, column 1: time 4 ms is before"),
            "{e}"
        );
        let e = err("1\n x2\n").to_string();
        assert!(e.starts_with("line 2, column 2: expected a time"), "{e}");
        let e = err("0\n0\n").to_string();
        assert!(e.contains("period and must be positive"), "{e}");
        assert!(matches!(err("# nothing\n").kind(), ErrorKind::Empty));
        // Columns count characters, not bytes; `+7` is not a Mahimahi time.
        let e = err("1\n\u{3000}+7\n").to_string();
        assert!(e.starts_with("line 2, column 2: expected a time"), "{e}");
        // The period's error names the line that holds it, not a later comment.
        let e = err("0\n0\n# end\n").to_string();
        assert!(e.starts_with("line 2, column 1:"), "{e}");
        // A time whose ns would overflow is refused, not wrapped.
        let e = err("18446744073709551\n").to_string();
        assert!(e.contains("too late"), "{e}");
        assert!(read_all(format!("{MAX_TIME_MS}\n").as_bytes()).is_ok());
        // A stream meets a late error when it gets there, once.
        let mut s = stream("1\n5\n4\n");
        assert_eq!(s.time_ns(), NS_PER_MS);
        assert!(s.advance().unwrap());
        assert!(s.advance().unwrap_err().to_string().contains("line 3"));
        assert!(!s.advance().unwrap());
    }
}
