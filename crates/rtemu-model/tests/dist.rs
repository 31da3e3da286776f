//! Statistical tests of the delay distributions (`rtemu_model::dist`).
//!
//! Every test uses a fixed seed. Tolerances are derived from the sample size N, as a multiple
//! (5, unless said otherwise) of the estimator's standard error, which the comment beside each
//! states; so a correct sampler fails with a probability around 10⁻⁶ for a random seed, and
//! with the fixed seed never.

use rtemu_model::dist::{DelayConfig, DelaySampler, DistTable, Distribution, TableErrorKind};
use rtemu_model::Stream;

/// Where Debian's iproute2 installs netem's tables.
const IPROUTE2_TABLES: &str = "/usr/lib/x86_64-linux-gnu/tc";

const MS: u64 = 1_000_000;

fn sampler(distribution: Distribution, delay_ns: u64, jitter_ns: u64, rho: f64) -> DelaySampler {
    DelaySampler::new(&DelayConfig {
        delay_ns,
        jitter_ns,
        correlation: rho,
        distribution,
    })
    .unwrap()
}

fn draw(d: &mut DelaySampler, seed: u64, n: usize) -> Vec<f64> {
    let mut s = Stream::new(seed, 0);
    (0..n).map(|_| d.sample(&mut s) as f64).collect()
}

/// Sample mean, standard deviation and lag-1 autocorrelation.
struct Summary {
    mean: f64,
    sd: f64,
    lag1: f64,
}

fn summarise(x: &[f64]) -> Summary {
    let n = x.len() as f64;
    let mean = x.iter().sum::<f64>() / n;
    let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
    let cov = x
        .windows(2)
        .map(|w| (w[0] - mean) * (w[1] - mean))
        .sum::<f64>()
        / (n - 1.0);
    Summary {
        mean,
        sd: var.sqrt(),
        lag1: cov / var,
    }
}

/// A skewed user table: 1000 quantiles of an exponential (mean 1), centred and scaled by 8192
/// so that one table unit is σ/8192 as in iproute2's tables.
fn exponential_table() -> DistTable {
    let n = 1000;
    let text: String = (0..n)
        .map(|i| {
            let p = (i as f64 + 0.5) / n as f64;
            let x = -(1.0 - p).ln() - 1.0;
            format!("{}\n", (x * 8192.0).round() as i16)
        })
        .collect();
    DistTable::parse("exponential", &text).unwrap()
}

/// The mean and sd of a table's entries, in table units (1/8192).
fn table_moments(t: &DistTable) -> (f64, f64) {
    let v: Vec<f64> = t.values().iter().map(|&x| f64::from(x)).collect();
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
    (mean, var.sqrt())
}

fn iproute2_table(name: &str) -> Option<DistTable> {
    let path = format!("{IPROUTE2_TABLES}/{name}.dist");
    match std::fs::read_to_string(&path) {
        Ok(text) => Some(DistTable::parse(&path, &text).unwrap()),
        Err(e) => {
            eprintln!("skipping: iproute2's table {path} is not readable ({e}); install iproute2");
            None
        }
    }
}

/// The expected mean and sd (ns) of each distribution for μ = 100 ms, σ = 10 ms.
fn cases() -> Vec<(Distribution, f64, f64)> {
    let (mu, sigma) = (100.0 * MS as f64, 10.0 * MS as f64);
    let table = exponential_table();
    let (tm, ts) = table_moments(&table);
    vec![
        (Distribution::Uniform, mu, sigma / 3f64.sqrt()),
        (Distribution::Normal, mu, sigma),
        (Distribution::Pareto, mu, sigma),
        (Distribution::ParetoNormal, mu, sigma),
        (
            Distribution::Table(table),
            mu + sigma * tm / 8192.0,
            sigma * ts / 8192.0,
        ),
    ]
}

/// Relative tolerance on the sample sd. For a finite fourth moment the sample variance has
/// standard error σ²·√((κ−1)/N) (κ the kurtosis), so the sd's is σ·√((κ−1)/N)/2: with N = 2²²
/// and κ ≤ 9 (uniform 1.8, normal 3, exponential table 9) five of them are below 0.4%.
/// Pareto(3) and paretonormal have an infinite fourth moment: the sample variance's error then
/// follows a stable law of index 3/2 and shrinks only like N^{−1/3} ≈ 0.6% at N = 2²², with
/// heavy tails of its own, so they get 3% (five scale units).
fn sd_tolerance(d: &Distribution) -> f64 {
    match d {
        Distribution::Pareto | Distribution::ParetoNormal => 0.03,
        _ => 0.004,
    }
}

#[test]
fn mean_and_sd_of_every_distribution() {
    const N: usize = 1 << 22;
    for (dist, mean, sd) in cases() {
        let name = dist.name().to_owned();
        let tol_sd = sd_tolerance(&dist);
        let mut d = sampler(dist, 100 * MS, 10 * MS, 0.0);
        let s = summarise(&draw(&mut d, 11, N));
        // Standard error of the mean: sd/√N.
        let tol_mean = 5.0 * sd / (N as f64).sqrt();
        assert!(
            (s.mean - mean).abs() < tol_mean,
            "{name}: mean {} vs {mean}",
            s.mean
        );
        assert!(
            (s.sd / sd - 1.0).abs() < tol_sd,
            "{name}: sd {} vs {sd}",
            s.sd
        );
        // Independent draws: lag-1 autocorrelation has standard error 1/√N.
        assert!(
            s.lag1.abs() < 5.0 / (N as f64).sqrt(),
            "{name}: lag1 {}",
            s.lag1
        );
        assert_eq!(d.clamped(), 0, "{name}: nothing is below zero at μ = 10σ");
    }
}

#[test]
fn uniform_stays_in_bounds_and_reaches_them() {
    const N: usize = 1 << 20;
    let mut d = sampler(Distribution::Uniform, 50 * MS, 20 * MS, 0.0);
    let x = draw(&mut d, 3, N);
    let (lo, hi) = (30.0 * MS as f64, 70.0 * MS as f64);
    assert!(x.iter().all(|&v| (lo..=hi).contains(&v)));
    // The chance that no draw falls within ε = 2·10⁻⁵ of the range of a bound is
    // (1 − 10⁻⁵)^N ≈ e^{−10}.
    let eps = 2e-5 * (hi - lo);
    assert!(x.iter().any(|&v| v < lo + eps));
    assert!(x.iter().any(|&v| v > hi - eps));
}

/// Count of draws above `threshold` against its expected count `n·p`: binomial, standard
/// error √(n·p·(1−p)).
fn assert_tail(x: &[f64], threshold: f64, p: f64, what: &str) {
    let n = x.len() as f64;
    let count = x.iter().filter(|&&v| v > threshold).count() as f64;
    let expected = n * p;
    let tol = 5.0 * (n * p * (1.0 - p)).sqrt();
    assert!(
        (count - expected).abs() < tol,
        "{what}: {count} draws above {threshold}, expected {expected} ± {tol}"
    );
}

#[test]
fn pareto_tail_matches_closed_form() {
    const N: usize = 1 << 22;
    let (mu, sigma) = (100.0 * MS as f64, 10.0 * MS as f64);
    let mut d = sampler(Distribution::Pareto, 100 * MS, 10 * MS, 0.0);
    let x = draw(&mut d, 5, N);
    // X = (W − 3/2)·2/√3 with P(W > w) = w⁻³.
    for p in [1e-2_f64, 1e-3, 1e-4, 1e-5] {
        let w = p.powf(-1.0 / 3.0);
        let threshold = mu + sigma * (w - 1.5) * 2.0 / 3f64.sqrt();
        assert_tail(&x, threshold, p, "pareto");
    }
    // Real tail: far beyond netem's table limit of 4σ (P(X > 20) ≈ 1.2·10⁻⁴).
    assert!(x.iter().any(|&v| v > mu + 20.0 * sigma));
}

#[test]
fn normal_has_real_tails() {
    const N: usize = 1 << 22;
    let (mu, sigma) = (100.0 * MS as f64, 10.0 * MS as f64);
    let mut d = sampler(Distribution::Normal, 100 * MS, 10 * MS, 0.0);
    let x = draw(&mut d, 6, N);
    // P(Z > 2) = 0.02275, P(Z > 4) = 3.167·10⁻⁵: netem's table would give 0 beyond 4σ.
    assert_tail(&x, mu + 2.0 * sigma, 0.022_750_131_948_179, "normal 2σ");
    assert_tail(&x, mu + 4.0 * sigma, 3.167_124_183_311_998e-5, "normal 4σ");
    assert_tail(
        &x.iter().map(|v| 2.0 * mu - v).collect::<Vec<_>>(),
        mu + 4.0 * sigma,
        3.167_124_183_311_998e-5,
        "normal −4σ",
    );
}

#[test]
fn paretonormal_matches_netem_recipe_unclipped() {
    const N: usize = 1 << 22;
    let (mu, sigma) = (100.0 * MS as f64, 10.0 * MS as f64);
    let mut d = sampler(Distribution::ParetoNormal, 100 * MS, 10 * MS, 0.0);
    let x = draw(&mut d, 8, N);
    // netem's quantile Q(p) = ¼Φ⁻¹(p) + (1−p)^{−1/3} − 3/2, here divided by its sd ≈ 1.0518:
    // at p = 0.999 (Φ⁻¹ = 3.090232) the threshold is exceeded with probability 10⁻³.
    let sd = 1.051_777_245_524_38;
    for (p, z) in [
        (1e-3_f64, 3.090_232_306_167_813),
        (1e-5, 4.264_890_793_922_602),
    ] {
        let q = 0.25 * z + p.powf(-1.0 / 3.0) - 1.5;
        assert_tail(&x, mu + sigma * q / sd, p, "paretonormal");
    }
    // netem's paretonormal table stops at 32767/8192 ≈ 4σ (of its own sd ≈ 1.05).
    assert!(x.iter().any(|&v| v > mu + 8.0 * sigma));
}

#[test]
fn negative_draws_are_clamped_and_counted() {
    const N: usize = 1 << 20;
    // μ = 0: half the normal draws are negative. The clamped count is binomial(N, 1/2),
    // standard error √N/2; the mean of max(0, σZ) is σ/√(2π) with standard error below σ/√N.
    let sigma = 10.0 * MS as f64;
    let mut d = sampler(Distribution::Normal, 0, 10 * MS, 0.0);
    let x = draw(&mut d, 9, N);
    let zeros = x.iter().filter(|&&v| v == 0.0).count() as f64;
    let clamped = d.clamped() as f64;
    assert!((clamped - N as f64 / 2.0).abs() < 5.0 * (N as f64).sqrt() / 2.0);
    assert!(zeros >= clamped);
    let mean = x.iter().sum::<f64>() / N as f64;
    let expected = sigma / (2.0 * std::f64::consts::PI).sqrt();
    assert!(
        (mean - expected).abs() < 5.0 * sigma / (N as f64).sqrt(),
        "mean {mean}"
    );
}

#[test]
fn iproute2_normal_table_reproduces_netem_with_its_clipping() {
    const N: usize = 1 << 22;
    let Some(table) = iproute2_table("normal") else {
        return;
    };
    assert_eq!(table.values().len(), 4096);
    let (tm, ts) = table_moments(&table);
    let (mu, sigma) = (100.0 * MS as f64, 10.0 * MS as f64);
    let mut d = sampler(Distribution::Table(table.clone()), 100 * MS, 10 * MS, 0.0);
    let x = draw(&mut d, 12, N);
    // netem's clipping: nothing outside [μ − 4σ, μ + 32767/8192·σ].
    let (lo, hi) = (mu - 4.0 * sigma, mu + sigma * 32767.0 / 8192.0);
    assert!(x.iter().all(|&v| (lo..=hi).contains(&v)));
    // Every entry is equally likely (1/4096): the table's lowest entry, −32768, is hit about
    // N/4096 = 1024 times (binomial, standard error 32); it is the only one at −4σ.
    let at_lo = x.iter().filter(|&&v| v == lo).count() as f64;
    assert!((at_lo - 1024.0).abs() < 5.0 * 32.0, "{at_lo} draws at −4σ");
    let s = summarise(&x);
    let (mean, sd) = (mu + sigma * tm / 8192.0, sigma * ts / 8192.0);
    assert!((s.mean - mean).abs() < 5.0 * sd / (N as f64).sqrt());
    assert!((s.sd / sd - 1.0).abs() < 0.004);
    // The table is a normal to within its resolution: sd within 1% of σ.
    assert!((ts / 8192.0 - 1.0).abs() < 0.01, "table sd {}", ts / 8192.0);
}

/// Checks that ρ = 0.25, 0.5 and 0.9 are recovered from the output of `dist`, with the
/// marginal mean and sd (`mean`, `sd`, ns) unchanged.
///
/// Tolerances: for a Gaussian AR(1) the lag-1 estimate has standard error √((1−ρ²)/N) ≤
/// 1/√N ≈ 0.0005 at N = 2²²; the copula maps of the light-tailed shapes keep it of that order
/// (the largest error over 8 seeds was 0.001), so 0.003 is about five standard errors, and the
/// calibration's own error is below 10⁻⁶. The mean's standard error grows to
/// sd·√((1+ρ)/((1−ρ)N)) (≈ 0.0021 sd at ρ = 0.9) and the sd's to about
/// sd·√((1+ρ²)/((1−ρ²)N)) (≈ 0.0015 sd); both get five of them.
///
/// Pareto and paretonormal have an infinite fourth moment: the sample lag-1 correlation and sd
/// then converge only like N^{−1/3} (≈ 0.6%), and the ratio estimator is biased upward for
/// heavy tails (over 8 seeds the errors were +0.008 ± 0.005 at ρ = 0.5, at most 0.014). They
/// get 0.03 on ρ and 3%·√((1+ρ)/(1−ρ)) on the sd. The calibration itself is checked exactly,
/// by quadrature, in the unit tests of `dist`.
fn assert_correlation_recovered(dist: Distribution, mean: f64, sd: f64) {
    const N: usize = 1 << 22;
    for (k, rho) in [0.25_f64, 0.5, 0.9].into_iter().enumerate() {
        let name = format!("{} ρ = {rho}", dist.name());
        let heavy = matches!(dist, Distribution::Pareto | Distribution::ParetoNormal);
        let inflation = ((1.0 + rho) / (1.0 - rho)).sqrt();
        let mut d = sampler(dist.clone(), 100 * MS, 10 * MS, rho);
        let s = summarise(&draw(&mut d, 100 + k as u64, N));
        let tol_rho = if heavy { 0.03 } else { 0.003 };
        assert!((s.lag1 - rho).abs() < tol_rho, "{name}: lag1 {}", s.lag1);
        let tol_mean = 5.0 * sd * inflation / (N as f64).sqrt();
        assert!(
            (s.mean - mean).abs() < tol_mean,
            "{name}: mean {} vs {mean}",
            s.mean
        );
        let tol_sd = if heavy {
            0.03 * inflation
        } else {
            5.0 * ((1.0 + rho * rho) / ((1.0 - rho * rho) * N as f64)).sqrt()
        };
        assert!(
            (s.sd / sd - 1.0).abs() < tol_sd,
            "{name}: sd {} vs {sd}",
            s.sd
        );
    }
}

/// The `cases()` entry for the distribution called `name`.
fn case(name: &str) -> (Distribution, f64, f64) {
    cases()
        .into_iter()
        .find(|(d, _, _)| d.name() == name)
        .unwrap()
}

#[test]
fn correlation_recovered_uniform() {
    let (d, mean, sd) = case("uniform");
    assert_correlation_recovered(d, mean, sd);
}

#[test]
fn correlation_recovered_normal() {
    let (d, mean, sd) = case("normal");
    assert_correlation_recovered(d, mean, sd);
}

#[test]
fn correlation_recovered_pareto() {
    let (d, mean, sd) = case("pareto");
    assert_correlation_recovered(d, mean, sd);
}

#[test]
fn correlation_recovered_paretonormal() {
    let (d, mean, sd) = case("paretonormal");
    assert_correlation_recovered(d, mean, sd);
}

#[test]
fn correlation_recovered_skewed_table() {
    let (d, mean, sd) = case("exponential");
    assert_correlation_recovered(d, mean, sd);
}

#[test]
fn correlation_recovered_iproute2_normal_table() {
    let Some(t) = iproute2_table("normal") else {
        return;
    };
    let (tm, ts) = table_moments(&t);
    let (mu, sigma) = (100.0 * MS as f64, 10.0 * MS as f64);
    assert_correlation_recovered(
        Distribution::Table(t),
        mu + sigma * tm / 8192.0,
        sigma * ts / 8192.0,
    );
}

/// Correlation leaves the whole marginal distribution alone, not just its mean and sd: every
/// entry of a table is still drawn with probability 1/n, and the Pareto tail keeps its mass.
///
/// Tolerances: a count of `N` correlated indicators with probability `p` has variance at most
/// `N·p(1−p)·(1+r)/(1−r)` when the latent process has lag-1 correlation `r` (by Gebelein's
/// theorem no function of a bivariate normal pair is more correlated than the pair, `r^k` at
/// lag k, and `Σ_k r^|k| = (1+r)/(1−r)`); each count gets five of those standard deviations.
#[test]
fn correlation_keeps_the_marginal_distribution() {
    const N: usize = 1 << 21;
    let rho = 0.5;
    let n_entries = 8;
    let table = DistTable::parse("eight", "-3000 -1000 0 500 900 2000 4000 9000").unwrap();
    let mut d = sampler(Distribution::Table(table.clone()), 100 * MS, 10 * MS, rho);
    let r = d.latent_correlation().unwrap();
    let x = draw(&mut d, 31, N);
    let p = 1.0 / n_entries as f64;
    let tol = 5.0 * (N as f64 * p * (1.0 - p) * (1.0 + r) / (1.0 - r)).sqrt();
    for &t in table.values() {
        let value = (100.0 * MS as f64 + 10.0 * MS as f64 * f64::from(t) / 8192.0).round();
        let count = x.iter().filter(|&&v| v == value).count() as f64;
        assert!(
            (count - N as f64 * p).abs() < tol,
            "entry {t}: {count} draws, expected {} ± {tol}",
            N as f64 * p
        );
    }

    let mut d = sampler(Distribution::Pareto, 100 * MS, 10 * MS, rho);
    let r = d.latent_correlation().unwrap();
    let x = draw(&mut d, 32, N);
    for p in [0.1_f64, 1e-2, 1e-3] {
        let w = p.powf(-1.0 / 3.0);
        let threshold = 100.0 * MS as f64 + 10.0 * MS as f64 * (w - 1.5) * 2.0 / 3f64.sqrt();
        let count = x.iter().filter(|&&v| v > threshold).count() as f64;
        let tol = 5.0 * (N as f64 * p * (1.0 - p) * (1.0 + r) / (1.0 - r)).sqrt();
        assert!(
            (count - N as f64 * p).abs() < tol,
            "pareto p = {p}: {count} above, expected {} ± {tol}",
            N as f64 * p
        );
    }
}

#[test]
fn normal_lag_k_correlation_decays_geometrically() {
    const N: usize = 1 << 22;
    let rho: f64 = 0.8;
    let mut d = sampler(Distribution::Normal, 100 * MS, 10 * MS, rho);
    let x = draw(&mut d, 21, N);
    let s = summarise(&x);
    for k in [2usize, 3, 5] {
        let cov = x
            .iter()
            .zip(&x[k..])
            .map(|(a, b)| (a - s.mean) * (b - s.mean))
            .sum::<f64>()
            / (N - k) as f64;
        // Standard error of a lag-k estimate of an AR(1) is below √((1+ρ²)/((1−ρ²)N)) ≈ 0.0011.
        let lag = cov / (s.sd * s.sd);
        assert!((lag - rho.powi(k as i32)).abs() < 0.006, "lag {k}: {lag}");
    }
}

#[test]
fn same_seed_same_sequence_different_seed_different() {
    for (dist, _, _) in cases() {
        for rho in [0.0, 0.6] {
            let a = draw(&mut sampler(dist.clone(), 10 * MS, MS, rho), 77, 1000);
            let b = draw(&mut sampler(dist.clone(), 10 * MS, MS, rho), 77, 1000);
            let c = draw(&mut sampler(dist.clone(), 10 * MS, MS, rho), 78, 1000);
            assert_eq!(a, b, "{}", dist.name());
            let same = a.iter().zip(&c).filter(|(x, y)| x == y).count();
            assert!(
                same < 100,
                "{}: {same} equal draws across seeds",
                dist.name()
            );
        }
    }
}

#[test]
fn table_errors_name_line_and_column() {
    let e = DistTable::parse("my.dist", "# comment\n 10 20\n 30 4O 50\n").unwrap_err();
    assert_eq!((e.line, e.column), (3, 5));
    assert_eq!(e.kind, TableErrorKind::NotAnInteger);
    assert!(e
        .to_string()
        .starts_with("my.dist:3:5: expected a decimal integer"));
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    fn distribution() -> impl Strategy<Value = Distribution> {
        prop_oneof![
            Just(Distribution::Uniform),
            Just(Distribution::Normal),
            Just(Distribution::Pareto),
            Just(Distribution::ParetoNormal),
            prop::collection::vec(any::<i16>(), 1..64).prop_map(|v| {
                let text: String = v.iter().map(|x| format!("{x} ")).collect();
                Distribution::Table(DistTable::parse("p", &text).unwrap())
            }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// Any valid configuration builds, never panics, stays within the shape's bounds
        /// and counts every clamp as a zero delay.
        #[test]
        fn any_valid_config_samples_sanely(
            delay_ns in prop_oneof![Just(0u64), 0u64..10_000_000_000, Just(1u64 << 53)],
            jitter_ns in prop_oneof![Just(0u64), 0u64..10_000_000_000, Just(1u64 << 53)],
            correlation in prop_oneof![Just(0.0), 0.0..1.0f64, Just(0.999_999)],
            distribution in distribution(),
            seed in any::<u64>(),
        ) {
            let cfg = DelayConfig { delay_ns, jitter_ns, correlation, distribution };
            let mut d = DelaySampler::new(&cfg).unwrap();
            let (mu, sigma) = (delay_ns as f64, jitter_ns as f64);
            let bounds = match &cfg.distribution {
                Distribution::Uniform => Some((mu - sigma, mu + sigma)),
                Distribution::Table(t) => {
                    let lo = f64::from(*t.values().iter().min().unwrap());
                    let hi = f64::from(*t.values().iter().max().unwrap());
                    Some((mu + sigma * lo / 8192.0, mu + sigma * hi / 8192.0))
                }
                _ => None,
            };
            let mut s = Stream::new(seed, 1);
            let mut zeros = 0;
            for _ in 0..200 {
                let v = d.sample(&mut s);
                zeros += u64::from(v == 0);
                if let Some((lo, hi)) = bounds {
                    let v = v as f64;
                    prop_assert!(v >= lo.max(0.0).floor() && v <= hi.max(0.0).ceil() + 1.0,
                        "{v} outside [{lo}, {hi}]");
                }
                if jitter_ns == 0 {
                    prop_assert_eq!(v, delay_ns);
                }
            }
            prop_assert!(d.clamped() <= zeros);
        }
    }
}
