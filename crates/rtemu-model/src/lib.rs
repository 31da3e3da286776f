//! Pure, seeded link models for rtemu.
//!
//! A model sees a packet's metadata ([`PacketMeta`]: length, flow, arrival time, sequence
//! number) and returns its [`Fate`]: dropped for a reason, or delivered at one or more absolute
//! times (duplicates), each copy possibly corrupted. Models own no clock, do no I/O, use no
//! globals and do not allocate per packet; every random draw comes from a seeded [`Stream`]
//! owned by one link direction. The engines drive them: `rtemu-sim` in virtual time over a
//! capture, the real-time engine on live frames. Because the models are pure, both engines make
//! the same decisions for the same seed.
//!
//! The crate is layered like the link itself:
//!
//! * [`units`] and [`probability`]: quantities as tc writes them, and probabilities as integer
//!   thresholds;
//! * [`chance`], [`loss`], [`dist`], [`rate`]: one state machine per impairment;
//! * [`aqm`]: queue disciplines that manage the rate queue (CoDel), deciding at dequeue;
//! * [`slot`]: netem's delivery in slots, after every other stage;
//! * [`link`]: the stages in their documented order ([`LinkModel`]);
//! * [`trace`]: links whose drops, duplicates and delays come from a trace;
//! * [`config`] and [`netem`]: the structured configuration and the netem syntax that fills it;
//! * [`timing`]: the queue both engines release copies from in time order;
//! * [`wire`]: the frames the engines carry (header views, checksums, generated frames).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod aqm;
pub mod chance;
pub mod config;
pub mod direction;
pub mod dist;
pub mod fate;
pub mod link;
pub mod loss;
pub mod netem;
pub mod packet;
pub mod probability;
pub mod rate;
pub mod rng;
pub mod slot;
pub mod timing;
pub mod trace;
pub mod units;
pub mod wire;

pub use config::LinkConfig;
pub use fate::{Corruption, Deliveries, Delivery, DropReason, Fate};
pub use link::{LinkModel, TableSource};
pub use packet::{Ecn, FlowKey, Nanos, PacketMeta};
pub use probability::Probability;
pub use rng::Stream;

/// What became of a copy a model's queue held ([`Fate::held`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Outcome {
    /// It leaves the link.
    Delivered(Delivery),
    /// It was dropped.
    Dropped(DropReason),
}

/// The fate of a held copy, decided when it left the model's queue.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Departure {
    /// The packet's [`PacketMeta::seq`].
    pub seq: u64,
    /// The packet's [`PacketMeta::arrival_ns`].
    pub arrival_ns: Nanos,
    /// Which copy (0 the original).
    pub copy: u8,
    /// What became of it.
    pub outcome: Outcome,
}

/// Anything that decides packet fates: the netem-style [`LinkModel`], trace-driven models, …
///
/// A model with a queue discipline ([`aqm`]) holds copies and decides their fates when they
/// leave its queue. Its driver (the simulator, the engine) asks [`Model::next_departure`] when
/// that is and calls [`Model::depart`] once its clock reaches it, before it offers any packet
/// that arrived later; a packet arriving at the very instant of a departure is offered after
/// it. Driven so, the decisions depend only on the packets and their arrival times, in
/// virtual time as in real time.
pub trait Model {
    /// Decides the fate of the next packet. Packets must be offered in arrival order.
    fn decide(&mut self, pkt: &PacketMeta) -> Fate;

    /// When the model next decides the fate of a copy it holds, if it holds any.
    fn next_departure(&self) -> Option<Nanos> {
        None
    }

    /// Decides the fate of the held copy due at [`Model::next_departure`].
    fn depart(&mut self) -> Option<Departure> {
        None
    }

    /// Decides the fate of the next held copy if it is due by `now`.
    fn depart_by(&mut self, now: Nanos) -> Option<Departure> {
        if self.next_departure()? <= now {
            self.depart()
        } else {
            None
        }
    }

    /// The model's counters about its own decisions (clamped delays, queue high-water marks).
    fn counters(&self) -> link::LinkCounters {
        link::LinkCounters::default()
    }

    /// Why the model has no more decisions to make, if it has none (its trace ended under the
    /// `stop` policy, or could not be read): the engine then stops taking input. The fate
    /// returned with the first `Some` means nothing.
    fn exhausted(&self) -> Option<&Exhaustion> {
        None
    }

    /// What the streamed traces driving the model did besides giving records (under-runs,
    /// loops, records after the end), summed; `None` when no streamed trace drives it.
    fn trace_counters(&self) -> Option<trace::FeedCounters> {
        None
    }
}

/// Why a model stopped deciding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exhaustion {
    /// Its trace ended and the end-of-trace policy is `stop`.
    Ended,
    /// Its trace could not be read; the message says where and why.
    Failed(String),
}
