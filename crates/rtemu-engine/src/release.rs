//! One release thread: the links it serves, its real-time class, its budget and its loop.
//!
//! Each turn of the loop receives up to a batch from every interface of the thread's links,
//! each frame stamped with its arrival by the I/O layer (the kernel's receive stamp, see
//! [`crate::io`]), reads `CLOCK_MONOTONIC` and releases every copy due by then (late copies go
//! at once, in order). With nothing received and nothing due it waits as its [`Pacer`] says:
//! asleep on its sockets until a frame or the approach of its next release.
//!
//! **Real-time class.** As root the thread runs under `SCHED_FIFO` (the engine's default
//! priority is [`crate::engine::DEFAULT_FIFO_PRIORITY`]), so a busy program beside the lab
//! cannot delay a release by a scheduler slice. A real-time thread that ran all the time would
//! be throttled by the kernel (stopped 50 ms of every second) and would starve the CPU's other
//! threads, so the thread keeps an [`RtBudget`]: it may be awake at most 9 ms of every 10 ms
//! under `SCHED_FIFO`; once that is spent (only under saturation, or with the `spin`
//! strategy), it steps down to `SCHED_OTHER` for the rest of the window, where it shares the
//! CPU fairly, and back up when the window ends. Its real-time share of any second is then at
//! most 0.909 s, below the kernel's 0.95 s, by construction. Each step is one system call,
//! taken only when the share is spent.
//!
//! **What it publishes** ([`ThreadStatus`]): its thread id (for its CPU time), the class in
//! force, how often it stepped down, its spin margin, and its stalls: times the thread was
//! away for more than [`STALL_NS`] when it had work (see [`Stalls`]), which is what a
//! throttle, a preemption by something more urgent or the hypervisor taking the CPU shows.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use rtemu_clock::budget::{RtBudget, Standing};
use rtemu_clock::rt::{self, Policy};
use rtemu_clock::Instant;

use crate::direction::Direction;
use crate::engine::EngineError;
use crate::io::PacketIo;
use crate::pacer::Pacer;

/// A loop turn, a wake-up past its deadline or a frame's wait for the thread longer than this
/// is a stall.
pub const STALL_NS: u64 = 1_000_000;

/// Tells the thread's stalls from what it sees: a loop turn that ran long, a timed wake-up
/// past its release, a frame that waited in its ring (the thread asleep when it came, and its
/// wake-up late). One absence can show in two of them, a late wake-up or a long turn and then
/// the frames that waited through it (over as many turns as it takes to drain them), so a
/// frame that arrived before the end of a stall already counted is not counted again: the
/// count is of absences, the longest of them the worst one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stalls {
    /// When the last stall counted ended (at first, when the thread opened its links), ns.
    back_at: u64,
}

impl Stalls {
    /// The stalls of a thread that opened its links at `opened_ns`: the frames the kernel
    /// queued before (an interface's first neighbour or multicast messages, while the lab was
    /// being built) waited for the engine to start, not through a stall.
    fn since(opened_ns: u64) -> Stalls {
        Stalls { back_at: opened_ns }
    }

    /// Whether a frame that arrived at `arrival_ns` can show a new stall (it did not wait
    /// through one already counted).
    fn shows_new(&self, arrival_ns: u64) -> bool {
        arrival_ns >= self.back_at
    }

    /// A loop turn from `start_ns` to `end_ns` whose frames that [`Stalls::shows_new`] waited
    /// up to `waited_ns`: the stall to count, if any.
    fn turn(&mut self, start_ns: u64, end_ns: u64, waited_ns: u64) -> Option<u64> {
        self.judge(end_ns.saturating_sub(start_ns).max(waited_ns), end_ns)
    }

    /// A timed wake-up at `woke_ns` for a release at `due_ns`: the stall to count, if any.
    fn woke(&mut self, due_ns: u64, woke_ns: u64) -> Option<u64> {
        self.judge(woke_ns.saturating_sub(due_ns), woke_ns)
    }

    fn judge(&mut self, ns: u64, now_ns: u64) -> Option<u64> {
        let stall = ns >= STALL_NS;
        if stall {
            self.back_at = now_ns;
        }
        stall.then_some(ns)
    }
}

/// One link direction as its release thread holds it: received on port `rx`, released through
/// port `tx` (indices into the thread's ports). A link whose two directions share a thread has
/// its two interfaces as two ports, each the `rx` of one direction and the `tx` of the other;
/// a link split over two threads gives each direction a receiving port and a sending port of
/// its own.
pub(crate) struct Way {
    pub(crate) rx: usize,
    pub(crate) tx: usize,
    pub(crate) dir: Direction,
}

/// The real-time set-up one release thread applies to itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ThreadRt {
    pub(crate) cpu: Option<usize>,
    pub(crate) fifo_priority: Option<u8>,
    pub(crate) min_timer_slack: bool,
}

/// What one release thread tells readers while it runs: written by the thread with relaxed
/// atomic stores (no lock, no system call on the packet path), read by anyone.
#[derive(Debug, Default)]
pub(crate) struct ThreadStatus {
    tid: AtomicI32,
    /// 0: `SCHED_OTHER`; 1–99: `SCHED_FIFO` at that priority.
    policy: AtomicU32,
    stepped_down: AtomicU64,
    margin_ns: AtomicU64,
    stalls: AtomicU64,
    max_stall_ns: AtomicU64,
    timer_slack_ns: AtomicU64,
    started: AtomicBool,
    /// Set-up steps skipped, written once before the loop starts.
    notices: Mutex<Vec<String>>,
}

/// A snapshot of a [`ThreadStatus`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StatusView {
    pub(crate) tid: Option<i32>,
    pub(crate) policy: Policy,
    pub(crate) stepped_down: u64,
    pub(crate) margin_ns: u64,
    pub(crate) stalls: u64,
    pub(crate) max_stall_ns: u64,
    pub(crate) timer_slack_ns: Option<u64>,
    pub(crate) notices: Vec<String>,
}

impl ThreadStatus {
    fn set_policy(&self, p: Option<u8>) {
        self.policy.store(p.map_or(0, u32::from), Ordering::Relaxed);
    }

    fn stall(&self, stall: Option<u64>) {
        if let Some(ns) = stall {
            self.stalls.fetch_add(1, Ordering::Relaxed);
            self.max_stall_ns.fetch_max(ns, Ordering::Relaxed);
        }
    }

    pub(crate) fn view(&self) -> StatusView {
        let started = self.started.load(Ordering::Acquire);
        StatusView {
            tid: started.then(|| self.tid.load(Ordering::Relaxed)),
            policy: match self.policy.load(Ordering::Relaxed) {
                0 => Policy::Other,
                p => Policy::Fifo(p as u8),
            },
            stepped_down: self.stepped_down.load(Ordering::Relaxed),
            margin_ns: self.margin_ns.load(Ordering::Relaxed),
            stalls: self.stalls.load(Ordering::Relaxed),
            max_stall_ns: self.max_stall_ns.load(Ordering::Relaxed),
            timer_slack_ns: started.then(|| self.timer_slack_ns.load(Ordering::Relaxed)),
            notices: self
                .notices
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
        }
    }
}

/// The thread's CPU time so far (`/proc/self/task/TID/schedstat`, its first field), ns; read
/// by another thread, off the packet path.
pub(crate) fn cpu_time_ns(tid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// Pins, classes and tunes the calling thread; returns the priority in force (`None`:
/// `SCHED_OTHER`) and the instant its links came up, read before the thread says it started,
/// so a frame sent once the engine is up always arrives after it.
fn set_up(rt_cfg: &ThreadRt, status: &ThreadStatus) -> (Option<u8>, Instant) {
    let mut notices = Vec::new();
    let mut note = |step: &str, r: Result<(), rt::RtError>| match r {
        Ok(()) => true,
        Err(e) => {
            notices.push(format!("{step} skipped: {e}"));
            false
        }
    };
    if let Some(cpu) = rt_cfg.cpu {
        note("pinning", rt::set_affinity(&[cpu]));
    }
    let fifo = rt_cfg
        .fifo_priority
        .filter(|&p| note("SCHED_FIFO", rt::set_fifo(p)));
    if rt_cfg.min_timer_slack {
        note("timer slack 1 ns", rt::set_timer_slack(1));
    }
    status.set_policy(fifo);
    status
        .tid
        .store(rtemu_clock::rt::thread_id(), Ordering::Relaxed);
    status
        .timer_slack_ns
        .store(rt::timer_slack().unwrap_or(0), Ordering::Relaxed);
    *status
        .notices
        .lock()
        .unwrap_or_else(PoisonError::into_inner) = notices;
    let opened = Instant::now();
    status.started.store(true, Ordering::Release);
    (fifo, opened)
}

/// The loop's parameters.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Turns {
    pub(crate) rx_batch: usize,
}

/// What a release thread did, when it ends.
#[derive(Debug)]
pub(crate) struct LoopEnd {
    pub(crate) cpu_ns: u64,
    pub(crate) wall_ns: u64,
}

/// Runs one release thread over `ports` and the directions `ways` through them until `stop`.
pub(crate) fn run<Io: PacketIo>(
    rt_cfg: &ThreadRt,
    turns: Turns,
    mut ports: Vec<Io>,
    mut ways: Vec<Way>,
    mut pacer: Pacer,
    stop: &AtomicBool,
    status: &ThreadStatus,
) -> Result<LoopEnd, EngineError> {
    let (fifo, opened) = set_up(rt_cfg, status);
    for w in &mut ways {
        w.dir.open(opened.as_nanos());
    }
    let cpu_start = rtemu_clock::time::thread_cpu_time_ns();
    let wall_start = Instant::now();
    let mut budget = RtBudget::engine(wall_start.as_nanos());
    let mut stepped_down = false;
    let now_ns = || Instant::now().as_nanos();
    let mut stalls = Stalls::since(opened.as_nanos());
    while !stop.load(Ordering::Relaxed) {
        let turn_start = Instant::now();
        // Each frame brings its arrival time from the I/O layer (the kernel's receive stamp,
        // or a clock read after the receive), never one read here before the receive.
        let mut received = 0;
        let mut waited = 0;
        for w in &mut ways {
            w.dir.steer();
            received += ports[w.rx].recv_batch(turns.rx_batch, |f| {
                if stalls.shows_new(f.arrival_ns) {
                    waited = waited.max(f.seen_ns.saturating_sub(f.arrival_ns));
                }
                w.dir.receive(f)
            });
        }
        let now = Instant::now();
        let mut next: Option<u64> = None;
        for w in &mut ways {
            w.dir.release(now.as_nanos(), &mut ports[w.tx], now_ns);
            w.dir.publish();
            if let Some(t) = w.dir.next_release() {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        }
        status.stall(stalls.turn(turn_start.as_nanos(), now.as_nanos(), waited));
        if let Some(priority) = fifo {
            // One system call, only when the share of a window is spent or a new one began.
            match budget.check(now.as_nanos()) {
                Standing::Spent if !stepped_down && rt::set_other().is_ok() => {
                    stepped_down = true;
                    status.set_policy(None);
                    status.stepped_down.fetch_add(1, Ordering::Relaxed);
                }
                Standing::Within if stepped_down && rt::set_fifo(priority).is_ok() => {
                    stepped_down = false;
                    status.set_policy(Some(priority));
                }
                _ => {}
            }
        }
        // Frames may be waiting, or more copies due: go round again without waiting.
        if received > 0 || next.is_some_and(|t| t <= now.as_nanos()) {
            continue;
        }
        status.margin_ns.store(pacer.margin_ns(), Ordering::Relaxed);
        let next = next.map(Instant::from_nanos);
        pacer.pace(now, next, &mut budget)?;
        if let Some(t) = next {
            let woke = Instant::now();
            // Woken past a release by more than the spin could make up: a stall.
            if woke > t {
                status.stall(stalls.woke(t.as_nanos(), woke.as_nanos()));
            }
        }
    }
    Ok(LoopEnd {
        cpu_ns: rtemu_clock::time::thread_cpu_time_ns() - cpu_start,
        wall_ns: Instant::now().nanos_since(wall_start),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn a_long_turn_a_late_wake_up_and_a_long_wait_are_each_a_stall() {
        let mut s = Stalls::since(0);
        assert_eq!(s.turn(0, 50_000, 80_000), None);
        assert_eq!(s.turn(MS, 4 * MS, 0), Some(3 * MS));
        assert_eq!(s.turn(5 * MS, 5 * MS + 10_000, 0), None);
        assert_eq!(s.woke(10 * MS, 12 * MS), Some(2 * MS));
        assert_eq!(s.turn(12 * MS, 12 * MS + 10_000, 0), None);
        // Asleep on its sockets when a frame came at 20 ms, and woken 100 ms later.
        assert!(s.shows_new(20 * MS));
        assert_eq!(
            s.turn(120 * MS, 120 * MS + 10_000, 100 * MS),
            Some(100 * MS)
        );
        assert_eq!(s.turn(200 * MS, 200 * MS + 10_000, 999_999), None);
        assert_eq!(s.woke(300 * MS, 301 * MS - 1), None);
    }

    #[test]
    fn frames_that_waited_through_a_stall_already_counted_are_not_another() {
        let mut s = Stalls::since(0);
        // Due at 10 ms, woken at 15 ms: one stall, over at 15 ms.
        assert_eq!(s.woke(10 * MS, 15 * MS), Some(5 * MS));
        // The frames that came while it was away, drained over several turns: the same one.
        for arrival in [10 * MS, 12 * MS, 15 * MS - 1] {
            assert!(!s.shows_new(arrival));
        }
        // A frame that came after it is on its own again.
        assert!(s.shows_new(15 * MS));
        // A long turn's own length always counts, and frames that came during it are its.
        assert_eq!(s.turn(20 * MS, 22 * MS, 0), Some(2 * MS));
        assert!(!s.shows_new(21 * MS));
        assert!(s.shows_new(22 * MS));
    }

    #[test]
    fn frames_queued_before_the_thread_opened_its_links_are_no_stall() {
        let mut s = Stalls::since(30 * MS);
        // Queued at 5 ms while the lab was built, read at 31 ms: the engine was not there yet.
        assert!(!s.shows_new(5 * MS));
        assert!(!s.shows_new(30 * MS - 1));
        // The first frame after it is judged as any other.
        assert!(s.shows_new(30 * MS));
        assert_eq!(s.turn(40 * MS, 40 * MS + 10_000, 2 * MS), Some(2 * MS));
    }
}
