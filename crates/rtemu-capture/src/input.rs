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
    pub(super) fn read_up_to(&mut self, buf: &mut [u8]) -> Result<usize, CaptureError> {
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

    /// Fills `buf`, the fixed-size structure `what` that starts at `start`.
    pub(super) fn read_exact(
        &mut self,
        buf: &mut [u8],
        what: &'static str,
        start: u64,
    ) -> Result<(), CaptureError> {
        let n = self.read_up_to(buf)?;
        if n < buf.len() {
            let expected = buf.len() as u64 + (self.offset - n as u64 - start);
            let remain = self.offset - start;
            return Err(CaptureError::Truncated {
                what,
                offset: start,
                expected,
                remain,
            });
        }
        Ok(())
    }

    /// Fills `buf` with data whose length the header of `what` (at `start`) declared.
    pub(super) fn read_data(
        &mut self,
        buf: &mut [u8],
        what: &'static str,
        start: u64,
    ) -> Result<(), CaptureError> {
        let n = self.read_up_to(buf)?;
        if n < buf.len() {
            return Err(CaptureError::TruncatedData {
                what,
                offset: start,
                declared: buf.len() as u64,
                remain: n as u64,
            });
        }
        Ok(())
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
            return self.read_data(small, what, start);
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
            return Err(CaptureError::TruncatedData {
                what,
                offset: start,
                declared: len,
                remain: skipped,
            });
        }
        Ok(())
    }
}
