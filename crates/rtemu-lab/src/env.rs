//! The conditions of a lab run: real-time set-up, an optional busy load, the measurement's own
//! overhead, and the [`Header`] that records all of them beside the results; [`Conditions`]
//! holds them for the length of a measurement.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use rtemu_clock::rt::{self, DmaLatencyGuard, RtError};
use rtemu_clock::sysinfo::SystemInfo;
use rtemu_clock::Instant;
use serde::Serialize;

use crate::stats::Distribution;

/// The real-time settings a run asks for, applied to the measuring (calling) thread.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RtRequest {
    /// Run under `SCHED_FIFO` at this priority (1..=99); `None`: `SCHED_OTHER`.
    pub fifo_priority: Option<u8>,
    /// Pin the measuring thread to this CPU.
    pub cpu: Option<usize>,
    /// `mlockall` before measuring.
    pub mlock: bool,
    /// Hold `/dev/cpu_dma_latency` at 0 while measuring.
    pub dma_latency: bool,
    /// Set the timer slack to this many ns.
    pub timer_slack_ns: Option<u64>,
}

/// What [`RtRequest::apply`] achieved: keep it alive for the whole measurement.
#[derive(Debug, Default)]
pub struct RtSetup {
    dma: Option<DmaLatencyGuard>,
    /// One line per setting that could not be applied, saying why; the run goes on without it.
    pub notices: Vec<String>,
}

impl RtSetup {
    /// Whether `/dev/cpu_dma_latency` is held.
    pub fn dma_latency_held(&self) -> bool {
        self.dma.is_some()
    }
}

impl RtRequest {
    /// Applies each setting. A missing privilege or an OS refusal becomes a notice and the run
    /// continues without that setting; an out-of-range parameter is an error.
    pub fn apply(&self) -> Result<RtSetup, RtError> {
        let mut setup = RtSetup::default();
        let mut note = |result: Result<(), RtError>| match result {
            Err(e @ RtError::OutOfRange { .. }) => Err(e),
            Err(e) => {
                setup.notices.push(format!("{e}; running without it"));
                Ok(())
            }
            Ok(()) => Ok(()),
        };
        if let Some(cpu) = self.cpu {
            note(rt::set_affinity(&[cpu]))?;
        }
        if let Some(ns) = self.timer_slack_ns {
            note(rt::set_timer_slack(ns))?;
        }
        if self.mlock {
            note(rt::lock_memory())?;
        }
        if let Some(priority) = self.fifo_priority {
            note(rt::set_fifo(priority))?;
        }
        if self.dma_latency {
            match DmaLatencyGuard::hold(0) {
                Ok(guard) => setup.dma = Some(guard),
                Err(e) => setup.notices.push(format!("{e}; running without it")),
            }
        }
        Ok(setup)
    }
}

/// Busy threads that compete for the CPUs while a measurement runs, to show what contention
/// does. They stop when dropped, and on their own after `max_ns` in any case.
#[derive(Debug)]
pub struct BusyLoad {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

/// Busy threads per CPU at most: more only crowds the run queue with what the load already
/// shows, and thousands of threads exhaust the machine (each has its own stack).
pub const MAX_LOAD_THREADS_PER_CPU: usize = 8;

/// A busy load that cannot be started.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// More threads asked for than [`BusyLoad::max_threads`].
    #[error(
        "a load of {asked} threads is out of range: give 1 to {max} ({MAX_LOAD_THREADS_PER_CPU} \
         per CPU on this machine's {cpus} CPUs)"
    )]
    OutOfRange {
        /// Threads asked for.
        asked: usize,
        /// The most allowed here.
        max: usize,
        /// CPUs this process may use.
        cpus: usize,
    },
    /// The system refused a thread.
    #[error("starting load thread {index} of {asked}: {source}")]
    Spawn {
        /// Index of the thread that could not be created, from 0.
        index: usize,
        /// Threads asked for.
        asked: usize,
        /// Why.
        source: std::io::Error,
    },
}

impl BusyLoad {
    /// The most load threads [`BusyLoad::start`] accepts here, and the CPUs it is reckoned from.
    pub fn max_threads() -> (usize, usize) {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        (cpus * MAX_LOAD_THREADS_PER_CPU, cpus)
    }

    /// Starts `threads` spinning threads under `SCHED_OTHER`, kept off `avoid_cpu` when other
    /// CPUs exist, each ending by itself after `max_ns`. Returns once all are set up. A count
    /// of 0 or above [`BusyLoad::max_threads`] is refused; if the system refuses a thread, the
    /// ones started are stopped and the error says so.
    pub fn start(
        threads: usize,
        avoid_cpu: Option<usize>,
        max_ns: u64,
    ) -> Result<BusyLoad, LoadError> {
        let (max, cpus) = Self::max_threads();
        if !(1..=max).contains(&threads) {
            return Err(LoadError::OutOfRange {
                asked: threads,
                max,
                cpus,
            });
        }
        let stop = Arc::new(AtomicBool::new(false));
        let others: Vec<usize> = rt::affinity()
            .unwrap_or_default()
            .into_iter()
            .filter(|&c| Some(c) != avoid_cpu)
            .collect();
        let end = Instant::now() + max_ns;
        // Each thread reports when it is set up; a channel rather than a barrier, so that a
        // failed spawn leaves no thread waiting for one that never came.
        let (ready_tx, ready) = std::sync::mpsc::channel::<()>();
        let mut load = BusyLoad {
            stop: Arc::clone(&stop),
            threads: Vec::with_capacity(threads),
        };
        for index in 0..threads {
            let stop = Arc::clone(&stop);
            let others = others.clone();
            let ready_tx = ready_tx.clone();
            let spawned = std::thread::Builder::new()
                .name("rtemu-lab-load".into())
                .spawn(move || {
                    // A new thread inherits its creator's policy: a load spawned by a
                    // SCHED_FIFO thread would itself be SCHED_FIFO and starve the measurement
                    // (and the machine). The load must compete as an ordinary process does.
                    let _ = rt::set_other();
                    if avoid_cpu.is_some() && !others.is_empty() {
                        // Best effort: without it the load still competes, just everywhere.
                        let _ = rt::set_affinity(&others);
                    }
                    let _ = ready_tx.send(());
                    let mut x = 0u64;
                    while !stop.load(Ordering::Relaxed) && Instant::now() < end {
                        for _ in 0..1_000 {
                            x = std::hint::black_box(x.wrapping_mul(6364136223846793005) + 1);
                        }
                    }
                });
            match spawned {
                Ok(handle) => load.threads.push(handle),
                // Dropping `load` stops and joins the threads already started.
                Err(source) => {
                    return Err(LoadError::Spawn {
                        index,
                        asked: threads,
                        source,
                    })
                }
            }
        }
        drop(ready_tx);
        for _ in 0..threads {
            // A thread that died before reporting closes its sender: nothing to wait for.
            if ready.recv().is_err() {
                break;
            }
        }
        Ok(load)
    }

    /// The number of load threads.
    pub fn threads(&self) -> usize {
        self.threads.len()
    }

    /// The load a lab command asks for: `threads`, or one per CPU when `None`, kept off
    /// `avoid_cpu` and ending by itself after [`LOAD_BOUND_NS`] whatever happens to the run.
    pub fn for_run(
        threads: Option<usize>,
        avoid_cpu: Option<usize>,
    ) -> Result<BusyLoad, LoadError> {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        BusyLoad::start(threads.unwrap_or(cpus), avoid_cpu, LOAD_BOUND_NS)
    }
}

/// The longest a [`BusyLoad::for_run`] may outlive its measurement by mistake.
pub const LOAD_BOUND_NS: u64 = 600_000_000_000;

/// A measurement's conditions while it runs: the applied real-time set-up and the busy load,
/// with the [`Header`] that records them, probed as they began.
#[derive(Debug)]
pub struct Conditions {
    setup: RtSetup,
    load: Option<BusyLoad>,
    header: Header,
}

/// Conditions that could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SetUpError {
    /// A real-time setting out of range.
    #[error("real-time set-up")]
    Rt(#[source] RtError),
    /// The busy load asked for (`--load`).
    #[error("--load")]
    Load(#[source] LoadError),
}

impl Conditions {
    /// Applies `request` on the calling (measuring) thread, then starts the `load` asked for
    /// (`Some(None)`: one thread per CPU; see [`BusyLoad::for_run`]) kept off `avoid_cpu`.
    pub fn set_up(
        request: &RtRequest,
        load: Option<Option<usize>>,
        avoid_cpu: Option<usize>,
    ) -> Result<Conditions, SetUpError> {
        let setup = request.apply().map_err(SetUpError::Rt)?;
        let load = load
            .map(|threads| BusyLoad::for_run(threads, avoid_cpu))
            .transpose()
            .map_err(SetUpError::Load)?;
        Ok(Conditions::new(setup, load))
    }

    /// The conditions of `setup` (already applied, on the measuring thread) and `load`,
    /// probed into their header now.
    pub fn new(setup: RtSetup, load: Option<BusyLoad>) -> Conditions {
        let header = Header::probe(&setup, load.as_ref().map_or(0, BusyLoad::threads));
        Conditions {
            setup,
            load,
            header,
        }
    }

    /// What the header says of them.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Ends them once the measurement is over, the load first, then what the set-up holds,
    /// and returns the header for the report.
    pub fn end(self) -> Header {
        drop(self.load);
        drop(self.setup);
        self.header
    }
}

impl Drop for BusyLoad {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// The cost of one `CLOCK_MONOTONIC` reading, measured as the gap between back-to-back reads
/// (`samples` of them, preallocated). Every measured time in the lab contains about one such
/// reading, so this is the lab's own floor.
pub fn clock_read_overhead(samples: usize) -> Distribution {
    let mut gaps = vec![0i64; samples];
    for gap in gaps.iter_mut() {
        let a = Instant::now();
        let b = Instant::now();
        *gap = b.signed_nanos_since(a);
    }
    Distribution::compute(&gaps)
}

/// The header every lab report opens with: the machine, the set-up, and the lab's own overhead.
#[derive(Clone, Debug, Serialize)]
pub struct Header {
    /// `uname -r`.
    pub kernel_release: String,
    /// `uname -v`.
    pub kernel_version: String,
    /// Preemption model.
    pub preemption: String,
    /// Current clocksource.
    pub clocksource: String,
    /// Timer slack of the measuring thread, ns.
    pub timer_slack_ns: Option<u64>,
    /// Scheduling policy of the measuring thread.
    pub policy: String,
    /// Whether the process memory is locked.
    pub mlockall: bool,
    /// CPUs the measuring thread may run on, kernel list syntax.
    pub affinity: String,
    /// Online CPUs.
    pub cpus: usize,
    /// Hypervisor detected, if any.
    pub virtualization: Option<String>,
    /// `kernel.sched_rt_runtime_us`.
    pub rt_runtime_us: Option<i64>,
    /// Whether `/dev/cpu_dma_latency` is held at 0.
    pub dma_latency_held: bool,
    /// Busy load threads running during the measurement.
    pub load_threads: usize,
    /// Gap between two back-to-back clock reads: the measurement's own overhead.
    pub clock_read_ns: Distribution,
    /// Settings that could not be applied.
    pub notices: Vec<String>,
}

impl Header {
    /// Probes the machine and the calling thread after `setup` was applied.
    pub fn probe(setup: &RtSetup, load_threads: usize) -> Header {
        let info = SystemInfo::probe();
        let unknown = || "unknown".to_owned();
        Header {
            kernel_release: info.kernel_release.unwrap_or_else(unknown),
            kernel_version: info.kernel_version.unwrap_or_else(unknown),
            preemption: info.preemption.to_string(),
            clocksource: info.clocksource.unwrap_or_else(unknown),
            timer_slack_ns: info.timer_slack_ns,
            policy: info.policy.map_or_else(unknown, |p| p.to_string()),
            mlockall: info.locked_kb.is_some_and(|kb| kb > 0),
            affinity: rt::format_cpu_list(&info.affinity),
            cpus: info.cpus,
            virtualization: info.virtualization,
            rt_runtime_us: info.rt_runtime_us,
            dma_latency_held: setup.dma_latency_held(),
            load_threads,
            clock_read_ns: clock_read_overhead(10_000),
            notices: setup.notices.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    #[test]
    fn out_of_range_priority_is_an_error_not_a_notice() {
        let request = RtRequest {
            fifo_priority: Some(0),
            ..RtRequest::default()
        };
        let outcome = std::thread::spawn(move || request.apply().map(|s| s.notices))
            .join()
            .unwrap();
        assert!(matches!(outcome, Err(RtError::OutOfRange { .. })));
    }

    #[test]
    fn settings_are_applied_to_the_calling_thread() {
        let cpu = rt::affinity().unwrap()[0];
        let request = RtRequest {
            cpu: Some(cpu),
            timer_slack_ns: Some(1),
            ..RtRequest::default()
        };
        let (notices, header) = std::thread::spawn(move || {
            let setup = request.apply().unwrap();
            (setup.notices.clone(), Header::probe(&setup, 0))
        })
        .join()
        .unwrap();
        assert!(notices.is_empty(), "{notices:?}");
        assert_eq!(header.affinity, cpu.to_string());
        assert_eq!(header.timer_slack_ns, Some(1));
        assert!(header.clock_read_ns.n == 10_000 && header.clock_read_ns.min_ns >= 0);
    }

    /// Scheduling policies of this process's threads, from `/proc/self/task/*/stat`
    /// (field 41, the 39th after the parenthesised command).
    fn thread_policies() -> Vec<i32> {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("stat")).ok())
            .filter_map(|stat| {
                let fields = stat.rsplit_once(") ")?.1.to_owned();
                fields.split(' ').nth(38)?.parse().ok()
            })
            .collect()
    }

    /// A load started by a SCHED_FIFO thread must still run under SCHED_OTHER. Without the
    /// privilege to become SCHED_FIFO there is nothing to inherit, and the test says so.
    #[test]
    fn busy_load_runs_under_sched_other_even_when_started_from_sched_fifo() {
        let policies = std::thread::spawn(|| {
            rt::set_fifo(1).ok()?;
            let load = BusyLoad::start(2, None, 10_000_000_000).unwrap();
            let policies = thread_policies();
            drop(load);
            Some(policies)
        })
        .join()
        .unwrap();
        match policies {
            // Only the spawning thread may be SCHED_FIFO; `start` returns once every load
            // thread has left it.
            Some(p) => assert!(
                p.iter().filter(|&&x| x == libc::SCHED_FIFO).count() <= 1,
                "{p:?}"
            ),
            None => {
                let _ = writeln!(
                    std::io::stderr(),
                    "SKIPPED busy_load_runs_under_sched_other: SCHED_FIFO not permitted"
                );
                assert!(std::env::var("RTEMU_REQUIRE_ROOT").as_deref() != Ok("1"));
            }
        }
    }

    #[test]
    fn busy_load_stops_when_dropped_and_on_its_own() {
        let load = BusyLoad::start(1, None, 60_000_000_000).unwrap();
        assert_eq!(load.threads(), 1);
        let start = Instant::now();
        drop(load);
        // Dropping joins the thread; a thread ignoring the flag would hold this for 60 s.
        assert!(Instant::now().nanos_since(start) < 30_000_000_000);
        // With a 1 ms bound it ends without being told.
        let load = BusyLoad::start(1, None, 1_000_000).unwrap();
        let patience = Instant::now() + 20_000_000_000;
        while !load.threads.iter().all(|t| t.is_finished()) && Instant::now() < patience {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(load.threads.iter().all(|t| t.is_finished()));
    }

    #[test]
    fn conditions_record_their_load_and_end_it() {
        let load = BusyLoad::for_run(Some(1), None).unwrap();
        let conditions = Conditions::new(RtSetup::default(), Some(load));
        assert_eq!(conditions.header().load_threads, 1);
        let start = Instant::now();
        let header = conditions.end();
        // Ending joins the load thread, which would otherwise spin for LOAD_BOUND_NS.
        assert!(Instant::now().nanos_since(start) < 30_000_000_000);
        assert_eq!(header.load_threads, 1);
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(BusyLoad::for_run(None, None).unwrap().threads(), cpus);
        assert_eq!(
            Conditions::new(RtSetup::default(), None).end().load_threads,
            0
        );
    }

    #[test]
    fn busy_load_refuses_counts_out_of_range_naming_the_range() {
        let (max, cpus) = BusyLoad::max_threads();
        assert_eq!(max, cpus * MAX_LOAD_THREADS_PER_CPU);
        for asked in [0, max + 1, 100_000] {
            let e = BusyLoad::start(asked, None, 1_000_000).unwrap_err();
            assert!(matches!(e, LoadError::OutOfRange { .. }), "{e}");
            let msg = e.to_string();
            assert!(msg.contains(&format!("give 1 to {max}")), "{msg}");
        }
        let load = BusyLoad::start(max, None, 1_000_000).unwrap();
        assert_eq!(load.threads(), max);
    }
}
