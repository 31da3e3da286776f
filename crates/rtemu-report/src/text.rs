//! The pieces every report shares: times in microseconds, JSON on stdout, key–value
//! summaries, indented text, Markdown tables.

use std::io::{self, Write};

use serde::Serialize;

/// Nanoseconds as microseconds with one decimal, the unit of every lab table.
pub fn us(ns: f64) -> String {
    format!("{:.1}", ns / 1_000.0)
}

/// Nanoseconds as milliseconds with three decimals and the unit, for delays that matter.
pub fn ms(ns: f64) -> String {
    format!("{:.3} ms", ns / 1e6)
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

/// How the cells of a Markdown table's column align.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Text: what a row is.
    Left,
    /// Figures, so their digits line up when rendered.
    Right,
}

/// A Markdown table written row by row, as a benchmark measures them (its rows can be
/// minutes apart, and a reader watching the run sees each when it is done).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Table {
    columns: usize,
}

impl Table {
    /// Writes the heading and alignment rows of a table of `columns` (heading, alignment).
    pub fn start(out: &mut (impl Write + ?Sized), columns: &[(&str, Align)]) -> io::Result<Table> {
        let headings: Vec<&str> = columns.iter().map(|c| c.0).collect();
        let align: Vec<&str> = columns
            .iter()
            .map(|c| match c.1 {
                Align::Left => "---",
                Align::Right => "---:",
            })
            .collect();
        writeln!(out, "| {} |", headings.join(" | "))?;
        writeln!(out, "| {} |", align.join(" | "))?;
        Ok(Table {
            columns: columns.len(),
        })
    }

    /// [`Table::start`] with the first column (what a row is) left and the others right.
    pub fn start_figures(out: &mut (impl Write + ?Sized), headings: &[&str]) -> io::Result<Table> {
        let columns: Vec<(&str, Align)> = headings
            .iter()
            .enumerate()
            .map(|(i, &h)| (h, if i == 0 { Align::Left } else { Align::Right }))
            .collect();
        Table::start(out, &columns)
    }

    /// Writes one row, a cell per column; a row of another width is refused
    /// (`InvalidInput`), never written as a table that no longer parses.
    pub fn row(&self, out: &mut (impl Write + ?Sized), cells: &[String]) -> io::Result<()> {
        if cells.len() != self.columns {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "a table row of {} cells where the table has {} columns",
                    cells.len(),
                    self.columns
                ),
            ));
        }
        writeln!(out, "| {} |", cells.join(" | "))
    }
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
    let table = Table::start_figures(out, headings)?;
    for row in rows {
        table.row(out, &row)?;
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
    fn a_table_says_each_columns_alignment_and_refuses_a_row_of_another_width() {
        let mut out = Vec::new();
        let t = Table::start(&mut out, &[("load", Align::Left), ("p99 µs", Align::Right)]).unwrap();
        t.row(&mut out, &["idle".into(), "18.6".into()]).unwrap();
        let e = t.row(&mut out, &["idle".into()]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(
            e.to_string(),
            "a table row of 1 cells where the table has 2 columns"
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "| load | p99 µs |\n| --- | ---: |\n| idle | 18.6 |\n"
        );
        let mut out = Vec::new();
        Table::start_figures(&mut out, &["a", "b", "c"]).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "| a | b | c |\n| --- | ---: | ---: |\n"
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
