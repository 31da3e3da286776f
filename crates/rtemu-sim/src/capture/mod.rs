//! Packet captures: the streaming pcap and pcapng reader is `rtemu-capture`'s (re-exported
//! here), read as a [`FrameSource`]; the simulator's output is nanosecond pcap
//! ([`PcapWriter`], magic `0xa1b23c4d`), always little-endian, so the same frames give the
//! same bytes on every host.

mod writer;

pub use rtemu_capture::{CaptureError, CaptureReader, Options, MAX_FRAME_LEN};
pub use writer::{PcapWriter, WriteError};

use std::io::Read;

use crate::source::{Frame, FrameSource, Progress, ProgressUnit, SourceError};

impl<R: Read> FrameSource for CaptureReader<R> {
    fn link_type(&self) -> u32 {
        // Only a reader opened with `Options::interfaceless` may lack one, and its capture
        // then holds no frame to which a link type could apply.
        CaptureReader::link_type(self).unwrap_or_default()
    }

    fn next_frame(&mut self) -> Result<Option<Frame<'_>>, SourceError> {
        Ok(CaptureReader::next_frame(self)?)
    }

    fn progress(&self) -> Progress {
        Progress {
            done: self.offset(),
            total: self.total_len(),
            unit: ProgressUnit::Bytes,
        }
    }
}
