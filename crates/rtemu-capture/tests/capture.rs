//! The capture reader: golden files, every truncation, corrupt input, and the lab's captures
//! read back.
//!
//! The golden files in `tests/data/` are written by `tests/data/make_captures.py` straight from
//! the format specifications, independently of the Rust code. Frame `i` holds the bytes
//! `(i * 7 + k) % 256`; [`frame`] rebuilds them.

use std::path::PathBuf;

use proptest::prelude::*;
use rtemu_capture::{CaptureError, CaptureReader, Direction, Options, PcapngWriter, MAX_FRAME_LEN};
use rtemu_model::wire::link_type::ETHERNET as LINKTYPE_ETHERNET;

fn data(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn frame(i: usize, caplen: usize) -> Vec<u8> {
    (0..caplen).map(|k| ((i * 7 + k) % 256) as u8).collect()
}

/// A frame as owned values: timestamp, bytes, original length.
type Owned = (u64, Vec<u8>, u32);

/// Reads every frame, or the first error.
fn read_all(bytes: &[u8]) -> Result<(u32, Vec<Owned>), CaptureError> {
    read_all_with(bytes, 256 * 1024)
}

/// Reads every frame through a buffer of `capacity` bytes.
fn read_all_with(bytes: &[u8], capacity: usize) -> Result<(u32, Vec<Owned>), CaptureError> {
    let mut reader = CaptureReader::with_capacity(bytes, capacity)?;
    let mut frames = Vec::new();
    while let Some(f) = reader.next_frame()? {
        frames.push((f.ts_ns, f.data.to_vec(), f.orig_len));
        assert!(
            frames.len() <= bytes.len(),
            "a frame per byte at most: the reader must advance"
        );
    }
    Ok((
        reader.link_type().expect("a strict reader has a link type"),
        frames,
    ))
}

fn expected_pcap_frames(frac_ns: u64) -> Vec<Owned> {
    vec![
        (1_000_000_000 + 500 * frac_ns, frame(0, 60), 60),
        (2_000_000_000, frame(1, 1514), 1514),
        (2_000_000_000 + 999 * frac_ns, frame(2, 100), 1500),
    ]
}

fn expected_pcapng_frames() -> Vec<Owned> {
    vec![
        (1_000_500_000, frame(0, 60), 60),
        (2_000_000_123, frame(1, 61), 61),
        (103_500_000_000, frame(2, 100), 1500),
        (103_500_000_000, frame(3, 42), 42),
        (4_000_000_000, frame(4, 64), 64),
    ]
}

#[test]
fn reads_pcap_in_both_byte_orders_and_resolutions() {
    // Little-endian in microseconds, big-endian in nanoseconds.
    for (name, frac_ns) in [("small-le-us.pcap", 1000), ("small-be-ns.pcap", 1)] {
        let (link, frames) = read_all(&data(name)).unwrap();
        assert_eq!(link, LINKTYPE_ETHERNET, "{name}");
        assert_eq!(frames, expected_pcap_frames(frac_ns), "{name}");
    }
}

#[test]
fn reads_pcapng_in_both_byte_orders() {
    for name in ["small-le.pcapng", "small-be.pcapng"] {
        let (link, frames) = read_all(&data(name)).unwrap();
        assert_eq!(link, LINKTYPE_ETHERNET, "{name}");
        assert_eq!(frames, expected_pcapng_frames(), "{name}");
    }
}

/// Records that straddle the input buffer's end are copied; those inside it are lent in
/// place. Every buffer size must give the same frames and the same errors.
#[test]
fn any_buffer_size_reads_the_same_frames() {
    for name in [
        "small-le-us.pcap",
        "small-be-ns.pcap",
        "small-le.pcapng",
        "small-be.pcapng",
    ] {
        let bytes = data(name);
        let whole = read_all(&bytes).unwrap();
        for capacity in (0..200).chain([1513, 1514, 1530, 1531, 1532]) {
            assert_eq!(
                read_all_with(&bytes, capacity).unwrap(),
                whole,
                "{name}, buffer {capacity}"
            );
        }
        let cut = &bytes[..bytes.len() - 3];
        let whole = read_all(cut).unwrap_err().to_string();
        for capacity in [0, 1, 7, 64, 100] {
            assert_eq!(
                read_all_with(cut, capacity).unwrap_err().to_string(),
                whole,
                "{name}"
            );
        }
    }
}

#[test]
fn a_second_section_may_change_byte_order() {
    let mut bytes = data("small-le.pcapng");
    bytes.extend(data("small-be.pcapng"));
    let (_, frames) = read_all(&bytes).unwrap();
    let mut expected = expected_pcapng_frames();
    expected.extend(expected_pcapng_frames());
    assert_eq!(frames, expected);
}

/// Where each pcapng block ends, walking the lengths independently of the reader.
fn pcapng_block_ends(bytes: &[u8]) -> Vec<usize> {
    let (mut at, mut ends) = (0, Vec::new());
    while at < bytes.len() {
        let le = bytes[8..12] == [0x4d, 0x3c, 0x2b, 0x1a];
        let raw = [bytes[at + 4], bytes[at + 5], bytes[at + 6], bytes[at + 7]];
        at += if le {
            u32::from_le_bytes(raw)
        } else {
            u32::from_be_bytes(raw)
        } as usize;
        ends.push(at);
    }
    ends
}

/// Where each pcap record ends, walking the lengths independently of the reader.
fn pcap_record_ends(bytes: &[u8]) -> Vec<usize> {
    let le = bytes[0] == 0xd4 || bytes[0] == 0x4d;
    let (mut at, mut ends) = (24, vec![24]);
    while at < bytes.len() {
        let raw = [bytes[at + 8], bytes[at + 9], bytes[at + 10], bytes[at + 11]];
        at += 16
            + if le {
                u32::from_le_bytes(raw)
            } else {
                u32::from_be_bytes(raw)
            } as usize;
        ends.push(at);
    }
    ends
}

/// Cutting a file anywhere gives an error naming an offset inside what is left, except at a
/// record or block boundary, where the shorter file is valid and holds the frames before it.
fn check_every_truncation(bytes: &[u8], boundaries: &[usize], first_valid: usize) {
    let (_, all) = read_all(bytes).unwrap();
    for cut in 0..bytes.len() {
        match read_all(&bytes[..cut]) {
            Ok((_, frames)) => {
                assert!(
                    boundaries.contains(&cut) && cut >= first_valid,
                    "cut at {cut} read without error"
                );
                assert_eq!(frames[..], all[..frames.len()], "cut at {cut}");
            }
            Err(e) => {
                assert!(
                    !boundaries.contains(&cut) || cut < first_valid,
                    "cut at {cut}: {e}"
                );
                let offset = e.offset().unwrap();
                assert!(
                    offset <= cut as u64,
                    "cut at {cut}: error names byte {offset}: {e}"
                );
                assert!(
                    e.to_string().contains(&format!("at byte {offset}")) || cut == 0 || offset == 0,
                    "{e}"
                );
            }
        }
    }
}

#[test]
fn truncating_a_pcap_anywhere_gives_an_error_inside_the_file() {
    for name in ["small-le-us.pcap", "small-be-ns.pcap"] {
        let bytes = data(name);
        check_every_truncation(&bytes, &pcap_record_ends(&bytes), 24);
    }
}

#[test]
fn truncating_a_pcapng_anywhere_gives_an_error_inside_the_file() {
    for name in ["small-le.pcapng", "small-be.pcapng"] {
        let bytes = data(name);
        let ends = pcapng_block_ends(&bytes);
        // A pcapng file is valid from the end of its first interface description, the
        // second block.
        check_every_truncation(&bytes, &ends, ends[1]);
    }
}

#[test]
fn a_truncated_record_names_its_offset_and_lengths() {
    let bytes = data("small-le-us.pcap");
    // Record 1 starts at 24 + 16 + 60 = 100 and declares 1514 bytes; keep 200 of them.
    let err = read_all(&bytes[..100 + 16 + 200]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "truncated packet record at byte 100: header says 1514 bytes, 200 remain"
    );
}

/// A structure of fixed size cut short says its whole size from where it starts; a record's
/// data cut short says what its header declared (above).
#[test]
fn a_truncated_structure_names_its_offset_and_whole_size() {
    let pcap = data("small-le-us.pcap");
    let err = read_all(&pcap[..24 + 5]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "truncated packet record header at byte 24: expected 16 bytes, 5 remain"
    );
    let pcapng = data("small-le.pcapng");
    // The section header's magic and length are read first, the rest of its 28 bytes after.
    let err = read_all(&pcapng[..20]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "truncated pcapng section header block at byte 0: expected 24 bytes, 20 remain"
    );
    let second = pcapng_block_ends(&pcapng)[0];
    let err = read_all(&pcapng[..second + 3]).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("truncated pcapng block header at byte {second}: expected 8 bytes, 3 remain")
    );
}

fn le_pcap_header(link: u32) -> Vec<u8> {
    let mut h = vec![
        0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0,
    ];
    h.extend(link.to_le_bytes());
    h
}

#[test]
fn a_huge_captured_length_is_an_error_not_an_allocation() {
    let mut bytes = le_pcap_header(1);
    bytes.extend([0; 8]);
    bytes.extend(0xffff_fff0u32.to_le_bytes());
    bytes.extend(0xffff_fff0u32.to_le_bytes());
    let err = read_all(&bytes).unwrap_err();
    assert!(
        matches!(
            err,
            CaptureError::FrameTooLong {
                offset: 24,
                len: 0xffff_fff0,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("at byte 24"), "{err}");
}

#[test]
fn an_original_length_below_the_captured_one_is_raised_to_it() {
    let mut bytes = le_pcap_header(1);
    bytes.extend([0; 8]);
    bytes.extend(10u32.to_le_bytes());
    bytes.extend(0u32.to_le_bytes());
    bytes.extend([7; 10]);
    let (_, frames) = read_all(&bytes).unwrap();
    assert_eq!(frames, [(0, vec![7; 10], 10)]);
}

#[test]
fn a_missing_file_is_named() {
    let err = CaptureReader::open("/nonexistent/rtemu/x.pcap").unwrap_err();
    assert!(matches!(err, CaptureError::Open { .. }), "{err}");
    assert!(
        err.to_string()
            .starts_with("cannot open /nonexistent/rtemu/x.pcap: "),
        "{err}"
    );
}

/// Yields `good` bytes, then fails.
struct FailingReader<'a> {
    good: &'a [u8],
}

impl std::io::Read for FailingReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.good.is_empty() {
            return Err(std::io::Error::other("disk on fire"));
        }
        let n = buf.len().min(self.good.len());
        buf[..n].copy_from_slice(&self.good[..n]);
        self.good = &self.good[n..];
        Ok(n)
    }
}

#[test]
fn a_read_error_names_where_it_happened() {
    let bytes = data("small-le-us.pcap");
    let mut reader = CaptureReader::with_capacity(
        FailingReader {
            good: &bytes[..130],
        },
        16,
    )
    .unwrap();
    reader.next_frame().unwrap();
    let err = reader.next_frame().unwrap_err();
    assert!(matches!(err, CaptureError::Io { offset: 130, .. }), "{err}");
    assert_eq!(err.to_string(), "read error at byte 130: disk on fire");
}

#[test]
fn foreign_files_are_named() {
    let err = read_all(b"\x1f\x8b\x08\x00rest of a gzip file").unwrap_err();
    assert!(err.to_string().contains("gzip"), "{err}");
    let err = read_all(b"hello, world").unwrap_err();
    assert!(
        matches!(
            err,
            CaptureError::NotACapture {
                found: [b'h', b'e', b'l', b'l'],
                ..
            }
        ),
        "{err}"
    );
    let mut bytes = le_pcap_header(1);
    bytes[4] = 3;
    let err = read_all(&bytes).unwrap_err();
    assert!(
        matches!(err, CaptureError::UnsupportedVersion { major: 3, .. }),
        "{err}"
    );
}

/// A little-endian pcapng block.
fn block(kind: u32, body: &[u8]) -> Vec<u8> {
    let mut body = body.to_vec();
    body.resize(body.len().next_multiple_of(4), 0);
    let len = (body.len() + 12) as u32;
    let mut b = kind.to_le_bytes().to_vec();
    b.extend(len.to_le_bytes());
    b.extend(body);
    b.extend(len.to_le_bytes());
    b
}

fn shb() -> Vec<u8> {
    let mut body = 0x1a2b_3c4du32.to_le_bytes().to_vec();
    body.extend([1, 0, 0, 0]);
    body.extend((-1i64).to_le_bytes());
    block(0x0a0d_0d0a, &body)
}

fn idb(link: u16) -> Vec<u8> {
    let mut body = link.to_le_bytes().to_vec();
    body.extend([0; 6]);
    block(1, &body)
}

fn epb(iface: u32, data: &[u8]) -> Vec<u8> {
    let mut body = iface.to_le_bytes().to_vec();
    body.extend([0; 8]);
    body.extend((data.len() as u32).to_le_bytes());
    body.extend((data.len() as u32).to_le_bytes());
    body.extend(data);
    block(6, &body)
}

#[test]
fn interfaces_must_share_one_link_type() {
    let same = [shb(), idb(1), epb(0, &[1; 50]), idb(1), epb(1, &[2; 50])].concat();
    let (_, frames) = read_all(&same).unwrap();
    assert_eq!(frames.len(), 2);
    let mixed = [shb(), idb(1), epb(0, &[1; 50]), idb(105)].concat();
    let offset = (shb().len() + idb(1).len() + epb(0, &[1; 50]).len()) as u64;
    let err = read_all(&mixed).unwrap_err();
    assert!(
        matches!(err, CaptureError::MixedLinkTypes { first: 1, found: 105, offset: o } if o == offset),
        "{err}"
    );
}

#[test]
fn pcapng_structure_errors_name_the_block() {
    let at_packet = (shb().len() + idb(1).len()) as u64;
    let err = read_all(&[shb(), idb(1), epb(1, &[0; 50])].concat()).unwrap_err();
    assert!(
        matches!(err, CaptureError::UnknownInterface { interface: 1, declared: 1, offset, .. } if offset == at_packet),
        "{err}"
    );

    let err = read_all(&[shb(), epb(0, &[0; 50])].concat()).unwrap_err();
    assert!(
        matches!(err, CaptureError::Malformed { offset, .. } if offset == shb().len() as u64),
        "{err}"
    );

    let err = read_all(&shb()).unwrap_err();
    assert!(
        matches!(err, CaptureError::NoInterface { offset } if offset == shb().len() as u64),
        "{err}"
    );

    let mut bad_trailer = [shb(), idb(1), epb(0, &[0; 50])].concat();
    let last = bad_trailer.len() - 4;
    bad_trailer[last] ^= 4;
    let err = read_all(&bad_trailer).unwrap_err();
    assert!(
        matches!(err, CaptureError::BlockLengthMismatch { offset, .. } if offset == at_packet),
        "{err}"
    );

    let mut odd_length = [shb(), idb(1), epb(0, &[0; 50])].concat();
    odd_length[at_packet as usize + 4] += 1;
    let err = read_all(&odd_length).unwrap_err();
    assert!(
        matches!(err, CaptureError::BadBlockLength { offset, .. } if offset == at_packet),
        "{err}"
    );
}

/// The golden files plus the small corpus of odd inputs kept in `tests/data/corpus/`.
fn seeds() -> Vec<Vec<u8>> {
    let mut seeds: Vec<Vec<u8>> = [
        "small-le-us.pcap",
        "small-be-ns.pcap",
        "small-le.pcapng",
        "small-be.pcapng",
    ]
    .iter()
    .map(|n| data(n))
    .collect();
    let corpus = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/corpus");
    let mut paths: Vec<_> = std::fs::read_dir(corpus)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    seeds.extend(paths.iter().map(|p| std::fs::read(p).unwrap()));
    seeds
}

#[test]
fn every_corpus_file_reads_or_fails_with_an_offset_inside_it() {
    for (i, bytes) in seeds().iter().enumerate() {
        if let Err(e) = read_all(bytes) {
            let offset = e.offset().unwrap();
            assert!(offset <= bytes.len() as u64, "seed {i}: {e}");
        }
    }
}

#[test]
fn corpus_files_give_their_specific_errors() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/corpus");
    let cases = [
        ("huge-caplen.pcap", "corrupt packet record at byte 24: captured length 4294967295 bytes exceeds the maximum of 262144"),
        ("epb-overrun.pcapng", "corrupt pcapng enhanced packet block at byte 48: captured length runs past the end of the block"),
        ("bad-tsresol.pcapng", "interface description block at byte 28: unsupported if_tsresol 0xff"),
        ("mixed-links.pcapng", "interface description block at byte 48 has link type 105, but an earlier interface has link type 1"),
        ("option-overrun.pcapng", "corrupt pcapng interface description block at byte 28: an option runs past the end of the block"),
        ("late-timestamp.pcapng", "pcapng enhanced packet block at byte 48: timestamp out of range"),
    ];
    for (name, message) in cases {
        let err = read_all(&std::fs::read(dir.join(name)).unwrap()).unwrap_err();
        assert!(err.to_string().starts_with(message), "{name}: {err}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    #[test]
    fn mutated_captures_never_panic(
        seed in any::<prop::sample::Index>(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
        capacity in prop_oneof![Just(256 * 1024), 1usize..200],
    ) {
        let seeds = seeds();
        let mut bytes = seeds[seed.index(seeds.len())].clone();
        for (at, value) in edits {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        let keep = bytes.len() - cut.index(bytes.len() / 4 + 1);
        bytes.truncate(keep);
        match read_all_with(&bytes, capacity) {
            Ok((_, frames)) => {
                prop_assert!(frames.iter().all(|(_, d, _)| d.len() <= MAX_FRAME_LEN as usize));
            }
            Err(e) => prop_assert!(e.offset().unwrap() <= bytes.len() as u64, "{}", e),
        }
    }
}

// The lab's captures: what the pcapng writer writes reads back whole through the reader
// (interfaces and their names, timestamps, lengths, directions), and a capture stream cut
// anywhere reads as the packets whose blocks end before the cut.

/// A packet as owned values: interface, its name, timestamp, bytes, original length,
/// direction.
type Seen = (u32, Option<String>, u64, Vec<u8>, u32, Option<Direction>);

/// Every packet `bytes` holds, read with `options`, and the interfaces' names at the end.
fn read_packets(
    bytes: &[u8],
    options: Options,
) -> Result<(Vec<Seen>, Vec<Option<String>>), CaptureError> {
    let mut reader = CaptureReader::with_options(bytes, options)?;
    let mut packets = Vec::new();
    while let Some(p) = reader.next_packet()? {
        let name = p.interface_name.map(str::to_owned);
        let f = p.frame;
        packets.push((
            p.interface,
            name,
            f.ts_ns,
            f.data.to_vec(),
            f.orig_len,
            p.direction(),
        ));
    }
    let names = reader.interfaces().iter().map(|i| i.name.clone()).collect();
    Ok((packets, names))
}

fn lenient(capacity: usize) -> Options {
    Options {
        capacity,
        interfaceless: true,
        cut_end: true,
        ..Options::default()
    }
}

fn direction() -> impl Strategy<Value = Option<Direction>> {
    prop_oneof![
        Just(None),
        Just(Some(Direction::Inbound)),
        Just(Some(Direction::Outbound))
    ]
}

proptest! {
    #[test]
    fn written_packets_read_back_identically_and_a_cut_reads_a_prefix(
        names in prop::collection::vec("[a-z0-9:.-]{0,14}", 1..4),
        packets in prop::collection::vec(
            (any::<prop::sample::Index>(), any::<u64>(), prop::collection::vec(any::<u8>(), 0..120), 0u32..100, direction()),
            0..10,
        ),
        capacity in prop_oneof![Just(256 * 1024), 1usize..300],
        cut in any::<prop::sample::Index>(),
    ) {
        let mut w = PcapngWriter::new(Vec::new(), &names).unwrap();
        let mut expected = Vec::new();
        for (iface, ts, data, extra, dir) in packets {
            let i = iface.index(names.len()) as u32;
            let orig_len = data.len() as u32 + extra;
            w.packet(i, ts, &data, orig_len, dir).unwrap();
            expected.push((i, Some(names[i as usize].clone()), ts, data, orig_len, dir));
        }
        let file = w.finish().unwrap();
        let all_names: Vec<Option<String>> = names.iter().cloned().map(Some).collect();

        let strict = Options { capacity, ..Options::default() };
        let (got, got_names) = read_packets(&file, strict).unwrap();
        prop_assert_eq!(&got, &expected);
        prop_assert_eq!(&got_names, &all_names);

        // Where each packet's block ends, from the format: 28 bytes of header, the data
        // padded to 4, epb_flags and the end of options (12) when a direction is given, and
        // the trailing length.
        let header = PcapngWriter::new(Vec::new(), &names).unwrap().finish().unwrap().len();
        let mut ends = Vec::new();
        let mut at = header;
        for (_, _, _, data, _, dir) in &expected {
            at += 28 + data.len().next_multiple_of(4) + if dir.is_some() { 12 } else { 0 } + 4;
            ends.push(at);
        }
        prop_assert_eq!(at, file.len());

        let cut = cut.index(file.len() + 1);
        let (prefix, prefix_names) = read_packets(&file[..cut], lenient(capacity)).unwrap();
        let whole = ends.iter().filter(|&&end| end <= cut).count();
        prop_assert_eq!(&prefix[..], &expected[..whole]);
        if cut >= header {
            prop_assert_eq!(&prefix_names, &all_names);
        }

        // Read strictly, a cut file is whole up to a block's end, or cut short: never
        // anything else.
        match read_packets(&file[..cut], Options { capacity, interfaceless: true, ..Options::default() }) {
            Ok((packets, _)) => prop_assert_eq!(&packets[..], &expected[..whole]),
            Err(e) => prop_assert!(
                matches!(e, CaptureError::Truncated { .. } | CaptureError::TruncatedData { .. }),
                "cut at {}: {}", cut, e
            ),
        }
    }
}

/// An option: code, length, value padded to 4.
fn option(code: u16, value: &[u8]) -> Vec<u8> {
    let mut o = code.to_le_bytes().to_vec();
    o.extend((value.len() as u16).to_le_bytes());
    o.extend(value);
    o.resize(o.len().next_multiple_of(4), 0);
    o
}

fn idb_with(options: &[u8]) -> Vec<u8> {
    let mut body = 1u16.to_le_bytes().to_vec();
    body.extend([0; 6]);
    body.extend(options);
    block(1, &body)
}

fn epb_with(data: &[u8], options: &[u8]) -> Vec<u8> {
    let mut body = 0u32.to_le_bytes().to_vec();
    body.extend([0; 8]);
    body.extend((data.len() as u32).to_le_bytes());
    body.extend((data.len() as u32).to_le_bytes());
    body.extend(data);
    body.resize(body.len().next_multiple_of(4), 0);
    body.extend(options);
    block(6, &body)
}

#[test]
fn epb_flags_are_found_among_other_options_and_odd_options_never_fail_a_packet() {
    let flags = |v: u32| option(2, &v.to_le_bytes());
    let comment = option(1, b"a comment first");
    let cases: [(Vec<u8>, Option<u32>); 5] = [
        (
            [comment.clone(), flags(2), option(0, &[])].concat(),
            Some(2),
        ),
        ([flags(0x1_0001), flags(2)].concat(), Some(0x1_0001)),
        ([option(0, &[]), flags(1)].concat(), None),
        // A length of 8 for a 4-byte option: not epb_flags.
        (option(2, &[1; 8]), None),
        // An option running past the block's end stops the search.
        ([comment[..4].to_vec(), vec![0; 4]].concat(), None),
    ];
    for (options, want) in cases {
        let file = [
            shb(),
            idb_with(&option(2, b"h1:eth0")),
            epb_with(&[9; 5], &options),
        ]
        .concat();
        for capacity in [256 * 1024, 1, 7, 40, 90] {
            let mut reader = CaptureReader::with_capacity(&file[..], capacity).unwrap();
            let p = reader.next_packet().unwrap().unwrap();
            assert_eq!(p.epb_flags, want, "{options:?}, buffer {capacity}");
            assert_eq!(p.interface_name, Some("h1:eth0"));
            assert_eq!(p.frame.data, [9; 5]);
            assert!(reader.next_packet().unwrap().is_none());
        }
    }
}

#[test]
fn a_section_without_interfaces_is_an_empty_capture_when_allowed() {
    let options = Options {
        interfaceless: true,
        ..Options::default()
    };
    let file = shb();
    let mut reader = CaptureReader::with_options(&file[..], options).unwrap();
    assert_eq!(reader.link_type(), None);
    assert!(reader.interfaces().is_empty());
    assert!(reader.next_packet().unwrap().is_none());
    let err = CaptureReader::new(&file[..]).unwrap_err();
    assert!(
        matches!(err, CaptureError::NoInterface { offset: 28 }),
        "{err}"
    );
}

#[test]
fn a_cut_stream_still_refuses_a_corrupt_block() {
    let mut file = [
        shb(),
        idb_with(&[]),
        epb_with(&[1; 8], &[]),
        epb_with(&[2; 8], &[]),
    ]
    .concat();
    let second = file.len() - epb_with(&[2; 8], &[]).len();
    // A length that is no block's: corrupt, not cut.
    file[second + 4] = 13;
    let mut reader = CaptureReader::with_options(&file[..], lenient(1 << 16)).unwrap();
    assert!(reader.next_packet().unwrap().is_some());
    let err = reader.next_packet().unwrap_err();
    assert!(
        matches!(err, CaptureError::BadBlockLength { offset, len: 13, .. } if offset == second as u64),
        "{err}"
    );
}

#[test]
fn a_second_section_starts_its_own_interfaces() {
    let file = [
        shb(),
        idb_with(&option(2, b"first")),
        epb_with(&[1], &[]),
        shb(),
        idb_with(&option(2, b"second")),
        epb_with(&[2], &[]),
    ]
    .concat();
    let mut reader = CaptureReader::new(&file[..]).unwrap();
    let p = reader.next_packet().unwrap().unwrap();
    assert_eq!(p.interface_name, Some("first"));
    let p = reader.next_packet().unwrap().unwrap();
    assert_eq!((p.interface, p.interface_name), (0, Some("second")));
    let names: Vec<Option<&str>> = reader
        .interfaces()
        .iter()
        .map(|i| i.name.as_deref())
        .collect();
    assert_eq!(names, [Some("second")]);
}

/// Files joined end to end (`cat a.pcapng b.pcapng`) read whole with `file_interfaces`: each
/// section's interfaces numbered after the earlier sections', those declared after a
/// section's last packet too, on both the in-place and the copying path.
#[test]
fn with_file_interfaces_every_section_s_interfaces_are_numbered_across_the_file() {
    let named = |name: &str| idb_with(&option(2, name.as_bytes()));
    let spb = |data: &[u8]| {
        let mut body = (data.len() as u32).to_le_bytes().to_vec();
        body.extend(data);
        block(3, &body)
    };
    let file = [
        shb(),
        named("a"),
        epb(0, &[1; 20]),
        named("b"),
        shb(),
        named("c"),
        named("d"),
        epb(1, &[2; 20]),
        spb(&[3; 20]),
        shb(),
        named("e"),
        epb(0, &[4; 20]),
    ]
    .concat();
    for capacity in [0, 7, 1 << 16] {
        let options = Options {
            capacity,
            file_interfaces: true,
            ..Options::default()
        };
        let (packets, names) = read_packets(&file, options).unwrap();
        let seen: Vec<(u32, Option<&str>, u8)> = packets
            .iter()
            .map(|p| (p.0, p.1.as_deref(), p.3[0]))
            .collect();
        assert_eq!(
            seen,
            [
                (0, Some("a"), 1),
                (3, Some("d"), 2),
                (2, Some("c"), 3),
                (4, Some("e"), 4)
            ],
            "buffer {capacity}"
        );
        let names: Vec<Option<&str>> = names.iter().map(Option::as_deref).collect();
        assert_eq!(
            names,
            [Some("a"), Some("b"), Some("c"), Some("d"), Some("e")]
        );
        // Without, each section numbers its own from 0.
        let (packets, names) = read_packets(
            &file,
            Options {
                capacity,
                ..Options::default()
            },
        )
        .unwrap();
        let per_section: Vec<u32> = packets.iter().map(|p| p.0).collect();
        assert_eq!((per_section, names.len()), (vec![0, 1, 0, 0], 1));
    }
    // An index is of the packet's own section: the third section has one interface.
    let beyond = [&file[..], &epb(1, &[5; 20])].concat();
    let options = Options {
        file_interfaces: true,
        ..Options::default()
    };
    let err = read_packets(&beyond, options).unwrap_err();
    assert!(
        matches!(err, CaptureError::UnknownInterface { interface: 1, declared: 1, offset, .. } if offset == file.len() as u64),
        "{err}"
    );
}
