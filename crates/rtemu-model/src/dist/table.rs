//! Delay distribution tables in iproute2's `.dist` format.
//!
//! A table is the inverse CDF of a standardised distribution sampled at equally spaced
//! probabilities: entry `i` of `n` is `8192 · F⁻¹(p)` for `p` in the `i`-th of `n` equal
//! slices of `(0, 1)`, written as whitespace-separated decimal integers in the `i16` range.
//! `#` starts a comment that runs to the end of the line. iproute2 ships `normal.dist`,
//! `pareto.dist`, `paretonormal.dist` and `experimental.dist` in `/usr/lib/*/tc/`, and its
//! `maketable` builds one from measured delays.
//!
//! rtemu reads the format more strictly than `tc`, which stops reading a line at the first
//! word that is not a number and silently truncates values outside the `i16` range: here
//! both are errors with their line and column. `tc` also reads hexadecimal and octal
//! (`strtol` base 0); rtemu reads decimal only, which is what every shipped table uses. A
//! table may have any number of entries (the kernel takes at most 16384).

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// The scale of table entries: an entry `t` stands for `t / 8192` standard deviations
/// (`NETEM_DIST_SCALE` in the kernel's `pkt_sched.h`).
pub const DIST_SCALE: f64 = 8192.0;

/// A delay distribution table: a name (for messages) and its entries. Cloning is cheap: the
/// entries are shared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "TableRepr", into = "TableRepr")]
pub struct DistTable {
    name: Arc<str>,
    /// Shared with the samplers built from this table.
    pub(super) values: Arc<[i16]>,
}

/// Why a table could not be read: where, and what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name}:{line}:{column}: {kind}")]
pub struct TableError {
    /// The table's name, as given to [`DistTable::parse`] (usually its path).
    pub name: String,
    /// 1-based line of the problem.
    pub line: usize,
    /// 1-based column (in characters) of the problem.
    pub column: usize,
    /// What was wrong.
    pub kind: TableErrorKind,
}

/// What was wrong with a table. It never quotes the file: a table may be named by any path,
/// and rtemu may run as root, so an error must not show a file the user could not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TableErrorKind {
    /// A word that is not a decimal integer.
    #[error("expected a decimal integer between -32768 and 32767, found a word that is not one")]
    NotAnInteger,
    /// An integer outside the `i16` range the kernel's tables use.
    #[error("expected a decimal integer between -32768 and 32767, found one outside that range")]
    OutOfRange,
    /// No values at all (only blanks and comments).
    #[error("the table has no values (expected whitespace-separated integers)")]
    Empty,
}

impl DistTable {
    /// Reads a table from the text of a `.dist` file. `name` is only used in error messages
    /// and [`DistTable::name`].
    pub fn parse(name: &str, text: &str) -> Result<Self, TableError> {
        let error = |line: usize, column: usize, kind| TableError {
            name: name.to_owned(),
            line,
            column,
            kind,
        };
        let mut values = Vec::new();
        let mut last_line = (1, 1);
        for (index, full_line) in text.lines().enumerate() {
            let line_no = index + 1;
            last_line = (line_no, full_line.chars().count() + 1);
            let content = full_line.split('#').next().unwrap_or("");
            let mut rest = content;
            while let Some(start) = rest.find(|c: char| !c.is_whitespace()) {
                let word_and_tail = &rest[start..];
                let end = word_and_tail
                    .find(char::is_whitespace)
                    .unwrap_or(word_and_tail.len());
                let word = &word_and_tail[..end];
                let byte_offset = content.len() - word_and_tail.len();
                let column = content[..byte_offset].chars().count() + 1;
                values.push(parse_entry(word).map_err(|kind| error(line_no, column, kind))?);
                rest = &word_and_tail[end..];
            }
        }
        if values.is_empty() {
            return Err(error(last_line.0, last_line.1, TableErrorKind::Empty));
        }
        Ok(DistTable {
            name: name.into(),
            values: values.into(),
        })
    }

    /// The name given at parse time.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The entries, in units of `1/8192` standard deviation.
    pub fn values(&self) -> &[i16] {
        &self.values
    }
}

/// One entry: an optional sign and decimal digits, within `i16`.
fn parse_entry(word: &str) -> Result<i16, TableErrorKind> {
    let digits = word.strip_prefix(['+', '-']).unwrap_or(word);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(TableErrorKind::NotAnInteger);
    }
    word.parse().map_err(|_| TableErrorKind::OutOfRange)
}

impl fmt::Display for DistTable {
    /// Writes the table back in `.dist` form, eight entries a line as iproute2 does.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Every line of the name is a comment, so any name reads back.
        for line in self.name.lines() {
            writeln!(f, "# {line}")?;
        }
        for chunk in self.values.chunks(8) {
            for v in chunk {
                write!(f, " {v}")?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

/// The structured (TOML/JSON) form of a table.
#[derive(Serialize, Deserialize)]
struct TableRepr {
    name: String,
    values: Vec<i16>,
}

/// A structured table with no values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the distribution table has no values")]
pub struct EmptyTable;

impl TryFrom<TableRepr> for DistTable {
    type Error = EmptyTable;
    fn try_from(repr: TableRepr) -> Result<Self, EmptyTable> {
        if repr.values.is_empty() {
            return Err(EmptyTable);
        }
        Ok(DistTable {
            name: repr.name.into(),
            values: repr.values.into(),
        })
    }
}

impl From<DistTable> for TableRepr {
    fn from(table: DistTable) -> Self {
        TableRepr {
            name: table.name.to_string(),
            values: table.values.to_vec(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn err(text: &str) -> TableError {
        DistTable::parse("t.dist", text).unwrap_err()
    }

    #[test]
    fn reads_values_comments_and_blank_lines() {
        let t = DistTable::parse(
            "t.dist",
            "# header\n -3 +4 5\n\n  6 # tail 7\n\t-32768 32767\n",
        )
        .unwrap();
        assert_eq!(t.values(), &[-3, 4, 5, 6, -32768, 32767]);
        assert_eq!(t.name(), "t.dist");
    }

    #[test]
    fn bad_word_is_reported_with_line_and_column() {
        let e = err("1 2\n 3 x4 5\n");
        assert_eq!((e.line, e.column), (2, 4));
        assert_eq!(e.kind, TableErrorKind::NotAnInteger);
        assert_eq!(
            e.to_string(),
            "t.dist:2:4: expected a decimal integer between -32768 and 32767, found a word that is not one"
        );
        // The file's words never appear in an error.
        let e = err("# hunter2\n1 2\nroot:hunter2:19000:0:99999:7:::\n").to_string();
        assert!(
            e.starts_with("t.dist:3:1: expected a decimal integer"),
            "{e}"
        );
        assert!(!e.contains("hunter2") && !e.contains("root"), "{e}");
        assert_eq!(err("- 1").kind, TableErrorKind::NotAnInteger);
        assert_eq!(err("1.5").kind, TableErrorKind::NotAnInteger);
        assert_eq!(err("0x10").kind, TableErrorKind::NotAnInteger);
    }

    #[test]
    fn columns_count_characters_not_bytes() {
        let e = err("1 # é\nµ 2 é\n");
        assert_eq!((e.line, e.column), (2, 1));
        let e = err("2 é\n");
        assert_eq!((e.line, e.column), (1, 3));
        let e = err("µ2 3 é");
        assert_eq!(e.column, 1);
        let e = err("3 µ é");
        assert_eq!(e.column, 3);
    }

    #[test]
    fn out_of_range_values_are_errors() {
        let e = err("0\n  32768");
        assert_eq!((e.line, e.column), (2, 3));
        assert_eq!(e.kind, TableErrorKind::OutOfRange);
        assert_eq!(err("-32769").kind, TableErrorKind::OutOfRange);
        assert_eq!(
            err("99999999999999999999999").kind,
            TableErrorKind::OutOfRange
        );
    }

    #[test]
    fn empty_table_is_an_error() {
        let e = err("# nothing\n\n   # here\n");
        assert_eq!(e.kind, TableErrorKind::Empty);
        assert_eq!(e.line, 3);
        assert_eq!(err("").kind, TableErrorKind::Empty);
    }

    #[test]
    fn serde_round_trip_and_empty_rejected() {
        let t = DistTable::parse("x", "1 2 3").unwrap();
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(json, r#"{"name":"x","values":[1,2,3]}"#);
        assert_eq!(serde_json::from_str::<DistTable>(&json).unwrap(), t);
        assert!(serde_json::from_str::<DistTable>(r#"{"name":"x","values":[]}"#).is_err());
        assert!(serde_json::from_str::<DistTable>(r#"{"name":"x","values":[40000]}"#).is_err());
    }

    proptest! {
        /// Writing a table and reading it back gives the same entries.
        #[test]
        fn display_round_trips(
            name in "[ -~\n]{0,40}",
            values in prop::collection::vec(any::<i16>(), 1..100),
        ) {
            let t = DistTable { name: name.into(), values: values.into() };
            let back = DistTable::parse("p", &t.to_string()).unwrap();
            prop_assert_eq!(back.values(), t.values());
        }

        /// Arbitrary text never panics the parser, and an error points inside the text.
        #[test]
        fn arbitrary_text_never_panics(text in "[ -~\t\n#éµ]{0,200}") {
            if let Err(e) = DistTable::parse("p", &text) {
                let lines = text.lines().count().max(1);
                prop_assert!(e.line >= 1 && e.line <= lines);
                prop_assert!(e.column >= 1);
            }
        }
    }
}
