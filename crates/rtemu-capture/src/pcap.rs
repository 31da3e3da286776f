//! The classic pcap format (`pcap-savefile(5)`): a 24-byte file header, then records of a
//! 16-byte header and the captured bytes. Both byte orders, microsecond and nanosecond
//! timestamps. The header's `thiszone` is ignored (every writer sets it to 0) and so is its
//! snap length (writers disagree on it; [`MAX_FRAME_LEN`](super::MAX_FRAME_LEN) bounds records).

use std::io::Read;

use super::input::{Input, Length};
use super::{read_frame, CaptureError, Data, Endian, Interface, Record, MAX_FRAME_LEN};

const RECORD: &str = "packet record";

/// What the file header said.
#[derive(Debug)]
pub(super) struct State {
    endian: Endian,
    /// Nanoseconds per unit of a record's sub-second field: 1000 (µs) or 1 (ns).
    frac_ns: u64,
    /// The file's one interface.
    interface: Interface,
}

impl State {
    /// Recognises `magic`; if it is a pcap magic number, reads the rest of the file header and
    /// returns the state.
    pub(super) fn open<R: Read>(
        input: &mut Input<R>,
        magic: [u8; 4],
    ) -> Result<Option<State>, CaptureError> {
        let (endian, frac_ns) = match magic {
            [0xd4, 0xc3, 0xb2, 0xa1] => (Endian::Little, 1000),
            [0xa1, 0xb2, 0xc3, 0xd4] => (Endian::Big, 1000),
            [0x4d, 0x3c, 0xb2, 0xa1] => (Endian::Little, 1),
            [0xa1, 0xb2, 0x3c, 0x4d] => (Endian::Big, 1),
            _ => return Ok(None),
        };
        let mut h = [0u8; 20];
        input.read_exact(&mut h, "pcap file header", 0, Length::Fixed)?;
        let (major, minor) = (endian.u16(&h[0..]), endian.u16(&h[2..]));
        if major != 2 {
            return Err(CaptureError::UnsupportedVersion {
                format: "pcap",
                offset: 0,
                major,
                minor,
                expected: 2,
            });
        }
        // The upper bits of the link-type field carry FCS information, not the type.
        let link_type = endian.u32(&h[16..]) & 0xffff;
        let interface = Interface {
            link_type,
            name: None,
        };
        Ok(Some(State {
            endian,
            frac_ns,
            interface,
        }))
    }

    /// The file's one interface.
    pub(super) fn interface(&self) -> &Interface {
        &self.interface
    }

    /// The timestamp of a record header.
    fn timestamp(&self, h: &[u8]) -> u64 {
        let (secs, frac) = (self.endian.u32(&h[0..]), self.endian.u32(&h[4..]));
        // A sub-second field beyond one second is out of spec but harmless: it only adds.
        u64::from(secs) * 1_000_000_000 + u64::from(frac) * self.frac_ns
    }

    /// Reads the next record: in place when it lies whole in the input's buffer, else into
    /// `buf`.
    pub(super) fn next<R: Read>(
        &mut self,
        input: &mut Input<R>,
        buf: &mut Vec<u8>,
    ) -> Result<Option<Record>, CaptureError> {
        let e = self.endian;
        let b = input.buffered()?;
        if let Some(h) = b.get(..16) {
            let caplen = e.u32(&h[8..]);
            let end = 16 + caplen as usize;
            if caplen <= MAX_FRAME_LEN && end <= b.len() {
                let (ts_ns, orig_len) = (self.timestamp(h), e.u32(&h[12..]));
                input.take(end);
                return Ok(Some(Record {
                    ts_ns,
                    data: Data::Taken(16..end),
                    orig_len,
                    interface: 0,
                    epb_flags: None,
                }));
            }
        }
        let start = input.offset();
        let mut h = [0u8; 16];
        if !input.read_header(&mut h, "packet record header")? {
            return Ok(None);
        }
        let (caplen, orig_len) = (e.u32(&h[8..]), e.u32(&h[12..]));
        let ts_ns = self.timestamp(&h);
        let len = read_frame(input, buf, caplen, RECORD, start)?;
        Ok(Some(Record {
            ts_ns,
            data: Data::Copied(len),
            orig_len,
            interface: 0,
            epb_flags: None,
        }))
    }
}
