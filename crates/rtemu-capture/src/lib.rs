//! rtemu's packet captures: one streaming reader of pcap and pcapng, and the pcapng writer of
//! the lab's captures.
//!
//! [`CaptureReader`] reads either format from any [`Read`], recognised by its first bytes, one
//! record at a time into one reused buffer: memory stays constant however long the file is.
//! Every error on a truncated or corrupt file names the byte offset of the record (or block)
//! at fault and what was expected there. A record longer than [`MAX_FRAME_LEN`] is an error,
//! not an allocation of whatever size a corrupt header claims. Each [`Packet`] carries its
//! interface (index and `if_name`) and its `epb_flags`, so a capture of several interfaces
//! reads back whole; [`Options`] lets a reader take a capture stream stopped mid-block, a
//! section that declares no interface, or a file's sections' interfaces numbered as one list.
//!
//! The parsers are written here rather than taken from the `pcap-file` crate: its errors carry
//! no byte offset, its readers grow their buffer to whatever length a record header claims,
//! and its 3.0 line (which reworks errors) is still a release candidate. The formats are small
//! and stable: pcap as in `pcap-savefile(5)`, pcapng as in draft-ietf-opsawg-pcapng.
//!
//! [`PcapngWriter`] writes the lab's captures: several named interfaces stamped in nanoseconds
//! from one clock, each packet with its direction.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod input;
mod pcap;
mod pcapng;
mod writer;

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::ops::Range;
use std::path::Path;

use input::{Input, Length};
pub use writer::{Direction, PcapngWriter};

/// The longest frame a capture may hold, in bytes: 256 KiB, the largest snap length tcpdump
/// and Wireshark use. A record claiming more is reported as corrupt.
pub const MAX_FRAME_LEN: u32 = 262_144;

/// Why a capture could not be read. Offsets count bytes from the start of the input.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CaptureError {
    /// The file could not be opened or its length read.
    #[error("cannot open {path}: {source}")]
    Open {
        /// The path as given.
        path: String,
        /// What the operating system said.
        source: io::Error,
    },
    /// Reading failed.
    #[error("read error at byte {offset}: {source}")]
    Io {
        /// Where the read started.
        offset: u64,
        /// What the operating system said.
        source: io::Error,
    },
    /// The input does not start like a pcap or pcapng file.
    // The bytes found are kept for callers but not printed: the file may be one the user may
    // not read (rtemu under sudo), and its first bytes are its content.
    #[error("not a pcap or pcapng file: it does not start with a pcap magic number (a1b2c3d4, a1b23c4d, either byte order) or a pcapng section header (0a0d0d0a){hint}")]
    NotACapture {
        /// The first four bytes.
        found: [u8; 4],
        /// A guess at what the file is instead, or empty.
        hint: &'static str,
    },
    /// A fixed-size structure ends early.
    #[error("truncated {what} at byte {offset}: expected {expected} bytes, {remain} remain")]
    Truncated {
        /// The structure.
        what: &'static str,
        /// Where it starts.
        offset: u64,
        /// Its size.
        expected: u64,
        /// The bytes left in the input.
        remain: u64,
    },
    /// A record or block ends before the length its header declares.
    #[error("truncated {what} at byte {offset}: header says {declared} bytes, {remain} remain")]
    TruncatedData {
        /// The record or block.
        what: &'static str,
        /// Where the record or block starts.
        offset: u64,
        /// The length its header declares (after the header).
        declared: u64,
        /// The bytes left in the input after the header.
        remain: u64,
    },
    /// A record claims more captured bytes than any sane capture holds.
    #[error("corrupt {what} at byte {offset}: captured length {len} bytes exceeds the maximum of {MAX_FRAME_LEN}")]
    FrameTooLong {
        /// The record or block.
        what: &'static str,
        /// Where it starts.
        offset: u64,
        /// The captured length it claims.
        len: u64,
    },
    /// A file header names a format version this reader does not know.
    #[error("unsupported {format} version {major}.{minor} at byte {offset}: expected major version {expected}")]
    UnsupportedVersion {
        /// `pcap` or `pcapng`.
        format: &'static str,
        /// Where the header starts.
        offset: u64,
        /// The major version found.
        major: u16,
        /// The minor version found.
        minor: u16,
        /// The major version supported.
        expected: u16,
    },
    /// A pcapng block's length field is impossible.
    #[error("corrupt pcapng block at byte {offset}: length {len} is {problem}")]
    BadBlockLength {
        /// Where the block starts.
        offset: u64,
        /// The length found.
        len: u32,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// A pcapng block's trailing length differs from its leading one.
    #[error("corrupt pcapng block at byte {offset}: trailing length {trailer} differs from leading length {len}")]
    BlockLengthMismatch {
        /// Where the block starts.
        offset: u64,
        /// The leading length.
        len: u32,
        /// The trailing length.
        trailer: u32,
    },
    /// A pcapng block's fields do not fit the block.
    #[error("corrupt {what} at byte {offset}: {problem}")]
    Malformed {
        /// The block.
        what: &'static str,
        /// Where it starts.
        offset: u64,
        /// What does not fit.
        problem: &'static str,
    },
    /// A pcapng packet names an interface that no description block declared.
    #[error("corrupt {what} at byte {offset}: interface {interface} is not declared (the section declares {declared})")]
    UnknownInterface {
        /// The block.
        what: &'static str,
        /// Where it starts.
        offset: u64,
        /// The interface index it names.
        interface: u32,
        /// How many interfaces are declared.
        declared: usize,
    },
    /// Interfaces of one capture have different link types; the simulator needs one.
    #[error("interface description block at byte {offset} has link type {found}, but an earlier interface has link type {first}: rtemu sim needs one link type per capture (split the file by interface, e.g. with `editcap`)")]
    MixedLinkTypes {
        /// Where the second interface's block starts.
        offset: u64,
        /// The first link type.
        first: u32,
        /// The differing one.
        found: u32,
    },
    /// A pcapng file has no interface, so no link type.
    #[error("pcapng file has no interface description block before its end at byte {offset}")]
    NoInterface {
        /// The length of the input.
        offset: u64,
    },
    /// A timestamp does not fit 64-bit nanoseconds since 1970 (or falls before it).
    #[error("{what} at byte {offset}: timestamp out of range (must lie between 1970 and 2554)")]
    TimestampOutOfRange {
        /// The block or record.
        what: &'static str,
        /// Where it starts.
        offset: u64,
    },
    /// An interface's timestamp resolution is beyond nanoseconds' reach.
    #[error("interface description block at byte {offset}: unsupported if_tsresol {value:#04x} (supported: 10^-0..10^-19 and 2^-0..2^-63)")]
    BadResolution {
        /// Where the block starts.
        offset: u64,
        /// The option's value.
        value: u8,
    },
}

impl CaptureError {
    /// The byte offset the error names, if any (all but [`CaptureError::Open`]).
    pub fn offset(&self) -> Option<u64> {
        use CaptureError::*;
        match self {
            Open { .. } => None,
            NotACapture { .. } => Some(0),
            Io { offset, .. }
            | Truncated { offset, .. }
            | TruncatedData { offset, .. }
            | FrameTooLong { offset, .. }
            | UnsupportedVersion { offset, .. }
            | BadBlockLength { offset, .. }
            | BlockLengthMismatch { offset, .. }
            | Malformed { offset, .. }
            | UnknownInterface { offset, .. }
            | MixedLinkTypes { offset, .. }
            | NoInterface { offset }
            | TimestampOutOfRange { offset, .. }
            | BadResolution { offset, .. } => Some(*offset),
        }
    }

    /// Whether the input ended inside a structure, record or block: what a capture stream
    /// stopped mid-write looks like.
    fn is_cut(&self) -> bool {
        matches!(
            self,
            CaptureError::Truncated { .. } | CaptureError::TruncatedData { .. }
        )
    }
}

/// One captured frame: when it was seen and its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    /// When it was seen, in nanoseconds since 1970 (or a generator's virtual time).
    pub ts_ns: u64,
    /// The captured bytes, borrowed from the reader's buffer until the next call.
    pub data: &'a [u8],
    /// The frame's length on the wire: larger than `data.len()` when the capture was cut at a
    /// snap length, never smaller.
    pub orig_len: u32,
}

/// A frame and where the capture says it was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<'a> {
    /// The frame.
    pub frame: Frame<'a>,
    /// Its interface, an index into [`CaptureReader::interfaces`] (0 in a pcap file).
    pub interface: u32,
    /// Its interface's `if_name`, when the interface description gives one.
    pub interface_name: Option<&'a str>,
    /// The enhanced packet block's `epb_flags`, when it has them.
    pub epb_flags: Option<u32>,
}

impl Packet<'_> {
    /// Which way the packet crossed its interface, from the low two bits of `epb_flags`.
    pub fn direction(&self) -> Option<Direction> {
        match self.epb_flags? & 3 {
            1 => Some(Direction::Inbound),
            2 => Some(Direction::Outbound),
            _ => None,
        }
    }
}

/// An interface of the current section (a pcap file has one, without a name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    /// Its link type (`LINKTYPE_*`).
    pub link_type: u32,
    /// Its `if_name` option, when given.
    pub name: Option<String>,
}

/// What a reader accepts beyond a whole, well-formed capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// The input buffer's size in bytes. Records that fit it whole are lent from it without a
    /// copy; others are copied, so any capacity works.
    pub capacity: usize,
    /// A pcapng file whose section declares no interface before the input ends is an empty
    /// capture without a link type, not [`CaptureError::NoInterface`].
    pub interfaceless: bool,
    /// An input that ends inside a record or block (a capture stream stopped mid-write) ends
    /// the capture after the last whole one, rather than being [`CaptureError::Truncated`] or
    /// [`CaptureError::TruncatedData`]. Every other fault is still an error.
    pub cut_end: bool,
    /// A pcapng file's interfaces are numbered across the file rather than per section: a new
    /// section's follow the earlier sections' (which [`CaptureReader::interfaces`] keeps), and
    /// a packet's [`Packet::interface`] indexes them all. For a reader that takes a whole file
    /// of several sections (files joined with `cat`, as Wireshark reads them); the memory
    /// held then grows with the file's interfaces.
    pub file_interfaces: bool,
}

impl Default for Options {
    /// A 256 KiB buffer; only whole captures with an interface are read.
    fn default() -> Self {
        Options {
            capacity: 256 * 1024,
            interfaceless: false,
            cut_end: false,
            file_interfaces: false,
        }
    }
}

/// The format-specific state of a reader.
#[derive(Debug)]
enum Format {
    Pcap(pcap::State),
    PcapNg(pcapng::State),
    /// The input ended before the format was known (cut, with [`Options::cut_end`]).
    Ended,
}

/// A streaming reader of pcap or pcapng, recognised by the first bytes.
#[derive(Debug)]
pub struct CaptureReader<R> {
    input: Input<R>,
    format: Format,
    link_type: Option<u32>,
    cut_end: bool,
    /// The input was cut inside a record or block (with [`Options::cut_end`]): no more
    /// packets, but the interfaces read stay.
    cut: bool,
    /// The reused buffer of the current frame: it grows to the longest frame seen, at most
    /// [`MAX_FRAME_LEN`].
    buf: Vec<u8>,
    total: Option<u64>,
}

/// A decoded record: when it arrived, where its bytes lie, and on which interface.
struct Record {
    ts_ns: u64,
    data: Data,
    orig_len: u32,
    interface: u32,
    epb_flags: Option<u32>,
}

/// Where a record's bytes lie.
enum Data {
    /// In the reader's own buffer, from its start: the record straddled the input buffer.
    Copied(usize),
    /// In the input's buffer, within the bytes just taken: the fast path, no copy.
    Taken(Range<usize>),
}

impl Data {
    /// The record's captured length.
    fn len(&self) -> u32 {
        // Both are bounded by MAX_FRAME_LEN.
        match self {
            Data::Copied(len) => *len as u32,
            Data::Taken(range) => range.len() as u32,
        }
    }
}

impl CaptureReader<File> {
    /// Opens a capture file (a regular file or a pipe); its length is the reader's
    /// [`CaptureReader::total_len`].
    pub fn open(path: impl AsRef<Path>) -> Result<Self, CaptureError> {
        let path = path.as_ref();
        let open_error = |source| CaptureError::Open {
            path: path.display().to_string(),
            source,
        };
        let file = rtemu_sys::input::open(path).map_err(open_error)?;
        let len = file.metadata().map_err(open_error)?.len();
        let mut reader = CaptureReader::new(file)?;
        reader.total = Some(len);
        Ok(reader)
    }
}

impl<R: Read> CaptureReader<R> {
    /// Reads the file header (pcap) or the blocks up to the first interface description
    /// (pcapng) from `reader`, which this reader buffers itself (256 KiB).
    pub fn new(reader: R) -> Result<Self, CaptureError> {
        Self::with_options(reader, Options::default())
    }

    /// As [`CaptureReader::new`] with a buffer of `capacity` bytes. Records that fit the
    /// buffer whole are lent from it without a copy; others are copied, so any capacity works.
    pub fn with_capacity(reader: R, capacity: usize) -> Result<Self, CaptureError> {
        let options = Options {
            capacity,
            ..Options::default()
        };
        Self::with_options(reader, options)
    }

    /// As [`CaptureReader::new`], accepting what `options` allow.
    pub fn with_options(reader: R, options: Options) -> Result<Self, CaptureError> {
        let mut input = Input::new(BufReader::with_capacity(options.capacity, reader));
        let (format, link_type) = match Self::open_format(&mut input, &options) {
            Ok(opened) => opened,
            // A stream cut before its first interface holds no packet.
            Err(e) if e.is_cut() && options.cut_end && options.interfaceless => {
                (Format::Ended, None)
            }
            Err(e) => return Err(e),
        };
        Ok(CaptureReader {
            input,
            format,
            link_type,
            cut_end: options.cut_end,
            cut: false,
            buf: Vec::new(),
            total: None,
        })
    }

    /// Recognises the format and reads its header.
    fn open_format(
        input: &mut Input<R>,
        options: &Options,
    ) -> Result<(Format, Option<u32>), CaptureError> {
        let mut magic = [0u8; 4];
        input.read_exact(&mut magic, "file header", 0, Length::Fixed)?;
        if magic == pcapng::SHB_TYPE {
            let (state, link_type) = pcapng::State::open(input, options)?;
            return Ok((Format::PcapNg(state), link_type));
        }
        match pcap::State::open(input, magic)? {
            Some(state) => {
                let link_type = state.interface().link_type;
                Ok((Format::Pcap(state), Some(link_type)))
            }
            None => {
                let hint = match magic {
                    [0x1f, 0x8b, ..] => " (it looks gzip-compressed: decompress it first)",
                    [0x28, 0xb5, 0x2f, 0xfd] => " (it looks zstd-compressed: decompress it first)",
                    [0xa1, 0xb2, 0xcd, 0x34] | [0x34, 0xcd, 0xb2, 0xa1] => {
                        " (it is a modified-pcap file: convert it with `editcap -F pcap`)"
                    }
                    _ => "",
                };
                Err(CaptureError::NotACapture { found: magic, hint })
            }
        }
    }

    /// Sets the input's total length, reported by [`CaptureReader::total_len`].
    pub fn with_total_len(mut self, total: u64) -> Self {
        self.total = Some(total);
        self
    }

    /// The input's total length in bytes, when known (a file opened by path, or set).
    pub fn total_len(&self) -> Option<u64> {
        self.total
    }

    /// The pcap link type of every frame (`LINKTYPE_*`); `None` only for a capture that
    /// declares no interface, which [`Options::interfaceless`] lets through.
    pub fn link_type(&self) -> Option<u32> {
        self.link_type
    }

    /// The interfaces declared so far in the current section: the one of a pcap file, those
    /// of a pcapng section up to the last packet read (or all, once the input has ended),
    /// after every earlier section's with [`Options::file_interfaces`].
    pub fn interfaces(&self) -> &[Interface] {
        match &self.format {
            Format::Pcap(state) => std::slice::from_ref(state.interface()),
            Format::PcapNg(state) => state.interfaces(),
            Format::Ended => &[],
        }
    }

    /// Bytes of input consumed so far.
    pub fn offset(&self) -> u64 {
        self.input.offset()
    }

    /// The next frame, or `None` at the end of the input.
    pub fn next_frame(&mut self) -> Result<Option<Frame<'_>>, CaptureError> {
        Ok(self.next_packet()?.map(|p| p.frame))
    }

    /// The next packet with its interface and flags, or `None` at the end of the input.
    pub fn next_packet(&mut self) -> Result<Option<Packet<'_>>, CaptureError> {
        let next = match &mut self.format {
            _ if self.cut => Ok(None),
            Format::Pcap(state) => state.next(&mut self.input, &mut self.buf),
            Format::PcapNg(state) => state.next(&mut self.input, &mut self.buf, self.link_type),
            Format::Ended => Ok(None),
        };
        let record = match next {
            Ok(record) => record,
            Err(e) if e.is_cut() && self.cut_end => {
                self.cut = true;
                None
            }
            Err(e) => return Err(e),
        };
        // Some writers leave the original length 0 or below the captured one; the captured
        // bytes are the better measure then.
        Ok(record.map(|r| {
            let orig_len = r.orig_len.max(r.data.len());
            let data = match r.data {
                Data::Copied(len) => &self.buf[..len],
                Data::Taken(range) => &self.input.taken()[range],
            };
            let interface_name = match &self.format {
                Format::PcapNg(state) => state
                    .interfaces()
                    .get(r.interface as usize)
                    .and_then(|i| i.name.as_deref()),
                Format::Pcap(_) | Format::Ended => None,
            };
            Packet {
                frame: Frame {
                    ts_ns: r.ts_ns,
                    data,
                    orig_len,
                },
                interface: r.interface,
                interface_name,
                epb_flags: r.epb_flags,
            }
        }))
    }
}

/// Reads `len` bytes of frame data into the reused buffer, growing it if needed.
fn read_frame<R: Read>(
    input: &mut Input<R>,
    buf: &mut Vec<u8>,
    len: u32,
    what: &'static str,
    start: u64,
) -> Result<usize, CaptureError> {
    if len > MAX_FRAME_LEN {
        return Err(CaptureError::FrameTooLong {
            what,
            offset: start,
            len: len.into(),
        });
    }
    let len = len as usize;
    if buf.len() < len {
        buf.resize(len, 0);
    }
    input.read_exact(&mut buf[..len], what, start, Length::Declared)?;
    Ok(len)
}

/// Byte order of a file or pcapng section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Endian {
    Little,
    Big,
}

impl Endian {
    fn u16(self, b: &[u8]) -> u16 {
        let b = [b[0], b[1]];
        match self {
            Endian::Little => u16::from_le_bytes(b),
            Endian::Big => u16::from_be_bytes(b),
        }
    }

    fn u32(self, b: &[u8]) -> u32 {
        let b = [b[0], b[1], b[2], b[3]];
        match self {
            Endian::Little => u32::from_le_bytes(b),
            Endian::Big => u32::from_be_bytes(b),
        }
    }

    fn u64(self, b: &[u8]) -> u64 {
        let b = [b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]];
        match self {
            Endian::Little => u64::from_le_bytes(b),
            Endian::Big => u64::from_be_bytes(b),
        }
    }
}
