//! Real-time set-up: the knobs cyclictest turns before it measures.
//!
//! Each function acts on the calling thread (scheduling, affinity, timer slack) or the process
//! (`mlockall`), and fails with [`RtError::NotPermitted`] naming the privilege to grant when the
//! kernel refuses, so a caller can print the notice and carry on without it.

use std::fmt;
use std::fs::File;
use std::io::{self, Write};

use crate::sys;

/// The highest `SCHED_FIFO` priority Linux accepts.
pub const MAX_FIFO_PRIORITY: u8 = 99;

/// Where the kernel takes the CPU-wide wake-up latency request.
pub const DMA_LATENCY_PATH: &str = "/dev/cpu_dma_latency";

/// A real-time set-up step failed.
#[derive(Debug, thiserror::Error)]
pub enum RtError {
    /// The kernel refused for lack of privilege.
    #[error("{what} not permitted: {hint}")]
    NotPermitted {
        /// The step, e.g. "SCHED_FIFO priority 80".
        what: String,
        /// What to grant to make it work.
        hint: &'static str,
    },
    /// A parameter outside its valid range.
    #[error("{what} out of range: {valid}")]
    OutOfRange {
        /// The parameter and value.
        what: String,
        /// The valid range.
        valid: &'static str,
    },
    /// Any other failure.
    #[error("{what} failed: {source}")]
    Os {
        /// The step.
        what: String,
        /// The operating system's error.
        source: io::Error,
    },
}

impl RtError {
    /// Whether this is a missing privilege (as opposed to a real failure).
    pub fn is_not_permitted(&self) -> bool {
        matches!(self, RtError::NotPermitted { .. })
    }
}

fn classify(what: String, hint: &'static str, source: io::Error) -> RtError {
    match source.kind() {
        io::ErrorKind::PermissionDenied => RtError::NotPermitted { what, hint },
        _ => RtError::Os { what, source },
    }
}

const RT_HINT: &str = "run as root, or grant CAP_SYS_NICE or an RLIMIT_RTPRIO at least as high";
const MLOCK_HINT: &str = "run as root, or grant CAP_IPC_LOCK or raise RLIMIT_MEMLOCK";

/// A thread's scheduling policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// `SCHED_OTHER`, the default time-sharing policy.
    Other,
    /// `SCHED_FIFO` at a priority 1..=99.
    Fifo(u8),
    /// `SCHED_RR` at a priority 1..=99.
    RoundRobin(u8),
    /// `SCHED_BATCH`, `SCHED_IDLE`, `SCHED_DEADLINE` or unknown, by number.
    OtherPolicy(i32),
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Policy::Other => f.write_str("SCHED_OTHER"),
            Policy::Fifo(p) => write!(f, "SCHED_FIFO:{p}"),
            Policy::RoundRobin(p) => write!(f, "SCHED_RR:{p}"),
            Policy::OtherPolicy(n) => write!(f, "policy {n}"),
        }
    }
}

/// The calling thread's scheduling policy and priority.
pub fn current_policy() -> Result<Policy, RtError> {
    let (policy, priority) = sys::thread_sched().map_err(|source| RtError::Os {
        what: "pthread_getschedparam".into(),
        source,
    })?;
    Ok(match policy {
        libc::SCHED_OTHER => Policy::Other,
        libc::SCHED_FIFO => Policy::Fifo(priority as u8),
        libc::SCHED_RR => Policy::RoundRobin(priority as u8),
        n => Policy::OtherPolicy(n),
    })
}

/// Puts the calling thread under `SCHED_FIFO` at `priority` (1..=99).
pub fn set_fifo(priority: u8) -> Result<(), RtError> {
    if !(1..=MAX_FIFO_PRIORITY).contains(&priority) {
        return Err(RtError::OutOfRange {
            what: format!("SCHED_FIFO priority {priority}"),
            valid: "give 1 to 99",
        });
    }
    sys::set_thread_sched(libc::SCHED_FIFO, i32::from(priority))
        .map_err(|e| classify(format!("SCHED_FIFO priority {priority}"), RT_HINT, e))
}

/// Returns the calling thread to `SCHED_OTHER`.
pub fn set_other() -> Result<(), RtError> {
    sys::set_thread_sched(libc::SCHED_OTHER, 0)
        .map_err(|e| classify("SCHED_OTHER".into(), RT_HINT, e))
}

/// Applies `policy` to the calling thread.
pub fn set_policy(policy: Policy) -> Result<(), RtError> {
    match policy {
        Policy::Other => set_other(),
        Policy::Fifo(priority) => set_fifo(priority),
        Policy::RoundRobin(_) | Policy::OtherPolicy(_) => Err(RtError::OutOfRange {
            what: format!("policy {policy}"),
            valid: "only SCHED_OTHER and SCHED_FIFO are set by rtemu",
        }),
    }
}

/// Pins the calling thread to `cpus` (none empty, each below the kernel's `CPU_SETSIZE`).
pub fn set_affinity(cpus: &[usize]) -> Result<(), RtError> {
    let limit = libc::CPU_SETSIZE as usize;
    if cpus.is_empty() || cpus.iter().any(|&c| c >= limit) {
        return Err(RtError::OutOfRange {
            what: format!("CPU set {cpus:?}"),
            valid: "give at least one CPU, each below 1024",
        });
    }
    sys::set_affinity(cpus).map_err(|source| RtError::Os {
        what: format!("pinning to CPUs {}", format_cpu_list(cpus)),
        source,
    })
}

/// The CPUs the calling thread may run on.
pub fn affinity() -> Result<Vec<usize>, RtError> {
    sys::affinity().map_err(|source| RtError::Os {
        what: "sched_getaffinity".into(),
        source,
    })
}

/// Locks all current and future memory of the process (`mlockall`), so no page fault can stall
/// a deadline.
pub fn lock_memory() -> Result<(), RtError> {
    sys::mlockall().map_err(|e| classify("mlockall".into(), MLOCK_HINT, e))
}

/// Undoes [`lock_memory`].
pub fn unlock_memory() -> Result<(), RtError> {
    sys::munlockall().map_err(|source| RtError::Os {
        what: "munlockall".into(),
        source,
    })
}

/// Sets the calling thread's timer slack in ns (`PR_SET_TIMERSLACK`). The kernel may defer a
/// timer by up to this much to batch wake-ups; real-time threads get 0 regardless.
pub fn set_timer_slack(ns: u64) -> Result<(), RtError> {
    sys::set_timer_slack(ns).map_err(|source| RtError::Os {
        what: format!("PR_SET_TIMERSLACK {ns}"),
        source,
    })
}

/// The calling thread's timer slack in ns.
pub fn timer_slack() -> Result<u64, RtError> {
    sys::timer_slack().map_err(|source| RtError::Os {
        what: "PR_GET_TIMERSLACK".into(),
        source,
    })
}

/// Holds `/dev/cpu_dma_latency` at a target while alive, keeping CPUs out of deep idle states
/// whose exit latency would add to every wake-up. Dropping it releases the request.
#[derive(Debug)]
pub struct DmaLatencyGuard {
    _file: File,
    target_us: i32,
}

impl DmaLatencyGuard {
    /// Requests a wake-up latency of at most `target_us` µs (0: stay out of idle states).
    pub fn hold(target_us: i32) -> Result<DmaLatencyGuard, RtError> {
        let what = || format!("holding {DMA_LATENCY_PATH} at {target_us} µs");
        let mut file = File::options()
            .write(true)
            .open(DMA_LATENCY_PATH)
            .map_err(|e| classify(what(), "run as root (the device is root-only)", e))?;
        // The kernel takes a binary s32; the request lasts as long as the file stays open.
        file.write_all(&target_us.to_ne_bytes())
            .map_err(|source| RtError::Os {
                what: what(),
                source,
            })?;
        Ok(DmaLatencyGuard {
            _file: file,
            target_us,
        })
    }

    /// The latency held, in µs.
    pub fn target_us(&self) -> i32 {
        self.target_us
    }
}

/// The calling thread's kernel id (its directory under `/proc/self/task`).
pub fn thread_id() -> i32 {
    sys::gettid()
}

/// Writes CPU numbers as the kernel does (`0-3,6`).
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out = String::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        while i + 1 < sorted.len() && sorted[i + 1] == sorted[i] + 1 {
            i += 1;
        }
        if !out.is_empty() {
            out.push(',');
        }
        if sorted[i] == start {
            out.push_str(&start.to_string());
        } else {
            out.push_str(&format!("{start}-{}", sorted[i]));
        }
        i += 1;
    }
    out
}

/// A CPU list that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "CPU list `{0}` is invalid: give CPU numbers and ranges as the kernel writes them \
     (e.g. `1` or `0,2-3`), each below 1024"
)]
pub struct CpuListError(pub String);

/// Reads a CPU list as the kernel writes them (`0-3,6`): sorted, without repeats, not empty.
pub fn parse_cpu_list(text: &str) -> Result<Vec<usize>, CpuListError> {
    let bad = || CpuListError(text.chars().take(64).collect());
    let limit = libc::CPU_SETSIZE as usize;
    let mut cpus = Vec::new();
    for part in text.trim().split(',') {
        let (lo, hi) = match part.split_once('-') {
            Some((lo, hi)) => (lo, hi),
            None => (part, part),
        };
        let lo: usize = lo.trim().parse().map_err(|_| bad())?;
        let hi: usize = hi.trim().parse().map_err(|_| bad())?;
        if lo > hi || hi >= limit {
            return Err(bad());
        }
        cpus.extend(lo..=hi);
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// A CPU list as a value of its own (a command-line flag's type): parsed by [`parse_cpu_list`],
/// written by [`format_cpu_list`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

impl std::str::FromStr for CpuList {
    type Err = CpuListError;

    fn from_str(text: &str) -> Result<CpuList, CpuListError> {
        parse_cpu_list(text).map(CpuList)
    }
}

impl fmt::Display for CpuList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_cpu_list(&self.0))
    }
}

/// Whether this process may use `SCHED_FIFO`: tries it on a short-lived thread, which leaves
/// the caller untouched (no when that thread cannot be started: nothing was shown to work).
pub fn fifo_permitted() -> bool {
    rtemu_sys::thread::spawn("rtemu-fifo-probe", || set_fifo(1).is_ok())
        .is_ok_and(|t| t.join().unwrap_or(false))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Prints why a test is skipped straight to stderr: the harness captures `eprintln!` of
    /// passing tests, and a skip must be visible.
    fn skip(reason: std::fmt::Arguments<'_>) {
        let _ = writeln!(std::io::stderr(), "SKIPPED {reason}");
    }

    #[test]
    fn cpu_lists_are_written_as_the_kernel_does() {
        assert_eq!(format_cpu_list(&[0, 1, 2, 3, 6]), "0-3,6");
        assert_eq!(format_cpu_list(&[5, 1, 0]), "0-1,5");
        assert_eq!(format_cpu_list(&[2, 2]), "2");
        assert_eq!(format_cpu_list(&[]), "");
    }

    #[test]
    fn cpu_lists_are_read_as_the_kernel_writes_them() {
        assert_eq!(parse_cpu_list("0-3,6"), Ok(vec![0, 1, 2, 3, 6]));
        assert_eq!(parse_cpu_list(" 1 "), Ok(vec![1]));
        assert_eq!(parse_cpu_list("3,1,1-2"), Ok(vec![1, 2, 3]));
        for bad in ["", "a", "3-1", "1,,2", "-1", "1024", "0-5000"] {
            let e = parse_cpu_list(bad).unwrap_err();
            assert!(e.to_string().contains("below 1024"), "{bad}: {e}");
        }
    }

    proptest::proptest! {
        #[test]
        fn cpu_lists_round_trip(cpus in proptest::collection::btree_set(0usize..1024, 1..40)) {
            let cpus: Vec<usize> = cpus.into_iter().collect();
            proptest::prop_assert_eq!(parse_cpu_list(&format_cpu_list(&cpus)), Ok(cpus));
        }
    }

    #[test]
    fn bad_parameters_are_refused_before_the_kernel() {
        assert!(matches!(set_fifo(0), Err(RtError::OutOfRange { .. })));
        assert!(matches!(set_fifo(100), Err(RtError::OutOfRange { .. })));
        assert!(matches!(set_affinity(&[]), Err(RtError::OutOfRange { .. })));
        assert!(matches!(
            set_affinity(&[5000]),
            Err(RtError::OutOfRange { .. })
        ));
    }

    #[test]
    fn affinity_round_trips_on_a_scratch_thread() {
        std::thread::spawn(|| {
            let cpus = affinity().unwrap();
            assert!(!cpus.is_empty());
            set_affinity(&cpus[..1]).unwrap();
            assert_eq!(affinity().unwrap(), vec![cpus[0]]);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn timer_slack_round_trips_on_a_scratch_thread() {
        std::thread::spawn(|| {
            set_timer_slack(1_234).unwrap();
            assert_eq!(timer_slack().unwrap(), 1_234);
        })
        .join()
        .unwrap();
    }

    /// Needs CAP_SYS_NICE: skips with a printed reason, unless `RTEMU_REQUIRE_ROOT=1` (CI).
    #[test]
    fn fifo_is_applied_and_reported() {
        let outcome = std::thread::spawn(|| {
            set_fifo(10)?;
            let policy = current_policy()?;
            set_other()?;
            Ok::<_, RtError>((policy, current_policy()?))
        })
        .join()
        .unwrap();
        match outcome {
            Ok((during, after)) => {
                assert_eq!(during, Policy::Fifo(10));
                assert_eq!(after, Policy::Other);
            }
            Err(e)
                if e.is_not_permitted()
                    && std::env::var("RTEMU_REQUIRE_ROOT").as_deref() != Ok("1") =>
            {
                skip(format_args!("fifo_is_applied_and_reported: {e}"));
            }
            Err(e) => panic!("{e}"),
        }
    }

    /// Needs root: skips with a printed reason, unless `RTEMU_REQUIRE_ROOT=1` (CI).
    #[test]
    fn dma_latency_is_held_while_the_guard_lives() {
        match DmaLatencyGuard::hold(0) {
            Ok(guard) => assert_eq!(guard.target_us(), 0),
            Err(e)
                if e.is_not_permitted()
                    && std::env::var("RTEMU_REQUIRE_ROOT").as_deref() != Ok("1") =>
            {
                skip(format_args!(
                    "dma_latency_is_held_while_the_guard_lives: {e}"
                ));
            }
            Err(e) => panic!("{e}"),
        }
    }
}
