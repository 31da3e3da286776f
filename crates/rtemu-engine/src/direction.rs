//! One link direction: received frames → model → pool and timing queue → released frames.
//!
//! Time is an argument: `Direction::receive` takes the arrival time with the frame (the I/O
//! layer's stamp) and `Direction::release` the time to release up to and a clock to read
//! around the send, so tests drive a direction with invented times and the release loop with
//! `CLOCK_MONOTONIC`. Nothing here allocates after `Direction::new`.
//!
//! A model with a queue discipline holds copies and decides them when they leave its queue
//! ([`Model::depart`]): the direction keeps their frames in the pool meanwhile, takes the
//! decisions due before each frame it hands the model and before each release, and counts a
//! held copy in flight until it is delivered or dropped.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::Arc;

use rtemu_model::timing::{Entry, TimingQueue};
use rtemu_model::wire::{ecn, flow_key, is_address_resolution, link_type, mark_ce};
use rtemu_model::{Delivery, Model, Outcome, PacketMeta};

use crate::counters::{Counters, DropKind, Published};
use crate::fidelity::{self, Consumer, Producer, Record};
use crate::io::{Frame, PacketIo};
use crate::pool::{Exhausted, Pool};

/// The most copies one release sends in one flush: bounds the time a flush takes
/// (every copy in it gets the same send time, so a long batch would blur the fidelity record).
pub const RELEASE_BATCH: usize = 64;

/// The most records a fidelity ring holds before the reader must drain it (about 0.6 s at
/// 100 kpps, 2 MiB).
const FIDELITY_RING: usize = 1 << 16;

/// Fidelity records per frame buffer. A direction's buffers are sized for the rate it must
/// carry (`up` gives each of a few links 4,096, each of a thousand 256), and its record ring
/// follows them: a thousand links with full rings held 4 GB of records. A ring that fills
/// counts what it loses (`lost`), so a too-small one shows.
const RECORDS_PER_BUFFER: usize = 16;

/// What happens to address-resolution frames (ARP, IPv6 neighbour discovery).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// They pass with this delay (the link's base delay), never lost, corrupted or duplicated,
    /// and the model does not see them: a lossy link then loses data, not its neighbours. This
    /// is the default; it makes the model's packet sequence differ from a capture of the link
    /// by the resolution frames, so replay such a capture with them filtered out to reproduce
    /// the fates in the simulator.
    Pass {
        /// Their delay, ns.
        delay_ns: u64,
    },
    /// They go through the model like every other frame (the simulator's behaviour).
    Model,
}

/// How one direction of a link behaves.
pub struct DirectionConfig {
    /// The model that decides each frame's fate.
    pub model: Box<dyn Model + Send>,
    /// What happens to address-resolution frames.
    pub resolution: Resolution,
    /// Frame buffers for copies in flight (see [`crate::pool::frames_for`]).
    pub pool_frames: usize,
    /// Bytes per buffer: the largest frame the direction carries (a 1500-byte MTU needs 1518).
    pub slot_size: usize,
    /// A copy released more than this after its intended time counts as late, ns.
    pub late_after_ns: u64,
}

impl std::fmt::Debug for DirectionConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectionConfig")
            .field("resolution", &self.resolution)
            .field("pool_frames", &self.pool_frames)
            .field("slot_size", &self.slot_size)
            .field("late_after_ns", &self.late_after_ns)
            .finish_non_exhaustive()
    }
}

/// A new model for a running direction (`rtemu link set`).
pub struct Swap {
    /// The model that decides from now on.
    pub model: Box<dyn Model + Send>,
    /// What happens to address-resolution frames from now on.
    pub resolution: Resolution,
}

/// How the control side reaches a running direction without a lock on the packet path: new
/// models arrive through a bounded channel polled once per loop turn, replaced models leave
/// through another to be dropped off the release thread, and a cut is one atomic flag.
pub(crate) struct Steering {
    pub(crate) swaps: Receiver<Swap>,
    pub(crate) retired: SyncSender<Box<dyn Model + Send>>,
    pub(crate) cut: Arc<AtomicBool>,
}

/// The control side of a direction's [`Steering`]: the engine hands clones of `swaps` and
/// `cut` to its [`crate::engine::Steerer`] and keeps `retired` for its collector.
pub(crate) struct Helm {
    pub(crate) swaps: SyncSender<Swap>,
    pub(crate) retired: Receiver<Box<dyn Model + Send>>,
    pub(crate) cut: Arc<AtomicBool>,
}

/// A connected [`Steering`] (for the direction) and [`Helm`] (for the control side).
pub(crate) fn steering() -> (Steering, Helm) {
    // One pending change at a time: a second `link set` before the loop took the first is
    // refused, not queued behind it.
    let (swap_tx, swap_rx) = std::sync::mpsc::sync_channel(1);
    let (retired_tx, retired_rx) = std::sync::mpsc::sync_channel(4);
    let cut = Arc::new(AtomicBool::new(false));
    (
        Steering {
            swaps: swap_rx,
            retired: retired_tx,
            cut: Arc::clone(&cut),
        },
        Helm {
            swaps: swap_tx,
            retired: retired_rx,
            cut,
        },
    )
}

/// The state of one direction.
pub(crate) struct Direction {
    model: Box<dyn Model + Send>,
    resolution: Resolution,
    model_exhausted: bool,
    pool: Pool,
    queue: TimingQueue<u32>,
    /// Position of the next frame among every frame received (ties in the queue).
    input_seq: u64,
    /// Position of the next frame among those the model sees ([`PacketMeta::seq`]).
    model_seq: u64,
    /// The latest arrival time given so far: kernel stamps may come slightly out of ring order
    /// (frames received on different CPUs), and models (trace feeds) expect time not to go
    /// back, so an earlier stamp is raised to it (later, never earlier).
    last_arrival_ns: u64,
    /// When the link came up: its release thread's start. A frame the kernel stamped before
    /// then waited in the ring while the engine set up (seconds, while a thousand links open);
    /// it arrived on a link not yet up and is dropped as link-down, so no release is timed
    /// from an arrival the engine was not there to see.
    opened_ns: u64,
    late_after_ns: u64,
    counters: Counters,
    changed: bool,
    published: Arc<Published>,
    fidelity: Producer,
    /// The arrival lag of the frame in each pool slot, for its fidelity record.
    arrival_lag_ns: Box<[u64]>,
    /// The copies of the current flush: (intended time, slot, length).
    batch: Vec<(u64, u32, usize)>,
    /// Copies the model's queue holds (a queue discipline decides at dequeue), by the model's
    /// sequence number and copy: their pool slot and input position.
    held: HashMap<(u64, u8), (u32, u64)>,
    steering: Steering,
}

impl Direction {
    /// A direction with its buffers allocated, the counters it publishes and the reader's end
    /// of its fidelity ring.
    pub(crate) fn new(
        cfg: DirectionConfig,
        steering: Steering,
    ) -> (Direction, Arc<Published>, Consumer) {
        let published = Arc::new(Published::default());
        let records = (cfg.pool_frames * RECORDS_PER_BUFFER).clamp(RELEASE_BATCH, FIDELITY_RING);
        let (producer, consumer) = fidelity::ring(records);
        let d = Direction {
            model: cfg.model,
            resolution: cfg.resolution,
            model_exhausted: false,
            pool: Pool::new(cfg.pool_frames, cfg.slot_size),
            queue: TimingQueue::with_capacity(cfg.pool_frames),
            input_seq: 0,
            model_seq: 0,
            last_arrival_ns: 0,
            opened_ns: 0,
            late_after_ns: cfg.late_after_ns,
            counters: Counters::default(),
            changed: false,
            published: Arc::clone(&published),
            fidelity: producer,
            arrival_lag_ns: vec![0; cfg.pool_frames].into_boxed_slice(),
            batch: Vec::with_capacity(RELEASE_BATCH),
            // Every held copy has a buffer: never more than the pool's.
            held: HashMap::with_capacity(cfg.pool_frames),
            steering,
        };
        (d, published, consumer)
    }

    /// Takes a new model if one was sent. Copies already queued keep the release times the
    /// old model gave them; the new model decides from the next frame on, with its own state
    /// (a rate queue starts empty, a trace from its start).
    pub(crate) fn steer(&mut self) {
        if let Ok(swap) = self.steering.swaps.try_recv() {
            // The old model lets every copy it holds go first, as if nothing more arrived: its
            // decisions, at their own times.
            self.settle(u64::MAX);
            let old = std::mem::replace(&mut self.model, swap.model);
            self.resolution = swap.resolution;
            self.model_exhausted = false;
            self.model_seq = 0;
            // Dropped by the collector thread; if its channel is full, here (rare, and a
            // control event, not a frame).
            if let Err(TrySendError::Full(old) | TrySendError::Disconnected(old)) =
                self.steering.retired.try_send(old)
            {
                drop(old);
            }
        }
    }

    /// Brings the link up at `at_ns`: frames stamped before it are dropped as link-down.
    pub(crate) fn open(&mut self, at_ns: u64) {
        self.opened_ns = at_ns;
    }

    /// Decides the fate of a frame that arrived at [`Frame::arrival_ns`] and queues its copies.
    pub(crate) fn receive(&mut self, frame: Frame<'_>) {
        let now_ns = frame.arrival_ns.max(self.last_arrival_ns);
        self.last_arrival_ns = now_ns;
        self.changed = true;
        self.counters.received += 1;
        self.counters.received_bytes += frame.wire_len as u64;
        let seq = self.input_seq;
        self.input_seq += 1;
        if frame.arrival_ns < self.opened_ns || self.steering.cut.load(Ordering::Relaxed) {
            self.counters.drop_one(DropKind::LinkDown);
            return;
        }
        if let Resolution::Pass { delay_ns } = self.resolution {
            if is_address_resolution(frame.data) {
                self.counters.resolution_passed += 1;
                let pass = Delivery {
                    at_ns: now_ns.saturating_add(delay_ns),
                    ..Delivery::default()
                };
                if let Some(slot) = self.store(&frame) {
                    self.schedule(slot, &pass, seq);
                }
                return;
            }
        }
        if self.model_exhausted {
            self.counters.drop_one(DropKind::ModelExhausted);
            return;
        }
        // The model's queue lets go of what leaves before this frame arrives.
        self.settle(now_ns);
        let meta = PacketMeta {
            len: frame.wire_len,
            flow: flow_key(link_type::ETHERNET, frame.data),
            arrival_ns: now_ns,
            seq: self.model_seq,
            ecn: ecn(link_type::ETHERNET, frame.data),
        };
        self.model_seq += 1;
        let fate = self.model.decide(&meta);
        if self.model.exhausted().is_some() {
            // The fate returned with the first exhaustion means nothing (see `Model`).
            self.model_exhausted = true;
            self.counters.drop_one(DropKind::ModelExhausted);
            return;
        }
        self.counters.duplicates += fate.copies().saturating_sub(1) as u64;
        for d in fate.delivered.as_slice() {
            if let Some(slot) = self.store(&frame) {
                self.schedule(slot, d, seq);
            }
        }
        for reason in fate.drops() {
            self.counters.drop_one(DropKind::from_model(reason));
        }
        for copy in fate.held() {
            if let Some(slot) = self.store(&frame) {
                self.held.insert((meta.seq, copy), (slot, seq));
            }
        }
    }

    /// Copies `frame` into a buffer: its slot, counted in flight, or `None` (counted as a drop)
    /// when no buffer is free or the frame does not fit.
    fn store(&mut self, frame: &Frame<'_>) -> Option<u32> {
        if frame.is_truncated() {
            self.counters.drop_one(DropKind::Oversize);
            return None;
        }
        match self.pool.fill(|buf| frame.copy_to(buf)) {
            Err(Exhausted) => self.counters.drop_one(DropKind::PoolExhausted),
            Ok(None) => self.counters.drop_one(DropKind::Oversize),
            Ok(Some(slot)) => {
                self.arrival_lag_ns[slot as usize] = frame.seen_ns.saturating_sub(frame.arrival_ns);
                self.counters.in_flight += 1;
                return Some(slot);
            }
        }
        None
    }

    /// Queues the copy in `slot` for release as `d` says.
    fn schedule(&mut self, slot: u32, d: &Delivery, seq: u64) {
        let buf = self.pool.frame_mut(slot);
        // The queue marked the copy before the wire corrupted it.
        if d.marked {
            self.counters.marked += mark_ce(link_type::ETHERNET, buf) as u64;
        }
        d.corruption.apply(buf);
        self.counters.corrupted += d.corruption.is_corrupted() as u64;
        self.queue.push(Entry {
            at_ns: d.at_ns,
            seq,
            copy: d.copy,
            slot,
        });
    }

    /// Takes the model's decisions about the copies it holds, up to `now_ns`.
    fn settle(&mut self, now_ns: u64) {
        while let Some(dep) = self.model.depart_by(now_ns) {
            self.changed = true;
            // A copy without a buffer was counted as dropped when it arrived.
            let Some((slot, seq)) = self.held.remove(&(dep.seq, dep.copy)) else {
                continue;
            };
            match dep.outcome {
                Outcome::Delivered(d) => self.schedule(slot, &d, seq),
                Outcome::Dropped(reason) => {
                    self.pool.release(slot);
                    self.counters.in_flight -= 1;
                    self.counters.drop_one(DropKind::from_model(reason));
                }
            }
        }
    }

    /// When the direction next has something to do: release a copy, or take the model's
    /// decision about one its queue holds.
    pub(crate) fn next_release(&self) -> Option<u64> {
        let release = self.queue.peek().map(|e| e.at_ns);
        match (release, self.model.next_departure()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Sends, in release order, up to [`RELEASE_BATCH`] copies due at or before `now_ns`
    /// through `io` in one flush, reading `clock` just before and just after it. Returns how
    /// many copies left the queue (sent, or dropped because the send failed).
    pub(crate) fn release<I: PacketIo>(
        &mut self,
        now_ns: u64,
        io: &mut I,
        mut clock: impl FnMut() -> u64,
    ) -> usize {
        self.settle(now_ns);
        self.batch.clear();
        while self.batch.len() < RELEASE_BATCH {
            let Some(next) = self.queue.peek() else {
                break;
            };
            if next.at_ns > now_ns {
                break;
            }
            let frame = self.pool.frame(next.slot);
            if !io.stage(frame) {
                self.counters.tx_busy += 1;
                break;
            }
            let len = frame.len();
            let e = self.queue.pop_due(now_ns).expect("peeked entry is due");
            self.batch.push((e.at_ns, e.slot, len));
        }
        if self.batch.is_empty() {
            return 0;
        }
        let started_ns = clock();
        let sent = io.flush().is_ok();
        let actual_ns = clock();
        self.changed = true;
        let c = &mut self.counters;
        for &(intended_ns, slot, len) in &self.batch {
            self.pool.release(slot);
            c.in_flight -= 1;
            if !sent {
                c.drop_one(DropKind::SendFailed);
                continue;
            }
            c.delivered += 1;
            c.delivered_bytes += len as u64;
            let r = Record {
                intended_ns,
                started_ns,
                actual_ns,
                arrival_lag_ns: self.arrival_lag_ns[slot as usize],
            };
            let error = r.error_ns();
            c.late += (error > self.late_after_ns) as u64;
            c.max_error_ns = c.max_error_ns.max(error);
            self.fidelity.push(r);
        }
        self.batch.len()
    }

    /// Publishes the counters if they changed since the last call.
    pub(crate) fn publish(&mut self) {
        if self.changed {
            // A copy of the reader's counters: no lock, no system call.
            self.counters.trace_underruns = self.model.trace_counters().map_or(0, |t| t.underruns);
            self.published.publish(&self.counters);
            self.changed = false;
        }
    }

    /// The counters as the release thread sees them.
    #[cfg(test)]
    pub(crate) fn counters(&self) -> &Counters {
        &self.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::mem::MemIo;
    use rtemu_model::link::NoTables;
    use rtemu_model::{LinkModel, Outcome};

    fn model(netem: &str, seed: u64) -> Box<dyn Model + Send> {
        let cfg = rtemu_model::netem::parse(netem).unwrap();
        Box::new(LinkModel::new(&cfg, &NoTables, seed, 1).unwrap())
    }

    fn direction(netem: &str, pool_frames: usize) -> (Direction, Arc<Published>, Consumer) {
        steered(netem, pool_frames).0
    }

    fn steered(netem: &str, pool_frames: usize) -> ((Direction, Arc<Published>, Consumer), Helm) {
        let (steering, helm) = steering();
        let d = Direction::new(
            DirectionConfig {
                model: model(netem, 7),
                resolution: Resolution::Pass { delay_ns: 1_000 },
                pool_frames,
                slot_size: 256,
                late_after_ns: 10_000,
            },
            steering,
        );
        (d, helm)
    }

    /// An IPv4/UDP frame whose payload starts with `id`.
    fn udp(id: u32) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 8 + 4];
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        f[14] = 0x45;
        f[14 + 9] = 17;
        f[42..46].copy_from_slice(&id.to_be_bytes());
        f
    }

    /// `data` as a frame that arrived at `arrival_ns` and was seen 500 ns later.
    fn at(arrival_ns: u64, data: &[u8]) -> Frame<'_> {
        Frame {
            data,
            vlan: None,
            wire_len: data.len() as u32,
            arrival_ns,
            seen_ns: arrival_ns + 500,
        }
    }

    fn id(f: &[u8]) -> u32 {
        u32::from_be_bytes(f[42..46].try_into().unwrap())
    }

    #[test]
    fn copies_leave_at_arrival_plus_delay_and_not_before() {
        let (mut d, published, fidelity) = direction("delay 10ms", 16);
        let mut io = MemIo::new(8);
        d.receive(at(1_000, &udp(1)));
        d.receive(at(2_000, &udp(2)));
        assert_eq!(d.next_release(), Some(10_001_000));
        assert_eq!(d.release(10_000_999, &mut io, || 0), 0);
        assert!(io.sent.is_empty());
        let mut times = [10_001_550, 10_001_600, 20_000_050, 20_000_100].into_iter();
        assert_eq!(d.release(10_001_500, &mut io, || times.next().unwrap()), 1);
        assert_eq!(d.release(20_000_000, &mut io, || times.next().unwrap()), 1);
        assert_eq!(io.sent.iter().map(|f| id(f)).collect::<Vec<_>>(), [1, 2]);
        d.publish();
        let c = published.snapshot();
        assert_eq!((c.received, c.delivered, c.in_flight), (2, 2, 0));
        assert!(c.conserved());
        // 600 ns for the first, 9 998 100 ns for the second (late, and the worst).
        assert_eq!((c.late, c.max_error_ns), (1, 9_998_100));
        let errors: Vec<(u64, u64, u64, bool)> = std::iter::from_fn(|| fidelity.pop())
            .map(|r| {
                (
                    r.start_error_ns(),
                    r.error_ns(),
                    r.arrival_lag_ns,
                    r.is_early(),
                )
            })
            .collect();
        assert_eq!(
            errors,
            [(550, 600, 500, false), (9_998_050, 9_998_100, 500, false)]
        );
    }

    /// A frame the engine saw late (its thread was preempted) is released at its kernel
    /// arrival + delay, not at the time it was seen + delay, and its wait shows as arrival lag.
    #[test]
    fn the_release_counts_from_the_arrival_stamp_not_from_when_the_frame_was_seen() {
        let (mut d, _, fidelity) = direction("delay 10ms", 16);
        let mut io = MemIo::new(8);
        d.receive(Frame {
            seen_ns: 3_000_000,
            ..at(1_000, &udp(1))
        });
        assert_eq!(d.next_release(), Some(10_001_000));
        assert_eq!(d.release(10_001_000, &mut io, || 10_001_200), 1);
        let r = fidelity.pop().unwrap();
        assert_eq!((r.arrival_lag_ns, r.error_ns()), (2_999_000, 200));
    }

    /// Stamps slightly out of ring order never take the model's time backwards: the earlier
    /// one is taken as arriving with the later (late, never early).
    #[test]
    fn an_out_of_order_stamp_is_raised_to_the_latest_arrival() {
        let (mut d, _, _) = direction("delay 10ms", 16);
        d.receive(at(5_000, &udp(1)));
        d.receive(at(4_000, &udp(2)));
        let mut io = MemIo::new(8);
        assert_eq!(d.release(10_004_999, &mut io, || 0), 0);
        assert_eq!(d.release(10_005_000, &mut io, || 0), 2);
    }

    /// The engine makes the decisions the model makes for the same seed: the frames delivered
    /// are exactly those the model (the simulator's engine) delivers, duplicates included, with
    /// the CE marks of netem's `ecn` written into ECN-capable frames and their checksums.
    #[test]
    fn fates_match_the_model_for_the_same_seed() {
        let netem = "loss 30% ecn duplicate 10% corrupt 5%";
        let (mut d, _, _) = direction(netem, 4096);
        let mut reference = model(netem, 7);
        let mut io = MemIo::new(4096);
        let mut expected = Vec::new();
        let (mut corrupted, mut marked) = (0, 0);
        for i in 0..2000u32 {
            let mut f = udp(i);
            // Every other frame ECT(0), with a valid header checksum.
            f[15] = (i % 2 * 2) as u8;
            let sum = rtemu_model::wire::internet_checksum(&f[14..34]);
            f[24..26].copy_from_slice(&sum.to_be_bytes());
            let meta = PacketMeta {
                len: f.len() as u32,
                flow: flow_key(link_type::ETHERNET, &f),
                arrival_ns: i as u64 * 1_000,
                seq: i as u64,
                ecn: ecn(link_type::ETHERNET, &f),
            };
            let fate = reference.decide(&meta);
            for del in fate.delivered.as_slice() {
                let mut copy = f.clone();
                if del.marked {
                    assert!(mark_ce(link_type::ETHERNET, &mut copy));
                    assert_eq!(rtemu_model::wire::internet_checksum(&copy[14..34]), 0);
                    marked += 1;
                }
                del.corruption.apply(&mut copy);
                corrupted += del.corruption.is_corrupted() as u64;
                expected.push(copy);
            }
            d.receive(at(i as u64 * 1_000, &f));
        }
        while d.release(u64::MAX, &mut io, || 0) > 0 {}
        assert_eq!(io.sent, expected);
        let c = d.counters();
        assert!(c.conserved(), "{c:?}");
        assert!(c.dropped(DropKind::Loss) > 0 && c.duplicates > 0);
        assert_eq!(c.delivered, expected.len() as u64);
        // Every copy the model corrupted or marked was delivered here (the pool never ran out).
        assert!(corrupted > 0 && marked > 0);
        assert_eq!((c.corrupted, c.marked), (corrupted, marked));
    }

    /// With a queue discipline the model decides a copy when it leaves the queue. The engine
    /// takes those decisions at the model's times whenever its loop happens to run (here: a
    /// release before some frames, none before others), so it delivers exactly what the model
    /// driven in time order (the simulator's way) delivers, CE marks included, drops and
    /// marks counted.
    #[test]
    fn a_managed_queue_decides_as_the_model_does_whenever_the_loop_runs() {
        // 1000 µs of 1 Mbit/s per 125-byte frame: frames every 900 µs overload it, so CoDel
        // (ECN on) marks the ECN-capable ones and drops the others. PIE decides at enqueue
        // from what the dequeues measured, so the order of the two matters to it too; it drops
        // ECN-capable frames as well once its probability reaches 10 %. DualPI2 takes the
        // ECT(1) frames into its L queue and marks, never drops, ECN-capable ones.
        for (netem, ect_kept) in [
            (
                "rate 1mbit codel target 5ms interval 50ms ecn delay 2ms",
                true,
            ),
            (
                "rate 1mbit fq_codel target 5ms interval 50ms quantum 300 limit 200 delay 2ms",
                true,
            ),
            (
                "rate 1mbit pie target 5ms tupdate 10ms ecn delay 2ms",
                false,
            ),
            ("rate 1mbit pie docsis target 5ms ecn delay 2ms", false),
            ("rate 1mbit pie dq_rate_estimator ecn delay 2ms", false),
            ("rate 1mbit dualpi2 delay 2ms", true),
        ] {
            let (c, sent) = held_copies_match_the_model(netem);
            assert!(
                c.marked > 0 && c.dropped(DropKind::Aqm) > 0,
                "{netem}: {c:?}"
            );
            assert_eq!(c.dropped(DropKind::QueueFull), 0, "{netem}");
            // No ECN-capable frame was dropped by the queue: every one arrived.
            let ect_out = sent.iter().filter(|f| f[15] & 3 != 0).count();
            if ect_kept {
                assert_eq!(ect_out, 1000, "{netem}");
            }
        }
    }

    /// With `slot` the model decides a copy's slot when the copy is ready: the engine sends
    /// what the model driven in time order sends, at the slot starts.
    #[test]
    fn slotted_delivery_decides_as_the_model_does_whenever_the_loop_runs() {
        for netem in [
            "delay 1ms 1ms slot 2ms 7ms packets 3",
            "loss 10% ecn rate 1mbit slot distribution normal 3ms 1ms bytes 300",
        ] {
            let (c, sent) = held_copies_match_the_model(netem);
            assert_eq!(c.delivered, sent.len() as u64, "{netem}");
            assert!(c.delivered > 2000, "{netem}: {c:?}");
        }
    }

    /// Runs 3000 frames (a third ECN-capable, five flows) through an engine direction and the
    /// model in time order; the engine must send the model's frames in its order, and by each
    /// time it runs its loop, exactly those due by then. Returns its counters and frames.
    fn held_copies_match_the_model(netem: &str) -> (Counters, Vec<Vec<u8>>) {
        let (mut d, _, _) = direction(netem, 4096);
        let mut reference = model(netem, 7);
        let mut io = MemIo::new(4096);
        // (release time, seq, copy, frame) as the model decides.
        let mut expected: Vec<(u64, u64, u8, Vec<u8>)> = Vec::new();
        let mut frames = Vec::new();
        let out = |frame: &[u8], del: &Delivery, seq: u64| {
            let mut copy = frame.to_vec();
            if del.marked {
                assert!(mark_ce(link_type::ETHERNET, &mut copy));
            }
            (del.at_ns, seq, del.copy, copy)
        };
        let settle =
            |m: &mut Box<dyn Model + Send>, now: u64, frames: &[Vec<u8>], expected: &mut Vec<_>| {
                while let Some(dep) = m.depart_by(now) {
                    if let Outcome::Delivered(del) = dep.outcome {
                        expected.push(out(&frames[dep.seq as usize], &del, dep.seq));
                    }
                }
            };
        for i in 0..3000u64 {
            let mut f = udp(i as u32);
            f.resize(125, 0);
            // A third ECN-capable: ECT(0) and ECT(1) (DualPI2's L queue) in turn.
            f[15] = if i % 3 == 0 { 2 - (i % 2) as u8 } else { 0 };
            f[34..36].copy_from_slice(&(1000 + (i % 5) as u16).to_be_bytes()); // five flows
            let sum = rtemu_model::wire::internet_checksum(&f[14..34]);
            f[24..26].copy_from_slice(&sum.to_be_bytes());
            let t = i * 900_000;
            frames.push(f.clone());
            settle(&mut reference, t, &frames, &mut expected);
            let meta = PacketMeta {
                len: f.len() as u32,
                flow: flow_key(link_type::ETHERNET, &f),
                arrival_ns: t,
                seq: i,
                ecn: ecn(link_type::ETHERNET, &f),
            };
            let fate = reference.decide(&meta);
            assert_eq!(fate.held().count(), fate.copies() - fate.drops().count());
            if i % 7 < 3 {
                d.release(t, &mut io, || 0);
                let due = expected.iter().filter(|e| e.0 <= t).count();
                assert_eq!(io.sent.len(), due, "{netem}: sent by {t} ns");
            }
            d.receive(at(t, &f));
        }
        settle(&mut reference, u64::MAX, &frames, &mut expected);
        while d.next_release().is_some() {
            d.release(u64::MAX, &mut io, || 0);
        }
        expected.sort_by_key(|e| (e.0, e.1, e.2));
        let expected: Vec<Vec<u8>> = expected.into_iter().map(|e| e.3).collect();
        assert_eq!(io.sent.len(), expected.len());
        assert_eq!(io.sent, expected);
        let c = *d.counters();
        assert!(c.conserved(), "{c:?}");
        (c, io.sent)
    }

    #[test]
    fn a_full_pool_is_a_named_drop_and_every_copy_is_accounted_for() {
        let (mut d, _, _) = direction("delay 1ms", 4);
        for i in 0..10 {
            d.receive(at(i, &udp(i as u32)));
            assert!(d.counters().conserved());
        }
        let c = *d.counters();
        assert_eq!((c.in_flight, c.dropped(DropKind::PoolExhausted)), (4, 6));
        let mut io = MemIo::new(2);
        // Two transmit slots: two leave, the rest wait for the next turn.
        assert_eq!(d.release(u64::MAX, &mut io, || 0), 2);
        assert_eq!(d.counters().tx_busy, 1);
        assert!(d.counters().conserved());
        assert_eq!(d.counters().in_flight, 2);
    }

    #[test]
    fn oversized_and_truncated_frames_are_dropped_by_name() {
        let (mut d, _, _) = direction("delay 1ms", 4);
        d.receive(at(0, &[0u8; 300]));
        let short = udp(1);
        d.receive(Frame {
            data: &short,
            vlan: None,
            wire_len: 9000,
            arrival_ns: 0,
            seen_ns: 0,
        });
        let c = d.counters();
        assert_eq!(c.dropped(DropKind::Oversize), 2);
        assert!(c.conserved());
    }

    #[test]
    fn address_resolution_passes_a_lossy_link_with_the_base_delay() {
        let (mut d, _, _) = direction("loss 100%", 4);
        let mut arp = vec![0u8; 42];
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        d.receive(at(5_000, &arp));
        d.receive(at(5_000, &udp(1)));
        assert_eq!(d.next_release(), Some(6_000));
        let c = d.counters();
        assert_eq!((c.resolution_passed, c.dropped(DropKind::Loss)), (1, 1));
        assert!(c.conserved());
    }

    #[test]
    fn a_swapped_model_decides_new_frames_while_queued_copies_keep_their_times() {
        let ((mut d, _, _), helm) = steered("delay 10ms", 16);
        d.receive(at(0, &udp(1)));
        helm.swaps
            .try_send(Swap {
                model: model("delay 1ms", 7),
                resolution: Resolution::Pass {
                    delay_ns: 1_000_000,
                },
            })
            .unwrap();
        // A second change before the loop took the first is refused.
        assert!(helm
            .swaps
            .try_send(Swap {
                model: model("delay 2ms", 7),
                resolution: Resolution::Model,
            })
            .is_err());
        d.steer();
        d.receive(at(100, &udp(2)));
        let mut io = MemIo::new(8);
        d.release(1_000_100, &mut io, || 0);
        assert_eq!(io.sent.iter().map(|f| id(f)).collect::<Vec<_>>(), [2]);
        d.release(10_000_000, &mut io, || 0);
        assert_eq!(io.sent.iter().map(|f| id(f)).collect::<Vec<_>>(), [2, 1]);
        // The replaced model came back to the control side, to be dropped there.
        assert!(helm.retired.try_recv().is_ok());
        assert!(d.counters().conserved());
    }

    #[test]
    fn a_cut_direction_carries_nothing_not_even_address_resolution() {
        let ((mut d, _, _), helm) = steered("delay 1ms", 16);
        helm.cut.store(true, Ordering::Relaxed);
        let mut arp = vec![0u8; 42];
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        d.receive(at(0, &arp));
        d.receive(at(0, &udp(1)));
        assert_eq!(d.next_release(), None);
        assert_eq!(d.counters().dropped(DropKind::LinkDown), 2);
        helm.cut.store(false, Ordering::Relaxed);
        d.receive(at(0, &udp(2)));
        assert_eq!(d.next_release(), Some(1_000_000));
        assert!(d.counters().conserved());
    }

    /// A frame that waited in the ring while the engine set up is not released late and timed
    /// as a release error: it arrived before the link was up. One stamped at the opening
    /// instant, or after, is carried.
    #[test]
    fn a_frame_stamped_before_the_link_came_up_is_dropped_as_link_down() {
        let (mut d, _, fidelity) = direction("delay 1ms", 16);
        d.open(5_000_000);
        d.receive(Frame {
            seen_ns: 5_000_100,
            ..at(4_999_999, &udp(1))
        });
        assert_eq!(d.next_release(), None);
        d.receive(at(5_000_000, &udp(2)));
        assert_eq!(d.next_release(), Some(6_000_000));
        let mut io = MemIo::new(8);
        assert_eq!(d.release(6_000_000, &mut io, || 6_000_100), 1);
        assert_eq!(io.sent.iter().map(|f| id(f)).collect::<Vec<_>>(), [2]);
        let c = d.counters();
        assert_eq!((c.received, c.dropped(DropKind::LinkDown)), (2, 1));
        assert!(c.conserved());
        assert_eq!(fidelity.pop().map(|r| r.arrival_lag_ns), Some(500));
        assert!(fidelity.pop().is_none());
    }
}
