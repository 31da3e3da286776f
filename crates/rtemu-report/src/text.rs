//! The pieces every report shares: times in microseconds, JSON on stdout, key–value
//! summaries, indented text, Markdown tables.

use std::io::{self, Write};

use serde::Serialize;

/// Nanoseconds as microseconds with one decimal, the unit of every lab table.
pub fn us(ns: f64) -> String {
    format!("{:.1}", ns / 1_000.0)
}

/// [`us`] of a whole number of nanoseconds.
pub fn us_i(ns: i64) -> String {
    us(ns as f64)
}

/// Writes `value` as pretty JSON and a newline. Serialized first, so that a closed pipe
/// (`… --json | head`) surfaces as the I/O error the command line treats as no error.
pub fn json(out: &mut impl Write, value: &impl Serialize) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    writeln!(out, "{text}")?;
    Ok(())
}

/// [`json`] on stdout.
pub fn print_json(value: &impl Serialize) -> anyhow::Result<()> {
    json(&mut io::stdout().lock(), value)
}

/// Prints `summary` on stdout: as JSON, or one `field name   value` line per field (the
/// field's underscores as spaces).
pub fn print_summary(as_json: bool, summary: &impl Serialize) -> anyhow::Result<()> {
    let value = serde_json::to_value(summary)?;
    if as_json {
        print_json(&value)?;
    } else if let serde_json::Value::Object(fields) = value {
        let mut out = io::stdout().lock();
        for (k, v) in fields {
            writeln!(out, "{:<30} {v}", k.replace('_', " "))?;
        }
    }
    Ok(())
}

/// Writes `text` with each line after the first indented by `indent` spaces, every character
/// that would steer a terminal escaped (`text` comes from a file: a trace's provenance).
pub fn write_indented(out: &mut impl Write, text: &str, indent: usize) -> io::Result<()> {
    for (i, line) in text.lines().enumerate() {
        if i > 0 {
            write!(out, "\n{:indent$}", "")?;
        }
        write!(out, "{}", rtemu_sys::terminal::printable(line))?;
    }
    writeln!(out)
}

/// Writes `caption` on a line of its own, then a Markdown table: `headings`, the first column
/// (what a row is) aligned left and the others (its figures) right, then each of `rows`, one
/// cell per heading.
pub fn write_table(
    out: &mut impl Write,
    caption: &str,
    headings: &[&str],
    rows: impl IntoIterator<Item = Vec<String>>,
) -> io::Result<()> {
    writeln!(out, "{caption}")?;
    writeln!(out, "| {} |", headings.join(" | "))?;
    let align: Vec<&str> = (0..headings.len())
        .map(|i| if i == 0 { "---" } else { "---:" })
        .collect();
    writeln!(out, "| {} |", align.join(" | "))?;
    for row in rows {
        debug_assert_eq!(row.len(), headings.len(), "a cell per heading");
        writeln!(out, "| {} |", row.join(" | "))?;
    }
    Ok(())
}

/// Fails when some series measured nothing (`what` names them): a run with no samples has
/// no figures to report, never a perfect 0. The report is printed first, saying "no samples".
pub fn no_samples(what: &[String], why: &str) -> anyhow::Result<()> {
    if what.is_empty() {
        return Ok(());
    }
    anyhow::bail!("no samples: {} {why}", what.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn microseconds_have_one_decimal() {
        assert_eq!(us(1_260.0), "1.3");
        assert_eq!(us_i(-15_000), "-15.0");
        assert_eq!(us_i(0), "0.0");
    }

    #[test]
    fn series_with_no_samples_fail_the_run_by_name() {
        assert!(no_samples(&[], "measured nothing").is_ok());
        let e = no_samples(
            &["task-switch Fifo".into(), "ipc Other".into()],
            "took no sample within --time-limit 1ms",
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "no samples: task-switch Fifo, ipc Other took no sample within --time-limit 1ms"
        );
    }

    #[test]
    fn json_is_pretty_with_a_newline_and_later_lines_are_indented() {
        let mut out = Vec::new();
        json(&mut out, &serde_json::json!({ "a": 1 })).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "{\n  \"a\": 1\n}\n");
        let mut out = Vec::new();
        write_indented(&mut out, "one\ntwo", 3).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "one\n   two\n");
    }
}
