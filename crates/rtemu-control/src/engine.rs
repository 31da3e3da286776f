//! A lab's engine process, and the client side of its control socket.
//!
//! `rtemu up` starts one engine process per lab with impaired links (`rtemu engine LAB`, a
//! hidden subcommand), detached, its output in `/run/rtemu/<lab>/engine.log`. The process moves
//! into the lab's namespace before anything else, so `rtemu down` finds and ends it with the
//! lab's other processes even when it can no longer answer; asked politely first (`stop` on the
//! control socket `/run/rtemu/<lab>/control.sock`, mode 0600), it writes the fidelity report to
//! `/run/rtemu/<lab>/fidelity.json` and answers with it.
//!
//! The engine moves frames with `AF_PACKET` rings by default, or with AF_XDP when asked
//! (`--io af-xdp`, from `rtemu up --engine-io af-xdp`): side by side on veth, AF_XDP was no
//! faster (0.87–0.99 of the packets/s, round trips within ±13 %) though it lost fewer frames
//! under load (`docs/benchmarks.md`). Where AF_XDP cannot be set up (an old kernel, a missing
//! capability, an MTU over 3822 bytes, another XDP program on an end), the engine says why
//! once, in its log, and uses `AF_PACKET`. The XDP programs are attached through bpf links, so
//! they leave the interfaces when the process ends, however it ends.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use rtemu_clock::WaitStrategy;
use rtemu_engine::afpacket::{AfPacket, AfPacketConfig};
use rtemu_engine::control::{self, After, Request};
use rtemu_engine::engine::{
    DirectionReport, EngineConfig, EngineError, EngineHandle, LinkSpec, RtConfig,
    DEFAULT_FIFO_PRIORITY,
};
use rtemu_engine::io::PacketIo;
use rtemu_engine::xdp::{AfXdp, AfXdpConfig};
use rtemu_engine::{netns, offload, DirectionConfig, DropKind, Resolution, Swap};
use rtemu_model::direction::Way;
use rtemu_model::rng::DEFAULT_SEED;
use rtemu_model::{netem, LinkConfig};
use rtemu_topo::lab::{engine_ends, lab_netns};
use rtemu_topo::state::{lab_dir, LabName, State};
use rtemu_topo::topology::{
    Culprit, Impairment, LinkCheck, LinkCheckError, ProgramsCpus, Segment, Topology,
};
use rtemu_trace::prefetch::{EndPolicy, UnderrunPolicy};
use rtemu_trace::series::Interpolation;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::assemble::{build_model, BuildError, TraceArg, TraceKind, TraceOptions};
use crate::error::ControlError;
use crate::message::{
    Ack, Direction, Done, EngineThread, ErrorKind, ErrorReply, FinalReport, Stats, Underlay,
};

/// A copy released more than this after its intended time counts as late.
const LATE_AFTER_NS: u64 = 100_000;

/// The packet rate a direction's buffers are sized for (with its longest delay), unless
/// `up --engine-pps` says otherwise.
pub const SIZING_PPS: u64 = 100_000;

/// The fewest frame buffers a direction gets (about 6 MB at a 1500-byte MTU).
const MIN_POOL: usize = 4096;

/// The most frame buffers a direction gets (about 100 MB at a 1500-byte MTU, locked in memory).
const MAX_POOL: usize = 1 << 16;

/// Receive-ring frames per engine end while the lab's links fit [`FLOOR_BUDGET`] (8 MiB of
/// 2 KiB frames; the transmit ring has an eighth of it).
const RING_FRAMES: usize = 4096;

/// What the fixed part of every impaired link's memory (its rings and its directions'
/// [`MIN_POOL`] buffers, all locked) may take together. About 30 links get the full floors;
/// past that each gets its share, so 1,000 links need about 2 GB instead of 30 GB. Buffers a
/// direction needs for its own rate × delay come on top and are never cut.
const FLOOR_BUDGET: usize = 1 << 30;

/// The least ring frames and floor buffers a link's share goes down to.
const LEAST_FLOOR: usize = 256;

/// Each impaired link's share of [`FLOOR_BUDGET`]: its ends' receive-ring frames and its
/// directions' least buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Floors {
    ring_frames: usize,
    pool_frames: usize,
}

impl Floors {
    /// The floors of each of `links` impaired links.
    fn for_links(links: usize) -> Floors {
        // One link at the full floors: two ends' rings of 2 KiB frames, two directions' buffers
        // of MTU-sized slots.
        let full = 2 * (RING_FRAMES + RING_FRAMES / 8) * 2048 + 2 * MIN_POOL * 1536;
        let share = FLOOR_BUDGET / links.max(1);
        let scaled = |floor: usize| (floor * share / full).clamp(LEAST_FLOOR, floor);
        Floors {
            ring_frames: scaled(RING_FRAMES),
            pool_frames: scaled(MIN_POOL),
        }
    }
}

/// The delay buffers are sized for when a trace decides delays.
const TRACE_SIZING_DELAY_NS: u64 = 100_000_000;

/// How long `up` waits for a new engine to answer, beyond [`START_PER_LINK`] per impaired
/// link.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// What one impaired link adds to the engine's start-up wait: its sockets, rings and buffers
/// (about 65 ms each on a busy 2-core machine), with room.
const START_PER_LINK: Duration = Duration::from_millis(250);

/// How the engine process runs: the hidden `rtemu engine LAB` subcommand's options, which
/// [`start`] writes on its command line.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The lab.
    pub lab: LabName,
    /// How the release loop waits.
    pub wait: WaitStrategy,
    /// The CPUs the release threads are pinned to (thread *i* to the *i*-th, round robin);
    /// empty: not pinned.
    pub cpus: Vec<usize>,
    /// The release threads' real-time class.
    pub priority: Priority,
    /// Release threads (at most one per impaired link is used).
    pub threads: usize,
    /// The packet I/O (default [`IoKind::DEFAULT`]).
    pub io: Option<IoKind>,
    /// The packet rate each direction's buffers are sized for.
    pub sizing_pps: u64,
}

/// How `up` starts a lab's engine; each option left out takes the engine's default
/// ([`EngineOptions::plan`]).
#[derive(Debug, Clone, Default)]
pub struct EngineOptions {
    /// How the engine waits for a release (default: [`default_wait`]).
    pub wait: Option<WaitStrategy>,
    /// The CPUs the release threads are pinned to (default: [`default_cpus`]).
    pub cpus: Option<Vec<usize>>,
    /// The release threads' real-time class (default: `SCHED_FIFO` at
    /// [`DEFAULT_FIFO_PRIORITY`]).
    pub priority: Option<Priority>,
    /// Release threads (default: [`default_threads`]).
    pub threads: Option<usize>,
    /// The engine's packet I/O (default [`IoKind::DEFAULT`]; AF_XDP that cannot be set up
    /// falls back to `AF_PACKET`).
    pub io: Option<IoKind>,
    /// The packet rate, per direction, that each impaired link's frame buffers are sized for
    /// (default [`SIZING_PPS`]).
    pub sizing_pps: Option<u64>,
    /// Where the processes started in the lab's nodes run (default: the topology's
    /// `programs_cpus`): with [`ProgramsCpus::OffEngine`], on every online CPU but the
    /// release threads' ([`programs_cpus`]).
    pub programs: Option<ProgramsCpus>,
    /// The `rtemu` executable the engine process runs from (default: the current one, which
    /// is `rtemu`, except in a program that brings labs up without being it: the benchmarks).
    pub program: Option<PathBuf>,
}

/// The real-time class of an engine's release threads (`up --engine-priority`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    /// `SCHED_FIFO` at this priority (1–99), within the threads' real-time budget.
    Fifo(u8),
    /// `SCHED_OTHER`, like any program (`off`).
    Off,
}

impl Default for Priority {
    fn default() -> Self {
        Priority::Fifo(DEFAULT_FIFO_PRIORITY)
    }
}

impl Priority {
    /// The `SCHED_FIFO` priority, if any.
    pub fn fifo(self) -> Option<u8> {
        match self {
            Priority::Fifo(p) => Some(p),
            Priority::Off => None,
        }
    }
}

impl std::fmt::Display for Priority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Priority::Fifo(p) => write!(f, "{p}"),
            Priority::Off => f.write_str("off"),
        }
    }
}

impl std::str::FromStr for Priority {
    type Err = String;

    fn from_str(text: &str) -> std::result::Result<Priority, String> {
        let text = text.trim();
        if text == "off" {
            return Ok(Priority::Off);
        }
        match text.parse::<u8>() {
            Ok(p @ 1..=99) => Ok(Priority::Fifo(p)),
            _ => Err(format!(
                "engine priority `{}` is invalid: give a SCHED_FIFO priority from 1 to 99, \
                 or `off` for SCHED_OTHER",
                text.chars().take(32).collect::<String>()
            )),
        }
    }
}

impl EngineOptions {
    /// The release threads and their CPUs for `links` impaired links on a machine whose
    /// threads may run on `allowed` CPUs: the options given, else the defaults.
    pub fn plan(&self, links: usize, allowed: &[usize]) -> (usize, Vec<usize>) {
        let threads = self
            .threads
            .unwrap_or_else(|| default_threads(links, allowed.len()));
        // The threads that will have work: one per link, or per direction when there are more
        // threads than links (the engine splits links then).
        let units = if threads > links { 2 * links } else { links };
        let cpus = self
            .cpus
            .clone()
            .unwrap_or_else(|| default_cpus(threads.min(units.max(1)), allowed));
        (threads, cpus)
    }
}

/// The release threads and their CPUs for `links` impaired links with `opts`, on the CPUs this
/// process may use: what [`start`] gives the engine.
fn planned(opts: &EngineOptions, links: usize) -> (usize, Vec<usize>) {
    let allowed = rtemu_clock::rt::affinity().unwrap_or_default();
    opts.plan(links, &allowed)
}

/// The CPUs the processes started in `topo`'s nodes are kept on, when its `programs_cpus` or
/// `opts` say so and it has `links` impaired links here (a lab without any has no engine to
/// keep off): every online CPU but those [`start`] will pin the release threads to.
pub fn programs_cpus(
    topo: &Topology,
    opts: &EngineOptions,
    links: usize,
) -> Result<Option<Vec<usize>>, ControlError> {
    if opts.programs.unwrap_or(topo.programs_cpus) == ProgramsCpus::All || links == 0 {
        return Ok(None);
    }
    let (_, engine) = planned(opts, links);
    let online =
        rtemu_topo::cpuset::online().map_err(ControlError::io("reading the online CPUs"))?;
    Ok(Some(rtemu_topo::cpuset::off_engine(&online, &engine)?))
}

/// Release threads for `links` impaired links on `cpus` CPUs: one per two CPUs (the other
/// half is left to the lab's programs and the kernel's packet work, which runs in their
/// sends), at least one, at most one per link.
pub fn default_threads(links: usize, cpus: usize) -> usize {
    (cpus / 2).clamp(1, links.max(1))
}

/// The CPUs `threads` release threads are pinned to among `allowed`: the last ones, where
/// at least one CPU is left for everything else (CPU 0 takes most of the housekeeping);
/// none (not pinned) otherwise.
pub fn default_cpus(threads: usize, allowed: &[usize]) -> Vec<usize> {
    if threads == 0 || allowed.len() <= threads {
        return Vec::new();
    }
    allowed[allowed.len() - threads..].to_vec()
}

#[cfg(test)]
mod plan_tests {
    use super::*;

    #[test]
    fn threads_and_cpus_follow_the_machine_and_the_links() {
        let two = [0, 1];
        let eight: Vec<usize> = (0..8).collect();
        // Two CPUs: one thread on CPU 1, whatever the links.
        assert_eq!(EngineOptions::default().plan(1, &two), (1, vec![1]));
        assert_eq!(EngineOptions::default().plan(40, &two), (1, vec![1]));
        // Eight CPUs: one thread per two, on the last four, at most one per link.
        assert_eq!(
            EngineOptions::default().plan(40, &eight),
            (4, vec![4, 5, 6, 7])
        );
        assert_eq!(EngineOptions::default().plan(3, &eight), (3, vec![5, 6, 7]));
        // More threads than links: the link's two directions each have a thread to pin.
        let two_threads = EngineOptions {
            threads: Some(2),
            ..EngineOptions::default()
        };
        assert_eq!(two_threads.plan(1, &eight), (2, vec![6, 7]));
        // ... unless that leaves no CPU for the rest: then none is pinned.
        assert_eq!(two_threads.plan(1, &two), (2, vec![]));
        // Given CPUs are taken as given.
        let given = EngineOptions {
            cpus: Some(vec![0]),
            ..EngineOptions::default()
        };
        assert_eq!(given.plan(5, &two), (1, vec![0]));
    }

    #[test]
    fn priorities_read_as_flags_give_them() {
        assert_eq!("40".parse::<Priority>(), Ok(Priority::Fifo(40)));
        assert_eq!("off".parse::<Priority>(), Ok(Priority::Off));
        for bad in ["0", "100", "-1", "fifo", ""] {
            let e = bad.parse::<Priority>().unwrap_err();
            assert!(e.contains("from 1 to 99"), "{bad}: {e}");
        }
        assert_eq!(Priority::default().fifo(), Some(DEFAULT_FIFO_PRIORITY));
        assert_eq!(Priority::Fifo(7).to_string(), "7");
    }
}

/// The engine's packet I/O layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoKind {
    /// `AF_PACKET` sockets with `TPACKET_V2` rings.
    AfPacket,
    /// AF_XDP sockets, each fed by an XDP program on its interface.
    AfXdp,
}

impl IoKind {
    /// The I/O a lab's engine uses unless told otherwise: the faster one measured side by side
    /// on veth (`docs/benchmarks.md`, AF_XDP vs AF_PACKET).
    pub const DEFAULT: IoKind = IoKind::AfPacket;

    /// What `--io` and reports call it.
    pub fn as_str(self) -> &'static str {
        match self {
            IoKind::AfPacket => "af-packet",
            IoKind::AfXdp => "af-xdp",
        }
    }
}

/// One I/O layer, as the engine process opens it on an engine end.
trait OpenIo: PacketIo + Send + Sized + 'static {
    const KIND: IoKind;

    /// Opens interface `name` (in this thread's namespace) for frames of a link of `mtu`, with
    /// about `ring_frames` frames of receive ring where the layer has one.
    fn open_end(name: &str, mtu: u32, ring_frames: usize) -> Result<Self>;

    /// A send-only end on interface `name`, so a link's two directions can run on two
    /// threads; `None` where the layer has none (its links stay whole in one thread).
    fn open_sender(name: &str, mtu: u32, ring_frames: usize) -> Result<Option<Self>>;
}

/// Rings for frames of a link of `mtu`: `ring_frames` to receive and an eighth to send, each
/// rounded up to whole ring blocks.
fn ring_config(mtu: u32, ring_frames: usize) -> AfPacketConfig {
    let mut ring = AfPacketConfig {
        frame_size: (mtu + 18 + 128).next_power_of_two().max(2048),
        ..AfPacketConfig::default()
    };
    let block = ring.frames_per_block().max(1);
    let whole = |frames: usize| (u32::try_from(frames).unwrap_or(u32::MAX)).div_ceil(block) * block;
    ring.rx_frames = whole(ring_frames);
    ring.tx_frames = whole(ring_frames / 8);
    ring
}

impl OpenIo for AfPacket {
    const KIND: IoKind = IoKind::AfPacket;

    fn open_end(name: &str, mtu: u32, ring_frames: usize) -> Result<Self> {
        AfPacket::open(name, &ring_config(mtu, ring_frames))
            .with_context(|| format!("opening {name}"))
    }

    fn open_sender(name: &str, mtu: u32, ring_frames: usize) -> Result<Option<Self>> {
        let ring = ring_config(mtu, ring_frames);
        AfPacket::open_sender(name, &ring)
            .map(Some)
            .with_context(|| format!("opening a sender on {name}"))
    }
}

impl OpenIo for AfXdp {
    const KIND: IoKind = IoKind::AfXdp;

    fn open_end(name: &str, mtu: u32, _: usize) -> Result<Self> {
        let config = AfXdpConfig::for_mtu(mtu)
            .with_context(|| format!("MTU {mtu} is over what one AF_XDP frame holds"))?;
        AfXdp::open(name, &config).with_context(|| format!("opening {name}"))
    }

    fn open_sender(_: &str, _: u32, _: usize) -> Result<Option<Self>> {
        // One AF_XDP socket per queue: its two rings stay with one thread.
        Ok(None)
    }
}

/// The wait strategy `up` gives the engine when none is asked for: `auto`, asleep on its
/// sockets until a frame or the measured wake-up latency before a release, then spinning (see
/// `rtemu_engine`'s pacer): precise under `SCHED_FIFO`, and no CPU while the lab is quiet.
pub fn default_wait() -> WaitStrategy {
    WaitStrategy::Auto
}

fn control_path(lab: &LabName) -> PathBuf {
    lab_dir(lab).join("control.sock")
}

/// The engine answered a request with an error: it refused the request (`kind`
/// [`ErrorKind::Request`]: its link, its model, the files the model names), could not take it
/// yet ([`ErrorKind::Busy`]), or failed itself ([`ErrorKind::Internal`]). The text is the
/// engine's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Refused {
    /// Whose failure it is.
    pub kind: ErrorKind,
    /// The engine's message.
    pub message: String,
}

/// Sends `request` to lab `lab`'s engine and reads its JSON reply as a `T`; a reply with an
/// `error` field becomes a [`Refused`] of the kind it gives.
pub fn ask<T: DeserializeOwned>(
    lab: &LabName,
    request: &Request,
    timeout: Duration,
) -> Result<T, ControlError> {
    let reply =
        control::request(&control_path(lab), &request.to_string(), timeout).map_err(|source| {
            ControlError::NoAnswer {
                lab: lab.clone(),
                source,
            }
        })?;
    read_reply(&reply, request)
}

/// The engine's reply `reply` to `request`, as a `T` or a [`Refused`].
fn read_reply<T: DeserializeOwned>(reply: &str, request: &Request) -> Result<T, ControlError> {
    let unread = |what: String| move |source| ControlError::Reply { what, source };
    let value: Value = serde_json::from_str(reply)
        .map_err(unread(format!("the engine's reply is not JSON: {reply:?}")))?;
    if value.get("error").is_some_and(Value::is_string) {
        let reply: ErrorReply = serde_json::from_value(value).map_err(unread(format!(
            "the engine's error reply is not one: {reply:?}"
        )))?;
        return Err(Refused {
            kind: reply.kind,
            message: reply.error,
        }
        .into());
    }
    serde_json::from_value(value).map_err(unread(format!(
        "the engine's reply is not what `{request}` answers: {reply:?}"
    )))
}

/// The counters and fidelity of every impaired link of lab `lab`.
pub fn stats(lab: &LabName) -> Result<Stats, ControlError> {
    ask(lab, &Request::Stats, Duration::from_secs(5))
}

/// Whether lab `lab`'s engine answers.
pub fn alive(lab: &LabName) -> bool {
    ask::<Ack>(lab, &Request::Ping, Duration::from_secs(1)).is_ok()
}

/// Starts the engine of lab `state` as a detached process with `opts`, waiting with `wait`,
/// and waits until it answers. The process is the hidden subcommand of `opts.program` (by
/// default the current executable),
/// `engine LAB --wait W --priority P --threads N [--cpus LIST] [--io IO] [--sizing-pps PPS]`,
/// which calls [`run`].
pub fn start(state: &State, wait: WaitStrategy, opts: &EngineOptions) -> Result<(), ControlError> {
    let dir = lab_dir(&state.lab);
    let log_path = dir.join("engine.log");
    let log = std::fs::File::create(&log_path)
        .map_err(ControlError::io(format!("creating {}", log_path.display())))?;
    let exe = match &opts.program {
        Some(program) => program.clone(),
        None => {
            std::env::current_exe().map_err(ControlError::io("finding the rtemu executable"))?
        }
    };
    let mut cmd = Command::new(exe);
    let (threads, cpus) = planned(opts, impaired(state).len());
    let priority = opts.priority.unwrap_or_default();
    cmd.args(["engine", &state.lab, "--wait", &wait.to_string()]);
    cmd.args(["--priority", &priority.to_string()]);
    cmd.args(["--threads", &threads.to_string()]);
    if !cpus.is_empty() {
        cmd.args(["--cpus", &rtemu_clock::rt::format_cpu_list(&cpus)]);
    }
    if let Some(io) = opts.io {
        cmd.args(["--io", io.as_str()]);
    }
    if let Some(pps) = opts.sizing_pps {
        cmd.args(["--sizing-pps", &pps.to_string()]);
    }
    cmd.stdin(Stdio::null())
        .stdout(
            log.try_clone()
                .map_err(ControlError::io("opening the engine log"))?,
        )
        .stderr(log);
    // Its own process group: a Ctrl-C at the terminal that ran `up` spares it.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd
        .spawn()
        .map_err(ControlError::io("starting the engine process"))?;
    let started = Instant::now();
    // The wait follows the work: a lab of many impaired links takes its engine longer.
    let timeout = START_TIMEOUT + START_PER_LINK * impaired(state).len() as u32;
    loop {
        if alive(&state.lab) {
            // Not waited for: the engine outlives `up`, and init reaps it at the end.
            std::mem::forget(child);
            return Ok(());
        }
        let ended = child
            .try_wait()
            .map_err(ControlError::io("watching the engine process"))?;
        if let Some(status) = ended {
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            let log = log.trim().to_owned();
            return Err(ControlError::EngineExited { status, log });
        }
        if started.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            return Err(ControlError::EngineSilent(timeout.as_secs()));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Asks lab `lab`'s engine to stop and returns its final report; `None` when it does not
/// answer (not running, or hung: `down` ends it with the lab's processes).
pub fn stop(lab: &LabName) -> Option<FinalReport> {
    if !control_path(lab).exists() {
        return None;
    }
    ask(lab, &Request::Stop, Duration::from_secs(5)).ok()
}

/// The impaired links whose engine runs on this host (all of a lab on one machine): segment
/// index, segment and impairment.
pub fn impaired(state: &State) -> Vec<(usize, &Segment, &Impairment)> {
    state
        .topology
        .segments
        .iter()
        .enumerate()
        .filter_map(|(si, seg)| seg.impairment().map(|i| (si, seg, i)))
        .filter(|(si, _, _)| state.runs_engine_of(*si))
        .collect()
}

/// Switches offloads off on the ends a part holds of impaired links whose engine runs on
/// another host: the node's tunnel device, whose frames that engine copies. Its frames leave
/// with finished checksums (the copy would not keep an unfinished one, which the far node then
/// drops) and as real frames, not super-packets the engine would delay and lose as one.
pub fn far_ends_without_offloads(state: &State) -> Result<(), ControlError> {
    let Some(part) = &state.part else {
        return Ok(());
    };
    for t in &part.tunnels {
        let seg = &state.topology.segments[t.segment];
        if seg.impairment().is_none() || state.runs_engine_of(t.segment) {
            continue;
        }
        let ifname = t.ifname.clone();
        netns::run_in(&netns::named(&t.netns), move || offload::disable(&ifname))?
            .map_err(|e| ControlError::from(e).context(format!("link `{}`", seg.name)))?;
    }
    Ok(())
}

/// The stream label of one direction of a link (see [`rtemu_model::rng::link_label`]).
fn label(link: &str, way: Way) -> u64 {
    rtemu_model::rng::link_label(link, way == Way::BToA)
}

/// The model of one direction from the link's trace and `cfg` (a direction's configuration,
/// validated when it was parsed or read back).
fn direction_model(
    imp: &Impairment,
    cfg: &LinkConfig,
    label: u64,
) -> Result<Box<dyn rtemu_model::Model + Send>, BuildError> {
    let traces: Vec<TraceArg> = imp
        .trace
        .iter()
        .map(|t| {
            let path = PathBuf::from(t);
            TraceArg {
                pattern: None,
                kind: TraceKind::Auto.of(&path),
                path,
            }
        })
        .collect();
    let opts = TraceOptions {
        seed: DEFAULT_SEED,
        // Real time cannot wait for the disk: a missing record passes, counted.
        underrun: UnderrunPolicy::Pass,
        end: EndPolicy::Loop,
        interpolation: Interpolation::Step,
    };
    // A lab's frames are Ethernet: every flow pattern reads.
    build_model(&opts, cfg, &traces, label).map(|a| a.model)
}

/// Builds each impaired link direction's model as the engine will, for
/// [`rtemu_topo::topology::Topology::load_checked`]: `up` and `graph FILE` then refuse a table,
/// trace or model that cannot be built before anything is created, without root.
pub struct BuildModels;

impl LinkCheck for BuildModels {
    fn direction(
        &self,
        link: &str,
        imp: &Impairment,
        netem: Option<&LinkConfig>,
        backwards: bool,
    ) -> std::result::Result<(), LinkCheckError> {
        // A trace that is a pipe is read once, by the engine: opening it here would wait for a
        // writer, and reading it would take the engine's records.
        let is_pipe = |t: &String| {
            use std::os::unix::fs::FileTypeExt as _;
            std::fs::metadata(t).is_ok_and(|m| m.file_type().is_fifo())
        };
        if imp.trace.as_ref().is_some_and(is_pipe) {
            return Ok(());
        }
        let way = if backwards { Way::BToA } else { Way::AToB };
        let cfg = netem.cloned().unwrap_or_else(|| imp.config_for(backwards));
        direction_model(imp, &cfg, label(link, way))
            .map(drop)
            .map_err(|e| LinkCheckError {
                culprit: match e {
                    BuildError::Trace { .. } | BuildError::TraceModel { .. } => Culprit::Trace,
                    BuildError::Model(_) => Culprit::Netem,
                },
                // The error and its causes on one line.
                message: format!("{:#}", anyhow::Error::new(e)),
            })
    }
}

fn resolution(imp: &Impairment, cfg: &LinkConfig) -> Resolution {
    if imp.resolution_modelled {
        Resolution::Model
    } else {
        Resolution::Pass {
            delay_ns: cfg.delay.0,
        }
    }
}

/// Each direction's number of frame buffers, by link name and way.
type Pools = std::collections::HashMap<(String, Way), usize>;

/// The netem text of the model each direction runs now (`None`: a trace alone decides), by
/// link name and way: written by `set` and by the schedule when they hand a direction a model,
/// read by `stats`. Neither is on the packet path.
#[derive(Debug, Clone)]
struct InForce(Arc<Mutex<Texts>>);

/// Netem texts by link name and way.
type Texts = std::collections::HashMap<(String, Way), Option<String>>;

impl InForce {
    /// The topology's text of every impaired direction of `state`.
    fn of(state: &State) -> InForce {
        let texts = impaired(state)
            .into_iter()
            .flat_map(|(_, seg, imp)| {
                [Way::AToB, Way::BToA].map(|way| {
                    let text = imp.netem_for(way == Way::BToA).map(|n| n.text().to_owned());
                    ((seg.name.clone(), way), text)
                })
            })
            .collect();
        InForce(Arc::new(Mutex::new(texts)))
    }

    fn set(&self, link: &str, way: Way, text: Option<String>) {
        let mut texts = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        texts.insert((link.to_owned(), way), text);
    }

    fn get(&self, link: &str, way: Way) -> Option<String> {
        let texts = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        texts.get(&(link.to_owned(), way)).cloned().flatten()
    }
}

/// The frames a rate queue of `cfg` may hold at once (none without a rate), counting frames
/// of 64 bytes for its byte and time limits.
fn queue_frames(cfg: &LinkConfig) -> usize {
    usize::try_from(cfg.queue_packets(64)).unwrap_or(usize::MAX)
}

/// A new model of `cfg` for one direction, ready to swap in. A rate queue longer than the
/// direction's `pool` of buffers is refused: its frames would be dropped as `pool-exhausted`,
/// not by the queue the user asked for.
fn swap(imp: &Impairment, cfg: &LinkConfig, link: &str, way: Way, pool: usize) -> Result<Swap> {
    let model = direction_model(imp, cfg, label(link, way))?;
    if queue_frames(cfg) > pool {
        bail!(
            "link {link} ({}): a queue of {} frames needs as many buffers, and this direction \
             has {pool}, sized when the lab came up; give the link that limit in the topology \
             file (a `schedule` entry is enough) so `up` sizes its buffers for it",
            way.as_str(),
            queue_frames(cfg)
        );
    }
    Ok(Swap {
        model,
        resolution: resolution(imp, cfg),
    })
}

/// One direction's model and buffers: enough for `sizing_pps` packets/s over its longest delay.
fn direction_config(
    imp: &Impairment,
    link: &str,
    way: Way,
    mtu: u32,
    sizing_pps: u64,
    floors: Floors,
) -> Result<DirectionConfig> {
    let cfg = imp.config_for(way == Way::BToA);
    let model = direction_model(imp, &cfg, label(link, way))?;
    let delay = if imp.trace.is_some() {
        TRACE_SIZING_DELAY_NS
    } else {
        cfg.delay.0 + 4 * cfg.jitter.0
    };
    // The longest rate queue and wait for a slot this direction will have, its schedule
    // included: a ready copy keeps its buffer until its slot starts.
    let (mut queue, mut slot_wait) = (queue_frames(&cfg), cfg.slot_wait_ns());
    for change in imp.schedule.iter().filter(|c| c.ways.includes(way)) {
        queue = queue.max(queue_frames(change.netem.config()));
        slot_wait = slot_wait.max(change.netem.config().slot_wait_ns());
    }
    let horizon = delay.saturating_add(slot_wait);
    Ok(DirectionConfig {
        model,
        resolution: resolution(imp, &cfg),
        // The frames in flight over the delay and the wait for a slot, plus a full rate queue;
        // at least the link's floor, so a model swapped in later (`link set`) with a longer
        // delay still finds buffers.
        pool_frames: (rtemu_engine::pool::frames_for(sizing_pps, horizon, 64) + queue)
            .clamp(floors.pool_frames, MAX_POOL),
        slot_size: mtu as usize + 18,
        late_after_ns: LATE_AFTER_NS,
    })
}

/// Opens the engine's two interfaces of one link (in the lab's namespace, which this thread is
/// in) with `Io` after switching offloads off on them and on the nodes' ends.
fn open_link<Io: OpenIo>(
    state: &State,
    si: usize,
    seg: &Segment,
    ring_frames: usize,
) -> Result<(Io, Io, u32)> {
    let mtu = seg.mtu.unwrap_or(1500);
    let ends = engine_ends(si);
    for (m, end) in seg.members.iter().zip(&ends) {
        offload::disable(end)?;
        let node = &state.topology.nodes[m.node].name;
        // A node on another host reaches this end through a tunnel: its host's part switched
        // them off there (`far_ends_without_offloads`).
        let Some((_, ns)) = state.nodes.iter().find(|(n, _)| n == node) else {
            continue;
        };
        let ifname = m.ifname.clone();
        netns::run_in(&netns::named(ns), move || offload::disable(&ifname))??;
    }
    Ok((
        Io::open_end(&ends[0], mtu, ring_frames)?,
        Io::open_end(&ends[1], mtu, ring_frames)?,
        mtu,
    ))
}

/// Opens every impaired link of `state` with `Io` and starts the engine on them, buffers sized
/// for `sizing_pps`; returns it with each direction's number of buffers.
fn spawn_links<Io: OpenIo>(
    state: &State,
    config: EngineConfig,
    sizing_pps: u64,
) -> Result<(EngineHandle, Pools)> {
    let mut links = Vec::new();
    // Each direction's buffers, which bound the rate queue a later model may have.
    let mut pools = Pools::new();
    let impaired = impaired(state);
    // More threads than links: each link's directions get a thread each, sending through
    // send-only ends.
    let split = config.threads > impaired.len();
    let floors = Floors::for_links(impaired.len());
    let opened = open_links::<Io>(state, &impaired, split, floors.ring_frames)?;
    for ((_, seg, imp), (a, b, mtu, senders)) in impaired.into_iter().zip(opened) {
        let a_to_b = direction_config(imp, &seg.name, Way::AToB, mtu, sizing_pps, floors)
            .with_context(|| format!("link `{}`", seg.name))?;
        let b_to_a = direction_config(imp, &seg.name, Way::BToA, mtu, sizing_pps, floors)
            .with_context(|| format!("link `{}`", seg.name))?;
        pools.insert((seg.name.clone(), Way::AToB), a_to_b.pool_frames);
        pools.insert((seg.name.clone(), Way::BToA), b_to_a.pool_frames);
        links.push(LinkSpec {
            name: seg.name.clone(),
            a,
            b,
            a_to_b,
            b_to_a,
            senders,
        });
    }
    Ok((rtemu_engine::spawn(config, links)?, pools))
}

/// Threads that open impaired links at once. Setting up a ring waits for an RCU grace period
/// (the kernel's `packet_set_ring` calls `synchronize_net`), tens of milliseconds on a busy
/// machine; concurrent waits share grace periods, so 200 links open in a fraction of the 20 s
/// they took one after another.
const OPENERS: usize = 32;

/// One impaired link's I/O: its two ends, its MTU and, when its directions run on two
/// threads, send-only ends.
type OpenedLink<Io> = (Io, Io, u32, Option<(Io, Io)>);

/// Opens every link of `impaired` (in the lab's namespace, which this thread is in and the
/// openers inherit) on up to [`OPENERS`] threads; the links in order, or the first failure.
fn open_links<Io: OpenIo>(
    state: &State,
    impaired: &[(usize, &Segment, &Impairment)],
    split: bool,
    ring_frames: usize,
) -> Result<Vec<OpenedLink<Io>>> {
    let open = |si: usize, seg: &Segment| -> Result<OpenedLink<Io>> {
        let (a, b, mtu) = open_link::<Io>(state, si, seg, ring_frames)?;
        let senders = if split {
            let ends = engine_ends(si);
            match (
                Io::open_sender(&ends[0], mtu, ring_frames)?,
                Io::open_sender(&ends[1], mtu, ring_frames)?,
            ) {
                (Some(a), Some(b)) => Some((a, b)),
                _ => None,
            }
        } else {
            None
        };
        Ok((a, b, mtu, senders))
    };
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let slots: Vec<Mutex<Option<Result<OpenedLink<Io>>>>> =
        impaired.iter().map(|_| Mutex::new(None)).collect();
    let work = || {
        // After a failure the others stop taking links: `up` fails and cleans up anyway.
        while !failed.load(Ordering::Relaxed) {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(&(si, seg, _)) = impaired.get(i) else {
                break;
            };
            let opened = open(si, seg);
            failed.fetch_or(opened.is_err(), Ordering::Relaxed);
            *slots[i].lock().unwrap_or_else(PoisonError::into_inner) = Some(opened);
        }
    };
    std::thread::scope(|scope| {
        // A machine out of threads gets fewer openers, or none: then this thread opens them.
        let started = (0..OPENERS.min(impaired.len()))
            .filter(|_| rtemu_sys::thread::spawn_scoped(scope, "rtemu-opener", work).is_ok())
            .count();
        if started == 0 {
            work();
        }
    });
    // Links are taken in order, so every link before a failed one was opened or failed too:
    // the first failure comes before the first link never taken.
    slots
        .into_iter()
        .map_while(|slot| slot.into_inner().unwrap_or_else(PoisonError::into_inner))
        .collect()
}

/// Starts the engine with `io`; AF_XDP that cannot be set up is said once and replaced by
/// `AF_PACKET`. Returns the engine, its buffers per direction and the I/O it runs on.
fn spawn_engine(
    state: &State,
    config: EngineConfig,
    io: IoKind,
    sizing_pps: u64,
) -> Result<(EngineHandle, Pools, IoKind)> {
    if io == IoKind::AfXdp {
        match spawn_links::<AfXdp>(state, config.clone(), sizing_pps) {
            Ok((handle, pools)) => return Ok((handle, pools, IoKind::AfXdp)),
            Err(e) => eprintln!("AF_XDP cannot be set up, using AF_PACKET: {e:#}"),
        }
    }
    let (handle, pools) = spawn_links::<AfPacket>(state, config, sizing_pps)?;
    Ok((handle, pools, AfPacket::KIND))
}

/// `rtemu engine LAB`: the engine process. Its progress goes to standard error, which
/// [`start`] points at the lab's `engine.log`.
pub fn run(args: &RunOptions) -> Result<()> {
    let state = State::load(&args.lab)
        .with_context(|| format!("reading the state of lab `{}`", args.lab))?
        .ok_or_else(|| anyhow!("no lab `{}` is running", args.lab))?;
    let home = netns::named(&lab_netns(&state.lab));
    netns::enter(&home)?;
    // Only the release threads run in real time: the control server, collector and scheduler
    // (this thread and those it starts) run as normal programs, whatever class the process
    // that started the engine had.
    if rtemu_clock::rt::current_policy().is_ok_and(|p| p != rtemu_clock::rt::Policy::Other) {
        rtemu_clock::rt::set_other().context("leaving the real-time class `up` ran in")?;
    }
    let config = EngineConfig {
        wait: args.wait,
        threads: args.threads,
        rt: RtConfig {
            cpus: args.cpus.clone(),
            fifo_priority: args.priority.fifo(),
            ..RtConfig::default()
        },
        ..EngineConfig::default()
    };
    let io = args.io.unwrap_or(IoKind::DEFAULT);
    let (handle, pools, io) = spawn_engine(&state, config, io, args.sizing_pps)?;
    // Every scheduled model is built now, so a bad one fails `up`, not the run.
    let start = Instant::now();
    let mut steps = Vec::new();
    for (_, seg, imp) in impaired(&state) {
        for change in &imp.schedule {
            for way in [Way::AToB, Way::BToA] {
                if change.ways.includes(way) {
                    let pool = pools[&(seg.name.clone(), way)];
                    let swap = swap(imp, change.netem.config(), &seg.name, way, pool)
                        .with_context(|| format!("link `{}`: schedule", seg.name))?;
                    steps.push(Step {
                        due: start + Duration::from_nanos(change.at_ns),
                        link: seg.name.clone(),
                        way,
                        swap,
                        netem: change.netem.text().to_owned(),
                    });
                }
            }
        }
    }
    // The topology's steps, then those of `schedule` requests; dropped when this function
    // returns, which ends the schedule.
    let (schedule, scheduled) = std::sync::mpsc::channel::<Step>();
    for step in steps {
        schedule.send(step).expect("the receiver is here");
    }
    let steerer = handle.steerer();
    let in_force = InForce::of(&state);
    let scheduled_in_force = in_force.clone();
    std::thread::Builder::new()
        .name("rtemu-schedule".into())
        .spawn(move || run_schedule(&steerer, &scheduled_in_force, start, &scheduled))
        .context("starting the schedule thread")?;
    let term = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, Arc::clone(&term)).context("installing signals")?;
    }
    let server =
        control::Server::bind(&control_path(&state.lab)).context("creating the control socket")?;
    eprintln!(
        "engine of lab {} running ({} impaired links, wait {}, io {})",
        state.lab,
        impaired(&state).len(),
        args.wait,
        io.as_str()
    );
    for t in handle.threads() {
        eprintln!("  {}", EngineThread::from(&t));
    }
    for n in handle.notices() {
        eprintln!("  {n}");
    }
    let mut handle = Some(handle);
    let mut final_report = None;
    let mut polls = 0u32;
    server.serve(
        Duration::from_millis(20),
        || {
            // Twice a second: a lab taken down while this engine started (after `down` had
            // looked for its processes) must not keep it running.
            polls = polls.wrapping_add(1);
            let orphaned = polls % 25 == 0 && !netns::still_in(&home);
            if orphaned {
                eprintln!("lab {} is gone: the engine stops", state.lab);
            }
            orphaned || term.load(Ordering::Relaxed)
        },
        |req| match handle
            .as_ref()
            .map(|h| serve(&state, &pools, &in_force, io, h, &schedule, req))
        {
            Some(Ok(Some(reply))) => (reply, After::Continue),
            Some(Ok(None)) => {
                let report = finish(&state, &pools, &in_force, handle.take().expect("running"));
                let reply = to_json(&report);
                final_report = Some(report);
                (reply, After::Stop)
            }
            Some(Err(Failure { kind, error })) => (
                to_json(&ErrorReply {
                    error: format!("{error:#}"),
                    kind,
                }),
                After::Continue,
            ),
            None => unreachable!("serving ends when the engine stops"),
        },
    )?;
    if let Some(h) = handle.take() {
        // Ended by a signal: the report is written all the same.
        final_report = Some(finish(&state, &pools, &in_force, h));
    }
    if let Some(r) = final_report {
        eprintln!("engine of lab {} stopped: {}", state.lab, to_json(&r));
    }
    Ok(())
}

/// A change of one direction's model, due at a time.
struct Step {
    due: Instant,
    link: String,
    way: Way,
    swap: Swap,
    /// The netem text the model was built from.
    netem: String,
}

/// Applies the changes `steps` brings, each at its time (in order of time, whenever it came),
/// until the sender is dropped, noting each model's text in `in_force`. `start` is when the
/// engine started, for the log.
fn run_schedule(
    steerer: &rtemu_engine::Steerer,
    in_force: &InForce,
    start: Instant,
    steps: &std::sync::mpsc::Receiver<Step>,
) {
    use std::sync::mpsc::RecvTimeoutError;
    let mut pending: Vec<Step> = Vec::new();
    loop {
        // The earliest step last.
        pending.sort_by_key(|s| std::cmp::Reverse(s.due));
        let next = match pending.last() {
            Some(s) => steps.recv_timeout(s.due.saturating_duration_since(Instant::now())),
            None => steps.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match next {
            Ok(step) => pending.push(step),
            Err(RecvTimeoutError::Disconnected) => return,
            Err(RecvTimeoutError::Timeout) => {
                let Step {
                    link,
                    way,
                    swap,
                    netem,
                    ..
                } = pending.pop().expect("a step was due");
                if let Err(e) = steerer.set_model_after_pending(&link, way, swap) {
                    eprintln!("schedule: link {link} ({}): {e}", way.as_str());
                    return;
                }
                in_force.set(&link, way, Some(netem));
                eprintln!(
                    "schedule: link {link} ({}) changed at {:.3} s",
                    way.as_str(),
                    start.elapsed().as_secs_f64()
                );
            }
        }
    }
}

/// The netem parameters of a `set` or `schedule` request: the user's text, read (and
/// validated, [`LinkConfig::validate`]) here once for every direction it changes.
fn parse_request(text: &str) -> Result<LinkConfig> {
    netem::parse(text).with_context(|| format!("netem {}", rtemu_sys::terminal::quoted(text)))
}

/// A reply as one line of JSON.
fn to_json<T: serde::Serialize>(reply: &T) -> String {
    serde_json::to_string(reply).expect("replies serialise")
}

/// A control request that failed, and whose failure it is.
#[derive(Debug)]
struct Failure {
    kind: ErrorKind,
    error: anyhow::Error,
}

impl Failure {
    /// The request's failure.
    fn request(error: impl Into<anyhow::Error>) -> Failure {
        Failure {
            kind: ErrorKind::Request,
            error: error.into(),
        }
    }

    /// The engine's own failure.
    fn internal(error: impl Into<anyhow::Error>) -> Failure {
        Failure {
            kind: ErrorKind::Internal,
            error: error.into(),
        }
    }

    /// A failure of the running engine to take a change: the request's when it names no link
    /// of the engine, busy when the direction's last change is still pending, else the
    /// engine's.
    fn steering(error: EngineError) -> Failure {
        let kind = match error {
            EngineError::NoSuchLink(_) => ErrorKind::Request,
            EngineError::ChangePending { .. } => ErrorKind::Busy,
            _ => ErrorKind::Internal,
        };
        Failure {
            kind,
            error: error.into(),
        }
    }
}

/// Answers one control request; `Ok(None)` for `stop`.
fn serve(
    state: &State,
    pools: &Pools,
    in_force: &InForce,
    io: IoKind,
    h: &EngineHandle,
    schedule: &std::sync::mpsc::Sender<Step>,
    req: &str,
) -> Result<Option<String>, Failure> {
    Ok(Some(
        match req.parse::<Request>().map_err(Failure::request)? {
            Request::Ping => to_json(&Ack::OK),
            Request::Stats => to_json(&Stats {
                monotonic_ns: rtemu_clock::Instant::now().as_nanos(),
                directions: directions(state, pools, in_force, &h.snapshot()),
                io: io.as_str().to_owned(),
                lab: state.lab.clone(),
                pid: std::process::id(),
                process_cpu_ns: process_cpu_ns(),
                threads: h.threads().iter().map(EngineThread::from).collect(),
            }),
            Request::Stop => return Ok(None),
            Request::Cut { link, down } => {
                h.steerer()
                    .set_cut(&link, down)
                    .map_err(Failure::steering)?;
                to_json(&Ack::OK)
            }
            change @ Request::Schedule { .. } => {
                let steps =
                    scheduled(state, pools, Instant::now(), &change).map_err(Failure::request)?;
                queue(schedule, steps).map_err(Failure::internal)?;
                to_json(&Ack::OK)
            }
            Request::Batch(changes) => {
                // One instant for all: each change's delay counts from when the batch came.
                let now = Instant::now();
                let mut steps = Vec::new();
                for (i, change) in changes.iter().enumerate() {
                    steps.extend(
                        scheduled(state, pools, now, change)
                            .with_context(|| format!("change {} of the batch", i + 1))
                            .map_err(Failure::request)?,
                    );
                }
                queue(schedule, steps).map_err(Failure::internal)?;
                to_json(&Ack::OK)
            }
            Request::Set { link, ways, netem } => {
                let (seg, imp) = find_impaired(state, &link).map_err(Failure::request)?;
                let cfg = parse_request(&netem).map_err(Failure::request)?;
                for &way in ways.ways() {
                    let pool = pools[&(seg.name.clone(), way)];
                    let model = swap(imp, &cfg, &seg.name, way, pool).map_err(Failure::request)?;
                    h.steerer()
                        .set_model(&link, way, model)
                        .map_err(Failure::steering)?;
                    in_force.set(&link, way, Some(netem.clone()));
                }
                to_json(&Ack::OK)
            }
        },
    ))
}

/// Impaired link `link` of lab `state`: its segment and impairment.
fn find_impaired<'a>(state: &'a State, link: &str) -> Result<(&'a Segment, &'a Impairment)> {
    impaired(state)
        .into_iter()
        .find(|(_, s, _)| s.name == link)
        .map(|(_, seg, imp)| (seg, imp))
        .with_context(|| format!("lab `{}` has no impaired link `{link}`", state.lab))
}

/// The steps of the `schedule` request `req` received at `now`, every direction's model built
/// (a bad one fails the whole request, which then changes nothing).
fn scheduled(state: &State, pools: &Pools, now: Instant, req: &Request) -> Result<Vec<Step>> {
    let Request::Schedule {
        link,
        ways,
        after_ns,
        netem,
    } = req
    else {
        bail!("only `schedule` requests are queued");
    };
    let (seg, imp) = find_impaired(state, link)?;
    let cfg = parse_request(netem)?;
    let due = now
        .checked_add(Duration::from_nanos(*after_ns))
        .context("`schedule`: that is too far ahead")?;
    let mut steps = Vec::new();
    for &way in ways.ways() {
        let pool = pools[&(seg.name.clone(), way)];
        steps.push(Step {
            due,
            link: link.clone(),
            way,
            swap: swap(imp, &cfg, &seg.name, way, pool)?,
            netem: netem.clone(),
        });
    }
    Ok(steps)
}

/// Hands `steps` to the schedule thread.
fn queue(schedule: &std::sync::mpsc::Sender<Step>, steps: Vec<Step>) -> Result<()> {
    for step in steps {
        schedule
            .send(step)
            .map_err(|_| anyhow!("the schedule has ended"))?;
    }
    Ok(())
}

/// CPU time this process used so far (user + system, all threads), ns; `None` if unreadable.
fn process_cpu_ns() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces) start at the state, field 3;
    // utime and stime are fields 14 and 15, in clock ticks of 1/100 s (USER_HZ on Linux).
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((utime + stime) * 10_000_000)
}

/// Stops the engine, writes `fidelity.json` into the lab's directory and returns the report.
fn finish(state: &State, pools: &Pools, in_force: &InForce, h: EngineHandle) -> FinalReport {
    let report = match h.stop() {
        Ok(r) => FinalReport::Done(Done {
            cpu_ns: r.cpu_ns,
            directions: directions(state, pools, in_force, &r.directions),
            lab: state.lab.clone(),
            notices: r.notices,
            threads: r.threads.iter().map(EngineThread::from).collect(),
            wall_ns: r.wall_ns,
        }),
        Err(e) => FinalReport::Failed {
            error: e.to_string(),
            lab: state.lab.clone(),
        },
    };
    let path = lab_dir(&state.lab).join("fidelity.json");
    // Written whole and renamed into place: `down` reads it the moment the engine exits.
    if let Err(e) = crate::message::save_final_report(&report, &path) {
        eprintln!("writing {}: {e:#}", path.display());
    }
    report
}

/// The directions of `ds`, with the nodes they run between, their frame buffers and the text
/// of the model in force.
fn directions(
    state: &State,
    pools: &Pools,
    in_force: &InForce,
    ds: &[DirectionReport],
) -> Vec<Direction> {
    let index = state.topology.segment_indices();
    ds.iter()
        .map(|d| {
            let si = index.get(d.link.as_str()).copied();
            let seg = si.map(|i| &state.topology.segments[i]);
            let node = |i: usize| {
                seg.map(|s| state.topology.nodes[s.members[i].node].name.clone())
                    .unwrap_or_default()
            };
            let (from, to) = match d.way {
                Way::AToB => (node(0), node(1)),
                Way::BToA => (node(1), node(0)),
            };
            let c = &d.counters;
            Direction {
                buffers: pools.get(&(d.link.clone(), d.way)).copied(),
                conserved: c.conserved(),
                corrupted: c.corrupted,
                cut: d.cut,
                delivered: c.delivered,
                delivered_bytes: c.delivered_bytes,
                dir: d.way.as_str().to_owned(),
                dropped: DropKind::ALL
                    .iter()
                    .map(|k| (k.as_str().to_owned(), c.dropped(*k)))
                    .collect(),
                duplicates: c.duplicates,
                fidelity: (&d.fidelity).into(),
                from,
                in_flight: c.in_flight,
                kernel_drops: d.kernel_drops,
                link: d.link.clone(),
                marked: c.marked,
                netem: in_force.get(&d.link, d.way),
                received: c.received,
                received_bytes: c.received_bytes,
                resolution_passed: c.resolution_passed,
                thread: Some(d.thread),
                to,
                trace_underruns: c.trace_underruns,
                tx_busy: c.tx_busy,
                underlay: si.and_then(|i| Underlay::of(state, i)),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtemu_model::{FlowKey, PacketMeta};
    use rtemu_topo::topology::Topology;

    #[test]
    fn an_error_reply_says_whose_failure_it_is_and_the_reader_keeps_it() {
        let refused = |reply: &str| match read_reply::<Ack>(reply, &Request::Ping).unwrap_err() {
            ControlError::Refused(refused) => refused,
            other => panic!("not a refusal: {other:?}"),
        };
        for (failure, kind) in [
            (
                Failure::steering(EngineError::NoSuchLink("x".into())),
                ErrorKind::Request,
            ),
            (
                Failure::steering(EngineError::ChangePending {
                    link: "x".into(),
                    way: "a-b",
                }),
                ErrorKind::Busy,
            ),
            (Failure::steering(EngineError::Stopped), ErrorKind::Internal),
            (Failure::request(anyhow!("netem \"x\"")), ErrorKind::Request),
            (
                Failure::internal(anyhow!("the schedule has ended")),
                ErrorKind::Internal,
            ),
        ] {
            assert_eq!(failure.kind, kind);
            let reply = to_json(&ErrorReply {
                error: format!("{:#}", failure.error),
                kind: failure.kind,
            });
            let back = refused(&reply);
            assert_eq!((back.kind, back.message), (kind, failure.error.to_string()));
        }
        assert_eq!(
            to_json(&ErrorReply {
                error: "e".into(),
                kind: ErrorKind::Request
            }),
            r#"{"error":"e","kind":"request"}"#
        );
        // An engine that does not say is taken to have failed itself.
        assert_eq!(refused(r#"{"error":"e"}"#).kind, ErrorKind::Internal);
        assert!(read_reply::<Ack>(r#"{"ok":true}"#, &Request::Ping).is_ok());
    }

    #[test]
    fn links_get_the_full_floors_until_their_share_of_the_budget_is_smaller() {
        let full = Floors {
            ring_frames: RING_FRAMES,
            pool_frames: MIN_POOL,
        };
        assert_eq!(Floors::for_links(0), full);
        assert_eq!(Floors::for_links(1), full);
        assert_eq!(Floors::for_links(30), full);
        // Past the budget the floors shrink with the links, never below the least.
        let (f200, f1000) = (Floors::for_links(200), Floors::for_links(1000));
        assert!(f200.ring_frames < RING_FRAMES && f200.pool_frames < MIN_POOL);
        assert!(f1000.ring_frames < f200.ring_frames);
        assert_eq!(Floors::for_links(100_000).ring_frames, LEAST_FLOOR);
        assert_eq!(Floors::for_links(100_000).pool_frames, LEAST_FLOOR);
        // What 200 links lock at their floors stays within the budget (2 KiB ring frames,
        // 1536-byte buffers): rings at both ends, an eighth for sending, both directions.
        let locked = |f: Floors, links: usize| {
            links * (2 * (f.ring_frames + f.ring_frames / 8) * 2048 + 2 * f.pool_frames * 1536)
        };
        assert!(locked(f200, 200) <= FLOOR_BUDGET, "{}", locked(f200, 200));
        assert!(locked(Floors::for_links(35), 35) <= FLOOR_BUDGET);
    }

    #[test]
    fn rings_are_whole_blocks_with_an_eighth_for_sending() {
        let ring = ring_config(1500, 4096);
        assert_eq!(
            (ring.frame_size, ring.rx_frames, ring.tx_frames),
            (2048, 4096, 512)
        );
        // 300 frames of 2 KiB: rounded up to whole 128 KiB blocks of 64 frames.
        let ring = ring_config(1500, 300);
        assert_eq!((ring.rx_frames, ring.tx_frames), (320, 64));
        // Jumbo frames: 16 KiB each, 8 to a block.
        let ring = ring_config(9000, 256);
        assert_eq!(
            (ring.frame_size, ring.rx_frames, ring.tx_frames),
            (16384, 256, 32)
        );
    }

    /// A copy keeps its buffer while it waits for its slot: a direction's buffers cover the
    /// frames in flight over its delay and its longest slot wait, a scheduled slot's included.
    #[test]
    fn buffers_hold_the_copies_waiting_for_their_slot() {
        let dir = std::env::temp_dir().join(format!("rtemu-control-slot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("slots.toml");
        std::fs::write(
            &file,
            r#"lab = "slots"
[nodes.a]
[nodes.b]
[[links]]
name = "ab"
endpoints = ["a", "b"]
netem_ab = "delay 10ms slot 90ms 100ms packets 4"
netem_ba = "delay 10ms"
schedule = [{ at = "1s", dir = "b-a", netem = "slot distribution normal 20ms 5ms" }]
"#,
        )
        .unwrap();
        let topology = Topology::load_checked(&file, &BuildModels).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let imp = topology.segments[0].impairment().unwrap();
        let floors = Floors::for_links(1);
        let pool = |way| {
            direction_config(imp, "ab", way, 1500, SIZING_PPS, floors)
                .unwrap()
                .pool_frames
        };
        // 100 kpps over 10 ms of delay and up to 100 ms waiting for a slot; over 10 ms and a
        // scheduled normal gap of 20 ms and four spreads.
        assert_eq!(pool(Way::AToB), 2 * 100_000 * 110 / 1000 + 64);
        assert_eq!(pool(Way::BToA), 2 * 100_000 * 50 / 1000 + 64);
        // The delay alone asks for 2,064, less than the floor.
        assert_eq!(
            rtemu_engine::pool::frames_for(SIZING_PPS, 10_000_000, 64).max(floors.pool_frames),
            MIN_POOL
        );
    }

    /// A lab whose link has both directions' parameters, one direction's own, and scheduled
    /// changes; with the text of each direction and change, as written.
    const FILE: &str = r#"lab = "eng"
[nodes.a]
[nodes.b]
[[links]]
name = "ab"
endpoints = ["a", "b"]
netem = "delay 10ms 3ms 25% distribution normal loss 5% 25% duplicate 2% reorder 10% gap 2"
netem_ba = "delay 1ms rate 2mbit limit 40 corrupt 1% seed 11"
schedule = [
  { at = "1s", dir = "b-a", netem = "delay 4ms 4ms distribution pareto ber 1e-5 ordered" },
  { at = "2s", netem = "loss gemodel 3% 20% rate 5mbit 20 limit 10" },
]
"#;
    const BOTH: &str =
        "delay 10ms 3ms 25% distribution normal loss 5% 25% duplicate 2% reorder 10% gap 2";
    const BA: &str = "delay 1ms rate 2mbit limit 40 corrupt 1% seed 11";
    const LATER: [&str; 2] = [
        "delay 4ms 4ms distribution pareto ber 1e-5 ordered",
        "loss gemodel 3% 20% rate 5mbit 20 limit 10",
    ];

    /// The fates `model` gives 2000 packets of varied sizes arriving 200 µs apart.
    fn fates(mut model: Box<dyn rtemu_model::Model + Send>) -> Vec<rtemu_model::Fate> {
        let flow = FlowKey {
            src: [10, 0, 0, 1].into(),
            dst: [10, 0, 0, 2].into(),
            src_port: 1,
            dst_port: 2,
            protocol: 17,
        };
        (0..2000u64)
            .map(|seq| {
                model.decide(&PacketMeta {
                    len: 64 + (seq * 97 % 1400) as u32,
                    flow,
                    arrival_ns: seq * 200_000,
                    seq,
                    ecn: Default::default(),
                })
            })
            .collect()
    }

    /// The engine builds from a lab's state file the very models it builds from the file's
    /// text: for each direction and each scheduled change, the configuration read back from
    /// the state equals the text's, and their models decide every packet alike.
    #[test]
    fn models_from_a_loaded_state_are_the_files_texts_models() {
        let dir = std::env::temp_dir().join(format!("rtemu-control-typed-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("eng.toml");
        std::fs::write(&file, FILE).unwrap();
        let topology = Topology::load_checked(&file, &BuildModels);
        std::fs::remove_dir_all(&dir).unwrap();
        let state = State {
            lab: LabName::new("eng").unwrap(),
            file: file.display().to_string(),
            namespaces: Vec::new(),
            nodes: Vec::new(),
            handovers: Vec::new(),
            cgroups: Vec::new(),
            programs: None,
            complete: true,
            topology: topology.unwrap(),
            part: None,
        };
        let loaded = State::from_json(&state.to_json().unwrap(), &state.lab).unwrap();
        let [(_, seg, imp)] = impaired(&loaded)[..] else {
            panic!("one impaired link");
        };
        let mut cases = vec![(Way::AToB, imp.config_for(false), BOTH)];
        cases.push((Way::BToA, imp.config_for(true), BA));
        for (change, text) in imp.schedule.iter().zip(LATER) {
            for way in [Way::AToB, Way::BToA] {
                if change.ways.includes(way) {
                    cases.push((way, change.netem.config().clone(), text));
                }
            }
        }
        assert_eq!(cases.len(), 5);
        for (way, cfg, text) in cases {
            let parsed = netem::parse(text).unwrap();
            assert_eq!(cfg, parsed, "{text}");
            let l = label(&seg.name, way);
            let from_state = fates(direction_model(imp, &cfg, l).unwrap());
            let from_text = fates(direction_model(imp, &parsed, l).unwrap());
            assert_eq!(from_state, from_text, "{text} ({})", way.as_str());
            // Not fates every model gives.
            let ideal = fates(direction_model(imp, &LinkConfig::default(), l).unwrap());
            assert_ne!(from_state, ideal, "{text}");
        }
        // Each direction's text in force starts as the file's, and follows what it is handed.
        let in_force = InForce::of(&loaded);
        assert_eq!(in_force.get("ab", Way::AToB).as_deref(), Some(BOTH));
        assert_eq!(in_force.get("ab", Way::BToA).as_deref(), Some(BA));
        in_force.set("ab", Way::BToA, Some(LATER[0].to_owned()));
        assert_eq!(in_force.get("ab", Way::BToA).as_deref(), Some(LATER[0]));
        assert_eq!(in_force.get("ab", Way::AToB).as_deref(), Some(BOTH));
        assert_eq!(in_force.get("cd", Way::AToB), None);
    }

    /// A direction that cannot be built is refused blaming its trace (the message names the
    /// file and why) or its netem model, each message whole as `up` and `graph` print it
    /// after the file's position.
    #[test]
    fn a_direction_that_cannot_be_built_blames_its_trace_or_its_model() {
        let dir = std::env::temp_dir().join(format!("rtemu-control-blame-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (missing, table, conflict) = (
            dir.join("missing.rpl"),
            dir.join("nope.dist"),
            dir.join("ok.rplt"),
        );
        std::fs::write(&conflict, "pass 1ms\n").unwrap();
        let check = |impairment: String| {
            let text = format!(
                "lab = \"blame\"\n[nodes.a]\n[nodes.b]\n[[links]]\nname = \"ab\"\n\
                 endpoints = [\"a\", \"b\"]\n{impairment}\n"
            );
            let topology = Topology::parse("blame.toml", &text).unwrap();
            let imp = topology.segments[0].impairment().unwrap();
            BuildModels.direction("ab", imp, None, false).unwrap_err()
        };
        let errors = [
            check(format!("trace = \"{}\"", missing.display())),
            check(format!(
                "trace = \"{}\"\nnetem = \"delay 1ms\"",
                conflict.display()
            )),
            check(format!(
                "netem = \"delay 1ms 1ms tables netem distribution {}\"",
                table.display()
            )),
        ];
        std::fs::remove_dir_all(&dir).unwrap();
        let (missing, table, conflict) = (missing.display(), table.display(), conflict.display());
        let want = [
            (
                Culprit::Trace,
                format!("trace {missing}: {missing}: No such file or directory (os error 2)"),
            ),
            (
                Culprit::Trace,
                format!(
                    "trace {conflict}: the trace decides delay, loss, duplication and \
                     reordering, so the model must not set `delay` (it may set rate, limit, \
                     limit-bytes, corrupt, ber and ordered)"
                ),
            ),
            (
                Culprit::Netem,
                format!(
                    "the model: distribution {table}: cannot read {table}: No such file or \
                     directory (os error 2)"
                ),
            ),
        ];
        for (e, (culprit, message)) in errors.into_iter().zip(want) {
            assert_eq!(e, LinkCheckError { culprit, message });
        }
    }
}
