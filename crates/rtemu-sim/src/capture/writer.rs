//! A buffered writer of nanosecond pcap.

use std::io::{self, BufWriter, Write};

use super::MAX_FRAME_LEN;
use crate::source::Frame;

/// Why a frame could not be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// Writing failed.
    #[error("write error: {0}")]
    Io(#[from] io::Error),
    /// pcap stores seconds in 32 bits: the last representable instant is in 2106.
    #[error("timestamp {ts_ns} ns is beyond pcap's range (seconds must fit 32 bits, i.e. before 2106-02-07)")]
    TimestampOutOfRange {
        /// The timestamp given.
        ts_ns: u64,
    },
    /// The frame is longer than a reader would accept.
    #[error("frame of {len} bytes exceeds the maximum of {MAX_FRAME_LEN}")]
    FrameTooLong {
        /// The frame's length.
        len: usize,
    },
}

/// Writes frames as a nanosecond-resolution pcap file (magic `0xa1b23c4d`), little-endian,
/// with a snap length of [`MAX_FRAME_LEN`].
///
/// Output is buffered: call [`PcapWriter::finish`] to flush it and see any error.
#[derive(Debug)]
pub struct PcapWriter<W: Write> {
    out: BufWriter<W>,
}

impl<W: Write> PcapWriter<W> {
    /// Writes the file header for frames of `link_type` (`LINKTYPE_*`, e.g. the input's).
    pub fn new(out: W, link_type: u32) -> Result<Self, WriteError> {
        let mut out = BufWriter::with_capacity(256 * 1024, out);
        let mut h = [0u8; 24];
        h[0..4].copy_from_slice(&0xa1b2_3c4du32.to_le_bytes());
        h[4..6].copy_from_slice(&2u16.to_le_bytes());
        h[6..8].copy_from_slice(&4u16.to_le_bytes());
        // thiszone and sigfigs stay 0.
        h[16..20].copy_from_slice(&MAX_FRAME_LEN.to_le_bytes());
        h[20..24].copy_from_slice(&link_type.to_le_bytes());
        out.write_all(&h)?;
        Ok(PcapWriter { out })
    }

    /// Writes one frame stamped `ts_ns` (nanoseconds since 1970). `orig_len` is the length on
    /// the wire; it is raised to `data.len()` if smaller, as pcap requires.
    pub fn write_packet(
        &mut self,
        ts_ns: u64,
        data: &[u8],
        orig_len: u32,
    ) -> Result<(), WriteError> {
        let secs = u32::try_from(ts_ns / 1_000_000_000)
            .map_err(|_| WriteError::TimestampOutOfRange { ts_ns })?;
        let nanos = (ts_ns % 1_000_000_000) as u32;
        if data.len() > MAX_FRAME_LEN as usize {
            return Err(WriteError::FrameTooLong { len: data.len() });
        }
        let caplen = data.len() as u32;
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&secs.to_le_bytes());
        h[4..8].copy_from_slice(&nanos.to_le_bytes());
        h[8..12].copy_from_slice(&caplen.to_le_bytes());
        h[12..16].copy_from_slice(&orig_len.max(caplen).to_le_bytes());
        self.out.write_all(&h)?;
        self.out.write_all(data)?;
        Ok(())
    }

    /// Writes `frame` at its own timestamp.
    pub fn write_frame(&mut self, frame: &Frame<'_>) -> Result<(), WriteError> {
        self.write_packet(frame.ts_ns, frame.data, frame.orig_len)
    }

    /// Flushes the buffer and returns the underlying writer.
    pub fn finish(self) -> Result<W, WriteError> {
        self.out
            .into_inner()
            .map_err(|e| WriteError::Io(e.into_error()))
    }
}

/// A pcap written as a simulation's output: every delivered frame, stamped with its delivery
/// time.
impl<W: Write> crate::engine::FrameSink for PcapWriter<W> {
    fn deliver(&mut self, ts_ns: u64, data: &[u8], orig_len: u32) -> io::Result<()> {
        self.write_packet(ts_ns, data, orig_len)
            .map_err(io::Error::other)
    }
}
