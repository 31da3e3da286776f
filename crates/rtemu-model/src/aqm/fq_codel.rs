//! FQ-CoDel (RFC 8290): flows hashed into queues, served by deficit round robin with a quantum,
//! new flows before old ones, CoDel in each queue, and on overflow drops from the queue with
//! the most bytes.
//!
//! The scheduler is the RFC's (section 4, and Linux's `fq_codel` where the RFC leaves a choice):
//!
//! * **enqueue**: the packet goes to the queue its flow hashes to (a seeded hash of the
//!   5-tuple; the seed is the link's, so which flows share a queue is reproducible); a queue
//!   that was in neither list joins the tail of the *new* list with a full quantum of deficit.
//!   Over `limit` packets or `memory_limit` bytes, packets are dropped from the head of the
//!   fattest queue, up to `drop_batch` of them or half its bytes (Linux's batch), counted as
//!   `queue-full`.
//! * **dequeue**: the first queue of the new list, else of the old list; one whose deficit is
//!   spent gets a quantum more and moves to the old list's tail; otherwise CoDel decides its
//!   head packet (the whole scheduler's backlog counts as CoDel's queue, as in Linux). A queue
//!   found empty leaves the lists, except that a new queue moves to the old list's tail when
//!   the old list has queues (so it cannot starve them by coming back at once).
//!
//! Everything is allocated at construction: the packets' slab ([`super::store`]) holds the
//! limit plus one (the packet that finds the limit reached), and the per-flow state is one
//! array of `flows` entries.

use serde::{Deserialize, Serialize};

use super::codel::{CodelConfig, CodelState, Decision, Head};
use super::store::{Fifo, Store};
use super::Queued;
use crate::packet::{FlowKey, Nanos};
use crate::units::{Size, Time};

/// `fq_codel [limit PACKETS] [flows N] [target TIME] [interval TIME] [quantum BYTES]
/// [memory_limit BYTES] [ecn | noecn] [ce_threshold TIME] [drop_batch N]`, with tc's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FqCodelConfig {
    /// Most packets queued in all.
    pub limit: u32,
    /// Number of queues flows are hashed into.
    pub flows: u32,
    /// CoDel's target.
    pub target: Time,
    /// CoDel's interval.
    pub interval: Time,
    /// Bytes a queue may send per round.
    pub quantum: u32,
    /// Most bytes queued in all.
    pub memory_limit: Size,
    /// Mark ECN-capable packets instead of dropping them (on by default, as in tc).
    pub ecn: bool,
    /// Mark every ECN-capable packet whose sojourn time exceeds this.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ce_threshold: Option<Time>,
    /// Most packets one overflow drops from the fattest queue.
    pub drop_batch: u32,
}

/// tc's `fq_codel` defaults.
impl Default for FqCodelConfig {
    fn default() -> Self {
        FqCodelConfig {
            limit: 10240,
            flows: 1024,
            target: Time(5_000_000),
            interval: Time(100_000_000),
            quantum: 1514,
            memory_limit: Size(32 << 20),
            ecn: true,
            ce_threshold: None,
            drop_batch: 64,
        }
    }
}

impl FqCodelConfig {
    /// The CoDel each queue runs.
    fn codel(&self) -> CodelConfig {
        CodelConfig {
            limit: self.limit,
            target: self.target,
            interval: self.interval,
            ecn: self.ecn,
            ce_threshold: self.ce_threshold,
        }
    }
}

/// Which list a queue is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum List {
    #[default]
    Neither,
    New,
    Old,
}

/// No queue.
const NO_FLOW: u32 = u32::MAX;

/// One queue's state.
#[derive(Debug, Clone, Default)]
struct Flow {
    queue: Fifo,
    deficit: i64,
    codel: CodelState,
    list: List,
    /// The next queue on the same list.
    next: u32,
}

/// A list of queues, threaded through their `next`.
#[derive(Debug, Clone, Copy)]
struct Chain {
    head: u32,
    tail: u32,
}

impl Chain {
    const EMPTY: Chain = Chain {
        head: NO_FLOW,
        tail: NO_FLOW,
    };
}

/// The FQ-CoDel scheduler's state.
#[derive(Debug, Clone)]
pub(crate) struct FqCodel {
    cfg: FqCodelConfig,
    store: Store<Queued>,
    flows: Box<[Flow]>,
    new_flows: Chain,
    old_flows: Chain,
    /// Packets dropped on overflow, waiting to be reported.
    dropped: Fifo,
    packets: u64,
    bytes: u64,
    /// The queue whose CoDel is in the middle of a dequeue call (it dropped the last packet).
    in_call: u32,
    hash_seed: u64,
}

impl FqCodel {
    /// The scheduler for `cfg`, hashing flows with `hash_seed`.
    pub(crate) fn new(cfg: &FqCodelConfig, hash_seed: u64) -> Self {
        let codel = CodelState::new(&cfg.codel());
        let flow = Flow {
            codel,
            next: NO_FLOW,
            ..Flow::default()
        };
        FqCodel {
            cfg: *cfg,
            store: Store::new(cfg.limit as usize + 1),
            flows: vec![flow; cfg.flows as usize].into_boxed_slice(),
            new_flows: Chain::EMPTY,
            old_flows: Chain::EMPTY,
            dropped: Fifo::default(),
            packets: 0,
            bytes: 0,
            in_call: NO_FLOW,
            hash_seed,
        }
    }

    /// The queue `flow` hashes to.
    pub(crate) fn classify(&self, flow: &FlowKey) -> u32 {
        let h = crate::rng::hash_flow(flow, self.hash_seed);
        // Multiply-shift: an even spread over the queues without a division.
        ((u128::from(h) * u128::from(self.cfg.flows)) >> 64) as u32
    }

    fn chain(&mut self, list: List) -> &mut Chain {
        match list {
            List::New => &mut self.new_flows,
            _ => &mut self.old_flows,
        }
    }

    /// Appends queue `f` to `list` (it is on none).
    fn append(&mut self, f: u32, list: List) {
        self.flows[f as usize].list = list;
        self.flows[f as usize].next = NO_FLOW;
        let chain = *self.chain(list);
        if chain.tail == NO_FLOW {
            *self.chain(list) = Chain { head: f, tail: f };
        } else {
            self.flows[chain.tail as usize].next = f;
            self.chain(list).tail = f;
        }
    }

    /// Takes the head queue off `list`.
    fn pop_head(&mut self, list: List) -> u32 {
        let chain = *self.chain(list);
        let f = chain.head;
        let next = self.flows[f as usize].next;
        *self.chain(list) = if next == NO_FLOW {
            Chain::EMPTY
        } else {
            Chain {
                head: next,
                tail: chain.tail,
            }
        };
        self.flows[f as usize].list = List::Neither;
        f
    }

    /// Queues `q` in queue `f`; on overflow, moves packets from the fattest queue to the
    /// dropped list.
    pub(crate) fn enqueue(&mut self, q: Queued, f: u32) {
        let flow = &mut self.flows[f as usize];
        // The slab holds the limit plus one, and an overflow is drained at once: never full.
        let _ = flow.queue.push(&mut self.store, q, q.len);
        self.packets += 1;
        self.bytes += u64::from(q.len);
        if flow.list == List::Neither {
            flow.deficit = i64::from(self.cfg.quantum);
            self.append(f, List::New);
        }
        if self.packets > u64::from(self.cfg.limit) || self.bytes > self.cfg.memory_limit.0 {
            self.drop_from_fattest();
        }
    }

    /// Linux's batch drop: from the head of the queue with the most bytes, up to `drop_batch`
    /// packets or half its bytes.
    fn drop_from_fattest(&mut self) {
        let (fattest, _) = self
            .flows
            .iter()
            .enumerate()
            .max_by_key(|(i, f)| (f.queue.bytes, std::cmp::Reverse(*i)))
            .expect("at least one queue");
        let flow = &mut self.flows[fattest];
        let half = flow.queue.bytes / 2;
        let mut dropped_bytes = 0;
        for _ in 0..self.cfg.drop_batch.max(1) {
            let Some(p) = flow.queue.pop(&mut self.store, |q| q.len) else {
                break;
            };
            self.packets -= 1;
            self.bytes -= u64::from(p.len);
            dropped_bytes += u64::from(p.len);
            let _ = self.dropped.push(&mut self.store, p, p.len);
            if dropped_bytes >= half {
                break;
            }
        }
    }

    /// A packet dropped on overflow, if any waits to be reported.
    pub(crate) fn take_dropped(&mut self) -> Option<Queued> {
        self.dropped.pop(&mut self.store, |q| q.len)
    }

    /// Whether packets dropped on overflow wait to be reported.
    pub(crate) fn has_dropped(&self) -> bool {
        !self.dropped.is_empty()
    }

    /// Packets and bytes queued.
    pub(crate) fn backlog(&self) -> (u64, u64) {
        (self.packets, self.bytes)
    }

    /// The next packet to leave at `now` and CoDel's decision; `None` once every queue on the
    /// lists was found empty (they then leave the lists).
    pub(crate) fn dequeue(&mut self, now: Nanos) -> Option<(Queued, Decision)> {
        loop {
            let f = if self.in_call != NO_FLOW {
                self.in_call
            } else {
                let list = if self.new_flows.head != NO_FLOW {
                    List::New
                } else if self.old_flows.head != NO_FLOW {
                    List::Old
                } else {
                    return None;
                };
                let f = self.chain(list).head;
                if self.flows[f as usize].deficit <= 0 {
                    self.flows[f as usize].deficit += i64::from(self.cfg.quantum);
                    self.pop_head(list);
                    self.append(f, List::Old);
                    continue;
                }
                f
            };
            let flow = &mut self.flows[f as usize];
            let Some(q) = flow.queue.pop(&mut self.store, |q| q.len) else {
                flow.codel.found_empty();
                self.in_call = NO_FLOW;
                self.leave(f);
                continue;
            };
            self.packets -= 1;
            self.bytes -= u64::from(q.len);
            let head = Head {
                sojourn_ns: now.saturating_sub(q.enqueued_ns),
                len: q.len,
                ecn_capable: q.ecn.is_capable(),
            };
            let empty_after = flow.queue.is_empty();
            let d = flow.codel.decide(now, &head, self.bytes, empty_after);
            match d {
                Decision::Send { .. } => {
                    flow.deficit -= i64::from(q.len);
                    self.in_call = NO_FLOW;
                }
                Decision::Drop if flow.codel.in_call() => self.in_call = f,
                Decision::Drop => {
                    // CoDel emptied the queue: its call returned nothing, and the scheduler
                    // goes on from the lists at once.
                    self.in_call = NO_FLOW;
                    self.leave(f);
                    if self.packets == 0 {
                        // Nothing will ask again: the lists are walked now, as the call would.
                        let _ = self.dequeue(now);
                    }
                }
            }
            return Some((q, d));
        }
    }

    /// Queue `f` (at the head of its list) was found empty: a new queue moves to the old
    /// list's tail if the old list has queues, otherwise it leaves the lists.
    fn leave(&mut self, f: u32) {
        let list = self.flows[f as usize].list;
        if self.chain(list).head != f {
            return;
        }
        self.pop_head(list);
        if list == List::New && self.old_flows.head != NO_FLOW {
            self.append(f, List::Old);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr};

    fn key(port: u16) -> FlowKey {
        FlowKey {
            src: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            dst: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
            src_port: port,
            dst_port: 9,
            protocol: 17,
        }
    }

    fn packet(seq: u64, len: u32, t: Nanos) -> Queued {
        Queued {
            seq,
            arrival_ns: t,
            enqueued_ns: t,
            len,
            ..Queued::default()
        }
    }

    /// Two flows that hash to different queues, by search (the hash is seeded).
    fn two_flows(fq: &FqCodel) -> (u32, u32) {
        let a = fq.classify(&key(1));
        let b = (2..)
            .map(|p| fq.classify(&key(p)))
            .find(|q| *q != a)
            .unwrap();
        (a, b)
    }

    /// A sparse flow's packet goes before a backlogged flow's: it joins the new list, which is
    /// served first, behind only what is left of the bulk flow's quantum.
    #[test]
    fn a_new_flow_goes_before_a_backlogged_one() {
        let mut fq = FqCodel::new(&FqCodelConfig::default(), 7);
        let (bulk, sparse) = two_flows(&fq);
        for i in 0..20 {
            fq.enqueue(packet(i, 1500, 0), bulk);
        }
        // The bulk queue sends its quantum's worth, then yields.
        assert_eq!(fq.dequeue(0).unwrap().0.seq, 0);
        fq.enqueue(packet(100, 100, 0), sparse);
        // 14 bytes of quantum left: one more bulk packet, then the sparse one.
        let order: Vec<u64> = (0..3).map(|_| fq.dequeue(0).unwrap().0.seq).collect();
        assert_eq!(order, [1, 100, 2]);
    }

    /// Deficit round robin: two backlogged flows of 1500- and 300-byte packets get equal
    /// bytes, not equal packets.
    #[test]
    fn backlogged_flows_share_bytes_equally() {
        let mut fq = FqCodel::new(&FqCodelConfig::default(), 7);
        let (a, b) = two_flows(&fq);
        for i in 0..2000 {
            fq.enqueue(packet(i, 1500, 0), a);
            fq.enqueue(packet(10_000 + i, 300, 0), b);
        }
        let (mut bytes_a, mut bytes_b) = (0u64, 0u64);
        // Both stay backlogged: 1200 dequeues take about 200 and 1000 of their packets.
        for _ in 0..1200 {
            let (q, _) = fq.dequeue(0).unwrap();
            if q.seq < 10_000 {
                bytes_a += u64::from(q.len);
            } else {
                bytes_b += u64::from(q.len);
            }
        }
        let share = bytes_a as f64 / (bytes_a + bytes_b) as f64;
        assert!((share - 0.5).abs() < 0.01, "{share}");
    }

    /// Over the limit, the fattest queue loses packets from its head (up to half its bytes),
    /// and a thin queue loses none.
    #[test]
    fn overflow_drops_from_the_head_of_the_fattest_queue() {
        let cfg = FqCodelConfig {
            limit: 100,
            ..FqCodelConfig::default()
        };
        let mut fq = FqCodel::new(&cfg, 7);
        let (fat, thin) = two_flows(&fq);
        for i in 0..10 {
            fq.enqueue(packet(1000 + i, 100, 0), thin);
        }
        for i in 0..91 {
            fq.enqueue(packet(i, 1000, 0), fat);
        }
        // 101 packets: the fat queue (91 000 bytes) loses its head, up to half its bytes or
        // 64 packets: 46 packets.
        let dropped: Vec<u64> = std::iter::from_fn(|| fq.take_dropped().map(|q| q.seq)).collect();
        assert_eq!(dropped, (0..46).collect::<Vec<_>>());
        assert_eq!(fq.backlog(), (55, 45_000 + 1000));
    }
}
