//! `rtemu lab deadline`: real time vs real fast, the RTOS paper's tire benchmark.
//!
//! The [`tire`](crate::tire) is solved by the paper's Algorithm 1: each thread owns a
//! contiguous set of nodes; every step it reads its nodes' neighbours under per-node locks,
//! computes the forces on its nodes, integrates them and writes them back under the locks.
//! Two state buffers (read the step's input, write its output) and a barrier at the end of
//! each step make the result independent of the thread count.
//!
//! * Real time: step `s` is released at `start + s·period` (an absolute deadline) and must end
//!   before the next release. Per step the leader thread records the release latency, the
//!   compute time and the response time; a step whose response exceeds the period missed its
//!   deadline.
//! * Real fast: the same steps back to back; the total time and the time per step.

use std::sync::{Arc, Barrier, Condvar, Mutex, PoisonError};

use rtemu_clock::rt::{self, RtError};
use rtemu_clock::wait::WaitError;
use rtemu_clock::{Instant, WaitStrategy, Waiter};
use serde::Serialize;

use crate::stats::Distribution;
use crate::tire::{Node, Tire, TireError, TireParams};

/// How steps are released.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// At a fixed period against absolute deadlines, ns.
    RealTime {
        /// The period, ns.
        period_ns: u64,
    },
    /// As fast as possible.
    RealFast,
}

/// One benchmark run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeadlineConfig {
    /// Solver threads.
    pub threads: usize,
    /// Steps to compute.
    pub steps: usize,
    /// Release mode.
    pub mode: Mode,
    /// Run the solver threads under `SCHED_FIFO` at this priority.
    pub fifo_priority: Option<u8>,
}

/// A run that could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum DeadlineError {
    /// Thread count out of range.
    #[error(
        "{threads} threads for {nodes} nodes: give 1 to {nodes} threads (at most one per node)"
    )]
    Threads {
        /// Threads asked for.
        threads: usize,
        /// Nodes in the tire.
        nodes: usize,
    },
    /// Real-time set-up of a solver thread failed.
    #[error(transparent)]
    Rt(#[from] RtError),
    /// A release wait failed.
    #[error(transparent)]
    Wait(#[from] WaitError),
    /// A solver thread panicked.
    #[error("a solver thread panicked")]
    Panicked,
    /// A solver thread could not be started (the threads started before it ended unused).
    #[error("starting solver thread {index} of {threads}: {source}")]
    Spawn {
        /// Which thread.
        index: usize,
        /// Threads asked for.
        threads: usize,
        /// Why the system refused.
        source: std::io::Error,
    },
    /// The run needs more memory than the machine has.
    #[error(transparent)]
    Memory(#[from] rtemu_sys::memory::MemoryError),
    /// The tire cannot be built.
    #[error(transparent)]
    Tire(#[from] TireError),
}

/// Missed deadlines in a series of response times.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Misses {
    /// Steps whose response time exceeded the period.
    pub missed: u64,
    /// The longest run of consecutive misses.
    pub longest_run: u64,
}

impl Misses {
    /// Counts the responses (ns) longer than `period_ns`.
    pub fn count(responses: &[i64], period_ns: u64) -> Misses {
        let (mut missed, mut run, mut longest_run) = (0, 0, 0);
        for &r in responses {
            if r > period_ns as i64 {
                missed += 1;
                run += 1;
                longest_run = longest_run.max(run);
            } else {
                run = 0;
            }
        }
        Misses {
            missed,
            longest_run,
        }
    }
}

/// The outcome of a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeadlineResult {
    /// Nodes in the tire.
    pub nodes: usize,
    /// Solver threads.
    pub threads: usize,
    /// Steps computed.
    pub steps: usize,
    /// Release mode.
    pub mode: Mode,
    /// Scheduling policy of the solver threads.
    pub policy: String,
    /// Wall time of the whole run, ns.
    pub total_ns: u64,
    /// Simulated time over wall time (real fast: how much faster than real time).
    pub times_real_time: f64,
    /// Steps per second of wall time.
    pub steps_per_s: f64,
    /// Release latency of each step (actual start − release), ns; zeros in real-fast mode.
    pub release_latency_ns: Distribution,
    /// Compute time of each step (end − actual start), ns.
    pub compute_ns: Distribution,
    /// Response time of each step (end − release), ns.
    pub response_ns: Distribution,
    /// Missed deadlines (real time only).
    pub misses: Option<Misses>,
    /// Height of the tire's lowest node at the end, m: evidence that the physics ran.
    pub final_lowest_y: f64,
    /// Mean height of the nodes at the end, m.
    pub final_mean_y: f64,
}

/// The start of a run, handed to every solver thread once all of them exist; `None` tells them
/// the run will not happen (a thread could not be started).
#[derive(Default)]
struct Gate {
    start: Mutex<Option<Option<Instant>>>,
    opened: Condvar,
}

impl Gate {
    fn open(&self, start: Option<Instant>) {
        *self.start.lock().unwrap_or_else(PoisonError::into_inner) = Some(start);
        self.opened.notify_all();
    }

    fn wait(&self) -> Option<Instant> {
        let mut state = self.start.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(start) = *state {
                return start;
            }
            state = self
                .opened
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// Per-step times recorded by the leader thread, preallocated.
struct StepLog {
    release_latency: Vec<i64>,
    compute: Vec<i64>,
    response: Vec<i64>,
}

/// Runs the tire for `config.steps` steps with `config.threads` solver threads and returns
/// the times and the final state.
pub fn run(
    tire: &Tire,
    config: &DeadlineConfig,
) -> Result<(DeadlineResult, Vec<Node>), DeadlineError> {
    let nodes = tire.nodes();
    if !(1..=nodes).contains(&config.threads) {
        return Err(DeadlineError::Threads {
            threads: config.threads,
            nodes,
        });
    }
    // The two state buffers, the tire's copy, and the leader's three times per step.
    let per_node = 2 * std::mem::size_of::<Mutex<Node>>() + 2 * std::mem::size_of::<Node>();
    let needed = rtemu_sys::memory::bytes(nodes as u64, per_node).saturating_add(
        rtemu_sys::memory::bytes(config.steps as u64, 3 * std::mem::size_of::<i64>()),
    );
    let what = format!("a tire of {nodes} nodes run for {} steps", config.steps);
    rtemu_sys::memory::check(what, needed)?;
    let initial = tire.initial_state();
    let buffers: Arc<[Vec<Mutex<Node>>; 2]> = Arc::new([
        initial.iter().copied().map(Mutex::new).collect(),
        initial.iter().copied().map(Mutex::new).collect(),
    ]);
    let tire = Arc::new(tire.clone());
    let barrier = Arc::new(Barrier::new(config.threads));
    // Every thread waits here for the start time, or for `None` when one of them could not be
    // started: then they end at once instead of waiting at the barrier for it forever.
    let gate = Arc::new(Gate::default());
    let chunk = nodes.div_ceil(config.threads);
    let mut handles = Vec::with_capacity(config.threads);
    for t in 0..config.threads {
        let (buffers, tire, barrier, opened) = (
            Arc::clone(&buffers),
            Arc::clone(&tire),
            Arc::clone(&barrier),
            Arc::clone(&gate),
        );
        let owned = (t * chunk).min(nodes)..((t + 1) * chunk).min(nodes);
        let config = *config;
        let spawned = std::thread::Builder::new()
            .name(format!("rtemu-solver-{t}"))
            .spawn(move || -> Result<Option<StepLog>, DeadlineError> {
                let Some(start) = opened.wait() else {
                    return Ok(None);
                };
                let setup = config.fifo_priority.map(rt::set_fifo).transpose();
                let mut waiter = Waiter::new(WaitStrategy::Sleep)?;
                let leader = t == 0;
                let capacity = if leader { config.steps } else { 0 };
                let mut log = StepLog {
                    release_latency: Vec::with_capacity(capacity),
                    compute: Vec::with_capacity(capacity),
                    response: Vec::with_capacity(capacity),
                };
                waiter.wait_until(start)?;
                for step in 0..config.steps {
                    let (current, next) = (&buffers[step % 2], &buffers[(step + 1) % 2]);
                    let release = match config.mode {
                        Mode::RealTime { period_ns } => {
                            let release = start + step as u64 * period_ns;
                            waiter.wait_until(release)?;
                            release
                        }
                        Mode::RealFast => Instant::now(),
                    };
                    let began = Instant::now();
                    for i in owned.clone() {
                        let read =
                            |j: usize| *current[j].lock().unwrap_or_else(PoisonError::into_inner);
                        let node = tire.step_node(i, read);
                        *next[i].lock().unwrap_or_else(PoisonError::into_inner) = node;
                    }
                    barrier.wait();
                    if leader {
                        let end = Instant::now();
                        log.release_latency.push(began.signed_nanos_since(release));
                        log.compute.push(end.signed_nanos_since(began));
                        log.response.push(end.signed_nanos_since(release));
                    }
                }
                setup?;
                Ok(leader.then_some(log))
            });
        match spawned {
            Ok(h) => handles.push(h),
            Err(source) => {
                gate.open(None);
                for h in handles {
                    let _ = h.join();
                }
                return Err(DeadlineError::Spawn {
                    index: t,
                    threads: config.threads,
                    source,
                });
            }
        }
    }
    // Time for the threads to set up before the first release.
    let start = Instant::now() + 20_000_000;
    gate.open(Some(start));
    let mut log = None;
    let mut failure = None;
    for handle in handles {
        match handle.join() {
            Ok(Ok(Some(l))) => log = Some(l),
            Ok(Ok(None)) => {}
            Ok(Err(e)) => failure = failure.or(Some(e)),
            Err(_) => failure = failure.or(Some(DeadlineError::Panicked)),
        }
    }
    if let Some(e) = failure {
        return Err(e);
    }
    let log = log.ok_or(DeadlineError::Panicked)?;
    let total_ns = Instant::now().nanos_since(start);
    let state: Vec<Node> = buffers[config.steps % 2]
        .iter()
        .map(|m| *m.lock().unwrap_or_else(PoisonError::into_inner))
        .collect();
    let simulated_ns = config.steps as f64 * tire.params().dt * 1e9;
    let result = DeadlineResult {
        nodes,
        threads: config.threads,
        steps: config.steps,
        mode: config.mode,
        policy: config
            .fifo_priority
            .map_or("SCHED_OTHER".to_owned(), |p| format!("SCHED_FIFO:{p}")),
        total_ns,
        times_real_time: simulated_ns / total_ns.max(1) as f64,
        steps_per_s: config.steps as f64 * 1e9 / total_ns.max(1) as f64,
        release_latency_ns: Distribution::compute(&log.release_latency),
        compute_ns: Distribution::compute(&log.compute),
        response_ns: Distribution::compute(&log.response),
        misses: match config.mode {
            Mode::RealTime { period_ns } => Some(Misses::count(&log.response, period_ns)),
            Mode::RealFast => None,
        },
        final_lowest_y: state.iter().map(|n| n.y).fold(f64::INFINITY, f64::min),
        final_mean_y: state.iter().map(|n| n.y).sum::<f64>() / nodes as f64,
    };
    Ok((result, state))
}

/// The runs of a sweep in real time at `period_ns`, `steps` steps each: every size (nodes
/// per quadrant) × thread count × policy (`None`: `SCHED_OTHER`, else the `SCHED_FIFO`
/// priority), in that order.
pub fn sweep_runs(
    sizes: &[usize],
    threads: &[usize],
    policies: &[Option<u8>],
    steps: usize,
    period_ns: u64,
) -> Vec<(usize, DeadlineConfig)> {
    let mut runs = Vec::new();
    for &size in sizes {
        for &threads in threads {
            for &fifo_priority in policies {
                let mode = Mode::RealTime { period_ns };
                runs.push((
                    size,
                    DeadlineConfig {
                        threads,
                        steps,
                        mode,
                        fifo_priority,
                    },
                ));
            }
        }
    }
    runs
}

/// A sweep's runs on a machine of `cpus` CPUs: [`sweep_runs`] over `threads` (none given:
/// 1, one per CPU and two per CPU), under `SCHED_OTHER` and, when `fifo` (its priority) is
/// given, `SCHED_FIFO`; `fifo` is `None` where `SCHED_FIFO` is not permitted, which the note
/// returned with the runs says.
pub fn sweep_plan(
    sizes: &[usize],
    threads: &[usize],
    cpus: usize,
    fifo: Option<u8>,
    (steps, period_ns): (usize, u64),
) -> (Vec<(usize, DeadlineConfig)>, Option<&'static str>) {
    let threads = match threads {
        [] => vec![1, cpus, 2 * cpus],
        given => given.to_vec(),
    };
    let policies: Vec<Option<u8>> = std::iter::once(None).chain(fifo.map(Some)).collect();
    let note = fifo.is_none().then_some(
        "SCHED_FIFO not permitted (run as root or grant CAP_SYS_NICE): SCHED_FIFO column skipped",
    );
    (
        sweep_runs(sizes, &threads, &policies, steps, period_ns),
        note,
    )
}

/// The runs at one size (`size` nodes per quadrant): in real time at `period_ns` when
/// `realtime`, then as fast as possible when `fast`, each else as `base` says.
pub fn mode_runs(
    size: usize,
    (realtime, fast): (bool, bool),
    period_ns: u64,
    base: DeadlineConfig,
) -> Vec<(usize, DeadlineConfig)> {
    let modes = [
        (realtime, Mode::RealTime { period_ns }),
        (fast, Mode::RealFast),
    ];
    let chosen = modes.into_iter().filter(|(run, _)| *run);
    chosen
        .map(|(_, mode)| (size, DeadlineConfig { mode, ..base }))
        .collect()
}

/// Runs `runs` (nodes per quadrant and configuration, see [`run_sized`]) one after the other;
/// `before_each` is told each before it runs (for a progress display).
pub fn run_all(
    runs: &[(usize, DeadlineConfig)],
    period_ns: u64,
    before_each: &mut dyn FnMut(usize, &DeadlineConfig),
) -> Result<Vec<DeadlineResult>, DeadlineError> {
    runs.iter()
        .map(|(size, config)| {
            before_each(*size, config);
            run_sized(*size, period_ns, config)
        })
        .collect()
}

/// Builds the tire of `quadrant_nodes` nodes per quadrant and runs it with `config`. The
/// model's time step is the release period `period_ns`, as in the paper (10 ms at 100 Hz,
/// 0.5 ms for its 2 kHz pretest).
pub fn run_sized(
    quadrant_nodes: usize,
    period_ns: u64,
    config: &DeadlineConfig,
) -> Result<DeadlineResult, DeadlineError> {
    let params = TireParams {
        dt: period_ns as f64 / 1e9,
        ..TireParams::with_quadrant_nodes(quadrant_nodes)
    };
    Ok(run(&Tire::new(params)?, config)?.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sweep_runs_every_size_thread_count_and_policy_in_real_time() {
        let runs = sweep_runs(&[1, 10], &[1, 2], &[None, Some(80)], 30, 10_000_000);
        assert_eq!(runs.len(), 8);
        assert_eq!(runs[0].0, 1);
        assert_eq!(runs[7].0, 10);
        let (threads, fifo): (Vec<_>, Vec<_>) = runs[..4]
            .iter()
            .map(|(_, c)| (c.threads, c.fifo_priority))
            .unzip();
        assert_eq!(threads, [1, 1, 2, 2]);
        assert_eq!(fifo, [None, Some(80), None, Some(80)]);
        assert!(runs.iter().all(|(_, c)| c.steps == 30
            && c.mode
                == Mode::RealTime {
                    period_ns: 10_000_000
                }));
        // A tire too small to build is an error, not a panic.
        let e = run_sized(0, 10_000_000, &runs[0].1).unwrap_err();
        assert!(matches!(e, DeadlineError::Tire(_)), "{e}");
    }

    #[test]
    fn a_sweep_plan_defaults_its_thread_counts_and_skips_fifo_where_not_permitted() {
        let (runs, note) = sweep_plan(&[10], &[], 4, Some(80), (30, 10_000_000));
        assert_eq!(note, None);
        let threads: Vec<_> = runs
            .iter()
            .map(|(_, c)| (c.threads, c.fifo_priority))
            .collect();
        assert_eq!(
            threads,
            [
                (1, None),
                (1, Some(80)),
                (4, None),
                (4, Some(80)),
                (8, None),
                (8, Some(80))
            ]
        );
        let (runs, note) = sweep_plan(&[10, 20], &[2], 4, None, (30, 10_000_000));
        assert_eq!(runs.len(), 2);
        assert!(runs.iter().all(|(_, c)| c.fifo_priority.is_none()));
        assert!(note.unwrap().contains("SCHED_FIFO column skipped"));
    }

    #[test]
    fn one_size_runs_in_real_time_first_then_as_fast_as_possible() {
        let base = DeadlineConfig {
            threads: 2,
            steps: 30,
            mode: Mode::RealFast,
            fifo_priority: Some(80),
        };
        let both = mode_runs(25, (true, true), 10_000_000, base);
        let modes: Vec<_> = both.iter().map(|(size, c)| (*size, c.mode)).collect();
        let real_time = Mode::RealTime {
            period_ns: 10_000_000,
        };
        assert_eq!(modes, [(25, real_time), (25, Mode::RealFast)]);
        assert!(both
            .iter()
            .all(|(_, c)| c.threads == 2 && c.fifo_priority == Some(80)));
        assert_eq!(mode_runs(25, (false, true), 10_000_000, base).len(), 1);
        assert!(mode_runs(25, (false, false), 10_000_000, base).is_empty());
    }

    #[test]
    fn misses_and_their_longest_run() {
        let m = Misses::count(&[5, 11, 12, 3, 20, 21, 22, 1, 10], 10);
        assert_eq!(
            m,
            Misses {
                missed: 5,
                longest_run: 3
            }
        );
        assert_eq!(
            Misses::count(&[], 10),
            Misses {
                missed: 0,
                longest_run: 0
            }
        );
    }

    /// Each node's step reads only the previous buffer, so any partition computes exactly
    /// the single-threaded result, bit for bit.
    #[test]
    fn the_result_does_not_depend_on_the_thread_count() {
        let tire = Tire::new(TireParams::with_quadrant_nodes(10)).unwrap();
        let steps = 150;
        let mut a = tire.initial_state();
        let mut b = a.clone();
        for _ in 0..steps {
            tire.step(&a, &mut b);
            std::mem::swap(&mut a, &mut b);
        }
        for threads in [1, 2, 3, 7] {
            let config = DeadlineConfig {
                threads,
                steps,
                mode: Mode::RealFast,
                fifo_priority: None,
            };
            let (result, state) = run(&tire, &config).unwrap();
            assert_eq!(state, a, "{threads} threads");
            assert_eq!(result.compute_ns.n, steps as u64);
            assert!(result.misses.is_none());
        }
    }

    /// A short real-time run: every step is released no earlier than its deadline, responds
    /// after it computes, and the misses are those responses longer than the period.
    #[test]
    fn real_time_steps_start_no_earlier_than_their_release() {
        let tire = Tire::new(TireParams::with_quadrant_nodes(4)).unwrap();
        let config = DeadlineConfig {
            threads: 2,
            steps: 50,
            mode: Mode::RealTime {
                period_ns: 2_000_000,
            },
            fifo_priority: None,
        };
        let (result, _) = run(&tire, &config).unwrap();
        assert_eq!(result.response_ns.n, 50);
        assert!(result.release_latency_ns.min_ns >= 0);
        assert!(result.response_ns.min_ns >= result.compute_ns.min_ns);
        // 50 steps of 2 ms take at least 98 ms of wall time.
        assert!(result.total_ns >= 98_000_000);
        assert!(result.misses.is_some());
    }

    #[test]
    fn thread_counts_are_checked() {
        let tire = Tire::new(TireParams::with_quadrant_nodes(1)).unwrap();
        let config = DeadlineConfig {
            threads: 5,
            steps: 1,
            mode: Mode::RealFast,
            fifo_priority: None,
        };
        assert!(matches!(
            run(&tire, &config),
            Err(DeadlineError::Threads {
                threads: 5,
                nodes: 4
            })
        ));
    }
}
