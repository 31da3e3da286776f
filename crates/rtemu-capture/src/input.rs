//! A buffered input that counts the bytes it has consumed, so that every error can say where
//! it happened.
//!
//! Records that lie whole in the buffer are parsed in place and lent out from it
//! ([`Input::take`], [`Input::taken`]) without a copy; the buffer is released at the next
//! call. Records that straddle the buffer's end are copied piece by piece (`read_*`).

use std::io::{self, BufRead, BufReader, Read};

use super::CaptureError;

/// A buffered reader and the offset of its next byte.
#[derive(Debug)]
pub(super) struct Input<R> {
    inner: BufReader<R>,
    offset: u64,
    /// Bytes taken in place but still in the buffer, lent out until the next call.
    taken: usize,
}

impl<R: Read> Input<R> {
    pub(super) fn new(inner: BufReader<R>) -> Self {
        Input {
            inner,
            offset: 0,
            taken: 0,
        }
    }

    /// The offset of the next byte.
    pub(super) fn offset(&self) -> u64 {
        self.offset
    }

    /// Releases the bytes lent by the last [`Input::take`].
    fn release(&mut self) {
        self.inner.consume(std::mem::take(&mut self.taken));
    }

    /// The bytes in the buffer, reading more only when it is empty. Fewer bytes than a record
    /// needs do not mean the input ends: use the `read_*` methods then.
    pub(super) fn buffered(&mut self) -> Result<&[u8], CaptureError> {
        self.release();
        loop {
            match self.inner.fill_buf() {
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(source) => {
                    return Err(CaptureError::Io {
                        offset: self.offset,
                        source,
                    })
                }
            }
        }
        Ok(self.inner.buffer())
    }

    /// Consumes the first `n` bytes of [`Input::buffered`], which stay readable through
    /// [`Input::taken`] until the next call.
    pub(super) fn take(&mut self, n: usize) {
        self.taken = n;
        self.offset += n as u64;
    }

    /// The bytes consumed by the last [`Input::take`].
    pub(super) fn taken(&self) -> &[u8] {
        &self.inner.buffer()[..self.taken]
    }

    /// Fills as much of `buf` as the input holds; fewer bytes only at the end of the input.
    fn read_up_to(&mut self, buf: &mut [u8]) -> Result<usize, CaptureError> {
        self.release();
        let mut n = 0;
        while n < buf.len() {
            match self.inner.read(&mut buf[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(source) => {
                    return Err(CaptureError::Io {
                        offset: self.offset + n as u64,
                        source,
                    });
                }
            }
        }
        self.offset += n as u64;
        Ok(n)
    }

    /// Fills `buf`, a part of `what` (which starts at `start`) whose length is as `length`
    /// says; an input that ends first is the error that says so.
    pub(super) fn read_exact(
        &mut self,
        buf: &mut [u8],
        what: &'static str,
        start: u64,
        length: Length,
    ) -> Result<(), CaptureError> {
        let n = self.read_up_to(buf)?;
        if n < buf.len() {
            return Err(length.cut(what, start, buf.len() as u64, n as u64, self.offset));
        }
        Ok(())
    }

    /// Fills `buf` with the fixed-size header of the next record or block, `what`; `false`
    /// when the input ends cleanly before it, as a capture ends.
    pub(super) fn read_header(
        &mut self,
        buf: &mut [u8],
        what: &'static str,
    ) -> Result<bool, CaptureError> {
        let start = self.offset;
        let n = self.read_up_to(buf)?;
        if n == 0 {
            return Ok(false);
        }
        if n < buf.len() {
            let cut = Length::Fixed.cut(what, start, buf.len() as u64, n as u64, self.offset);
            return Err(cut);
        }
        Ok(true)
    }

    /// Skips `len` bytes that the header of `what` (at `start`) declared, without buffering
    /// them.
    pub(super) fn skip(
        &mut self,
        len: u64,
        what: &'static str,
        start: u64,
    ) -> Result<(), CaptureError> {
        // Padding and short options are skipped on every packet: read them through the buffer.
        let mut small = [0u8; 64];
        if let Some(small) = small.get_mut(..len as usize) {
            return self.read_exact(small, what, start, Length::Declared);
        }
        self.release();
        let skipped =
            io::copy(&mut (&mut self.inner).take(len), &mut io::sink()).map_err(|source| {
                CaptureError::Io {
                    offset: self.offset,
                    source,
                }
            })?;
        self.offset += skipped;
        if skipped < len {
            return Err(Length::Declared.cut(what, start, len, skipped, self.offset));
        }
        Ok(())
    }
}

/// How the length of a read is known, which says what an input that ends before it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Length {
    /// The format fixes it: the structure is cut short ([`CaptureError::Truncated`], which
    /// counts the whole structure from its start).
    Fixed,
    /// A header declared it: the record's data is cut short
    /// ([`CaptureError::TruncatedData`], which counts the declared data alone).
    Declared,
}

impl Length {
    /// The error of a read of `wanted` bytes of `what` (which starts at `start`) that got
    /// `got` before the input ended at `end`.
    fn cut(self, what: &'static str, start: u64, wanted: u64, got: u64, end: u64) -> CaptureError {
        match self {
            Length::Fixed => CaptureError::Truncated {
                what,
                offset: start,
                // What of the structure came before this read, and this read.
                expected: end - got - start + wanted,
                remain: end - start,
            },
            Length::Declared => CaptureError::TruncatedData {
                what,
                offset: start,
                declared: wanted,
                remain: got,
            },
        }
    }
}
