//! Delivery-opportunity traces, as Mahimahi's link shell reads them.
//!
//! Each line is a time in milliseconds (a non-negative integer) at which one MTU-sized packet
//! may leave the link; a time repeated *k* times gives *k* opportunities in that millisecond.
//! Times never decrease. The trace loops: after its last line, it starts again shifted by the
//! last time, so a trace whose last line is `T` has period `T` ms (which must be positive). This
//! reads existing Mahimahi files unchanged; as an extension, blank lines and `#` comments are
//! ignored.

use std::io::BufRead;
use std::path::Path;

use crate::error::{syntax, ErrorKind, TraceError};

const NS_PER_MS: u64 = 1_000_000;

/// The largest time a line may hold, in ms (about 292 years): its time in ns, and the period's,
/// then fit in 63 bits, so that cursor arithmetic cannot overflow.
pub const MAX_TIME_MS: u64 = (i64::MAX as u64) / NS_PER_MS;

fn too_late(t: u64) -> String {
    format!("time {t} ms is too late: at most {MAX_TIME_MS} ms (about 292 years)")
}

/// A loaded delivery-opportunity trace: a pure lookup structure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opportunities {
    times_ms: Vec<u64>,
}

impl Opportunities {
    /// A trace from opportunity times in ms; they must not decrease, and the last must be
    /// positive (it is the period).
    pub fn new(times_ms: Vec<u64>) -> Result<Opportunities, TraceError> {
        let Some(&last) = times_ms.last() else {
            return Err(ErrorKind::Empty.into());
        };
        if let Some(i) = times_ms.windows(2).position(|w| w[1] < w[0]) {
            return Err(syntax(
                i as u64 + 2,
                1,
                format!(
                    "time {} ms is before the previous {} ms; times must not decrease",
                    times_ms[i + 1],
                    times_ms[i]
                ),
            ));
        }
        if let Some(i) = times_ms.iter().position(|&t| t > MAX_TIME_MS) {
            return Err(syntax(i as u64 + 1, 1, too_late(times_ms[i])));
        }
        if last == 0 {
            return Err(syntax(
                times_ms.len() as u64,
                1,
                "the last time is the trace's period and must be positive",
            ));
        }
        Ok(Opportunities { times_ms })
    }

    /// Parses the text of a trace. Errors give the line and column.
    pub fn parse(text: impl BufRead) -> Result<Opportunities, TraceError> {
        let mut times = Vec::new();
        let mut line_no = 0;
        let mut prev = 0;
        // The line of the last time read (the period).
        let mut last_line = 0;
        for line in text.lines() {
            line_no += 1;
            let line = line.map_err(|e| match e.kind() {
                std::io::ErrorKind::InvalidData => syntax(line_no, 1, "the line is not UTF-8 text"),
                _ => e.into(),
            })?;
            let body = line.split('#').next().unwrap_or("");
            let value = body.trim();
            if value.is_empty() {
                continue;
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
                        format!("expected a time in ms (a non-negative integer), found {value:?}"),
                    )
                })?;
            if t > MAX_TIME_MS {
                return Err(syntax(line_no, column, too_late(t)));
            }
            if t < prev {
                return Err(syntax(
                    line_no,
                    column,
                    format!(
                        "time {t} ms is before the previous {prev} ms; times must not decrease"
                    ),
                ));
            }
            prev = t;
            last_line = line_no;
            times.push(t);
        }
        match times.last() {
            None => Err(ErrorKind::Empty.into()),
            Some(0) => Err(syntax(
                last_line,
                1,
                "the last time is the trace's period and must be positive",
            )),
            Some(_) => Ok(Opportunities { times_ms: times }),
        }
    }

    /// Loads a trace file; errors name it.
    pub fn load(path: &Path) -> Result<Opportunities, TraceError> {
        let file = std::fs::File::open(path).map_err(|e| TraceError::from(e).with_path(path))?;
        Self::parse(std::io::BufReader::new(file)).map_err(|e| e.with_path(path))
    }

    /// The period in ns (the last time).
    pub fn period_ns(&self) -> u64 {
        self.times_ms[self.times_ms.len() - 1] * NS_PER_MS
    }

    /// Opportunities per period.
    pub fn len(&self) -> usize {
        self.times_ms.len()
    }

    /// Always false: a trace has at least one opportunity.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Mean capacity in bits per second for packets of `mtu` bytes.
    pub fn mean_rate_bps(&self, mtu: u32) -> f64 {
        self.len() as f64 * f64::from(mtu) * 8.0 / (self.period_ns() as f64 * 1e-9)
    }

    /// A cursor at the first opportunity at or after `t_ns`.
    pub fn cursor_at(&self, t_ns: u64) -> Cursor<'_> {
        let period = self.period_ns();
        let cycle = t_ns / period;
        let within = t_ns % period;
        // First opportunity at or after `within` in this cycle.
        let index = self.times_ms.partition_point(|&t| t * NS_PER_MS < within);
        let mut c = Cursor {
            trace: self,
            cycle,
            index,
        };
        c.normalise();
        c
    }
}

/// Walks the opportunities of a trace in time order, looping. `Copy`, no allocation.
#[derive(Debug, Clone, Copy)]
pub struct Cursor<'a> {
    trace: &'a Opportunities,
    cycle: u64,
    index: usize,
}

impl Cursor<'_> {
    /// The time of the current opportunity, in ns since the trace started.
    #[inline]
    pub fn time_ns(&self) -> u64 {
        self.cycle * self.trace.period_ns() + self.trace.times_ms[self.index] * NS_PER_MS
    }

    /// Uses up the current opportunity and moves to the next.
    #[inline]
    pub fn advance(&mut self) {
        self.index += 1;
        self.normalise();
    }

    fn normalise(&mut self) {
        if self.index == self.trace.times_ms.len() {
            // As in Mahimahi, the next cycle starts at the period: the next opportunity is the
            // first line's time plus the period.
            self.index = 0;
            self.cycle += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn times(c: &mut Cursor<'_>, n: usize) -> Vec<u64> {
        (0..n)
            .map(|_| {
                let t = c.time_ns() / NS_PER_MS;
                c.advance();
                t
            })
            .collect()
    }

    #[test]
    fn a_mahimahi_file_loads_and_loops() {
        // The shape of Mahimahi's bundled traces: integers, one per line, repeats allowed.
        let t = Opportunities::parse(&b"0\n1\n1\n3\n"[..]).unwrap();
        assert_eq!(t.len(), 4);
        assert_eq!(t.period_ns(), 3 * NS_PER_MS);
        let mut c = t.cursor_at(0);
        assert_eq!(times(&mut c, 9), vec![0, 1, 1, 3, 3, 4, 4, 6, 6]);
        let mut c = t.cursor_at(2 * NS_PER_MS);
        assert_eq!(times(&mut c, 3), vec![3, 3, 4]);
        let mut c = t.cursor_at(3 * NS_PER_MS + 1);
        assert_eq!(times(&mut c, 2), vec![4, 4]);
        assert!((t.mean_rate_bps(1500) - 4.0 * 1500.0 * 8.0 / 0.003).abs() < 1e-6);
    }

    #[test]
    fn bad_traces_say_where() {
        let e = Opportunities::parse(&b"1\n5\n4\n"[..])
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("line 3, column 1: time 4 ms is before"),
            "{e}"
        );
        let e = Opportunities::parse(&b"1\n x2\n"[..])
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("line 2, column 2: expected a time"), "{e}");
        let e = Opportunities::parse(&b"0\n0\n"[..])
            .unwrap_err()
            .to_string();
        assert!(e.contains("period and must be positive"), "{e}");
        let e = Opportunities::parse(&b"# nothing\n"[..]).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::Empty));
        assert!(Opportunities::new(vec![2, 1]).is_err());
        // Columns count characters, not bytes; `+7` is not a Mahimahi time.
        let e = Opportunities::parse("1\n\u{3000}+7\n".as_bytes())
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("line 2, column 2: expected a time"), "{e}");
        // The period's error names the line that holds it, not a later comment.
        let e = Opportunities::parse(&b"0\n0\n# end\n"[..])
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("line 2, column 1:"), "{e}");
        // A time whose ns would overflow is refused, not wrapped.
        let e = Opportunities::parse(&b"18446744073709551\n"[..])
            .unwrap_err()
            .to_string();
        assert!(e.contains("too late"), "{e}");
        assert!(Opportunities::parse(format!("{MAX_TIME_MS}\n").as_bytes()).is_ok());
        assert!(Opportunities::new(vec![1, MAX_TIME_MS + 1]).is_err());
    }
}
