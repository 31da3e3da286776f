//! DualPI2, the coupled dual-queue AQM of L4S (RFC 9332, appendix A): a low-latency queue
//! (L) for Scalable traffic and a classic queue (C), one link.
//!
//! * **Classification** (RFC 9331): ECT(1) and CE packets go to L, Not-ECT and ECT(0) to C.
//! * **The base PI controller**, every `tupdate`, from the classic queue's delay (the sojourn
//!   time of its head, 0 when empty): `p' += α·(qdelay − target) + β·(qdelay − qdelay_old)`,
//!   kept within 0 and 1/k. The classic queue drops (or, for ECT(0), marks) with `p_C = p'²`,
//!   the square that makes Reno-like flows and Scalable ones share fairly; L marks with the
//!   coupled probability `p_CL = k·p'`.
//! * **L's native AQM** is a step: an L packet that waited `step_thresh` or more is marked
//!   (if L held more than `min_qlen_step` packets), whatever the coupled probability.
//! * **The scheduler** serves L first but gives C at least `c_protection` of the bytes while
//!   both are backlogged (a weighted round robin by credit: serving L earns C credit in
//!   proportion to `c_protection`, serving C spends it in proportion to the rest).
//! * Both queues share one `limit` in packets; an arrival over it is dropped (`queue-full`).
//!
//! Decisions are taken at dequeue, as CoDel's, with draws from a stream of the link's own;
//! the update timer starts with the first packet ([`super::Ticker`]).
//!
//! Not modelled: the overload rule (L4S packets dropped rather than marked once `p_C` is
//! saturated: here an unresponsive L4S flow meets the tail), `memlimit`, GSO splitting and
//! tc's classification by other fields than ECN.

use serde::{Deserialize, Serialize};

use super::codel::Decision;
use super::store::{Fifo, Store};
use super::{Queued, Ticker};
use crate::packet::{Ecn, Nanos};
use crate::rng::Stream;
use crate::units::{Percent, Time};

/// `dualpi2 [limit PACKETS] [target TIME] [tupdate TIME] [alpha HZ] [beta HZ]
/// [coupling_factor K] [step_thresh TIME] [min_qlen_step PACKETS] [c_protection PERCENT]`,
/// tc's words and defaults.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DualPi2Config {
    /// Most packets queued in both queues; more are dropped at the tail.
    pub limit: u32,
    /// The classic queue's delay target.
    pub target: Time,
    /// How often the base probability is updated.
    pub tupdate: Time,
    /// The integral gain, hertz.
    pub alpha: f64,
    /// The proportional gain, hertz.
    pub beta: f64,
    /// k: the L4S probability is k times the base one, the classic one its square.
    pub coupling_factor: u32,
    /// L4S packets that waited this long are marked.
    pub step_thresh: Time,
    /// No step mark while L holds this many packets or fewer.
    pub min_qlen_step: u32,
    /// The share of the link the classic queue keeps while both are backlogged.
    pub c_protection: Percent,
}

/// tc's `dualpi2` defaults.
impl Default for DualPi2Config {
    fn default() -> Self {
        DualPi2Config {
            limit: 10_000,
            target: Time(15 * MS),
            tupdate: Time(16 * MS),
            alpha: 0.16,
            beta: 3.2,
            coupling_factor: 2,
            step_thresh: Time(MS),
            min_qlen_step: 0,
            c_protection: Percent(0.1),
        }
    }
}

const MS: u64 = 1_000_000;

/// Which of the two queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Which {
    L,
    C,
}

/// The two queues under DualPI2.
#[derive(Debug, Clone)]
pub(crate) struct DualPi2 {
    limit: u32,
    target: Nanos,
    alpha: f64,
    beta: f64,
    k: f64,
    step: Nanos,
    min_qlen_step: u32,
    /// The scheduler's weights, C's and L's, in hundredths.
    weight_c: i64,
    weight_l: i64,
    /// Positive: C is owed bytes and goes next.
    credit: i64,
    stream: Stream,
    store: Store<Queued>,
    l: Fifo,
    c: Fifo,
    /// The base probability p'.
    base: f64,
    qdelay_old: Nanos,
    ticker: Ticker,
}

impl DualPi2 {
    /// The queues for `cfg`, drawing from `stream`.
    pub(crate) fn new(cfg: &DualPi2Config, stream: Stream) -> Self {
        let weight_c = (cfg.c_protection.0 * 100.0).round() as i64;
        DualPi2 {
            limit: cfg.limit,
            target: cfg.target.0,
            alpha: cfg.alpha,
            beta: cfg.beta,
            k: f64::from(cfg.coupling_factor),
            step: cfg.step_thresh.0,
            min_qlen_step: cfg.min_qlen_step,
            weight_c,
            weight_l: 100 - weight_c,
            credit: 0,
            stream,
            store: Store::new(cfg.limit as usize),
            l: Fifo::default(),
            c: Fifo::default(),
            base: 0.0,
            qdelay_old: 0,
            ticker: Ticker::new(cfg.tupdate.0),
        }
    }

    /// Packets and bytes queued in both.
    pub(crate) fn backlog(&self) -> (u64, u64) {
        (
            u64::from(self.l.len + self.c.len),
            self.l.bytes + self.c.bytes,
        )
    }

    /// Whether both queues are empty.
    pub(crate) fn is_empty(&self) -> bool {
        self.l.is_empty() && self.c.is_empty()
    }

    /// The classic queue's drop (or mark) probability, `p'²`.
    pub(crate) fn classic_probability(&self) -> f64 {
        self.base * self.base
    }

    /// The L queue's coupled marking probability, `k·p'`.
    pub(crate) fn coupled_probability(&self) -> f64 {
        self.k * self.base
    }

    /// Queues `q` (arriving at `now`) by its ECN field, or `Err` when both hold `limit`.
    pub(crate) fn enqueue(&mut self, now: Nanos, q: Queued) -> Result<(), ()> {
        self.advance(now);
        self.ticker.start(now);
        if self.l.len + self.c.len >= self.limit {
            return Err(());
        }
        let queue = match q.ecn {
            Ecn::Ect1 | Ecn::Ce => &mut self.l,
            Ecn::NotEct | Ecn::Ect0 => &mut self.c,
        };
        queue
            .push(&mut self.store, q, q.len)
            .map(|_| ())
            .map_err(|_| ())
    }

    /// The next packet to leave at `now`, and whether it is sent (marked or not) or dropped.
    pub(crate) fn dequeue(&mut self, now: Nanos) -> Option<(Queued, Decision)> {
        self.advance(now);
        let which = match (self.l.is_empty(), self.c.is_empty()) {
            (true, true) => return None,
            (false, true) => Which::L,
            (true, false) => Which::C,
            (false, false) if self.credit <= 0 => Which::L,
            (false, false) => Which::C,
        };
        Some(match which {
            Which::L => {
                let held = self.l.len;
                let q = self.l.pop(&mut self.store, |q| q.len)?;
                self.charge(Which::L, q.len);
                let waited = now.saturating_sub(q.enqueued_ns);
                let step = waited >= self.step && held > self.min_qlen_step;
                let mark = step || self.draw(self.coupled_probability());
                (q, Decision::Send { mark })
            }
            Which::C => {
                let q = self.c.pop(&mut self.store, |q| q.len)?;
                self.charge(Which::C, q.len);
                if !self.draw(self.classic_probability()) {
                    (q, Decision::Send { mark: false })
                } else if q.ecn.is_capable() {
                    (q, Decision::Send { mark: true })
                } else {
                    (q, Decision::Drop)
                }
            }
        })
    }

    /// The scheduler's credit after `which` sent `len` bytes: owed bytes accrue only while the
    /// other queue waits.
    fn charge(&mut self, which: Which, len: u32) {
        let len = i64::from(len);
        self.credit = match which {
            Which::L if self.c.is_empty() => 0,
            Which::L => self.credit + self.weight_c * len,
            Which::C if self.l.is_empty() => 0,
            Which::C => self.credit - self.weight_l * len,
        };
    }

    /// True with probability `p` (no draw when `p` is 0).
    fn draw(&mut self, p: f64) -> bool {
        p > 0.0 && self.stream.open01() < p
    }

    /// Takes the updates due by `now`, in order.
    fn advance(&mut self, now: Nanos) {
        while let Some(at) = self.ticker.take(now) {
            if self.is_empty() && self.base == 0.0 && self.qdelay_old == 0 {
                self.ticker.skip(now);
                break;
            }
            self.update(at);
        }
    }

    /// The PI update at `at` (RFC 9332, `dualpi2_update`).
    fn update(&mut self, at: Nanos) {
        let qdelay = self
            .c
            .peek(&self.store)
            .map_or(0, |q| at.saturating_sub(q.enqueued_ns));
        let secs = |ns: Nanos| ns as f64 / 1e9;
        let delta = self.alpha * (secs(qdelay) - secs(self.target))
            + self.beta * (secs(qdelay) - secs(self.qdelay_old));
        self.base = (self.base + delta).clamp(0.0, 1.0 / self.k);
        self.qdelay_old = qdelay;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fate::DropReason;
    use crate::rate::RateConfig;
    use crate::units::Rate;

    fn packet(seq: u64, len: u32, ecn: Ecn, at: Nanos) -> Queued {
        Queued {
            seq,
            len,
            ecn,
            enqueued_ns: at,
            ..Queued::default()
        }
    }

    fn dualpi2(cfg: &DualPi2Config) -> DualPi2 {
        DualPi2::new(cfg, Stream::new(1, 2))
    }

    /// Known answers of the PI update (RFC 9332, tc's α = 0.16 Hz, β = 3.2 Hz, target 15 ms):
    /// from rest, a classic head that waited 30 ms gives p' = 0.16 × 0.015 + 3.2 × 0.030 =
    /// 0.0984, so the classic probability is 0.0984² and the coupled one 2 × 0.0984; the same
    /// delay again adds 0.16 × 0.015; the probability stays within 0 and 1/k.
    #[test]
    fn the_update_follows_the_rfc_pseudocode() {
        let mut d = dualpi2(&DualPi2Config::default());
        d.enqueue(0, packet(0, 1000, Ecn::NotEct, 0)).unwrap();
        d.update(30 * MS);
        assert!((d.base - 0.0984).abs() < 1e-12, "{}", d.base);
        assert!((d.classic_probability() - 0.0984 * 0.0984).abs() < 1e-12);
        assert!((d.coupled_probability() - 0.1968).abs() < 1e-12);
        d.update(30 * MS);
        assert!((d.base - 0.1008).abs() < 1e-12, "{}", d.base);
        d.update(2_000 * MS);
        assert_eq!(d.base, 0.5);
        d.c.pop(&mut d.store, |q| q.len);
        d.update(2_000 * MS);
        d.update(2_000 * MS);
        assert_eq!(d.base, 0.0);
    }

    /// ECT(1) and CE go to L, Not-ECT and ECT(0) to C; with both backlogged by 1000-byte
    /// packets, C gets its `c_protection` share of the departures (10 %, then 30 %), and L
    /// the rest, L first.
    #[test]
    fn l4s_goes_first_and_the_classic_queue_keeps_its_share() {
        for (protection, c_share) in [(0.1, 100), (0.3, 300)] {
            let cfg = DualPi2Config {
                c_protection: Percent(protection),
                ..DualPi2Config::default()
            };
            let mut d = dualpi2(&cfg);
            for i in 0..2000 {
                let ecn = [Ecn::Ect1, Ecn::Ce, Ecn::NotEct, Ecn::Ect0][i % 4];
                d.enqueue(0, packet(i as u64, 1000, ecn, 0)).unwrap();
            }
            assert_eq!((d.l.len, d.c.len), (1000, 1000));
            let mut from_c = 0;
            for n in 0..1000 {
                let (q, decision) = d.dequeue(0).unwrap();
                assert_eq!(decision, Decision::Send { mark: false });
                if n == 0 {
                    assert!(matches!(q.ecn, Ecn::Ect1 | Ecn::Ce));
                }
                from_c += u32::from(!matches!(q.ecn, Ecn::Ect1 | Ecn::Ce));
            }
            assert!(from_c.abs_diff(c_share) <= 1, "{protection}: {from_c}");
        }
    }

    /// L's step: an L packet that waited `step_thresh` (1 ms) or more is marked, one that
    /// waited less is not (the base probability is 0 here); with `min_qlen_step 1`, not while
    /// it was alone in L.
    #[test]
    fn l4s_packets_that_waited_the_step_threshold_are_marked() {
        let mut d = dualpi2(&DualPi2Config::default());
        for (i, at) in [0, 100_000].into_iter().enumerate() {
            d.enqueue(at, packet(i as u64, 100, Ecn::Ect1, at)).unwrap();
        }
        assert_eq!(
            d.dequeue(1_050_000).unwrap().1,
            Decision::Send { mark: true }
        );
        assert_eq!(
            d.dequeue(1_050_000).unwrap().1,
            Decision::Send { mark: false }
        );
        let mut alone = dualpi2(&DualPi2Config {
            min_qlen_step: 1,
            ..DualPi2Config::default()
        });
        alone.enqueue(0, packet(0, 100, Ecn::Ect1, 0)).unwrap();
        assert_eq!(
            alone.dequeue(5 * MS).unwrap().1,
            Decision::Send { mark: false }
        );
    }

    /// The coupling in steady state (RFC 9332, section 2.4): an unresponsive classic flow over
    /// the link and a light L4S flow. The classic queue's drop fraction is the square of the
    /// L4S mark fraction over k: p_C ≈ (p_L / k)², for k = 2 and 3, within 5 % (1 % when
    /// written: p_C 0.200 against 0.198, 0.0910 against 0.0905). The L4S packets wait at most
    /// one classic packet's serialization (0.8 ms), under the step, so all their marks are
    /// coupled ones.
    #[test]
    fn classic_probability_is_the_square_of_the_l4s_one_over_k() {
        use super::super::{Bottleneck, Left};
        for (k, classic_pps) in [(2, 1500), (3, 1320)] {
            let cfg = DualPi2Config {
                coupling_factor: k,
                ..DualPi2Config::default()
            };
            let rate = RateConfig {
                rate: Rate(10_000_000),
                packet_overhead: 0,
                cell_size: 0,
                cell_overhead: 0,
            };
            let mut b = Bottleneck::dualpi2(rate, &cfg, Stream::new(3, 4));
            // Classic: 1000 bytes, Not-ECT; L4S: 100 bytes at 500 pps (0.4 Mbit/s).
            let (c_gap, l_gap) = (1_000_000_000 / classic_pps, 2_000_000);
            let (mut next_c, mut next_l, mut seq) = (0u64, 0u64, 0u64);
            let [mut c_in, mut c_dropped, mut l_out, mut l_marked] = [0u64; 4];
            let warmup = 20_000 * MS;
            while next_c.min(next_l) < 200_000 * MS {
                let now = next_c.min(next_l);
                while let Some(t) = b.next().filter(|t| *t <= now) {
                    let counted = t >= warmup;
                    match b.depart() {
                        Some(Left::Sent { packet, mark, .. }) if packet.ecn == Ecn::Ect1 => {
                            l_out += u64::from(counted);
                            l_marked += u64::from(counted && mark);
                        }
                        Some(Left::Dropped { packet, reason }) => {
                            assert_eq!((packet.ecn, reason), (Ecn::NotEct, DropReason::Aqm));
                            c_dropped += u64::from(counted);
                        }
                        _ => {}
                    }
                }
                seq += 1;
                let (len, ecn) = if now == next_l {
                    next_l += l_gap;
                    (100, Ecn::Ect1)
                } else {
                    next_c += c_gap;
                    c_in += u64::from(now >= warmup);
                    (1000, Ecn::NotEct)
                };
                b.enqueue(now, packet(seq, len, ecn, now)).unwrap();
            }
            let p_c = c_dropped as f64 / c_in as f64;
            let p_l = l_marked as f64 / l_out as f64;
            let coupled = (p_l / f64::from(k)).powi(2);
            assert!(p_c > 0.05, "k {k}: {p_c}");
            assert!(
                (p_c / coupled - 1.0).abs() < 0.05,
                "k {k}: p_C {p_c}, p_L {p_l}"
            );
        }
    }
}
