//! The prefetching reader: same records as a plain read, end and under-run policies, errors.

use std::io::{Cursor, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rtemu_trace::prefetch::Counters;
use rtemu_trace::reader::read_all;
use rtemu_trace::{
    Action, EndPolicy, ErrorKind, Format, Header, PrefetchConfig, Prefetcher, RecordReader,
    RecordWriter, UnderrunPolicy,
};

fn golden(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name)
}

fn raw(records: &[Action]) -> Vec<u8> {
    let mut w = RecordWriter::new(Vec::new(), Format::Raw, &Header::default()).unwrap();
    for &a in records {
        w.write(a).unwrap();
    }
    w.finish().unwrap()
}

fn pass_us(n: u64) -> Action {
    Action::Pass {
        delay_ns: n * 1_000,
    }
}

fn config(underrun: UnderrunPolicy, end: EndPolicy) -> PrefetchConfig {
    // Tiny blocks and buffers, so that block and buffer boundaries fall everywhere.
    PrefetchConfig {
        block_records: 7,
        blocks: 2,
        read_buffer: 5,
        underrun,
        end,
    }
}

fn spawn(bytes: Vec<u8>, cfg: PrefetchConfig) -> Prefetcher {
    let r = RecordReader::new(Cursor::new(bytes), Format::Raw, cfg.read_buffer).unwrap();
    Prefetcher::spawn(r, cfg, |e| e).unwrap()
}

#[test]
fn streams_the_same_records_as_a_plain_read() {
    let records: Vec<Action> = (0..1000)
        .map(|i| match i % 5 {
            0 => Action::Drop,
            1 => Action::Dup {
                delay_ns: i * 1_000,
            },
            _ => pass_us(i),
        })
        .collect();
    let bytes = raw(&records);
    let mut p = spawn(bytes.clone(), config(UnderrunPolicy::Wait, EndPolicy::Stop));
    let mut got = Vec::new();
    while let Some(a) = p.next_action().unwrap() {
        got.push(a);
    }
    assert_eq!(got, read_all(&bytes[..], Format::Raw).unwrap().1);
    assert_eq!(got, records);
    assert_eq!(p.next_action().unwrap(), None, "stop stays stopped");
    assert_eq!(
        p.counters(),
        Counters {
            records: 1000,
            ..Counters::default()
        }
    );
}

#[test]
fn loop_restarts_from_the_first_record() {
    let records = [pass_us(1), Action::Drop, pass_us(3)];
    let mut p = spawn(raw(&records), config(UnderrunPolicy::Wait, EndPolicy::Loop));
    let got: Vec<Action> = (0..10).map(|_| p.next_action().unwrap().unwrap()).collect();
    let want: Vec<Action> = records.iter().copied().cycle().take(10).collect();
    assert_eq!(got, want);
    let c = p.counters();
    assert_eq!(c.records, 10);
    // Records 1–3 are the first pass, 4–6 the first loop, 7–9 the second, 10 the third: the
    // count follows what was consumed, whatever the reader has read ahead.
    assert_eq!(c.loops, 3, "{c:?}");
    p.next_action().unwrap();
    p.next_action().unwrap();
    assert_eq!(
        p.counters().loops,
        3,
        "records 11 and 12 are still in the third loop"
    );
    p.next_action().unwrap();
    assert_eq!(p.counters().loops, 4);
}

#[test]
fn end_pass_lets_later_packets_through_and_counts_them() {
    let mut p = spawn(
        raw(&[Action::Drop]),
        config(UnderrunPolicy::Wait, EndPolicy::Pass),
    );
    assert_eq!(p.next_action().unwrap(), Some(Action::Drop));
    for _ in 0..4 {
        assert_eq!(p.next_action().unwrap(), Some(pass_us(0)));
    }
    assert_eq!(p.counters().after_end, 4);
    assert_eq!(p.counters().records, 1);
}

#[test]
fn fates_span_block_boundaries() {
    // A cascade of 9 copies crosses the 7-record blocks.
    let mut records = vec![Action::Dup { delay_ns: 1_000 }; 9];
    records.push(pass_us(2));
    records.push(Action::Drop);
    let mut p = spawn(raw(&records), config(UnderrunPolicy::Wait, EndPolicy::Stop));
    let f = p.next_fate().unwrap().unwrap();
    assert_eq!(f.deliveries().len(), 10);
    assert_eq!(f.deliveries()[9], 2_000);
    assert!(p.next_fate().unwrap().unwrap().is_dropped());
    assert_eq!(p.next_fate().unwrap(), None);
}

#[test]
fn a_looping_trace_of_only_dups_is_refused_at_open() {
    let dir = std::env::temp_dir().join(format!("rtemu-prefetch-dups-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let all_dup = dir.join("all-dup.rpl");
    std::fs::write(&all_dup, raw(&[Action::Dup { delay_ns: 1_000 }; 3])).unwrap();
    let cfg = |end| config(UnderrunPolicy::Wait, end);
    let e = Prefetcher::open(&all_dup, None, cfg(EndPolicy::Loop)).unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::NoPacketEnd { records: 3, .. }),
        "{e}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains("all-dup.rpl") && msg.contains("end policy `stop`"),
        "{msg}"
    );
    // Without looping the cascade ends with the trace, so the same file is fine.
    let mut p = Prefetcher::open(&all_dup, None, cfg(EndPolicy::Stop)).unwrap();
    assert_eq!(p.next_fate().unwrap().unwrap().deliveries().len(), 3);
    // One record that ends a packet, however late, makes it a trace that loops well.
    let mut records = vec![Action::Dup { delay_ns: 1_000 }; 5000];
    records.push(Action::Drop);
    let late_end = dir.join("late-end.rpl");
    std::fs::write(&late_end, raw(&records)).unwrap();
    let opened = Prefetcher::open(&late_end, None, cfg(EndPolicy::Loop));
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(opened.is_ok(), "{:?}", opened.err());
}

#[test]
fn an_endless_cascade_is_cut_and_counted() {
    // In memory, nothing checks the trace first: the per-packet bound alone ends each fate.
    let mut p = spawn(
        raw(&[Action::Dup { delay_ns: 1_000 }; 5]),
        config(UnderrunPolicy::Wait, EndPolicy::Loop),
    );
    for n in 1..=3u64 {
        let f = p.next_fate().unwrap().unwrap();
        assert!(f.cut());
        assert_eq!(f.records(), rtemu_trace::action::MAX_FATE_RECORDS);
        assert_eq!(p.counters().cut_cascades, n);
    }
    assert_eq!(
        p.counters().records,
        3 * u64::from(rtemu_trace::action::MAX_FATE_RECORDS)
    );
}

/// A reader that delivers nothing until its gate opens: the disk that falls behind.
struct Gated {
    inner: Cursor<Vec<u8>>,
    open: Arc<AtomicBool>,
}

impl Read for Gated {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.open.load(Ordering::Acquire) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        self.inner.read(buf)
    }
}

impl Seek for Gated {
    fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
        self.inner.seek(pos)
    }
}

fn gated(records: &[Action], policy: UnderrunPolicy) -> (Prefetcher, Arc<AtomicBool>) {
    let open = Arc::new(AtomicBool::new(false));
    let src = Gated {
        inner: Cursor::new(raw(records)),
        open: open.clone(),
    };
    let r = RecordReader::new(src, Format::Raw, 64).unwrap();
    (
        Prefetcher::spawn(r, config(policy, EndPolicy::Stop), |e| e).unwrap(),
        open,
    )
}

/// Reads until a real record arrives (bounded in time), returning it and what was substituted.
fn first_real(p: &mut Prefetcher) -> (Action, u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let before = p.counters().underruns;
        let a = p.next_action().unwrap().unwrap();
        if p.counters().underruns == before {
            return (a, before);
        }
        assert!(Instant::now() < deadline, "no record arrived");
        std::thread::sleep(Duration::from_micros(100));
    }
}

#[test]
fn underruns_are_counted_and_follow_the_policy() {
    let records = [Action::Dup { delay_ns: 7_000 }, pass_us(8), pass_us(9)];
    for (policy, substitute) in [
        (UnderrunPolicy::Pass, pass_us(0)),
        (UnderrunPolicy::Drop, Action::Drop),
        (UnderrunPolicy::HoldLast, pass_us(0)),
    ] {
        let (mut p, open) = gated(&records, policy);
        // The reader is held at the gate, so nothing can be ready: an under-run, every time.
        for _ in 0..3 {
            assert_eq!(p.next_action().unwrap(), Some(substitute), "{policy}");
        }
        assert_eq!(p.counters().underruns, 3);
        assert_eq!(p.counters().records, 0);
        open.store(true, Ordering::Release);
        // The trace resumes at its first record: under-runs did not consume records.
        let (a, underruns) = first_real(&mut p);
        assert_eq!(a, records[0], "{policy}");
        assert!(underruns >= 3);
        if policy == UnderrunPolicy::HoldLast {
            // Holding a `dup` repeats its delay as a plain pass.
            assert_eq!(p.next_action().unwrap(), Some(pass_us(8)));
        }
    }
}

#[test]
fn priming_waits_for_the_first_records() {
    let (mut p, open) = gated(&[pass_us(5), pass_us(6)], UnderrunPolicy::Drop);
    let opener = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        open.store(true, Ordering::Release);
    });
    p.prime().unwrap();
    // Both records were in the first block: no under-run, even with a non-waiting policy.
    assert_eq!(p.next_action().unwrap(), Some(pass_us(5)));
    assert_eq!(p.next_action().unwrap(), Some(pass_us(6)));
    assert_eq!(p.counters().underruns, 0);
    opener.join().unwrap();
    // Priming an ended or failed trace returns at once.
    let mut empty = spawn(Vec::new(), config(UnderrunPolicy::Drop, EndPolicy::Stop));
    assert!(matches!(
        empty.prime().unwrap_err().kind(),
        ErrorKind::Empty
    ));
    empty.prime().unwrap();
}

#[test]
fn wait_never_underruns() {
    let (mut p, open) = gated(&[pass_us(5)], UnderrunPolicy::Wait);
    let opener = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        open.store(true, Ordering::Release);
    });
    assert_eq!(p.next_action().unwrap(), Some(pass_us(5)));
    assert_eq!(p.counters().underruns, 0);
    opener.join().unwrap();
}

#[test]
fn errors_arrive_after_the_good_records_and_name_the_file() {
    let mut p = Prefetcher::open(
        &golden("bad-reserved.rpl"),
        None,
        config(UnderrunPolicy::Wait, EndPolicy::Loop),
    )
    .unwrap();
    assert_eq!(p.next_action().unwrap(), Some(pass_us(7)));
    assert_eq!(p.next_action().unwrap(), Some(Action::Drop));
    let e = p.next_action().unwrap_err();
    assert!(matches!(
        e.kind(),
        ErrorKind::ReservedAction { index: 2, .. }
    ));
    assert!(e.to_string().contains("bad-reserved.rpl: record 2"), "{e}");
    // The trace counts as ended; with `loop` there is nothing to loop over.
    assert_eq!(p.next_action().unwrap(), None);
}

#[test]
fn an_empty_trace_is_an_error_under_every_end_policy() {
    for end in [EndPolicy::Loop, EndPolicy::Stop, EndPolicy::Pass] {
        let mut p = spawn(Vec::new(), config(UnderrunPolicy::Wait, end));
        let e = p.next_action().unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::Empty), "{end}: {e}");
    }
}
