//! The simulator's pcap writer against its golden file and the reader, and a capture read as
//! the simulator's frame source.

use std::path::PathBuf;

use proptest::prelude::*;
use rtemu_sim::capture::{CaptureError, CaptureReader, PcapWriter, WriteError, MAX_FRAME_LEN};
use rtemu_sim::source::{FrameSource, ProgressUnit, LINKTYPE_ETHERNET};

/// A golden file: rtemu-capture keeps them all, written by its `tests/data/make_captures.py`.
fn data_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../rtemu-capture/tests/data")
        .join(name)
}

fn frame(i: usize, caplen: usize) -> Vec<u8> {
    (0..caplen).map(|k| ((i * 7 + k) % 256) as u8).collect()
}

/// A frame as owned values: timestamp, bytes, original length.
type Owned = (u64, Vec<u8>, u32);

/// Reads every frame through a buffer of `capacity` bytes, as the simulator does.
fn read_all_with(bytes: &[u8], capacity: usize) -> Result<(u32, Vec<Owned>), CaptureError> {
    let mut reader = CaptureReader::with_capacity(bytes, capacity)?;
    let mut frames = Vec::new();
    while let Some(f) = FrameSource::next_frame(&mut reader).map_err(|e| match e {
        rtemu_sim::source::SourceError::Capture(e) => e,
        e => panic!("{e}"),
    })? {
        frames.push((f.ts_ns, f.data.to_vec(), f.orig_len));
    }
    Ok((FrameSource::link_type(&reader), frames))
}

fn read_all(bytes: &[u8]) -> Result<(u32, Vec<Owned>), CaptureError> {
    read_all_with(bytes, 256 * 1024)
}

#[test]
fn progress_counts_bytes_read_and_the_file_length() {
    let path = data_path("small-le-us.pcap");
    let mut reader = CaptureReader::open(&path).unwrap();
    let len = std::fs::metadata(&path).unwrap().len();
    assert_eq!(reader.progress().total, Some(len));
    assert_eq!(reader.progress().unit, ProgressUnit::Bytes);
    assert_eq!(reader.progress().done, 24);
    reader.next_frame().unwrap();
    assert_eq!(reader.progress().done, 24 + 16 + 60);
    while FrameSource::next_frame(&mut reader).unwrap().is_some() {}
    assert_eq!(reader.progress().done, len);
}

/// The frames whose expected output `written-ns.pcap` holds (see make_captures.py).
fn written_frames() -> Vec<Owned> {
    vec![
        (0, frame(0, 42), 42),
        (1_500_000_001, frame(1, 60), 1514),
        (4_294_967_295_999_999_999, frame(2, 1), 0),
    ]
}

#[test]
fn writer_output_matches_the_golden_file() {
    let mut writer = PcapWriter::new(Vec::new(), LINKTYPE_ETHERNET).unwrap();
    for (ts, bytes, orig) in written_frames() {
        writer.write_packet(ts, &bytes, orig).unwrap();
    }
    assert_eq!(
        writer.finish().unwrap(),
        std::fs::read(data_path("written-ns.pcap")).unwrap()
    );
}

#[test]
fn writer_rejects_what_pcap_cannot_hold() {
    let mut writer = PcapWriter::new(Vec::new(), LINKTYPE_ETHERNET).unwrap();
    let err = writer
        .write_packet(4_294_967_296_000_000_000, &[0; 42], 42)
        .unwrap_err();
    assert!(
        matches!(err, WriteError::TimestampOutOfRange { .. }),
        "{err}"
    );
    let big = vec![0; MAX_FRAME_LEN as usize + 1];
    let err = writer.write_packet(0, &big, 0).unwrap_err();
    assert!(
        matches!(err, WriteError::FrameTooLong { len } if len == big.len()),
        "{err}"
    );
}

#[test]
fn the_reader_keeps_the_link_type() {
    let writer = PcapWriter::new(Vec::new(), 105).unwrap();
    let (link, frames) = read_all(&writer.finish().unwrap()).unwrap();
    assert_eq!((link, frames.len()), (105, 0));
}

proptest! {
    #[test]
    fn writer_then_reader_round_trips(
        link in 0u32..=0xffff,
        frames in prop::collection::vec(
            (0u64..4_294_967_296_000_000_000, prop::collection::vec(any::<u8>(), 0..2000), any::<u32>()),
            0..20,
        ),
        capacity in prop_oneof![Just(256 * 1024), 0usize..3000],
    ) {
        let mut writer = PcapWriter::new(Vec::new(), link).unwrap();
        for (ts, bytes, orig) in &frames {
            writer.write_packet(*ts, bytes, *orig).unwrap();
        }
        let (read_link, read) = read_all_with(&writer.finish().unwrap(), capacity).unwrap();
        prop_assert_eq!(read_link, link);
        let expected: Vec<Owned> =
            frames.into_iter().map(|(ts, b, orig)| { let l = b.len() as u32; (ts, b, orig.max(l)) }).collect();
        prop_assert_eq!(read, expected);
    }
}
