//! Reading action traces of any length, in any of the three forms, in blocks.
//!
//! [`RecordReader`] reads from any [`Read`] through a buffer of a size the caller picks; the
//! records it gives do not depend on that size (tests check 1 byte, 7 bytes, 64 KiB and a
//! whole-file read). Memory use is the buffer plus one text line, whatever the trace length.
//! [`crate::prefetch`] runs one on its own thread.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::action::{decode_word, Action, TimeUnit};
use crate::error::{syntax, ErrorKind, TraceError};
use crate::format::{Format, Header};
use crate::readahead::BlockSource;
use crate::text;

/// Default read buffer: large enough that a read syscall moves 1 MiB.
pub const DEFAULT_BUFFER: usize = 1 << 20;

/// A streaming reader of action records.
#[derive(Debug)]
pub struct RecordReader<R> {
    src: BufReader<R>,
    format: Format,
    header: Option<Header>,
    unit: TimeUnit,
    /// Byte offset where records start (the header length).
    data_start: u64,
    /// Index of the next record.
    index: u64,
    /// Byte offset of the next word (binary forms).
    offset: u64,
    carry: [u8; 4],
    carry_len: usize,
    /// Text forms: the line buffer, reused, and the number of the last line read.
    line: String,
    line_no: u64,
    /// The file, named in errors.
    path: Option<PathBuf>,
    /// Room for the one record [`RecordReader::next_record`] reads.
    scratch: Vec<Action>,
}

impl RecordReader<File> {
    /// Opens `path`; the form is `format` if given, else [`Format::detect`]ed. Errors name the
    /// path.
    pub fn open(path: &Path, format: Option<Format>) -> Result<Self, TraceError> {
        Self::open_with(path, format, DEFAULT_BUFFER)
    }

    /// As [`RecordReader::open`], with a read buffer of `buffer_size` bytes.
    pub fn open_with(
        path: &Path,
        format: Option<Format>,
        buffer_size: usize,
    ) -> Result<Self, TraceError> {
        let at = |e: TraceError| e.with_path(path);
        let mut file = rtemu_sys::input::open(path).map_err(|e| at(e.into()))?;
        let format = match format {
            Some(f) => f,
            None => {
                let mut head = Vec::with_capacity(512);
                (&mut file)
                    .take(512)
                    .read_to_end(&mut head)
                    .map_err(|e| at(e.into()))?;
                file.seek(SeekFrom::Start(0)).map_err(|e| at(e.into()))?;
                Format::detect(path, &head)
            }
        };
        let mut r = Self::new(file, format, buffer_size).map_err(at)?;
        r.path = Some(path.to_owned());
        Ok(r)
    }
}

impl<R: Read> RecordReader<R> {
    /// A reader of `src` in the given form, reading `buffer_size` bytes at a time (at least 1).
    /// The framed form's header is read here.
    pub fn new(src: R, format: Format, buffer_size: usize) -> Result<Self, TraceError> {
        let mut src = BufReader::with_capacity(buffer_size.max(1), src);
        let (header, data_start) = match format {
            Format::Framed => {
                let (h, len) = Header::read(&mut src)?;
                (Some(h), len)
            }
            _ => (None, 0),
        };
        let unit = header.as_ref().map_or(TimeUnit::Us, |h| h.unit);
        Ok(RecordReader {
            src,
            format,
            header,
            unit,
            data_start,
            index: 0,
            offset: data_start,
            carry: [0; 4],
            carry_len: 0,
            line: String::new(),
            line_no: 0,
            scratch: Vec::with_capacity(1),
            path: None,
        })
    }

    /// The form being read.
    pub fn format(&self) -> Format {
        self.format
    }

    /// The header, for the framed form.
    pub fn header(&self) -> Option<&Header> {
        self.header.as_ref()
    }

    /// Records read so far (the index of the next one).
    pub fn records_read(&self) -> u64 {
        self.index
    }

    /// Appends up to `max` records to `out`; returns how many, 0 only at the end of the trace.
    /// Does not allocate when `out` has room for `max` more.
    pub fn read_block(&mut self, out: &mut Vec<Action>, max: usize) -> Result<usize, TraceError> {
        let r = match self.format {
            Format::Raw | Format::Framed => self.read_words(out, max),
            Format::Text => self.read_lines(out, max),
        };
        r.map_err(|e| match &self.path {
            Some(p) => e.with_path(p),
            None => e,
        })
    }

    fn read_words(&mut self, out: &mut Vec<Action>, max: usize) -> Result<usize, TraceError> {
        let unit = self.unit;
        let mut n = 0;
        while n < max {
            let buf = self.src.fill_buf()?;
            if buf.is_empty() {
                if self.carry_len > 0 {
                    return Err(TraceError::new(ErrorKind::TruncatedWord {
                        offset: self.offset,
                        len: self.carry_len,
                        index: self.index,
                    }));
                }
                break;
            }
            let mut used = 0;
            if self.carry_len > 0 {
                let take = (4 - self.carry_len).min(buf.len());
                self.carry[self.carry_len..self.carry_len + take].copy_from_slice(&buf[..take]);
                self.carry_len += take;
                used = take;
                if self.carry_len < 4 {
                    self.src.consume(used);
                    continue;
                }
                self.carry_len = 0;
                let word = u32::from_be_bytes(self.carry);
                out.push(decode(word, unit, self.index, self.offset)?);
                self.index += 1;
                self.offset += 4;
                n += 1;
            }
            let rest = &buf[used..];
            let words = (rest.len() / 4).min(max - n);
            let mut index = self.index;
            for chunk in rest[..words * 4].chunks_exact(4) {
                let word = u32::from_be_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
                match decode(word, unit, index, self.offset + (index - self.index) * 4) {
                    Ok(a) => out.push(a),
                    Err(e) => return Err(e),
                }
                index += 1;
            }
            self.offset += (index - self.index) * 4;
            self.index = index;
            n += words;
            used += words * 4;
            let tail = rest.len() - words * 4;
            if tail < 4 {
                // A word cut by the buffer's end waits in `carry` for the next fill.
                self.carry[..tail].copy_from_slice(&rest[words * 4..]);
                self.carry_len = tail;
                used += tail;
            }
            self.src.consume(used);
        }
        Ok(n)
    }

    fn read_lines(&mut self, out: &mut Vec<Action>, max: usize) -> Result<usize, TraceError> {
        let mut n = 0;
        while n < max {
            self.line.clear();
            let read = self.src.read_line(&mut self.line);
            self.line_no += 1;
            match read {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                    return Err(syntax(self.line_no, 1, "the line is not UTF-8 text"));
                }
                Err(e) => return Err(e.into()),
            }
            let line = self.line.trim_end_matches(['\n', '\r']);
            if let Some(a) = text::parse_line(line, self.line_no)? {
                out.push(a);
                self.index += 1;
                n += 1;
            }
        }
        Ok(n)
    }

    /// Feeds every remaining record to `f`, read in blocks, stopping at `f`'s first error.
    pub fn for_each_record<E: From<TraceError>>(
        &mut self,
        mut f: impl FnMut(Action) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut block = Vec::with_capacity(1 << 16);
        loop {
            block.clear();
            if self.read_block(&mut block, 1 << 16)? == 0 {
                return Ok(());
            }
            for &a in &block {
                f(a)?;
            }
        }
    }

    /// The next record, or `None` at the end. For bulk reading use [`read_block`].
    ///
    /// [`read_block`]: RecordReader::read_block
    pub fn next_record(&mut self) -> Result<Option<Action>, TraceError> {
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        let r = self.read_block(&mut scratch, 1);
        let a = scratch.first().copied();
        self.scratch = scratch;
        r.map(|_| a)
    }
}

impl<R: Read + Seek> RecordReader<R> {
    /// Goes back to the first record (after the header), for `end = loop`.
    pub fn rewind(&mut self) -> Result<(), TraceError> {
        if let Err(e) = self.src.seek(SeekFrom::Start(self.data_start)) {
            let e = TraceError::from(e);
            return Err(match &self.path {
                Some(p) => e.with_path(p),
                None => e,
            });
        }
        self.index = 0;
        self.offset = self.data_start;
        self.carry_len = 0;
        self.line_no = 0;
        Ok(())
    }
}

/// The reader under a [`crate::prefetch::Prefetcher`].
impl<R: Read + Seek + Send + 'static> BlockSource for RecordReader<R> {
    type Item = Action;

    fn read_block(&mut self, out: &mut Vec<Action>, max: usize) -> Result<usize, TraceError> {
        RecordReader::read_block(self, out, max)
    }

    fn rewind(&mut self) -> Result<(), TraceError> {
        RecordReader::rewind(self)
    }
}

impl<R: Read> Iterator for RecordReader<R> {
    type Item = Result<Action, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_record().transpose()
    }
}

#[inline]
fn decode(word: u32, unit: TimeUnit, index: u64, offset: u64) -> Result<Action, TraceError> {
    decode_word(word, unit).map_err(|_| {
        TraceError::new(ErrorKind::ReservedAction {
            index,
            offset,
            word,
        })
    })
}

/// Reads a whole trace into memory: for tests, small traces and conversions that need it.
pub fn read_all(
    src: impl Read,
    format: Format,
) -> Result<(Option<Header>, Vec<Action>), TraceError> {
    let mut r = RecordReader::new(src, format, DEFAULT_BUFFER)?;
    let mut out = Vec::new();
    while r.read_block(&mut out, 1 << 16)? > 0 {}
    Ok((r.header, out))
}
