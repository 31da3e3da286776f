//! PIE, Proportional Integral controller Enhanced (RFC 8033), and DOCSIS-PIE (RFC 8034): a
//! drop probability, updated every `tupdate` from the queueing delay and its trend, decides at
//! *enqueue* whether an arriving packet is dropped (or marked).
//!
//! The controller is the RFCs' pseudocode, in binary64 and nanoseconds:
//!
//! * **every `tupdate`** (`calculate_drop_prob`): `p = α·(qdelay − target) + β·(qdelay −
//!   qdelay_old)`, scaled down while the probability is small (÷2048 below 10⁻⁶, ÷512, ÷128,
//!   ÷32, ÷8, ÷2 below 10 %), capped at +2 % once the probability is 10 % or more (RFC 8033,
//!   section 5.5), added to the probability; the probability decays by 2 % per update while
//!   the queue stays empty; `burst_allowance` shrinks by `tupdate`.
//! * **at enqueue**: a full queue drops at the tail (`queue-full`). Otherwise, once the burst
//!   allowance is spent, `drop_early` drops with the probability (`aqm`), except while the
//!   queue is short (under two mean packets) or the last delay sample was under half the
//!   target with the probability under 20 %, and derandomized (section 5.4: no drop before the
//!   probabilities since the last drop add up to 0.85, always one by 8.5). With `ecn`, an
//!   ECN-capable packet is marked CE instead while the probability is under 10 % (section
//!   5.1). The burst allowance (`max_burst`, 150 ms) is restored at enqueue once the
//!   probability is 0 and both delay samples are under half the target.
//! * **the queueing delay**: by default the sojourn time of the packet dequeued last (0 when it
//!   left the queue empty), as Linux's `pie` measures it; with `dq_rate_estimator`, Little's
//!   law over the measured dequeue rate (RFC 8033, appendix B: the time to dequeue 16 KiB,
//!   averaged with weight ¼, times the queue's bytes).
//!
//! DOCSIS-PIE (`pie docsis`, RFC 8034) is the same controller with the cable modem's
//! constants and three changes: the delay is not measured but predicted from the configured
//! rate (the queue's bytes at the link's rate), the probability is scaled by packet size
//! (`p · max(len, 64) / 1024`, each packet's at most 0.85; the probability itself is bounded
//! by 0.85 · 1024 / 64 and the scaling table goes on above 10 % with ÷0.5, ÷0.125, ÷0.03125),
//! and the probability decays while both samples are under 5 ms and grows by 2 % per update
//! while the delay is over 200 ms.
//!
//! The update timer starts with the first packet, so the decisions depend only on the packets
//! and their times, not on the clock's origin. Updates are taken lazily, in order, before each
//! event (nothing changes between events, so each sees the state it would have seen on time);
//! a queue left empty reaches a state updates no longer change, and the timer skips ahead.
//!
//! # Where rtemu's PIE differs from Linux's
//!
//! rtemu follows RFC 8033 where Linux's `pie` departs from it: Linux spends the burst allowance
//! by the time between dequeues rather than by `tupdate` per update, checks the current delay
//! rather than the last sample in the short-queue safeguard, adds another 2 % per update while
//! the delay exceeds 250 ms, and decays the probability by 1/64 rather than 2 %. Linux keeps
//! the probability in units of 2⁻⁵⁶ and times in 64 ns ticks, and derives α and β (tc's
//! integers, in sixteenths of a hertz) in that fixed point; rtemu computes in binary64 from the
//! same integers; Linux's truncation makes an update a few millionths smaller
//! (`linux_fixed_point_changes_an_update_by_a_few_millionths`).

use serde::{Deserialize, Serialize};

use super::codel::Decision;
use super::store::{Fifo, Store};
use super::{Queued, Ticker};
use crate::fate::DropReason;
use crate::packet::Nanos;
use crate::rate::RateConfig;
use crate::rng::Stream;
use crate::units::Time;

/// `pie [limit PACKETS] [target TIME] [tupdate TIME] [alpha N] [beta N] [ecn | noecn]
/// [bytemode | nobytemode] [dq_rate_estimator | no_dq_rate_estimator]`, tc's words, with
/// rtemu's `max_burst TIME` and `docsis` (DOCSIS-PIE, RFC 8034). Parameters left out take the
/// variant's default ([`PieConfig::target`] and the others).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PieConfig {
    /// DOCSIS-PIE (RFC 8034) rather than PIE (RFC 8033).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub docsis: bool,
    /// Most packets queued; more are dropped at the tail (`queue-full`).
    pub limit: u32,
    /// The queueing delay the controller aims at (15 ms; DOCSIS-PIE 10 ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<Time>,
    /// How often the drop probability is updated (15 ms; DOCSIS-PIE 16 ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tupdate: Option<Time>,
    /// The integral gain α in sixteenths of a hertz, tc's unit (2 = 0.125 Hz; DOCSIS-PIE 4).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alpha: Option<u32>,
    /// The proportional gain β in sixteenths of a hertz (20 = 1.25 Hz; DOCSIS-PIE 40).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub beta: Option<u32>,
    /// The burst a queue may build from rest before early drops start (150 ms; DOCSIS-PIE
    /// 142 ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_burst: Option<Time>,
    /// Mark ECN-capable packets instead of dropping them while the probability is under 10 %.
    pub ecn: bool,
    /// Scale the probability by packet size (`len / 1514`); DOCSIS-PIE always scales.
    pub bytemode: bool,
    /// Estimate the delay from the measured dequeue rate instead of packet timestamps (PIE
    /// only: DOCSIS-PIE predicts it from the link's rate).
    pub dq_rate_estimator: bool,
}

/// tc's `pie` defaults.
impl Default for PieConfig {
    fn default() -> Self {
        PieConfig {
            docsis: false,
            limit: 1000,
            target: None,
            tupdate: None,
            alpha: None,
            beta: None,
            max_burst: None,
            ecn: false,
            bytemode: false,
            dq_rate_estimator: false,
        }
    }
}

impl PieConfig {
    /// The delay target in force.
    pub fn target(&self) -> Time {
        self.target
            .unwrap_or(Time(if self.docsis { 10 } else { 15 } * MS))
    }

    /// The update interval in force.
    pub fn tupdate(&self) -> Time {
        self.tupdate
            .unwrap_or(Time(if self.docsis { 16 } else { 15 } * MS))
    }

    /// α in force, sixteenths of a hertz.
    pub fn alpha(&self) -> u32 {
        self.alpha.unwrap_or(if self.docsis { 4 } else { 2 })
    }

    /// β in force, sixteenths of a hertz.
    pub fn beta(&self) -> u32 {
        self.beta.unwrap_or(if self.docsis { 40 } else { 20 })
    }

    /// The burst allowance in force.
    pub fn max_burst(&self) -> Time {
        self.max_burst
            .unwrap_or(Time(if self.docsis { 142 } else { 150 } * MS))
    }
}

const MS: u64 = 1_000_000;

/// PIE's mean packet size: an Ethernet MTU's frame, as Linux's `psched_mtu` counts it.
const PIE_MEAN_PKTSIZE: u32 = 1514;
/// DOCSIS-PIE's mean and least packet sizes (RFC 8034).
const DOCSIS_MEAN_PKTSIZE: u32 = 1024;
const DOCSIS_MIN_PKTSIZE: u32 = 64;
/// Derandomization's bounds on the accumulated probability (RFC 8033, section 5.4).
const PROB_LOW: f64 = 0.85;
const PROB_HIGH: f64 = 8.5;
/// The bytes a dequeue-rate measurement spans (RFC 8033, appendix B).
const DQ_THRESHOLD: u64 = 1 << 14;

/// How the controller learns the queueing delay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Estimator {
    /// The sojourn time of the packet dequeued last.
    Timestamps,
    /// The queue's bytes over the measured dequeue rate.
    DequeueRate,
    /// The queue's bytes at the configured rate (DOCSIS-PIE).
    ConfiguredRate,
}

/// The dequeue-rate measurement (RFC 8033, appendix B).
#[derive(Debug, Clone, Default)]
struct DqRate {
    in_measurement: bool,
    start: Nanos,
    count: u64,
    /// The average time to dequeue [`DQ_THRESHOLD`] bytes, ns; 0 before the first measurement.
    avg_time: f64,
}

/// One queue under PIE or DOCSIS-PIE.
#[derive(Debug, Clone)]
pub(crate) struct Pie {
    docsis: bool,
    limit: u32,
    target: Nanos,
    tupdate: Nanos,
    /// α and β in hertz.
    alpha: f64,
    beta: f64,
    max_burst: Nanos,
    ecn: bool,
    bytemode: bool,
    estimator: Estimator,
    rate: RateConfig,
    stream: Stream,
    store: Store<Queued>,
    queue: Fifo,
    drop_prob: f64,
    accu_prob: f64,
    /// The current delay sample (for timestamps, the last dequeued packet's sojourn).
    qdelay: Nanos,
    qdelay_old: Nanos,
    burst_allowance: Nanos,
    ticker: Ticker,
    /// The time the queued packets take to send at the configured rate.
    drain_ns: Nanos,
    dq: DqRate,
}

impl Pie {
    /// A queue for `cfg` in front of a link of `rate`, drawing from `stream`.
    pub(crate) fn new(cfg: &PieConfig, rate: RateConfig, stream: Stream) -> Self {
        let max_burst = cfg.max_burst().0;
        Pie {
            docsis: cfg.docsis,
            limit: cfg.limit,
            target: cfg.target().0,
            tupdate: cfg.tupdate().0,
            alpha: f64::from(cfg.alpha()) / 16.0,
            beta: f64::from(cfg.beta()) / 16.0,
            max_burst,
            ecn: cfg.ecn,
            bytemode: cfg.bytemode,
            estimator: if cfg.docsis {
                Estimator::ConfiguredRate
            } else if cfg.dq_rate_estimator {
                Estimator::DequeueRate
            } else {
                Estimator::Timestamps
            },
            rate,
            stream,
            store: Store::new(cfg.limit as usize),
            queue: Fifo::default(),
            drop_prob: 0.0,
            accu_prob: 0.0,
            qdelay: 0,
            qdelay_old: 0,
            burst_allowance: max_burst,
            ticker: Ticker::new(cfg.tupdate().0),
            drain_ns: 0,
            dq: DqRate::default(),
        }
    }

    /// The link's rate is `rate` from now on. Only the queue's drain time, which is derived
    /// from the rate, is recomputed; the controller's state (probability, delay samples, burst
    /// allowance, the dequeue-rate measurement) is left to notice the change as it would on a
    /// real link.
    pub(crate) fn set_rate(&mut self, rate: RateConfig) {
        self.rate = rate;
        self.drain_ns = self
            .queue
            .iter(&self.store)
            .map(|q| rate.transmit_ns(q.len))
            .fold(0, Nanos::saturating_add);
    }

    /// Packets and bytes queued.
    pub(crate) fn backlog(&self) -> (u64, u64) {
        (u64::from(self.queue.len), self.queue.bytes)
    }

    /// Offers `q` at `now`: queued (perhaps marked), or dropped for the reason returned.
    pub(crate) fn enqueue(&mut self, now: Nanos, mut q: Queued) -> Result<(), DropReason> {
        self.advance(now);
        self.ticker.start(now);
        if self.queue.len >= self.limit {
            self.accu_prob = 0.0;
            return Err(DropReason::QueueFull);
        }
        let half = self.target / 2;
        if self.drop_prob == 0.0 && self.qdelay < half && self.qdelay_old < half {
            self.burst_allowance = self.max_burst;
        }
        if self.burst_allowance == 0 && self.drop_early(q.len) {
            self.accu_prob = 0.0;
            if self.ecn && q.ecn.is_capable() && self.drop_prob < 0.1 {
                q.marked = true;
            } else {
                return Err(DropReason::Aqm);
            }
        }
        self.queue
            .push(&mut self.store, q, q.len)
            .map_err(|_| DropReason::QueueFull)?;
        self.drain_ns = self.drain_ns.saturating_add(self.rate.transmit_ns(q.len));
        Ok(())
    }

    /// The RFC's `drop_early` for a packet of `len` bytes arriving at the queue.
    fn drop_early(&mut self, len: u32) -> bool {
        let mean = if self.docsis {
            DOCSIS_MEAN_PKTSIZE
        } else {
            PIE_MEAN_PKTSIZE
        };
        // Safeguards: PIE stays work-conserving.
        if (self.qdelay_old < self.target / 2 && self.drop_prob < 0.2)
            || self.queue.bytes <= 2 * u64::from(mean)
        {
            return false;
        }
        let p = if self.docsis {
            let size = f64::from(len.max(DOCSIS_MIN_PKTSIZE));
            (self.drop_prob * size / f64::from(mean)).min(PROB_LOW)
        } else if self.bytemode && len <= mean {
            self.drop_prob * f64::from(len) / f64::from(mean)
        } else {
            self.drop_prob
        };
        // Derandomization: neither too soon nor too late after the last drop.
        if self.drop_prob == 0.0 {
            self.accu_prob = 0.0;
        }
        self.accu_prob += p;
        if self.accu_prob < PROB_LOW {
            return false;
        }
        if self.accu_prob >= PROB_HIGH {
            return true;
        }
        self.stream.open01() <= p
    }

    /// The next packet to leave at `now` (PIE decides at enqueue: it is sent), or `None`.
    pub(crate) fn dequeue(&mut self, now: Nanos) -> Option<(Queued, Decision)> {
        self.advance(now);
        let q = self.queue.pop(&mut self.store, |q| q.len)?;
        self.drain_ns = self.drain_ns.saturating_sub(self.rate.transmit_ns(q.len));
        match self.estimator {
            Estimator::Timestamps => {
                self.qdelay = if self.queue.is_empty() {
                    0
                } else {
                    now.saturating_sub(q.enqueued_ns)
                };
            }
            Estimator::DequeueRate => self.measure(now, q.len),
            Estimator::ConfiguredRate => {}
        }
        Some((q, Decision::Send { mark: false }))
    }

    /// The dequeue-rate measurement after a packet of `len` bytes left at `now`.
    fn measure(&mut self, now: Nanos, len: u32) {
        let dq = &mut self.dq;
        if dq.in_measurement {
            dq.count += u64::from(len);
            if dq.count >= DQ_THRESHOLD {
                let time = now.saturating_sub(dq.start) as f64;
                // The weight is DQ_THRESHOLD / 2^16.
                let w = DQ_THRESHOLD as f64 / 65536.0;
                dq.avg_time = if dq.avg_time == 0.0 {
                    time
                } else {
                    time * w + dq.avg_time * (1.0 - w)
                };
                dq.in_measurement = false;
            }
        }
        if self.queue.bytes >= DQ_THRESHOLD && !dq.in_measurement {
            *dq = DqRate {
                in_measurement: true,
                start: now,
                count: 0,
                avg_time: dq.avg_time,
            };
        }
    }

    /// Takes the updates due by `now`, in order.
    fn advance(&mut self, now: Nanos) {
        while self.ticker.take(now).is_some() {
            if self.at_rest() {
                // Nothing changes any more until a packet comes.
                self.ticker.skip(now);
                break;
            }
            self.update();
        }
    }

    /// Whether an update would change nothing: an empty queue whose probability and
    /// allowance have run down.
    fn at_rest(&self) -> bool {
        self.queue.is_empty()
            && self.drop_prob == 0.0
            && self.qdelay == 0
            && self.qdelay_old == 0
            && self.burst_allowance == 0
    }

    /// The delay sample an update takes.
    fn current_qdelay(&self) -> Nanos {
        match self.estimator {
            Estimator::Timestamps => self.qdelay,
            Estimator::DequeueRate => {
                (self.queue.bytes as f64 * self.dq.avg_time / DQ_THRESHOLD as f64) as Nanos
            }
            Estimator::ConfiguredRate => self.drain_ns,
        }
    }

    /// The RFC's `calculate_drop_prob`, every `tupdate`.
    fn update(&mut self) {
        let qdelay = self.current_qdelay();
        self.qdelay = qdelay;
        let secs = |ns: Nanos| ns as f64 / 1e9;
        let (cur, old) = (secs(qdelay), secs(self.qdelay_old));
        let mut p = self.alpha * (cur - secs(self.target)) + self.beta * (cur - old);
        p /= scale(self.drop_prob, self.docsis);
        // Cap the step once the probability is high (RFC 8033, section 5.5).
        if self.drop_prob >= 0.1 && p > 0.02 {
            p = 0.02;
        }
        let mut prob = self.drop_prob + p;
        if self.docsis {
            if qdelay < 5 * MS && self.qdelay_old < 5 * MS {
                prob *= 0.98;
            } else if qdelay > 200 * MS {
                prob += 0.02;
            }
        } else if qdelay == 0 && self.qdelay_old == 0 {
            prob *= 0.98;
        }
        let max = if self.docsis {
            PROB_LOW * f64::from(DOCSIS_MEAN_PKTSIZE) / f64::from(DOCSIS_MIN_PKTSIZE)
        } else {
            1.0
        };
        self.drop_prob = prob.clamp(0.0, max);
        self.qdelay_old = qdelay;
        self.burst_allowance = self.burst_allowance.saturating_sub(self.tupdate);
    }
}

/// The divisor of an update's step at probability `prob`: small steps while the probability is
/// small, so the controller is gentle there (RFC 8033, section 4.2; DOCSIS-PIE goes on above
/// 10 %, RFC 8034).
fn scale(prob: f64, docsis: bool) -> f64 {
    const TABLE: [(f64, f64); 6] = [
        (0.000_001, 2048.0),
        (0.000_01, 512.0),
        (0.000_1, 128.0),
        (0.001, 32.0),
        (0.01, 8.0),
        (0.1, 2.0),
    ];
    if let Some((_, d)) = TABLE.iter().find(|(below, _)| prob < *below) {
        return *d;
    }
    match (docsis, prob) {
        (false, _) => 1.0,
        (true, p) if p < 1.0 => 0.5,
        (true, p) if p < 10.0 => 0.125,
        (true, _) => 0.031_25,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aqm::tests::rate;
    use crate::packet::Ecn;
    use crate::units::Rate;

    fn pie(cfg: &PieConfig, bits: u64) -> Pie {
        Pie::new(cfg, rate(bits), Stream::new(1, 2))
    }

    fn packet(seq: u64, len: u32, ecn: Ecn) -> Queued {
        Queued {
            seq,
            len,
            ecn,
            ..Queued::default()
        }
    }

    /// A standing queue of `n` packets of 1000 bytes in front of a link of `bits`/s: every
    /// packet that leaves is replaced at once, and an arrival PIE drops by the next, so the
    /// queueing delay stays `n` packets' serialization whatever PIE does and the drop
    /// probability follows the controller alone. Returns PIE's drops in `secs` seconds.
    fn standing(cfg: &PieConfig, bits: u64, n: u64, secs: u64) -> u64 {
        use super::super::{Bottleneck, Left};
        let mut b = Bottleneck::pie(rate(bits), cfg, Stream::new(1, 2));
        let (mut seq, mut drops) = (0, 0);
        let mut offer = |b: &mut Bottleneck, now: Nanos| loop {
            seq += 1;
            match b.enqueue(now, packet(seq, 1000, Ecn::NotEct)) {
                Ok(()) => break,
                Err(DropReason::Aqm) => drops += 1,
                Err(r) => panic!("{r}"),
            }
        };
        for _ in 0..n {
            offer(&mut b, 0);
        }
        while let Some(t) = b.next().filter(|t| *t < secs * 1_000_000_000) {
            match b.depart() {
                Some(Left::Sent { .. }) => offer(&mut b, t),
                other => panic!("{other:?}"),
            }
        }
        drops
    }

    /// The controller's relations on a deterministic standing queue (RFC 8033, section 4.2:
    /// the probability integrates `α·(delay − target)`): with 40 packets standing (32 ms at
    /// 10 Mbit/s) for 3 s, a larger target gives fewer drops, a slower link (the same packets
    /// wait longer) more, and a longer update interval fewer (the same step, less often).
    #[test]
    fn the_controller_drops_less_for_a_larger_target_or_interval_and_more_on_a_slower_link() {
        let base = PieConfig::default();
        let at = |cfg: &PieConfig, bits| standing(cfg, bits, 40, 3);
        let d = at(&base, 10_000_000);
        let larger_target = at(
            &PieConfig {
                target: Some(Time(25 * MS)),
                ..base
            },
            10_000_000,
        );
        let slower = at(&base, 8_000_000);
        let longer_update = at(
            &PieConfig {
                tupdate: Some(Time(30 * MS)),
                ..base
            },
            10_000_000,
        );
        assert!(d > 50, "{d}");
        assert!(
            larger_target * 3 < d * 2,
            "target 25 ms: {larger_target} vs {d}"
        );
        assert!(slower * 2 > d * 3, "8 Mbit/s: {slower} vs {d}");
        assert!(
            longer_update * 3 < d * 2,
            "tupdate 30 ms: {longer_update} vs {d}"
        );
        // Below target, nothing is ever dropped.
        assert_eq!(standing(&base, 10_000_000, 10, 3), 0);
    }

    /// The burst allowance (RFC 8033, section 4.4): from rest, a queue may build for
    /// `max_burst` (150 ms) before early drops start. With tc's largest gains (α = β = 2 Hz)
    /// the probability of a 2× overload reaches several percent within 100 ms, so without an
    /// allowance PIE drops before 150 ms; with it, the first PIE drop comes at 150 ms or after.
    #[test]
    fn the_burst_allowance_is_honoured() {
        use super::super::Bottleneck;
        // 1000-byte packets every 400 µs into 10 Mbit/s (800 µs each), for 1 s: the first
        // PIE drop's arrival time, if any.
        let first_drop = |cfg: &PieConfig| {
            let mut b = Bottleneck::pie(rate(10_000_000), cfg, Stream::new(1, 2));
            for i in 0..2500 {
                let now = i * 400_000;
                while b.next().is_some_and(|t| t <= now) {
                    b.depart();
                }
                if b.enqueue(now, packet(i, 1000, Ecn::NotEct)) == Err(DropReason::Aqm) {
                    return Some(now);
                }
            }
            None
        };
        let cfg = PieConfig {
            limit: 100_000,
            alpha: Some(32),
            beta: Some(32),
            ..PieConfig::default()
        };
        let first = first_drop(&cfg).expect("an overload is dropped in the end");
        let none = PieConfig {
            max_burst: Some(Time(0)),
            ..cfg
        };
        let early = first_drop(&none).expect("an overload is dropped in the end");
        assert!(early < 150 * MS, "{early}");
        assert!((150 * MS..200 * MS).contains(&first), "{first}");
    }

    /// Known answers of `calculate_drop_prob`, worked out from RFC 8033's pseudocode with tc's
    /// α = 2/16 Hz and β = 20/16 Hz and a 15 ms target. From rest, a delay sample of 30 ms
    /// gives p = 0.125 × 0.015 + 1.25 × 0.030 = 0.039375, divided by 2048 (the probability is
    /// below 10⁻⁶): 1.922607421875e-5. A second sample of 30 ms adds 0.125 × 0.015 = 0.001875
    /// divided by 128 (the probability is now below 10⁻⁴): 1.46484375e-5. At a probability
    /// of 0.5, a step of +0.04 is capped to +0.02; a step down is not capped; an empty queue
    /// twice in a row decays it by 2 % (after the step: 0.5 − 0.001875, × 0.98).
    #[test]
    fn the_update_follows_the_rfc_pseudocode() {
        let mut p = pie(&PieConfig::default(), 10_000_000);
        p.qdelay = 30 * MS;
        p.update();
        assert!(
            (p.drop_prob - 0.039_375 / 2048.0).abs() < 1e-15,
            "{}",
            p.drop_prob
        );
        p.qdelay = 30 * MS;
        p.update();
        let second = 0.039_375 / 2048.0 + 0.001_875 / 128.0;
        assert!((p.drop_prob - second).abs() < 1e-15, "{}", p.drop_prob);
        // High probability: the step is capped at 2 %.
        p.drop_prob = 0.5;
        p.qdelay_old = 30 * MS;
        p.qdelay = 60 * MS;
        p.update();
        assert!((p.drop_prob - 0.52).abs() < 1e-12, "{}", p.drop_prob);
        // Delay falling to 0: a large step down, uncapped.
        p.qdelay = 0;
        p.update();
        let down = 0.52 + 0.125 * -0.015 + 1.25 * -0.060;
        assert!((p.drop_prob - down).abs() < 1e-12, "{}", p.drop_prob);
        // Empty twice: the step, then the 2 % decay.
        p.qdelay = 0;
        p.update();
        let decayed = (down - 0.001_875) * 0.98;
        assert!((p.drop_prob - decayed).abs() < 1e-12, "{}", p.drop_prob);
        // Each update spends one tupdate of the burst allowance: 150 ms is 10 updates.
        assert_eq!(p.burst_allowance, 150 * MS - 5 * 15 * MS);
    }

    /// DOCSIS-PIE's known answers (RFC 8034): α = 0.25 Hz, β = 2.5 Hz, target 10 ms; the
    /// delay is predicted from the configured rate (100 000 bytes at 10 Mbit/s: 80 ms); the
    /// probability grows by a further 2 % per update over 200 ms and may exceed 1 (it is for
    /// a 1024-byte packet: 13.6 at most); above 1 the step is divided by 0.125.
    #[test]
    fn docsis_pie_predicts_the_delay_from_the_rate() {
        let cfg = PieConfig {
            docsis: true,
            limit: 10_000,
            ..PieConfig::default()
        };
        let mut p = pie(&cfg, 10_000_000);
        for i in 0..100 {
            p.enqueue(0, packet(i, 1000, Ecn::NotEct)).unwrap();
        }
        assert_eq!(p.current_qdelay(), 80 * MS);
        p.update();
        let first = (0.25 * 0.070 + 2.5 * 0.080) / 2048.0;
        assert!((p.drop_prob - first).abs() < 1e-15, "{}", p.drop_prob);
        p.drop_prob = 2.0;
        p.qdelay_old = 300 * MS;
        p.drain_ns = 290 * MS;
        p.update();
        // 0.25 × 0.28 + 2.5 × −0.01 = 0.045, ÷ 0.125 = 0.36, capped at 0.02; +0.02 over 200 ms.
        assert!((p.drop_prob - 2.04).abs() < 1e-12, "{}", p.drop_prob);
        p.drop_prob = 13.59;
        p.update();
        assert_eq!(p.drop_prob, 0.85 * 1024.0 / 64.0);
    }

    /// The RFC 8034 packet-size scaling: at the same probability a 64-byte packet is dropped
    /// 16 times less often than a 1024-byte one, and derandomization spaces the drops of a
    /// packet size between 0.85/p and 8.5/p packets.
    #[test]
    fn docsis_pie_scales_the_probability_by_packet_size() {
        let cfg = PieConfig {
            docsis: true,
            limit: 200_000,
            ..PieConfig::default()
        };
        let mut counts = Vec::new();
        for len in [1024, 64, 20] {
            let mut p = pie(&cfg, 10_000_000);
            p.burst_allowance = 0;
            p.drop_prob = 0.08;
            p.qdelay_old = 20 * MS;
            // A standing queue well over two mean packets; no update is ever due (times stay 0).
            for i in 0..10 {
                let _ = p
                    .queue
                    .push(&mut p.store, packet(i, 1500, Ecn::NotEct), 1500);
            }
            let mut drops = Vec::new();
            for i in 0..100_000 {
                if p.enqueue(0, packet(i, len, Ecn::NotEct)).is_err() {
                    drops.push(i);
                }
            }
            let gaps: Vec<u64> = drops.windows(2).map(|w| w[1] - w[0]).collect();
            let per = 0.08 * f64::from(len.max(64)) / 1024.0;
            // Float sums may land a hair either side of the bounds: one packet of slack.
            assert!(
                gaps.iter().all(|&g| g as f64 >= (0.85 / per).floor()),
                "{len}"
            );
            assert!(
                gaps.iter().all(|&g| g as f64 <= (8.5 / per).ceil() + 1.0),
                "{len}"
            );
            counts.push(drops.len() as f64);
        }
        let ratio = counts[0] / counts[1];
        assert!((ratio - 16.0).abs() < 2.0, "{counts:?}");
        // Packets under 64 bytes count as 64.
        assert!(
            (counts[1] - counts[2]).abs() <= counts[1] * 0.2,
            "{counts:?}"
        );
    }

    /// With `ecn`, an ECN-capable packet PIE would drop is marked while the probability is
    /// under 10 %, and dropped above it (RFC 8033, section 5.1); Not-ECT packets are dropped.
    #[test]
    fn ecn_marks_below_ten_percent_and_drops_above() {
        for (prob, ect_kept) in [(0.05, true), (0.3, false)] {
            let cfg = PieConfig {
                ecn: true,
                limit: 100_000,
                ..PieConfig::default()
            };
            let mut p = pie(&cfg, 10_000_000);
            for i in 0..10 {
                p.enqueue(0, packet(i, 1500, Ecn::NotEct)).unwrap();
            }
            p.burst_allowance = 0;
            p.qdelay_old = 30 * MS;
            p.drop_prob = prob;
            let (mut marked, mut ect_dropped, mut plain_dropped) = (0, 0, 0);
            for i in 0..4000 {
                let ecn = if i % 2 == 0 { Ecn::Ect0 } else { Ecn::NotEct };
                match p.enqueue(0, packet(i, 1500, ecn)) {
                    Ok(()) => {}
                    Err(_) if ecn == Ecn::NotEct => plain_dropped += 1,
                    Err(_) => ect_dropped += 1,
                }
            }
            while let Some((q, _)) = p.dequeue(0) {
                marked += q.marked as u32;
                assert!(!q.marked || q.ecn.is_capable());
            }
            assert!(plain_dropped > 0, "{prob}");
            if ect_kept {
                assert!(
                    marked > 0 && ect_dropped == 0,
                    "{prob}: {marked} {ect_dropped}"
                );
            } else {
                assert!(
                    marked == 0 && ect_dropped > 0,
                    "{prob}: {marked} {ect_dropped}"
                );
            }
        }
    }

    /// Linux keeps the probability in units of 2⁻⁵⁶ and delays in 64 ns ticks, and scales tc's
    /// α (sixteenths of a hertz) into them, truncating; one update from rest at a 30 ms sample
    /// then comes out a few millionths smaller than rtemu's binary64 (3.5 × 10⁻⁶).
    #[test]
    fn linux_fixed_point_changes_an_update_by_a_few_millionths() {
        const MAX_PROB: u64 = u64::MAX >> 8;
        const TICKS_PER_SEC: u64 = 1_000_000_000 >> 6;
        let (alpha, beta) = (2u64, 20u64);
        // Linux scales α and β to probability units per tick, then divides them (÷2, then ÷4
        // per decade) while the probability is small: by 2048 below 10⁻⁶.
        let a = (alpha * (MAX_PROB / TICKS_PER_SEC)) >> 4 >> 1 >> 10;
        let b = (beta * (MAX_PROB / TICKS_PER_SEC)) >> 4 >> 1 >> 10;
        let (qdelay, target) = ((30 * MS) >> 6, (15 * MS) >> 6);
        let delta = a * (qdelay - target) + b * qdelay;
        let linux = delta as f64 / MAX_PROB as f64;
        let mut p = pie(&PieConfig::default(), 10_000_000);
        p.qdelay = 30 * MS;
        p.update();
        let rel = (p.drop_prob - linux) / p.drop_prob;
        assert!(
            (0.0..1e-5).contains(&rel),
            "{linux} vs {}: {rel}",
            p.drop_prob
        );
    }

    /// The dequeue-rate estimator (RFC 8033, appendix B) measures the time to dequeue 16 KiB:
    /// 1000-byte packets leaving every 0.8 ms (10 Mbit/s) give 17 packets, 13.6 ms, and a
    /// queue of 100 000 bytes reads as 100 000 × 13.6 ms / 16 384 = 83.0 ms.
    #[test]
    fn the_dequeue_rate_estimator_reads_the_delay_by_littles_law() {
        let cfg = PieConfig {
            dq_rate_estimator: true,
            ..PieConfig::default()
        };
        let mut p = pie(&cfg, 10_000_000);
        for i in 0..200 {
            p.enqueue(0, packet(i, 1000, Ecn::NotEct)).unwrap();
        }
        assert_eq!(p.current_qdelay(), 0, "no estimate before a measurement");
        for i in 0..100u64 {
            p.dequeue(i * 800_000).unwrap();
        }
        assert_eq!(p.backlog(), (100, 100_000));
        let expected = 100_000.0 * 13.6e6 / 16_384.0;
        let got = p.current_qdelay() as f64;
        assert!((got - expected).abs() < 1e3, "{got} vs {expected}");
    }

    /// A rate change under PIE and DOCSIS-PIE with a standing queue and a probability above
    /// zero: the controller's state is as it was, the drain time DOCSIS-PIE predicts the delay
    /// from is the queue's at the new rate, and the packets sent after the one on the wire take
    /// the new rate's time.
    #[test]
    fn a_rate_change_keeps_the_controller_and_recomputes_the_drain_time() {
        use super::super::{Bottleneck, Discipline, Left};
        for docsis in [false, true] {
            let cfg = PieConfig {
                docsis,
                ..PieConfig::default()
            };
            let mut b = Bottleneck::pie(rate(10_000_000), &cfg, Stream::new(1, 2));
            let pie = |b: &Bottleneck| match &b.discipline {
                Discipline::Pie(p) => p.clone(),
                _ => unreachable!(),
            };
            let controller = |p: &Pie| {
                format!(
                    "{:?}",
                    (
                        p.drop_prob,
                        p.accu_prob,
                        p.qdelay,
                        p.qdelay_old,
                        p.burst_allowance,
                        &p.dq,
                        p.ticker.next,
                        p.queue.len,
                        p.queue.bytes
                    )
                )
            };
            let mut seq = 0;
            // 40 packets standing (32 ms at 10 Mbit/s), topped up until PIE has a probability.
            while b.backlog().0 < 40 {
                b.enqueue(0, packet(seq, 1000, Ecn::NotEct)).unwrap();
                seq += 1;
            }
            while pie(&b).drop_prob < 0.01 {
                let at = b.next().unwrap();
                assert!(matches!(b.depart(), Some(Left::Sent { .. })));
                while b.enqueue(at, packet(seq, 1000, Ecn::NotEct)).is_err() {
                    seq += 1;
                }
                seq += 1;
            }
            let before = pie(&b);
            b.set_rate(Rate(5_000_000));
            let after = pie(&b);
            assert_eq!(controller(&after), controller(&before));
            // 1000 bytes take 0.8 ms at 10 Mbit/s and 1.6 ms at 5.
            assert_eq!(before.drain_ns, u64::from(before.queue.len) * 800_000);
            assert_eq!(after.drain_ns, u64::from(after.queue.len) * 1_600_000);
            let first = b.next().unwrap();
            assert!(
                matches!(b.depart(), Some(Left::Sent { finish, .. }) if finish == first + 1_600_000)
            );
        }
    }
}
