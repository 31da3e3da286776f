//! Where the simulator's frames come from: a capture file or the built-in traffic generator.
//!
//! The engine pulls one [`Frame`] at a time from a [`FrameSource`]. A frame borrows its bytes
//! from a buffer the source reuses, so pulling a frame allocates nothing; the engine copies
//! what it keeps before it asks for the next one.

use crate::capture::CaptureError;

/// The pcap link type of Ethernet (`LINKTYPE_ETHERNET`), the only one the traffic generator
/// produces.
pub use rtemu_model::wire::link_type::ETHERNET as LINKTYPE_ETHERNET;

/// One frame as it arrives at the simulated link: a capture's frame, whose time is the
/// capture timestamp or the generator's virtual time.
pub use rtemu_capture::Frame;

/// What a [`Progress`] counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressUnit {
    /// Bytes of input read (capture files).
    Bytes,
    /// Nanoseconds of virtual time generated (the traffic generator).
    VirtualNanos,
}

/// How far a source has got, for a progress bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Units done so far.
    pub done: u64,
    /// Units in all, when known (a file's length; a generator's duration).
    pub total: Option<u64>,
    /// What `done` and `total` count.
    pub unit: ProgressUnit,
}

/// Why a source could not produce its next frame.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// The capture file is unreadable, truncated or corrupt.
    #[error(transparent)]
    Capture(#[from] CaptureError),
}

/// A stream of frames in arrival order, pulled by the engine.
pub trait FrameSource {
    /// The pcap link type of every frame (`LINKTYPE_*`, e.g. [`LINKTYPE_ETHERNET`]).
    fn link_type(&self) -> u32;

    /// The next frame, or `None` at the end. The frame borrows the source's buffer, so it
    /// lives until the next call.
    fn next_frame(&mut self) -> Result<Option<Frame<'_>>, SourceError>;

    /// How far the source has got.
    fn progress(&self) -> Progress;
}

impl<S: FrameSource + ?Sized> FrameSource for Box<S> {
    fn link_type(&self) -> u32 {
        (**self).link_type()
    }

    fn next_frame(&mut self) -> Result<Option<Frame<'_>>, SourceError> {
        (**self).next_frame()
    }

    fn progress(&self) -> Progress {
        (**self).progress()
    }
}
