//! Errors in a topology file, each pointing at the offending text.

use std::fmt;
use std::ops::Range;

/// A problem in a topology file: where it is and what is allowed instead.
///
/// Its `Display` form is `FILE:LINE:COLUMN: MESSAGE`, the form editors and compilers use, so a
/// terminal or an editor can jump to the spot.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct SpecError {
    /// The file name as the user gave it.
    pub file: String,
    /// 1-based line of the offending text.
    pub line: usize,
    /// 1-based column (in characters) of the offending text.
    pub column: usize,
    /// What is wrong and what is allowed.
    pub message: String,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.column, self.message
        )
    }
}

impl SpecError {
    /// An error at byte offset `span.start` of `source`.
    pub(crate) fn at(file: &str, source: &str, span: Range<usize>, message: String) -> Self {
        let (line, column) = line_column(source, span.start);
        SpecError {
            file: file.to_owned(),
            line,
            column,
            message,
        }
    }
}

/// Errors from loading a topology file.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a valid topology.
    #[error(transparent)]
    Invalid(#[from] SpecError),
}

/// 1-based line and character column of byte `offset` in `source` (clamped to its length and
/// to a character boundary, so no offset panics).
pub fn line_column(source: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(source.len());
    while !source.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &source[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

/// Where each line of a source starts, so the line of a byte offset takes a binary search
/// instead of a count from the top: a large file's validation records many positions.
pub(crate) struct Lines(Vec<usize>);

impl Lines {
    /// The lines of `source`.
    pub(crate) fn new(source: &str) -> Lines {
        let starts = source.match_indices('\n').map(|(i, _)| i + 1);
        Lines(std::iter::once(0).chain(starts).collect())
    }

    /// The 1-based line of byte `offset`, as [`line_column`] gives it.
    pub(crate) fn line(&self, offset: usize) -> usize {
        self.0.partition_point(|&start| start <= offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_index_agrees_with_counting() {
        let src = "ab\n\nc\u{e9}d\n";
        let lines = Lines::new(src);
        for offset in 0..src.len() + 3 {
            if src.is_char_boundary(offset.min(src.len())) {
                assert_eq!(lines.line(offset), line_column(src, offset).0, "{offset}");
            }
        }
    }

    #[test]
    fn line_and_column_count_from_one_in_characters() {
        let src = "a = 1\nbé = 2\n";
        assert_eq!(line_column(src, 0), (1, 1));
        assert_eq!(line_column(src, 6), (2, 1));
        // 'é' is two bytes but one column.
        assert_eq!(line_column(src, 9), (2, 3));
        // Inside a multi-byte character and past the end: clamped, no panic.
        assert_eq!(line_column(src, 8), (2, 2));
        assert_eq!(line_column(src, 1000), (3, 1));
    }
}
