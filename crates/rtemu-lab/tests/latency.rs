//! The latency and priority-inversion tests pin spinning and `SCHED_FIFO` threads to a CPU, so
//! they live in their own test binary (run after the unit tests, never beside them) and take
//! one lock each, so they never disturb each other.

use std::io::Write as _;
use std::sync::Mutex;

use rtemu_clock::rt;
use rtemu_lab::latency::{
    ipc, ipc_mutex, preemption, priority_inversion, priority_inversion_with, task_switch, Class,
    InversionLock, LatencyConfig,
};

/// Serialises the tests of this binary: each one owns the CPU it pins to.
static CPU: Mutex<()> = Mutex::new(());

fn config() -> LatencyConfig {
    LatencyConfig {
        cpu: *rt::affinity().unwrap().last().unwrap(),
        iterations: 200,
        period_ns: 1_000_000,
        time_limit_ns: 20_000_000_000,
    }
}

/// Prints why a test is skipped straight to stderr: the harness captures `eprintln!` of
/// passing tests, and a skip must be visible.
fn skip(reason: std::fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stderr(), "SKIPPED {reason}");
}

/// True when the test may run; prints why not otherwise. Fails instead of skipping under
/// `RTEMU_REQUIRE_ROOT=1` (CI runs as root).
fn fifo_available(test: &str) -> bool {
    if rt::fifo_permitted() {
        return true;
    }
    assert!(
        std::env::var("RTEMU_REQUIRE_ROOT").as_deref() != Ok("1"),
        "{test}: SCHED_FIFO not permitted but RTEMU_REQUIRE_ROOT=1"
    );
    skip(format_args!(
        "{test}: SCHED_FIFO not permitted (needs root or CAP_SYS_NICE)"
    ));
    false
}

/// Latencies are positive (time flows forward between stamp and reading) and every test
/// collects its samples. Values are not asserted: a loaded machine may be slow.
#[test]
fn scheduling_tests_collect_positive_latencies_under_sched_other() {
    let _cpu = CPU.lock().unwrap_or_else(|e| e.into_inner());
    let config = config();
    for (name, samples) in [
        ("task-switch", task_switch(&config, Class::Other).unwrap()),
        ("preemption", preemption(&config, Class::Other).unwrap()),
        ("ipc", ipc(&config, Class::Other).unwrap()),
        ("ipc-mutex", ipc_mutex(&config, Class::Other).unwrap()),
    ] {
        assert!(samples.len() >= 100, "{name}: {} samples", samples.len());
        assert!(samples.iter().all(|&s| s >= 0), "{name} went back in time");
    }
}

#[test]
fn scheduling_tests_run_under_sched_fifo() {
    if !fifo_available("scheduling_tests_run_under_sched_fifo") {
        return;
    }
    let _cpu = CPU.lock().unwrap_or_else(|e| e.into_inner());
    let config = config();
    for (name, samples) in [
        ("task-switch", task_switch(&config, Class::Fifo).unwrap()),
        ("preemption", preemption(&config, Class::Fifo).unwrap()),
        ("ipc", ipc(&config, Class::Fifo).unwrap()),
        ("ipc-mutex", ipc_mutex(&config, Class::Fifo).unwrap()),
    ] {
        assert!(samples.len() >= 100, "{name}: {} samples", samples.len());
        assert!(samples.iter().all(|&s| s >= 0), "{name} went back in time");
    }
}

/// With priority inheritance the high thread waits about one critical section (2 ms of
/// CPU), far below the 300 ms watchdog; without it, the medium thread starves the holder
/// until the watchdog (started when the high thread asks) fires, so the wait is at least the
/// watchdog. Under SCHED_FIFO on one
/// pinned CPU the scheduler must behave so; only RT throttling (50 ms per second left to
/// SCHED_OTHER) or a stolen vCPU can stretch the PI case, and 150 ms leaves room for several.
#[test]
fn priority_inheritance_prevents_the_inversion_and_plain_mutexes_show_it() {
    if !fifo_available("priority_inheritance_prevents_the_inversion") {
        return;
    }
    let cpus = rt::affinity().unwrap();
    if cpus.len() < 2 {
        skip(format_args!(
            "priority inversion: needs two CPUs, has {cpus:?}"
        ));
        return;
    }
    let _cpu = CPU.lock().unwrap_or_else(|e| e.into_inner());
    let cpu = *cpus.last().unwrap();
    let watchdog = 300_000_000;
    let pi = priority_inversion(true, cpu, watchdog).unwrap();
    assert!(!pi.watchdog_fired, "{pi:?}");
    assert!(pi.high_wait_ns < watchdog / 2, "{pi:?}");
    let plain = priority_inversion(false, cpu, watchdog).unwrap();
    assert!(plain.watchdog_fired, "{plain:?}");
    assert!(plain.high_wait_ns >= watchdog, "{plain:?}");
}

/// A spin lock has no priority inheritance and its waiter spins: under SCHED_FIFO on one CPU the
/// high thread spins while the low holder never runs, until the watchdog (applied by the
/// spinning waiter itself, started when it asks) ends it. The test is bounded by that watchdog;
/// RT throttling only hands the CPU to SCHED_OTHER threads, never to the holder.
#[test]
fn spin_locks_show_the_inversion_until_the_watchdog_ends_it() {
    if !fifo_available("spin_locks_show_the_inversion") {
        return;
    }
    let cpus = rt::affinity().unwrap();
    if cpus.len() < 2 {
        skip(format_args!(
            "spin-lock inversion: needs two CPUs, has {cpus:?}"
        ));
        return;
    }
    let _cpu = CPU.lock().unwrap_or_else(|e| e.into_inner());
    let watchdog = 200_000_000;
    let spin =
        priority_inversion_with(InversionLock::Spin, *cpus.last().unwrap(), watchdog).unwrap();
    assert_eq!(spin.lock, InversionLock::Spin);
    assert!(!spin.priority_inheritance, "{spin:?}");
    assert!(spin.watchdog_fired, "{spin:?}");
    assert!(spin.high_wait_ns >= watchdog, "{spin:?}");
}
