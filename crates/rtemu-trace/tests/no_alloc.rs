//! The consumer side of every streamed trace (action records, a delay series, a delivery-
//! opportunity trace) allocates nothing per record, block swaps included.
//!
//! A counting global allocator counts the allocations made on the test's own thread while it
//! is armed; the reader thread is not counted.

use std::io::Cursor;
use std::time::{Duration, Instant};

use rtemu_testutil::alloc_count::{counted, Counting};
use rtemu_trace::mahimahi::{OpportunityReader, OpportunityStream};
use rtemu_trace::series::{Interpolation, SeriesReader, SeriesStream};
use rtemu_trace::{
    Action, EndPolicy, Format, Header, PrefetchConfig, Prefetcher, RecordReader, RecordWriter,
    UnderrunPolicy,
};

#[global_allocator]
static ALLOCATOR: Counting = Counting;

// The streams below never wait for their reader, as in the real-time engine (a blocking
// receive may allocate its waiter once per thread): each is given 200 ms to read ahead, and what
// the test walks fits in its ring, so nothing is ever missing.

#[test]
fn series_lookups_across_blocks_do_not_allocate() {
    // 16 000 samples: almost four blocks of the stream's ring, so lookups swap blocks.
    let text: String = (0..16_000u64)
        .map(|i| format!("{i}ms {}\n", i % 7))
        .collect();
    let r = SeriesReader::new(Cursor::new(text.into_bytes()));
    let mut s = SeriesStream::spawn(r, Interpolation::Linear, UnderrunPolicy::Pass, |e| e).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let (sum, allocations) = counted(|| {
        (0..16_000u64)
            .map(|i| s.at(i * 1_000_000).unwrap().delay_ns)
            .sum::<u64>()
    });
    assert_eq!(allocations, 0, "allocations on the lookup path");
    assert_eq!(s.underruns(), 0);
    assert_eq!(
        sum,
        (0..16_000u64).map(|i| (i % 7) * 1_000_000).sum::<u64>()
    );
}

#[test]
fn walking_opportunities_across_blocks_and_passes_does_not_allocate() {
    let text: String = (1..=1_000u64).map(|i| format!("{i}\n")).collect();
    let r = OpportunityReader::new(Cursor::new(text.into_bytes()));
    let mut s = OpportunityStream::spawn(r, false, |e| e).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let (last, allocations) = counted(|| {
        for _ in 0..2_500 {
            assert!(s.advance().unwrap(), "under-run");
        }
        // An hour later: whole periods skipped by arithmetic.
        assert!(s.skip_to(3_600_000_000_000).unwrap(), "under-run");
        s.time_ns()
    });
    assert_eq!(allocations, 0, "allocations on the walking path");
    assert_eq!(last, 3_600_000_000_000);
    // 3 600 000 ms is the last line (1 000 ms) of pass 3 599.
    assert_eq!(s.loops(), 3_599);
    assert!(s.records() < 5_000, "{} lines read", s.records());
}

#[test]
fn next_action_and_block_swaps_do_not_allocate() {
    // 5 blocks of 7 records fit the ring of 8 blocks, so once the reader has filled them all
    // the consumer never waits; the policy is `drop` so it never blocks either.
    let records: Vec<Action> = (0..35)
        .map(|i| Action::Pass {
            delay_ns: i * 1_000,
        })
        .collect();
    let mut w = RecordWriter::new(Vec::new(), Format::Raw, &Header::default()).unwrap();
    for &a in &records {
        w.write(a).unwrap();
    }
    let bytes = w.finish().unwrap();
    let cfg = PrefetchConfig {
        block_records: 7,
        blocks: 8,
        read_buffer: 64,
        underrun: UnderrunPolicy::Drop,
        end: EndPolicy::Pass,
    };
    let reader = RecordReader::new(Cursor::new(bytes), Format::Raw, 64).unwrap();
    let mut p = Prefetcher::spawn(reader, cfg, |e| e).unwrap();
    p.prime().unwrap();
    // Give the reader time to fill the ring (bounded).
    std::thread::sleep(Duration::from_millis(50));
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut got = Vec::with_capacity(64);
    let ((), allocations) = counted(|| {
        while got.len() < 40 && Instant::now() < deadline {
            got.push(p.next_action().unwrap().unwrap());
        }
    });
    assert_eq!(allocations, 0, "allocations on the consumer path");
    assert_eq!(p.counters().underruns, 0);
    assert_eq!(&got[..35], &records[..]);
    assert_eq!(p.counters().after_end, 5);
}
