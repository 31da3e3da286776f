//! Golden files for each form, and "same input, every code path": every buffer size gives the
//! same records as a whole-file read.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use rtemu_testutil::TempDir;
use rtemu_trace::format::Content;
use rtemu_trace::reader::read_all;
use rtemu_trace::{Action, ErrorKind, Format, Header, RecordReader, RecordWriter, TimeUnit};

fn golden(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name)
}

fn sample() -> Vec<Action> {
    let us = |n: u64| n * 1_000;
    vec![
        Action::Pass { delay_ns: us(1234) },
        Action::Drop,
        Action::Dup { delay_ns: us(100) },
        Action::Dup { delay_ns: us(200) },
        Action::Pass { delay_ns: us(300) },
        Action::Pass { delay_ns: 0 },
        Action::Drop,
        Action::Dup { delay_ns: us(5) },
        Action::Drop,
        Action::Pass {
            delay_ns: us((1 << 30) - 1),
        },
    ]
}

fn sample_header() -> Header {
    Header {
        unit: TimeUnit::Us,
        flow: Some("dst=10.0.0.0/8 proto=udp".parse().unwrap()),
        provenance: "golden sample: hand-made by tests/golden/README.md".into(),
    }
}

/// Every record of `path` read with a buffer of `size` bytes, through `read_block` with the
/// given block length.
fn read_with(path: &Path, size: usize, block: usize) -> Vec<Action> {
    let mut r = RecordReader::open_with(path, None, size).unwrap();
    let mut out = Vec::new();
    while r.read_block(&mut out, block).unwrap() > 0 {}
    out
}

#[test]
fn every_form_reads_the_golden_records_with_every_buffer_size() {
    for name in [
        "sample.rpl",
        "sample.rplx",
        "sample.txt",
        "sample-handwritten.txt",
    ] {
        let path = golden(name);
        let whole = std::fs::read(&path).unwrap();
        let format = Format::detect(&path, &whole);
        let (_, all) = read_all(&whole[..], format).unwrap();
        assert_eq!(all, sample(), "{name}, whole-file read");
        for size in [1, 7, 64 << 10] {
            for block in [1, 3, 1 << 16] {
                assert_eq!(
                    read_with(&path, size, block),
                    sample(),
                    "{name}, {size} B, {block}"
                );
            }
        }
        // The iterator is one more code path.
        let it: Vec<Action> = RecordReader::open_with(&path, None, 7)
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(it, sample(), "{name}, iterator");
    }
}

#[test]
fn the_framed_header_is_read() {
    let r = RecordReader::open(&golden("sample.rplx"), None).unwrap();
    assert_eq!(r.format(), Format::Framed);
    assert_eq!(r.header(), Some(&sample_header()));
}

#[test]
fn writers_reproduce_the_golden_bytes() {
    for (name, format) in [
        ("sample.rpl", Format::Raw),
        ("sample.rplx", Format::Framed),
        ("sample.txt", Format::Text),
    ] {
        let mut w = RecordWriter::new(Vec::new(), format, &sample_header()).unwrap();
        for a in sample() {
            w.write(a).unwrap();
        }
        let bytes = w.finish().unwrap();
        assert_eq!(bytes, std::fs::read(golden(name)).unwrap(), "{name}");
    }
}

#[test]
fn bad_files_name_the_file_and_the_place() {
    let err = |name: &str, size: usize| {
        let mut r = RecordReader::open_with(&golden(name), None, size).unwrap();
        let mut out = Vec::new();
        loop {
            match r.read_block(&mut out, 1000) {
                Ok(0) => panic!("{name}: no error"),
                Ok(_) => {}
                Err(e) => return (e.to_string(), out.len(), e),
            }
        }
    };
    for size in [1, 7, 4096] {
        let (msg, good, e) = err("bad-reserved.rpl", size);
        assert!(matches!(
            e.kind(),
            ErrorKind::ReservedAction {
                index: 2,
                offset: 8,
                word: 0xc000_0009
            }
        ));
        assert!(
            msg.contains("bad-reserved.rpl: record 2 at byte 8"),
            "{msg}"
        );
        assert_eq!(good, 2);
        let (msg, good, e) = err("bad-truncated.rpl", size);
        assert!(matches!(
            e.kind(),
            ErrorKind::TruncatedWord {
                offset: 8,
                len: 2,
                index: 2
            }
        ));
        assert!(msg.contains("multiple of 4"), "{msg}");
        assert_eq!(good, 2);
        let (msg, good, _) = err("bad-syntax.txt", size);
        assert!(msg.contains("bad-syntax.txt: line 3, column 5:"), "{msg}");
        assert!(msg.contains("needs a unit"), "{msg}");
        assert_eq!(good, 1);
    }
}

#[test]
fn a_framed_trace_in_ns_keeps_ns() {
    let header = Header {
        unit: TimeUnit::Ns,
        ..Header::default()
    };
    let mut w = RecordWriter::new(Vec::new(), Format::Framed, &header).unwrap();
    w.write(Action::Pass {
        delay_ns: 1_234_567,
    })
    .unwrap();
    let bytes = w.finish().unwrap();
    let (h, records) = read_all(&bytes[..], Format::Framed).unwrap();
    assert_eq!(h.unwrap().unit, TimeUnit::Ns);
    assert_eq!(
        records,
        vec![Action::Pass {
            delay_ns: 1_234_567
        }]
    );
    // The raw form is µs and refuses to round.
    let mut w = RecordWriter::new(Vec::new(), Format::Raw, &header).unwrap();
    let e = w
        .write(Action::Pass {
            delay_ns: 1_234_567,
        })
        .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("record 0: delay 1234567 ns is not a whole number of us"),
        "{e}"
    );
}

fn action_us() -> impl Strategy<Value = Action> {
    let delay = 0u64..(1 << 30);
    prop_oneof![
        Just(Action::Drop),
        delay.clone().prop_map(|d| Action::Pass {
            delay_ns: d * 1_000
        }),
        delay.prop_map(|d| Action::Dup {
            delay_ns: d * 1_000
        }),
    ]
}

fn write(format: Format, records: &[Action]) -> Vec<u8> {
    let mut w = RecordWriter::new(Vec::new(), format, &Header::default()).unwrap();
    for &a in records {
        w.write(a).unwrap();
    }
    w.finish().unwrap()
}

proptest! {
    #[test]
    fn text_and_binary_round_trip(records in proptest::collection::vec(action_us(), 0..200)) {
        let text = write(Format::Text, &records);
        let (_, from_text) = read_all(&text[..], Format::Text).unwrap();
        prop_assert_eq!(&from_text, &records);
        let raw = write(Format::Raw, &from_text);
        prop_assert_eq!(raw.len(), records.len() * 4);
        let (_, from_raw) = read_all(&raw[..], Format::Raw).unwrap();
        prop_assert_eq!(&from_raw, &records);
        let framed = write(Format::Framed, &from_raw);
        let (_, from_framed) = read_all(&framed[..], Format::Framed).unwrap();
        prop_assert_eq!(&from_framed, &records);
        prop_assert_eq!(write(Format::Text, &from_framed), text);
    }

    #[test]
    fn any_bytes_read_the_same_whatever_the_buffer(bytes in proptest::collection::vec(any::<u8>(), 0..300), size in 1usize..20) {
        // Raw reading of arbitrary bytes: same records and same error for every buffer size.
        let whole = read_all(&bytes[..], Format::Raw).map_err(|e| e.to_string());
        let mut r = RecordReader::new(&bytes[..], Format::Raw, size).unwrap();
        let mut out = Vec::new();
        let streamed = loop {
            match r.read_block(&mut out, 5) {
                Ok(0) => break Ok((None, out)),
                Ok(_) => {}
                Err(e) => break Err(e.to_string()),
            }
        };
        prop_assert_eq!(whole, streamed);
    }

    #[test]
    fn text_errors_point_inside_the_input(text in "(drop|pass|dup|[a-z0-9 .#µ])*(\\n(drop|pass|dup|[a-z0-9 .#µ])*){0,8}") {
        // Arbitrary text either parses to at most one record per line, or fails with a syntax
        // error whose line exists and whose column lies within that line.
        let lines: Vec<&str> = text.split('\n').collect();
        match read_all(text.as_bytes(), Format::Text) {
            Ok((_, records)) => prop_assert!(records.len() <= lines.len()),
            Err(e) => match e.kind() {
                ErrorKind::Syntax { line, column, .. } => {
                    let l = lines[(*line - 1) as usize];
                    prop_assert!(*column >= 1 && *column <= l.chars().count() as u64 + 1, "{e}");
                }
                k => prop_assert!(false, "not a syntax error: {k}"),
            },
        }
    }
}

proptest! {
    // Fuzzing the framed header: any bytes after the magic either give a header whose
    // re-encoding parses to the same header, or an error of the header or I/O kind, never a
    // panic or an over-large allocation (lengths are bounded before allocating).
    #[test]
    fn framed_headers_from_arbitrary_bytes(tail in proptest::collection::vec(any::<u8>(), 0..64), version_ok in any::<bool>()) {
        let mut bytes = rtemu_trace::format::MAGIC.to_vec();
        if version_ok {
            bytes.extend_from_slice(&[0, 1]);
        }
        bytes.extend_from_slice(&tail);
        match Header::read(&mut &bytes[..]) {
            Ok((h, len)) => {
                prop_assert!(len as usize <= bytes.len());
                let again = h.to_bytes().unwrap();
                prop_assert_eq!(Header::read(&mut &again[..]).unwrap().0, h);
            }
            Err(e) => prop_assert!(matches!(e.kind(), ErrorKind::Header(_)), "{}", e),
        }
    }
}

/// A file in this test's own directory (removed with the directory).
struct Scratch(PathBuf);

impl Scratch {
    fn new(dir: &TempDir, name: &str, bytes: &[u8]) -> Scratch {
        let path = dir.0.join(name);
        std::fs::write(&path, bytes).unwrap();
        Scratch(path)
    }
}

#[test]
fn every_kind_is_detected_in_a_file_without_a_telling_name() {
    use rtemu_trace::{mahimahi, series};
    let dir = TempDir::new("trace-sniff");

    let mahimahi: String = (1..=100).map(|t| format!("{t}\n")).collect();
    let f = Scratch::new(&dir, "mm", mahimahi.as_bytes());
    assert_eq!(Content::sniff_file(&f.0).unwrap(), Content::Mahimahi);
    let read = |f: &Scratch| std::fs::File::open(&f.0).unwrap();
    assert_eq!(mahimahi::read_all(read(&f)).unwrap().len(), 100);

    let f = Scratch::new(&dir, "p.txt", b"# probe\n0 10\n0.5 20ms 0\n1s 5 lost\n");
    assert_eq!(Content::sniff_file(&f.0).unwrap(), Content::Series);
    assert_eq!(series::read_all(read(&f)).unwrap().len(), 3);

    let f = Scratch::new(
        &dir,
        "actions",
        b"pass 1234us\ndrop\ndup 100us\npass 200us\n",
    );
    assert_eq!(
        Content::sniff_file(&f.0).unwrap(),
        Content::Actions(Format::Text)
    );
    let (_, records) = read_all(&std::fs::read(&f.0).unwrap()[..], Format::Text).unwrap();
    assert_eq!(records.len(), 4);

    let raw = std::fs::read(golden("sample.rpl")).unwrap();
    let f = Scratch::new(&dir, "words", &raw);
    assert_eq!(
        Content::sniff_file(&f.0).unwrap(),
        Content::Actions(Format::Raw)
    );
    let framed = std::fs::read(golden("sample.rplx")).unwrap();
    let f = Scratch::new(&dir, "framed.txt", &framed);
    assert_eq!(
        Content::sniff_file(&f.0).unwrap(),
        Content::Actions(Format::Framed)
    );

    // Text of no kind is an error naming the file and the line, never raw words.
    let f = Scratch::new(&dir, "notes", b"# what\nhello world\n");
    let e = Content::sniff_file(&f.0).unwrap_err().to_string();
    assert!(
        e.contains("notes: line 2, column 1: this line fits no trace kind"),
        "{e}"
    );
    assert_eq!(Format::detect(&f.0, b"# what\nhello world\n"), Format::Text);
    let e = Content::sniff_file(Path::new("/nonexistent/rtemu/trace")).unwrap_err();
    assert!(e.guess.is_none());
    assert!(
        e.to_string().starts_with("/nonexistent/rtemu/trace: "),
        "{e}"
    );
}

#[test]
fn a_long_file_is_judged_by_its_head() {
    // More than SNIFF_LEN bytes: the sample's cut last line is not judged.
    let series: String = (0..20_000)
        .map(|i| format!("{i}.25 {}\n", i % 97))
        .collect();
    assert!(series.len() > rtemu_trace::format::SNIFF_LEN);
    let dir = TempDir::new("trace-long-head");
    let f = Scratch::new(&dir, "long-series", series.as_bytes());
    assert_eq!(Content::sniff_file(&f.0).unwrap(), Content::Series);
}

fn check_sniff(ext: &str, bytes: &[u8], complete: bool) -> Result<(), TestCaseError> {
    let path = PathBuf::from(format!("fuzz{ext}"));
    match Content::sniff(&path, bytes, complete) {
        Ok(_) => {}
        Err(e) => {
            // Only text can fail, at a line and column inside the sample, and with a guess.
            prop_assert!(e.guess.is_some(), "{}", e);
            let text = String::from_utf8_lossy(bytes);
            let lines: Vec<&str> = text.lines().collect();
            match e.error.kind() {
                ErrorKind::Syntax { line, column, .. } => {
                    prop_assert!(*line >= 1 && *line as usize <= lines.len(), "{}", e);
                    let l = lines[*line as usize - 1];
                    prop_assert!(*column >= 1 && *column <= l.chars().count() as u64, "{}", e);
                }
                k => prop_assert!(false, "not a syntax error: {k}"),
            }
            prop_assert!(
                e.to_string().starts_with(&format!("fuzz{ext}: line ")),
                "{}",
                e
            );
        }
    }
    Ok(())
}

proptest! {
    #[test]
    fn the_sniffer_never_panics_on_arbitrary_bytes(
        bytes in proptest::collection::vec(any::<u8>(), 0..600),
        complete in any::<bool>(),
        ext in prop_oneof![Just(""), Just(".txt"), Just(".rpl"), Just(".series")],
    ) {
        check_sniff(ext, &bytes, complete)?;
    }

    #[test]
    fn the_sniffer_never_panics_on_trace_like_text(
        text in "(pass|drop|dup|lost|ok|ms|us|µs|[0-9 .#s\t]|\r?\n){0,80}",
        complete in any::<bool>(),
    ) {
        check_sniff("", text.as_bytes(), complete)?;
    }
}
