//! Statistics over measured samples, computed after the measurement (never during it).
//!
//! Two views, as the papers and the tools users know report them:
//!
//! * [`ErrorStats`]: the timing paper's Table 1 columns, the sample mean and variance (with
//!   `n − 1`) of the absolute error `a_i = y_i − x_i` and the relative error `r_i = a_i / x_i`;
//! * [`Distribution`]: HdrHistogram percentiles 50/90/99/99.9/99.99 plus min and max, as
//!   cyclictest, sockperf and irtt print them, with max the headline for real time;
//! * [`Histogram`]: cyclictest's one-bucket-per-microsecond histogram.

use hdrhistogram::Histogram as Hdr;
use serde::Serialize;

/// Significant decimal digits kept by the histogram: values are exact below 2048 ns and within
/// 0.1 % above, finer than any timer this lab measures.
const SIGNIFICANT_DIGITS: u8 = 3;

/// Running mean and sample variance (Welford), stable for the ns² sums that overflow a naive
/// sum of squares in `f64` precision.
#[derive(Clone, Copy, Debug, Default)]
struct Moments {
    n: u64,
    mean: f64,
    m2: f64,
}

impl Moments {
    fn push(&mut self, x: f64) {
        self.n += 1;
        let delta = x - self.mean;
        self.mean += delta / self.n as f64;
        self.m2 += delta * (x - self.mean);
    }

    /// The sample variance with `n − 1`, as the paper defines it; 0 below two samples.
    fn variance(&self) -> f64 {
        if self.n < 2 {
            0.0
        } else {
            self.m2 / (self.n - 1) as f64
        }
    }
}

/// The timing paper's error statistics for one series of sleeps.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ErrorStats {
    /// Requests in the series.
    pub n: u64,
    /// Sample mean of the absolute error `y − x`, in ns.
    pub abs_mean_ns: f64,
    /// Sample variance of the absolute error, in ns².
    pub abs_var_ns2: f64,
    /// Sample mean of the relative error `(y − x) / x` (requests of 0 ns are left out).
    pub rel_mean: f64,
    /// Sample variance of the relative error.
    pub rel_var: f64,
}

impl ErrorStats {
    /// The statistics of `actual[i]` against `requested[i]`, both in ns.
    ///
    /// # Panics
    /// If the slices differ in length (a programming error, not an input error).
    pub fn compute(requested: &[u64], actual: &[u64]) -> ErrorStats {
        assert_eq!(requested.len(), actual.len(), "one actual time per request");
        let (mut abs, mut rel) = (Moments::default(), Moments::default());
        for (&x, &y) in requested.iter().zip(actual) {
            let a = y as f64 - x as f64;
            abs.push(a);
            if x > 0 {
                rel.push(a / x as f64);
            }
        }
        ErrorStats {
            n: abs.n,
            abs_mean_ns: abs.mean,
            abs_var_ns2: abs.variance(),
            rel_mean: rel.mean,
            rel_var: rel.variance(),
        }
    }
}

/// Percentiles of signed ns samples (errors may be negative: `slack` wakes early on purpose).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Distribution {
    /// Samples.
    pub n: u64,
    /// Smallest sample, exact.
    pub min_ns: i64,
    /// Median.
    pub p50_ns: i64,
    /// 90th percentile.
    pub p90_ns: i64,
    /// 99th percentile.
    pub p99_ns: i64,
    /// 99.9th percentile.
    pub p99_9_ns: i64,
    /// 99.99th percentile.
    pub p99_99_ns: i64,
    /// Largest sample, exact: the headline for real time.
    pub max_ns: i64,
}

impl Distribution {
    /// The distribution of `samples`; all zeros when there are none.
    pub fn compute(samples: &[i64]) -> Distribution {
        let (Some(&min), Some(&max)) = (samples.iter().min(), samples.iter().max()) else {
            return Distribution {
                n: 0,
                min_ns: 0,
                p50_ns: 0,
                p90_ns: 0,
                p99_ns: 0,
                p99_9_ns: 0,
                p99_99_ns: 0,
                max_ns: 0,
            };
        };
        // HdrHistogram records non-negative values: shift by the minimum and back.
        let mut histogram =
            Hdr::<u64>::new(SIGNIFICANT_DIGITS).expect("3 significant digits are valid");
        for &s in samples {
            histogram
                .record(s.abs_diff(min))
                .expect("an auto-resizing histogram takes any u64");
        }
        // hdrhistogram answers with the highest value equivalent to the bucket; clamp so a
        // percentile never exceeds the exact maximum.
        let at = |q: f64| (min + histogram.value_at_quantile(q) as i64).min(max);
        Distribution {
            n: samples.len() as u64,
            min_ns: min,
            p50_ns: at(0.50),
            p90_ns: at(0.90),
            p99_ns: at(0.99),
            p99_9_ns: at(0.999),
            p99_99_ns: at(0.9999),
            max_ns: max,
        }
    }
}

/// A cyclictest-style histogram: one bucket per microsecond of `samples` (ns), from 0 to
/// `buckets − 1` µs, with what falls outside counted apart.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Histogram {
    /// `counts[i]`: samples in `[i, i + 1)` µs.
    pub counts: Vec<u64>,
    /// Samples below 0 (possible only for methods that may wake early, such as `slack`).
    pub underflows: u64,
    /// Samples at or above `buckets` µs.
    pub overflows: u64,
}

impl Histogram {
    /// Buckets `samples` (ns) into `buckets` one-microsecond bins.
    pub fn per_microsecond(samples: &[i64], buckets: usize) -> Histogram {
        let mut histogram = Histogram {
            counts: vec![0; buckets],
            underflows: 0,
            overflows: 0,
        };
        for &s in samples {
            if s < 0 {
                histogram.underflows += 1;
            } else {
                match histogram.counts.get_mut((s / 1_000) as usize) {
                    Some(count) => *count += 1,
                    None => histogram.overflows += 1,
                }
            }
        }
        histogram
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn error_stats_of_known_series() {
        // Errors 1, 2, 3, 4 µs on requests of 10, 20, 30, 40 µs.
        let requested = [10_000, 20_000, 30_000, 40_000];
        let actual = [11_000, 22_000, 33_000, 44_000];
        let s = ErrorStats::compute(&requested, &actual);
        assert_eq!(s.n, 4);
        assert!((s.abs_mean_ns - 2_500.0).abs() < 1e-9);
        // Σ(a − ā)² = 1.5² + 0.5² + 0.5² + 1.5² = 5 µs², over n − 1 = 3.
        assert!((s.abs_var_ns2 - 5.0e6 / 3.0).abs() < 1e-3);
        // Every relative error is 0.1: mean 0.1, variance 0.
        assert!((s.rel_mean - 0.1).abs() < 1e-12);
        assert!(s.rel_var.abs() < 1e-20);
    }

    #[test]
    fn negative_errors_and_zero_requests() {
        let s = ErrorStats::compute(&[0, 1_000], &[500, 500]);
        assert!((s.abs_mean_ns - 0.0).abs() < 1e-9); // +500 and −500
        assert!((s.abs_var_ns2 - 500_000.0).abs() < 1e-6); // (500² + 500²) / 1
        assert!((s.rel_mean - -0.5).abs() < 1e-12); // only the 1 µs request counts
        assert_eq!(s.rel_var, 0.0);
    }

    #[test]
    fn one_sample_has_no_variance() {
        let s = ErrorStats::compute(&[1_000], &[3_000]);
        assert_eq!((s.n, s.abs_mean_ns, s.abs_var_ns2), (1, 2_000.0, 0.0));
    }

    #[test]
    fn percentiles_of_one_to_ten_thousand() {
        let samples: Vec<i64> = (1..=10_000).collect();
        let d = Distribution::compute(&samples);
        assert_eq!((d.n, d.min_ns, d.max_ns), (10_000, 1, 10_000));
        // Within the histogram's 0.1 % resolution of the exact order statistics.
        for (got, want) in [
            (d.p50_ns, 5_000),
            (d.p90_ns, 9_000),
            (d.p99_ns, 9_900),
            (d.p99_9_ns, 9_990),
            (d.p99_99_ns, 9_999),
        ] {
            assert!(
                got.abs_diff(want) <= want as u64 / 1_000 + 1,
                "{got} vs {want}"
            );
        }
    }

    #[test]
    fn percentiles_of_negative_samples_and_outliers() {
        let mut samples = vec![-2_000i64; 999];
        samples.push(1_000_000);
        let d = Distribution::compute(&samples);
        assert_eq!(d.min_ns, -2_000);
        assert_eq!(d.p50_ns, -2_000);
        assert_eq!(d.p99_ns, -2_000);
        assert_eq!(d.p99_99_ns, 1_000_000);
        assert_eq!(d.max_ns, 1_000_000);
        assert_eq!(Distribution::compute(&[]).n, 0);
    }

    #[test]
    fn histogram_buckets_by_microsecond() {
        let h = Histogram::per_microsecond(&[-1, 0, 999, 1_000, 2_500, 2_999, 3_000, 9_999_999], 3);
        assert_eq!(h.counts, vec![2, 1, 2]);
        assert_eq!((h.underflows, h.overflows), (1, 2));
    }

    proptest! {
        #[test]
        fn histograms_count_every_sample(
            samples in proptest::collection::vec(-10_000i64..200_000, 0..300),
            buckets in 0usize..300,
        ) {
            let h = Histogram::per_microsecond(&samples, buckets);
            let total = h.counts.iter().sum::<u64>() + h.underflows + h.overflows;
            prop_assert_eq!(total, samples.len() as u64);
        }

        #[test]
        fn percentiles_are_ordered_and_bounded(
            samples in proptest::collection::vec(-1_000_000_000i64..1_000_000_000, 1..500)
        ) {
            let d = Distribution::compute(&samples);
            let chain = [d.min_ns, d.p50_ns, d.p90_ns, d.p99_ns, d.p99_9_ns, d.p99_99_ns, d.max_ns];
            prop_assert!(chain.windows(2).all(|w| w[0] <= w[1]), "{:?}", chain);
            prop_assert_eq!(d.min_ns, *samples.iter().min().unwrap());
            prop_assert_eq!(d.max_ns, *samples.iter().max().unwrap());
        }

        #[test]
        fn mean_matches_the_direct_formula(
            pairs in proptest::collection::vec((1u64..100_000_000, 0u64..200_000_000), 2..300)
        ) {
            let (x, y): (Vec<u64>, Vec<u64>) = pairs.into_iter().unzip();
            let s = ErrorStats::compute(&x, &y);
            let n = x.len() as f64;
            let mean = x.iter().zip(&y).map(|(&x, &y)| y as f64 - x as f64).sum::<f64>() / n;
            let var = x.iter().zip(&y)
                .map(|(&x, &y)| (y as f64 - x as f64 - mean).powi(2)).sum::<f64>() / (n - 1.0);
            prop_assert!((s.abs_mean_ns - mean).abs() <= 1e-6 * mean.abs().max(1.0));
            prop_assert!((s.abs_var_ns2 - var).abs() <= 1e-6 * var.max(1.0));
        }
    }
}
