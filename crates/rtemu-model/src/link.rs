//! The link model: every impairment of one link direction, applied in a fixed order.
//!
//! A packet passes these stages, each a small state machine of its own:
//!
//! 1. **duplicate** — decides whether one extra copy is made. The copy then passes stages 2–6
//!    on its own (as in netem, where the copy re-enters the qdisc), but is never duplicated.
//! 2. **loss** — random, 4-state Markov or Gilbert–Elliott; drops the copy, or with `ecn` marks
//!    an ECN-capable copy CE instead (netem's `ecn`).
//! 3. **corrupt** — netem's single random bit flip, then independent flips at the bit error
//!    rate (`ber`).
//! 4. **reorder** — netem's rule: with `gap N`, packets are delayed normally until the `N`th,
//!    which is sent without the delay (stage 6) with the reorder probability.
//! 5. **rate** — serialization at the link rate behind a finite drop-tail queue
//!    ([`crate::rate`]); drops the copy when the queue is full. With a queue discipline
//!    ([`crate::aqm`]: `codel`) the copy waits in the discipline's queue instead, and its fate
//!    (stages 5–7) is decided when it leaves ([`Model::depart`]).
//! 6. **delay** — base delay plus jitter from the configured distribution and correlation
//!    ([`crate::dist`]), added to the time serialization finished.
//! 7. **order** — with `ordered`, a copy never leaves before the copy decided before it.
//! 8. **slot** — with `slot`, the copy waits for the next slot start ([`crate::slot`]); its
//!    leaving time is decided when it is ready ([`Model::depart`]).
//!
//! The order differs from netem's in one place on purpose: netem computes the rate relative to
//! the delayed departure of the previous packet, so jitter and serialization interfere (a
//! jittered packet shifts every later packet's transmission). rtemu serializes first and delays
//! afterwards, as a real link queues, transmits and then propagates.
//!
//! Every random draw comes from the direction's own [`Stream`], in the order of the stages
//! above, so the same seed gives the same fates in the simulator and in the real-time engine.

use crate::aqm::{Bottleneck, Left, Queued};
use crate::chance::{BadCorrelation, Chance};
use crate::config::{DistName, LinkConfig, MAX_RATE};
use crate::dist::{DelayConfig, DelayError, DelaySampler, DistTable, Distribution};
use crate::fate::{BerFlips, Corruption, Delivery, DropReason, Fate};
use crate::loss::{Loss, LossError};
use crate::packet::{Nanos, PacketMeta};
use crate::rate::{QueueLimits, RateQueue};
use crate::rng::Stream;
use crate::slot::{Gaps, Slots};
use crate::units::Rate;
use crate::{Departure, Model, Outcome};

/// Finds distribution tables by name, for [`DistName::Table`] and for [`crate::config::TableMode::Netem`].
///
/// The model does no I/O, so whoever builds a link (the CLI, the engine) supplies the tables.
pub trait TableSource {
    /// The table called `name` (`normal`, `pareto`, a user's table name or path).
    fn table(&self, name: &str) -> Result<DistTable, String>;
}

/// The label mixed into a link's stream label for the seed of FQ-CoDel's flow hash.
const FLOW_HASH_LABEL: u64 = 0x4651_4841_5348; // "FQHASH"
/// The label mixed into a link's stream label for a queue discipline's own draws (PIE's,
/// DualPI2's).
const AQM_LABEL: u64 = 0x4151_4d44_5257; // "AQMDRW"
/// The label mixed into a link's stream label for the gaps between `slot` starts.
const SLOT_LABEL: u64 = 0x534c_4f54_4741; // "SLOTGA"

/// A built-in distribution by name; `uniform` for a table's name (the caller loads tables).
fn builtin(name: &DistName) -> Distribution {
    match name {
        DistName::Normal => Distribution::Normal,
        DistName::Pareto => Distribution::Pareto,
        DistName::Paretonormal => Distribution::ParetoNormal,
        DistName::Uniform | DistName::Table(_) => Distribution::Uniform,
    }
}

/// A [`TableSource`] that has no tables: enough for every configuration that names none.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoTables;

impl TableSource for NoTables {
    fn table(&self, name: &str) -> Result<DistTable, String> {
        Err(format!(
            "no table source is configured, so the table {name:?} cannot be loaded"
        ))
    }
}

/// A [`LinkConfig`] that cannot be turned into a model.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LinkError {
    /// A value out of range, or values that do not work together.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// The delay distribution.
    #[error("delay: {0}")]
    Delay(#[from] DelayError),
    /// A distribution table could not be loaded.
    #[error("distribution {name}: {reason}")]
    Table {
        /// The table's name.
        name: String,
        /// Why.
        reason: String,
    },
    /// The loss model.
    #[error("loss: {0}")]
    Loss(#[from] LossError),
    /// A correlation of duplicate, corrupt or reorder.
    #[error("{stage}: {source}")]
    Correlation {
        /// Which stage.
        stage: &'static str,
        /// What is wrong.
        source: BadCorrelation,
    },
}

/// Why a link's rate could not be changed ([`LinkModel::set_rate`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RateChangeError {
    /// The model has no rate stage.
    #[error("the link has no rate to change: its model has no `rate RATE`")]
    NoRate,
    /// The rate is out of range.
    #[error("rate {0}: must be between 1bit and {max} per second", max = Rate(MAX_RATE))]
    OutOfRange(Rate),
}

#[derive(Debug, Clone)]
struct Reorder {
    chance: Chance,
    gap: u32,
    counter: u32,
}

/// Counters a link model keeps about its own decisions, beyond what fates say.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkCounters {
    /// Delays that the distribution drew below zero and that were clamped to zero.
    pub clamped_delays: u64,
    /// Largest rate-queue backlog seen, in packets.
    pub max_backlog_packets: u64,
    /// Largest rate-queue backlog seen, in bytes.
    pub max_backlog_bytes: u64,
}

/// The model of one link direction.
#[derive(Debug, Clone)]
pub struct LinkModel {
    stream: Stream,
    delay: Option<DelaySampler>,
    loss: Option<Loss>,
    /// netem's `ecn`: losses of ECN-capable copies become CE marks.
    ecn: bool,
    duplicate: Option<Chance>,
    corrupt: Option<Chance>,
    ln_1m_ber: Option<f64>,
    reorder: Option<Reorder>,
    rate: Option<RateQueue>,
    /// The rate stage when a discipline manages its queue: copies wait there, and leave
    /// through [`Model::depart`].
    bottleneck: Option<Bottleneck>,
    /// `slot`: copies wait here for a slot start after every other stage.
    slots: Option<Slots>,
    ordered: bool,
    last_departure: Nanos,
    counters: LinkCounters,
}

fn chance(
    stage: &'static str,
    c: &Option<crate::chance::ChanceConfig>,
) -> Result<Option<Chance>, LinkError> {
    match c {
        Some(c) => Chance::new(*c)
            .map(|c| (!c.is_never()).then_some(c))
            .map_err(|source| LinkError::Correlation { stage, source }),
        None => Ok(None),
    }
}

impl LinkModel {
    /// Builds the model of one link direction. Its random stream is derived from `seed` (or the
    /// configuration's own seed) and `label`, which must differ between directions and links.
    pub fn new(
        cfg: &LinkConfig,
        tables: &dyn TableSource,
        seed: u64,
        label: u64,
    ) -> Result<Self, LinkError> {
        cfg.validate()?;
        let load = |name: &str| {
            tables.table(name).map_err(|reason| LinkError::Table {
                name: name.to_string(),
                reason,
            })
        };
        let distribution = match (cfg.table_name(), &cfg.distribution) {
            (Some(name), _) => Distribution::Table(load(name)?),
            (None, name) => builtin(name),
        };
        let delay = if cfg.delay.0 == 0 && cfg.jitter.0 == 0 {
            None
        } else {
            Some(DelaySampler::new(&DelayConfig {
                delay_ns: cfg.delay.0,
                jitter_ns: cfg.jitter.0,
                correlation: cfg.delay_correlation.0,
                distribution,
            })?)
        };
        let reorder = chance("reorder", &cfg.reorder)?.map(|chance| Reorder {
            chance,
            // tc turns "no gap" into gap 1: every packet is a candidate.
            gap: cfg.gap.max(1),
            counter: 0,
        });
        let slots = match &cfg.slot {
            None => None,
            Some(s) => {
                let gaps = match &s.distribution {
                    None => Gaps::Uniform {
                        min: s.min_delay.0,
                        span: s.max_delay.0 - s.min_delay.0,
                    },
                    Some(name) => {
                        let distribution = match cfg.slot_table_name() {
                            Some(table) => Distribution::Table(load(table)?),
                            None => builtin(name),
                        };
                        Gaps::Drawn(DelaySampler::new(&DelayConfig {
                            delay_ns: s.delay.0,
                            jitter_ns: s.jitter.0,
                            correlation: 0.0,
                            distribution,
                        })?)
                    }
                };
                let stream = Stream::new(cfg.seed.unwrap_or(seed), label ^ SLOT_LABEL);
                Some(Slots::new(s, gaps, stream, cfg.limit))
            }
        };
        Ok(LinkModel {
            slots,
            stream: Stream::new(cfg.seed.unwrap_or(seed), label),
            delay,
            loss: cfg.loss.as_ref().map(Loss::new).transpose()?,
            ecn: cfg.ecn,
            duplicate: chance("duplicate", &cfg.duplicate)?,
            corrupt: chance("corrupt", &cfg.corrupt)?,
            ln_1m_ber: cfg.ber.map(|b| (-b).ln_1p()),
            reorder,
            bottleneck: match (&cfg.rate, &cfg.codel, &cfg.fq_codel) {
                (Some(r), Some(c), _) => Some(Bottleneck::codel(*r, c)),
                (Some(r), None, Some(f)) => {
                    // Its own stream, so hashing takes no draw from the link's.
                    let hash_seed =
                        Stream::new(cfg.seed.unwrap_or(seed), label ^ FLOW_HASH_LABEL).next_u64();
                    Some(Bottleneck::fq_codel(*r, f, hash_seed))
                }
                // Its own stream too, so its draws move none of the link's.
                (Some(r), None, None) => {
                    let stream = Stream::new(cfg.seed.unwrap_or(seed), label ^ AQM_LABEL);
                    match (&cfg.pie, &cfg.dualpi2) {
                        (Some(p), _) => Some(Bottleneck::pie(*r, p, stream)),
                        (None, Some(d)) => Some(Bottleneck::dualpi2(*r, d, stream)),
                        (None, None) => None,
                    }
                }
                _ => None,
            },
            rate: cfg.rate.filter(|_| !cfg.has_discipline()).map(|r| {
                RateQueue::new(
                    r,
                    QueueLimits {
                        packets: cfg.limit,
                        bytes: cfg.limit_bytes,
                        time: cfg.limit_time,
                    },
                )
            }),
            ordered: cfg.ordered,
            last_departure: 0,
            counters: LinkCounters::default(),
        })
    }

    /// Changes the link's rate from now on, as a modem's rate changes under load, keeping its
    /// queue and the queue discipline's state. A new model (`rtemu link set`) would start with
    /// an empty queue and a controller that has seen nothing, which is not how a link behaves
    /// when only its capacity changes (RFC 7928 §8.2.5). Call it in time order: after the
    /// departures due before the change, before the arrivals after it. Copies whose
    /// serialization has started or (drop-tail) whose departure has been decided keep their
    /// times, see [`RateQueue::set_rate`]; the others serialize at `rate`, and a time limit
    /// (`limit 500ms`) holds what `rate` sends in that time.
    pub fn set_rate(&mut self, rate: Rate) -> Result<(), RateChangeError> {
        if !(1..=MAX_RATE).contains(&rate.0) {
            return Err(RateChangeError::OutOfRange(rate));
        }
        match (&mut self.rate, &mut self.bottleneck) {
            (Some(q), _) => q.set_rate(rate),
            (None, Some(b)) => b.set_rate(rate),
            (None, None) => return Err(RateChangeError::NoRate),
        }
        Ok(())
    }

    /// Stages 2–7 for one copy. With `traced_delay`, a trace has already decided loss,
    /// reordering and the delay: only corruption, rate and order apply.
    #[inline]
    pub(crate) fn pass(
        &mut self,
        pkt: &PacketMeta,
        copy: u8,
        traced_delay: Option<u64>,
        fate: &mut Fate,
    ) {
        let s = &mut self.stream;
        let mut marked = false;
        if let (Some(loss), None) = (&mut self.loss, traced_delay) {
            if loss.lose(s) {
                if !(self.ecn && pkt.ecn.is_capable()) {
                    fate.record_drop(DropReason::Loss);
                    return;
                }
                marked = true;
            }
        }
        let bits = pkt.len.saturating_mul(8);
        let mut corruption = Corruption::NONE;
        if let Some(c) = &mut self.corrupt {
            if c.next(s) && bits > 0 {
                corruption.single_bit = Some(s.below(bits));
            }
        }
        if let Some(ln) = self.ln_1m_ber {
            corruption.ber = BerFlips::draw(s, bits, ln);
        }
        let reordered = match &mut self.reorder {
            _ if traced_delay.is_some() => false,
            // netem's rule: a packet is a candidate once `gap − 1` packets were delayed since
            // the last reordered one; the reorder draw is made for candidates only.
            Some(r) => {
                if r.counter + 1 >= r.gap && r.chance.next(s) {
                    r.counter = 0;
                    true
                } else {
                    r.counter = r.counter.saturating_add(1);
                    false
                }
            }
            None => false,
        };
        if let Some(b) = &mut self.bottleneck {
            let queued = Queued {
                seq: pkt.seq,
                arrival_ns: pkt.arrival_ns,
                enqueued_ns: pkt.arrival_ns,
                queue: b.classify(&pkt.flow),
                len: pkt.len,
                copy,
                ecn: pkt.ecn,
                reordered,
                marked,
                corruption,
                traced_delay,
            };
            match b.enqueue(pkt.arrival_ns, queued) {
                Ok(()) => {
                    fate.hold(copy);
                    let (packets, bytes) = b.backlog();
                    let c = &mut self.counters;
                    c.max_backlog_packets = c.max_backlog_packets.max(packets);
                    c.max_backlog_bytes = c.max_backlog_bytes.max(bytes);
                }
                Err(reason) => fate.record_drop(reason),
            }
            return;
        }
        let departure = match &mut self.rate {
            Some(q) => match q.offer(pkt.arrival_ns, pkt.len) {
                Some(finish) => {
                    let c = &mut self.counters;
                    c.max_backlog_packets = c.max_backlog_packets.max(q.backlog_packets() as u64);
                    c.max_backlog_bytes = c.max_backlog_bytes.max(q.backlog_bytes());
                    finish
                }
                None => {
                    fate.record_drop(DropReason::QueueFull);
                    return;
                }
            },
            None => pkt.arrival_ns,
        };
        let at = self.propagate(departure, reordered, traced_delay);
        let delivery = Delivery {
            at_ns: at,
            corruption,
            copy,
            reordered,
            marked,
        };
        match &mut self.slots {
            Some(slots) => match slots.hold(pkt.seq, pkt.arrival_ns, pkt.len, delivery) {
                true => fate.hold(copy),
                false => fate.record_drop(DropReason::QueueFull),
            },
            None => {
                fate.delivered.push(delivery);
            }
        }
    }
}

impl LinkModel {
    /// Stages 6 and 7 for a copy whose serialization finished at `departure`: the delay (the
    /// trace's, or drawn; none for a reordered copy), then the order.
    fn propagate(&mut self, departure: Nanos, reordered: bool, traced_delay: Option<u64>) -> Nanos {
        let mut at = match (&mut self.delay, reordered, traced_delay) {
            (_, _, Some(delay)) => departure.saturating_add(delay),
            (Some(d), false, None) => departure.saturating_add(d.sample(&mut self.stream)),
            _ => departure,
        };
        if self.ordered && !reordered {
            at = at.max(self.last_departure);
            self.last_departure = at;
        }
        at
    }

    /// The next copy leaving the managed queue or taking its slot, with its fate.
    pub(crate) fn depart_queued(&mut self) -> Option<Departure> {
        // `slot` and a queue discipline never come together (`LinkConfig::validate`).
        if let Some(slots) = &mut self.slots {
            return slots.depart();
        }
        let left = self.bottleneck.as_mut()?.depart()?;
        Some(match left {
            Left::Sent {
                packet,
                mark,
                finish,
            } => {
                let at = self.propagate(finish, packet.reordered, packet.traced_delay);
                Departure {
                    seq: packet.seq,
                    arrival_ns: packet.arrival_ns,
                    copy: packet.copy,
                    outcome: Outcome::Delivered(Delivery {
                        at_ns: at,
                        corruption: packet.corruption,
                        copy: packet.copy,
                        reordered: packet.reordered,
                        marked: packet.marked || mark,
                    }),
                }
            }
            Left::Dropped { packet, reason } => Departure {
                seq: packet.seq,
                arrival_ns: packet.arrival_ns,
                copy: packet.copy,
                outcome: Outcome::Dropped(reason),
            },
        })
    }

    /// When the managed queue next lets a copy go, or the next copy waiting for a slot is
    /// ready.
    pub(crate) fn next_queued(&self) -> Option<Nanos> {
        match &self.slots {
            Some(slots) => slots.next(),
            None => self.bottleneck.as_ref().and_then(Bottleneck::next),
        }
    }
}

impl Model for LinkModel {
    fn next_departure(&self) -> Option<Nanos> {
        self.next_queued()
    }

    fn depart(&mut self) -> Option<Departure> {
        self.depart_queued()
    }

    fn decide(&mut self, pkt: &PacketMeta) -> Fate {
        let mut fate = Fate::new();
        let duplicated = match &mut self.duplicate {
            Some(d) => d.next(&mut self.stream),
            None => false,
        };
        let copies = 1 + duplicated as u8;
        for copy in 0..copies {
            self.pass(pkt, copy, None, &mut fate);
        }
        fate
    }

    fn counters(&self) -> LinkCounters {
        let mut c = self.counters;
        if let Some(d) = &self.delay {
            c.clamped_delays = d.clamped();
        }
        c
    }
}
