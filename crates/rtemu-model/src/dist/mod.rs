//! Delay distributions: how a packet's delay is drawn from `delay μ σ ρ distribution D`.
//!
//! A [`DelaySampler`] turns a [`DelayConfig`] (mean delay μ, jitter σ, correlation ρ and a
//! [`Distribution`]) into one delay in nanoseconds per call, drawing only from the link's
//! [`Stream`]. With σ = 0 the delay is μ and no random draw is made (as in netem).
//!
//! # Distributions
//!
//! Each built-in distribution is a standardised variable `X` and the delay is `μ + σ·X`:
//!
//! | name           | `X`                                                           | sd of delay |
//! |----------------|---------------------------------------------------------------|-------------|
//! | `uniform`      | uniform on `[−1, 1]` (netem's default)                        | `σ/√3`      |
//! | `normal`       | standard normal, unclipped                                    | `σ`         |
//! | `pareto`       | Pareto with shape α = 3, shifted and scaled to mean 0, sd 1   | `σ`         |
//! | `paretonormal` | netem's normal/Pareto blend, unclipped, scaled to sd 1        | `σ`         |
//! | a table        | `t/8192` for `t` an entry of an iproute2 `.dist` table        | from table  |
//!
//! * `uniform` keeps netem's meaning of σ: the delay is uniform in `[μ−σ, μ+σ]`, so its
//!   standard deviation is σ/√3, not σ. It is the default, as in netem.
//! * `normal`, `pareto` and `paretonormal` have their real tails. netem draws them from
//!   iproute2's tables, whose entries are `i16` in units of σ/8192, so every draw is clipped
//!   to `[−4σ, +4σ]`; the Pareto tail, where the interesting delays are, is cut off.
//! * `pareto`: if `W = U^{−1/3}` (U uniform) is Pareto with scale 1 and shape 3, then
//!   `E[W] = 3/2` and `Var W = 3/4`, so `X = (W − 3/2)·2/√3`. Its third and fourth moments
//!   are infinite: sample standard deviations of Pareto delays converge slowly. iproute2's
//!   `pareto.dist` holds `(W − 3/2)·4/3` instead (sd 1.155, not 1) and clips the 1.1% of
//!   draws with `W > 4.5` to +4σ.
//! * `paretonormal`: iproute2's `netem/paretonormal.c` builds its table from the *quantile*
//!   functions of a standard normal and of that Pareto table at the same probability `p`,
//!   weighted 1/4 and 3/4: `Q(p) = ¼·Φ⁻¹(p) + (1−p)^{−1/3} − 3/2`. The two parts are
//!   therefore perfectly dependent (comonotonic), not an independent sum. rtemu keeps that
//!   recipe, unclipped, and divides by its standard deviation (≈ 1.0518, computed by
//!   quadrature) so that σ is the delay's standard deviation. The installed table's
//!   clipping cuts its sd to 0.83.
//! * A [`DistTable`] is netem's table mode, bit for bit in distribution: the delay is
//!   `μ + σ·t/8192` with `t` an entry picked uniformly. Loading iproute2's own `normal.dist`
//!   reproduces netem's `distribution normal` exactly, ±4σ clipping included, for users who
//!   want netem's behaviour rather than rtemu's. Only correlation differs: with ρ > 0 rtemu
//!   correlates table draws as configured, where netem's are, in effect, uncorrelated (below).
//!
//! # Negative delays
//!
//! A draw below zero (`μ + σ·X < 0`, which the unbounded distributions allow) is clamped to
//! zero and counted ([`DelaySampler::clamped`]). Clamping raises the mean: by
//! `E[max(0, D)] − E[D] = E[max(0, −D)]`, which is negligible when μ ≥ 3σ for `normal`
//! (about 4·10⁻⁴ σ) but not when σ is comparable to μ; the counter lets a report say so.
//! Delays round to the nearest nanosecond and saturate at `u64::MAX`.
//!
//! # Correlation
//!
//! netem's correlation (`get_crandom` in `net/sched/sch_netem.c`) blends each new uniform
//! 32-bit draw with the previous result, `u_n = (1−ρ)·v_n + ρ·u_{n−1}`. That process does
//! have lag-1 correlation ρ, but it is no longer uniform (its sd shrinks by
//! `√((1−ρ)/(1+ρ))`, to 0.23 of a uniform's at ρ = 0.9), and `tabledist` then reduces it
//! modulo the table size (`rnd % dist->size`) or modulo 2σ for the default uniform: only the
//! low bits survive, and they carry almost none of the correlation. Simulating that
//! arithmetic for ρ = 25%, 50% and 90% gives a lag-1 correlation of the table index and of
//! the uniform jitter within ±0.01 of zero (200 000 draws each). So in netem,
//! `delay 20ms 5ms 90%` is in effect uncorrelated.
//!
//! rtemu uses a Gaussian copula instead. A latent stationary AR(1) process
//! `z_n = r·z_{n−1} + √(1−r²)·e_n` (`e_n` standard normal) is standard normal at every step,
//! and the delay is `μ + σ·g(z_n)` with `g = F⁻¹∘Φ` the target's quantile function composed
//! with the normal CDF. So:
//!
//! * the marginal distribution of every delay is exactly the configured one, at any ρ;
//! * the latent `r` is calibrated when the sampler is built so that the lag-1 Pearson
//!   autocorrelation of the delays themselves is ρ. For `normal`, `g` is the identity and
//!   `r = ρ`, and lag-k correlation decays as ρ^k. For `uniform`, the closed form
//!   `ρ = (6/π)·asin(r/2)` is inverted. For the others, `ρ(r) = Σ a_k² r^k / Σ a_k²`
//!   (Mehler's formula, `a_k` the Hermite coefficients of `g`) is computed from the
//!   Hermite expansion of `g` (by quadrature for `pareto` and `paretonormal`, exactly for
//!   tables, with the series cut after 400 terms) and inverted by bisection. The cut makes
//!   the delivered ρ slightly low for coarse tables at ρ close to 1: for a two-valued table,
//!   the coarsest, by 4·10⁻⁴ at ρ ≈ 0.91 and 0.01 at ρ ≈ 0.98, and by less than 10⁻¹⁰ at
//!   ρ ≤ 0.8. Lag-k correlation is then `ρ(r^k)`, close to but not exactly ρ^k;
//! * ρ describes the unclamped delays (clamping at zero, when it happens, changes both the
//!   marginal and the correlation slightly).
//!
//! ρ must be in `[0, 1)`. With ρ = 0 each delay is drawn independently by the fastest exact
//! method (a ziggurat normal, a direct inverse CDF for Pareto, a table index), and the
//! sampler makes no latent draws at all.
//!
//! The functions used here come from the `libm` crate or are plain IEEE arithmetic (the
//! Pareto cube root, and `Φ` per draw, summed from a table built with `libm`), so the same
//! seed gives the same delays on every platform; the normal draws themselves are
//! [`Stream::standard_normal`]'s.

mod latent;
mod normal;
mod table;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::rng::Stream;
use latent::Expansion;
use normal::{normal_cdf, CdfTable};
pub use table::{DistTable, EmptyTable, TableError, TableErrorKind, DIST_SCALE};

/// The shape of the delay around its mean.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Distribution {
    /// Uniform in `[μ−σ, μ+σ]`: netem's default (so the standard deviation is σ/√3).
    #[default]
    Uniform,
    /// Normal with mean μ and standard deviation σ, unclipped.
    Normal,
    /// Pareto (shape 3) with mean μ and standard deviation σ, unclipped.
    Pareto,
    /// netem's ¼ normal + ¾ Pareto blend, unclipped, with mean μ and standard deviation σ.
    ParetoNormal,
    /// A user table in iproute2's `.dist` format: `μ + σ·t/8192`, netem's table mode.
    Table(DistTable),
}

impl Distribution {
    /// The built-in distribution with this netem name (`uniform`, `normal`, `pareto`,
    /// `paretonormal`), or `None` (then the caller may look for a table file of that name).
    pub fn builtin(name: &str) -> Option<Self> {
        match name {
            "uniform" => Some(Distribution::Uniform),
            "normal" => Some(Distribution::Normal),
            "pareto" => Some(Distribution::Pareto),
            "paretonormal" => Some(Distribution::ParetoNormal),
            _ => None,
        }
    }

    /// The name a user would write: the netem name, or the table's name.
    pub fn name(&self) -> &str {
        match self {
            Distribution::Uniform => "uniform",
            Distribution::Normal => "normal",
            Distribution::Pareto => "pareto",
            Distribution::ParetoNormal => "paretonormal",
            Distribution::Table(t) => t.name(),
        }
    }
}

/// The delay stage's parameters: `delay μ σ ρ distribution D` in netem terms.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DelayConfig {
    /// μ, the mean delay (the centre for `uniform` and tables), in nanoseconds.
    pub delay_ns: u64,
    /// σ, the jitter, in nanoseconds: the standard deviation, or the half-width for `uniform`.
    pub jitter_ns: u64,
    /// ρ in `[0, 1)`: the lag-1 autocorrelation of successive delays.
    pub correlation: f64,
    /// The shape of the delay around μ.
    pub distribution: Distribution,
}

/// The longest delay or jitter accepted: 2^53 ns (about 104 days), the range in which a
/// nanosecond count is exact as an `f64`.
pub const MAX_DELAY_NS: u64 = 1 << 53;

/// A delay configuration that cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum DelayError {
    /// ρ outside `[0, 1)`, or not a number.
    #[error("delay correlation {0} is out of range: must be at least 0% and below 100%")]
    Correlation(f64),
    /// μ or σ beyond [`MAX_DELAY_NS`].
    #[error("{what} of {value_ns} ns is too long: must be at most 2^53 ns (about 104 days)")]
    TooLong {
        /// `"delay"` or `"jitter"`.
        what: &'static str,
        /// The value given.
        value_ns: u64,
    },
}

/// `2/√3`: scales the Pareto(3) variable `W − 3/2` to unit variance.
const PARETO_SCALE: f64 = 1.154_700_538_379_251_5;
/// The standard deviation of netem's unclipped paretonormal `¼Z + W − 3/2` (by quadrature;
/// a unit test recomputes it).
const PARETONORMAL_SD: f64 = 1.051_777_245_524_38;

/// Draws delays for one link direction. Holds the latent state when delays are correlated.
#[derive(Debug, Clone)]
pub struct DelaySampler {
    delay_ns: u64,
    mean: f64,
    /// σ, or σ/8192 for tables, so that every shape's draw is scaled by one multiplication.
    scale: f64,
    shape: Shape,
    latent: Option<Latent>,
    /// `Φ`, for the shapes that evaluate it per draw.
    cdf: CdfTable,
    clamped: u64,
}

/// The standardised variable, with what each needs precomputed.
#[derive(Debug, Clone)]
enum Shape {
    /// σ = 0: no draw at all.
    Constant,
    Uniform,
    Normal,
    Pareto,
    ParetoNormal,
    Table(Arc<[i16]>),
}

/// The latent AR(1) process.
#[derive(Debug, Clone)]
struct Latent {
    /// The latent lag-1 correlation r.
    r: f64,
    /// `√(1−r²)`, so that the process stays standard normal.
    innovation: f64,
    /// The last latent value; `None` until the first draw, which starts the process in its
    /// stationary distribution.
    z: Option<f64>,
}

impl DelaySampler {
    /// Validates `cfg` and prepares to draw; calibrates the latent correlation when ρ > 0
    /// (at most a few milliseconds, for large tables).
    pub fn new(cfg: &DelayConfig) -> Result<Self, DelayError> {
        let rho = cfg.correlation;
        if !(0.0..1.0).contains(&rho) {
            return Err(DelayError::Correlation(rho));
        }
        for (what, value_ns) in [("delay", cfg.delay_ns), ("jitter", cfg.jitter_ns)] {
            if value_ns > MAX_DELAY_NS {
                return Err(DelayError::TooLong { what, value_ns });
            }
        }
        let sigma = cfg.jitter_ns as f64;
        let (shape, scale) = match &cfg.distribution {
            _ if cfg.jitter_ns == 0 => (Shape::Constant, 0.0),
            Distribution::Uniform => (Shape::Uniform, sigma),
            Distribution::Normal => (Shape::Normal, sigma),
            Distribution::Pareto => (Shape::Pareto, sigma),
            Distribution::ParetoNormal => (Shape::ParetoNormal, sigma),
            Distribution::Table(t) => (Shape::Table(t.values.clone()), sigma / DIST_SCALE),
        };
        let latent = if rho == 0.0 {
            None
        } else {
            shape.latent_for(rho).map(|r| Latent {
                r,
                innovation: (1.0 - r * r).sqrt(),
                z: None,
            })
        };
        let needs_cdf = match shape {
            Shape::Constant | Shape::Normal => false,
            Shape::ParetoNormal => true,
            Shape::Uniform | Shape::Pareto | Shape::Table(_) => latent.is_some(),
        };
        Ok(DelaySampler {
            delay_ns: cfg.delay_ns,
            mean: cfg.delay_ns as f64,
            scale,
            shape,
            latent,
            cdf: if needs_cdf {
                CdfTable::new()
            } else {
                CdfTable::erfc_only()
            },
            clamped: 0,
        })
    }

    /// The next delay, in nanoseconds.
    #[inline]
    pub fn sample(&mut self, s: &mut Stream) -> u64 {
        let x = match &mut self.latent {
            None => match &self.shape {
                Shape::Constant => return self.delay_ns,
                Shape::Uniform => 2.0 * s.open01() - 1.0,
                Shape::Normal => s.standard_normal(),
                Shape::Pareto => pareto(s.open01()),
                Shape::ParetoNormal => {
                    let z = s.standard_normal();
                    paretonormal(z, self.cdf.cdf(-z))
                }
                Shape::Table(values) => {
                    let i = (u128::from(s.next_u64()) * values.len() as u128) >> 64;
                    f64::from(values[i as usize])
                }
            },
            Some(latent) => {
                let e = s.standard_normal();
                let z = match latent.z {
                    Some(prev) => latent.r * prev + latent.innovation * e,
                    None => e,
                };
                latent.z = Some(z);
                let cdf = &self.cdf;
                self.shape.map_latent(z, |x| cdf.cdf(x))
            }
        };
        let delay = self.mean + self.scale * x;
        if delay < 0.0 {
            self.clamped += 1;
            return 0;
        }
        (delay + 0.5) as u64
    }

    /// How many draws fell below zero and were clamped to a zero delay.
    pub fn clamped(&self) -> u64 {
        self.clamped
    }

    /// The calibrated latent correlation r, when delays are correlated.
    pub fn latent_correlation(&self) -> Option<f64> {
        self.latent.as_ref().map(|l| l.r)
    }
}

impl Shape {
    /// `g(z) = F⁻¹(Φ(z))`: the standardised draw for a latent standard normal `z`, with
    /// `phi` evaluating `Φ`.
    #[inline]
    fn map_latent(&self, z: f64, phi: impl Fn(f64) -> f64) -> f64 {
        match self {
            Shape::Constant => 0.0,
            Shape::Uniform => 2.0 * phi(z) - 1.0,
            Shape::Normal => z,
            Shape::Pareto => pareto(phi(-z)),
            Shape::ParetoNormal => paretonormal(z, phi(-z)),
            Shape::Table(values) => {
                let n = values.len();
                let i = ((phi(z) * n as f64) as usize).min(n - 1);
                f64::from(values[i])
            }
        }
    }

    /// The latent r whose output lag-1 correlation is `rho`, or `None` when there is
    /// nothing to correlate (σ = 0).
    fn latent_for(&self, rho: f64) -> Option<f64> {
        Some(match self {
            Shape::Constant => return None,
            Shape::Normal => rho,
            // Pearson's correlation of Φ(z₁), Φ(z₂) for normals with correlation r.
            Shape::Uniform => 2.0 * libm::sin(std::f64::consts::PI * rho / 6.0),
            Shape::Pareto | Shape::ParetoNormal => {
                Expansion::of_smooth(|z| self.map_latent(z, normal_cdf)).latent_for(rho)
            }
            Shape::Table(values) => {
                let steps: Vec<f64> = values.iter().map(|&v| f64::from(v)).collect();
                Expansion::of_steps(&steps).latent_for(rho)
            }
        })
    }
}

/// The standardised Pareto(3) draw for a uniform `u` in `(0, 1]`: `W = u^{−1/3}`.
#[inline]
fn pareto(u: f64) -> f64 {
    (inv_cbrt(u) - 1.5) * PARETO_SCALE
}

/// netem's paretonormal quantile at `p = Φ(z)`, standardised: `(¼z + (1−p)^{−1/3} − 3/2)/sd`,
/// given `tail = 1 − p = Φ(−z)`.
#[inline]
fn paretonormal(z: f64, tail: f64) -> f64 {
    (0.25 * z + inv_cbrt(tail) - 1.5) * (1.0 / PARETONORMAL_SD)
}

/// `u^{−1/3}` for `u` in `[0, 1]` (0 is read as the smallest normal `f64`), to within a few
/// ulps.
///
/// `libm`'s `cbrt` is correctly rounded and costs about 40 ns, more than the rest of a Pareto
/// draw; this costs a third of that. A bit-level first guess (the exponent divided by −3, with
/// a constant tuned so that the guess is within 3.5% everywhere) is refined by four Newton
/// steps `y ← y·(4 − u·y³)/3`, each squaring the error (3.5% → 2·10⁻³ → 10⁻⁵ → 2·10⁻¹⁰ →
/// rounding). Only IEEE multiplication and subtraction are used, so the result is the same on
/// every platform.
#[inline]
fn inv_cbrt(u: f64) -> f64 {
    const MAGIC: u64 = 0x553e_f07f_ffff_ffff;
    let u = u.max(f64::MIN_POSITIVE);
    let mut y = f64::from_bits(MAGIC - u.to_bits() / 3);
    for _ in 0..4 {
        y = y * (4.0 - u * y * y * y) * (1.0 / 3.0);
    }
    y
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inv_cbrt_is_accurate_over_the_whole_range() {
        let mut u = 1.0_f64;
        while u > 1e-300 {
            let rel = inv_cbrt(u) * libm::cbrt(u) - 1.0;
            assert!(rel.abs() < 1e-15, "u = {u:e}: relative error {rel:e}");
            u *= 0.999_7;
        }
        assert_eq!(inv_cbrt(1.0), 1.0);
        assert_eq!(inv_cbrt(0.125), 2.0);
        let smallest = inv_cbrt(0.0);
        assert!(smallest.is_finite() && smallest > 1e100);
    }

    /// The entries of an installed iproute2 table, or `None` (with the reason printed).
    fn iproute2_table(name: &str) -> Option<Vec<f64>> {
        let path = format!("/usr/lib/x86_64-linux-gnu/tc/{name}.dist");
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                let t = DistTable::parse(&path, &text).unwrap();
                Some(t.values().iter().map(|&v| f64::from(v)).collect())
            }
            Err(e) => {
                eprintln!("skipping: {path} is not readable ({e}); install iproute2");
                None
            }
        }
    }

    /// rtemu's `pareto` and `paretonormal` are iproute2's recipes rescaled: its installed
    /// tables, entry `j` of 4096 at `p = j/4096`, agree with them wherever they are not
    /// clipped. `pareto.dist` is `8192·(4/3)·(W − 3/2)`, rounded (so within 0.5);
    /// `paretonormal.dist` takes its normal part from a grid with step 5·10⁻⁵ and truncates
    /// the sum, so it is within a few units except at the first entries, which lie beyond
    /// that grid.
    #[test]
    fn recipes_match_iproute2_tables() {
        if let Some(table) = iproute2_table("pareto") {
            let unclipped: Vec<usize> = (0..4096).filter(|&j| table[j] < 32767.0).collect();
            // W > 4.5, 1.1% of draws, is clipped to 32767.
            assert_eq!(unclipped.len(), 4052);
            for j in unclipped {
                let u = 1.0 - j as f64 / 4096.0;
                let expected = 8192.0 * (4.0 / 3.0) / PARETO_SCALE * pareto(u);
                assert!((table[j] - expected).abs() <= 0.5, "pareto entry {j}");
            }
        }
        if let Some(table) = iproute2_table("paretonormal") {
            for (j, entry) in table.iter().enumerate().take(4041).skip(8) {
                let z = normal::normal_quantile(j as f64 / 4096.0);
                let expected = 8192.0 * PARETONORMAL_SD * paretonormal(z, normal_cdf(-z));
                assert!((entry - expected).abs() <= 12.0, "paretonormal entry {j}");
            }
        }
    }

    #[test]
    fn standardising_constants_match_quadrature() {
        let e = Expansion::of_smooth(|z| 0.25 * z + libm::cbrt(1.0 / normal_cdf(-z)) - 1.5);
        assert!((e.variance().sqrt() - PARETONORMAL_SD).abs() < 1e-9);
        let e = Expansion::of_smooth(|z| pareto(normal_cdf(-z)));
        assert!((e.variance() - 1.0).abs() < 1e-8);
        assert!((PARETO_SCALE - 2.0 / 3f64.sqrt()).abs() < 1e-15);
    }

    /// `Corr(g(Z₁), g(Z₂))` for standard normals with correlation `r`, by 2-D Simpson
    /// quadrature on `[−11, 11]²`, independently of the Hermite series used for calibration.
    fn correlation_by_quadrature(g: impl Fn(f64) -> f64, r: f64) -> f64 {
        const HALF_WIDTH: f64 = 11.0;
        const STEPS: usize = 1100;
        let h = 2.0 * HALF_WIDTH / STEPS as f64;
        let nodes: Vec<(f64, f64)> = (0..=STEPS)
            .map(|i| {
                let z = -HALF_WIDTH + h * i as f64;
                let simpson = match i {
                    0 | STEPS => 1.0,
                    i if i % 2 == 1 => 4.0,
                    _ => 2.0,
                };
                let pdf = libm::exp(-0.5 * z * z) / (2.0 * std::f64::consts::PI).sqrt();
                (z, simpson * h / 3.0 * pdf)
            })
            .collect();
        let s = (1.0 - r * r).sqrt();
        let mean: f64 = nodes.iter().map(|&(z, w)| w * g(z)).sum();
        let second: f64 = nodes.iter().map(|&(z, w)| w * g(z) * g(z)).sum();
        let cross: f64 = nodes
            .iter()
            .map(|&(z1, w1)| {
                let inner: f64 = nodes.iter().map(|&(e, w2)| w2 * g(r * z1 + s * e)).sum();
                w1 * g(z1) * inner
            })
            .sum();
        (cross - mean * mean) / (second - mean * mean)
    }

    #[test]
    fn calibration_gives_the_configured_output_correlation() {
        for distribution in [Distribution::Pareto, Distribution::ParetoNormal] {
            for rho in [0.25, 0.5, 0.9] {
                let d = DelaySampler::new(&DelayConfig {
                    delay_ns: 0,
                    jitter_ns: 1,
                    correlation: rho,
                    distribution: distribution.clone(),
                })
                .unwrap();
                let r = d.latent_correlation().unwrap();
                let c = correlation_by_quadrature(|z| d.shape.map_latent(z, normal_cdf), r);
                assert!(
                    (c - rho).abs() < 1e-6,
                    "{}: ρ = {rho}, got {c}",
                    distribution.name()
                );
                // Heavy tails lower the Pearson correlation: the latent one must be larger.
                assert!(r > rho);
            }
        }
    }

    #[test]
    fn invalid_configs_are_rejected_with_range() {
        for rho in [-0.1, 1.0, f64::NAN, 2.0] {
            let cfg = DelayConfig {
                correlation: rho,
                ..DelayConfig::default()
            };
            let err = DelaySampler::new(&cfg).unwrap_err();
            assert!(matches!(err, DelayError::Correlation(_)));
            assert!(err.to_string().contains("below 100%"), "{err}");
        }
        let cfg = DelayConfig {
            jitter_ns: MAX_DELAY_NS + 1,
            ..DelayConfig::default()
        };
        assert_eq!(
            DelaySampler::new(&cfg).unwrap_err(),
            DelayError::TooLong {
                what: "jitter",
                value_ns: MAX_DELAY_NS + 1
            }
        );
    }

    #[test]
    fn zero_jitter_is_constant_and_draws_nothing() {
        for distribution in [Distribution::Normal, Distribution::Pareto] {
            let cfg = DelayConfig {
                delay_ns: 5_000,
                correlation: 0.5,
                distribution,
                ..DelayConfig::default()
            };
            let mut d = DelaySampler::new(&cfg).unwrap();
            let mut s = Stream::new(1, 2);
            let before = s.clone().next_u64();
            assert!((0..100).all(|_| d.sample(&mut s) == 5_000));
            assert_eq!(
                s.next_u64(),
                before,
                "a constant delay must not consume draws"
            );
            assert_eq!(d.latent_correlation(), None);
        }
    }

    #[test]
    fn normal_latent_correlation_is_rho_and_uniform_inverts_closed_form() {
        let cfg = |distribution| DelayConfig {
            delay_ns: 1,
            jitter_ns: 1,
            correlation: 0.3,
            distribution,
        };
        let r = DelaySampler::new(&cfg(Distribution::Normal))
            .unwrap()
            .latent_correlation()
            .unwrap();
        assert_eq!(r, 0.3);
        let r = DelaySampler::new(&cfg(Distribution::Uniform))
            .unwrap()
            .latent_correlation()
            .unwrap();
        assert!((6.0 / std::f64::consts::PI * libm::asin(r / 2.0) - 0.3).abs() < 1e-15);
    }

    #[test]
    fn names_round_trip_and_serde_form() {
        for name in ["uniform", "normal", "pareto", "paretonormal"] {
            assert_eq!(Distribution::builtin(name).unwrap().name(), name);
            let json = serde_json::to_string(&Distribution::builtin(name).unwrap()).unwrap();
            assert_eq!(json, format!("\"{name}\""));
        }
        assert_eq!(Distribution::builtin("normal.dist"), None);
        let cfg: DelayConfig = toml::from_str(
            "delay_ns = 20000000\njitter_ns = 5000000\ncorrelation = 0.25\n\
             distribution = \"paretonormal\"\n",
        )
        .unwrap();
        assert_eq!(cfg.distribution, Distribution::ParetoNormal);
        assert_eq!(cfg.jitter_ns, 5_000_000);
        let table = DistTable::parse("mine", "-1 0 1").unwrap();
        let cfg = DelayConfig {
            distribution: Distribution::Table(table),
            ..DelayConfig::default()
        };
        let json = serde_json::to_string(&cfg).unwrap();
        assert_eq!(serde_json::from_str::<DelayConfig>(&json).unwrap(), cfg);
        assert!(toml::from_str::<DelayConfig>("jiter_ns = 5").is_err());
    }
}
