//! Correlated Bernoulli events: the decision behind random loss, duplicate, corrupt and
//! reorder.
//!
//! netem correlates these by blending each new uniform draw with the previous one
//! (`get_crandom`) and comparing the blend against the probability. The blend of two uniforms
//! is not uniform, so the event rate drifts away from the configured probability as the
//! correlation grows; by netem's own arithmetic `loss 1% 25%` drops far fewer than 1 % of the
//! packets. rtemu instead runs a two-state Markov chain whose stationary probability is exactly
//! `p` and whose lag-1 autocorrelation is exactly `ρ`:
//!
//! ```text
//! P(event | last was an event)    = p + ρ·(1 − p)
//! P(event | last was no event)    = p·(1 − ρ)
//! ```
//!
//! The first decision uses `p`. Each decision costs one draw and one comparison.

use serde::{Deserialize, Serialize};

use crate::probability::Probability;
use crate::rng::Stream;
use crate::units::Percent;

/// A probability with an optional correlation between successive decisions, as netem writes
/// `loss 1% 25%`.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChanceConfig {
    /// How often the event happens, over the long run.
    pub probability: Percent,
    /// Lag-1 autocorrelation of the event sequence, in `[0, 1)`.
    #[serde(default)]
    pub correlation: Percent,
}

/// A configuration value that cannot work.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[error("correlation {0}% must be at least 0% and below 100%")]
pub struct BadCorrelation(pub f64);

/// The state of one correlated event stream.
#[derive(Debug, Clone)]
pub struct Chance {
    unconditional: Probability,
    after_event: Probability,
    after_none: Probability,
    last: Option<bool>,
}

impl Chance {
    /// A stream of events with the configured probability and correlation.
    pub fn new(cfg: ChanceConfig) -> Result<Self, BadCorrelation> {
        let (p, rho) = (cfg.probability.0, cfg.correlation.0);
        if !(0.0..1.0).contains(&rho) {
            return Err(BadCorrelation(rho * 100.0));
        }
        // Both are within [0, 1] for p, ρ in [0, 1], so `new` cannot fail.
        let prob = |x: f64| Probability::new(x.clamp(0.0, 1.0)).unwrap_or(Probability::ZERO);
        Ok(Chance {
            unconditional: prob(p),
            after_event: prob(p + rho * (1.0 - p)),
            after_none: prob(p * (1.0 - rho)),
            last: None,
        })
    }

    /// Whether the event never happens, so callers can skip the stage (and its draw).
    pub fn is_never(&self) -> bool {
        self.unconditional.is_zero()
    }

    /// Decides the next event.
    #[inline]
    pub fn next(&mut self, stream: &mut Stream) -> bool {
        let p = match self.last {
            None => self.unconditional,
            Some(true) => self.after_event,
            Some(false) => self.after_none,
        };
        let hit = stream.chance(p);
        self.last = Some(hit);
        hit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(p: f64, rho: f64, n: usize) -> (f64, f64) {
        let mut c = Chance::new(ChanceConfig {
            probability: Percent(p),
            correlation: Percent(rho),
        })
        .unwrap();
        let mut s = Stream::new(11, 0);
        let xs: Vec<f64> = (0..n).map(|_| c.next(&mut s) as u8 as f64).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        let cov = xs
            .windows(2)
            .map(|w| (w[0] - mean) * (w[1] - mean))
            .sum::<f64>()
            / (n - 1) as f64;
        (mean, cov / var)
    }

    #[test]
    fn marginal_and_lag1_correlation_match_the_configuration() {
        let n = 2_000_000;
        for (p, rho) in [(0.01, 0.25), (0.1, 0.5), (0.3, 0.9), (0.5, 0.0)] {
            let (mean, r1) = run(p, rho, n);
            // A Markov chain with lag-1 correlation ρ has an effective sample size of about
            // n·(1−ρ)/(1+ρ); the standard error of the mean is sqrt(p(1−p)/n_eff). Allow 5 σ.
            let n_eff = n as f64 * (1.0 - rho) / (1.0 + rho);
            let se = (p * (1.0 - p) / n_eff).sqrt();
            assert!((mean - p).abs() < 5.0 * se, "p={p} rho={rho}: mean {mean}");
            // The sample autocorrelation's standard error is about sqrt((1+ρ²)/n_eff_events)
            // for rare events; 0.02 is above 5 σ for every case here.
            assert!(
                (r1 - rho).abs() < 0.02 + 5.0 / (n as f64 * p).sqrt(),
                "p={p} rho={rho}: r1 {r1}"
            );
        }
    }

    #[test]
    fn full_correlation_is_rejected() {
        assert!(Chance::new(ChanceConfig {
            probability: Percent(0.1),
            correlation: Percent(1.0)
        })
        .is_err());
    }
}
