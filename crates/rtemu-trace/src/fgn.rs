//! Fractional Gaussian noise by the exact circulant-embedding method (Davies & Harte 1987;
//! Dietrich & Newsam 1997), and its mapping to packet delays.
//!
//! # Method
//!
//! Standard fGn with Hurst parameter `H` has autocovariance
//! `γ(k) = ½(|k+1|^{2H} − 2|k|^{2H} + |k−1|^{2H})`. For a block of `n` samples (a power of
//! two) the sequence `c = γ(0), γ(1), …, γ(n), γ(n−1), …, γ(1)` of length `M = 2n` is the first
//! row of a circulant matrix that embeds the `n×n` covariance; its eigenvalues `λ = FFT(c)` are
//! non-negative for fGn with any `H` in (0, 1). With `W_j = √(λ_j/M)(A_j + iB_j)`, `A`, `B`
//! i.i.d. standard normal, `Y = FFT(W)` has `E[Y_k Ȳ_l] = 2c(k−l)` and `E[Y_k Y_l] = 0`, so the
//! real and imaginary parts of `Y_0 … Y_{n−1}` are two independent exact fGn blocks: one FFT of
//! length `2n` gives `2n` samples. The cost is O(n log n) per block.
//!
//! # Unlimited length
//!
//! Blocks are generated one after another with constant memory; successive blocks are
//! independent, so the correlation structure is exact within a block of `n` samples and absent
//! across block boundaries. A trace no longer than one block is exact throughout; for longer
//! traces, choose `n` at least as large as the largest time scale of interest (the default,
//! 2²⁰ samples, is 17 minutes of a 1 kpps link), or use the ON/OFF generator
//! ([`crate::onoff`]), whose long-range dependence has no such horizon.
//!
//! # Delays
//!
//! [`FgnDelays`] maps a sample `x` to `mean + std·x` ns, rounded to the output resolution.
//! An affine map keeps the autocorrelation, hence `H`, exactly. Negative values cannot be
//! delays: they are clamped to 0 and counted ([`FgnDelays::clamped`]). Clamping changes the
//! marginal distribution and, slightly, the correlation; with `mean ≥ 3·std` fewer than 0.14 %
//! of samples are clamped and the effect on `H` is below what the estimators can resolve.

use std::sync::Arc;

use rand_xoshiro::rand_core::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use rustfft::num_complex::Complex;
use rustfft::{Fft, FftPlanner};

/// Why a generator cannot be built; each says the valid range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GenError {
    /// `H` is outside (0, 1).
    #[error("Hurst parameter {0} is outside (0, 1)")]
    Hurst(f64),
    /// The block length is not a power of two in range.
    #[error("block length {0} must be a power of two from 2 to 2^26")]
    Block(usize),
    /// A parameter is outside its range.
    #[error("{name} {value} is out of range: {valid}")]
    Parameter {
        /// Which parameter.
        name: &'static str,
        /// Its value.
        value: f64,
        /// What it may be.
        valid: &'static str,
    },
    /// A numerical failure of the embedding (not expected for fGn).
    #[error("circulant embedding failed: eigenvalue {0} is negative")]
    Embedding(f64),
    /// The block needs more memory than the machine has.
    #[error(transparent)]
    Memory(#[from] rtemu_sys::memory::MemoryError),
}

/// The largest block length accepted (2²⁶ samples use about 3 GiB during generation).
pub const MAX_BLOCK: usize = 1 << 26;

/// Default block length.
pub const DEFAULT_BLOCK: usize = 1 << 20;

/// A stream of standard fractional Gaussian noise (mean 0, variance 1).
pub struct Fgn {
    n: usize,
    /// √(λ_j / M) for j in 0..M.
    scale: Vec<f64>,
    fft: Arc<dyn Fft<f64>>,
    buf: Vec<Complex<f64>>,
    scratch: Vec<Complex<f64>>,
    rng: Xoshiro256PlusPlus,
    /// Index of the next sample in the current FFT output: 0..n real parts, n..2n imaginary.
    pos: usize,
}

impl std::fmt::Debug for Fgn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fgn")
            .field("block", &self.n)
            .finish_non_exhaustive()
    }
}

/// The autocovariance of standard fGn at lag `k`.
pub fn autocovariance(hurst: f64, k: u64) -> f64 {
    let k = k as f64;
    let h2 = 2.0 * hurst;
    0.5 * ((k + 1.0).powf(h2) - 2.0 * k.powf(h2) + (k - 1.0).abs().powf(h2))
}

impl Fgn {
    /// A generator with Hurst parameter `hurst`, blocks of `block` samples, seeded by `seed`.
    pub fn new(hurst: f64, block: usize, seed: u64) -> Result<Fgn, GenError> {
        if !(hurst > 0.0 && hurst < 1.0) {
            return Err(GenError::Hurst(hurst));
        }
        if !block.is_power_of_two() || !(2..=MAX_BLOCK).contains(&block) {
            return Err(GenError::Block(block));
        }
        let n = block;
        let m = 2 * n;
        // The embedding, the FFT's scratch and twiddles (complex f64 each) and the scale, per
        // point of the FFT.
        let needed = rtemu_sys::memory::bytes(m as u64, 3 * 16 + 8);
        rtemu_sys::memory::check(format!("an fGn block of {block} samples"), needed)?;
        let mut planner = FftPlanner::new();
        let fft = planner.plan_fft_forward(m);
        let mut c: Vec<Complex<f64>> = (0..m)
            .map(|k| Complex::new(autocovariance(hurst, k.min(m - k) as u64), 0.0))
            .collect();
        let mut scratch = vec![Complex::new(0.0, 0.0); fft.get_inplace_scratch_len()];
        fft.process_with_scratch(&mut c, &mut scratch);
        // Rounding can leave eigenvalues a few ulps below zero; anything larger is a real
        // failure of the embedding.
        let tolerance = 1e-9 * c[0].re.abs().max(1.0);
        let mut scale = Vec::with_capacity(m);
        for z in &c {
            if z.re < -tolerance {
                return Err(GenError::Embedding(z.re));
            }
            scale.push((z.re.max(0.0) / m as f64).sqrt());
        }
        Ok(Fgn {
            n,
            scale,
            fft,
            buf: c,
            scratch,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            pos: 2 * n,
        })
    }

    /// The block length.
    pub fn block(&self) -> usize {
        self.n
    }

    /// The next sample.
    #[inline]
    pub fn next_sample(&mut self) -> f64 {
        if self.pos == 2 * self.n {
            self.generate();
        }
        let p = self.pos;
        self.pos += 1;
        if p < self.n {
            self.buf[p].re
        } else {
            self.buf[p - self.n].im
        }
    }

    fn generate(&mut self) {
        for (w, &s) in self.buf.iter_mut().zip(&self.scale) {
            let a = standard_normal(&mut self.rng);
            let b = standard_normal(&mut self.rng);
            *w = Complex::new(s * a, s * b);
        }
        self.fft
            .process_with_scratch(&mut self.buf, &mut self.scratch);
        self.pos = 0;
    }
}

#[inline]
fn standard_normal(rng: &mut Xoshiro256PlusPlus) -> f64 {
    use rand::RngExt as _;
    rng.sample(rand_distr::StandardNormal)
}

/// Delays from fGn: `mean + std·x`, rounded to `resolution_ns`, negative values clamped to 0
/// and counted.
#[derive(Debug)]
pub struct FgnDelays {
    fgn: Fgn,
    mean_ns: f64,
    std_ns: f64,
    resolution_ns: u64,
    clamped: u64,
}

impl FgnDelays {
    /// Delays with the given mean and standard deviation (ns), rounded to multiples of
    /// `resolution_ns` (at least 1).
    pub fn new(fgn: Fgn, mean_ns: f64, std_ns: f64, resolution_ns: u64) -> Result<Self, GenError> {
        for (name, value) in [("mean", mean_ns), ("std", std_ns)] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(GenError::Parameter {
                    name,
                    value,
                    valid: "give a finite value of 0 or more",
                });
            }
        }
        Ok(FgnDelays {
            fgn,
            mean_ns,
            std_ns,
            resolution_ns: resolution_ns.max(1),
            clamped: 0,
        })
    }

    /// The next delay in ns.
    #[inline]
    pub fn next_delay_ns(&mut self) -> u64 {
        let d = self.mean_ns + self.std_ns * self.fgn.next_sample();
        if d < 0.0 {
            self.clamped += 1;
            return 0;
        }
        let r = self.resolution_ns as f64;
        // `as` saturates, so an absurd delay becomes u64::MAX rather than wrapping.
        ((d / r).round() * r) as u64
    }

    /// How many delays were negative and clamped to 0.
    pub fn clamped(&self) -> u64 {
        self.clamped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_parameters_are_refused_with_the_range() {
        assert_eq!(Fgn::new(1.0, 64, 1).unwrap_err(), GenError::Hurst(1.0));
        assert_eq!(Fgn::new(0.5, 100, 1).unwrap_err(), GenError::Block(100));
        assert!(Fgn::new(f64::NAN, 64, 1).is_err());
        let fgn = Fgn::new(0.7, 64, 1).unwrap();
        assert!(FgnDelays::new(fgn, -1.0, 1.0, 1).is_err());
    }

    #[test]
    fn white_noise_case_has_unit_variance_and_no_correlation() {
        // H = 0.5 is i.i.d. N(0,1). With n = 2^18 samples the sample variance has standard
        // error √(2/n) ≈ 0.0028 and the lag-1 correlation 1/√n ≈ 0.002; 5σ tolerances.
        let mut g = Fgn::new(0.5, 1 << 12, 3).unwrap();
        let x: Vec<f64> = (0..1 << 18).map(|_| g.next_sample()).collect();
        let n = x.len() as f64;
        let mean = x.iter().sum::<f64>() / n;
        let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
        let lag1 = x
            .windows(2)
            .map(|w| (w[0] - mean) * (w[1] - mean))
            .sum::<f64>()
            / n
            / var;
        assert!(mean.abs() < 5.0 / n.sqrt(), "{mean}");
        assert!((var - 1.0).abs() < 5.0 * (2.0 / n).sqrt(), "{var}");
        assert!(lag1.abs() < 5.0 / n.sqrt(), "{lag1}");
    }

    #[test]
    fn sample_autocorrelation_matches_the_model() {
        // Averaged over 2^18 samples, the lag-k sample autocorrelation of fGn with H = 0.8
        // should match γ(k) (0.516 at lag 1, 0.249 at lag 10). Its standard error is inflated by
        // long-range dependence to roughly n^{H−1} ≈ 0.14 for one block of 2^14, so averaged
        // over 16 independent blocks about 0.035; subtracting each block's mean biases it down by
        // about n^{2H−2} ≈ 0.02. Tolerance 0.05.
        let h = 0.8;
        let n = 1 << 14;
        let mut g = Fgn::new(h, n, 11).unwrap();
        for lag in [1usize, 10] {
            let mut acc = 0.0;
            let blocks = 16;
            for _ in 0..blocks {
                let x: Vec<f64> = (0..n).map(|_| g.next_sample()).collect();
                let m = x.iter().sum::<f64>() / n as f64;
                let v = x.iter().map(|a| (a - m).powi(2)).sum::<f64>();
                let c: f64 = (0..n - lag).map(|i| (x[i] - m) * (x[i + lag] - m)).sum();
                acc += c / v;
            }
            let r = acc / f64::from(blocks);
            let want = autocovariance(h, lag as u64);
            assert!((r - want).abs() < 0.05, "lag {lag}: {r} vs {want}");
        }
    }

    #[test]
    fn delays_follow_mean_and_std_and_clamp_negatives() {
        let g = Fgn::new(0.5, 1 << 12, 5).unwrap();
        let mut d = FgnDelays::new(g, 5e6, 1e6, 1_000).unwrap();
        let xs: Vec<u64> = (0..1 << 16).map(|_| d.next_delay_ns()).collect();
        assert!(xs.iter().all(|x| x % 1_000 == 0));
        let mean = xs.iter().sum::<u64>() as f64 / xs.len() as f64;
        // Standard error 1e6/√65536 ≈ 3.9e3 ns; 5σ.
        assert!((mean - 5e6).abs() < 2e4, "{mean}");
        assert_eq!(d.clamped(), 0);
        let g = Fgn::new(0.5, 1 << 12, 5).unwrap();
        let mut d = FgnDelays::new(g, 0.0, 1e6, 1).unwrap();
        let zeros = (0..10_000).filter(|_| d.next_delay_ns() == 0).count() as u64;
        // Half the samples are negative: 5000 ± 5·50.
        assert_eq!(d.clamped(), zeros);
        assert!((4_750..=5_250).contains(&zeros), "{zeros}");
    }

    #[test]
    fn the_same_seed_gives_the_same_stream() {
        let mut a = Fgn::new(0.8, 256, 9).unwrap();
        let mut b = Fgn::new(0.8, 256, 9).unwrap();
        let mut c = Fgn::new(0.8, 256, 10).unwrap();
        let xa: Vec<f64> = (0..1000).map(|_| a.next_sample()).collect();
        let xb: Vec<f64> = (0..1000).map(|_| b.next_sample()).collect();
        let xc: Vec<f64> = (0..1000).map(|_| c.next_sample()).collect();
        assert_eq!(xa, xb);
        assert_ne!(xa, xc);
    }
}
