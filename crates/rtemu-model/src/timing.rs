//! The timing queue: copies in flight ordered by absolute release time, kept by both engines
//! (the simulator in virtual time, the real-time engine on `CLOCK_MONOTONIC`), so both release
//! in the same order.
//!
//! Most deliveries come in order (a fixed delay, a rate, little jitter), so, like netem's
//! `tfifo`, a copy not earlier than the last one queued is appended to a FIFO, and only copies
//! that overtake go to a binary heap; taking the next release compares the two fronts. Keys are
//! `(time, seq, copy)`: ties leave in arrival order and the output is deterministic. A queue
//! made [`TimingQueue::with_capacity`] for every copy its caller can hold never allocates, and
//! the next release time can be read without taking the entry (a real-time loop waits for it).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// A queued copy; `S` is the caller's handle to the frame (a pool slot, a buffer index).
/// Ordered by `(at_ns, seq, copy)`, then by the handle, which a caller never repeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Entry<S> {
    /// Release time, ns.
    pub at_ns: u64,
    /// The packet's position in the direction's input.
    pub seq: u64,
    /// 0 for the original, 1.. for duplicates.
    pub copy: u8,
    /// Where the frame is held.
    pub slot: S,
}

/// Copies in flight, taken out in `(time, seq, copy)` order.
#[derive(Debug)]
pub struct TimingQueue<S> {
    fifo: VecDeque<Entry<S>>,
    overtaking: BinaryHeap<Reverse<Entry<S>>>,
    /// The most entries the caller holds at once, when it said (0: it grows as needed).
    capacity: usize,
}

impl<S: Ord + Copy> Default for TimingQueue<S> {
    fn default() -> Self {
        TimingQueue {
            fifo: VecDeque::new(),
            overtaking: BinaryHeap::new(),
            capacity: 0,
        }
    }
}

impl<S: Ord + Copy> TimingQueue<S> {
    /// A queue with room for `capacity` entries (e.g. a pool's slot count): pushing never
    /// allocates while the caller holds at most that many.
    pub fn with_capacity(capacity: usize) -> Self {
        TimingQueue {
            fifo: VecDeque::with_capacity(capacity),
            overtaking: BinaryHeap::with_capacity(capacity),
            capacity,
        }
    }

    /// Queues a copy.
    pub fn push(&mut self, e: Entry<S>) {
        debug_assert!(
            self.capacity == 0 || self.len() < self.capacity,
            "more entries than the queue was made for"
        );
        match self.fifo.back() {
            Some(last) if e < *last => self.overtaking.push(Reverse(e)),
            _ => self.fifo.push_back(e),
        }
    }

    /// The earliest entry, without taking it.
    pub fn peek(&self) -> Option<&Entry<S>> {
        match (self.fifo.front(), self.overtaking.peek()) {
            (Some(f), Some(Reverse(h))) => Some(if f <= h { f } else { h }),
            (Some(f), None) => Some(f),
            (None, Some(Reverse(h))) => Some(h),
            (None, None) => None,
        }
    }

    /// Takes the earliest entry if it is due at or before `now_ns`.
    pub fn pop_due(&mut self, now_ns: u64) -> Option<Entry<S>> {
        let from_fifo = match (self.fifo.front(), self.overtaking.peek()) {
            (Some(f), Some(Reverse(h))) => f <= h,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return None,
        };
        if from_fifo {
            self.fifo.front().filter(|e| e.at_ns <= now_ns)?;
            self.fifo.pop_front()
        } else {
            self.overtaking
                .peek()
                .filter(|Reverse(e)| e.at_ns <= now_ns)?;
            self.overtaking.pop().map(|Reverse(e)| e)
        }
    }

    /// Entries queued.
    pub fn len(&self) -> usize {
        self.fifo.len() + self.overtaking.len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn entry(at_ns: u64, seq: u64) -> Entry<u32> {
        Entry {
            at_ns,
            seq,
            copy: 0,
            slot: seq as u32,
        }
    }

    proptest! {
        /// Whatever the push order, every entry leaves exactly once, never before it is due,
        /// in `(time, seq)` order among those due, and `peek` always shows the next to leave.
        #[test]
        fn every_entry_leaves_once_in_order_and_never_early(
            times in proptest::collection::vec(0u64..1000, 0..300),
            step in 1u64..200,
        ) {
            let mut queue = TimingQueue::with_capacity(times.len());
            let mut out = Vec::new();
            for (seq, t) in times.iter().enumerate() {
                queue.push(entry(*t, seq as u64));
                let now = (seq as u64 + 1) * step;
                let mut last = None;
                loop {
                    let next = queue.peek().copied();
                    let Some(e) = queue.pop_due(now) else { break };
                    prop_assert_eq!(Some(e), next);
                    prop_assert!(e.at_ns <= now);
                    prop_assert!(last < Some(e), "one turn releases in key order");
                    last = Some(e);
                    out.push(e);
                }
            }
            while let Some(e) = queue.pop_due(u64::MAX) {
                out.push(e);
            }
            prop_assert!(queue.is_empty());
            out.sort_unstable();
            let mut all: Vec<_> = times.iter().enumerate().map(|(s, t)| entry(*t, s as u64)).collect();
            all.sort_unstable();
            prop_assert_eq!(out, all);
        }

        /// Pushes that respect an engine's contract (never earlier than the last release
        /// time) come out fully sorted.
        #[test]
        fn engine_contract_gives_sorted_output(delays in proptest::collection::vec(0u64..50, 1..300)) {
            let mut queue = TimingQueue::default();
            let mut out = Vec::new();
            for (seq, d) in delays.iter().enumerate() {
                let arrival = seq as u64 * 10;
                while let Some(e) = queue.pop_due(arrival) {
                    out.push(e);
                }
                queue.push(entry(arrival + d, seq as u64));
            }
            while let Some(e) = queue.pop_due(u64::MAX) {
                out.push(e);
            }
            prop_assert!(out.windows(2).all(|w| w[0] <= w[1]));
            prop_assert_eq!(out.len(), delays.len());
        }
    }

    #[test]
    fn in_order_entries_stay_in_the_fifo() {
        let mut queue = TimingQueue::with_capacity(4);
        queue.push(entry(10, 0));
        queue.push(entry(20, 1));
        queue.push(entry(5, 2));
        assert_eq!((queue.fifo.len(), queue.overtaking.len()), (2, 1));
        assert_eq!(queue.peek().map(|e| e.seq), Some(2));
        assert_eq!(queue.pop_due(4), None);
        assert_eq!(queue.pop_due(10).map(|e| e.seq), Some(2));
        assert_eq!(queue.pop_due(10).map(|e| e.seq), Some(0));
        assert_eq!(queue.pop_due(19), None);
        assert_eq!(queue.len(), 1);
    }
}
