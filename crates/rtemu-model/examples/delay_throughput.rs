//! Delay samples per second for each distribution, uncorrelated and correlated, on one core.
//!
//! Run: `cargo run --release -p rtemu-model --example delay_throughput [SAMPLES]`
//! (SAMPLES per run, default 20 000 000). Each case runs three times and the fastest run is
//! reported, so that a burst of load from other processes does not count against it.

use std::hint::black_box;
use std::time::Instant;

use rtemu_model::dist::{DelayConfig, DelaySampler, DistTable, Distribution};
use rtemu_model::Stream;

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("the sample count must be an integer"))
        .unwrap_or(20_000_000);
    // A 4096-entry table, like iproute2's, so the benchmark needs no installed file.
    let text: String = (0..4096).map(|i| format!("{} ", i * 16 - 32768)).collect();
    let table = DistTable::parse("linear", &text).expect("the generated table is valid");
    let distributions = [
        Distribution::Uniform,
        Distribution::Normal,
        Distribution::Pareto,
        Distribution::ParetoNormal,
        Distribution::Table(table),
    ];
    println!("{n} samples per run, best of 3 runs; delay 20 ms, jitter 5 ms");
    println!(
        "{:<14} {:>6} {:>14} {:>10}",
        "distribution", "rho", "samples/s", "ns/sample"
    );
    for distribution in distributions {
        for rho in [0.0, 0.25] {
            let cfg = DelayConfig {
                delay_ns: 20_000_000,
                jitter_ns: 5_000_000,
                correlation: rho,
                distribution: distribution.clone(),
            };
            let mut secs = f64::INFINITY;
            for _ in 0..3 {
                let mut sampler = DelaySampler::new(&cfg).expect("valid configuration");
                let mut stream = Stream::new(1, 0);
                let start = Instant::now();
                let mut sum = 0u64;
                for _ in 0..n {
                    sum = sum.wrapping_add(sampler.sample(&mut stream));
                }
                black_box(sum);
                secs = secs.min(start.elapsed().as_secs_f64());
            }
            println!(
                "{:<14} {:>6} {:>14.0} {:>10.2}",
                distribution.name(),
                rho,
                n as f64 / secs,
                secs * 1e9 / n as f64
            );
        }
    }
}
