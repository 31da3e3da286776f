//! A buffered input that counts the bytes it has consumed, so that every error can say where
//! it happened.

use std::io::{self, BufReader, Read};

use super::CaptureError;

/// A buffered reader and the offset of its next byte.
#[derive(Debug)]
pub(super) struct Input<R> {
    inner: BufReader<R>,
    offset: u64,
}

impl<R: Read> Input<R> {
    pub(super) fn new(inner: BufReader<R>) -> Self {
        Input { inner, offset: 0 }
    }

    /// The offset of the next byte.
    pub(super) fn offset(&self) -> u64 {
        self.offset
    }

    /// Fills as much of `buf` as the input holds; fewer bytes only at the end of the input.
    pub(super) fn read_up_to(&mut self, buf: &mut [u8]) -> Result<usize, CaptureError> {
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
