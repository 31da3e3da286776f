//! The lab's captures as whole files: read back through `rtemu-capture`'s reader and merged,
//! so that captures made on several hosts become one file ([`merge`]). They are written by
//! `rtemu-capture`'s [`PcapngWriter`]: one section, one Ethernet interface per `node:if`,
//! nanosecond timestamps, each packet's direction as its `epb_flags`. A file of several
//! sections (captures joined with `cat`, as Wireshark reads them) is read whole: each
//! section's interfaces follow the earlier sections'.

use std::io::{self, Write};

use rtemu_capture::{CaptureError, CaptureReader, Options};
pub use rtemu_capture::{Direction, PcapngWriter};

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

/// Reads a pcapng file (what [`PcapngWriter`] writes, in either byte order, or several such
/// joined: every section's interfaces, numbered across the file); an interface without
/// `if_name` is called `if` and its index. A file cut short, or of another kind, is an error
/// saying where.
pub fn read(bytes: &[u8]) -> io::Result<Capture> {
    read_with(bytes, false)
}

/// Reads what [`read`] does from the start of such a file that may be cut anywhere (a capture
/// stream stopped before its end): the blocks before the cut, a truncated last block left out
/// (each block carries its length, so a cut is told from a whole block). Bytes that are not
/// such a file are still an error.
pub fn read_complete(bytes: &[u8]) -> io::Result<Capture> {
    read_with(bytes, true)
}

/// [`read`], or with `cut` [`read_complete`].
fn read_with(bytes: &[u8], cut: bool) -> io::Result<Capture> {
    let invalid = |e: CaptureError| io::Error::new(io::ErrorKind::InvalidData, e);
    // The reader takes pcap too; the lab's captures and what `merge` writes are pcapng.
    if bytes.len() >= 4 && bytes[..4] != [0x0a, 0x0d, 0x0d, 0x0a] {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "not a pcapng file (no section header)",
        ));
    }
    let options = Options {
        interfaceless: true,
        cut_end: cut,
        // A second section numbers its interfaces from 0 again: the capture's list holds them
        // all, so its packets' indices count the earlier sections' too.
        file_interfaces: true,
        ..Options::default()
    };
    let mut reader = CaptureReader::with_options(bytes, options).map_err(invalid)?;
    let mut packets = Vec::new();
    while let Some(p) = reader.next_packet().map_err(invalid)? {
        packets.push(Packet {
            interface: p.interface,
            ts_ns: p.frame.ts_ns,
            data: p.frame.data.to_vec(),
            orig_len: p.frame.orig_len,
            direction: p.direction(),
        });
    }
    let interfaces = reader
        .interfaces()
        .iter()
        .enumerate()
        .map(|(i, f)| f.name.clone().unwrap_or_else(|| format!("if{i}")))
        .collect();
    Ok(Capture {
        interfaces,
        packets,
    })
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

    /// A capture of interfaces `names` and `packets` (interface, time, a byte its data
    /// repeats), as a lab writes one.
    fn file(names: &[&str], packets: &[(u32, u64, u8)]) -> Vec<u8> {
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let mut w = PcapngWriter::new(Vec::new(), &names).unwrap();
        for &(i, ts, byte) in packets {
            let dir = (byte % 2 == 0).then_some(Direction::Inbound);
            w.packet(i, ts, &[byte; 3], 60, dir).unwrap();
        }
        w.finish().unwrap()
    }

    /// Each packet's interface, time and byte.
    fn seen(capture: &Capture) -> Vec<(u32, u64, u8)> {
        let packets = capture.packets.iter();
        packets.map(|p| (p.interface, p.ts_ns, p.data[0])).collect()
    }

    #[test]
    fn captures_merge_with_interfaces_renumbered_and_packets_in_time_order() {
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
        assert_eq!(
            seen(&m),
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

    /// Captures joined with `cat` are one file of several sections: read whole, each
    /// section's interfaces after the earlier ones', they merge to the very file their
    /// captures read one by one merge to.
    #[test]
    fn a_file_of_several_sections_reads_every_section_s_interfaces_and_packets() {
        let h1 = file(&["a:eth0", "b:eth1"], &[(0, 10, 1), (1, 30, 2)]);
        // An interface that carries nothing, and one whose packets come later.
        let h2 = file(&["c:eth0", "d:eth0", "e:eth1"], &[(2, 20, 4), (2, 40, 5)]);
        let joined = [&h1[..], &h2[..]].concat();
        let whole = read(&joined).unwrap();
        let names = ["a:eth0", "b:eth1", "c:eth0", "d:eth0", "e:eth1"];
        assert_eq!(whole.interfaces, names);
        assert_eq!(
            seen(&whole),
            [(0, 10, 1), (1, 30, 2), (4, 20, 4), (4, 40, 5)]
        );
        let mut at_once = Vec::new();
        merge(vec![whole], &mut at_once, None).unwrap();
        let mut one_by_one = Vec::new();
        let captures = vec![read(&h1).unwrap(), read(&h2).unwrap()];
        merge(captures, &mut one_by_one, None).unwrap();
        assert_eq!(at_once, one_by_one);
        // A stream cut inside the second section's first packet: both sections' interfaces,
        // the first's packets.
        let cut = read_complete(&joined[..joined.len() - 40]).unwrap();
        assert_eq!(cut.interfaces, names);
        assert_eq!(seen(&cut), [(0, 10, 1), (1, 30, 2)]);
    }

    #[test]
    fn files_cut_short_or_of_another_kind_are_refused_saying_where() {
        let mut w = PcapngWriter::new(Vec::new(), &["a:eth0".to_owned()]).unwrap();
        w.packet(0, 1, &[1; 8], 8, None).unwrap();
        let whole = w.finish().unwrap();
        // The packet's block starts at byte 72; its trailing length, at 108, is cut short.
        let e = read(&whole[..whole.len() - 2]).unwrap_err().to_string();
        assert!(e.contains("at byte 108: expected 4 bytes, 2 remain"), "{e}");
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
}
