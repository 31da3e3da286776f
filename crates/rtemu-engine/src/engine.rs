//! The engine: its release threads, the collector that drains their records, and the handles
//! that read and steer it while it runs.
//!
//! A lab's impaired links are partitioned over [`EngineConfig::threads`] release threads
//! ([`crate::release`]), link by link in the order given (link *i* to thread *i* mod *n*); with
//! more threads than links, where links bring send-only ends ([`LinkSpec::senders`]), direction
//! by direction instead, so a link's two ways (a TCP flow's data and its acknowledgements)
//! run on two CPUs. Either way every frame of a link direction is received, decided and
//! released by one thread: order and the seeded decisions are those of one thread (and of the
//! simulator). Each thread has its own
//! rings, timing queues, fidelity records and wait ([`crate::pacer`]); it is pinned to its CPU
//! when [`RtConfig::cpus`] names one and runs under `SCHED_FIFO` at
//! [`RtConfig::fifo_priority`], within a real-time budget that keeps the kernel from ever
//! throttling it. The collector, the scheduler and the control server stay at normal priority,
//! off the release threads' CPUs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use rtemu_clock::rt::{self, Policy};
use rtemu_clock::wait::WaitError;
use rtemu_clock::wake::{Bell, WakeSet};
use rtemu_clock::WaitStrategy;
use rtemu_model::direction::Way;

use crate::counters::{Counters, Published};
use crate::direction::{self, Direction, DirectionConfig, Helm, Swap};
use crate::fidelity::{Consumer, ErrorHistogram, Summary};
use crate::io::{DropProbe, PacketIo};
use crate::pacer::Pacer;
use crate::release::{self, LoopEnd, ThreadRt, ThreadStatus, Turns, Way as Unit};

/// The `SCHED_FIFO` priority of the release threads unless told otherwise: above every normal
/// thread, so a busy program beside the lab cannot hold a release back, and below the kernel's
/// threaded interrupt handlers (50), so the interrupts that deliver frames are never held back
/// by the engine.
pub const DEFAULT_FIFO_PRIORITY: u8 = 40;

/// How often the collector thread drains the fidelity rings.
const COLLECT_EVERY: Duration = Duration::from_millis(10);

/// Real-time set-up of the release threads (the timing paper's section 4). Every step that
/// lacks a privilege is skipped with a notice, and the engine runs on without it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RtConfig {
    /// Pin release thread *i* to `cpus[i % cpus.len()]`; empty: not pinned.
    pub cpus: Vec<usize>,
    /// Run the release threads under `SCHED_FIFO` at this priority (1–99), within their
    /// real-time budget; `None`: `SCHED_OTHER`.
    pub fifo_priority: Option<u8>,
    /// `mlockall` the process, so no page fault lands on the packet path.
    pub lock_memory: bool,
    /// Set the release threads' timer slack to 1 ns, so sleeps end when asked (real-time
    /// threads have none anyway).
    pub min_timer_slack: bool,
    /// Hold `/dev/cpu_dma_latency` at 0 while the engine runs.
    pub hold_dma_latency: bool,
}

impl Default for RtConfig {
    fn default() -> Self {
        RtConfig {
            cpus: Vec::new(),
            fifo_priority: Some(DEFAULT_FIFO_PRIORITY),
            lock_memory: true,
            min_timer_slack: true,
            hold_dma_latency: true,
        }
    }
}

/// How the release threads run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineConfig {
    /// How to wait for the next release (see [`crate::pacer`]).
    pub wait: WaitStrategy,
    /// The longest a sleeping strategy leaves the receive rings unpolled while a release is
    /// pending, ns.
    pub poll_interval_ns: u64,
    /// The most frames taken from one interface per loop turn.
    pub rx_batch: usize,
    /// Release threads the links are partitioned over (at most one per link is used).
    pub threads: usize,
    /// Real-time set-up.
    pub rt: RtConfig,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            wait: WaitStrategy::Auto,
            poll_interval_ns: 50_000,
            rx_batch: 64,
            threads: 1,
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
    /// Send-only ends on A's and B's interfaces (receiving nothing), with which the link's two
    /// directions can run on two threads: each then receives on its own end and sends through
    /// the other end's sender. Used when the engine has more threads than links; `None` keeps
    /// the link in one thread.
    pub senders: Option<(Io, Io)>,
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
    /// `rx_batch`, `poll_interval_ns` or `threads` is 0.
    #[error("rx_batch, poll_interval_ns and threads must be at least 1")]
    ZeroLoopParameter,
    /// A receive socket could not be watched for input.
    #[error("watching the receive sockets: {0}")]
    Watch(std::io::Error),
    /// The wait strategy could not be set up.
    #[error(transparent)]
    Wait(#[from] WaitError),
    /// A release thread could not be started.
    #[error("starting a release thread: {0}")]
    Spawn(std::io::Error),
    /// A release thread panicked.
    #[error("a release thread panicked")]
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

/// The reader's view of one direction.
#[derive(Debug)]
struct Tap {
    link: String,
    way: Way,
    thread: usize,
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
    /// The release thread that serves it (an index into [`Report::threads`]).
    pub thread: usize,
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

/// What one release thread is (or was) given and how it fares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadReport {
    /// Its index, which [`DirectionReport::thread`] names.
    pub index: usize,
    /// What it serves, in the order given: a link by its name, or one direction of a link
    /// split over two threads as `NAME (a-b)`.
    pub links: Vec<String>,
    /// The CPU it is pinned to, if any.
    pub cpu: Option<usize>,
    /// The `SCHED_FIFO` priority asked for (`None`: `SCHED_OTHER` was asked for).
    pub priority: Option<u8>,
    /// Its class now: the priority asked for, `SCHED_OTHER` if that was refused, or while it
    /// has stepped down for the rest of a window whose real-time share it spent.
    pub policy: Policy,
    /// Windows in which it spent its real-time share and stepped down to `SCHED_OTHER`
    /// ([`crate::release`]): zero unless it was saturated or spinning.
    pub stepped_down: u64,
    /// How long before a release it stops sleeping and spins, ns (its strategy's margin).
    pub margin_ns: u64,
    /// Times it was away more than [`release::STALL_NS`] with work: a loop turn, a timed
    /// wake-up past its release or a frame's wait for it; what a throttle, a preemption by
    /// something more urgent or the hypervisor taking the CPU shows.
    pub stalls: u64,
    /// The longest such stall, ns.
    pub max_stall_ns: u64,
    /// Its timer slack, ns, once it started.
    pub timer_slack_ns: Option<u64>,
    /// CPU time it used so far, ns, where the kernel tells.
    pub cpu_ns: Option<u64>,
    /// Its set-up steps that were skipped, and why.
    pub notices: Vec<String>,
}

/// What the engine did, at the end of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Each set-up step that was skipped, and why (said once, then the engine went on).
    pub notices: Vec<String>,
    /// Every direction of every link, in the order the links were given.
    pub directions: Vec<DirectionReport>,
    /// Every release thread.
    pub threads: Vec<ThreadReport>,
    /// CPU time the release threads used, ns.
    pub cpu_ns: u64,
    /// Wall time the release loops ran (the longest), ns.
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
    /// Wakes the direction's release thread, so a change takes effect without waiting for a
    /// frame.
    bell: Bell,
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
        let rein = self.rein(link, way)?;
        rein.swaps
            .try_send(swap)
            .map_err(|_| EngineError::ChangePending {
                link: link.to_owned(),
                way: way.as_str(),
            })?;
        rein.bell.ring();
        Ok(())
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
        let rein = self.rein(link, way)?;
        rein.swaps.send(swap).map_err(|_| EngineError::Stopped)?;
        rein.bell.ring();
        Ok(())
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
            r.bell.ring();
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
    threads: Vec<Running>,
    collector: Option<JoinHandle<()>>,
    taps: Arc<Vec<Tap>>,
    books: Arc<Mutex<Vec<Books>>>,
    notices: Vec<String>,
    /// Released when the engine stops (dropped with the handle).
    _dma_latency: Option<rt::DmaLatencyGuard>,
}

/// One release thread, as the handle keeps it.
#[derive(Debug)]
struct Running {
    links: Vec<String>,
    cpu: Option<usize>,
    priority: Option<u8>,
    status: Arc<ThreadStatus>,
    bell: Bell,
    join: Option<JoinHandle<Result<LoopEnd, EngineError>>>,
}

/// The ports and directions of one release thread before it starts.
struct Share<Io> {
    ports: Vec<Io>,
    ways: Vec<Unit>,
    /// What it serves, as reports name it: a link, or one direction of a split link.
    names: Vec<String>,
    wake: WakeSet,
    /// Whether every receiving port has a descriptor in `wake`.
    watches_all: bool,
}

impl<Io: PacketIo> Share<Io> {
    /// Adds `io` as a port; watches it for frames when it receives. Returns its index.
    fn port(&mut self, io: Io, receives: bool) -> Result<usize, EngineError> {
        if receives {
            match io.poll_fd() {
                Some(fd) => self.wake.watch(fd).map_err(EngineError::Watch)?,
                // An interface without a descriptor cannot be slept on: the thread polls it.
                None => self.watches_all = false,
            }
        }
        self.ports.push(io);
        Ok(self.ports.len() - 1)
    }
}

/// Starts the release threads for `links` and a collector thread that drains their fidelity
/// rings. Buffers are allocated here, before the first frame; memory is locked and
/// `/dev/cpu_dma_latency` held here, once for the process.
pub fn spawn<Io: PacketIo + Send + 'static>(
    config: EngineConfig,
    links: Vec<LinkSpec<Io>>,
) -> Result<EngineHandle, EngineError> {
    if config.rx_batch == 0 || config.poll_interval_ns == 0 || config.threads == 0 {
        return Err(EngineError::ZeroLoopParameter);
    }
    // More threads than links: each link's directions run on two threads where the link
    // brings send-only ends; otherwise links are spread whole.
    let split = config.threads > links.len() && links.iter().all(|l| l.senders.is_some());
    let units = if split { 2 * links.len() } else { links.len() };
    let n_threads = config.threads.min(units).max(1);
    let mut shares: Vec<Share<Io>> = Vec::with_capacity(n_threads);
    for _ in 0..n_threads {
        shares.push(Share {
            ports: Vec::new(),
            ways: Vec::new(),
            names: Vec::new(),
            wake: WakeSet::new().map_err(EngineError::Watch)?,
            watches_all: true,
        });
    }
    let mut taps = Vec::new();
    let mut reins = Vec::new();
    let mut books = Vec::new();
    for (i, spec) in links.into_iter().enumerate() {
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
        let threads = if split {
            [(2 * i) % n_threads, (2 * i + 1) % n_threads]
        } else {
            [i % n_threads; 2]
        };
        let late = [spec.a_to_b.late_after_ns, spec.b_to_a.late_after_ns];
        let (steer_ab, helm_ab) = direction::steering();
        let (steer_ba, helm_ba) = direction::steering();
        let (a_to_b, pub_ab, fid_ab) = Direction::new(spec.a_to_b, steer_ab);
        let (b_to_a, pub_ba, fid_ba) = Direction::new(spec.b_to_a, steer_ba);
        for (way, published, fidelity, late, helm, thread) in [
            (Way::AToB, pub_ab, fid_ab, late[0], helm_ab, threads[0]),
            (Way::BToA, pub_ba, fid_ba, late[1], helm_ba, threads[1]),
        ] {
            taps.push(Tap {
                link: spec.name.clone(),
                way,
                thread,
                published,
                fidelity,
            });
            reins.push((
                thread,
                spec.name.clone(),
                way,
                helm.swaps.clone(),
                Arc::clone(&helm.cut),
            ));
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
        match (split, spec.senders) {
            (true, Some((a_tx, b_tx))) => {
                for (thread, rx, tx, dir, way) in [
                    (threads[0], spec.a, b_tx, a_to_b, Way::AToB),
                    (threads[1], spec.b, a_tx, b_to_a, Way::BToA),
                ] {
                    let share = &mut shares[thread];
                    let rx = share.port(rx, true)?;
                    let tx = share.port(tx, false)?;
                    share.ways.push(Unit { rx, tx, dir });
                    share
                        .names
                        .push(format!("{} ({})", spec.name, way.as_str()));
                }
            }
            _ => {
                let share = &mut shares[threads[0]];
                let a = share.port(spec.a, true)?;
                let b = share.port(spec.b, true)?;
                share.ways.push(Unit {
                    rx: a,
                    tx: b,
                    dir: a_to_b,
                });
                share.ways.push(Unit {
                    rx: b,
                    tx: a,
                    dir: b_to_a,
                });
                share.names.push(spec.name);
            }
        }
    }
    let mut notices = Vec::new();
    if config.rt.lock_memory {
        if let Err(e) = rt::lock_memory() {
            notices.push(format!("mlockall skipped: {e}"));
        }
    }
    let dma_latency = if config.rt.hold_dma_latency {
        rt::DmaLatencyGuard::hold(0)
            .map_err(|e| notices.push(format!("cpu_dma_latency skipped: {e}")))
            .ok()
    } else {
        None
    };
    let stop = Arc::new(AtomicBool::new(false));
    let turns = Turns {
        rx_batch: config.rx_batch,
    };
    let mut threads = Vec::with_capacity(n_threads);
    for (index, share) in shares.into_iter().enumerate() {
        let pacer = Pacer::new(
            config.wait,
            config.poll_interval_ns,
            share.wake,
            share.watches_all,
        )?;
        let rt_cfg = ThreadRt {
            cpu: (!config.rt.cpus.is_empty()).then(|| config.rt.cpus[index % config.rt.cpus.len()]),
            fifo_priority: config.rt.fifo_priority,
            min_timer_slack: config.rt.min_timer_slack,
        };
        let status = Arc::new(ThreadStatus::default());
        let bell = pacer.bell();
        let (cpu, priority) = (rt_cfg.cpu, rt_cfg.fifo_priority);
        let join = {
            let (stop, status) = (Arc::clone(&stop), Arc::clone(&status));
            let (ports, ways) = (share.ports, share.ways);
            std::thread::Builder::new()
                .name(format!("rtemu-release{index}"))
                .spawn(move || release::run(&rt_cfg, turns, ports, ways, pacer, &stop, &status))
        };
        let join = match join {
            Ok(j) => j,
            Err(e) => {
                // The threads already started stop with the handle they would have had.
                stop.store(true, Ordering::Relaxed);
                for t in &mut threads {
                    let t: &mut Running = t;
                    t.bell.ring();
                    if let Some(j) = t.join.take() {
                        let _ = j.join();
                    }
                }
                return Err(EngineError::Spawn(e));
            }
        };
        threads.push(Running {
            links: share.names,
            cpu,
            priority,
            status,
            bell,
            join: Some(join),
        });
    }
    let reins = reins
        .into_iter()
        .map(|(thread, link, way, swaps, cut)| Rein {
            link,
            way,
            swaps,
            cut,
            bell: threads[thread].bell.clone(),
        })
        .collect();
    let taps = Arc::new(taps);
    let books = Arc::new(Mutex::new(books));
    let release_cpus: Vec<usize> = threads.iter().filter_map(|t| t.cpu).collect();
    let collector = {
        let (stop, taps, books) = (Arc::clone(&stop), Arc::clone(&taps), Arc::clone(&books));
        std::thread::Builder::new()
            .name("rtemu-collect".into())
            .spawn(move || {
                // Keep off the release threads' CPUs: work woken there would wait behind them
                // or, at normal priority, be what they step down for.
                keep_off(&release_cpus);
                while !stop.load(Ordering::Relaxed) {
                    drain(&taps, &books);
                    std::thread::sleep(COLLECT_EVERY);
                }
            })
    };
    let mut handle = EngineHandle {
        steerer: Steerer {
            reins: Arc::new(reins),
        },
        stop,
        threads,
        collector: None,
        taps,
        books,
        notices,
        _dma_latency: dma_latency,
    };
    handle.collector = Some(collector.map_err(EngineError::Spawn)?);
    // Returned once every thread has set itself up, so what it got is what a report says.
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    while !handle.threads.iter().all(|t| t.status.view().tid.is_some())
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(handle)
}

/// Moves the calling thread off `cpus`, where other CPUs are allowed (a best effort: the
/// thread runs wherever it may otherwise).
pub fn keep_off(cpus: &[usize]) {
    if cpus.is_empty() {
        return;
    }
    if let Ok(allowed) = rt::affinity() {
        let others: Vec<usize> = allowed.into_iter().filter(|c| !cpus.contains(c)).collect();
        if !others.is_empty() {
            let _ = rt::set_affinity(&others);
        }
    }
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
                thread: tap.thread,
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

    /// Every release thread: its links, CPU, class, budget and CPU time so far.
    pub fn threads(&self) -> Vec<ThreadReport> {
        self.threads
            .iter()
            .enumerate()
            .map(|(index, t)| {
                let v = t.status.view();
                ThreadReport {
                    index,
                    links: t.links.clone(),
                    cpu: t.cpu,
                    priority: t.priority,
                    policy: v.policy,
                    stepped_down: v.stepped_down,
                    margin_ns: v.margin_ns,
                    stalls: v.stalls,
                    max_stall_ns: v.max_stall_ns,
                    timer_slack_ns: v.timer_slack_ns,
                    cpu_ns: v.tid.and_then(release::cpu_time_ns),
                    notices: v.notices,
                }
            })
            .collect()
    }

    /// Set-up steps of the whole engine (memory lock, wake-up latency) that were skipped.
    pub fn notices(&self) -> &[String] {
        &self.notices
    }

    /// Whether every release thread is still running (they end only when stopped or on an
    /// error).
    pub fn is_running(&self) -> bool {
        self.threads
            .iter()
            .all(|t| t.join.as_ref().is_some_and(|j| !j.is_finished()))
    }

    /// Stops the engine and returns the final report. Copies still queued are not sent; they
    /// stay counted as in flight.
    pub fn stop(mut self) -> Result<Report, EngineError> {
        let threads = self.threads();
        let ends = self.halt();
        let mut notices = self.notices.clone();
        let (mut cpu_ns, mut wall_ns) = (0, 0);
        for end in ends {
            let end = end.ok_or(EngineError::Panicked)??;
            cpu_ns += end.cpu_ns;
            wall_ns = wall_ns.max(end.wall_ns);
        }
        for t in &threads {
            for n in &t.notices {
                let n = if threads.len() > 1 {
                    format!("release thread {}: {n}", t.index)
                } else {
                    n.clone()
                };
                if !notices.contains(&n) {
                    notices.push(n);
                }
            }
        }
        Ok(Report {
            notices,
            directions: self.snapshot(),
            threads,
            cpu_ns,
            wall_ns,
        })
    }

    fn halt(&mut self) -> Vec<Option<Result<LoopEnd, EngineError>>> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(c) = self.collector.take() {
            let _ = c.join();
        }
        for t in &self.threads {
            t.bell.ring();
        }
        self.threads
            .iter_mut()
            .map(|t| t.join.take().and_then(|j| j.join().ok()))
            .collect()
    }
}

impl Drop for EngineHandle {
    fn drop(&mut self) {
        self.halt();
    }
}
