//! The consumer side of the prefetcher allocates nothing per record, block swaps included.
//!
//! A counting global allocator counts the allocations made on the test's own thread while it
//! is armed; the reader thread is not counted.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::Cursor;
use std::time::{Duration, Instant};

use rtemu_trace::{
    Action, EndPolicy, Format, Header, PrefetchConfig, Prefetcher, RecordReader, RecordWriter,
    UnderrunPolicy,
};

struct Counting;

thread_local! {
    static ARMED: Cell<bool> = const { Cell::new(false) };
    static COUNT: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded unchanged to the system allocator; the counting touches only
// const-initialised thread-locals, which do not allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if ARMED.with(Cell::get) {
            COUNT.with(|c| c.set(c.get() + 1));
        }
        // SAFETY: the caller's contract for `alloc` is passed on as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

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
    ARMED.with(|a| a.set(true));
    while got.len() < 40 && Instant::now() < deadline {
        got.push(p.next_action().unwrap().unwrap());
    }
    ARMED.with(|a| a.set(false));
    assert_eq!(COUNT.with(Cell::get), 0, "allocations on the consumer path");
    assert_eq!(p.counters().underruns, 0);
    assert_eq!(&got[..35], &records[..]);
    assert_eq!(p.counters().after_end, 5);
}
