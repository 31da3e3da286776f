//! The copies in flight, ordered by delivery time.
//!
//! Most deliveries come in order (a fixed delay, a rate, little jitter), so, like netem's
//! `tfifo`, a copy that is not earlier than the last one queued is appended to a plain FIFO,
//! and only copies that overtake go to a binary heap. Taking the next delivery compares the
//! two fronts. Keys are `(time, seq, copy)`, so ties leave in input order and the output is
//! deterministic.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// A queued copy: delivery time, input sequence number, copy number, and a payload handle.
pub type Entry = (u64, u64, u8, usize);

/// Copies in flight, taken out in `(time, seq, copy)` order.
#[derive(Debug, Default)]
pub struct DelayLine {
    fifo: VecDeque<Entry>,
    overtaking: BinaryHeap<Reverse<Entry>>,
}

impl DelayLine {
    /// Queues a copy.
    pub fn push(&mut self, e: Entry) {
        match self.fifo.back() {
            Some(last) if e < *last => self.overtaking.push(Reverse(e)),
            _ => self.fifo.push_back(e),
        }
    }

    /// Takes the earliest copy if it is due at or before `now`.
    pub fn pop_due(&mut self, now: u64) -> Option<Entry> {
        let from_fifo = match (self.fifo.front(), self.overtaking.peek()) {
            (Some(f), Some(Reverse(h))) => f <= h,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return None,
        };
        if from_fifo {
            self.fifo.front().filter(|e| e.0 <= now)?;
            self.fifo.pop_front()
        } else {
            self.overtaking.peek().filter(|Reverse(e)| e.0 <= now)?;
            self.overtaking.pop().map(|Reverse(e)| e)
        }
    }

    /// Copies in flight.
    pub fn len(&self) -> usize {
        self.fifo.len() + self.overtaking.len()
    }

    /// Whether nothing is in flight.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever the push order, every entry leaves exactly once and never before it is due.
        #[test]
        fn every_entry_leaves_once_and_never_early(times in proptest::collection::vec(0u64..1000, 0..300), step in 1u64..200) {
            let mut line = DelayLine::default();
            let mut out = Vec::new();
            for (seq, t) in times.iter().enumerate() {
                line.push((*t, seq as u64, 0, seq));
                let now = (seq as u64 + 1) * step;
                while let Some(e) = line.pop_due(now) {
                    prop_assert!(e.0 <= now);
                    out.push(e);
                }
            }
            while let Some(e) = line.pop_due(u64::MAX) {
                out.push(e);
            }
            prop_assert!(line.is_empty());
            out.sort_unstable();
            let mut all: Vec<Entry> = times.iter().enumerate().map(|(s, t)| (*t, s as u64, 0, s)).collect();
            all.sort_unstable();
            prop_assert_eq!(out, all);
        }

        /// Pushes that respect the engine's contract (never earlier than the last release
        /// time) come out fully sorted.
        #[test]
        fn engine_contract_gives_sorted_output(delays in proptest::collection::vec(0u64..50, 1..300)) {
            let mut line = DelayLine::default();
            let mut out = Vec::new();
            for (seq, d) in delays.iter().enumerate() {
                let arrival = seq as u64 * 10;
                while let Some(e) = line.pop_due(arrival) {
                    out.push(e);
                }
                line.push((arrival + d, seq as u64, 0, seq));
            }
            while let Some(e) = line.pop_due(u64::MAX) {
                out.push(e);
            }
            prop_assert!(out.windows(2).all(|w| w[0] <= w[1]));
            prop_assert_eq!(out.len(), delays.len());
        }
    }
}
