//! `rtemu lab sleep`: how accurately does each wait method sleep? The timing paper's Table 1
//! and Figure 3.
//!
//! A workload of requested sleep times `x_i` is drawn up front from a seeded generator; each
//! method then sleeps each request once, starting from a fresh clock reading, and the actual
//! time `y_i` goes into a preallocated array. Nothing is printed or computed until a method is
//! done. The CPU time the method burned is read from `CLOCK_THREAD_CPUTIME_ID` around it.

use std::fmt;
use std::str::FromStr;

use rand_xoshiro::rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rtemu_clock::time::{format_duration_ns, parse_duration_ns, thread_cpu_time_ns};
use rtemu_clock::wait::WaitError;
use rtemu_clock::{Instant, WaitStrategy, Waiter};
use serde::Serialize;

use crate::stats::{Distribution, ErrorStats};

/// The largest single request a workload may ask for: keeps every run bounded.
pub const MAX_REQUEST_NS: u64 = 10_000_000_000;

/// The sleep requests of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// The timing paper's: uniform in 0–100 ms.
    Paper,
    /// Microsecond scale: uniform in 10 µs–2 ms, where timer resolution shows.
    Micro,
    /// Every request the same, in ns.
    Fixed(u64),
    /// Uniform in `lo ..= hi` ns.
    Uniform {
        /// Shortest request, ns.
        lo: u64,
        /// Longest request, ns.
        hi: u64,
    },
}

impl Workload {
    fn range(self) -> (u64, u64) {
        match self {
            Workload::Paper => (0, 100_000_000),
            Workload::Micro => (10_000, 2_000_000),
            Workload::Fixed(ns) => (ns, ns),
            Workload::Uniform { lo, hi } => (lo, hi),
        }
    }

    /// `count` requests in ns, drawn with `seed`: the same seed gives the same requests.
    pub fn requests(self, count: usize, seed: u64) -> Vec<u64> {
        let (lo, hi) = self.range();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let span = u128::from(hi - lo) + 1;
        (0..count)
            // Multiply-shift maps 64 random bits onto the span without modulo bias to speak of.
            .map(|_| lo + ((u128::from(rng.next_u64()) * span) >> 64) as u64)
            .collect()
    }

    /// The mean request in ns, to estimate how long a run takes.
    pub fn mean_ns(self) -> u64 {
        let (lo, hi) = self.range();
        lo + (hi - lo) / 2
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Workload::Paper => f.write_str("paper"),
            Workload::Micro => f.write_str("micro"),
            Workload::Fixed(ns) => write!(f, "fixed:{}", format_duration_ns(*ns)),
            Workload::Uniform { lo, hi } => write!(
                f,
                "uniform:{}-{}",
                format_duration_ns(*lo),
                format_duration_ns(*hi)
            ),
        }
    }
}

/// A workload that could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseWorkloadError {
    /// Not one of the forms.
    #[error(
        "unknown workload `{0}`: use paper (0–100 ms), micro (10 µs–2 ms), fixed:DURATION or \
         uniform:MIN-MAX, e.g. uniform:10us-2ms"
    )]
    Unknown(String),
    /// A bad duration inside.
    #[error("bad duration in workload `{input}`: {source}")]
    Duration {
        /// The whole workload text.
        input: String,
        /// Why the duration did not parse.
        source: rtemu_clock::time::ParseDurationError,
    },
    /// Durations out of order or too long.
    #[error("workload `{0}` is out of range: requests must be at most 10s, MIN no more than MAX")]
    Range(String),
}

impl FromStr for Workload {
    type Err = ParseWorkloadError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        let duration = |s: &str| {
            parse_duration_ns(s).map_err(|source| ParseWorkloadError::Duration {
                input: text.to_owned(),
                source,
            })
        };
        let workload = match text.split_once(':') {
            None if text == "paper" => Workload::Paper,
            None if text == "micro" => Workload::Micro,
            Some(("fixed", d)) => Workload::Fixed(duration(d)?),
            Some(("uniform", range)) => {
                let (lo, hi) = range
                    .split_once('-')
                    .ok_or_else(|| ParseWorkloadError::Unknown(text.to_owned()))?;
                Workload::Uniform {
                    lo: duration(lo)?,
                    hi: duration(hi)?,
                }
            }
            _ => return Err(ParseWorkloadError::Unknown(text.to_owned())),
        };
        let (lo, hi) = workload.range();
        if lo > hi || hi > MAX_REQUEST_NS {
            return Err(ParseWorkloadError::Range(text.to_owned()));
        }
        Ok(workload)
    }
}

/// What `rtemu lab sleep` measures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SleepConfig {
    /// The wait methods, measured one after the other.
    pub methods: Vec<WaitStrategy>,
    /// The requests.
    pub workload: Workload,
    /// Requests per method.
    pub count: usize,
    /// Seed of the request generator.
    pub seed: u64,
    /// Each method stops after this long even if requests remain, in ns.
    pub time_limit_ns: u64,
}

/// One method's raw measurement: what was asked and what happened, in ns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SleepSamples {
    /// The method.
    pub method: WaitStrategy,
    /// Requested sleep of each completed request.
    pub requested: Vec<u64>,
    /// Actual time elapsed for each completed request.
    pub actual: Vec<u64>,
    /// CPU time the measuring thread used, ns.
    pub cpu_ns: u64,
    /// Wall time of the whole series, ns.
    pub wall_ns: u64,
}

/// One method's results.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MethodResult {
    /// The method's name.
    pub method: String,
    /// Requests completed (fewer than asked when the time limit cut the series).
    pub completed: usize,
    /// Whether the time limit cut the series.
    pub truncated: bool,
    /// The paper's error statistics.
    pub errors: ErrorStats,
    /// Percentiles of the absolute error `y − x`, ns.
    pub error_ns: Distribution,
    /// CPU time burned, ns.
    pub cpu_ns: u64,
    /// Wall time of the series, ns.
    pub wall_ns: u64,
}

impl MethodResult {
    /// Summarises `samples`; `asked` is the number of requests the run asked for.
    pub fn from_samples(samples: &SleepSamples, asked: usize) -> MethodResult {
        let errors: Vec<i64> = samples
            .requested
            .iter()
            .zip(&samples.actual)
            .map(|(&x, &y)| y as i64 - x as i64)
            .collect();
        MethodResult {
            method: samples.method.to_string(),
            completed: samples.actual.len(),
            truncated: samples.actual.len() < asked,
            errors: ErrorStats::compute(&samples.requested, &samples.actual),
            error_ns: Distribution::compute(&errors),
            cpu_ns: samples.cpu_ns,
            wall_ns: samples.wall_ns,
        }
    }

    /// CPU time over wall time: 1.0 is one whole CPU.
    pub fn cpu_share(&self) -> f64 {
        if self.wall_ns == 0 {
            0.0
        } else {
            self.cpu_ns as f64 / self.wall_ns as f64
        }
    }
}

/// Sleeps each of `requests` with `method`, stopping after `time_limit_ns`.
pub fn measure(
    method: WaitStrategy,
    requests: &[u64],
    time_limit_ns: u64,
) -> Result<SleepSamples, WaitError> {
    let mut waiter = Waiter::new(method)?;
    let mut actual = vec![0u64; requests.len()];
    let mut done = 0;
    let cpu_start = thread_cpu_time_ns();
    let wall_start = Instant::now();
    let stop = wall_start + time_limit_ns;
    for (&request, slot) in requests.iter().zip(actual.iter_mut()) {
        let start = Instant::now();
        if start >= stop {
            break;
        }
        waiter.wait_until(start + request)?;
        *slot = Instant::now().nanos_since(start);
        done += 1;
    }
    let wall_ns = Instant::now().nanos_since(wall_start);
    let cpu_ns = thread_cpu_time_ns().saturating_sub(cpu_start);
    actual.truncate(done);
    Ok(SleepSamples {
        method,
        requested: requests[..done].to_vec(),
        actual,
        cpu_ns,
        wall_ns,
    })
}

/// Measures every method of `config` on the calling thread, calling `before_each` with the
/// method's index between methods (for a progress display: never during a measurement).
pub fn run(
    config: &SleepConfig,
    before_each: &mut dyn FnMut(usize, WaitStrategy),
) -> Result<Vec<SleepSamples>, WaitError> {
    let requests = config.workload.requests(config.count, config.seed);
    config
        .methods
        .iter()
        .enumerate()
        .map(|(i, &method)| {
            before_each(i, method);
            measure(method, &requests, config.time_limit_ns)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn workloads_parse_and_print() {
        for (text, want) in [
            ("paper", Workload::Paper),
            ("micro", Workload::Micro),
            ("fixed:1ms", Workload::Fixed(1_000_000)),
            (
                "uniform:10us-2ms",
                Workload::Uniform {
                    lo: 10_000,
                    hi: 2_000_000,
                },
            ),
        ] {
            assert_eq!(text.parse::<Workload>(), Ok(want));
            assert_eq!(want.to_string(), text);
        }
    }

    #[test]
    fn bad_workloads_say_why() {
        assert!(matches!(
            "papers".parse::<Workload>(),
            Err(ParseWorkloadError::Unknown(_))
        ));
        assert!(matches!(
            "uniform:10us".parse::<Workload>(),
            Err(ParseWorkloadError::Unknown(_))
        ));
        assert!(matches!(
            "fixed:10".parse::<Workload>(),
            Err(ParseWorkloadError::Duration { .. })
        ));
        assert_eq!(
            "uniform:2ms-1ms".parse::<Workload>(),
            Err(ParseWorkloadError::Range("uniform:2ms-1ms".into()))
        );
        assert_eq!(
            "fixed:11s".parse::<Workload>(),
            Err(ParseWorkloadError::Range("fixed:11s".into()))
        );
    }

    /// 10,000 uniform draws over 0–100 ms: the sample mean's standard error is
    /// 100 ms / √12 / √10,000 ≈ 0.29 ms, so 2 ms is about 7 standard errors — never flaky,
    /// and the seed is fixed anyway.
    #[test]
    fn paper_workload_is_uniform_in_its_range_and_seeded() {
        let requests = Workload::Paper.requests(10_000, 7);
        assert!(requests.iter().all(|&r| r <= 100_000_000));
        let mean = requests.iter().sum::<u64>() as f64 / requests.len() as f64;
        assert!((mean - 50e6).abs() < 2e6, "{mean}");
        assert_eq!(requests, Workload::Paper.requests(10_000, 7));
        assert_ne!(requests, Workload::Paper.requests(10_000, 8));
    }

    proptest! {
        #[test]
        fn requests_stay_in_range(lo in 0u64..1_000_000, width in 0u64..1_000_000, seed: u64) {
            let workload = Workload::Uniform { lo, hi: lo + width };
            for r in workload.requests(100, seed) {
                prop_assert!((lo..=lo + width).contains(&r));
            }
        }
    }

    #[test]
    fn measured_sleeps_are_never_shorter_than_requested() {
        let requests = Workload::Uniform {
            lo: 10_000,
            hi: 200_000,
        }
        .requests(20, 1);
        let samples = measure(WaitStrategy::Sleep, &requests, 10_000_000_000).unwrap();
        assert_eq!(samples.actual.len(), 20);
        assert!(samples
            .requested
            .iter()
            .zip(&samples.actual)
            .all(|(x, y)| y >= x));
        let result = MethodResult::from_samples(&samples, 20);
        assert!(!result.truncated && result.error_ns.min_ns >= 0);
        assert!(result.errors.abs_mean_ns > 0.0);
    }

    #[test]
    fn the_time_limit_cuts_a_series() {
        let requests = vec![5_000_000; 1_000]; // 5 s in all
        let samples = measure(WaitStrategy::Sleep, &requests, 20_000_000).unwrap();
        assert!(samples.actual.len() < 1_000);
        assert!(MethodResult::from_samples(&samples, 1_000).truncated);
    }

    /// Spinning burns a CPU, sleeping does not. A sleeping wait costs a few µs of CPU per
    /// call; a spinning one burns the whole wait unless preempted. Shares are not compared,
    /// because on a loaded 2-core machine the spinner may get only a fraction of a CPU; a
    /// factor of 4 between the two CPU times would fail only under more than 10× overload.
    #[test]
    fn cpu_time_separates_spinning_from_sleeping() {
        let requests = vec![2_000_000; 25]; // 2 ms each, 50 ms in all
        let spin = measure(WaitStrategy::Spin, &requests, 10_000_000_000).unwrap();
        let sleep = measure(WaitStrategy::Sleep, &requests, 10_000_000_000).unwrap();
        assert!(
            spin.cpu_ns > 4 * sleep.cpu_ns,
            "spin {} ns, sleep {} ns",
            spin.cpu_ns,
            sleep.cpu_ns
        );
    }
}
