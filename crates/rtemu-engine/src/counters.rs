//! Per-direction counters, and how they leave the packet path without a lock.
//!
//! The release thread keeps plain [`Counters`] and, once per loop turn that changed them,
//! publishes a copy into [`Published`], a sequence lock over atomics: the writer makes the
//! sequence odd, stores every word, and makes it even again; a reader retries until it saw the
//! same even sequence before and after its loads. The writer never waits, and a reader always
//! gets one consistent snapshot, so the conservation identity
//! `received + duplicates = delivered + dropped + in_flight` holds in every snapshot, not only
//! at the end.

use std::sync::atomic::{fence, AtomicU64, Ordering};

use rtemu_model::DropReason;

/// Why the engine dropped a copy: the model's reasons, and the engine's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DropKind {
    /// The model's loss stage.
    Loss,
    /// The model's rate queue was full.
    QueueFull,
    /// The model's trace said to drop it.
    Trace,
    /// The model's trace had no record ready.
    TraceUnderrun,
    /// The model's queue discipline (CoDel, PIE, DualPI2) dropped it to signal congestion.
    Aqm,
    /// Every preallocated frame buffer was in use.
    PoolExhausted,
    /// The frame was longer than a buffer, or the I/O layer received only part of it.
    Oversize,
    /// The kernel refused the send that carried it.
    SendFailed,
    /// The model had stopped deciding (its trace ended under the `stop` policy, or failed).
    ModelExhausted,
    /// The link was cut (`rtemu link down`): it carries nothing, not even address resolution.
    /// Also a frame the kernel queued before the engine brought the link up (see
    /// `Direction::open`).
    LinkDown,
}

impl DropKind {
    /// Every kind, in the order reports list them.
    pub const ALL: [DropKind; 10] = [
        DropKind::Loss,
        DropKind::QueueFull,
        DropKind::Trace,
        DropKind::TraceUnderrun,
        DropKind::Aqm,
        DropKind::PoolExhausted,
        DropKind::Oversize,
        DropKind::SendFailed,
        DropKind::ModelExhausted,
        DropKind::LinkDown,
    ];

    /// The name used in reports and JSON (the model's reasons keep the model's names).
    pub fn as_str(self) -> &'static str {
        match self {
            DropKind::Loss => DropReason::Loss.as_str(),
            DropKind::QueueFull => DropReason::QueueFull.as_str(),
            DropKind::Trace => DropReason::Trace.as_str(),
            DropKind::TraceUnderrun => DropReason::TraceUnderrun.as_str(),
            DropKind::Aqm => DropReason::Aqm.as_str(),
            DropKind::PoolExhausted => "pool-exhausted",
            DropKind::Oversize => "oversize",
            DropKind::SendFailed => "send-failed",
            DropKind::ModelExhausted => "model-exhausted",
            DropKind::LinkDown => "link-down",
        }
    }

    /// The kind for a model's drop reason.
    pub fn from_model(reason: DropReason) -> DropKind {
        match reason {
            DropReason::Loss => DropKind::Loss,
            DropReason::QueueFull => DropKind::QueueFull,
            DropReason::Trace => DropKind::Trace,
            DropReason::TraceUnderrun => DropKind::TraceUnderrun,
            DropReason::Aqm => DropKind::Aqm,
            // A reason added to the model later is still a model decision; until the engine
            // names it, it is counted with the trace's drops rather than lost from the sum.
            _ => DropKind::Trace,
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl std::fmt::Display for DropKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

const DROP_KINDS: usize = DropKind::ALL.len();

/// What happened on one link direction, in copies of frames (a duplicated frame is two copies).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Frames received from the sending side.
    pub received: u64,
    /// Bytes of those frames.
    pub received_bytes: u64,
    /// Extra copies the model made (duplicates).
    pub duplicates: u64,
    /// Copies queued with bits the model flipped (`corrupt`, `ber`); outside the identity,
    /// like duplicates' originals: a corrupted copy is still delivered or dropped.
    pub corrupted: u64,
    /// Copies queued with their ECN field set to CE by the model's queue or `ecn` loss
    /// (instead of a drop); outside the identity, like `corrupted`.
    pub marked: u64,
    /// Address-resolution frames (ARP, NDP) that passed with the base delay, not the model.
    pub resolution_passed: u64,
    /// Copies sent to the receiving side.
    pub delivered: u64,
    /// Bytes of those copies.
    pub delivered_bytes: u64,
    /// Copies dropped, by [`DropKind`] (index with [`Counters::dropped`]).
    dropped: [u64; DROP_KINDS],
    /// Copies waiting for their release time.
    pub in_flight: u64,
    /// Copies released later than the late threshold after their intended time.
    pub late: u64,
    /// The largest release error of a delivered copy, ns.
    pub max_error_ns: u64,
    /// Times a due copy waited because the transmit ring had no free slot.
    pub tx_busy: u64,
    /// Frames a trace-driven model decided without a trace record, because the reader had
    /// none ready (they passed undelayed, under the engine's `pass` under-run policy). Outside
    /// the conservation identity: these frames are counted there by their fate.
    pub trace_underruns: u64,
}

impl Counters {
    /// Copies dropped for `kind`.
    pub fn dropped(&self, kind: DropKind) -> u64 {
        self.dropped[kind.index()]
    }

    /// Copies dropped for any reason.
    pub fn dropped_total(&self) -> u64 {
        self.dropped.iter().sum()
    }

    /// Counts one copy dropped for `kind`.
    pub fn drop_one(&mut self, kind: DropKind) {
        self.dropped[kind.index()] += 1;
    }

    /// Whether every copy is accounted for:
    /// `received + duplicates = delivered + dropped + in_flight`.
    pub fn conserved(&self) -> bool {
        self.received + self.duplicates == self.delivered + self.dropped_total() + self.in_flight
    }

    fn to_words(self) -> [u64; WORDS] {
        let mut w = [0; WORDS];
        let head = [
            self.received,
            self.received_bytes,
            self.duplicates,
            self.resolution_passed,
            self.delivered,
            self.delivered_bytes,
            self.in_flight,
            self.late,
            self.max_error_ns,
            self.tx_busy,
            self.trace_underruns,
            self.corrupted,
            self.marked,
        ];
        w[..HEAD].copy_from_slice(&head);
        w[HEAD..].copy_from_slice(&self.dropped);
        w
    }

    fn from_words(w: &[u64; WORDS]) -> Counters {
        let mut dropped = [0; DROP_KINDS];
        dropped.copy_from_slice(&w[HEAD..]);
        Counters {
            received: w[0],
            received_bytes: w[1],
            duplicates: w[2],
            resolution_passed: w[3],
            delivered: w[4],
            delivered_bytes: w[5],
            in_flight: w[6],
            late: w[7],
            max_error_ns: w[8],
            tx_busy: w[9],
            trace_underruns: w[10],
            corrupted: w[11],
            marked: w[12],
            dropped,
        }
    }
}

const HEAD: usize = 13;
const WORDS: usize = HEAD + DROP_KINDS;

/// [`Counters`] shared between the release thread (one writer) and any number of readers.
#[derive(Debug, Default)]
pub struct Published {
    seq: AtomicU64,
    words: [AtomicU64; WORDS],
}

impl Published {
    /// Publishes `c`. Only one thread may publish.
    pub fn publish(&self, c: &Counters) {
        let seq = self.seq.load(Ordering::Relaxed);
        self.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        // Orders the odd sequence before the word stores (the seqlock writer's fence).
        fence(Ordering::Release);
        for (slot, value) in self.words.iter().zip(c.to_words()) {
            slot.store(value, Ordering::Relaxed);
        }
        self.seq.store(seq.wrapping_add(2), Ordering::Release);
    }

    /// The last published counters, as one consistent snapshot.
    pub fn snapshot(&self) -> Counters {
        loop {
            let before = self.seq.load(Ordering::Acquire);
            if before % 2 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let mut w = [0; WORDS];
            for (dst, slot) in w.iter_mut().zip(&self.words) {
                *dst = slot.load(Ordering::Relaxed);
            }
            // Orders the word loads before the second sequence load (the reader's fence).
            fence(Ordering::Acquire);
            if self.seq.load(Ordering::Relaxed) == before {
                return Counters::from_words(&w);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn words_round_trip_every_field() {
        let mut c = Counters {
            received: 1,
            received_bytes: 2,
            duplicates: 3,
            resolution_passed: 4,
            delivered: 5,
            delivered_bytes: 6,
            in_flight: 7,
            late: 8,
            max_error_ns: 9,
            tx_busy: 10,
            trace_underruns: 11,
            corrupted: 12,
            marked: 13,
            ..Counters::default()
        };
        for (i, kind) in DropKind::ALL.into_iter().enumerate() {
            for _ in 0..=i {
                c.drop_one(kind);
            }
        }
        assert_eq!(Counters::from_words(&c.to_words()), c);
        assert_eq!(c.dropped(DropKind::ModelExhausted), 9);
        assert_eq!(c.dropped(DropKind::LinkDown), 10);
        assert_eq!(c.dropped_total(), (1..=10).sum::<u64>());
    }

    /// A reader racing a writer never sees a torn snapshot: the writer keeps the identity true
    /// in every published state, so a torn read would break it. The writer goes on until the
    /// reader has read many times, so the two really overlap however the threads are scheduled.
    #[test]
    fn snapshots_are_never_torn() {
        const MIN_WRITES: u64 = 200_000;
        const MIN_READS: u64 = 1_000;
        let shared = Arc::new(Published::default());
        let reads = Arc::new(AtomicU64::new(0));
        let writer = {
            let (shared, reads) = (Arc::clone(&shared), Arc::clone(&reads));
            std::thread::spawn(move || {
                let mut c = Counters::default();
                let mut i = 0u64;
                // Bounded: a reader that never runs fails the test instead of hanging it.
                while i < MIN_WRITES || (reads.load(Ordering::Relaxed) < MIN_READS && i < 1 << 32) {
                    c.received += 1;
                    match i % 3 {
                        0 => c.delivered += 1,
                        1 => c.drop_one(DropKind::Loss),
                        _ => c.in_flight += 1,
                    }
                    shared.publish(&c);
                    i += 1;
                }
                i
            })
        };
        while !writer.is_finished() {
            let c = shared.snapshot();
            assert!(c.conserved(), "torn snapshot: {c:?}");
            reads.fetch_add(1, Ordering::Relaxed);
        }
        let written = writer.join().unwrap();
        assert_eq!(shared.snapshot().received, written);
        assert!(reads.load(Ordering::Relaxed) >= MIN_READS);
    }

    #[test]
    fn model_reasons_keep_their_names() {
        for reason in DropReason::ALL {
            assert_eq!(DropKind::from_model(reason).as_str(), reason.as_str());
        }
    }
}
