//! Errors from reading and writing traces. Each names what was wrong and where: the file (when
//! known), and the record index and byte offset, or the line and column.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use crate::action::EncodeError;

/// What went wrong, without the file name (see [`TraceError`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Reading or writing failed.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// A word holds the reserved action code `11`.
    #[error("record {index} at byte {offset}: reserved action code 11 in word {word:#010x} (valid codes: 00 drop, 01 pass, 10 duplicate)")]
    ReservedAction {
        /// Index of the record, from 0.
        index: u64,
        /// Byte offset of the word in the file.
        offset: u64,
        /// The word as read.
        word: u32,
    },
    /// The binary data ends in the middle of a word.
    #[error("{len} stray byte(s) at byte {offset} after record {index}: binary traces hold whole 4-byte words, so the data length must be a multiple of 4")]
    TruncatedWord {
        /// Byte offset of the partial word.
        offset: u64,
        /// How many bytes of it there are.
        len: usize,
        /// Index the partial record would have had.
        index: u64,
    },
    /// A text trace or series has a syntax error.
    #[error("line {line}, column {column}: {message}")]
    Syntax {
        /// Line number, from 1.
        line: u64,
        /// Column (in characters), from 1.
        column: u64,
        /// What was expected.
        message: String,
    },
    /// The self-describing header cannot be read.
    #[error("bad header: {0}")]
    Header(String),
    /// The trace holds no records, so it cannot drive a link.
    #[error("the trace holds no records")]
    Empty,
    /// Every record is a `dup`, so under `end = loop` no packet's cascade would ever end.
    #[error(
        "all {records} records are `dup`: each says a copy follows, so looping the trace (end \
         policy `loop`) would never end a packet's fate (rtemu would cut each cascade at {max} \
         records); add a `pass` or `drop` record, or choose the end policy `stop` or `pass`"
    )]
    NoPacketEnd {
        /// Records in the trace.
        records: u64,
        /// The most records one packet's fate may take.
        max: u32,
    },
    /// A record cannot be written in the chosen form.
    #[error("record {index}: {source}")]
    Encode {
        /// Index of the record, from 0.
        index: u64,
        /// Why it cannot be written.
        source: EncodeError,
    },
}

/// An error from a trace reader or writer, with the file it concerns when there is one.
#[derive(Debug)]
pub struct TraceError {
    path: Option<PathBuf>,
    kind: ErrorKind,
}

impl TraceError {
    /// An error about no particular file.
    pub fn new(kind: impl Into<ErrorKind>) -> Self {
        TraceError {
            path: None,
            kind: kind.into(),
        }
    }

    /// The same error, naming `path` (unless it already names a file).
    pub fn with_path(mut self, path: &Path) -> Self {
        if self.path.is_none() {
            self.path = Some(path.to_owned());
        }
        self
    }

    /// What went wrong.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    /// The file concerned, if known.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }
}

impl From<ErrorKind> for TraceError {
    fn from(kind: ErrorKind) -> Self {
        TraceError::new(kind)
    }
}

impl From<io::Error> for TraceError {
    fn from(e: io::Error) -> Self {
        TraceError::new(ErrorKind::Io(e))
    }
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.path {
            Some(p) => write!(f, "{}: {}", p.display(), self.kind),
            None => write!(f, "{}", self.kind),
        }
    }
}

// The kind's message already includes any underlying error, so no `source` is given; a
// chain printer would otherwise repeat it.
impl std::error::Error for TraceError {}

/// Shorthand for a syntax error.
pub(crate) fn syntax(line: u64, column: u64, message: impl Into<String>) -> TraceError {
    TraceError::new(ErrorKind::Syntax {
        line,
        column,
        message: message.into(),
    })
}
