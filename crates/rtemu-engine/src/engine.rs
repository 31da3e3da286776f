//! The release loop: one thread that polls every link's receive rings, decides fates and
//! releases due copies at their intended time.
//!
//! Each turn of the loop receives up to a batch from every interface, each frame stamped with
//! its arrival by the I/O layer (the kernel's receive stamp on `AF_PACKET`, see [`crate::io`]),
//! reads `CLOCK_MONOTONIC` and releases every copy due by then (late copies go at once, in
//! order). Between turns it waits according to the [`WaitStrategy`]:
//!
//! * `spin`: no wait: the loop itself is the busy wait, so the receive rings are polled all the
//!   time; the last 2 µs before a release are spun with the shared [`Waiter`] so the release
//!   starts within a clock read of its deadline. Burns the core it runs on.
//! * `hybrid:X`: sleeps (absolute `clock_nanosleep`) while the next release is more than `X`
//!   away, never longer than the poll interval, then behaves like `spin`.
//! * `sleep` and the other sleeping strategies: waits with the shared [`Waiter`] until the next
//!   release or the poll interval, whichever is first. A frame that arrives during a wait is
//!   noticed when the wait ends; it keeps its kernel arrival stamp, so its release is on time
//!   when its delay outlasts the wait, and late by the rest otherwise. The fidelity record
//!   shows the wait as the frame's arrival lag.
//!
//! The engine never spins under `SCHED_FIFO` while the kernel's real-time throttling is on
//! (`kernel.sched_rt_runtime_us` ≠ -1): the throttle would stop the thread for 50 ms of every
//! second. It then stays under `SCHED_OTHER` and says so in the notices.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use rtemu_clock::rt;
use rtemu_clock::sysinfo::SystemInfo;
use rtemu_clock::wait::WaitError;
use rtemu_clock::{Instant, WaitStrategy, Waiter};

use crate::counters::{Counters, Published};
use crate::direction::{self, Direction, DirectionConfig, Helm, Swap};
use crate::fidelity::{Consumer, ErrorHistogram, Summary};
use crate::io::{DropProbe, PacketIo};

/// How close to a release the spinning strategies hand over to the shared spin waiter.
const SPIN_APPROACH_NS: u64 = 2_000;

/// How often the collector thread drains the fidelity rings.
const COLLECT_EVERY: Duration = Duration::from_millis(10);

/// Real-time set-up of the release thread (the timing paper's section 4). Every step that
/// lacks a privilege is skipped with a notice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RtConfig {
    /// Pin the thread to this CPU.
    pub cpu: Option<usize>,
    /// Run under `SCHED_FIFO` at this priority (1–99), unless the wait strategy spins and the
    /// kernel throttles real-time threads.
    pub fifo_priority: Option<u8>,
    /// `mlockall` the process, so no page fault lands on the packet path.
    pub lock_memory: bool,
    /// Set the thread's timer slack to 1 ns, so sleeps end when asked.
    pub min_timer_slack: bool,
    /// Hold `/dev/cpu_dma_latency` at 0 while the engine runs.
    pub hold_dma_latency: bool,
}

impl Default for RtConfig {
    fn default() -> Self {
        RtConfig {
            cpu: None,
            fifo_priority: None,
            lock_memory: true,
            min_timer_slack: true,
            hold_dma_latency: true,
        }
    }
}

/// How the release loop runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineConfig {
    /// How to wait for the next release.
    pub wait: WaitStrategy,
    /// The longest a sleeping strategy leaves the receive rings unpolled, ns.
    pub poll_interval_ns: u64,
    /// The most frames taken from one interface per loop turn.
    pub rx_batch: usize,
    /// Real-time set-up.
    pub rt: RtConfig,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            wait: WaitStrategy::Spin,
            poll_interval_ns: 50_000,
            rx_batch: 64,
            rt: RtConfig::default(),
        }
    }
}

/// One impaired link: two interfaces and a direction config for each way.
#[derive(Debug)]
pub struct LinkSpec<Io> {
    /// The link's name in reports.
    pub name: String,
    /// The interface facing node A: frames from A are received here, frames to A sent here.
    pub a: Io,
    /// The interface facing node B.
    pub b: Io,
    /// Frames from A to B.
    pub a_to_b: DirectionConfig,
    /// Frames from B to A.
    pub b_to_a: DirectionConfig,
}

/// Which way a direction carries frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Way {
    /// From node A to node B.
    AToB,
    /// From node B to node A.
    BToA,
}

impl Way {
    /// `a-b` or `b-a`, as the command line writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Way::AToB => "a-b",
            Way::BToA => "b-a",
        }
    }
}

/// The engine could not start or failed while running.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A buffer slot is larger than the sending interface can send.
    #[error(
        "link {link} ({way}): buffers of {slot_size} bytes exceed the {max_frame} bytes the \
         sending interface takes: lower slot_size or raise the ring's frame size"
    )]
    SlotTooLarge {
        /// The link.
        link: String,
        /// `a-b` or `b-a`.
        way: &'static str,
        /// The configured slot size.
        slot_size: usize,
        /// What the interface takes.
        max_frame: usize,
    },
    /// A direction has no buffers.
    #[error("link {link} ({way}): pool_frames is 0: give at least one buffer")]
    NoBuffers {
        /// The link.
        link: String,
        /// `a-b` or `b-a`.
        way: &'static str,
    },
    /// `rx_batch` or `poll_interval_ns` is 0.
    #[error("rx_batch and poll_interval_ns must be at least 1")]
    ZeroLoopParameter,
    /// The wait strategy could not be set up.
    #[error(transparent)]
    Wait(#[from] WaitError),
    /// The release thread could not be started.
    #[error("starting the release thread: {0}")]
    Spawn(std::io::Error),
    /// The release thread panicked.
    #[error("the release thread panicked")]
    Panicked,
    /// The engine has stopped; changes go nowhere.
    #[error("the engine has stopped")]
    Stopped,
    /// A control request named a link the engine does not carry.
    #[error("the engine carries no link `{0}`")]
    NoSuchLink(String),
    /// A model change arrived before the release loop took the previous one.
    #[error("link {link} ({way}): the previous change has not taken effect yet: try again")]
    ChangePending {
        /// The link.
        link: String,
        /// `a-b` or `b-a`.
        way: &'static str,
    },
}

struct Link<Io> {
    a: Io,
    b: Io,
    a_to_b: Direction,
    b_to_a: Direction,
}

/// The reader's view of one direction.
#[derive(Debug)]
struct Tap {
    link: String,
    way: Way,
    published: Arc<Published>,
    fidelity: Consumer,
}

/// Counters and fidelity of one direction, as reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirectionReport {
    /// The link.
    pub link: String,
    /// Which way.
    pub way: Way,
    /// Its counters.
    pub counters: Counters,
    /// Whether it is cut (`rtemu link down`): it carries nothing until joined again.
    pub cut: bool,
    /// Frames the kernel dropped before the engine received them (its receive ring was full),
    /// outside the counters' identity; `None` where the I/O layer cannot tell.
    pub kernel_drops: Option<u64>,
    /// Its release-error percentiles.
    pub fidelity: Summary,
}

/// What the engine did, at the end of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Each set-up step that was skipped, and why (said once, then the engine went on).
    pub notices: Vec<String>,
    /// Every direction of every link, in the order the links were given.
    pub directions: Vec<DirectionReport>,
    /// CPU time the release thread used, ns.
    pub cpu_ns: u64,
    /// Wall time the release loop ran, ns.
    pub wall_ns: u64,
}

/// Changes the directions of a running engine from any thread, without a lock on the packet
/// path. Cloneable; it outlives the engine harmlessly (changes then go nowhere).
#[derive(Clone)]
pub struct Steerer {
    reins: Arc<Vec<Rein>>,
}

/// The control side of one direction, as the [`Steerer`] holds it.
struct Rein {
    link: String,
    way: Way,
    swaps: SyncSender<Swap>,
    cut: Arc<AtomicBool>,
}

impl std::fmt::Debug for Steerer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.reins.iter().map(|r| (&r.link, r.way)))
            .finish()
    }
}

impl Steerer {
    /// Replaces the model of one direction of `link` while frames flow: the release loop
    /// takes it at its next turn (within microseconds when it spins, a poll interval when it
    /// sleeps). Copies already queued keep the release times the old model gave them.
    /// A change made before the loop took the previous one of the same direction is refused
    /// ([`EngineError::ChangePending`]).
    pub fn set_model(&self, link: &str, way: Way, swap: Swap) -> Result<(), EngineError> {
        self.rein(link, way)?
            .swaps
            .try_send(swap)
            .map_err(|_| EngineError::ChangePending {
                link: link.to_owned(),
                way: way.as_str(),
            })
    }

    /// As [`Steerer::set_model`], but waits until the loop took the previous change of the
    /// direction instead of refusing (changes scheduled for the same moment). Returns
    /// [`EngineError::Stopped`] if the engine stopped.
    pub fn set_model_after_pending(
        &self,
        link: &str,
        way: Way,
        swap: Swap,
    ) -> Result<(), EngineError> {
        self.rein(link, way)?
            .swaps
            .send(swap)
            .map_err(|_| EngineError::Stopped)
    }

    fn rein(&self, link: &str, way: Way) -> Result<&Rein, EngineError> {
        self.reins
            .iter()
            .find(|r| r.link == link && r.way == way)
            .ok_or_else(|| EngineError::NoSuchLink(link.to_owned()))
    }

    /// Cuts `link` in both directions (`true`: every frame received is dropped as
    /// `link-down`, address resolution included) or restores it (`false`). Copies already
    /// queued are still released.
    pub fn set_cut(&self, link: &str, cut: bool) -> Result<(), EngineError> {
        let mut found = false;
        for r in self.reins.iter().filter(|r| r.link == link) {
            r.cut.store(cut, Ordering::Relaxed);
            found = true;
        }
        if found {
            Ok(())
        } else {
            Err(EngineError::NoSuchLink(link.to_owned()))
        }
    }
}

/// A running engine. Dropping it stops the engine (without the report).
#[derive(Debug)]
pub struct EngineHandle {
    steerer: Steerer,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<LoopEnd, EngineError>>>,
    collector: Option<JoinHandle<()>>,
    taps: Arc<Vec<Tap>>,
    books: Arc<Mutex<Vec<Books>>>,
}

#[derive(Debug)]
struct LoopEnd {
    notices: Vec<String>,
    cpu_ns: u64,
    wall_ns: u64,
}

/// Starts the release thread for `links` and a collector thread that drains their fidelity
/// rings. Buffers are allocated here, before the first frame.
pub fn spawn<Io: PacketIo + Send + 'static>(
    config: EngineConfig,
    links: Vec<LinkSpec<Io>>,
) -> Result<EngineHandle, EngineError> {
    if config.rx_batch == 0 || config.poll_interval_ns == 0 {
        return Err(EngineError::ZeroLoopParameter);
    }
    let mut taps = Vec::new();
    let mut reins = Vec::new();
    let mut books = Vec::new();
    let mut running = Vec::new();
    for spec in links {
        for (way, cfg, sender) in [
            (Way::AToB, &spec.a_to_b, &spec.b),
            (Way::BToA, &spec.b_to_a, &spec.a),
        ] {
            let link = spec.name.clone();
            if cfg.pool_frames == 0 {
                return Err(EngineError::NoBuffers {
                    link,
                    way: way.as_str(),
                });
            }
            if cfg.slot_size > sender.max_frame() {
                return Err(EngineError::SlotTooLarge {
                    link,
                    way: way.as_str(),
                    slot_size: cfg.slot_size,
                    max_frame: sender.max_frame(),
                });
            }
        }
        let late = [spec.a_to_b.late_after_ns, spec.b_to_a.late_after_ns];
        let (steer_ab, helm_ab) = direction::steering();
        let (steer_ba, helm_ba) = direction::steering();
        let (a_to_b, pub_ab, fid_ab) = Direction::new(spec.a_to_b, steer_ab);
        let (b_to_a, pub_ba, fid_ba) = Direction::new(spec.b_to_a, steer_ba);
        for (way, published, fidelity, late, helm) in [
            (Way::AToB, pub_ab, fid_ab, late[0], helm_ab),
            (Way::BToA, pub_ba, fid_ba, late[1], helm_ba),
        ] {
            taps.push(Tap {
                link: spec.name.clone(),
                way,
                published,
                fidelity,
            });
            reins.push(Rein {
                link: spec.name.clone(),
                way,
                swaps: helm.swaps.clone(),
                cut: Arc::clone(&helm.cut),
            });
            books.push(Books {
                errors: ErrorHistogram::new(late),
                probe: None,
                kernel_drops: 0,
                helm,
            });
        }
        // Frames for a-b are received on `a`, for b-a on `b`.
        let n = books.len();
        books[n - 2].probe = spec.a.drop_probe();
        books[n - 1].probe = spec.b.drop_probe();
        running.push(Link {
            a: spec.a,
            b: spec.b,
            a_to_b,
            b_to_a,
        });
    }
    let pacer = Pacer::new(&config)?;
    let release_cpu = config.rt.cpu;
    let stop = Arc::new(AtomicBool::new(false));
    let thread = {
        let stop = Arc::clone(&stop);
        std::thread::Builder::new()
            .name("rtemu-release".into())
            .spawn(move || run_loop(config, running, pacer, &stop))
            .map_err(EngineError::Spawn)?
    };
    let taps = Arc::new(taps);
    let books = Arc::new(Mutex::new(books));
    let collector = {
        let (stop, taps, books) = (Arc::clone(&stop), Arc::clone(&taps), Arc::clone(&books));
        std::thread::Builder::new()
            .name("rtemu-collect".into())
            .spawn(move || {
                // Keep off the release thread's CPU: a collector woken there would preempt the
                // spinning release thread for a scheduler slice (milliseconds).
                if let (Some(cpu), Ok(allowed)) = (release_cpu, rt::affinity()) {
                    let others: Vec<usize> = allowed.into_iter().filter(|c| *c != cpu).collect();
                    if !others.is_empty() {
                        let _ = rt::set_affinity(&others);
                    }
                }
                while !stop.load(Ordering::Relaxed) {
                    drain(&taps, &books);
                    std::thread::sleep(COLLECT_EVERY);
                }
            })
            .map_err(EngineError::Spawn)?
    };
    Ok(EngineHandle {
        steerer: Steerer {
            reins: Arc::new(reins),
        },
        stop,
        thread: Some(thread),
        collector: Some(collector),
        taps,
        books,
    })
}

/// What the collector keeps per direction.
struct Books {
    errors: ErrorHistogram,
    probe: Option<Box<dyn DropProbe>>,
    kernel_drops: u64,
    helm: Helm,
}

impl std::fmt::Debug for Books {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Books")
            .field("errors", &self.errors)
            .field("kernel_drops", &self.kernel_drops)
            .finish_non_exhaustive()
    }
}

fn drain(taps: &[Tap], books: &Mutex<Vec<Books>>) {
    let mut books = books.lock().unwrap_or_else(PoisonError::into_inner);
    for (tap, b) in taps.iter().zip(books.iter_mut()) {
        b.errors.drain(&tap.fidelity);
        // A failed read leaves the count as it was; the next read catches up (the kernel
        // keeps counting until it is read).
        if let Some(Ok(n)) = b.probe.as_mut().map(|p| p.take()) {
            b.kernel_drops += n;
        }
        // Models replaced by `set_model` are freed here, off the release thread.
        while b.helm.retired.try_recv().is_ok() {}
    }
}

impl EngineHandle {
    /// Every direction's counters and fidelity so far.
    pub fn snapshot(&self) -> Vec<DirectionReport> {
        drain(&self.taps, &self.books);
        let h = self.books.lock().unwrap_or_else(PoisonError::into_inner);
        self.taps
            .iter()
            .zip(h.iter())
            .map(|(tap, b)| DirectionReport {
                link: tap.link.clone(),
                way: tap.way,
                counters: tap.published.snapshot(),
                cut: b.helm.cut.load(Ordering::Relaxed),
                kernel_drops: b.probe.is_some().then_some(b.kernel_drops),
                fidelity: b.errors.summary(tap.fidelity.lost()),
            })
            .collect()
    }

    /// What changes running directions: [`Steerer::set_model`] and [`Steerer::set_cut`],
    /// from any thread.
    pub fn steerer(&self) -> Steerer {
        self.steerer.clone()
    }

    /// Whether the release thread is still running (it ends only when stopped or on an error).
    pub fn is_running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Stops the engine and returns the final report. Copies still queued are not sent; they
    /// stay counted as in flight.
    pub fn stop(mut self) -> Result<Report, EngineError> {
        let end = self.halt();
        let end = end.ok_or(EngineError::Panicked)??;
        Ok(Report {
            notices: end.notices,
            directions: self.snapshot(),
            cpu_ns: end.cpu_ns,
            wall_ns: end.wall_ns,
        })
    }

    fn halt(&mut self) -> Option<Result<LoopEnd, EngineError>> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(c) = self.collector.take() {
            let _ = c.join();
        }
        self.thread.take().and_then(|t| t.join().ok())
    }
}

impl Drop for EngineHandle {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Turns the wait strategy into the waits between loop turns.
struct Pacer {
    strategy: WaitStrategy,
    /// The sleeping strategy's waiter (`sleep` for hybrid's sleep phase); none for `spin`.
    sleeper: Option<Waiter>,
    spinner: Waiter,
    poll_interval_ns: u64,
}

impl Pacer {
    fn new(config: &EngineConfig) -> Result<Pacer, WaitError> {
        let sleeper = match config.wait {
            WaitStrategy::Spin => None,
            WaitStrategy::Hybrid { .. } => Some(Waiter::new(WaitStrategy::Sleep)?),
            other => Some(Waiter::new(other)?),
        };
        Ok(Pacer {
            strategy: config.wait,
            sleeper,
            spinner: Waiter::new(WaitStrategy::Spin)?,
            poll_interval_ns: config.poll_interval_ns,
        })
    }

    fn spins(&self) -> bool {
        matches!(
            self.strategy,
            WaitStrategy::Spin | WaitStrategy::Hybrid { .. }
        )
    }

    /// Waits after an idle loop turn at `now`, with the next release at `next` (if any).
    fn pace(&mut self, now: Instant, next: Option<Instant>) -> Result<(), WaitError> {
        let poll_end = now + self.poll_interval_ns;
        match (self.strategy, &mut self.sleeper) {
            (WaitStrategy::Spin, _) => {}
            (WaitStrategy::Hybrid { margin_ns }, Some(sleeper)) => {
                let spin_from = next.map_or(poll_end, |t| t - margin_ns);
                if spin_from > now {
                    return sleeper.wait_until(spin_from.min(poll_end));
                }
            }
            (_, Some(sleeper)) => {
                return sleeper.wait_until(next.map_or(poll_end, |t| t.min(poll_end)));
            }
            (_, None) => unreachable!("Pacer::new gives every strategy but spin a sleeper"),
        }
        match next {
            Some(t) if t.nanos_since(now) <= SPIN_APPROACH_NS => self.spinner.wait_until(t),
            _ => Ok(()),
        }
    }
}

fn rt_setup(rt_cfg: &RtConfig, spins: bool) -> (Vec<String>, Option<rt::DmaLatencyGuard>) {
    let mut notices = Vec::new();
    let note = |notices: &mut Vec<String>, step: &str, r: Result<(), rt::RtError>| {
        if let Err(e) = r {
            notices.push(format!("{step} skipped: {e}"));
        }
    };
    if let Some(cpu) = rt_cfg.cpu {
        note(&mut notices, "pinning", rt::set_affinity(&[cpu]));
    }
    if let Some(priority) = rt_cfg.fifo_priority {
        let throttled = SystemInfo::probe().rt_runtime_us.is_some_and(|us| us >= 0);
        if spins && throttled {
            notices.push(
                "SCHED_FIFO skipped: the wait strategy spins and kernel.sched_rt_runtime_us \
                 throttles real-time threads (stopped 50 ms of every second); staying under \
                 SCHED_OTHER. Set it to -1 to allow SCHED_FIFO, at the risk of a spinning \
                 thread owning its CPU."
                    .to_owned(),
            );
        } else {
            note(&mut notices, "SCHED_FIFO", rt::set_fifo(priority));
        }
    }
    if rt_cfg.lock_memory {
        note(&mut notices, "mlockall", rt::lock_memory());
    }
    if rt_cfg.min_timer_slack {
        note(&mut notices, "timer slack 1 ns", rt::set_timer_slack(1));
    }
    let guard = if rt_cfg.hold_dma_latency {
        match rt::DmaLatencyGuard::hold(0) {
            Ok(g) => Some(g),
            Err(e) => {
                notices.push(format!("cpu_dma_latency skipped: {e}"));
                None
            }
        }
    } else {
        None
    };
    (notices, guard)
}

fn run_loop<Io: PacketIo>(
    config: EngineConfig,
    mut links: Vec<Link<Io>>,
    mut pacer: Pacer,
    stop: &AtomicBool,
) -> Result<LoopEnd, EngineError> {
    let (notices, _dma_guard) = rt_setup(&config.rt, pacer.spins());
    let cpu_start = rtemu_clock::time::thread_cpu_time_ns();
    let wall_start = Instant::now();
    let now_ns = || Instant::now().as_nanos();
    while !stop.load(Ordering::Relaxed) {
        // Each frame brings its arrival time from the I/O layer (the kernel's receive stamp,
        // or a clock read after the receive), never one read here before the receive.
        let mut received = 0;
        for l in &mut links {
            l.a_to_b.steer();
            l.b_to_a.steer();
            received += l.a.recv_batch(config.rx_batch, |f| l.a_to_b.receive(f));
            received += l.b.recv_batch(config.rx_batch, |f| l.b_to_a.receive(f));
        }
        let now = Instant::now();
        let mut next: Option<u64> = None;
        for l in &mut links {
            l.a_to_b.release(now.as_nanos(), &mut l.b, now_ns);
            l.b_to_a.release(now.as_nanos(), &mut l.a, now_ns);
            l.a_to_b.publish();
            l.b_to_a.publish();
            for t in [l.a_to_b.next_release(), l.b_to_a.next_release()]
                .into_iter()
                .flatten()
            {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        }
        // Frames may be waiting, or more copies due: go round again without waiting.
        if received > 0 || next.is_some_and(|t| t <= now.as_nanos()) {
            continue;
        }
        pacer.pace(now, next.map(Instant::from_nanos))?;
    }
    Ok(LoopEnd {
        notices,
        cpu_ns: rtemu_clock::time::thread_cpu_time_ns() - cpu_start,
        wall_ns: Instant::now().nanos_since(wall_start),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hybrid_sleeps_only_while_the_release_is_beyond_its_margin() {
        let mut pacer = Pacer::new(&EngineConfig {
            wait: WaitStrategy::Hybrid {
                margin_ns: 1_000_000,
            },
            poll_interval_ns: 200_000,
            ..EngineConfig::default()
        })
        .unwrap();
        // Next release 500 µs away, inside the 1 ms margin: no sleep (returns at once).
        let now = Instant::now();
        pacer.pace(now, Some(now + 500_000)).unwrap();
        assert!(Instant::now().nanos_since(now) < 400_000);
        // Nothing queued: sleeps one poll interval, at least.
        let now = Instant::now();
        pacer.pace(now, None).unwrap();
        assert!(Instant::now().nanos_since(now) >= 200_000);
    }

    #[test]
    fn sleeping_strategies_wake_for_the_next_release_or_the_poll_interval() {
        let mut pacer = Pacer::new(&EngineConfig {
            wait: WaitStrategy::Sleep,
            poll_interval_ns: 300_000,
            ..EngineConfig::default()
        })
        .unwrap();
        let now = Instant::now();
        pacer.pace(now, Some(now + 100_000)).unwrap();
        assert!(Instant::now() >= now + 100_000);
        let now = Instant::now();
        pacer.pace(now, Some(now + 10_000_000_000)).unwrap();
        let slept = Instant::now().nanos_since(now);
        assert!(slept >= 300_000, "{slept}");
        // The 10 s release was not waited for; generous bound for a loaded machine.
        assert!(slept < 5_000_000_000, "{slept}");
    }

    #[test]
    fn spin_hands_the_last_microseconds_to_the_spin_waiter() {
        let mut pacer = Pacer::new(&EngineConfig::default()).unwrap();
        let now = Instant::now();
        let due = now + 1_500;
        pacer.pace(now, Some(due)).unwrap();
        assert!(Instant::now() >= due);
        assert!(pacer.sleeper.is_none(), "spin never sleeps");
    }
}
