//! Statistics of an action trace: counts, drop/duplicate fractions, delay moments and
//! percentiles, autocorrelation, and Hurst estimates.
//!
//! [`StatsBuilder`] takes records one at a time in constant memory, except for the delay
//! series kept for autocorrelation and Hurst estimation, which is capped (the first
//! `max_series` delays; the report says how many were used). Percentiles come from an HDR
//! histogram with 3 significant digits (relative error at most 0.1 %).
//!
//! # Hurst estimators
//!
//! Each fits a line by least squares on log–log points whose range is reported with the
//! estimate.
//!
//! * **Aggregated variance** ([`aggregated_variance`]): the series is cut into `k = n/m` blocks
//!   of `m`; the variance of the block means falls as `m^{2H−2}`, so `H = 1 + slope/2`. The
//!   sample variance of `k` block means of fGn is biased low by the factor
//!   `(k − k^{2H−1})/(k − 1)`, which matters when `k` is small; the estimate divides it out
//!   (solving for `H` by fixed-point iteration), which makes it unbiased for fGn up to the
//!   curvature of the logarithm. Scales `m` run from 4 to `n/64` (at least 64 blocks).
//! * **Detrended fluctuation** ([`detrended_fluctuation`], DFA-1): the RMS residual of the
//!   profile about a line fitted in each box of `s` grows as `s^H`. The most precise of the
//!   three on fGn (standard deviation about 0.013 at n = 2^18, bias under 0.005).
//! * **Rescaled range** ([`rescaled_range`]): the mean `R/S` over blocks of `d` grows as `d^H`.
//!   It is biased upwards for small `d` (Anis–Lloyd), about +0.05 at `H = 0.5` over the scales
//!   used here (`d` from 16 to `n/4`), so prefer DFA or the aggregated variance; R/S is given as a
//!   second opinion, robust to heavy-tailed marginals.

use hdrhistogram::Histogram;

use crate::action::Action;

/// A Hurst estimate and how it was obtained.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct HurstEstimate {
    /// `aggregated-variance` or `rescaled-range`.
    pub method: &'static str,
    /// The estimate.
    pub hurst: f64,
    /// Smallest block size in the fit.
    pub fit_min: usize,
    /// Largest block size in the fit.
    pub fit_max: usize,
    /// Points in the fit.
    pub points: usize,
}

/// Block sizes from `lo` to `hi`, about `per_decade` per decade, distinct.
fn scales(lo: usize, hi: usize, per_decade: usize) -> Vec<usize> {
    let mut out: Vec<usize> = Vec::new();
    if lo > hi {
        return out;
    }
    let steps = ((hi as f64 / lo as f64).log10() * per_decade as f64).ceil() as usize;
    for i in 0..=steps {
        let m = (lo as f64 * (hi as f64 / lo as f64).powf(i as f64 / steps.max(1) as f64)).round()
            as usize;
        if out.last() != Some(&m) {
            out.push(m);
        }
    }
    out
}

/// Least-squares slope of `y` on `x`.
fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    sxy / sxx
}

/// Fewest blocks at the largest aggregation scale: fewer make the variance of the estimate
/// grow faster than the fit range helps.
const MIN_BLOCKS: usize = 64;

/// The variance–time points of `x` (the classic self-similarity plot): for each aggregation
/// level `m` from 4 to `n/64`, the sample variance of the block means of `m` samples. A
/// short-range dependent series falls with slope −1 on log–log axes, a long-range dependent
/// one with slope `2H − 2`. Empty for fewer than 128 samples.
pub fn variance_time(x: &[f64]) -> Vec<(usize, f64)> {
    let n = x.len();
    if n < 128 {
        return Vec::new();
    }
    scales(4, n / MIN_BLOCKS, 8)
        .into_iter()
        .map(|m| {
            let k = n / m;
            let means: Vec<f64> = x
                .chunks_exact(m)
                .map(|c| c.iter().sum::<f64>() / m as f64)
                .collect();
            let mean = means.iter().sum::<f64>() / k as f64;
            let var = means.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (k - 1) as f64;
            (m, var)
        })
        .collect()
}

/// The aggregated-variance estimate of `H`, or `None` for a series too short for two
/// aggregation levels (256 samples) or a constant one.
pub fn aggregated_variance(x: &[f64]) -> Option<HurstEstimate> {
    let n = x.len();
    let points = variance_time(x);
    if points.len() < 2 || points.iter().any(|&(_, var)| var <= 0.0) {
        return None;
    }
    // (ln m, k, sample variance of the k block means)
    let raw: Vec<(f64, f64, f64)> = points
        .iter()
        .map(|&(m, var)| ((m as f64).ln(), (n / m) as f64, var))
        .collect();
    let fit = |h: f64| {
        let pts: Vec<(f64, f64)> = raw
            .iter()
            .map(|&(lm, k, var)| {
                let bias = (k - k.powf(2.0 * h - 1.0)) / (k - 1.0);
                (lm, (var / bias).ln())
            })
            .collect();
        (1.0 + slope(&pts) / 2.0).clamp(0.01, 0.99)
    };
    // Without correction (h = 0.5 makes the factor 1), then iterate; it contracts quickly.
    let mut h = fit(0.5);
    for _ in 0..20 {
        h = fit(h);
    }
    Some(HurstEstimate {
        method: "aggregated-variance",
        hurst: h,
        fit_min: points[0].0,
        fit_max: points[points.len() - 1].0,
        points: points.len(),
    })
}

/// The rescaled-range estimate of `H`, or `None` for fewer than 128 samples.
pub fn rescaled_range(x: &[f64]) -> Option<HurstEstimate> {
    let n = x.len();
    if n < 128 {
        return None;
    }
    let ds = scales(16, n / 4, 8);
    let mut pts = Vec::with_capacity(ds.len());
    for &d in &ds {
        let mut sum_rs = 0.0;
        let mut blocks = 0u32;
        for c in x.chunks_exact(d) {
            let mean = c.iter().sum::<f64>() / d as f64;
            let (mut cum, mut lo, mut hi, mut ss) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
            for &v in c {
                cum += v - mean;
                lo = lo.min(cum);
                hi = hi.max(cum);
                ss += (v - mean).powi(2);
            }
            let s = (ss / d as f64).sqrt();
            if s > 0.0 {
                sum_rs += (hi - lo) / s;
                blocks += 1;
            }
        }
        if blocks > 0 {
            pts.push(((d as f64).ln(), (sum_rs / f64::from(blocks)).ln()));
        }
    }
    if pts.len() < 2 {
        return None;
    }
    Some(HurstEstimate {
        method: "rescaled-range",
        hurst: slope(&pts),
        fit_min: ds[0],
        fit_max: ds[ds.len() - 1],
        points: pts.len(),
    })
}

/// The detrended-fluctuation (DFA-1) estimate of `H`, or `None` for fewer than 256 samples.
///
/// The profile `Y_i = Σ_{j≤i}(x_j − x̄)` is cut into boxes of `s`; in each a least-squares line
/// is removed, and the root-mean-square residual `F(s)` grows as `s^H` for fGn. Box sizes run
/// from 16 to `n/16` (at least 16 boxes).
pub fn detrended_fluctuation(x: &[f64]) -> Option<HurstEstimate> {
    let n = x.len();
    if n < 256 {
        return None;
    }
    let mean = x.iter().sum::<f64>() / n as f64;
    let mut acc = 0.0;
    let profile: Vec<f64> = x
        .iter()
        .map(|v| {
            acc += v - mean;
            acc
        })
        .collect();
    let sizes = scales(16, n / 16, 8);
    let mut pts = Vec::with_capacity(sizes.len());
    for &s in &sizes {
        let sf = s as f64;
        let t_mean = (sf - 1.0) / 2.0;
        let stt = sf * (sf * sf - 1.0) / 12.0;
        let mut total = 0.0;
        let mut boxes = 0u32;
        for b in profile.chunks_exact(s) {
            // Two passes per box keep the sums centred, so large profile values do not cancel.
            let y_mean = b.iter().sum::<f64>() / sf;
            let (mut syy, mut sty) = (0.0, 0.0);
            for (t, &y) in b.iter().enumerate() {
                let dy = y - y_mean;
                syy += dy * dy;
                sty += (t as f64 - t_mean) * dy;
            }
            total += (syy - sty * sty / stt).max(0.0) / sf;
            boxes += 1;
        }
        let f = (total / f64::from(boxes)).sqrt();
        if f > 0.0 {
            pts.push((sf.ln(), f.ln()));
        }
    }
    if pts.len() < 2 {
        return None;
    }
    Some(HurstEstimate {
        method: "detrended-fluctuation",
        hurst: slope(&pts),
        fit_min: sizes[0],
        fit_max: sizes[sizes.len() - 1],
        points: pts.len(),
    })
}

/// The sample autocorrelation at `lag`, or `None` if the series is too short or constant.
pub fn autocorrelation(x: &[f64], lag: usize) -> Option<f64> {
    let n = x.len();
    if lag >= n {
        return None;
    }
    let mean = x.iter().sum::<f64>() / n as f64;
    let var: f64 = x.iter().map(|v| (v - mean).powi(2)).sum();
    if var == 0.0 {
        return None;
    }
    let c: f64 = (0..n - lag)
        .map(|i| (x[i] - mean) * (x[i + lag] - mean))
        .sum();
    Some(c / var)
}

/// Delay statistics of the delivered instances, in ns.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DelayStats {
    /// Delivered instances (originals and copies).
    pub count: u64,
    /// Mean.
    pub mean_ns: f64,
    /// Standard deviation (population).
    pub std_ns: f64,
    /// Smallest.
    pub min_ns: u64,
    /// Largest.
    pub max_ns: u64,
    /// (percentile, value) for 1, 5, 25, 50, 75, 95, 99, 99.9.
    pub percentiles_ns: Vec<(f64, u64)>,
}

/// The statistics of a trace.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TraceStats {
    /// Records.
    pub records: u64,
    /// `drop` records.
    pub drops: u64,
    /// `pass` records.
    pub passes: u64,
    /// `dup` records.
    pub dups: u64,
    /// Drops per record.
    pub drop_fraction: f64,
    /// Duplicates per record.
    pub dup_fraction: f64,
    /// Delays, if any record delivers.
    pub delay: Option<DelayStats>,
    /// How many delays the autocorrelation and Hurst estimates used.
    pub series_len: usize,
    /// (lag, autocorrelation) for lags 1, 10, 100, 1000 where defined.
    pub autocorrelation: Vec<(usize, f64)>,
    /// Hurst estimates.
    pub hurst: Vec<HurstEstimate>,
    /// The [`variance_time`] points of the delay series (variance in ns²), what the
    /// aggregated-variance estimate fits.
    pub variance_time: Vec<(usize, f64)>,
}

/// Collects [`TraceStats`] from records one at a time.
#[derive(Debug)]
pub struct StatsBuilder {
    drops: u64,
    passes: u64,
    dups: u64,
    // Welford's running mean and sum of squares: stable for billions of records.
    n: u64,
    mean: f64,
    m2: f64,
    min: u64,
    max: u64,
    hist: Histogram<u64>,
    series: Vec<f64>,
    max_series: usize,
}

/// Default cap on the delay series kept for correlation and Hurst estimates.
pub const DEFAULT_MAX_SERIES: usize = 1 << 22;

impl StatsBuilder {
    /// A builder that keeps at most `max_series` delays for correlation and Hurst estimates.
    pub fn new(max_series: usize) -> Self {
        StatsBuilder {
            drops: 0,
            passes: 0,
            dups: 0,
            n: 0,
            mean: 0.0,
            m2: 0.0,
            min: u64::MAX,
            max: 0,
            // Fixed bounds: `saturating_record` does not grow an auto-resizing histogram. 2^62 ns is
            // 146 years; 3 digits over that range cost about 1 MiB.
            hist: Histogram::new_with_bounds(1, 1 << 62, 3).expect("valid bounds and precision"),
            series: Vec::new(),
            max_series,
        }
    }

    /// Adds one record.
    pub fn add(&mut self, a: Action) {
        let d = match a {
            Action::Drop => {
                self.drops += 1;
                return;
            }
            Action::Pass { delay_ns } => {
                self.passes += 1;
                delay_ns
            }
            Action::Dup { delay_ns } => {
                self.dups += 1;
                delay_ns
            }
        };
        self.n += 1;
        let x = d as f64;
        let delta = x - self.mean;
        self.mean += delta / self.n as f64;
        self.m2 += delta * (x - self.mean);
        self.min = self.min.min(d);
        self.max = self.max.max(d);
        self.hist.saturating_record(d);
        if self.series.len() < self.max_series {
            self.series.push(x);
        }
    }

    /// The statistics of the records added.
    pub fn finish(self) -> TraceStats {
        let records = self.drops + self.passes + self.dups;
        let frac = |k: u64| {
            if records == 0 {
                0.0
            } else {
                k as f64 / records as f64
            }
        };
        let delay = (self.n > 0).then(|| DelayStats {
            count: self.n,
            mean_ns: self.mean,
            std_ns: (self.m2 / self.n as f64).sqrt(),
            min_ns: self.min,
            max_ns: self.max,
            percentiles_ns: [1.0, 5.0, 25.0, 50.0, 75.0, 95.0, 99.0, 99.9]
                .iter()
                // A bucket's highest value can lie past the largest delay recorded.
                .map(|&p| (p, self.hist.value_at_percentile(p).min(self.max)))
                .collect(),
        });
        let autocorrelation = [1, 10, 100, 1000]
            .iter()
            .filter_map(|&lag| autocorrelation(&self.series, lag).map(|r| (lag, r)))
            .collect();
        let hurst = [
            aggregated_variance(&self.series),
            rescaled_range(&self.series),
            detrended_fluctuation(&self.series),
        ]
        .into_iter()
        .flatten()
        .collect();
        TraceStats {
            records,
            drops: self.drops,
            passes: self.passes,
            dups: self.dups,
            drop_fraction: frac(self.drops),
            dup_fraction: frac(self.dups),
            delay,
            series_len: self.series.len(),
            autocorrelation,
            hurst,
            variance_time: variance_time(&self.series),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fgn::Fgn;

    #[test]
    fn no_percentile_lies_past_the_largest_delay() {
        let mut b = StatsBuilder::new(100);
        // 1,000,001 ns falls in a bucket whose highest value is above it.
        for _ in 0..10 {
            b.add(Action::Pass {
                delay_ns: 1_000_001,
            });
        }
        let d = b.finish().delay.unwrap();
        assert_eq!(d.max_ns, 1_000_001);
        assert!(
            d.percentiles_ns.iter().all(|&(_, v)| v <= d.max_ns),
            "{d:?}"
        );
        assert_eq!(d.percentiles_ns.last().unwrap().1, 1_000_001);
    }

    fn fgn(h: f64, n: usize, seed: u64) -> Vec<f64> {
        let mut g = Fgn::new(h, n, seed).unwrap();
        (0..n).map(|_| g.next_sample()).collect()
    }

    // The tolerance. Measured over 20 seeds with n = 2^18 exact fGn samples, the
    // aggregated-variance estimate has mean within 0.002 of H (the bias correction works) and
    // standard deviation 0.010, 0.012, 0.014, 0.017, 0.023 for H = 0.5 … 0.9: under long-range
    // dependence the block variances at large scales are strongly correlated, so the spread
    // grows with H (with 2^20 samples it is still 0.020 at H = 0.9). ±0.05, the issue's
    // requirement, is 3σ at H ≤ 0.8 and 2σ at H = 0.9. The seeds are fixed, so the test is
    // deterministic; the tolerance bounds how far a change to the estimator may move it.
    const N: usize = 1 << 18;
    const TOL: f64 = 0.05;

    #[test]
    fn aggregated_variance_recovers_h_of_fgn() {
        for (i, h) in [0.6, 0.7, 0.8, 0.9].into_iter().enumerate() {
            let est = aggregated_variance(&fgn(h, N, 100 + i as u64)).unwrap();
            assert!((est.hurst - h).abs() < TOL, "H = {h}: {est:?}");
            assert_eq!((est.fit_min, est.fit_max), (4, N / MIN_BLOCKS));
        }
    }

    #[test]
    fn white_noise_gives_one_half() {
        // i.i.d. noise from an unrelated generator, not fGn with H = 0.5, so that the test
        // does not share a code path with the generator.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let x: Vec<f64> = (0..N)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 11) as f64
            })
            .collect();
        let av = aggregated_variance(&x).unwrap();
        assert!((av.hurst - 0.5).abs() < TOL, "{av:?}");
        let dfa = detrended_fluctuation(&x).unwrap();
        assert!((dfa.hurst - 0.5).abs() < TOL, "{dfa:?}");
        // R/S is biased up by about 0.05 at these scales; allow 0.1.
        let rs = rescaled_range(&x).unwrap();
        assert!((rs.hurst - 0.5).abs() < 0.1, "{rs:?}");
    }

    #[test]
    fn rescaled_range_sees_long_range_dependence() {
        let rs = rescaled_range(&fgn(0.8, N, 7)).unwrap();
        assert!((rs.hurst - 0.8).abs() < 0.1, "{rs:?}");
    }

    #[test]
    fn detrended_fluctuation_recovers_h_of_fgn() {
        // Measured over 12 seeds with n = 2^18: mean error at most 0.004, standard deviation
        // 0.010, 0.012, 0.013, 0.013 at H = 0.5, 0.7, 0.8, 0.9. ±0.05 is about 4σ: DFA is the
        // most precise of the three estimators here.
        for (i, h) in [0.6, 0.7, 0.8, 0.9].into_iter().enumerate() {
            let est = detrended_fluctuation(&fgn(h, N, 200 + i as u64)).unwrap();
            assert!((est.hurst - h).abs() < TOL, "H = {h}: {est:?}");
            assert_eq!((est.fit_min, est.fit_max), (16, N / 16));
        }
    }

    #[test]
    fn short_or_constant_series_give_no_estimate() {
        assert_eq!(aggregated_variance(&[1.0; 100]), None);
        assert_eq!(aggregated_variance(&[1.0; 1000]), None);
        // Past 128 samples, but no variance-time scale (n/64 < 4), or one: no line to fit.
        let x = fgn(0.7, 256, 3);
        assert_eq!(
            (aggregated_variance(&x[..200]), variance_time(&x[..200])),
            (None, vec![])
        );
        assert_eq!(variance_time(&x).len(), 1);
        assert_eq!(aggregated_variance(&x), None);
        // At every length near the thresholds, an estimate is a number or absent.
        let x = fgn(0.7, 1024, 4);
        for n in 100..=1024 {
            let estimates = [
                aggregated_variance(&x[..n]),
                rescaled_range(&x[..n]),
                detrended_fluctuation(&x[..n]),
            ];
            for e in estimates.into_iter().flatten() {
                assert!(e.hurst.is_finite() && e.points >= 2, "n {n}: {e:?}");
            }
        }
        assert_eq!(autocorrelation(&[2.0; 10], 1), None);
    }

    #[test]
    fn variance_time_falls_as_m_to_the_2h_minus_2() {
        for (h, seed) in [(0.5, 11), (0.8, 12)] {
            let points = variance_time(&fgn(h, N, seed));
            assert_eq!(points.first().map(|p| p.0), Some(4));
            assert_eq!(points.last().map(|p| p.0), Some(N / 64));
            // The slope between the ends, against the fGn's 2H − 2 (the small bias of the
            // sample variance at few blocks is what aggregated_variance corrects).
            let (a, b) = (points[0], points[points.len() - 1]);
            let slope = (b.1.ln() - a.1.ln()) / ((b.0 as f64).ln() - (a.0 as f64).ln());
            assert!(
                (slope - (2.0 * h - 2.0)).abs() < 0.12,
                "H {h}: slope {slope}"
            );
        }
    }

    #[test]
    fn counts_fractions_and_moments() {
        let mut b = StatsBuilder::new(10);
        for a in [
            Action::Drop,
            Action::Pass { delay_ns: 1_000 },
            Action::Dup { delay_ns: 3_000 },
            Action::Pass { delay_ns: 2_000 },
        ] {
            b.add(a);
        }
        let s = b.finish();
        assert_eq!((s.records, s.drops, s.passes, s.dups), (4, 1, 2, 1));
        assert_eq!((s.drop_fraction, s.dup_fraction), (0.25, 0.25));
        let d = s.delay.unwrap();
        assert_eq!((d.count, d.min_ns, d.max_ns), (3, 1_000, 3_000));
        assert!((d.mean_ns - 2_000.0).abs() < 1e-9);
        assert!((d.std_ns - (2.0e6f64 / 3.0).sqrt()).abs() < 1e-6);
        // HDR percentiles are exact to 3 significant digits.
        let p = |i: usize| d.percentiles_ns[i].1 as f64;
        assert!(
            (p(0) - 1_000.0).abs() <= 1.0 && (p(7) - 3_000.0).abs() <= 3.0,
            "{d:?}"
        );
        assert!(d.percentiles_ns.windows(2).all(|w| w[0].1 <= w[1].1));
        assert_eq!(s.series_len, 3);
        assert!(s.hurst.is_empty(), "too short for an estimate");
    }
}
