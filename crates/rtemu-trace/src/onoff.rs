//! Self-similar delay traces of unlimited length: the queueing delay behind superposed ON/OFF
//! sources with heavy-tailed periods (Willinger, Taqqu, Sherman & Wilson 1997).
//!
//! # Model
//!
//! `sources` independent sources alternate between ON, sending at `source_rate_bps`, and OFF,
//! silent. ON and OFF periods are Pareto with shape `alpha` (1 < α < 2: finite mean, infinite
//! variance) and the given means. Their superposition is asymptotically self-similar with
//! `H = (3 − α)/2`, at every time scale: unlike block-wise fGn, there is no horizon.
//!
//! The aggregate feeds a fluid drop-tail queue served at `link_rate_bps` with room for
//! `buffer_bytes`. Time advances in steps of `interval_ns`; in each step the sources' exact
//! ON time gives the bytes offered, and the backlog follows Lindley's recursion
//! `b ← min(buffer, max(0, b + arrivals − rate·Δ))`. At the end of each step one probe packet
//! of `probe_bytes` arrives: it is dropped if it does not fit, and otherwise its record is
//! `pass (base + b/rate)`. So each record is the fate a packet would meet behind such traffic,
//! one per `interval_ns`.
//!
//! State is one (phase, time left) pair per source: constant memory for any length. The
//! sources start in their stationary ON probability but with fresh (not residual) periods; the
//! first few mean periods are a warm-up.

use rand_xoshiro::rand_core::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::action::Action;
use crate::fgn::GenError;

/// Parameters of the ON/OFF generator; see the [module docs](self). They serialise as a
/// trace's summary states them.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct OnOffConfig {
    /// Number of sources (at least 1).
    pub sources: u32,
    /// Pareto shape of ON and OFF periods, in (1, 2).
    pub alpha: f64,
    /// Mean ON period, ns.
    pub mean_on_ns: f64,
    /// Mean OFF period, ns.
    pub mean_off_ns: f64,
    /// Each source's rate while ON, bit/s.
    pub source_rate_bps: f64,
    /// The bottleneck's service rate, bit/s.
    pub link_rate_bps: f64,
    /// Queue capacity, bytes.
    pub buffer_bytes: f64,
    /// Size of the probe packet whose fate each record gives, bytes.
    pub probe_bytes: f64,
    /// Time between records, ns.
    pub interval_ns: u64,
    /// Delay added to every delivered probe (propagation), ns.
    pub base_delay_ns: u64,
    /// Delays are rounded to multiples of this, ns: how records are written, not part of the
    /// model, so not in its summary.
    #[serde(skip)]
    pub resolution_ns: u64,
}

impl OnOffConfig {
    /// The Hurst parameter the model tends to, `(3 − α)/2`.
    pub fn hurst(&self) -> f64 {
        (3.0 - self.alpha) / 2.0
    }

    /// Mean offered load as a fraction of the link rate.
    pub fn load(&self) -> f64 {
        let on = self.mean_on_ns / (self.mean_on_ns + self.mean_off_ns);
        f64::from(self.sources) * self.source_rate_bps * on / self.link_rate_bps
    }

    fn validate(&self) -> Result<(), GenError> {
        let positive = [
            ("mean ON period", self.mean_on_ns),
            ("mean OFF period", self.mean_off_ns),
            ("source rate", self.source_rate_bps),
            ("link rate", self.link_rate_bps),
            ("buffer", self.buffer_bytes),
            ("interval", self.interval_ns as f64),
        ];
        for (name, value) in positive {
            if !(value.is_finite() && value > 0.0) {
                return Err(GenError::Parameter {
                    name,
                    value,
                    valid: "give a finite value above 0",
                });
            }
        }
        if !(self.probe_bytes.is_finite() && self.probe_bytes >= 0.0) {
            return Err(GenError::Parameter {
                name: "probe size",
                value: self.probe_bytes,
                valid: "give a finite size of 0 bytes or more",
            });
        }
        if !(self.alpha > 1.0 && self.alpha < 2.0) {
            return Err(GenError::Parameter {
                name: "alpha",
                value: self.alpha,
                valid: "give 1 < alpha < 2",
            });
        }
        if self.sources == 0 {
            return Err(GenError::Parameter {
                name: "sources",
                value: 0.0,
                valid: "give at least 1",
            });
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy)]
struct Source {
    on: bool,
    left_ns: f64,
}

/// The generator: one [`Action`] per interval.
#[derive(Debug)]
pub struct OnOffDelays {
    cfg: OnOffConfig,
    sources: Vec<Source>,
    rng: Xoshiro256PlusPlus,
    backlog_bytes: f64,
    last_arrivals: f64,
    dropped: u64,
}

impl OnOffDelays {
    /// A generator for `cfg`, seeded by `seed`.
    pub fn new(cfg: OnOffConfig, seed: u64) -> Result<Self, GenError> {
        cfg.validate()?;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let p_on = cfg.mean_on_ns / (cfg.mean_on_ns + cfg.mean_off_ns);
        let sources = (0..cfg.sources)
            .map(|_| {
                let on = uniform(&mut rng) < p_on;
                let mean = if on { cfg.mean_on_ns } else { cfg.mean_off_ns };
                Source {
                    on,
                    left_ns: pareto(&mut rng, cfg.alpha, mean),
                }
            })
            .collect();
        Ok(OnOffDelays {
            cfg,
            sources,
            rng,
            backlog_bytes: 0.0,
            last_arrivals: 0.0,
            dropped: 0,
        })
    }

    /// The parameters it runs with.
    pub fn config(&self) -> &OnOffConfig {
        &self.cfg
    }

    /// The next record: the fate of the probe at the end of the next interval.
    pub fn next_action(&mut self) -> Action {
        let dt = self.cfg.interval_ns as f64;
        let bytes_per_ns = self.cfg.source_rate_bps / 8e9;
        let mut arrivals = 0.0;
        for s in &mut self.sources {
            let mut left = dt;
            while left > 0.0 {
                let step = s.left_ns.min(left);
                if s.on {
                    arrivals += step * bytes_per_ns;
                }
                s.left_ns -= step;
                left -= step;
                if s.left_ns <= 0.0 {
                    s.on = !s.on;
                    let mean = if s.on {
                        self.cfg.mean_on_ns
                    } else {
                        self.cfg.mean_off_ns
                    };
                    s.left_ns = pareto(&mut self.rng, self.cfg.alpha, mean);
                }
            }
        }
        self.last_arrivals = arrivals;
        let service = self.cfg.link_rate_bps / 8e9 * dt;
        self.backlog_bytes =
            (self.backlog_bytes + arrivals - service).clamp(0.0, self.cfg.buffer_bytes);
        if self.backlog_bytes + self.cfg.probe_bytes > self.cfg.buffer_bytes {
            self.dropped += 1;
            return Action::Drop;
        }
        let queue_ns = self.backlog_bytes * 8e9 / self.cfg.link_rate_bps;
        let r = self.cfg.resolution_ns.max(1) as f64;
        let delay = ((self.cfg.base_delay_ns as f64 + queue_ns) / r).round() * r;
        Action::Pass {
            delay_ns: delay as u64,
        }
    }

    /// Bytes the sources offered in the last interval.
    pub fn last_arrivals(&self) -> f64 {
        self.last_arrivals
    }

    /// Probes dropped so far because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

/// Uniform in (0, 1].
fn uniform(rng: &mut Xoshiro256PlusPlus) -> f64 {
    use rand::Rng as _;
    ((rng.next_u64() >> 11) + 1) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Pareto with shape `alpha` and the given mean: scale `mean(α−1)/α`, by inversion.
fn pareto(rng: &mut Xoshiro256PlusPlus, alpha: f64, mean: f64) -> f64 {
    let scale = mean * (alpha - 1.0) / alpha;
    scale * uniform(rng).powf(-1.0 / alpha)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::aggregated_variance;

    fn config() -> OnOffConfig {
        OnOffConfig {
            sources: 50,
            alpha: 1.4,
            mean_on_ns: 50e6,
            mean_off_ns: 50e6,
            source_rate_bps: 1e6,
            link_rate_bps: 40e6,
            buffer_bytes: 1e9,
            probe_bytes: 0.0,
            interval_ns: 1_000_000,
            base_delay_ns: 10_000_000,
            resolution_ns: 1_000,
        }
    }

    #[test]
    fn bad_parameters_are_refused() {
        let bad = |f: fn(&mut OnOffConfig)| {
            let mut c = config();
            f(&mut c);
            OnOffDelays::new(c, 1).is_err()
        };
        assert!(bad(|c| c.alpha = 2.0));
        assert!(bad(|c| c.alpha = 1.0));
        assert!(bad(|c| c.sources = 0));
        assert!(bad(|c| c.link_rate_bps = 0.0));
        assert!(bad(|c| c.mean_on_ns = f64::NAN));
        assert!(!bad(|_| ()));
    }

    #[test]
    fn offered_load_matches_the_configuration() {
        // 50 sources × 1 Mbit/s × ½ ON = 25 Mbit/s, 3125 bytes per 1 ms interval on average.
        // Heavy tails make the sample mean converge slowly (error ~ n^{H−1}); over 2^17
        // intervals 5 % is about 3 standard errors.
        let mut g = OnOffDelays::new(config(), 3).unwrap();
        let n = 1 << 17;
        let total: f64 = (0..n)
            .map(|_| {
                g.next_action();
                g.last_arrivals()
            })
            .sum();
        let mean = total / f64::from(n);
        assert!((mean / 3125.0 - 1.0).abs() < 0.05, "{mean}");
        assert!((config().load() - 0.625).abs() < 1e-12);
    }

    #[test]
    fn aggregate_traffic_is_long_range_dependent() {
        // H = (3 − 1.4)/2 = 0.8 asymptotically; convergence is slow (Taqqu et al.), and finite
        // ON/OFF superpositions look less dependent at small scales, so the estimate lies well
        // above the 0.5 of short-range traffic but below 0.8. With 2^17 intervals: 0.65–0.9.
        let mut g = OnOffDelays::new(config(), 5).unwrap();
        let x: Vec<f64> = (0..1 << 17)
            .map(|_| {
                g.next_action();
                g.last_arrivals()
            })
            .collect();
        let h = aggregated_variance(&x).unwrap().hurst;
        assert!((0.65..0.9).contains(&h), "{h}");
    }

    #[test]
    fn delays_come_from_the_queue_and_a_full_queue_drops() {
        // A link faster than all sources together never queues: every delay is the base.
        let mut fast = config();
        fast.link_rate_bps = 100e6;
        let mut g = OnOffDelays::new(fast, 1).unwrap();
        assert!((0..10_000).all(|_| g.next_action()
            == Action::Pass {
                delay_ns: 10_000_000
            }));
        // A link slower than the mean load fills a 100 kB buffer and drops probes of 1500 B.
        let mut slow = config();
        slow.link_rate_bps = 10e6;
        slow.buffer_bytes = 100e3;
        slow.probe_bytes = 1500.0;
        let mut g = OnOffDelays::new(slow, 1).unwrap();
        let actions: Vec<Action> = (0..10_000).map(|_| g.next_action()).collect();
        let drops = actions.iter().filter(|a| **a == Action::Drop).count() as u64;
        assert!(drops > 0);
        assert_eq!(drops, g.dropped());
        // The largest delay is the base plus a full buffer drained at 10 Mbit/s: 80 ms.
        let max = actions.iter().filter_map(|a| a.delay_ns()).max().unwrap();
        assert!(max > 10_000_000 && max <= 90_000_000, "{max}");
    }
}
