//! `rtemu lab latency`: worst-case scheduling latencies (the RTOS paper's Table 1) and a
//! priority-inversion test in the style of `pi_stress`.
//!
//! Every test pins its threads to one CPU, so that the scheduler, not the load balancer,
//! decides who runs, and runs once under `SCHED_OTHER` and once under `SCHED_FIFO`:
//!
//! * task switch: two threads of equal priority take turns with `sched_yield`; the time from
//!   one thread's yield to the other running;
//! * preemption: a high-priority thread wakes from an absolute sleep every period while a
//!   low-priority thread spins (in 8 ms bursts with 2 ms pauses, to stay under the kernel's
//!   real-time budget); the time from the deadline to the high thread running (what
//!   cyclictest measures, with a competitor on the CPU);
//! * IPC: a low-priority thread posts a semaphore a high-priority thread waits on
//!   (ptsematest-style); the time from the post to the waiter running;
//! * IPC through a mutex (`ipc-mutex`, ptsematest's own hand-off): the low-priority thread holds
//!   a pthread mutex the high-priority thread blocks on, and passes it the token by unlocking;
//!   the time from the unlock to the waiter holding the mutex. Under `SCHED_FIFO` on one CPU the
//!   waiter is always blocked by then; under `SCHED_OTHER` it may not be yet, and the sample is
//!   then an uncontended lock.
//!
//! The priority-inversion test has a low-priority thread hold a lock, a medium one spin, and a
//! high one ask for the lock. With a `PTHREAD_PRIO_INHERIT` mutex the holder is boosted and
//! the high thread gets the mutex after the holder's short critical section; with a plain mutex
//! the medium thread keeps the holder off the CPU until the watchdog (the medium thread's own
//! time bound) ends the inversion; with a spin lock the high thread spins too, keeping even
//! the medium thread off the CPU, until the same watchdog (checked by the spinning waiter)
//! ends it.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread::JoinHandle;

use rtemu_clock::rt::{self, Policy, RtError};
use rtemu_clock::time::{format_duration_ns, thread_cpu_time_ns};
use rtemu_clock::wait::WaitError;
use rtemu_clock::{Instant, WaitStrategy, Waiter};
use rtemu_sys::thread::{spawn, SpawnError};
use serde::Serialize;

use crate::stats::Distribution;
use crate::sync::{yield_now, PthreadMutex, Semaphore, SpinLock};

/// The `SCHED_FIFO` priorities of the tests: low enough to leave room above for the kernel's
/// own real-time threads (migration, watchdog at 99).
const LOW: u8 = 10;
const MEDIUM: u8 = 20;
const HIGH: u8 = 30;

/// The preemption test's low-priority thread spins this long, then pauses for
/// [`SPIN_PAUSE_NS`]: busy 80 % of the time, under the kernel's real-time budget.
pub const SPIN_BURST_NS: u64 = 8_000_000;
/// See [`SPIN_BURST_NS`].
pub const SPIN_PAUSE_NS: u64 = 2_000_000;

/// How long the low-priority thread of the inversion test holds the mutex, in its own CPU time.
pub const CRITICAL_SECTION_NS: u64 = 2_000_000;

/// A latency test failed (as opposed to measuring something bad).
#[derive(Debug, thiserror::Error)]
pub enum LatencyError {
    /// Real-time set-up of a test thread failed.
    #[error(transparent)]
    Rt(#[from] RtError),
    /// Creating a mutex or semaphore failed.
    #[error("creating a pthread object: {0}")]
    Sync(#[from] std::io::Error),
    /// A wait failed.
    #[error(transparent)]
    Wait(#[from] WaitError),
    /// A test thread panicked.
    #[error("a {0} test thread panicked")]
    Panicked(&'static str),
    /// A test thread could not be started.
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    /// The CPUs this process may use could not be read.
    #[error("reading the CPU affinity")]
    Affinity(#[source] RtError),
    /// The CPU asked for is not one this process may use.
    #[error("--cpu {cpu} is not one this process may use: pick one of {allowed}")]
    CpuNotAllowed {
        /// The CPU asked for.
        cpu: usize,
        /// The CPUs allowed, kernel list syntax.
        allowed: String,
    },
    /// This process may use no CPU at all.
    #[error("no CPU allowed")]
    NoCpu,
    /// A setting is outside its valid range.
    #[error(
        "{what} {} is out of range: give {} to {}",
        format_duration_ns(*value),
        format_duration_ns(*range.start()),
        format_duration_ns(*range.end())
    )]
    OutOfRange {
        /// Which setting.
        what: &'static str,
        /// Its value, ns.
        value: u64,
        /// The valid values, ns.
        range: std::ops::RangeInclusive<u64>,
    },
}

/// The preemption test's valid periods, ns: a shorter one makes the high-priority thread
/// a busy loop (and RT throttling stalls the CPU), a longer one gives few samples.
pub const PERIOD_RANGE_NS: std::ops::RangeInclusive<u64> = 10_000..=1_000_000_000;

/// Each test's valid time limits, ns: below 1 ms no test gets a sample, above an hour a run
/// looks hung.
pub const TIME_LIMIT_RANGE_NS: std::ops::RangeInclusive<u64> = 1_000_000..=3_600_000_000_000;

/// The scheduling class a test runs under; `Fifo` uses fixed priorities per role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Class {
    /// `SCHED_OTHER` for every thread.
    #[serde(rename = "SCHED_OTHER")]
    Other,
    /// `SCHED_FIFO`, low and high roles at different priorities.
    #[serde(rename = "SCHED_FIFO")]
    Fifo,
}

impl Class {
    fn policy(self, priority: u8) -> Policy {
        match self {
            Class::Other => Policy::Other,
            Class::Fifo => Policy::Fifo(priority),
        }
    }
}

/// What the latency tests do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LatencyConfig {
    /// The CPU every test thread is pinned to.
    pub cpu: usize,
    /// Samples per test and class.
    pub iterations: usize,
    /// Period of the preemption test's wake-ups, ns.
    pub period_ns: u64,
    /// Upper bound on each test's duration, ns.
    pub time_limit_ns: u64,
}

impl LatencyConfig {
    /// Checks the period and the time limit against their ranges.
    pub fn check(&self) -> Result<(), LatencyError> {
        for (what, value, range) in [
            ("the preemption period", self.period_ns, PERIOD_RANGE_NS),
            ("the time limit", self.time_limit_ns, TIME_LIMIT_RANGE_NS),
        ] {
            if !range.contains(&value) {
                return Err(LatencyError::OutOfRange { what, value, range });
            }
        }
        Ok(())
    }
}

/// One test under one class.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LatencyRow {
    /// `task-switch`, `preemption` or `ipc`.
    pub test: &'static str,
    /// The scheduling class.
    pub class: Class,
    /// Mean latency, ns.
    pub mean_ns: f64,
    /// Latency percentiles, ns.
    pub latency_ns: Distribution,
}

impl LatencyRow {
    /// Summarises one test's samples, ns.
    pub fn from_samples(test: &'static str, class: Class, samples: &[i64]) -> LatencyRow {
        let mean_ns = if samples.is_empty() {
            0.0
        } else {
            samples.iter().sum::<i64>() as f64 / samples.len() as f64
        };
        LatencyRow {
            test,
            class,
            mean_ns,
            latency_ns: Distribution::compute(samples),
        }
    }
}

/// Pins the calling test thread and sets its policy: the policy first, so that a `SCHED_FIFO`
/// thread arriving on a CPU where a lower `SCHED_FIFO` thread spins can preempt it (a
/// `SCHED_OTHER` thread would never run there to raise itself).
fn enter(cpu: usize, policy: Policy) -> Result<(), RtError> {
    rt::set_policy(policy)?;
    rt::set_affinity(&[cpu])
}

fn join<T>(handle: JoinHandle<T>, test: &'static str) -> Result<T, LatencyError> {
    handle.join().map_err(|_| LatencyError::Panicked(test))
}

/// Where a test's two threads meet once both are set up, so that neither measures the other's
/// start. When the second cannot be started, the caller meets the first in its place and calls
/// the test off, so no thread is left waiting for one that never came.
struct Start {
    barrier: Barrier,
    off: AtomicBool,
}

impl Start {
    fn new() -> Arc<Start> {
        Arc::new(Start {
            barrier: Barrier::new(2),
            off: AtomicBool::new(false),
        })
    }

    /// Waits for the other thread; `false` when the test was called off.
    fn meet(&self) -> bool {
        self.barrier.wait();
        !self.off.load(Ordering::Acquire)
    }

    /// Calls the test off, releasing the thread waiting in [`Start::meet`].
    fn call_off(&self) {
        self.off.store(true, Ordering::Release);
        self.barrier.wait();
    }
}

/// The test's two threads, or, when the second could not be started, it could not be started, the first released from `start`
/// and joined and the error returned.
fn both<F, S>(
    start: &Start,
    first: JoinHandle<F>,
    spawned: Result<JoinHandle<S>, SpawnError>,
) -> Result<(JoinHandle<F>, JoinHandle<S>), LatencyError> {
    match spawned {
        Ok(second) => Ok((first, second)),
        Err(e) => {
            start.call_off();
            let _ = first.join();
            Err(e.into())
        }
    }
}

/// Two equal-priority threads alternate through `sched_yield`; returns the switch latencies.
pub fn task_switch(config: &LatencyConfig, class: Class) -> Result<Vec<i64>, LatencyError> {
    let turn = Arc::new(AtomicU32::new(0));
    let stamp = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let start = Start::new();
    let end = Instant::now() + config.time_limit_ns;
    let per_thread = config.iterations.div_ceil(2);
    let thread = |me: u32| {
        let (turn, stamp, done, start) = (
            Arc::clone(&turn),
            Arc::clone(&stamp),
            Arc::clone(&done),
            Arc::clone(&start),
        );
        let cpu = config.cpu;
        spawn(format!("rtemu-switch-{me}"), move || {
            let setup = enter(cpu, class.policy(LOW));
            let mut samples = Vec::with_capacity(per_thread);
            if !start.meet() {
                return setup.map(|()| samples);
            }
            while !done.load(Ordering::Acquire) && Instant::now() < end {
                if turn.load(Ordering::Acquire) != me {
                    yield_now();
                    continue;
                }
                let now = Instant::now();
                let then = stamp.load(Ordering::Acquire);
                if then != 0 {
                    samples.push(now.signed_nanos_since(Instant::from_nanos(then)));
                }
                if samples.len() >= per_thread {
                    done.store(true, Ordering::Release);
                }
                stamp.store(Instant::now().as_nanos(), Ordering::Release);
                turn.store(1 - me, Ordering::Release);
                yield_now();
            }
            setup.map(|()| samples)
        })
    };
    let (first, second) = both(&start, thread(0)?, thread(1))?;
    let mut all = Vec::with_capacity(config.iterations);
    for thread in [first, second] {
        all.extend(join(thread, "task-switch")??);
    }
    Ok(all)
}

/// A high-priority thread wakes every period while a low-priority one spins on its CPU;
/// returns how late each wake-up was.
pub fn preemption(config: &LatencyConfig, class: Class) -> Result<Vec<i64>, LatencyError> {
    config.check()?;
    let stop = Arc::new(AtomicBool::new(false));
    let start = Start::new();
    let end = Instant::now() + config.time_limit_ns;
    let cpu = config.cpu;
    let spinner = {
        let (stop, start) = (Arc::clone(&stop), Arc::clone(&start));
        spawn("rtemu-spinner", move || {
            let setup = enter(cpu, class.policy(LOW));
            if !start.meet() {
                return setup;
            }
            // Spin in bursts with short sleeps: a SCHED_FIFO thread spinning without pause
            // would exhaust the kernel's real-time budget (sched_rt_runtime_us, 95 % by
            // default) and the throttling would stall the measuring thread too, for 50 ms.
            let mut burst_end = Instant::now() + SPIN_BURST_NS;
            while !stop.load(Ordering::Relaxed) && Instant::now() < end {
                if Instant::now() >= burst_end {
                    std::thread::sleep(std::time::Duration::from_nanos(SPIN_PAUSE_NS));
                    burst_end = Instant::now() + SPIN_BURST_NS;
                }
                std::hint::spin_loop();
            }
            setup
        })?
    };
    let (iterations, period) = (config.iterations, config.period_ns);
    let measuring = Arc::clone(&start);
    let measurer = spawn("rtemu-measurer", move || {
        let setup = enter(cpu, class.policy(HIGH));
        let met = measuring.meet();
        let result = (|| {
            setup?;
            if !met {
                return Ok(Vec::new());
            }
            let mut waiter = Waiter::new(WaitStrategy::Sleep)?;
            let mut samples = Vec::with_capacity(iterations);
            let mut next = Instant::now() + period;
            while samples.len() < iterations && next < end {
                waiter.wait_until(next)?;
                let woke = Instant::now();
                samples.push(woke.signed_nanos_since(next));
                // Skip periods already missed, by arithmetic: each sample is one wake-up's
                // latency, not a backlog of earlier ones.
                next = next + period;
                if next <= woke {
                    next = next + (woke.nanos_since(next) / period + 1) * period;
                }
            }
            Ok::<_, LatencyError>(samples)
        })();
        stop.store(true, Ordering::Relaxed);
        result
    });
    let (spinner, measurer) = both(&start, spinner, measurer)?;
    let samples = join(measurer, "preemption")?;
    join(spinner, "preemption")??;
    samples
}

/// A low-priority thread posts a semaphore a high-priority thread waits on; returns the
/// hand-off latencies.
pub fn ipc(config: &LatencyConfig, class: Class) -> Result<Vec<i64>, LatencyError> {
    let ping = Arc::new(Semaphore::new()?);
    let pong = Arc::new(Semaphore::new()?);
    let stamp = Arc::new(AtomicU64::new(0));
    let start = Start::new();
    let (cpu, iterations) = (config.cpu, config.iterations);
    let receiver = {
        let (ping, pong, stamp, start) = (
            Arc::clone(&ping),
            Arc::clone(&pong),
            Arc::clone(&stamp),
            Arc::clone(&start),
        );
        spawn("rtemu-ipc-rx", move || {
            let setup = enter(cpu, class.policy(HIGH));
            let mut samples = Vec::with_capacity(iterations);
            if !start.meet() {
                return setup.map(|()| samples);
            }
            for _ in 0..iterations {
                ping.wait();
                let posted = Instant::from_nanos(stamp.load(Ordering::Acquire));
                samples.push(Instant::now().signed_nanos_since(posted));
                pong.post();
            }
            setup.map(|()| samples)
        })?
    };
    let sending = Arc::clone(&start);
    let sender = spawn("rtemu-ipc-tx", move || {
        let setup = enter(cpu, class.policy(LOW));
        if !sending.meet() {
            return setup;
        }
        for _ in 0..iterations {
            stamp.store(Instant::now().as_nanos(), Ordering::Release);
            ping.post();
            pong.wait();
        }
        setup
    });
    let (receiver, sender) = both(&start, receiver, sender)?;
    join(sender, "ipc")??;
    Ok(join(receiver, "ipc")??)
}

/// A low-priority thread passes a token to a high-priority one through a pthread mutex
/// (ptsematest-style); returns the hand-off latencies.
pub fn ipc_mutex(config: &LatencyConfig, class: Class) -> Result<Vec<i64>, LatencyError> {
    let token = Arc::new(PthreadMutex::new(false)?);
    // The sender holds the token and tells the receiver to ask for it; the receiver says it
    // is asking, and when it got the token and gave it back.
    let go = Arc::new(Semaphore::new()?);
    let done = Arc::new(Semaphore::new()?);
    let asking = Arc::new(AtomicBool::new(false));
    let stamp = Arc::new(AtomicU64::new(0));
    let start = Start::new();
    let (cpu, iterations) = (config.cpu, config.iterations);
    let end = Instant::now() + config.time_limit_ns;
    let receiver = {
        let (token, go, done, asking, stamp, start) = (
            Arc::clone(&token),
            Arc::clone(&go),
            Arc::clone(&done),
            Arc::clone(&asking),
            Arc::clone(&stamp),
            Arc::clone(&start),
        );
        spawn("rtemu-mutex-rx", move || {
            let setup = enter(cpu, class.policy(HIGH));
            let mut samples = Vec::with_capacity(iterations);
            let mut failed = None;
            if !start.meet() {
                return setup.map(|()| samples).map_err(LatencyError::from);
            }
            for _ in 0..iterations {
                go.wait();
                asking.store(true, Ordering::Release);
                // Whatever happens, answer: the sender waits for it.
                match token.lock() {
                    Ok(guard) => {
                        let got = Instant::now();
                        drop(guard);
                        let released = Instant::from_nanos(stamp.load(Ordering::Acquire));
                        samples.push(got.signed_nanos_since(released));
                    }
                    Err(e) => failed = Some(e),
                }
                done.post();
            }
            setup?;
            failed.map_or(Ok(samples), |e| Err(LatencyError::Sync(e)))
        })?
    };
    let sending = Arc::clone(&start);
    let sender = spawn("rtemu-mutex-tx", move || -> Result<(), LatencyError> {
        let setup = enter(cpu, class.policy(LOW));
        let mut failed = None;
        if !sending.meet() {
            return Ok(setup?);
        }
        for _ in 0..iterations {
            let guard = token.lock();
            go.post();
            // Under SCHED_FIFO the receiver ran at the post and is blocked on the token now;
            // under SCHED_OTHER give it the CPU until it asks (bounded, never a hang).
            while !asking.swap(false, Ordering::AcqRel) && Instant::now() < end {
                yield_now();
            }
            yield_now();
            stamp.store(Instant::now().as_nanos(), Ordering::Release);
            match guard {
                Ok(guard) => drop(guard),
                Err(e) => failed = Some(e),
            }
            done.wait();
        }
        setup?;
        failed.map_or(Ok(()), |e| Err(LatencyError::Sync(e)))
    });
    let (receiver, sender) = both(&start, receiver, sender)?;
    join(sender, "ipc-mutex")??;
    join(receiver, "ipc-mutex")?
}

/// The lock of the priority-inversion test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum InversionLock {
    /// A pthread mutex with `PTHREAD_PRIO_INHERIT`: the holder is boosted, no inversion.
    #[serde(rename = "PTHREAD_PRIO_INHERIT")]
    Inherit,
    /// A pthread mutex with `PTHREAD_PRIO_NONE`: the inversion lasts until the watchdog.
    #[serde(rename = "PTHREAD_PRIO_NONE")]
    Plain,
    /// A spin lock: the waiter spins, nothing boosts the holder; the inversion lasts until
    /// the watchdog.
    #[serde(rename = "spin")]
    Spin,
}

impl InversionLock {
    /// Every lock, in the order the report shows them.
    pub const ALL: [InversionLock; 3] = [
        InversionLock::Inherit,
        InversionLock::Plain,
        InversionLock::Spin,
    ];

    /// The report's name of the lock.
    pub fn name(self) -> &'static str {
        match self {
            InversionLock::Inherit => "PTHREAD_PRIO_INHERIT",
            InversionLock::Plain => "PTHREAD_PRIO_NONE",
            InversionLock::Spin => "spin lock",
        }
    }
}

/// The lock under test, made.
enum Lock {
    Mutex(PthreadMutex),
    Spin(SpinLock),
}

impl Lock {
    fn new(kind: InversionLock) -> std::io::Result<Lock> {
        Ok(match kind {
            InversionLock::Inherit => Lock::Mutex(PthreadMutex::new(true)?),
            InversionLock::Plain => Lock::Mutex(PthreadMutex::new(false)?),
            InversionLock::Spin => Lock::Spin(SpinLock::new()),
        })
    }

    /// Runs `body` holding the lock. A mutex blocks until it is free; a spin lock spins, and
    /// gives up (`None`) once `give_up` says so.
    fn with<T>(
        &self,
        give_up: impl Fn() -> bool,
        body: impl FnOnce() -> T,
    ) -> std::io::Result<Option<T>> {
        match self {
            Lock::Mutex(mutex) => {
                let _guard = mutex.lock()?;
                Ok(Some(body()))
            }
            Lock::Spin(spin) => loop {
                if let Some(_guard) = spin.try_lock() {
                    return Ok(Some(body()));
                }
                if give_up() {
                    return Ok(None);
                }
                std::hint::spin_loop();
            },
        }
    }
}

/// The outcome of one priority-inversion run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct InversionResult {
    /// The lock the threads contended for.
    pub lock: InversionLock,
    /// Whether the lock was a mutex with `PTHREAD_PRIO_INHERIT`.
    pub priority_inheritance: bool,
    /// How long the high-priority thread waited for the mutex, ns.
    pub high_wait_ns: u64,
    /// The medium thread's bound, ns.
    pub watchdog_ns: u64,
    /// Whether the watchdog had to end the inversion (the medium thread, or the spinning high
    /// thread): the inversion happened.
    pub watchdog_fired: bool,
}

fn wait_for(flag: &AtomicBool, until: Instant) -> bool {
    while !flag.load(Ordering::Acquire) {
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_micros(100));
    }
    true
}

/// Runs the priority-inversion scenario once on `cpu` under `SCHED_FIFO` with a pthread mutex,
/// `PTHREAD_PRIO_INHERIT` when `inherit`. Needs `SCHED_FIFO` and a second CPU for the calling
/// thread, which starts the others.
pub fn priority_inversion(
    inherit: bool,
    cpu: usize,
    watchdog_ns: u64,
) -> Result<InversionResult, LatencyError> {
    let lock = if inherit {
        InversionLock::Inherit
    } else {
        InversionLock::Plain
    };
    priority_inversion_with(lock, cpu, watchdog_ns)
}

/// Runs the priority-inversion scenario once on `cpu` under `SCHED_FIFO` with `lock`; see
/// [`priority_inversion`].
pub fn priority_inversion_with(
    kind: InversionLock,
    cpu: usize,
    watchdog_ns: u64,
) -> Result<InversionResult, LatencyError> {
    let mutex = Arc::new(Lock::new(kind)?);
    let locked = Arc::new(AtomicBool::new(false));
    let medium_running = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    // Every wait below ends by this time whatever happens, so the test is bounded.
    let bound = Instant::now() + 4 * watchdog_ns + 1_000_000_000;

    let low = {
        let (mutex, locked, medium_running) = (
            Arc::clone(&mutex),
            Arc::clone(&locked),
            Arc::clone(&medium_running),
        );
        spawn("rtemu-inv-low", move || -> Result<(), LatencyError> {
            enter(cpu, Policy::Fifo(LOW))?;
            // Uncontended: nobody else asks before `locked` is set.
            mutex.with(
                || false,
                || {
                    locked.store(true, Ordering::Release);
                    // Hold the lock until the medium thread is on the CPU, so the inversion
                    // can form.
                    while !medium_running.load(Ordering::Acquire) && Instant::now() < bound {
                        std::hint::spin_loop();
                    }
                    // The critical section: CPU time, so preemption lengthens it in wall time
                    // only.
                    let done = thread_cpu_time_ns() + CRITICAL_SECTION_NS;
                    while thread_cpu_time_ns() < done && Instant::now() < bound {
                        std::hint::spin_loop();
                    }
                },
            )?;
            Ok(())
        })?
    };
    wait_for(&locked, bound);
    // The watchdog runs from the moment the high thread asks for the mutex, so an inversion
    // lasts the watchdog's full length however long the threads took to start.
    let asked_at = Arc::new(AtomicU64::new(0));
    let medium = {
        let (medium_running, stop, asked_at) = (
            Arc::clone(&medium_running),
            Arc::clone(&stop),
            Arc::clone(&asked_at),
        );
        spawn("rtemu-inv-medium", move || -> Result<bool, LatencyError> {
            enter(cpu, Policy::Fifo(MEDIUM))?;
            medium_running.store(true, Ordering::Release);
            loop {
                if stop.load(Ordering::Acquire) {
                    return Ok(false);
                }
                let asked = asked_at.load(Ordering::Acquire);
                let now = Instant::now();
                if (asked != 0 && now >= Instant::from_nanos(asked) + watchdog_ns) || now >= bound {
                    return Ok(true);
                }
                std::hint::spin_loop();
            }
        })
    };
    let medium = match medium {
        Ok(medium) => medium,
        Err(e) => {
            // Released as if the medium thread ran: the low one ends its critical section.
            medium_running.store(true, Ordering::Release);
            let _ = low.join();
            return Err(e.into());
        }
    };
    wait_for(&medium_running, bound);
    let high = {
        let (mutex, stop) = (Arc::clone(&mutex), Arc::clone(&stop));
        spawn(
            "rtemu-inv-high",
            move || -> Result<(u64, bool), LatencyError> {
                enter(cpu, Policy::Fifo(HIGH))?;
                let asked = Instant::now();
                asked_at.store(asked.as_nanos(), Ordering::Release);
                // A spinning waiter keeps the medium thread off the CPU as well, so it applies
                // the watchdog itself.
                let give_up = || {
                    let now = Instant::now();
                    now >= asked + watchdog_ns || now >= bound
                };
                let got = mutex.with(give_up, || ());
                let waited = Instant::now().nanos_since(asked);
                stop.store(true, Ordering::Release);
                Ok((waited, got?.is_none()))
            },
        )
    };
    // Without a high thread the test ends here: the stop below releases the medium thread,
    // and the low one then ends its critical section.
    let high = high
        .map_err(LatencyError::from)
        .and_then(|h| join(h, "priority-inversion"));
    // Whatever happened, release the medium thread before joining it.
    stop.store(true, Ordering::Release);
    let medium_fired = join(medium, "priority-inversion")??;
    join(low, "priority-inversion")??;
    let (high_wait_ns, high_gave_up) = high??;
    Ok(InversionResult {
        lock: kind,
        priority_inheritance: kind == InversionLock::Inherit,
        high_wait_ns,
        watchdog_ns,
        watchdog_fired: medium_fired || high_gave_up,
    })
}

/// The latency tests by name, in the order they run.
pub const TESTS: [&str; 4] = ["task-switch", "preemption", "ipc", "ipc-mutex"];

/// Runs every test under each class in `classes`, calling `before_each` between tests (for a
/// progress display: never during a measurement).
pub fn run(
    config: &LatencyConfig,
    classes: &[Class],
    before_each: &mut dyn FnMut(&'static str, Class),
) -> Result<Vec<LatencyRow>, LatencyError> {
    config.check()?;
    let mut rows = Vec::with_capacity(TESTS.len() * classes.len());
    for &class in classes {
        for test in TESTS {
            before_each(test, class);
            let samples = match test {
                "task-switch" => task_switch(config, class)?,
                "preemption" => preemption(config, class)?,
                "ipc" => ipc(config, class)?,
                _ => ipc_mutex(config, class)?,
            };
            rows.push(LatencyRow::from_samples(test, class, &samples));
        }
    }
    Ok(rows)
}

/// What a run of the latency tests can do here: the CPU the test threads share, the classes
/// to test, whether the priority-inversion test runs, and why what is left out is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The CPU every test thread is pinned to.
    pub cpu: usize,
    /// The scheduling classes to test.
    pub classes: Vec<Class>,
    /// Whether the priority-inversion test runs.
    pub inversion: bool,
    /// Why tests are left out, one line each.
    pub skipped: Vec<String>,
}

impl Plan {
    /// The plan on this machine, for the CPU `asked` (default: the last this process may use).
    pub fn probe(asked: Option<usize>) -> Result<Plan, LatencyError> {
        let allowed = rt::affinity().map_err(LatencyError::Affinity)?;
        Plan::new(asked, &allowed, rt::fifo_permitted())
    }

    /// The plan for `asked` among the CPUs `allowed`: `SCHED_FIFO` rows and the
    /// priority-inversion test need `fifo` (`SCHED_FIFO` permitted), and the inversion test a
    /// second CPU to start its threads from.
    pub fn new(asked: Option<usize>, allowed: &[usize], fifo: bool) -> Result<Plan, LatencyError> {
        let cpu = match asked {
            Some(cpu) if allowed.contains(&cpu) => cpu,
            Some(cpu) => {
                return Err(LatencyError::CpuNotAllowed {
                    cpu,
                    allowed: rt::format_cpu_list(allowed),
                })
            }
            None => *allowed.last().ok_or(LatencyError::NoCpu)?,
        };
        let mut skipped = Vec::new();
        if !fifo {
            skipped.push(
                "SCHED_FIFO not permitted (run as root or grant CAP_SYS_NICE): SCHED_FIFO rows \
                 and the priority-inversion test skipped"
                    .to_owned(),
            );
        } else if allowed.len() < 2 {
            skipped
                .push("priority inversion needs a second CPU to start its threads: skipped".into());
        }
        Ok(Plan {
            cpu,
            classes: if fifo {
                vec![Class::Other, Class::Fifo]
            } else {
                vec![Class::Other]
            },
            inversion: fifo && allowed.len() >= 2,
            skipped,
        })
    }

    /// Steps of a run, for a progress display: each test in each class, then each lock.
    pub fn steps(&self) -> usize {
        self.classes.len() * TESTS.len() + InversionLock::ALL.len()
    }
}

/// The next step of a run, for a progress display.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// A test under a class.
    Test(&'static str, Class),
    /// The priority-inversion test with a lock.
    Inversion(InversionLock),
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Step::Test(test, class) => write!(f, "{test} {class:?}"),
            Step::Inversion(lock) => write!(f, "priority inversion, {}", lock.name()),
        }
    }
}

/// Runs `plan`: every test under each of its classes, then, when it says so, the
/// priority-inversion test with each lock (each ended by `watchdog_ns`); `before_each` is told
/// each step before it runs.
pub fn run_plan(
    config: &LatencyConfig,
    plan: &Plan,
    watchdog_ns: u64,
    before_each: &mut dyn FnMut(Step),
) -> Result<(Vec<LatencyRow>, Vec<InversionResult>), LatencyError> {
    let rows = run(config, &plan.classes, &mut |test, class| {
        before_each(Step::Test(test, class));
    })?;
    let mut inversion = Vec::new();
    if plan.inversion {
        for lock in InversionLock::ALL {
            before_each(Step::Inversion(lock));
            inversion.push(priority_inversion_with(lock, config.cpu, watchdog_ns)?);
        }
    }
    Ok((rows, inversion))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_whose_second_thread_never_came_releases_the_first() {
        // Two threads meet and measure.
        let start = Start::new();
        let other = Arc::clone(&start);
        let t = std::thread::spawn(move || other.meet());
        assert!(start.meet());
        assert!(t.join().unwrap());
        // The second never started: the first is released, told the test is off, and joined.
        let start = Start::new();
        let first = spawn("rtemu-test-first", {
            let start = Arc::clone(&start);
            move || start.meet()
        })
        .unwrap();
        let refused = spawn("no\0thread", || false);
        let e = both(&start, first, refused).unwrap_err();
        assert!(matches!(e, LatencyError::Spawn(_)), "{e}");
        assert!(
            e.to_string()
                .starts_with("starting the thread \"no\\0thread\""),
            "{e}"
        );
        // `both` joined the first thread: nothing holds the start but this test.
        assert_eq!(Arc::strong_count(&start), 1);
    }

    #[test]
    fn rows_summarise_their_samples() {
        let row = LatencyRow::from_samples("ipc", Class::Fifo, &[1_000, 2_000, 6_000]);
        assert_eq!(row.mean_ns, 3_000.0);
        assert_eq!(
            (row.latency_ns.min_ns, row.latency_ns.max_ns),
            (1_000, 6_000)
        );
        assert_eq!(
            LatencyRow::from_samples("ipc", Class::Other, &[]).mean_ns,
            0.0
        );
    }

    #[test]
    fn a_zero_or_absurd_period_or_time_limit_is_refused_before_any_thread_starts() {
        let good = LatencyConfig {
            cpu: 0,
            iterations: 10,
            period_ns: 1_000_000,
            time_limit_ns: 1_000_000_000,
        };
        assert!(good.check().is_ok());
        for bad in [
            LatencyConfig {
                period_ns: 0,
                ..good
            },
            LatencyConfig {
                period_ns: 2_000_000_000,
                ..good
            },
            LatencyConfig {
                time_limit_ns: 0,
                ..good
            },
        ] {
            // Period 0 looped for ever in the preemption test; now it never starts.
            let e = preemption(&bad, Class::Other).unwrap_err();
            assert!(matches!(e, LatencyError::OutOfRange { .. }), "{e}");
            assert!(e.to_string().contains("give "), "{e}");
            let e = run(&bad, &[Class::Other], &mut |_, _| {}).unwrap_err();
            assert!(matches!(e, LatencyError::OutOfRange { .. }), "{e}");
        }
    }

    #[test]
    fn a_plan_leaves_out_what_this_machine_cannot_run_and_says_why() {
        let both = Plan::new(None, &[0, 1], true).unwrap();
        assert_eq!(both.cpu, 1);
        assert_eq!(both.classes, [Class::Other, Class::Fifo]);
        assert!(both.inversion && both.skipped.is_empty());
        assert_eq!(both.steps(), 2 * TESTS.len() + 3);
        let one_cpu = Plan::new(Some(0), &[0], true).unwrap();
        assert!(!one_cpu.inversion);
        assert!(
            one_cpu.skipped[0].contains("second CPU"),
            "{:?}",
            one_cpu.skipped
        );
        let other = Plan::new(None, &[0, 1], false).unwrap();
        assert_eq!(
            (other.classes.as_slice(), other.inversion),
            (&[Class::Other][..], false)
        );
        assert!(other.skipped[0].starts_with("SCHED_FIFO not permitted"));
        let e = Plan::new(Some(5), &[0, 1, 2], true).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--cpu 5 is not one this process may use: pick one of 0-2"
        );
        assert!(matches!(
            Plan::new(None, &[], true),
            Err(LatencyError::NoCpu)
        ));
        assert_eq!(Step::Test("ipc", Class::Fifo).to_string(), "ipc Fifo");
        assert_eq!(
            Step::Inversion(InversionLock::Spin).to_string(),
            "priority inversion, spin lock"
        );
    }
}
