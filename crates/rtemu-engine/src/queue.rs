//! The timing queue: copies in flight ordered by absolute release time.
//!
//! The same structure as the simulator's delay line (`rtemu_sim::delayline`), so both engines
//! release in the same order: most deliveries come in order (a fixed delay, a rate, little
//! jitter), so, like netem's `tfifo`, a copy not earlier than the last one queued is appended
//! to a FIFO, and only copies that overtake go to a binary heap. Keys are
//! `(time, seq, copy)`: ties leave in arrival order. Unlike the delay line, both parts are
//! allocated once with room for every pool slot, so queueing never allocates, and the next
//! release time can be read without taking the entry (the release loop waits for it).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// A queued copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Entry {
    /// Release time, ns on `CLOCK_MONOTONIC`.
    pub at_ns: u64,
    /// The packet's position in the direction's input.
    pub seq: u64,
    /// 0 for the original, 1.. for duplicates.
    pub copy: u8,
    /// The pool slot holding the frame.
    pub slot: u32,
}

/// Copies in flight, taken out in `(time, seq, copy)` order.
#[derive(Debug)]
pub struct TimingQueue {
    fifo: VecDeque<Entry>,
    overtaking: BinaryHeap<Reverse<Entry>>,
    capacity: usize,
}

impl TimingQueue {
    /// A queue with room for `capacity` entries (the pool's slot count).
    pub fn with_capacity(capacity: usize) -> Self {
        TimingQueue {
            fifo: VecDeque::with_capacity(capacity),
            overtaking: BinaryHeap::with_capacity(capacity),
            capacity,
        }
    }

    /// Queues a copy. The caller holds at most `capacity` entries (one per pool slot), so this
    /// never allocates.
    pub fn push(&mut self, e: Entry) {
        debug_assert!(self.len() < self.capacity, "more entries than pool slots");
        match self.fifo.back() {
            Some(last) if e < *last => self.overtaking.push(Reverse(e)),
            _ => self.fifo.push_back(e),
        }
    }

    /// The earliest entry, without taking it.
    pub fn peek(&self) -> Option<&Entry> {
        match (self.fifo.front(), self.overtaking.peek()) {
            (Some(f), Some(Reverse(h))) => Some(if f <= h { f } else { h }),
            (Some(f), None) => Some(f),
            (None, Some(Reverse(h))) => Some(h),
            (None, None) => None,
        }
    }

    /// Takes the earliest entry if it is due at or before `now_ns`.
    pub fn pop_due(&mut self, now_ns: u64) -> Option<Entry> {
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
    use rtemu_sim::delayline::DelayLine;

    fn entry(at_ns: u64, seq: u64) -> Entry {
        Entry {
            at_ns,
            seq,
            copy: 0,
            slot: seq as u32,
        }
    }

    proptest! {
        /// Whatever the push order, entries leave in the simulator's delay-line order, never
        /// before they are due, and `peek` always shows the next one to leave.
        #[test]
        fn releases_in_the_simulators_order(
            times in proptest::collection::vec(0u64..1000, 0..300),
            step in 1u64..200,
        ) {
            let mut queue = TimingQueue::with_capacity(times.len());
            let mut line = DelayLine::default();
            let (mut ours, mut sims) = (Vec::new(), Vec::new());
            for (seq, t) in times.iter().enumerate() {
                queue.push(entry(*t, seq as u64));
                line.push((*t, seq as u64, 0, seq));
                let now = (seq as u64 + 1) * step;
                loop {
                    let next = queue.peek().copied();
                    let Some(e) = queue.pop_due(now) else { break };
                    prop_assert_eq!(Some(e), next);
                    prop_assert!(e.at_ns <= now);
                    ours.push((e.at_ns, e.seq));
                }
                while let Some(e) = line.pop_due(now) {
                    sims.push((e.0, e.1));
                }
            }
            while let Some(e) = queue.pop_due(u64::MAX) {
                ours.push((e.at_ns, e.seq));
            }
            while let Some(e) = line.pop_due(u64::MAX) {
                sims.push((e.0, e.1));
            }
            prop_assert!(queue.is_empty());
            prop_assert_eq!(ours, sims);
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
