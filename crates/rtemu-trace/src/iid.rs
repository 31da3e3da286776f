//! Baselines for comparison with the long-range-dependent generators: i.i.d. delays from a
//! named distribution, and Gilbert–Elliott loss.
//!
//! # Distributions ([`Dist`]), each set by its mean and standard deviation
//!
//! * `constant`: always the mean.
//! * `uniform`: on `[mean − √3·std, mean + √3·std]`.
//! * `normal`: Gaussian; negative draws are clamped to 0 and counted.
//! * `exponential`: the mean (its std equals its mean; the given std is ignored).
//! * `pareto`: shape `α = 1 + √(1 + mean²/std²)` (the α with that coefficient of variation,
//!   always > 2 so the variance is finite) and scale `mean(α − 1)/α`.
//!
//! # Gilbert–Elliott loss ([`GilbertElliott`])
//!
//! A two-state Markov chain: from Good to Bad with probability `p` per packet, from Bad to Good
//! with `r`; a packet is lost with probability `loss_good` in Good and `loss_bad` in Bad (the
//! channel model behind netem's `loss gemodel p r 1-h 1-k`). The stationary loss rate is
//! `(r·loss_good + p·loss_bad)/(p + r)`; with `loss_good = 0`, `loss_bad = 1` losses come in
//! bursts of mean length `1/r`.

use rand_xoshiro::rand_core::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::action::Action;
use crate::fgn::GenError;

/// A delay distribution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dist {
    /// Always the mean.
    Constant,
    /// Uniform with the given mean and std.
    Uniform,
    /// Normal, negative draws clamped to 0.
    Normal,
    /// Exponential with the given mean.
    Exponential,
    /// Pareto with the given mean and std.
    Pareto,
}

impl std::str::FromStr for Dist {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "constant" => Ok(Dist::Constant),
            "uniform" => Ok(Dist::Uniform),
            "normal" => Ok(Dist::Normal),
            "exponential" => Ok(Dist::Exponential),
            "pareto" => Ok(Dist::Pareto),
            _ => Err(format!(
                "unknown distribution {s:?} (constant, uniform, normal, exponential, pareto)"
            )),
        }
    }
}

/// A probability as a 64-bit threshold: an event happens when a uniform `u64` is below it.
fn threshold(name: &'static str, p: f64) -> Result<u64, GenError> {
    if !(0.0..=1.0).contains(&p) {
        return Err(GenError::Parameter {
            name,
            value: p,
            valid: "a probability is 0 to 1",
        });
    }
    // 2^64 · p, saturating at u64::MAX for p = 1 (then one draw in 2^64 misses: negligible).
    Ok((p * 18_446_744_073_709_551_616.0) as u64)
}

/// The Gilbert–Elliott channel: see the [module docs](self).
#[derive(Debug, Clone)]
pub struct GilbertElliott {
    p: u64,
    r: u64,
    loss_good: u64,
    loss_bad: u64,
    bad: bool,
}

impl GilbertElliott {
    /// A channel starting in Good. Each argument is a probability in [0, 1].
    pub fn new(p: f64, r: f64, loss_good: f64, loss_bad: f64) -> Result<Self, GenError> {
        Ok(GilbertElliott {
            p: threshold("p (Good to Bad)", p)?,
            r: threshold("r (Bad to Good)", r)?,
            loss_good: threshold("loss in Good", loss_good)?,
            loss_bad: threshold("loss in Bad", loss_bad)?,
            bad: false,
        })
    }

    /// Moves the chain one packet on; true if that packet is lost.
    fn lost(&mut self, rng: &mut Xoshiro256PlusPlus) -> bool {
        use rand::Rng as _;
        let flip = if self.bad { self.r } else { self.p };
        if rng.next_u64() < flip {
            self.bad = !self.bad;
        }
        let loss = if self.bad {
            self.loss_bad
        } else {
            self.loss_good
        };
        rng.next_u64() < loss
    }
}

/// i.i.d. delays, optionally with Gilbert–Elliott loss: one [`Action`] per packet.
#[derive(Debug)]
pub struct IidTrace {
    dist: Dist,
    mean_ns: f64,
    std_ns: f64,
    /// Pareto shape and scale, precomputed.
    alpha: f64,
    scale: f64,
    resolution_ns: u64,
    loss: Option<GilbertElliott>,
    rng: Xoshiro256PlusPlus,
    clamped: u64,
}

impl IidTrace {
    /// Delays from `dist` with the given mean and std (ns), rounded to `resolution_ns`, and
    /// `loss` if given; seeded by `seed`.
    pub fn new(
        dist: Dist,
        mean_ns: f64,
        std_ns: f64,
        resolution_ns: u64,
        loss: Option<GilbertElliott>,
        seed: u64,
    ) -> Result<Self, GenError> {
        for (name, value) in [("mean", mean_ns), ("std", std_ns)] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(GenError::Parameter {
                    name,
                    value,
                    valid: "give a finite value of 0 or more",
                });
            }
        }
        let (alpha, scale) = if dist == Dist::Pareto {
            if std_ns <= 0.0 || mean_ns <= 0.0 {
                return Err(GenError::Parameter {
                    name: if mean_ns <= 0.0 { "mean" } else { "std" },
                    value: if mean_ns <= 0.0 { mean_ns } else { std_ns },
                    valid: "pareto needs a mean and a std above 0",
                });
            }
            let alpha = 1.0 + (1.0 + (mean_ns / std_ns).powi(2)).sqrt();
            (alpha, mean_ns * (alpha - 1.0) / alpha)
        } else {
            (0.0, 0.0)
        };
        Ok(IidTrace {
            dist,
            mean_ns,
            std_ns,
            alpha,
            scale,
            resolution_ns: resolution_ns.max(1),
            loss,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            clamped: 0,
        })
    }

    /// The next record.
    pub fn next_action(&mut self) -> Action {
        if let Some(ge) = &mut self.loss {
            if ge.lost(&mut self.rng) {
                return Action::Drop;
            }
        }
        let d = self.draw();
        if d < 0.0 {
            self.clamped += 1;
        }
        let r = self.resolution_ns as f64;
        Action::Pass {
            delay_ns: ((d.max(0.0) / r).round() * r) as u64,
        }
    }

    fn draw(&mut self) -> f64 {
        use rand::RngExt as _;
        match self.dist {
            Dist::Constant => self.mean_ns,
            Dist::Uniform => {
                let half = 3f64.sqrt() * self.std_ns;
                self.mean_ns - half + 2.0 * half * open01(&mut self.rng)
            }
            Dist::Normal => {
                self.mean_ns + self.std_ns * self.rng.sample::<f64, _>(rand_distr::StandardNormal)
            }
            Dist::Exponential => -self.mean_ns * open01(&mut self.rng).ln(),
            Dist::Pareto => self.scale * open01(&mut self.rng).powf(-1.0 / self.alpha),
        }
    }

    /// Normal draws below zero, clamped to 0.
    pub fn clamped(&self) -> u64 {
        self.clamped
    }
}

/// Uniform in (0, 1].
fn open01(rng: &mut Xoshiro256PlusPlus) -> f64 {
    use rand::Rng as _;
    ((rng.next_u64() >> 11) + 1) as f64 * (1.0 / (1u64 << 53) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const N: usize = 1 << 18;

    /// Each refusal gives the parameter's own range, not another parameter's rule.
    #[test]
    fn refusals_state_the_range_of_the_parameter_refused() {
        let msg = |e: GenError| e.to_string();
        let p = msg(GilbertElliott::new(2.0, 0.5, 0.0, 1.0).unwrap_err());
        assert!(
            p.contains("p (Good to Bad) 2") && p.contains("0 to 1"),
            "{p}"
        );
        let mean = msg(IidTrace::new(Dist::Normal, -1.0, 1.0, 1, None, 1).unwrap_err());
        assert!(
            mean.contains("mean -1") && mean.contains("0 or more"),
            "{mean}"
        );
        let pareto = msg(IidTrace::new(Dist::Pareto, 5.0, 0.0, 1, None, 1).unwrap_err());
        assert!(
            pareto.contains("std 0") && pareto.contains("above 0"),
            "{pareto}"
        );
        assert!(!pareto.contains("non-negative"), "{pareto}");
    }

    fn moments(dist: Dist, mean: f64, std: f64) -> (f64, f64) {
        let mut t = IidTrace::new(dist, mean, std, 1, None, 42).unwrap();
        let xs: Vec<f64> = (0..N)
            .map(|_| t.next_action().delay_ns().unwrap() as f64)
            .collect();
        let m = xs.iter().sum::<f64>() / N as f64;
        let s = (xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / N as f64).sqrt();
        (m, s)
    }

    #[test]
    fn distributions_have_the_requested_moments() {
        // Mean within 5 standard errors (std/√N = std/512); the sample std within 3 % (its
        // relative standard error is about √((κ−1)/4N), under 0.5 % for these shapes except
        // Pareto, whose heavy tail (α ≈ 3.7 here, infinite fourth moment) makes it converge slowly; 10 % there).
        for (dist, tol_std) in [
            (Dist::Uniform, 0.03),
            (Dist::Normal, 0.03),
            (Dist::Exponential, 0.03),
            (Dist::Pareto, 0.10),
        ] {
            let (mean, std) = (5e6, if dist == Dist::Exponential { 5e6 } else { 2e6 });
            let (m, s) = moments(dist, mean, std);
            assert!(
                (m - mean).abs() < 5.0 * std / (N as f64).sqrt(),
                "{dist:?}: mean {m}"
            );
            assert!((s / std - 1.0).abs() < tol_std, "{dist:?}: std {s}");
        }
        assert_eq!(moments(Dist::Constant, 7e6, 1e6), (7e6, 0.0));
    }

    #[test]
    fn gilbert_elliott_gives_its_loss_rate_and_burst_length() {
        // p = 1 %, r = 20 %: stationary P(Bad) = 0.01/0.21 = 4.76 %, all of it lost; mean
        // burst 1/r = 5. Bursts number about N·p·(1 − π_B) ≈ 2500, so the mean burst length
        // has a standard error of about √20/√2500 ≈ 0.09 (geometric variance (1−r)/r² = 20);
        // tolerance 0.5. The loss rate's standard error, inflated by the bursts, is about
        // 0.0007; tolerance 0.005.
        let ge = GilbertElliott::new(0.01, 0.2, 0.0, 1.0).unwrap();
        let mut t = IidTrace::new(Dist::Constant, 1e6, 0.0, 1, Some(ge), 9).unwrap();
        let lost: Vec<bool> = (0..N).map(|_| t.next_action() == Action::Drop).collect();
        let rate = lost.iter().filter(|&&l| l).count() as f64 / N as f64;
        assert!((rate - 0.01 / 0.21).abs() < 0.005, "{rate}");
        let bursts = lost.windows(2).filter(|w| !w[0] && w[1]).count() as f64;
        let mean_burst = lost.iter().filter(|&&l| l).count() as f64 / bursts;
        assert!((mean_burst - 5.0).abs() < 0.5, "{mean_burst}");
    }

    #[test]
    fn bad_parameters_are_refused() {
        assert!(GilbertElliott::new(1.5, 0.1, 0.0, 1.0).is_err());
        assert!(IidTrace::new(Dist::Normal, -1.0, 1.0, 1, None, 1).is_err());
        assert!(IidTrace::new(Dist::Pareto, 1.0, 0.0, 1, None, 1).is_err());
        assert!("gamma"
            .parse::<Dist>()
            .unwrap_err()
            .contains("constant, uniform"));
    }
}
