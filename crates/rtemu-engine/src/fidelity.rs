//! The fidelity record: when each copy was meant to leave and when it did.
//!
//! A copy's intended time is its frame's arrival (the kernel's receive stamp, see
//! [`crate::io`]) plus the delay the model gave it. The release thread reads the clock just
//! before the send that carries a copy and right after it returned, and pushes the times, with
//! the frame's *arrival lag* (how long it waited in the receive ring: the I/O layer's clock
//! read after the receive − the arrival), into a preallocated single-producer,
//! single-consumer ring of atomics. The *release error* (after the send − intended) is the
//! number to quote: it contains the cost of the send, as a user of the link sees it. The
//! *start error* (before the send − intended) separates how late the loop woke from what the
//! send cost; on veth the send includes the receiving node's network stack, which the kernel
//! runs inside the engine's `sendto`. A copy whose send started before its intended time is
//! *early*: the engine must never release one, and counts them so a report shows it didn't. A
//! non-real-time thread drains the ring into HDR histograms per direction, summarised as
//! [`Summary`]: p50, p99, p99.9, max, the count of late and of early copies, the arrival lag,
//! and the release error's coarse histogram ([`BUCKET_EDGES_NS`]), which that thread folds
//! out of the HDR histogram when asked, never the packet path. A full ring loses records, never blocks the release thread; lost records are counted
//! and reported next to the summary.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use hdrhistogram::Histogram;

/// One released copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// The release time the model decided, ns on `CLOCK_MONOTONIC`.
    pub intended_ns: u64,
    /// When the send that carried it started.
    pub started_ns: u64,
    /// When the send that carried it returned.
    pub actual_ns: u64,
    /// How long its frame waited between arriving and the I/O layer's clock read after the
    /// receive, ns.
    pub arrival_lag_ns: u64,
}

impl Record {
    /// How late the copy left, ns (0 if it left on time or early).
    pub fn error_ns(&self) -> u64 {
        self.actual_ns.saturating_sub(self.intended_ns)
    }

    /// How late its send started, ns.
    pub fn start_error_ns(&self) -> u64 {
        self.started_ns.saturating_sub(self.intended_ns)
    }

    /// Whether its send started before the intended time (it may have left early).
    pub fn is_early(&self) -> bool {
        self.started_ns < self.intended_ns
    }
}

#[derive(Debug)]
struct Ring {
    slots: Box<[[AtomicU64; 4]]>,
    /// Next slot the producer writes; only the producer stores it.
    head: AtomicUsize,
    /// Next slot the consumer reads; only the consumer stores it.
    tail: AtomicUsize,
    lost: AtomicU64,
}

/// The release thread's end of a fidelity ring.
#[derive(Debug)]
pub struct Producer(Arc<Ring>);

/// The reader's end of a fidelity ring.
#[derive(Debug)]
pub struct Consumer(Arc<Ring>);

/// A ring holding up to `capacity` records (rounded up to a power of two).
pub fn ring(capacity: usize) -> (Producer, Consumer) {
    let capacity = capacity.max(2).next_power_of_two();
    let ring = Arc::new(Ring {
        slots: (0..capacity)
            .map(|_| std::array::from_fn(|_| AtomicU64::new(0)))
            .collect(),
        head: AtomicUsize::new(0),
        tail: AtomicUsize::new(0),
        lost: AtomicU64::new(0),
    });
    (Producer(Arc::clone(&ring)), Consumer(ring))
}

impl Producer {
    /// Records a release; returns `false` (and counts a lost record) when the ring is full.
    pub fn push(&self, r: Record) -> bool {
        let ring = &*self.0;
        let head = ring.head.load(Ordering::Relaxed);
        if head.wrapping_sub(ring.tail.load(Ordering::Acquire)) == ring.slots.len() {
            ring.lost.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        let slot = &ring.slots[head & (ring.slots.len() - 1)];
        slot[0].store(r.intended_ns, Ordering::Relaxed);
        slot[1].store(r.started_ns, Ordering::Relaxed);
        slot[2].store(r.actual_ns, Ordering::Relaxed);
        slot[3].store(r.arrival_lag_ns, Ordering::Relaxed);
        // Publishes the slot's contents with the new head.
        ring.head.store(head.wrapping_add(1), Ordering::Release);
        true
    }
}

impl Consumer {
    /// Takes the oldest record, if any.
    pub fn pop(&self) -> Option<Record> {
        let ring = &*self.0;
        let tail = ring.tail.load(Ordering::Relaxed);
        if tail == ring.head.load(Ordering::Acquire) {
            return None;
        }
        let slot = &ring.slots[tail & (ring.slots.len() - 1)];
        let r = Record {
            intended_ns: slot[0].load(Ordering::Relaxed),
            started_ns: slot[1].load(Ordering::Relaxed),
            actual_ns: slot[2].load(Ordering::Relaxed),
            arrival_lag_ns: slot[3].load(Ordering::Relaxed),
        };
        // Hands the slot back to the producer only after it was read.
        ring.tail.store(tail.wrapping_add(1), Ordering::Release);
        Some(r)
    }

    /// Records the producer could not push because the ring was full.
    pub fn lost(&self) -> u64 {
        self.0.lost.load(Ordering::Relaxed)
    }
}

/// The release-error, start-error and arrival-lag distributions of one direction.
#[derive(Debug, Clone)]
pub struct ErrorHistogram {
    released: Histogram<u64>,
    started: Histogram<u64>,
    arrival_lag: Histogram<u64>,
    late_after_ns: u64,
    late: u64,
    early: u64,
}

fn histogram() -> Histogram<u64> {
    // Three significant digits: 1 ns resolution below 1 µs, 0.1 % above. Sized first for the
    // errors of a working engine (up to 10 ms, 123 KB) and grown on the collector thread when a
    // larger one comes: sized for a minute from the start, each took 221 KB, and a thousand
    // links' six histograms 1.3 GB.
    let mut h = Histogram::new_with_bounds(1, FIRST_RANGE_NS, 3)
        .expect("3 significant digits and a 10 ms range are valid histogram bounds");
    h.auto(true);
    h
}

/// Adds `ns` (at most [`MAX_TRACKED_NS`]) to `h`, which grows to hold it.
fn add(h: &mut Histogram<u64>, ns: u64) {
    let ns = ns.min(MAX_TRACKED_NS);
    // Growing can fail only if the counts cannot be allocated; the value is then kept at the
    // histogram's top rather than lost.
    if h.record(ns).is_err() {
        h.saturating_record(ns);
    }
}

fn percentiles(h: &Histogram<u64>) -> Percentiles {
    if h.is_empty() {
        return Percentiles::default();
    }
    Percentiles {
        p50_ns: h.value_at_quantile(0.5),
        p99_ns: h.value_at_quantile(0.99),
        p999_ns: h.value_at_quantile(0.999),
        max_ns: h.max(),
    }
}

/// The upper edges of the release-error histogram's buckets, ns: 1-2-5 steps from 1 µs to
/// 100 ms. Bucket 0 holds errors below 1 µs, bucket `i` those from `EDGES[i - 1]` up to (not
/// including) `EDGES[i]`, the last those of 100 ms and more. Log-spaced, because the error of
/// a healthy engine sits in the tens of microseconds while a stall shows in milliseconds.
pub const BUCKET_EDGES_NS: [u64; 16] = [
    1_000,
    2_000,
    5_000,
    10_000,
    20_000,
    50_000,
    100_000,
    200_000,
    500_000,
    1_000_000,
    2_000_000,
    5_000_000,
    10_000_000,
    20_000_000,
    50_000_000,
    100_000_000,
];

/// The release-error histogram's buckets: one more than its edges.
pub const BUCKETS: usize = BUCKET_EDGES_NS.len() + 1;

/// The HDR histogram `h` folded into the buckets of [`BUCKET_EDGES_NS`]. Each of its value
/// ranges goes whole into the bucket of its highest value, so a value within the histogram's
/// precision (0.1 %) of an edge may land on the edge's other side.
fn buckets(h: &Histogram<u64>) -> [u64; BUCKETS] {
    let mut counts = [0; BUCKETS];
    for v in h.iter_recorded() {
        let i = BUCKET_EDGES_NS.partition_point(|&edge| edge <= v.value_iterated_to());
        counts[i] += v.count_at_value();
    }
    counts
}

/// The largest error the histogram tells apart: larger errors are recorded as this (a minute is
/// far beyond any delay a link is given).
const MAX_TRACKED_NS: u64 = 60_000_000_000;

/// The range a histogram is first sized for.
const FIRST_RANGE_NS: u64 = 10_000_000;

impl ErrorHistogram {
    /// An empty histogram; errors above `late_after_ns` count as late.
    pub fn new(late_after_ns: u64) -> Self {
        ErrorHistogram {
            released: histogram(),
            started: histogram(),
            arrival_lag: histogram(),
            late_after_ns,
            late: 0,
            early: 0,
        }
    }

    /// Adds one record.
    pub fn record(&mut self, r: Record) {
        let error = r.error_ns();
        add(&mut self.released, error);
        add(&mut self.started, r.start_error_ns());
        add(&mut self.arrival_lag, r.arrival_lag_ns);
        self.late += (error > self.late_after_ns) as u64;
        self.early += r.is_early() as u64;
    }

    /// Drains every record waiting in `consumer`.
    pub fn drain(&mut self, consumer: &Consumer) {
        while let Some(r) = consumer.pop() {
            self.record(r);
        }
    }

    /// The summary, with `lost` records the ring could not hold.
    pub fn summary(&self, lost: u64) -> Summary {
        Summary {
            count: self.released.len(),
            late: self.late,
            early: self.early,
            late_after_ns: self.late_after_ns,
            released: percentiles(&self.released),
            started: percentiles(&self.started),
            arrival_lag: percentiles(&self.arrival_lag),
            released_buckets: buckets(&self.released),
            lost,
        }
    }
}

/// Percentiles of an error distribution, ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Percentiles {
    /// Median.
    pub p50_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// Largest.
    pub max_ns: u64,
}

/// The fidelity of one direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Summary {
    /// Copies measured.
    pub count: u64,
    /// Copies whose release error exceeded `late_after_ns`.
    pub late: u64,
    /// Copies whose send started before their intended time: always 0 unless the engine is
    /// wrong.
    pub early: u64,
    /// The late threshold, ns.
    pub late_after_ns: u64,
    /// Release error: after the send returned − intended. The number to quote.
    pub released: Percentiles,
    /// Start error: before the send − intended (how late the loop woke).
    pub started: Percentiles,
    /// Arrival lag: the I/O layer's clock read after the receive − the kernel's receive stamp
    /// (how long frames waited for the engine; 0 where the I/O layer has no stamp).
    pub arrival_lag: Percentiles,
    /// The release error's counts in the buckets of [`BUCKET_EDGES_NS`] (they sum to
    /// `count`).
    pub released_buckets: [u64; BUCKETS],
    /// Records lost because the ring was full (not in the percentiles).
    pub lost: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_come_out_in_order_and_a_full_ring_counts_losses() {
        let (tx, rx) = ring(3); // rounded up to 4
        for i in 0..6 {
            let pushed = tx.push(Record {
                intended_ns: i,
                started_ns: i + 1,
                actual_ns: i + 10,
                arrival_lag_ns: i + 20,
            });
            assert_eq!(pushed, i < 4, "push {i}");
        }
        assert_eq!(rx.lost(), 2);
        let got: Vec<u64> = std::iter::from_fn(|| rx.pop())
            .map(|r| r.intended_ns)
            .collect();
        assert_eq!(got, [0, 1, 2, 3]);
        assert!(tx.push(Record {
            intended_ns: 7,
            started_ns: 7,
            actual_ns: 7,
            arrival_lag_ns: 27,
        }));
        assert_eq!(rx.pop().map(|r| r.arrival_lag_ns), Some(27));
        assert_eq!(rx.pop(), None);
    }

    #[test]
    fn a_concurrent_consumer_sees_every_pushed_record_once() {
        let (tx, rx) = ring(64);
        let producer = std::thread::spawn(move || {
            let mut pushed = Vec::new();
            for i in 0..100_000u64 {
                if tx.push(Record {
                    intended_ns: i,
                    started_ns: i * 3,
                    actual_ns: i * 2,
                    arrival_lag_ns: i * 5,
                }) {
                    pushed.push(i);
                }
            }
            pushed
        });
        let mut got = Vec::new();
        while !producer.is_finished() {
            while let Some(r) = rx.pop() {
                assert_eq!(r.actual_ns, r.intended_ns * 2, "a torn record");
                assert_eq!(r.started_ns, r.intended_ns * 3, "a torn record");
                assert_eq!(r.arrival_lag_ns, r.intended_ns * 5, "a torn record");
                got.push(r.intended_ns);
            }
        }
        let pushed = producer.join().unwrap();
        got.extend(std::iter::from_fn(|| rx.pop()).map(|r| r.intended_ns));
        assert_eq!(got, pushed);
        assert_eq!(rx.lost(), 100_000 - pushed.len() as u64);
    }

    #[test]
    fn summary_percentiles_late_and_early_counts() {
        let mut h = ErrorHistogram::new(500);
        for e in 1..=1000u64 {
            h.record(Record {
                intended_ns: 1_000_000,
                started_ns: 1_000_000 + e / 10,
                actual_ns: 1_000_000 + e,
                arrival_lag_ns: e * 2,
            });
        }
        assert_eq!(
            h.summary(0).early,
            0,
            "a send starting at the intended time is not early"
        );
        // An early release is an error of zero, not a huge unsigned one, and counts as early.
        h.record(Record {
            intended_ns: 10,
            started_ns: 5,
            actual_ns: 5,
            arrival_lag_ns: 0,
        });
        let s = h.summary(3);
        assert_eq!(s.count, 1001);
        assert_eq!((s.late, s.early), (500, 1));
        assert_eq!((s.arrival_lag.p50_ns, s.arrival_lag.max_ns), (1000, 2000));
        // Three significant digits: exact below 1024.
        let want = Percentiles {
            p50_ns: 500,
            p99_ns: 990,
            p999_ns: 999,
            max_ns: 1000,
        };
        assert_eq!(s.released, want);
        assert_eq!((s.started.p50_ns, s.started.max_ns), (50, 100));
        assert_eq!(s.lost, 3);
        assert_eq!(
            ErrorHistogram::new(1).summary(0).released,
            Percentiles::default()
        );
        // A send that started before its time and returned after it may have left early.
        let mut h = ErrorHistogram::new(500);
        h.record(Record {
            intended_ns: 10,
            started_ns: 9,
            actual_ns: 11,
            arrival_lag_ns: 0,
        });
        assert_eq!(h.summary(0).early, 1);
    }

    /// A histogram is sized for a working engine's errors and grows, off the packet path, when
    /// a stall brings a larger one, keeping its 0.1 % precision up to the minute it tracks.
    #[test]
    fn a_histogram_starts_small_and_grows_for_a_stall() {
        let minute = Histogram::<u64>::new_with_max(MAX_TRACKED_NS, 3).unwrap();
        let mut h = histogram();
        let first = h.distinct_values();
        assert!(first * 16 <= minute.distinct_values() * 9, "{first} counts");
        add(&mut h, 9_999_999);
        assert_eq!(
            h.distinct_values(),
            first,
            "an error under 10 ms does not grow it"
        );
        add(&mut h, 42_000_000_000);
        assert!(h.distinct_values() > first);
        assert!(h.max().abs_diff(42_000_000_000) <= 42_000_000);
        add(&mut h, 90_000_000_000);
        assert!(h.max().abs_diff(MAX_TRACKED_NS) <= MAX_TRACKED_NS / 1000);
        assert_eq!(h.len(), 3);
    }

    #[test]
    fn release_errors_land_in_their_buckets_and_the_buckets_sum_to_the_count() {
        let mut h = ErrorHistogram::new(1_000_000);
        let mut record = |error_ns: u64, times: u64| {
            for _ in 0..times {
                h.record(Record {
                    intended_ns: 1_000,
                    started_ns: 1_000,
                    actual_ns: 1_000 + error_ns,
                    arrival_lag_ns: 0,
                });
            }
        };
        // (error, times, bucket): edges themselves, and values far inside buckets.
        let cases = [
            (0, 3, 0),
            (999, 1, 0),
            (1_000, 2, 1),
            (1_999, 1, 1),
            (3_000, 4, 2),
            (7_000, 5, 3),
            (15_000, 6, 4),
            (30_000, 7, 5),
            (70_000, 8, 6),
            (150_000, 1, 7),
            (300_000, 1, 8),
            (700_000, 1, 9),
            (1_500_000, 1, 10),
            (3_000_000, 1, 11),
            (7_000_000, 1, 12),
            (15_000_000, 1, 13),
            (30_000_000, 1, 14),
            (70_000_000, 1, 15),
            (150_000_000, 2, 16),
            (90_000_000_000, 1, 16),
        ];
        let mut want = [0u64; BUCKETS];
        for (error, times, bucket) in cases {
            record(error, times);
            want[bucket] += times;
        }
        let s = h.summary(0);
        assert_eq!(s.released_buckets, want);
        assert_eq!(s.released_buckets.iter().sum::<u64>(), s.count);
        assert_eq!(
            ErrorHistogram::new(1).summary(0).released_buckets,
            [0; BUCKETS]
        );
    }
}
