//! A pcapng writer for captures of several interfaces stamped from one clock, and the reader
//! of what it writes, so that captures made on several hosts merge into one file
//! ([`merge`]).
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
    /// length on the wire when `data` is truncated. `direction`, when known, is written as the
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

/// The option code of `epb_flags`.
const OPT_EPB_FLAGS: u16 = 2;

/// A packet of a capture read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    /// Its interface, an index into the capture's interfaces.
    pub interface: u32,
    /// When it was seen, ns since the Unix epoch.
    pub ts_ns: u64,
    /// Its bytes as captured.
    pub data: Vec<u8>,
    /// Its length on the wire.
    pub orig_len: u32,
    /// Which way it crossed its interface, when the file says.
    pub direction: Option<Direction>,
}

/// A pcapng file's interfaces (their `if_name`) and packets, as [`read`] gives them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Capture {
    /// The interfaces' names, in the file's order.
    pub interfaces: Vec<String>,
    /// The packets, in the file's order.
    pub packets: Vec<Packet>,
}

fn invalid(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

/// Reads a 32-bit word in the file's byte order.
type U32Of = fn([u8; 4]) -> u32;
/// Reads a 16-bit word in the file's byte order.
type U16Of = fn([u8; 2]) -> u16;

/// The options of a block, `(code, value)`, from `bytes` (which start at the first option),
/// read with `u16_of`.
fn options(bytes: &[u8], u16_of: U16Of) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 4 <= bytes.len() {
        let code = u16_of([bytes[at], bytes[at + 1]]);
        let len = usize::from(u16_of([bytes[at + 2], bytes[at + 3]]));
        if code == OPT_END || at + 4 + len > bytes.len() {
            break;
        }
        out.push((code, &bytes[at + 4..at + 4 + len]));
        at += 4 + len + pad(len);
    }
    out
}

/// Reads a one-section pcapng file of Ethernet interfaces with nanosecond timestamps (what
/// [`PcapngWriter`] writes, in either byte order); other blocks are skipped. A file cut short,
/// or of another kind, is an error saying where.
pub fn read(bytes: &[u8]) -> io::Result<Capture> {
    read_blocks(bytes, false)
}

/// Reads what [`read`] does from the start of such a file that may be cut anywhere (a capture
/// stream stopped before its end): the blocks before the cut, a truncated last block left out
/// (each block carries its length, so a cut is told from a whole block). Bytes that are not
/// such a file are still an error.
pub fn read_complete(bytes: &[u8]) -> io::Result<Capture> {
    if bytes.len() < 12 {
        return Ok(Capture::default());
    }
    read_blocks(bytes, true)
}

/// [`read`], or with `cut` [`read_complete`].
fn read_blocks(bytes: &[u8], cut: bool) -> io::Result<Capture> {
    let word = |at: usize| -> io::Result<[u8; 4]> {
        bytes
            .get(at..at + 4)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| invalid(format!("the pcapng file ends inside a block at byte {at}")))
    };
    if bytes.len() < 12 || u32::from_ne_bytes(word(0)?) != SHB {
        return Err(invalid("not a pcapng file (no section header)".to_owned()));
    }
    let (u32_of, u16_of): (U32Of, U16Of) = if u32::from_le_bytes(word(8)?) == BYTE_ORDER_MAGIC {
        (u32::from_le_bytes, u16::from_le_bytes)
    } else if u32::from_be_bytes(word(8)?) == BYTE_ORDER_MAGIC {
        (u32::from_be_bytes, u16::from_be_bytes)
    } else {
        return Err(invalid(
            "a pcapng section header without its byte-order magic".to_owned(),
        ));
    };
    let mut capture = Capture::default();
    let mut at = 0;
    while at < bytes.len() {
        if cut && at + 8 > bytes.len() {
            break;
        }
        let kind = u32_of(word(at)?);
        let total = u32_of(word(at + 4)?) as usize;
        if cut && total >= 12 && total % 4 == 0 && at + total > bytes.len() {
            break;
        }
        if total < 12 || total % 4 != 0 || at + total > bytes.len() {
            return Err(invalid(format!(
                "the pcapng block at byte {at} has length {total}, which the file does not hold"
            )));
        }
        let body = &bytes[at + 8..at + total - 4];
        match kind {
            SHB if at > 0 => {
                return Err(invalid(format!("a second pcapng section at byte {at}")));
            }
            IDB => {
                let mut name = format!("if{}", capture.interfaces.len());
                for (code, value) in options(body.get(8..).unwrap_or_default(), u16_of) {
                    match code {
                        IF_NAME => name = String::from_utf8_lossy(value).into_owned(),
                        IF_TSRESOL if value.first() != Some(&9) => {
                            return Err(invalid(format!(
                                "interface {name} (byte {at}) does not stamp in nanoseconds"
                            )))
                        }
                        _ => {}
                    }
                }
                capture.interfaces.push(name);
            }
            EPB => {
                let head = |i: usize| u32_of(body[i..i + 4].try_into().expect("4 bytes"));
                if body.len() < 20 {
                    return Err(invalid(format!("a short packet block at byte {at}")));
                }
                let caplen = head(12) as usize;
                let data = body.get(20..20 + caplen).ok_or_else(|| {
                    invalid(format!(
                        "the packet block at byte {at} is shorter than its packet"
                    ))
                })?;
                let interface = head(0);
                if interface as usize >= capture.interfaces.len() {
                    return Err(invalid(format!(
                        "the packet at byte {at} is on interface {interface}, which was not \
                         described"
                    )));
                }
                let opts = body.get(20 + caplen + pad(caplen)..).unwrap_or_default();
                let direction = options(opts, u16_of)
                    .into_iter()
                    .find(|(code, v)| *code == OPT_EPB_FLAGS && v.len() == 4)
                    .and_then(|(_, v)| match u32_of(v.try_into().expect("4 bytes")) & 3 {
                        1 => Some(Direction::Inbound),
                        2 => Some(Direction::Outbound),
                        _ => None,
                    });
                capture.packets.push(Packet {
                    interface,
                    ts_ns: (u64::from(head(4)) << 32) | u64::from(head(8)),
                    data: data.to_vec(),
                    orig_len: head(16),
                    direction,
                });
            }
            _ => {}
        }
        at += total;
    }
    Ok(capture)
}

/// Writes `captures` to `out` as one file: every capture's interfaces one after another
/// (renumbered), and their packets in timestamp order (equal times in the captures' order),
/// the first `limit` of them when given. Returns the packets written. Captures from several
/// hosts are ordered by their hosts' clocks, which differ by however well they are
/// synchronised.
pub fn merge<W: Write>(captures: Vec<Capture>, out: W, limit: Option<u64>) -> io::Result<u64> {
    let names: Vec<String> = captures
        .iter()
        .flat_map(|c| c.interfaces.iter().cloned())
        .collect();
    let mut packets = Vec::new();
    let mut first = 0;
    for c in captures {
        let base = first;
        first += c.interfaces.len() as u32;
        packets.extend(c.packets.into_iter().map(|mut p| {
            p.interface += base;
            p
        }));
    }
    packets.sort_by_key(|p| p.ts_ns);
    let keep = limit.map_or(packets.len(), |l| packets.len().min(l as usize));
    let mut w = PcapngWriter::new(out, &names)?;
    for p in &packets[..keep] {
        w.packet(p.interface, p.ts_ns, &p.data, p.orig_len, p.direction)?;
    }
    w.finish()?;
    Ok(keep as u64)
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
    fn captures_merge_with_interfaces_renumbered_and_packets_in_time_order() {
        let file = |names: &[&str], packets: &[(u32, u64, u8)]| {
            let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
            let mut w = PcapngWriter::new(Vec::new(), &names).unwrap();
            for &(i, ts, byte) in packets {
                let dir = (byte % 2 == 0).then_some(Direction::Inbound);
                w.packet(i, ts, &[byte; 3], 60, dir).unwrap();
            }
            w.finish().unwrap()
        };
        let h1 = file(&["a:eth0", "b:eth1"], &[(0, 10, 1), (1, 30, 2), (0, 50, 3)]);
        let h2 = file(&["c:eth0"], &[(0, 20, 4), (0, 40, 5)]);
        let read_back = read(&h1).unwrap();
        assert_eq!(read_back.interfaces, ["a:eth0", "b:eth1"]);
        assert_eq!(read_back.packets[1].direction, Some(Direction::Inbound));
        assert_eq!(read_back.packets[2].direction, None);
        let captures = vec![read_back, read(&h2).unwrap()];
        let mut merged = Vec::new();
        assert_eq!(merge(captures.clone(), &mut merged, None).unwrap(), 5);
        let m = read(&merged).unwrap();
        assert_eq!(m.interfaces, ["a:eth0", "b:eth1", "c:eth0"]);
        let seen: Vec<(u32, u64, u8)> = m
            .packets
            .iter()
            .map(|p| (p.interface, p.ts_ns, p.data[0]))
            .collect();
        assert_eq!(
            seen,
            [(0, 10, 1), (2, 20, 4), (1, 30, 2), (2, 40, 5), (0, 50, 3)]
        );
        assert!(m
            .packets
            .iter()
            .all(|p| p.orig_len == 60 && p.data.len() == 3));
        let mut first = Vec::new();
        assert_eq!(merge(captures, &mut first, Some(2)).unwrap(), 2);
        assert_eq!(read(&first).unwrap().packets[1].ts_ns, 20);
    }

    #[test]
    fn files_cut_short_or_of_another_kind_are_refused_saying_where() {
        let mut w = PcapngWriter::new(Vec::new(), &["a:eth0".to_owned()]).unwrap();
        w.packet(0, 1, &[1; 8], 8, None).unwrap();
        let whole = w.finish().unwrap();
        let e = read(&whole[..whole.len() - 2]).unwrap_err().to_string();
        assert!(e.contains("block at byte 72 has length 40"), "{e}");
        let e = read(b"\xd4\xc3\xb2\xa1 a classic pcap")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a pcapng file"), "{e}");
    }

    proptest::proptest! {
        #[test]
        fn any_prefix_of_a_capture_reads_as_its_whole_blocks_before_the_cut(
            sizes in proptest::collection::vec(0usize..70, 0..6),
            interfaces in 1usize..4,
            cut_at in 0.0f64..=1.0,
        ) {
            let names: Vec<String> = (0..interfaces).map(|i| format!("n{i}:eth{i}")).collect();
            let packets: Vec<(u32, u64, Vec<u8>, Option<Direction>)> = sizes
                .iter()
                .enumerate()
                .map(|(k, &n)| {
                    let dir = (k % 2 == 0).then_some(Direction::Outbound);
                    ((k % interfaces) as u32, 100 + k as u64, vec![k as u8; n], dir)
                })
                .collect();
            // The file with the first `j` interfaces and no packet, or all of them and the
            // first `k` packets: the prefixes that end on a block's end.
            let file = |j: usize, k: usize| {
                let mut w = PcapngWriter::new(Vec::new(), &names[..j]).unwrap();
                for (i, ts, data, dir) in &packets[..k] {
                    w.packet(*i, *ts, data, 60, *dir).unwrap();
                }
                w.finish().unwrap()
            };
            let whole = file(interfaces, packets.len());
            let cut = (whole.len() as f64 * cut_at) as usize;
            let got = read_complete(&whole[..cut]).unwrap();
            let expected = if cut < file(0, 0).len() {
                Capture::default()
            } else if cut < file(interfaces, 0).len() {
                let j = (0..interfaces).rev().find(|&j| file(j, 0).len() <= cut).unwrap();
                read(&file(j, 0)).unwrap()
            } else {
                let k = (0..=packets.len()).rev().find(|&k| file(interfaces, k).len() <= cut);
                read(&file(interfaces, k.unwrap())).unwrap()
            };
            proptest::prop_assert_eq!(got, expected);
        }
    }

    #[test]
    fn a_cut_capture_still_refuses_what_is_not_pcapng() {
        let e = read_complete(b"\xd4\xc3\xb2\xa1 a classic pcap")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a pcapng file"), "{e}");
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
