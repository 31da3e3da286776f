//! The text form of an action trace: one record per line.
//!
//! ```text
//! # comments run from '#' to the end of the line; blank lines are ignored
//! drop
//! pass 1234us      # delivered after 1.234 ms
//! dup 100us        # delivered after 100 µs, and the next line is the copy's fate
//! pass 1.5ms
//! ```
//!
//! Keywords are case-insensitive. Delays take a unit (`ns`, `us` or `µs`, `ms`, `s`) and may
//! have a decimal fraction as long as the value is a whole number of ns.

use std::io::{self, Read, Write};

use rtemu_model::units::parse_duration_ns;

use crate::action::Action;
use crate::duration::format_duration;
use crate::error::{syntax, TraceError};
use crate::format::Header;
use crate::reader::RecordReader;

/// Parses one line (without its newline). `line_no` (from 1) is used in errors. Returns `None`
/// for a blank or comment-only line.
pub fn parse_line(line: &str, line_no: u64) -> Result<Option<Action>, TraceError> {
    let body = line.split('#').next().unwrap_or("");
    let mut words = body
        .split(char::is_whitespace)
        .filter(|w| !w.is_empty())
        .map(|w| (column(line, w), w));
    let Some((kcol, keyword)) = words.next() else {
        return Ok(None);
    };
    let delay = words.next();
    let extra = words.next();
    let kind = keyword.to_ascii_lowercase();
    let delay_ns = |what: &str| -> Result<u64, TraceError> {
        let (col, d) = delay.ok_or_else(|| {
            syntax(
                line_no,
                kcol + keyword.chars().count() as u64,
                format!("{what} needs a delay, e.g. `{what} 1234us`"),
            )
        })?;
        parse_duration_ns(d, None).map_err(|m| syntax(line_no, col, m.to_string()))
    };
    let action = match kind.as_str() {
        "drop" => match delay {
            Some((col, _)) => Err(syntax(line_no, col, "drop takes no delay".to_owned())),
            None => Ok(Some(Action::Drop)),
        },
        "pass" => Ok(Some(Action::Pass {
            delay_ns: delay_ns("pass")?,
        })),
        "dup" => Ok(Some(Action::Dup {
            delay_ns: delay_ns("dup")?,
        })),
        _ => Err(syntax(
            line_no,
            kcol,
            "expected drop, pass or dup".to_owned(),
        )),
    }?;
    if let Some((col, _)) = extra {
        return Err(syntax(
            line_no,
            col,
            "unexpected text after the record".to_owned(),
        ));
    }
    Ok(action)
}

/// The 1-based character column of `word`, a slice of `line`.
fn column(line: &str, word: &str) -> u64 {
    let byte = word.as_ptr() as usize - line.as_ptr() as usize;
    line[..byte].chars().count() as u64 + 1
}

/// Writes the trace `r` reads in the text form: a framed header's flow, provenance and unit
/// first as `#` comments, so the output is still a text trace, then a line per record.
/// Reading fails as a [`TraceError`], writing as the [`io::Error`] itself (a closed pipe stays
/// one).
pub fn write_trace<R: Read, E: From<TraceError> + From<io::Error>>(
    w: &mut impl Write,
    r: &mut RecordReader<R>,
) -> Result<(), E> {
    if let Some(h) = r.header() {
        write_header_comments(w, h)?;
    }
    r.for_each_record(|x| write_action(w, x).map_err(E::from))?;
    w.flush()?;
    Ok(())
}

/// Writes a framed header's flow, provenance (one comment line per line of it) and unit as
/// `#` comments, which a text trace may start with.
fn write_header_comments(w: &mut impl Write, h: &Header) -> io::Result<()> {
    match h.flow {
        Some(f) => writeln!(w, "# flow: {f}")?,
        None => writeln!(w, "# flow: none")?,
    }
    for (i, line) in h.provenance.lines().enumerate() {
        let label = if i == 0 { "provenance:" } else { "           " };
        // Whatever a header holds is shown, not obeyed by the terminal this may go to.
        let line = rtemu_sys::terminal::printable(line);
        writeln!(w, "# {label} {line}")?;
    }
    writeln!(w, "# unit: {}", h.unit)
}

/// Writes one record as a line.
pub fn write_action(w: &mut impl Write, action: Action) -> io::Result<()> {
    match action {
        Action::Drop => w.write_all(b"drop\n"),
        Action::Pass { delay_ns } => writeln!(w, "pass {}", format_duration(delay_ns)),
        Action::Dup { delay_ns } => writeln!(w, "dup {}", format_duration(delay_ns)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use crate::TimeUnit;

    #[test]
    fn a_framed_trace_reads_as_text_with_its_header_as_comments() {
        use crate::{Format, Header, RecordWriter};
        let header = Header {
            flow: Some("proto=udp".parse().unwrap()),
            provenance: "made\nhere".into(),
            unit: TimeUnit::Us,
        };
        let mut w = RecordWriter::new(Vec::new(), Format::Framed, &header).unwrap();
        w.write(Action::Drop).unwrap();
        w.write(Action::Pass {
            delay_ns: 1_500_000,
        })
        .unwrap();
        let bytes = w.finish().unwrap();
        let mut r = RecordReader::new(std::io::Cursor::new(bytes), Format::Framed, 64).unwrap();
        let mut out = Vec::new();
        write_trace::<_, TraceError>(&mut out, &mut r).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "# flow: proto=udp\n# provenance: made\n#             here\n# unit: us\ndrop\npass 1500us\n"
        );
    }

    #[test]
    fn header_comments_keep_every_provenance_line_a_comment() {
        let h = Header {
            unit: TimeUnit::Us,
            flow: None,
            provenance: "lab A\nrun 2".into(),
        };
        let mut out = Vec::new();
        write_header_comments(&mut out, &h).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "# flow: none\n# provenance: lab A\n#             run 2\n# unit: us\n"
        );
    }

    fn at(e: TraceError) -> (u64, u64, String) {
        match e.kind() {
            ErrorKind::Syntax {
                line,
                column,
                message,
            } => (*line, *column, message.clone()),
            k => panic!("not a syntax error: {k}"),
        }
    }

    #[test]
    fn lines_parse() {
        assert_eq!(parse_line("  # only a comment", 1).unwrap(), None);
        assert_eq!(parse_line("", 1).unwrap(), None);
        assert_eq!(parse_line("DROP # lost", 1).unwrap(), Some(Action::Drop));
        assert_eq!(
            parse_line("\tpass  1234us", 1).unwrap(),
            Some(Action::Pass {
                delay_ns: 1_234_000
            })
        );
        assert_eq!(
            parse_line("dup 1.5ms#x", 1).unwrap(),
            Some(Action::Dup {
                delay_ns: 1_500_000
            })
        );
    }

    #[test]
    fn errors_point_at_the_column() {
        let (l, c, m) = at(parse_line("pass 12parsecs", 4).unwrap_err());
        assert_eq!((l, c), (4, 6));
        assert!(m.contains("unknown unit"), "{m}");
        let (_, c, m) = at(parse_line("  pass", 1).unwrap_err());
        assert_eq!(c, 7);
        assert!(m.contains("needs a delay"), "{m}");
        let (_, c, _) = at(parse_line("µ drop", 1).unwrap_err());
        assert_eq!(c, 1);
        let (_, c, m) = at(parse_line("drop 5us", 1).unwrap_err());
        assert_eq!((c, m.contains("no delay")), (6, true));
        let (_, c, _) = at(parse_line("pass 5us 6us", 1).unwrap_err());
        assert_eq!(c, 10);
    }
}
