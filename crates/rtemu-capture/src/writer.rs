//! The pcapng writer of the lab's captures: several interfaces stamped from one clock.
//!
//! One section header, one interface description per interface (Ethernet, `if_name` set to
//! `node:if`, `if_tsresol` = 9 so timestamps are nanoseconds), then one enhanced packet block
//! per packet. Format: draft-ietf-opsawg-pcapng, written in the machine's byte order as the
//! format allows (the byte-order magic tells readers which).

use std::io::{self, Write};

use rtemu_model::wire::link_type;

const SHB: u32 = 0x0A0D_0D0A;
const IDB: u32 = 1;
const EPB: u32 = 6;
const BYTE_ORDER_MAGIC: u32 = 0x1A2B_3C4D;
const OPT_END: u16 = 0;
const IF_NAME: u16 = 2;
const IF_TSRESOL: u16 = 9;
const OPT_EPB_FLAGS: u16 = 2;

/// Writes a pcapng file block by block.
pub struct PcapngWriter<W: Write> {
    out: W,
    interfaces: u32,
}

/// Bytes needed to pad `len` to a multiple of 4.
fn pad(len: usize) -> usize {
    (4 - len % 4) % 4
}

impl<W: Write> PcapngWriter<W> {
    /// Writes the section header and one interface description per name.
    pub fn new(mut out: W, interfaces: &[String]) -> io::Result<Self> {
        let mut b = Vec::with_capacity(28);
        b.extend_from_slice(&SHB.to_ne_bytes());
        b.extend_from_slice(&28u32.to_ne_bytes());
        b.extend_from_slice(&BYTE_ORDER_MAGIC.to_ne_bytes());
        b.extend_from_slice(&1u16.to_ne_bytes());
        b.extend_from_slice(&0u16.to_ne_bytes());
        // Section length unknown: the file is written as packets come.
        b.extend_from_slice(&(-1i64).to_ne_bytes());
        b.extend_from_slice(&28u32.to_ne_bytes());
        out.write_all(&b)?;
        for name in interfaces {
            let name = name.as_bytes();
            let options = 4 + name.len() + pad(name.len()) + 4 + 4 + 4;
            let total = (16 + options + 4) as u32;
            let mut b = Vec::with_capacity(total as usize);
            b.extend_from_slice(&IDB.to_ne_bytes());
            b.extend_from_slice(&total.to_ne_bytes());
            b.extend_from_slice(&(link_type::ETHERNET as u16).to_ne_bytes());
            b.extend_from_slice(&0u16.to_ne_bytes());
            b.extend_from_slice(&0u32.to_ne_bytes()); // snaplen: no limit
            b.extend_from_slice(&IF_NAME.to_ne_bytes());
            b.extend_from_slice(&(name.len() as u16).to_ne_bytes());
            b.extend_from_slice(name);
            b.resize(b.len() + pad(name.len()), 0);
            b.extend_from_slice(&IF_TSRESOL.to_ne_bytes());
            b.extend_from_slice(&1u16.to_ne_bytes());
            b.extend_from_slice(&[9, 0, 0, 0]);
            b.extend_from_slice(&OPT_END.to_ne_bytes());
            b.extend_from_slice(&0u16.to_ne_bytes());
            b.extend_from_slice(&total.to_ne_bytes());
            out.write_all(&b)?;
        }
        Ok(PcapngWriter {
            out,
            interfaces: interfaces.len() as u32,
        })
    }

    /// Writes one packet seen on interface `interface` (an index into the names given to
    /// [`PcapngWriter::new`]) at `ts_ns` nanoseconds since the Unix epoch; `orig_len` is its
    /// length on the wire when `data` is truncated (raised to `data.len()` if smaller, as a
    /// reader does). `direction`, when known, is written as the
    /// block's `epb_flags`, so readers (Wireshark's `frame.packet_flags_direction`) can tell
    /// a frame an interface sent from one it received.
    pub fn packet(
        &mut self,
        interface: u32,
        ts_ns: u64,
        data: &[u8],
        orig_len: u32,
        direction: Option<Direction>,
    ) -> io::Result<()> {
        if interface >= self.interfaces {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "interface {interface} was not declared (there are {})",
                    self.interfaces
                ),
            ));
        }
        // epb_flags (4 + 4) and the end of options (4).
        let options = if direction.is_some() { 12 } else { 0 };
        let total = (28 + data.len() + pad(data.len()) + options + 4) as u32;
        let mut head = [0u8; 28];
        head[0..4].copy_from_slice(&EPB.to_ne_bytes());
        head[4..8].copy_from_slice(&total.to_ne_bytes());
        head[8..12].copy_from_slice(&interface.to_ne_bytes());
        head[12..16].copy_from_slice(&((ts_ns >> 32) as u32).to_ne_bytes());
        head[16..20].copy_from_slice(&(ts_ns as u32).to_ne_bytes());
        head[20..24].copy_from_slice(&(data.len() as u32).to_ne_bytes());
        let orig_len = orig_len.max(data.len() as u32);
        head[24..28].copy_from_slice(&orig_len.to_ne_bytes());
        self.out.write_all(&head)?;
        self.out.write_all(data)?;
        self.out.write_all(&[0u8; 3][..pad(data.len())])?;
        if let Some(d) = direction {
            let mut opt = [0u8; 12];
            opt[0..2].copy_from_slice(&OPT_EPB_FLAGS.to_ne_bytes());
            opt[2..4].copy_from_slice(&4u16.to_ne_bytes());
            opt[4..8].copy_from_slice(&(d as u32).to_ne_bytes());
            // opt[8..12]: opt_endofopt, code 0 and length 0.
            self.out.write_all(&opt)?;
        }
        self.out.write_all(&total.to_ne_bytes())
    }

    /// Hands on what was written so far (whole blocks: it is called between them), for a
    /// reader that takes the file as it grows.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// Flushes and returns the output.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// Which way a packet crossed its interface (the low two bits of `epb_flags`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Received by the interface.
    Inbound = 1,
    /// Sent by the interface.
    Outbound = 2,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_have_the_layout_the_format_defines() {
        let mut w = PcapngWriter::new(Vec::new(), &["a:eth0".to_owned()]).unwrap();
        w.packet(0, 0x1_0000_0002, &[0xAA; 5], 60, None).unwrap();
        let b = w.finish().unwrap();
        let u32_at = |i: usize| u32::from_ne_bytes(b[i..i + 4].try_into().unwrap());
        // Section header: 28 bytes, length at both ends.
        assert_eq!(
            (u32_at(0), u32_at(4), u32_at(8), u32_at(24)),
            (SHB, 28, BYTE_ORDER_MAGIC, 28)
        );
        // Interface description: 16 + if_name (4 + 6 + 2 pad) + if_tsresol (4 + 4) + end (4) + 4.
        assert_eq!((u32_at(28), u32_at(32)), (IDB, 44));
        assert_eq!(&b[28 + 20..28 + 26], b"a:eth0");
        assert_eq!(b[28 + 32], 9, "nanosecond resolution");
        assert_eq!(u32_at(28 + 40), 44);
        // Enhanced packet: 28 + 5 data + 3 pad + 4.
        let e = 28 + 44;
        assert_eq!((u32_at(e), u32_at(e + 4), u32_at(e + 8)), (EPB, 40, 0));
        assert_eq!(
            (u32_at(e + 12), u32_at(e + 16)),
            (1, 2),
            "timestamp high and low words"
        );
        assert_eq!((u32_at(e + 20), u32_at(e + 24)), (5, 60));
        assert_eq!(&b[e + 28..e + 36], &[0xAA, 0xAA, 0xAA, 0xAA, 0xAA, 0, 0, 0]);
        assert_eq!(u32_at(e + 36), 40);
        assert_eq!(b.len(), e + 40);
    }

    #[test]
    fn undeclared_interfaces_are_refused() {
        let mut w = PcapngWriter::new(Vec::new(), &["a:eth0".to_owned()]).unwrap();
        assert!(w.packet(1, 0, &[], 0, None).is_err());
    }

    #[test]
    fn a_direction_is_written_as_epb_flags() {
        let mut w = PcapngWriter::new(Vec::new(), &["a:eth0".to_owned()]).unwrap();
        w.packet(0, 7, &[0xBB; 4], 4, Some(Direction::Outbound))
            .unwrap();
        let b = w.finish().unwrap();
        let u32_at = |i: usize| u32::from_ne_bytes(b[i..i + 4].try_into().unwrap());
        let u16_at = |i: usize| u16::from_ne_bytes(b[i..i + 2].try_into().unwrap());
        let e = 28 + 44;
        // 28 + 4 data + epb_flags 8 + end of options 4 + 4.
        assert_eq!((u32_at(e), u32_at(e + 4)), (EPB, 48));
        let opt = e + 28 + 4;
        assert_eq!((u16_at(opt), u16_at(opt + 2), u32_at(opt + 4)), (2, 4, 2));
        assert_eq!(u32_at(opt + 8), 0, "end of options");
        assert_eq!(u32_at(opt + 12), 48);
        assert_eq!(b.len(), e + 48);
    }
}
