//! The pcapng format (draft-ietf-opsawg-pcapng): a stream of blocks, each `type, length, body,
//! length`. Read here:
//!
//! - section header blocks, in either byte order; a new section forgets the previous
//!   section's interfaces, as the format says, or (with [`Options::file_interfaces`]) numbers
//!   its own after them;
//! - interface description blocks with `if_name`, `if_tsresol` (powers of 10 or 2) and
//!   `if_tsoffset`; several interfaces are fine as long as they share one link type;
//! - enhanced packet blocks with their `epb_flags`, simple packet blocks (which carry no
//!   timestamp: they take the previous packet's) and the obsolete packet blocks;
//! - every other block is skipped unread, so name resolution, statistics and custom blocks
//!   cost nothing and need no memory.

use std::io::Read;

use super::input::{Input, Length};
use super::{read_frame, CaptureError, Data, Endian, Interface, Options, Record, MAX_FRAME_LEN};

/// The section header block's type, the same in both byte orders.
pub(super) const SHB_TYPE: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];
const IDB: u32 = 1;
const OPB: u32 = 2;
const SPB: u32 = 3;
const EPB: u32 = 6;
/// Interface description blocks are read whole; none legitimately comes near this.
const MAX_IDB_BODY: u32 = 1 << 20;
/// The option codes read: the end of options, `if_name`, `epb_flags`.
const OPT_END: u16 = 0;
const IF_NAME: u16 = 2;
const EPB_FLAGS: u16 = 2;

/// How one declared interface's packets are read.
#[derive(Debug, Clone, Copy)]
struct Scale {
    snaplen: u32,
    ts: Timescale,
}

/// How an interface's timestamp units become nanoseconds: `units × mul / div + offset`.
#[derive(Debug, Clone, Copy)]
struct Timescale {
    mul: u64,
    div: u64,
    offset_ns: i128,
}

impl Timescale {
    const MICROS: Timescale = Timescale {
        mul: 1000,
        div: 1,
        offset_ns: 0,
    };

    /// From an `if_tsresol` value: 10^-v, or 2^-(v & 0x7f) when the top bit is set.
    fn from_resolution(value: u8) -> Option<Timescale> {
        let (mul, div) = if value & 0x80 == 0 {
            match value {
                0..=9 => (10u64.pow(9 - u32::from(value)), 1),
                10..=19 => (1, 10u64.pow(u32::from(value) - 9)),
                _ => return None,
            }
        } else {
            let bits = value & 0x7f;
            if bits > 63 {
                return None;
            }
            (1_000_000_000, 1u64 << bits)
        };
        Some(Timescale {
            mul,
            div,
            offset_ns: 0,
        })
    }

    fn to_ns(self, units: u64) -> Option<u64> {
        if self.div == 1 && self.offset_ns == 0 {
            return units.checked_mul(self.mul);
        }
        let ns = i128::from(units) * i128::from(self.mul) / i128::from(self.div) + self.offset_ns;
        u64::try_from(ns).ok()
    }
}

/// The current section and its interfaces.
#[derive(Debug)]
pub(super) struct State {
    endian: Endian,
    /// The section's interfaces as callers see them, and how to read each one's packets;
    /// with [`Options::file_interfaces`], after those of the earlier sections.
    interfaces: Vec<Interface>,
    scales: Vec<Scale>,
    /// How many of `interfaces` are of earlier sections: the current section's interface `i`
    /// is `base + i`.
    base: usize,
    /// Whether a new section keeps the earlier sections' interfaces.
    file_interfaces: bool,
    /// The timestamp given to simple packet blocks, which have none.
    last_ts: u64,
}

/// A block header: where the block starts, its type and its total length.
struct Block {
    start: u64,
    kind: u32,
    len: u32,
}

impl Block {
    /// The body's length: the total less the two length fields and the type.
    fn body_len(&self) -> u32 {
        self.len - 12
    }
}

impl State {
    /// Reads the first section header (whose type the caller has consumed) and the blocks up
    /// to the first interface description; returns the state and the link type, `None` when
    /// [`Options::interfaceless`] lets the input end before any interface.
    pub(super) fn open<R: Read>(
        input: &mut Input<R>,
        options: &Options,
    ) -> Result<(State, Option<u32>), CaptureError> {
        let interfaceless = options.interfaceless;
        let mut state = State {
            endian: Endian::Little,
            interfaces: Vec::new(),
            scales: Vec::new(),
            base: 0,
            file_interfaces: options.file_interfaces,
            last_ts: 0,
        };
        let mut len = [0u8; 4];
        input.read_exact(&mut len, "pcapng section header block", 0, Length::Fixed)?;
        state.read_section_header(input, 0, len)?;
        let mut link_type = None;
        while link_type.is_none() {
            let Some(block) = state.read_block_header(input)? else {
                if interfaceless {
                    return Ok((state, None));
                }
                return Err(CaptureError::NoInterface {
                    offset: input.offset(),
                });
            };
            match block.kind {
                IDB => link_type = Some(state.read_interface(input, &block, None)?),
                EPB | SPB | OPB => {
                    return Err(CaptureError::Malformed {
                        what: "pcapng packet block",
                        offset: block.start,
                        problem: "packet before any interface description block",
                    });
                }
                _ => state.skip_block(input, &block)?,
            }
        }
        Ok((state, link_type))
    }

    /// The current section's interfaces declared so far, after the earlier sections' with
    /// [`Options::file_interfaces`].
    pub(super) fn interfaces(&self) -> &[Interface] {
        &self.interfaces
    }

    /// Reads blocks up to the next packet: in place when it lies whole in the input's buffer,
    /// else into `buf`.
    pub(super) fn next<R: Read>(
        &mut self,
        input: &mut Input<R>,
        buf: &mut Vec<u8>,
        link_type: Option<u32>,
    ) -> Result<Option<Record>, CaptureError> {
        loop {
            if let Some(record) = self.next_in_place(input)? {
                return Ok(Some(record));
            }
            let Some(block) = self.read_block_header(input)? else {
                return Ok(None);
            };
            let record = match block.kind {
                IDB => {
                    self.read_interface(input, &block, link_type)?;
                    continue;
                }
                EPB => {
                    self.read_enhanced(input, buf, &block, "pcapng enhanced packet block", false)?
                }
                OPB => {
                    self.read_enhanced(input, buf, &block, "pcapng obsolete packet block", true)?
                }
                SPB => self.read_simple(input, buf, &block)?,
                _ => {
                    self.skip_block(input, &block)?;
                    continue;
                }
            };
            return Ok(Some(record));
        }
    }

    /// Reads a block's type and length; a section header is handled here whole, so the caller
    /// never sees one. `None` at a clean end of input.
    fn read_block_header<R: Read>(
        &mut self,
        input: &mut Input<R>,
    ) -> Result<Option<Block>, CaptureError> {
        loop {
            let start = input.offset();
            let mut h = [0u8; 8];
            if !input.read_header(&mut h, "pcapng block header")? {
                return Ok(None);
            }
            if h[..4] == SHB_TYPE {
                self.read_section_header(input, start, [h[4], h[5], h[6], h[7]])?;
                continue;
            }
            let (kind, len) = (&h[..4], self.endian.u32(&h[4..]));
            let problem = if len < 12 {
                "below the minimum of 12"
            } else if len % 4 != 0 {
                "not a multiple of 4"
            } else {
                return Ok(Some(Block {
                    start,
                    kind: self.endian.u32(kind),
                    len,
                }));
            };
            return Err(CaptureError::BadBlockLength {
                offset: start,
                len,
                problem,
            });
        }
    }

    /// Reads a section header whose type and length (at `start`) have been consumed; the
    /// length's byte order is known only from the byte-order magic that follows it.
    fn read_section_header<R: Read>(
        &mut self,
        input: &mut Input<R>,
        start: u64,
        len: [u8; 4],
    ) -> Result<(), CaptureError> {
        const WHAT: &str = "pcapng section header block";
        let mut h = [0u8; 20];
        h[..4].copy_from_slice(&len);
        input.read_exact(&mut h[4..], WHAT, start, Length::Fixed)?;
        self.endian = match h[4..8] {
            [0x1a, 0x2b, 0x3c, 0x4d] => Endian::Big,
            [0x4d, 0x3c, 0x2b, 0x1a] => Endian::Little,
            _ => {
                return Err(CaptureError::Malformed {
                    what: WHAT,
                    offset: start,
                    problem: "byte-order magic is neither 1a2b3c4d nor 4d3c2b1a",
                })
            }
        };
        let e = self.endian;
        let len = e.u32(&h[0..]);
        let (major, minor) = (e.u16(&h[8..]), e.u16(&h[10..]));
        if len < 28 || len % 4 != 0 {
            let problem = if len < 28 {
                "below the section header's minimum of 28"
            } else {
                "not a multiple of 4"
            };
            return Err(CaptureError::BadBlockLength {
                offset: start,
                len,
                problem,
            });
        }
        if major != 1 {
            return Err(CaptureError::UnsupportedVersion {
                format: "pcapng",
                offset: start,
                major,
                minor,
                expected: 1,
            });
        }
        if self.file_interfaces {
            self.base = self.interfaces.len();
        } else {
            self.interfaces.clear();
            self.scales.clear();
        }
        // The options, then the trailing length.
        input.skip(u64::from(len - 28), WHAT, start)?;
        self.read_trailer(
            input,
            &Block {
                start,
                kind: 0,
                len,
            },
        )
    }

    /// Reads an interface description block; checks its link type against `expected`.
    fn read_interface<R: Read>(
        &mut self,
        input: &mut Input<R>,
        block: &Block,
        expected: Option<u32>,
    ) -> Result<u32, CaptureError> {
        const WHAT: &str = "pcapng interface description block";
        let body_len = block.body_len();
        if !(8..=MAX_IDB_BODY).contains(&body_len) {
            let problem = if body_len < 8 {
                "too short for an interface description"
            } else {
                "longer than 1 MiB"
            };
            return Err(CaptureError::BadBlockLength {
                offset: block.start,
                len: block.len,
                problem,
            });
        }
        // Rare and small: a temporary buffer is fine here.
        let mut body = vec![0u8; body_len as usize];
        input.read_exact(&mut body, WHAT, block.start, Length::Declared)?;
        self.read_trailer(input, block)?;
        let e = self.endian;
        let link_type = u32::from(e.u16(&body[0..]));
        if let Some(first) = expected.filter(|&first| first != link_type) {
            return Err(CaptureError::MixedLinkTypes {
                offset: block.start,
                first,
                found: link_type,
            });
        }
        let mut scale = Scale {
            snaplen: e.u32(&body[4..]),
            ts: Timescale::MICROS,
        };
        let mut name = None;
        let mut options = &body[8..];
        while options.len() >= 4 {
            let (code, len) = (e.u16(&options[0..]), usize::from(e.u16(&options[2..])));
            let value = options.get(4..4 + len).ok_or(CaptureError::Malformed {
                what: WHAT,
                offset: block.start,
                problem: "an option runs past the end of the block",
            })?;
            match (code, len) {
                (OPT_END, _) => break,
                (IF_NAME, _) => name = Some(String::from_utf8_lossy(value).into_owned()),
                // if_tsresol
                (9, 1) => {
                    let offset_ns = scale.ts.offset_ns;
                    scale.ts = Timescale::from_resolution(value[0]).ok_or(
                        CaptureError::BadResolution {
                            offset: block.start,
                            value: value[0],
                        },
                    )?;
                    scale.ts.offset_ns = offset_ns;
                }
                // if_tsoffset: seconds to add to every timestamp
                (14, 8) => scale.ts.offset_ns = i128::from(e.u64(value) as i64) * 1_000_000_000,
                _ => {}
            }
            options = options.get(4 + len.next_multiple_of(4)..).unwrap_or(&[]);
        }
        self.interfaces.push(Interface { link_type, name });
        self.scales.push(scale);
        Ok(link_type)
    }

    /// Reads an enhanced (or obsolete) packet block.
    fn read_enhanced<R: Read>(
        &mut self,
        input: &mut Input<R>,
        buf: &mut Vec<u8>,
        block: &Block,
        what: &'static str,
        obsolete: bool,
    ) -> Result<Record, CaptureError> {
        let mut h = [0u8; 20];
        if block.body_len() < h.len() as u32 {
            return Err(CaptureError::BadBlockLength {
                offset: block.start,
                len: block.len,
                problem: "too short for a packet block",
            });
        }
        input.read_exact(&mut h, what, block.start, Length::Declared)?;
        let (ts_ns, caplen, orig_len, interface) = self.packet_fields(&h, block, what, obsolete)?;
        let len = read_frame(input, buf, caplen, what, block.start)?;
        let padded = caplen.next_multiple_of(4);
        input.skip(u64::from(padded - caplen), what, block.start)?;
        let epb_flags = self.read_epb_flags(input, block.body_len() - 20 - padded, block)?;
        self.read_trailer(input, block)?;
        self.last_ts = ts_ns;
        Ok(Record {
            ts_ns,
            data: Data::Copied(len),
            orig_len,
            interface,
            epb_flags,
        })
    }

    /// Reads an enhanced or obsolete packet block in place if it lies whole in the input's
    /// buffer and is sound; `None` leaves it to the copying path (which reports any fault).
    fn next_in_place<R: Read>(
        &mut self,
        input: &mut Input<R>,
    ) -> Result<Option<Record>, CaptureError> {
        let (e, start) = (self.endian, input.offset());
        let b = input.buffered()?;
        let Some(h) = b.get(..8) else { return Ok(None) };
        let (kind, len) = (e.u32(&h[0..]), e.u32(&h[4..]) as usize);
        if !(kind == EPB || kind == OPB) || len < 32 || len % 4 != 0 {
            return Ok(None);
        }
        let Some(bytes) = b.get(..len) else {
            return Ok(None);
        };
        let block = Block {
            start,
            kind,
            len: len as u32,
        };
        let Ok((ts_ns, caplen, orig_len, interface)) =
            self.packet_fields(&bytes[8..28], &block, "", kind == OPB)
        else {
            return Ok(None);
        };
        if e.u32(&bytes[len - 4..]) != block.len {
            return Ok(None);
        }
        let epb_flags = epb_flags(e, &bytes[28 + caplen.next_multiple_of(4) as usize..len - 4]);
        input.take(len);
        self.last_ts = ts_ns;
        Ok(Some(Record {
            ts_ns,
            data: Data::Taken(28..28 + caplen as usize),
            orig_len,
            interface,
            epb_flags,
        }))
    }

    /// The timestamp, captured length, original length and interface of a packet block whose
    /// 20 bytes after the length are `h`, checked against the block.
    fn packet_fields(
        &self,
        h: &[u8],
        block: &Block,
        what: &'static str,
        obsolete: bool,
    ) -> Result<(u64, u32, u32, u32), CaptureError> {
        let e = self.endian;
        let interface = if obsolete {
            u32::from(e.u16(&h[0..]))
        } else {
            e.u32(&h[0..])
        };
        let units = (u64::from(e.u32(&h[4..])) << 32) | u64::from(e.u32(&h[8..]));
        let (caplen, orig_len) = (e.u32(&h[12..]), e.u32(&h[16..]));
        let (interface, scale) = self.scale(interface, what, block.start)?;
        let ts = scale.ts;
        // `let else` rather than `ok_or`: the error is built only when needed (a hot path).
        let Some(ts_ns) = ts.to_ns(units) else {
            return Err(CaptureError::TimestampOutOfRange {
                what,
                offset: block.start,
            });
        };
        if caplen > MAX_FRAME_LEN {
            return Err(CaptureError::FrameTooLong {
                what,
                offset: block.start,
                len: caplen.into(),
            });
        }
        if caplen.next_multiple_of(4) > block.body_len() - 20 {
            return Err(CaptureError::Malformed {
                what,
                offset: block.start,
                problem: "captured length runs past the end of the block",
            });
        }
        Ok((ts_ns, caplen, orig_len, interface))
    }

    /// Reads the `rest` bytes of a packet block's options, one at a time, and returns its
    /// `epb_flags`: the streaming twin of [`epb_flags`], which reads them in place. Options it
    /// cannot make sense of end the search, as there; they never fail the packet.
    fn read_epb_flags<R: Read>(
        &mut self,
        input: &mut Input<R>,
        mut rest: u32,
        block: &Block,
    ) -> Result<Option<u32>, CaptureError> {
        const WHAT: &str = "pcapng enhanced packet block";
        let e = self.endian;
        let mut flags = None;
        while rest >= 4 {
            let mut h = [0u8; 4];
            input.read_exact(&mut h, WHAT, block.start, Length::Declared)?;
            rest -= 4;
            let (code, len) = (e.u16(&h[0..]), u32::from(e.u16(&h[2..])));
            let padded = len.next_multiple_of(4);
            if code == OPT_END || padded > rest {
                break;
            }
            if code == EPB_FLAGS && len == 4 && flags.is_none() {
                input.read_exact(&mut h, WHAT, block.start, Length::Declared)?;
                flags = Some(e.u32(&h));
            } else {
                input.skip(u64::from(padded), WHAT, block.start)?;
            }
            rest -= padded;
        }
        input.skip(u64::from(rest), WHAT, block.start)?;
        Ok(flags)
    }

    /// Reads a simple packet block: interface 0, no timestamp, captured length implied by the
    /// block length and the interface's snap length.
    fn read_simple<R: Read>(
        &mut self,
        input: &mut Input<R>,
        buf: &mut Vec<u8>,
        block: &Block,
    ) -> Result<Record, CaptureError> {
        const WHAT: &str = "pcapng simple packet block";
        if block.body_len() < 4 {
            return Err(CaptureError::BadBlockLength {
                offset: block.start,
                len: block.len,
                problem: "too short for a simple packet block",
            });
        }
        let mut h = [0u8; 4];
        input.read_exact(&mut h, WHAT, block.start, Length::Declared)?;
        let orig_len = self.endian.u32(&h);
        let (interface, scale) = self.scale(0, WHAT, block.start)?;
        let snaplen = scale.snaplen;
        let room = block.body_len() - 4;
        let mut caplen = orig_len.min(room);
        if snaplen != 0 {
            caplen = caplen.min(snaplen);
        }
        let len = read_frame(input, buf, caplen, WHAT, block.start)?;
        input.skip(u64::from(room - caplen), WHAT, block.start)?;
        self.read_trailer(input, block)?;
        Ok(Record {
            ts_ns: self.last_ts,
            data: Data::Copied(len),
            orig_len,
            interface,
            epb_flags: None,
        })
    }

    /// The section's interface `index` as callers number it (see [`State::interfaces`]) and
    /// how its packets are read, if the section declares it.
    fn scale(
        &self,
        index: u32,
        what: &'static str,
        offset: u64,
    ) -> Result<(u32, Scale), CaptureError> {
        let at = self.base + index as usize;
        match self.scales.get(at) {
            // Fewer than 2^32: each interface is a block of the input, held in memory.
            Some(scale) => Ok((at as u32, *scale)),
            None => Err(CaptureError::UnknownInterface {
                what,
                offset,
                interface: index,
                declared: self.interfaces.len() - self.base,
            }),
        }
    }

    fn skip_block<R: Read>(
        &mut self,
        input: &mut Input<R>,
        block: &Block,
    ) -> Result<(), CaptureError> {
        input.skip(u64::from(block.body_len()), "pcapng block", block.start)?;
        self.read_trailer(input, block)
    }

    /// Reads a block's trailing length and checks it against the leading one.
    fn read_trailer<R: Read>(
        &mut self,
        input: &mut Input<R>,
        block: &Block,
    ) -> Result<(), CaptureError> {
        let mut t = [0u8; 4];
        let at = input.offset();
        input.read_exact(&mut t, "pcapng block trailing length", at, Length::Fixed)?;
        let trailer = self.endian.u32(&t);
        if trailer != block.len {
            return Err(CaptureError::BlockLengthMismatch {
                offset: block.start,
                len: block.len,
                trailer,
            });
        }
        Ok(())
    }
}

/// The `epb_flags` among a packet block's `options`, which lie whole in memory. Options it
/// cannot make sense of end the search; they never fail the packet.
fn epb_flags(e: Endian, mut options: &[u8]) -> Option<u32> {
    while options.len() >= 4 {
        let (code, len) = (e.u16(&options[0..]), usize::from(e.u16(&options[2..])));
        let value = options.get(4..4 + len.next_multiple_of(4))?;
        match code {
            OPT_END => return None,
            EPB_FLAGS if len == 4 => return Some(e.u32(value)),
            _ => options = &options[4 + value.len()..],
        }
    }
    None
}
