//! Loss models: random (with correlation), the 4-state Markov model and Gilbert–Elliott.
//!
//! The two Markov models use netem's parameter names and meanings (`tc-netem(8)`, after
//! Salsano et al., "Definition of a general and intuitive loss model for packet networks").
//! Their states are named, never numbered, and every `match` is exhaustive, so a missing
//! `break` like the one in older `sch_netem.c` cannot happen here.

use serde::{Deserialize, Serialize};

use crate::chance::{BadCorrelation, Chance, ChanceConfig};
use crate::probability::Probability;
use crate::rng::Stream;
use crate::units::Percent;

/// Which loss model a link uses, with its parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "model", rename_all = "kebab-case", deny_unknown_fields)]
pub enum LossConfig {
    /// `loss random P [CORR]`: each packet is lost with probability `P`; successive decisions
    /// have lag-1 correlation `CORR` (see [`crate::chance`]).
    Random(ChanceConfig),
    /// `loss state p13 [p31 [p32 [p23 [p14]]]]`: the 4-state Markov model.
    ///
    /// States: 1 = packet received in a gap period, 2 = received in a burst period,
    /// 3 = lost in a burst period, 4 = an isolated loss in a gap period. A packet is lost when
    /// the chain moves into state 3 or 4. Omitted parameters default as in iproute2:
    /// `p31 = 1 − p13`, `p32 = 0`, `p23 = 1`, `p14 = 0`.
    State {
        /// Gap → burst loss.
        p13: Percent,
        /// Burst loss → gap.
        p31: Percent,
        /// Burst loss → burst reception.
        p32: Percent,
        /// Burst reception → burst loss.
        p23: Percent,
        /// Gap → isolated loss (state 4 returns to 1 at the next packet).
        p14: Percent,
    },
    /// `loss gemodel p [r [1-h [1-k]]]`: the Gilbert–Elliott model.
    ///
    /// Two states, Good and Bad. Each packet is first lost or not with the loss probability of
    /// the current state (`1-k` in Good, `1-h` in Bad), then the state moves (Good → Bad with
    /// `p`, Bad → Good with `r`). Defaults as in iproute2: `r = 1 − p`, `1-h = 100%`,
    /// `1-k = 0%`, which is the simple Gilbert model.
    ///
    /// netem's documentation calls the third parameter `1-h` (the loss probability in Bad), but
    /// netem's kernel code has read it as `h` in some releases, losing with `1 − value`; rtemu
    /// follows the documented meaning.
    Gemodel {
        /// Good → Bad.
        p: Percent,
        /// Bad → Good.
        r: Percent,
        /// Loss probability in Bad (`1-h`).
        loss_bad: Percent,
        /// Loss probability in Good (`1-k`).
        loss_good: Percent,
    },
}

/// A loss configuration that cannot work.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LossError {
    /// The correlation of random loss is out of range.
    #[error(transparent)]
    Correlation(#[from] BadCorrelation),
    /// Outgoing probabilities of one state add up to more than 100 %.
    #[error("{what} add up to {sum}, more than 100%")]
    Overfull {
        /// Which parameters.
        what: &'static str,
        /// Their sum.
        sum: Percent,
    },
}

/// The 4-state model's states (netem's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FourState {
    /// State 1: received, gap period.
    TxInGap,
    /// State 2: received, burst period.
    TxInBurst,
    /// State 3: lost, burst period.
    LostInBurst,
    /// State 4: isolated loss in a gap period.
    LostInGap,
}

/// The Gilbert–Elliott model's states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GeState {
    /// Few or no losses.
    Good,
    /// Many or all packets lost.
    Bad,
}

/// A loss model's run-time state.
#[derive(Debug, Clone)]
pub enum Loss {
    /// Random, possibly correlated.
    Random(Chance),
    /// The 4-state Markov chain. Thresholds are cumulative over one draw per packet.
    State {
        /// Current state.
        state: FourState,
        /// From 1: below → 4.
        p14: Probability,
        /// From 1: below (and not below `p14`) → 3.
        p14_p13: Probability,
        /// From 2: below → 3.
        p23: Probability,
        /// From 3: below → 1.
        p31: Probability,
        /// From 3: below (and not below `p31`) → 2.
        p31_p32: Probability,
    },
    /// Gilbert–Elliott.
    Gemodel {
        /// Current state.
        state: GeState,
        /// Good → Bad.
        p: Probability,
        /// Bad → Good.
        r: Probability,
        /// Loss in Bad.
        loss_bad: Probability,
        /// Loss in Good.
        loss_good: Probability,
    },
}

fn prob(p: Percent) -> Probability {
    Probability::new(p.0.clamp(0.0, 1.0)).unwrap_or(Probability::ZERO)
}

fn sum_at_most_one(what: &'static str, a: Percent, b: Percent) -> Result<Probability, LossError> {
    let sum = a.0 + b.0;
    // Tolerate rounding in values that were written as percentages.
    if sum > 1.0 + 1e-12 {
        return Err(LossError::Overfull {
            what,
            sum: Percent(sum),
        });
    }
    Ok(prob(Percent(sum.min(1.0))))
}

impl Loss {
    /// The run-time state for a configuration, starting in the gap / Good state.
    pub fn new(cfg: &LossConfig) -> Result<Self, LossError> {
        Ok(match *cfg {
            LossConfig::Random(c) => Loss::Random(Chance::new(c)?),
            LossConfig::State {
                p13,
                p31,
                p32,
                p23,
                p14,
            } => Loss::State {
                state: FourState::TxInGap,
                p14: prob(p14),
                p14_p13: sum_at_most_one("p13 and p14", p13, p14)?,
                p23: prob(p23),
                p31: prob(p31),
                p31_p32: sum_at_most_one("p31 and p32", p31, p32)?,
            },
            LossConfig::Gemodel {
                p,
                r,
                loss_bad,
                loss_good,
            } => Loss::Gemodel {
                state: GeState::Good,
                p: prob(p),
                r: prob(r),
                loss_bad: prob(loss_bad),
                loss_good: prob(loss_good),
            },
        })
    }

    /// Decides whether the next packet is lost.
    #[inline]
    pub fn lose(&mut self, s: &mut Stream) -> bool {
        match self {
            Loss::Random(chance) => chance.next(s),
            Loss::State {
                state,
                p14,
                p14_p13,
                p23,
                p31,
                p31_p32,
            } => {
                let draw = s.next_u32();
                *state = match *state {
                    FourState::TxInGap if p14.hit(draw) => FourState::LostInGap,
                    FourState::TxInGap if p14_p13.hit(draw) => FourState::LostInBurst,
                    FourState::TxInGap => FourState::TxInGap,
                    FourState::TxInBurst if p23.hit(draw) => FourState::LostInBurst,
                    FourState::TxInBurst => FourState::TxInBurst,
                    FourState::LostInBurst if p31.hit(draw) => FourState::TxInGap,
                    FourState::LostInBurst if p31_p32.hit(draw) => FourState::TxInBurst,
                    FourState::LostInBurst => FourState::LostInBurst,
                    FourState::LostInGap => FourState::TxInGap,
                };
                matches!(*state, FourState::LostInBurst | FourState::LostInGap)
            }
            Loss::Gemodel {
                state,
                p,
                r,
                loss_bad,
                loss_good,
            } => {
                let (loss, leave) = match *state {
                    GeState::Good => (*loss_good, *p),
                    GeState::Bad => (*loss_bad, *r),
                };
                let lost = s.chance(loss);
                if s.chance(leave) {
                    *state = match *state {
                        GeState::Good => GeState::Bad,
                        GeState::Bad => GeState::Good,
                    };
                }
                lost
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Loss rate and mean loss-burst length over `n` packets.
    fn measure(cfg: LossConfig, n: usize) -> (f64, f64) {
        let mut loss = Loss::new(&cfg).unwrap();
        let mut s = Stream::new(5, 9);
        let (mut lost, mut bursts, mut in_burst) = (0usize, 0usize, false);
        for _ in 0..n {
            let l = loss.lose(&mut s);
            lost += l as usize;
            if l && !in_burst {
                bursts += 1;
            }
            in_burst = l;
        }
        (lost as f64 / n as f64, lost as f64 / bursts.max(1) as f64)
    }

    fn pct(x: f64) -> Percent {
        Percent(x)
    }

    #[test]
    fn four_state_matches_closed_forms() {
        let (p13, p31, p32, p23, p14) = (0.02, 0.3, 0.2, 0.4, 0.01);
        let cfg = LossConfig::State {
            p13: pct(p13),
            p31: pct(p31),
            p32: pct(p32),
            p23: pct(p23),
            p14: pct(p14),
        };
        // Stationary distribution: π3 = π1·p13/p31, π2 = π3·p32/p23, π4 = π1·p14, Σπ = 1.
        let (r3, r4) = (p13 / p31, p14);
        let r2 = r3 * p32 / p23;
        let pi1 = 1.0 / (1.0 + r2 + r3 + r4);
        let (pi2, pi3, pi4) = (r2 * pi1, r3 * pi1, r4 * pi1);
        let loss = pi3 + pi4;
        // Bursts start by entering 3 (from 1 or 2; mean length 1/(p31+p32)) or 4 (length 1).
        let (enter3, enter4) = (pi1 * p13 + pi2 * p23, pi1 * p14);
        let burst = (enter3 / (p31 + p32) + enter4) / (enter3 + enter4);
        let n = 4_000_000;
        let (got_loss, got_burst) = measure(cfg, n);
        // Losses are clustered (mean burst ≈ 2), so the effective sample is about
        // n / (2·burst); 5 σ of a binomial with that size is below 3 % of the rate here.
        assert!(
            (got_loss - loss).abs() < 0.03 * loss,
            "loss {got_loss} vs {loss}"
        );
        // About n·loss/burst ≈ 90 000 bursts; geometric lengths with mean ≈ 2 give a
        // standard error near 0.005; 2 % is over 5 σ.
        assert!(
            (got_burst - burst).abs() < 0.02 * burst,
            "burst {got_burst} vs {burst}"
        );
    }

    #[test]
    fn gilbert_matches_closed_forms() {
        let (p, r) = (0.01, 0.25);
        let cfg = LossConfig::Gemodel {
            p: pct(p),
            r: pct(r),
            loss_bad: pct(1.0),
            loss_good: pct(0.0),
        };
        let (got_loss, got_burst) = measure(cfg, 4_000_000);
        let loss = p / (p + r);
        // Simple Gilbert: every packet in Bad is lost, so bursts are Bad sojourns, mean 1/r.
        assert!(
            (got_loss - loss).abs() < 0.03 * loss,
            "loss {got_loss} vs {loss}"
        );
        assert!((got_burst - 1.0 / r).abs() < 0.02 / r, "burst {got_burst}");
    }

    #[test]
    fn gilbert_elliott_loss_rate_mixes_both_states() {
        let (p, r, lb, lg) = (0.05, 0.2, 0.6, 0.02);
        let cfg = LossConfig::Gemodel {
            p: pct(p),
            r: pct(r),
            loss_bad: pct(lb),
            loss_good: pct(lg),
        };
        let (got, _) = measure(cfg, 4_000_000);
        let pi_bad = p / (p + r);
        let want = pi_bad * lb + (1.0 - pi_bad) * lg;
        assert!((got - want).abs() < 0.03 * want, "{got} vs {want}");
    }

    #[test]
    fn overfull_states_are_rejected() {
        let cfg = LossConfig::State {
            p13: pct(0.7),
            p31: pct(0.5),
            p32: pct(0.0),
            p23: pct(1.0),
            p14: pct(0.4),
        };
        assert!(matches!(
            Loss::new(&cfg),
            Err(LossError::Overfull {
                what: "p13 and p14",
                ..
            })
        ));
    }
}
