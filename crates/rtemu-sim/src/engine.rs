//! The virtual-time loop: read frames, ask the model, release deliveries in time order.
//!
//! Time is the input's: a frame arrives at its capture timestamp, and nothing waits. Decided
//! copies wait in a [`TimingQueue`] keyed by delivery time (the real-time engine's too);
//! because a delivery is never before its packet's arrival, every copy due at or before the
//! current arrival can be written before the next decision, so the output is in delivery order
//! and the queue holds only the copies in flight. Memory therefore depends on rate × delay, never on the input's length.
//!
//! A model with a queue discipline holds copies and decides them when they leave its queue: the
//! run takes those decisions ([`Model::depart`]) before each arrival it hands the model, in
//! time order, so its fates are those the real-time engine makes for the same arrivals; such
//! copies are logged when decided, so the fate log is in decision order.
//!
//! Frame bytes of copies in flight live in recycled buffers: after warm-up the loop does not
//! allocate. A sink that writes nothing ([`Discard`]) gets no bytes, so none are kept. Copies in
//! flight are bounded ([`Limits`]): a model whose rate × delay would hold more stops the run with
//! an error saying so, rather than exhausting memory.

use std::collections::HashMap;
use std::io::{self, Write};

use rtemu_model::timing::{Entry, TimingQueue};
use rtemu_model::wire::{ecn, flow_key, mark_ce};
use rtemu_model::{Corruption, Delivery, Exhaustion, Model, Outcome, PacketMeta};

use crate::fatelog::FateLog;
use crate::source::{FrameSource, Progress, SourceError};
use crate::summary::{Summary, Tally};

/// Where delivered frames go.
pub trait FrameSink {
    /// Writes a frame delivered at `ts_ns`; `orig_len` is its length on the wire.
    fn deliver(&mut self, ts_ns: u64, data: &[u8], orig_len: u32) -> io::Result<()>;

    /// Whether the sink uses the frames' bytes; when it does not, copies in flight keep none
    /// and [`FrameSink::deliver`] gets an empty `data`.
    fn wants_bytes(&self) -> bool {
        true
    }
}

/// A sink that discards frames, for runs that only want the summary.
#[derive(Debug, Default, Clone, Copy)]
pub struct Discard;

impl FrameSink for Discard {
    fn deliver(&mut self, _: u64, _: &[u8], _: u32) -> io::Result<()> {
        Ok(())
    }

    fn wants_bytes(&self) -> bool {
        false
    }
}

/// Bounds on what a run holds in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Copies in flight at once.
    pub copies: usize,
    /// Bytes of the copies in flight at once (only when the sink keeps bytes).
    pub bytes: u64,
}

impl Default for Limits {
    /// 8 Mi copies (about 1 s of 64-byte frames at 10 Gbit/s, some 600 MB of bookkeeping) and
    /// 1 GiB of frame bytes.
    fn default() -> Self {
        Limits {
            copies: 8 << 20,
            bytes: 1 << 30,
        }
    }
}

/// Why a run stopped early.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The input could not be read.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// The output pcap could not be written.
    #[error("writing the output: {0}")]
    Output(io::Error),
    /// The model could not decide (its trace failed).
    #[error("packet {seq}: {why}")]
    Model {
        /// The packet it failed at.
        seq: u64,
        /// What went wrong.
        why: String,
    },
    /// The fate log could not be written.
    #[error("writing the fate log: {0}")]
    Log(io::Error),
    /// More copies in flight than [`Limits`] allow.
    #[error(
        "packet {seq}: {copies} copies ({bytes} bytes) would be in flight at once, more than the \
         {max_copies} copies and {max_bytes} bytes a run may hold: the traffic's rate × the \
         model's delay is too large; shorten the delay or the rate{hint}"
    )]
    InFlight {
        /// The packet that went over.
        seq: u64,
        /// Copies in flight with it.
        copies: usize,
        /// Bytes kept for them.
        bytes: u64,
        /// The limit on copies.
        max_copies: usize,
        /// The limit on bytes.
        max_bytes: u64,
        /// What else would help.
        hint: &'static str,
    },
}

/// One copy waiting for its time, or in the model's queue.
#[derive(Debug)]
struct InFlight {
    data: Vec<u8>,
    orig_len: u32,
    corruption: Corruption,
    marked: bool,
}

/// The copies a run holds: frame buffers (recycled), the timing queue of delivered copies, and
/// the copies the model's queue holds (by the model's sequence number and copy).
#[derive(Debug, Default)]
struct Copies {
    slots: Vec<InFlight>,
    free: Vec<usize>,
    line: TimingQueue<usize>,
    queued: HashMap<(u64, u8), usize>,
    /// Bytes kept for all of them.
    bytes: u64,
}

impl Copies {
    /// A buffer holding `data` (nothing when the sink wants no bytes).
    fn store(&mut self, data: &[u8], orig_len: u32, keep_bytes: bool) -> usize {
        let slot = match self.free.pop() {
            Some(i) => {
                self.slots[i].data.clear();
                i
            }
            None => {
                self.slots.push(InFlight {
                    data: Vec::new(),
                    orig_len: 0,
                    corruption: Corruption::NONE,
                    marked: false,
                });
                self.slots.len() - 1
            }
        };
        let s = &mut self.slots[slot];
        if keep_bytes {
            s.data.extend_from_slice(data);
            self.bytes += data.len() as u64;
        }
        s.orig_len = orig_len;
        slot
    }

    /// Queues the copy in `slot` for delivery as `d` says.
    fn schedule(&mut self, slot: usize, d: &Delivery, seq: u64) {
        let s = &mut self.slots[slot];
        s.corruption = d.corruption;
        s.marked = d.marked;
        self.line.push(Entry {
            at_ns: d.at_ns,
            seq,
            copy: d.copy,
            slot,
        });
    }

    /// Frees `slot`.
    fn forget(&mut self, slot: usize) {
        self.bytes -= self.slots[slot].data.len() as u64;
        self.free.push(slot);
    }

    /// Copies held: in the timing queue and in the model's queue.
    fn len(&self) -> usize {
        self.line.len() + self.queued.len()
    }
}

/// Records a delivered copy of the packet `(seq, arrival)`.
fn tally_delivery(tally: &mut Tally, arrival: u64, d: &Delivery) {
    let delay = d.at_ns - arrival;
    tally.delays.saturating_record(delay);
    tally.delay_sum += delay as u128;
    tally.corrupted += d.corruption.is_corrupted() as u64;
    tally.marked += d.marked as u64;
    tally.reordered += d.reordered as u64;
}

/// Takes the model's decisions about the copies its queue holds, up to `now`.
fn settle<M: Model + ?Sized, W: Write>(
    model: &mut M,
    copies: &mut Copies,
    tally: &mut Tally,
    log: &mut Option<&mut FateLog<W>>,
    now: u64,
) -> Result<(), SimError> {
    while let Some(dep) = model.depart_by(now) {
        let Some(slot) = copies.queued.remove(&(dep.seq, dep.copy)) else {
            continue;
        };
        let pkt = PacketMeta {
            len: copies.slots[slot].orig_len,
            flow: Default::default(),
            arrival_ns: dep.arrival_ns,
            seq: dep.seq,
            ecn: Default::default(),
        };
        match dep.outcome {
            Outcome::Delivered(d) => {
                copies.schedule(slot, &d, dep.seq);
                tally_delivery(tally, dep.arrival_ns, &d);
                if let Some(log) = log.as_deref_mut() {
                    log.delivered(&pkt, &d).map_err(SimError::Log)?;
                }
            }
            Outcome::Dropped(reason) => {
                copies.forget(slot);
                tally.drop(reason);
                if let Some(log) = log.as_deref_mut() {
                    log.dropped(&pkt, dep.copy, reason).map_err(SimError::Log)?;
                }
            }
        }
    }
    Ok(())
}

/// How often the progress callback runs, in input frames.
const PROGRESS_EVERY: u64 = 1 << 16;

/// Runs `model` over every frame of `source`, writing delivered frames to `sink` in delivery
/// order and each decision to `log`, and returns the summary. `progress` is called now and
/// then with how far the input has been read.
pub fn run<M: Model + ?Sized, W: Write>(
    source: &mut dyn FrameSource,
    model: &mut M,
    sink: &mut dyn FrameSink,
    log: Option<&mut FateLog<W>>,
    progress: &mut dyn FnMut(Progress),
) -> Result<Summary, SimError> {
    run_with(source, model, sink, log, progress, Limits::default())
}

/// As [`run`], within `limits`.
pub fn run_with<M: Model + ?Sized, W: Write>(
    source: &mut dyn FrameSource,
    model: &mut M,
    sink: &mut dyn FrameSink,
    mut log: Option<&mut FateLog<W>>,
    progress: &mut dyn FnMut(Progress),
    limits: Limits,
) -> Result<Summary, SimError> {
    let keep_bytes = sink.wants_bytes();
    let link = source.link_type();
    let mut tally = Tally::default();
    let mut copies = Copies::default();
    let mut clock = 0u64;
    let mut seq = 0u64;

    while let Some(frame) = source.next_frame()? {
        let arrival = if frame.ts_ns < clock {
            tally.regressions += 1;
            clock
        } else {
            frame.ts_ns
        };
        clock = arrival;
        // Decisions the model's queue makes before this arrival, then what is due.
        settle(model, &mut copies, &mut tally, &mut log, arrival)?;
        release(&mut copies, sink, &mut tally, link, arrival)?;

        let pkt = PacketMeta {
            len: frame.orig_len,
            flow: flow_key(link, frame.data),
            arrival_ns: arrival,
            seq,
            ecn: ecn(link, frame.data),
        };
        let fate = model.decide(&pkt);
        match model.exhausted() {
            None => {}
            // The model's trace ended at this packet: it decided nothing.
            Some(Exhaustion::Ended) => {
                tally.stopped_early = true;
                break;
            }
            Some(Exhaustion::Failed(why)) => {
                return Err(SimError::Model {
                    seq,
                    why: why.clone(),
                })
            }
        }
        tally.packets_in += 1;
        tally.bytes_in += frame.orig_len as u64;
        tally.first_arrival.get_or_insert(arrival);
        tally.last_arrival = arrival;
        let decided = fate.copies();
        tally.duplicated += (decided > 1) as u64;

        let kept = if keep_bytes {
            frame.data.len() as u64
        } else {
            0
        };
        let stored = fate.delivered.len() + fate.held().count();
        if copies.len() + stored > limits.copies
            || copies.bytes + kept * stored as u64 > limits.bytes
        {
            return Err(SimError::InFlight {
                seq,
                copies: copies.len() + stored,
                bytes: copies.bytes + kept * stored as u64,
                max_copies: limits.copies,
                max_bytes: limits.bytes,
                hint: if keep_bytes {
                    ", or leave out --out, which keeps no frame bytes"
                } else {
                    ""
                },
            });
        }
        for d in fate.delivered.as_slice() {
            let slot = copies.store(frame.data, frame.orig_len, keep_bytes);
            copies.schedule(slot, d, seq);
            tally_delivery(&mut tally, arrival, d);
            if let Some(log) = log.as_deref_mut() {
                log.delivered(&pkt, d).map_err(SimError::Log)?;
            }
        }
        for copy in fate.held() {
            let slot = copies.store(frame.data, frame.orig_len, keep_bytes);
            copies.queued.insert((seq, copy), slot);
        }
        // Dropped copies take the copy numbers the delivered and held ones do not use.
        let mut missing = (0..decided as u8).filter(|c| {
            !fate.delivered.as_slice().iter().any(|d| d.copy == *c) && !fate.held().any(|h| h == *c)
        });
        for reason in fate.drops() {
            tally.drop(reason);
            if let Some(log) = log.as_deref_mut() {
                log.dropped(&pkt, missing.next().unwrap_or(0), reason)
                    .map_err(SimError::Log)?;
            }
        }
        tally.max_in_flight = tally.max_in_flight.max(copies.len() as u64);
        seq += 1;
        if seq % PROGRESS_EVERY == 0 {
            progress(source.progress());
        }
    }
    settle(model, &mut copies, &mut tally, &mut log, u64::MAX)?;
    release(&mut copies, sink, &mut tally, link, u64::MAX)?;
    progress(source.progress());
    Ok(tally.finish(model.counters(), model.trace_counters()))
}

/// Writes every copy due at or before `now`.
fn release(
    copies: &mut Copies,
    sink: &mut dyn FrameSink,
    tally: &mut Tally,
    link: u32,
    now: u64,
) -> Result<(), SimError> {
    while let Some(Entry {
        at_ns: at, slot, ..
    }) = copies.line.pop_due(now)
    {
        let s = &mut copies.slots[slot];
        // As the engine does: the queue marks, then the wire corrupts.
        if s.marked {
            mark_ce(link, &mut s.data);
        }
        s.corruption.apply(&mut s.data);
        sink.deliver(at, &s.data, s.orig_len)
            .map_err(SimError::Output)?;
        tally.delivered += 1;
        tally.bytes_delivered += s.orig_len as u64;
        tally.last_delivery = tally.last_delivery.max(at);
        copies.forget(slot);
    }
    Ok(())
}
