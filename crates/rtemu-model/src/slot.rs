//! netem's `slot`: delivery in slots, the bursty service of Wi-Fi, LTE and DOCSIS, where a
//! station sends only when it is given the medium and then sends what it has.
//!
//! A copy that has passed every other stage is *ready* at the time they decided. It leaves the
//! link only at a slot start, and a slot carries at most `packets` copies and `bytes` bytes.
//! Copies are served in the order they become ready (ties by packet and copy), by this rule:
//!
//! 1. If the slot start lies before the copy is ready, that slot passed with nothing to send:
//!    the next start is drawn from the moment the copy is ready (`ready + gap`), with fresh
//!    budgets.
//! 2. The copy leaves at the slot start, and takes one packet and its length in bytes from the
//!    budgets. When either budget is spent (zero or below, so a copy larger than what is left
//!    still goes), the next start is drawn from this one (`start + gap`), with fresh budgets.
//!
//! A gap is uniform in `[MIN, MAX)` (`slot MIN MAX`, to the nanosecond), or drawn from a delay
//! distribution of mean `DELAY` and spread `JITTER` (`slot distribution NAME DELAY JITTER`),
//! negative draws counting as 0. Before the first copy no slot has begun, so the first copy
//! waits one gap from the moment it is ready.
//!
//! This is Linux's `sch_netem` rule written as a function of the copies alone. Linux applies
//! rule 1 whenever its dequeue runs, and that runs at every enqueue too: a packet given `delay`
//! and `slot` can find its slot drawn from its arrival, not from the end of its delay, so the
//! two add differently there depending on when the kernel looked. rtemu always draws from
//! the moment the copy is ready, which is the same in the simulator and in real time.
//!
//! Gaps come from the link's own slot stream, so adding `slot` moves no other draw.
//!
//! The stage holds at most the link's `limit` copies, as netem's `limit` counts every packet
//! netem holds: a copy that finds `limit` copies waiting to be ready is dropped (`queue-full`).
//! Its queue is sized for them when the link is built, so holding a copy never allocates.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use serde::{Deserialize, Serialize};

use crate::config::DistName;
use crate::dist::DelaySampler;
use crate::fate::Delivery;
use crate::packet::Nanos;
use crate::rng::Stream;
use crate::units::{Size, Time};
use crate::{Departure, Outcome};

/// `slot`'s parameters, named as in tc's `struct tc_netem_slot`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SlotConfig {
    /// Without `distribution`: the shortest gap between slot starts.
    pub min_delay: Time,
    /// Without `distribution`: the longest gap (exclusive; `min_delay` when equal).
    pub max_delay: Time,
    /// With it, gaps are drawn from this distribution with `delay` and `jitter`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub distribution: Option<DistName>,
    /// With `distribution`: the mean gap.
    pub delay: Time,
    /// With `distribution`: the spread of the gaps (standard deviation, or half-width for
    /// `uniform`).
    pub jitter: Time,
    /// The most copies a slot carries; `None` for no limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub packets: Option<u32>,
    /// The most bytes a slot carries (the copy that crosses it still goes); `None` for no
    /// limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<Size>,
}

/// How the gaps between slot starts are drawn.
#[derive(Debug, Clone)]
pub(crate) enum Gaps {
    /// Uniform in `[min, min + span)`, ns.
    Uniform { min: u64, span: u64 },
    /// From a delay distribution.
    Drawn(DelaySampler),
}

/// A copy waiting for its slot, ordered by `(ready, seq, copy)`.
#[derive(Debug, Clone, Copy)]
struct Waiting {
    seq: u64,
    arrival_ns: Nanos,
    len: u32,
    /// Its delivery as the other stages decided it; `at_ns` is when it is ready.
    delivery: Delivery,
}

impl Waiting {
    fn key(&self) -> (Nanos, u64, u8) {
        (self.delivery.at_ns, self.seq, self.delivery.copy)
    }
}

impl PartialEq for Waiting {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Waiting {}

impl PartialOrd for Waiting {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Waiting {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

/// The slot stage of one link direction: the copies waiting for a slot and the slot schedule.
#[derive(Debug, Clone)]
pub(crate) struct Slots {
    gaps: Gaps,
    stream: Stream,
    packets: i64,
    bytes: i64,
    /// The current slot's start: copies ready by then leave at it. `None` before the first.
    start: Option<Nanos>,
    packets_left: i64,
    bytes_left: i64,
    /// The most copies `waiting` holds.
    limit: usize,
    waiting: BinaryHeap<Reverse<Waiting>>,
}

/// The most copies a slot stage makes room for when it is built: 65,536, an engine
/// direction's most frame buffers. Only a larger `limit` (`limit TIME` alone lifts it) lets
/// the queue grow past it, once, while it fills.
const PRESIZED: usize = 1 << 16;

impl Slots {
    /// A slot stage drawing its gaps with `gaps` from `stream`, holding at most `limit`
    /// copies.
    pub(crate) fn new(cfg: &SlotConfig, gaps: Gaps, stream: Stream, limit: u32) -> Slots {
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        let packets = cfg.packets.map_or(i64::MAX, i64::from);
        let bytes = cfg
            .bytes
            .map_or(i64::MAX, |b| b.0.min(i64::MAX as u64) as i64);
        Slots {
            gaps,
            stream,
            packets,
            bytes,
            start: None,
            packets_left: packets,
            bytes_left: bytes,
            limit,
            waiting: BinaryHeap::with_capacity(limit.min(PRESIZED)),
        }
    }

    /// Holds a copy of `len` bytes until its slot; `delivery.at_ns` is when it is ready.
    /// Returns false, holding nothing, when `limit` copies wait already.
    #[must_use]
    pub(crate) fn hold(
        &mut self,
        seq: u64,
        arrival_ns: Nanos,
        len: u32,
        delivery: Delivery,
    ) -> bool {
        if self.waiting.len() >= self.limit {
            return false;
        }
        self.waiting.push(Reverse(Waiting {
            seq,
            arrival_ns,
            len,
            delivery,
        }));
        true
    }

    /// When the next waiting copy is ready: its slot is decided then.
    pub(crate) fn next(&self) -> Option<Nanos> {
        self.waiting.peek().map(|Reverse(w)| w.delivery.at_ns)
    }

    /// The next waiting copy, leaving at its slot's start.
    pub(crate) fn depart(&mut self) -> Option<Departure> {
        let Reverse(w) = self.waiting.pop()?;
        let ready = w.delivery.at_ns;
        let at = match self.start {
            Some(start) if start >= ready => start,
            // No slot yet, or it passed before the copy was ready.
            _ => self.open(ready),
        };
        self.packets_left -= 1;
        self.bytes_left = self.bytes_left.saturating_sub(i64::from(w.len));
        if self.packets_left <= 0 || self.bytes_left <= 0 {
            self.open(at);
        }
        Some(Departure {
            seq: w.seq,
            arrival_ns: w.arrival_ns,
            copy: w.delivery.copy,
            outcome: Outcome::Delivered(Delivery {
                at_ns: at,
                ..w.delivery
            }),
        })
    }

    /// Draws the next slot start, one gap after `from`, with fresh budgets, and returns it.
    fn open(&mut self, from: Nanos) -> Nanos {
        let gap = match &mut self.gaps {
            Gaps::Uniform { min, span } => {
                *min + ((u128::from(self.stream.next_u64()) * u128::from(*span)) >> 64) as u64
            }
            Gaps::Drawn(d) => d.sample(&mut self.stream),
        };
        let start = from.saturating_add(gap);
        self.start = Some(start);
        self.packets_left = self.packets;
        self.bytes_left = self.bytes;
        start
    }
}
