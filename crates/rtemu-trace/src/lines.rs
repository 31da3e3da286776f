//! Text traces read one line at a time: constant memory whatever the file's length, and the
//! line number at hand for every error.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::error::{syntax, TraceError};

/// Read buffer of a text trace: lines are short, so 64 KiB moves many per read syscall.
const BUFFER: usize = 1 << 16;

/// The lines of a text trace, numbered from 1.
#[derive(Debug)]
pub(crate) struct Lines<R> {
    src: BufReader<R>,
    line: String,
    line_no: u64,
    /// The file, named in errors.
    path: Option<PathBuf>,
}

impl Lines<File> {
    /// The lines of the file at `path`; errors name it.
    pub(crate) fn open(path: &Path) -> Result<Self, TraceError> {
        let file = rtemu_sys::input::open(path).map_err(|e| TraceError::from(e).with_path(path))?;
        let mut lines = Lines::new(file);
        lines.path = Some(path.to_owned());
        Ok(lines)
    }
}

impl<R: Read> Lines<R> {
    /// The lines of `src`.
    pub(crate) fn new(src: R) -> Self {
        Lines {
            src: BufReader::with_capacity(BUFFER, src),
            line: String::new(),
            line_no: 0,
            path: None,
        }
    }

    /// The next line's number and text without its line end, or `None` at the end of the
    /// text.
    pub(crate) fn next_line(&mut self) -> Result<Option<(u64, &str)>, TraceError> {
        self.line.clear();
        let read = self.src.read_line(&mut self.line);
        self.line_no += 1;
        match read {
            Ok(0) => Ok(None),
            Ok(_) => Ok(Some((
                self.line_no,
                self.line.trim_end_matches(['\n', '\r']),
            ))),
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                Err(self.named(syntax(self.line_no, 1, "the line is not UTF-8 text")))
            }
            Err(e) => Err(self.named(e.into())),
        }
    }

    /// `e`, naming the file if there is one.
    pub(crate) fn named(&self, e: TraceError) -> TraceError {
        match &self.path {
            Some(p) => e.with_path(p),
            None => e,
        }
    }
}

impl<R: Read + Seek> Lines<R> {
    /// Goes back to the first line.
    pub(crate) fn rewind(&mut self) -> Result<(), TraceError> {
        self.src
            .seek(SeekFrom::Start(0))
            .map_err(|e| self.named(e.into()))?;
        self.line_no = 0;
        Ok(())
    }
}
