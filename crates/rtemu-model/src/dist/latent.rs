//! The latent Gaussian process behind correlated delays, and its calibration.
//!
//! Correlated delays are `g(z_n)` where `z_n` is a stationary Gaussian AR(1) process with
//! lag-1 correlation `r` and `g = F⁻¹ ∘ Φ` maps a standard normal to the target distribution
//! (a Gaussian copula). The output's lag-1 Pearson correlation is a function `c(r)` of the
//! latent one, which Mehler's formula gives through the Hermite coefficients of `g`:
//!
//! ```text
//! g(z) = Σ_k a_k h_k(z),   h_k = He_k / √k!  (orthonormal under the standard normal),
//! c(r) = Σ_{k≥1} a_k² r^k / Σ_{k≥1} a_k².
//! ```
//!
//! `c` is increasing on `[0, 1]` with `c(0) = 0` and `c(1) = 1`, so the `r` that gives the
//! configured output correlation is found by bisection. The series is truncated after `K`
//! terms; the missing mass `R = Var g − Σ_{k≤K} a_k²` is added as `R·r^{K+1}`, an upper
//! bound of the missing terms, so `c(r)` is overstated by at most `R·r^{K+1}`. That is at
//! rounding level for the smooth maps; for tables it grows as `r → 1` and the table gets
//! coarser: for the coarsest, a two-valued table, it is 10⁻¹⁵ at `r = 0.9`, 4·10⁻⁴ at
//! `r = 0.99` and 0.01 at `r = 0.999`.

use super::normal::{normal_pdf, normal_quantile};

/// The Hermite expansion of a map `g`, enough to evaluate `c(r)`.
#[derive(Debug, Clone)]
pub(crate) struct Expansion {
    /// `a_k²` for `k = 1..=K`.
    squares: Vec<f64>,
    /// `Var g(Z)`.
    variance: f64,
}

/// Terms kept for smooth maps: their coefficients fall geometrically (by about 1/2 per term
/// for the Pareto tail), so 120 terms leave nothing measurable.
const SMOOTH_TERMS: usize = 120;
/// Terms kept for step maps (tables): their coefficients fall only like `k^-3/4`, so keep
/// more; the remainder term covers the rest.
const STEP_TERMS: usize = 400;

impl Expansion {
    /// The expansion of a smooth `g` by composite Simpson quadrature on `[-12, 12]`; the
    /// standard normal mass outside is below 1e-32 and even the Pareto tail's contribution
    /// to `E[g²]` there is below 1e-10.
    pub(crate) fn of_smooth(g: impl Fn(f64) -> f64) -> Self {
        const HALF_WIDTH: f64 = 12.0;
        const STEPS: usize = 6144; // even, step 1/256
        let step = 2.0 * HALF_WIDTH / STEPS as f64;
        let mut coeffs = vec![0.0; SMOOTH_TERMS + 1];
        let mut second_moment = 0.0;
        let mut hermite = Hermite::new(SMOOTH_TERMS + 1);
        for i in 0..=STEPS {
            let z = -HALF_WIDTH + step * i as f64;
            let simpson = match i {
                0 => 1.0,
                i if i == STEPS => 1.0,
                i if i % 2 == 1 => 4.0,
                _ => 2.0,
            };
            let weight = simpson * step / 3.0 * normal_pdf(z);
            let gz = g(z);
            second_moment += weight * gz * gz;
            for (c, h) in coeffs.iter_mut().zip(hermite.at(z)) {
                *c += weight * gz * h;
            }
        }
        let mean = coeffs[0];
        Expansion {
            squares: coeffs[1..].iter().map(|a| a * a).collect(),
            variance: second_moment - mean * mean,
        }
    }

    /// The exact expansion of a step map that takes the value `values[i]` on the latent
    /// interval where `Φ(z)` lies in `[i/n, (i+1)/n)`.
    ///
    /// Integrating by parts, `a_k = k^{-1/2} Σ_j Δ_j φ(b_j) h_{k-1}(b_j)` over the interior
    /// boundaries `b_j = Φ⁻¹(j/n)` with jumps `Δ_j = values[j] - values[j-1]`.
    pub(crate) fn of_steps(values: &[f64]) -> Self {
        let n = values.len();
        let mut coeffs = vec![0.0; STEP_TERMS + 1];
        let mut hermite = Hermite::new(STEP_TERMS);
        for j in 1..n {
            let jump = values[j] - values[j - 1];
            if jump == 0.0 {
                continue;
            }
            let b = normal_quantile(j as f64 / n as f64);
            let w = jump * normal_pdf(b);
            for (c, h) in coeffs[1..].iter_mut().zip(hermite.at(b)) {
                *c += w * h;
            }
        }
        let mean = values.iter().sum::<f64>() / n as f64;
        let variance = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n as f64;
        Expansion {
            squares: (1..=STEP_TERMS)
                .map(|k| {
                    let a = coeffs[k] / (k as f64).sqrt();
                    a * a
                })
                .collect(),
            variance,
        }
    }

    /// The variance of `g(Z)`.
    #[cfg(test)]
    pub(crate) fn variance(&self) -> f64 {
        self.variance
    }

    /// `c(r)`: the lag-1 correlation of `g(z_n)` when the latent correlation is `r`.
    pub(crate) fn output_correlation(&self, r: f64) -> f64 {
        let mut power = 1.0;
        let mut sum = 0.0;
        let mut captured = 0.0;
        for a2 in &self.squares {
            power *= r;
            sum += a2 * power;
            captured += a2;
        }
        let remainder = (self.variance - captured).max(0.0);
        (sum + remainder * power * r) / self.variance
    }

    /// The latent `r` in `[0, 1)` whose output correlation is `rho`.
    pub(crate) fn latent_for(&self, rho: f64) -> f64 {
        if self.variance <= 0.0 {
            // A constant map: every r gives the same (undefined) correlation.
            return rho;
        }
        let (mut lo, mut hi) = (0.0_f64, 1.0_f64);
        for _ in 0..64 {
            let mid = 0.5 * (lo + hi);
            if self.output_correlation(mid) < rho {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        0.5 * (lo + hi)
    }
}

/// Evaluates the normalised Hermite polynomials `h_k(z) = He_k(z)/√k!`, `k < len`, by the
/// stable recurrence `h_{k+1} = (z h_k − √k h_{k−1}) / √(k+1)`, with the roots computed once.
struct Hermite {
    sqrt: Vec<f64>,
    inv_sqrt: Vec<f64>,
    values: Vec<f64>,
}

impl Hermite {
    fn new(len: usize) -> Self {
        let sqrt: Vec<f64> = (0..=len).map(|k| (k as f64).sqrt()).collect();
        Hermite {
            inv_sqrt: sqrt.iter().map(|r| 1.0 / r).collect(),
            sqrt,
            values: vec![0.0; len.max(2)],
        }
    }

    /// `h_0(z), h_1(z), …`.
    fn at(&mut self, z: f64) -> &[f64] {
        let h = &mut self.values;
        h[0] = 1.0;
        h[1] = z;
        for k in 1..h.len() - 1 {
            h[k + 1] = (z * h[k] - self.sqrt[k] * h[k - 1]) * self.inv_sqrt[k + 1];
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::super::normal::normal_cdf;
    use super::*;
    use std::f64::consts::PI;

    #[test]
    fn identity_map_has_correlation_equal_to_latent() {
        let e = Expansion::of_smooth(|z| z);
        assert!((e.variance() - 1.0).abs() < 1e-9);
        for r in [0.1, 0.5, 0.9, 0.99] {
            assert!((e.output_correlation(r) - r).abs() < 1e-9);
        }
    }

    /// The uniform map has the closed form `c(r) = (6/π) asin(r/2)`: the numerical expansion,
    /// smooth and stepped, must agree with it.
    #[test]
    fn uniform_map_matches_closed_form() {
        let smooth = Expansion::of_smooth(|z| 2.0 * normal_cdf(z) - 1.0);
        assert!((smooth.variance() - 1.0 / 3.0).abs() < 1e-9);
        // 4096 equal steps approximate the same uniform map.
        let n = 4096;
        let steps: Vec<f64> = (0..n)
            .map(|i| (2 * i + 1) as f64 / n as f64 - 1.0)
            .collect();
        let stepped = Expansion::of_steps(&steps);
        for r in [0.1, 0.25, 0.5, 0.75, 0.9, 0.99] {
            let exact = 6.0 / PI * libm::asin(r / 2.0);
            assert!(
                (smooth.output_correlation(r) - exact).abs() < 1e-6,
                "r = {r}"
            );
            assert!(
                (stepped.output_correlation(r) - exact).abs() < 1e-4,
                "r = {r}"
            );
        }
    }

    /// A two-valued table is `sign(z)`, whose correlation is Sheppard's `(2/π) asin(r)`: the
    /// worst case for the truncated series, whose error the module doc quotes.
    #[test]
    fn sign_map_matches_sheppard() {
        let e = Expansion::of_steps(&[-1.0, 1.0]);
        assert!((e.variance() - 1.0).abs() < 1e-12);
        for (r, tol) in [
            (0.1, 1e-12),
            (0.5, 1e-12),
            (0.9, 1e-12),
            (0.99, 5e-4),
            (0.999, 0.011),
        ] {
            let exact = 2.0 / PI * libm::asin(r);
            let error = e.output_correlation(r) - exact;
            assert!((0.0..tol).contains(&error.abs()), "r = {r}: error {error}");
            assert!(error > -1e-12, "the remainder term only overstates");
        }
        let r = e.latent_for(0.5);
        assert!((r - libm::sin(PI / 4.0)).abs() < 1e-12, "r = {r}");
    }

    /// A lognormal map `exp(z/2)` has `c(r) = (e^{r/4} − 1)/(e^{1/4} − 1)`.
    #[test]
    fn lognormal_map_matches_closed_form_and_inverts() {
        let e = Expansion::of_smooth(|z| libm::exp(z / 2.0));
        for r in [0.2, 0.6, 0.95] {
            let exact = libm::expm1(r / 4.0) / libm::expm1(0.25);
            assert!((e.output_correlation(r) - exact).abs() < 1e-9, "r = {r}");
        }
        for rho in [0.0, 0.25, 0.5, 0.9, 0.999] {
            let r = e.latent_for(rho);
            assert!((e.output_correlation(r) - rho).abs() < 1e-12, "rho = {rho}");
        }
    }
}
