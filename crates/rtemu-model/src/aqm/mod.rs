//! Queue disciplines at the bottleneck: the rate stage's queue when it is managed (CoDel,
//! FQ-CoDel, PIE, DualPI2) rather than drop-tail.
//!
//! A managed queue decides at *dequeue*: CoDel judges a packet by how long it waited, and a
//! scheduler picks which queue sends next from what is queued when the link frees, which
//! depends on packets that arrive after this one. So unlike the drop-tail rate queue
//! ([`crate::rate`]), which computes every departure at arrival, a [`Bottleneck`] keeps the
//! packets (their metadata; the engines keep the frames) and is asked to send the next one
//! when its link frees: [`Bottleneck::next`] says when that is, [`Bottleneck::depart`] makes
//! the decision. The link itself is still computed, not measured: the next dequeue is when the
//! packet sent last has been serialized at the configured rate, so no feedback from I/O is
//! needed, and an engine that calls `depart` at those times, before offering any packet that
//! arrived later, gets the same decisions in virtual and in real time.
//!
//! The link asks for a packet when it becomes free; when the queue is empty then, the
//! discipline is told so at that instant (CoDel leaves its dropping state), unless a packet
//! arrived before.

pub mod codel;
pub mod dualpi2;
pub mod fq_codel;
pub mod pie;
mod store;

use crate::fate::{Corruption, DropReason};
use crate::packet::{Ecn, Nanos};
use crate::rate::RateConfig;
use crate::rng::Stream;
use crate::units::Rate;

use crate::packet::FlowKey;
use codel::{CodelConfig, CodelState, Decision, Head};
use dualpi2::{DualPi2, DualPi2Config};
use fq_codel::{FqCodel, FqCodelConfig};
use pie::{Pie, PieConfig};
use store::{Fifo, Store};

/// A controller's update timer (PIE's, DualPI2's): it starts with the first packet, so the
/// decisions depend only on the packets and their times, not on the clock's origin. The
/// updates due are taken lazily, in order, before each event: nothing changes between events,
/// so each sees the state it would have seen on time.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ticker {
    period: Nanos,
    /// When the next update is due; `None` before the first packet.
    next: Option<Nanos>,
}

impl Ticker {
    /// A timer of `period`, not started.
    pub(crate) fn new(period: Nanos) -> Self {
        Ticker { period, next: None }
    }

    /// Starts the timer at `now` unless it runs.
    pub(crate) fn start(&mut self, now: Nanos) {
        if self.next.is_none() {
            self.next = Some(now.saturating_add(self.period));
        }
    }

    /// The next update if it is due by `now`, taken.
    pub(crate) fn take(&mut self, now: Nanos) -> Option<Nanos> {
        let at = self.next.filter(|t| *t <= now)?;
        self.next = Some(at.saturating_add(self.period));
        Some(at)
    }

    /// Skips every update due by `now`: the caller knows they would change nothing.
    pub(crate) fn skip(&mut self, now: Nanos) {
        if let Some(at) = self.next.filter(|t| *t <= now) {
            let skipped = (now - at) / self.period + 1;
            self.next = Some(at.saturating_add(skipped.saturating_mul(self.period)));
        }
    }
}

/// A copy waiting in a discipline's queue, with what the stages after the queue need to finish
/// its fate.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Queued {
    pub(crate) seq: u64,
    pub(crate) arrival_ns: Nanos,
    /// When it entered the queue: its arrival, or the bottleneck's clock if that was later.
    pub(crate) enqueued_ns: Nanos,
    /// The scheduler's queue for its flow (FQ-CoDel's).
    pub(crate) queue: u32,
    pub(crate) len: u32,
    pub(crate) copy: u8,
    pub(crate) ecn: Ecn,
    pub(crate) reordered: bool,
    /// Marked CE before the queue (netem's `ecn` loss) or by the queue at enqueue.
    pub(crate) marked: bool,
    pub(crate) corruption: Corruption,
    /// The delay a trace decided, for a trace-driven link.
    pub(crate) traced_delay: Option<u64>,
}

/// How a copy left the bottleneck.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Left {
    /// Serialized from `at` until `finish`; `mark` if the discipline marked it CE.
    Sent {
        packet: Queued,
        mark: bool,
        finish: Nanos,
    },
    /// Dropped at dequeue.
    Dropped { packet: Queued, reason: DropReason },
}

/// One queue under CoDel (RFC 8289): tc's `codel`.
#[derive(Debug, Clone)]
pub(crate) struct Codel {
    limit: u32,
    state: CodelState,
    store: Store<Queued>,
    queue: Fifo,
}

impl Codel {
    fn new(cfg: &CodelConfig) -> Self {
        Codel {
            limit: cfg.limit,
            state: CodelState::new(cfg),
            // The limit, and room for the packet that finds it reached.
            store: Store::new(cfg.limit as usize),
            queue: Fifo::default(),
        }
    }

    fn enqueue(&mut self, q: Queued) -> Result<(), DropReason> {
        if self.queue.len >= self.limit {
            return Err(DropReason::QueueFull);
        }
        self.queue
            .push(&mut self.store, q, q.len)
            .map(|_| ())
            .map_err(|_| DropReason::QueueFull)
    }

    fn dequeue(&mut self, now: Nanos) -> Option<(Queued, Decision)> {
        let Some(q) = self.queue.pop(&mut self.store, |q| q.len) else {
            self.state.found_empty();
            return None;
        };
        let head = Head {
            sojourn_ns: now.saturating_sub(q.enqueued_ns),
            len: q.len,
            ecn_capable: q.ecn.is_capable(),
        };
        let d = self
            .state
            .decide(now, &head, self.queue.bytes, self.queue.is_empty());
        Some((q, d))
    }
}

/// A queue discipline.
#[derive(Debug, Clone)]
pub(crate) enum Discipline {
    /// CoDel.
    Codel(Codel),
    /// FQ-CoDel.
    FqCodel(FqCodel),
    /// PIE or DOCSIS-PIE.
    Pie(Pie),
    /// DualPI2.
    DualPi2(DualPi2),
}

impl Discipline {
    /// Offers `q`, arriving at `now`.
    fn enqueue(&mut self, now: Nanos, q: Queued) -> Result<(), DropReason> {
        match self {
            Discipline::Codel(c) => c.enqueue(q),
            Discipline::FqCodel(f) => {
                f.enqueue(q, q.queue);
                Ok(())
            }
            Discipline::Pie(p) => p.enqueue(now, q),
            Discipline::DualPi2(d) => d.enqueue(now, q).map_err(|()| DropReason::QueueFull),
        }
    }

    /// The next packet to leave at `now`, and what becomes of it; `None` (and the discipline
    /// told its queues were found empty) when it holds none.
    fn dequeue(&mut self, now: Nanos) -> Option<(Queued, Decision)> {
        match self {
            Discipline::Codel(c) => c.dequeue(now),
            Discipline::FqCodel(f) => f.dequeue(now),
            Discipline::Pie(p) => p.dequeue(now),
            Discipline::DualPi2(d) => d.dequeue(now),
        }
    }

    fn is_empty(&self) -> bool {
        self.backlog().0 == 0
    }

    /// Packets and bytes queued.
    fn backlog(&self) -> (u64, u64) {
        match self {
            Discipline::Codel(c) => (u64::from(c.queue.len), c.queue.bytes),
            Discipline::FqCodel(f) => f.backlog(),
            Discipline::Pie(p) => p.backlog(),
            Discipline::DualPi2(d) => d.backlog(),
        }
    }
}

/// A link of a given rate behind a managed queue.
#[derive(Debug, Clone)]
pub(crate) struct Bottleneck {
    rate: RateConfig,
    discipline: Discipline,
    /// When the link has finished serializing the packet it sent last.
    link_free_ns: Nanos,
    /// When the next packet leaves the queue, while the queue holds one.
    next_ns: Option<Nanos>,
    /// When the link will ask for a packet and find the queue empty, unless one arrives first.
    idle_at: Option<Nanos>,
    /// The time of the last event: arrivals earlier than it are taken to arrive at it.
    clock: Nanos,
}

impl Bottleneck {
    /// A link of `rate` behind a CoDel queue.
    pub(crate) fn codel(rate: RateConfig, cfg: &CodelConfig) -> Self {
        Self::with(rate, Discipline::Codel(Codel::new(cfg)))
    }

    /// A link of `rate` behind FQ-CoDel, hashing flows with `hash_seed`.
    pub(crate) fn fq_codel(rate: RateConfig, cfg: &FqCodelConfig, hash_seed: u64) -> Self {
        Self::with(rate, Discipline::FqCodel(FqCodel::new(cfg, hash_seed)))
    }

    /// A link of `rate` behind PIE (or DOCSIS-PIE), drawing from `stream`.
    pub(crate) fn pie(rate: RateConfig, cfg: &PieConfig, stream: Stream) -> Self {
        Self::with(rate, Discipline::Pie(Pie::new(cfg, rate, stream)))
    }

    /// A link of `rate` behind DualPI2, drawing from `stream`.
    pub(crate) fn dualpi2(rate: RateConfig, cfg: &DualPi2Config, stream: Stream) -> Self {
        Self::with(rate, Discipline::DualPi2(DualPi2::new(cfg, stream)))
    }

    /// The scheduler's queue for `flow` (0 for a discipline with one queue).
    pub(crate) fn classify(&self, flow: &FlowKey) -> u32 {
        match &self.discipline {
            Discipline::FqCodel(f) => f.classify(flow),
            _ => 0,
        }
    }

    fn with(rate: RateConfig, discipline: Discipline) -> Self {
        Bottleneck {
            rate,
            discipline,
            link_free_ns: 0,
            next_ns: None,
            idle_at: None,
            clock: 0,
        }
    }

    /// Offers a copy that arrived at `now` (the later of `now` and the last event): queued, or
    /// dropped at once for the reason returned.
    pub(crate) fn enqueue(&mut self, now: Nanos, mut q: Queued) -> Result<(), DropReason> {
        let now = now.max(self.clock);
        self.clock = now;
        if let Some(t) = self.idle_at.take() {
            if now >= t && self.discipline.is_empty() {
                self.discipline.dequeue(t);
            }
        }
        q.enqueued_ns = now;
        self.discipline.enqueue(now, q)?;
        if self.next_ns.is_none() && !self.discipline.is_empty() {
            self.next_ns = Some(self.link_free_ns.max(now));
        }
        Ok(())
    }

    /// When the next copy leaves the queue (or a copy dropped on overflow is reported), if
    /// one is queued.
    pub(crate) fn next(&self) -> Option<Nanos> {
        match &self.discipline {
            Discipline::FqCodel(f) if f.has_dropped() => Some(self.clock),
            _ => self.next_ns,
        }
    }

    /// The copy that leaves the queue at [`Bottleneck::next`], and how.
    pub(crate) fn depart(&mut self) -> Option<Left> {
        if let Discipline::FqCodel(f) = &mut self.discipline {
            if let Some(packet) = f.take_dropped() {
                return Some(Left::Dropped {
                    packet,
                    reason: DropReason::QueueFull,
                });
            }
        }
        let now = self.next_ns?;
        self.clock = self.clock.max(now);
        let Some((packet, decision)) = self.discipline.dequeue(now) else {
            self.next_ns = None;
            return None;
        };
        let more = !self.discipline.is_empty();
        Some(match decision {
            Decision::Send { mark } => {
                self.link_free_ns = now.saturating_add(self.rate.transmit_ns(packet.len));
                if more {
                    self.next_ns = Some(self.link_free_ns);
                } else {
                    self.next_ns = None;
                    self.idle_at = Some(self.link_free_ns);
                }
                Left::Sent {
                    packet,
                    mark,
                    finish: self.link_free_ns,
                }
            }
            Decision::Drop => {
                // A dropped packet takes no time on the link: the next one leaves now.
                self.next_ns = more.then_some(now);
                Left::Dropped {
                    packet,
                    reason: DropReason::Aqm,
                }
            }
        })
    }

    /// The link's rate is `rate` from now on, for every packet that starts serializing
    /// after this call; the one on the wire finishes when it was told to (its delivery has
    /// been handed out). The queue keeps its packets in their order, and the discipline its
    /// state (CoDel's dropping state and count, PIE's and DualPI2's probabilities): a modem's
    /// rate changes under a running queue, and how the controller then follows the new rate
    /// is what RFC 7928 §8.2.5 measures, so a change must not reset it as a new model would.
    pub(crate) fn set_rate(&mut self, rate: Rate) {
        self.rate.rate = rate;
        if let Discipline::Pie(p) = &mut self.discipline {
            p.set_rate(self.rate);
        }
    }

    /// Packets and bytes queued.
    pub(crate) fn backlog(&self) -> (u64, u64) {
        self.discipline.backlog()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;

    /// A link of `bits`/s without overheads.
    pub(crate) fn rate(bits: u64) -> RateConfig {
        RateConfig {
            rate: Rate(bits),
            packet_overhead: 0,
            cell_size: 0,
            cell_overhead: 0,
        }
    }

    fn packet(seq: u64) -> Queued {
        Queued {
            seq,
            len: 1000,
            ..Queued::default()
        }
    }

    /// A rate change under CoDel in its dropping state: a standing queue of 30 × 1000 bytes at
    /// 8 Mbit/s (1 ms each) is kept topped up until CoDel drops; then the link slows to
    /// 4 Mbit/s. The change leaves CoDel's whole state and the queue as they were; the packet
    /// on the wire finishes when it was told to, and every packet sent after it takes 2 ms,
    /// in the order the packets came.
    #[test]
    fn a_rate_change_keeps_codels_state_and_the_queue_and_the_next_packets_take_the_new_rate() {
        let mut b = Bottleneck::codel(rate(8_000_000), &CodelConfig::default());
        let mut seq = 0;
        for _ in 0..30 {
            b.enqueue(0, packet(seq)).unwrap();
            seq += 1;
        }
        let (mut finish, mut count) = (0, 0);
        while count < 3 {
            let at = b.next().unwrap();
            match b.depart().unwrap() {
                Left::Sent { finish: f, .. } => {
                    assert_eq!(f, at + MS);
                    finish = f;
                }
                Left::Dropped { .. } => {}
            }
            b.enqueue(at, packet(seq)).unwrap();
            seq += 1;
            let Discipline::Codel(c) = &b.discipline else {
                unreachable!()
            };
            count = c.state.count();
        }
        let before = format!("{:?}", b.discipline);
        let queued = b.backlog();
        b.set_rate(Rate(4_000_000));
        assert_eq!(format!("{:?}", b.discipline), before);
        assert_eq!(b.backlog(), queued);
        let Discipline::Codel(c) = &b.discipline else {
            unreachable!()
        };
        assert!(c.state.dropping() && c.state.count() == count);
        // The next packet leaves when the one on the wire (sent at the old rate) is through.
        assert_eq!(b.next(), Some(finish));
        let mut seqs = Vec::new();
        while let Some(at) = b.next() {
            match b.depart().unwrap() {
                Left::Sent { packet, finish, .. } => {
                    assert_eq!(finish, at + 2 * MS);
                    seqs.push(packet.seq);
                }
                Left::Dropped { packet, .. } => seqs.push(packet.seq),
            }
        }
        assert_eq!(seqs.len() as u64, queued.0);
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
        assert_eq!(seqs.last(), Some(&(seq - 1)));
    }
}
