//! `rtemu-bench precision`: real time under load, measured by an independent probe.
//!
//! The probe ([`rtemu_testutil::probe`]) shares nothing with the engine's clocks: a sender in
//! node `a` writes `CLOCK_REALTIME` into each UDP datagram just before handing it to the
//! kernel, and a receiver in node `b` takes the kernel's receive stamp of each
//! (`SO_TIMESTAMPNS`, the same clock, taken when the frame the engine sent entered node `b`).
//! A datagram's error is its stamp − its send time − the link's delay: what a user of the link
//! sees, the engine's wake-ups, queues and sends included. The sender runs under `SCHED_FIFO` 1
//! (below the engine's threads, above every busy loop), so a busy loop cannot preempt it
//! between its clock read and its send.
//!
//! Parts:
//!
//! * **probe**: one `delay D` link at `R` datagrams/s, for each delay (10 ms, 1 ms), rate
//!   (2 kpps, 10 kpps) and load (idle; one busy loop per CPU outside the lab; one busy loop in
//!   node `b`, free to run anywhere, then kept off the engine's CPUs with the probe's own
//!   threads), the engine as it shipped before (`SCHED_OTHER`, `hybrid:100us`, not pinned)
//!   against today's default, alternated run by run for `--rounds` rounds. Columns: the
//!   probe's percentiles, the share within 20 and 100 µs, early datagrams; the engine's own
//!   record of the same direction (release error p50/p99, arrival lag p99); the engine's CPU
//!   (% of one core, and µs per frame).
//! * **idle**: the engine's CPU with no traffic, over `--seconds`, each engine.
//! * **links**: 1, 8, 32 and 128 `delay 10ms` links each carrying its own 1 kpps probe (idle
//!   machine), the engine with 1 and 2 release threads: the probe's percentiles over all
//!   links, and each thread's CPU.
//!
//! Every lab is taken down after its run, also when the run fails, and the busy loops end with
//! it (each also under `timeout`, so none outlives a killed benchmark by more than a minute).

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use rtemu_clock::{rt, Instant};
use rtemu_control::message::{Direction, Stats};
use rtemu_engine::netns;
use rtemu_report::text::{Align, Table};
use rtemu_testutil::probe;

use rtemu_lab::cputime::CpuTicks;
use rtemu_lab::late_wakeups::Attribution;
use rtemu_lab::tracefs::Recording;
use rtemu_topo::state::{LabName, State};
use rtemu_topo::Topology;

/// The UDP port every probe socket uses.
const PORT: u16 = 7300;

/// Options of `rtemu-bench precision`.
#[derive(Debug, Clone)]
pub struct Options {
    /// Seconds each run sends.
    pub seconds: u32,
    /// Rounds of the probe part (each runs every engine once, alternating).
    pub rounds: u32,
    /// Parts to run (`probe`, `idle`, `links`); empty: all.
    pub parts: Vec<String>,
    /// Print one JSON object per run instead of tables.
    pub json: bool,
    /// An older `rtemu` binary whose engine runs alternated with this one's.
    pub before: Option<PathBuf>,
    /// `up --engine-io` for every engine (default: each binary's own).
    pub io: Option<String>,
    /// Record the first release thread's late wake-ups in the kernel's trace.
    pub trace: bool,
}

impl Options {
    fn runs(&self, part: &str) -> bool {
        self.parts.is_empty() || self.parts.iter().any(|p| p == part)
    }
}

/// One engine under test: an `rtemu` binary and the flags its `up` gets.
#[derive(Debug, Clone)]
struct Variant {
    name: String,
    bin: PathBuf,
    flags: Vec<String>,
    /// Whether its `up` can keep the lab's programs off the engine's CPUs
    /// (`--programs-cpus`).
    cpuset: bool,
}

impl Variant {
    /// The `rtemu` built beside the benchmarks, as `up` starts its engine by default.
    fn default_engine() -> Result<Variant> {
        Ok(Variant {
            name: "default".into(),
            bin: crate::rtemu()?,
            flags: Vec::new(),
            cpuset: true,
        })
    }

    fn rtemu(&self, args: &[&str]) -> Result<std::process::Output> {
        let out = Command::new(&self.bin)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("running {} {}", self.bin.display(), args.join(" ")))?;
        if !out.status.success() {
            bail!(
                "{} {} failed: {}",
                self.bin.display(),
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(out)
    }

    fn stats(&self, lab: &str) -> Result<Stats> {
        let out = self.rtemu(&["stats", lab, "--json"])?;
        let mut stats: serde_json::Value =
            serde_json::from_slice(&out.stdout).context("reading `rtemu stats --json`")?;
        // An engine from before ECN (`--before`) counts no marks, which this benchmark does
        // not read; its directions are taken as having marked none.
        let directions = stats.get_mut("directions").and_then(|d| d.as_array_mut());
        for d in directions
            .into_iter()
            .flatten()
            .filter_map(|d| d.as_object_mut())
        {
            d.entry("marked").or_insert(0.into());
        }
        serde_json::from_value(stats).context("reading `rtemu stats --json`")
    }
}

/// The engines compared: `before` (an older `rtemu` binary, as it shipped) if given, then
/// this binary's default.
fn variants(before: Option<&Path>, io: Option<&str>) -> Result<Vec<Variant>> {
    let mut v = Vec::new();
    if let Some(bin) = before {
        v.push(Variant {
            name: format!("before ({})", bin.display()),
            bin: bin.to_owned(),
            flags: Vec::new(),
            cpuset: false,
        });
    }
    v.push(Variant::default_engine()?);
    for variant in &mut v {
        if let Some(io) = io {
            variant
                .flags
                .extend(["--engine-io".to_owned(), io.to_owned()]);
        }
    }
    Ok(v)
}

/// What runs beside the lab.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Load {
    Idle,
    /// One busy loop per CPU, outside the lab.
    Busy,
    /// One busy loop in node `b`.
    InNode,
    /// One busy loop in node `b`, the lab's programs kept off the engine's CPUs: `up
    /// --programs-cpus off-engine` (a cpuset), or `taskset` to the CPUs before the engine's for
    /// an older `rtemu` without it. The probe's sender and receiver, which stand for the
    /// programs in nodes `a` and `b`, are kept off them too.
    InNodeOffEngine,
}

impl Load {
    fn as_str(self) -> &'static str {
        match self {
            Load::Idle => "idle",
            Load::Busy => "busy loop per CPU",
            Load::InNode => "busy loop in node b",
            Load::InNodeOffEngine => "busy loop in node b, off the engine's CPU",
        }
    }
}

/// Busy loops that end when dropped (and on their own after `timeout`).
struct Busy(Vec<Child>);

impl Busy {
    fn start(load: Load, state: &State, seconds: u32) -> Result<Busy> {
        let limit = (seconds + 60).to_string();
        let spin = |cmd: &mut Command| {
            cmd.stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .context("starting a busy loop")
        };
        let mut children = Vec::new();
        match load {
            Load::Idle => {}
            Load::Busy => {
                let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
                for _ in 0..cpus {
                    children.push(spin(Command::new("timeout").args([
                        &limit,
                        "sh",
                        "-c",
                        "while :; do :; done",
                    ]))?);
                }
            }
            Load::InNode | Load::InNodeOffEngine => {
                // Off the engine by hand for a lab without a cpuset (an older `rtemu`): the
                // engine's threads sit on the last CPUs (the default), so the loop is kept on
                // CPU 0.
                let pin: &[&str] = match load {
                    Load::InNodeOffEngine if state.programs.is_none() => &["taskset", "-c", "0"],
                    _ => &[],
                };
                let argv: Vec<String> = pin
                    .iter()
                    .chain(&["timeout", &limit, "sh", "-c", "while :; do :; done"])
                    .map(|s| s.to_string())
                    .collect();
                children.push(spin(&mut rtemu_topo::lab::node_command(
                    state, "b0", &argv,
                )?)?);
            }
        }
        Ok(Busy(children))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        for c in &mut self.0 {
            // `timeout` passes the signal on to its loop.
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(c.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
            let _ = c.wait();
        }
    }
}

/// A lab taken down (with the binary that brought it up) and its file removed when dropped.
struct LabGuard<'a> {
    variant: &'a Variant,
    lab: String,
    dir: PathBuf,
}

impl Drop for LabGuard<'_> {
    fn drop(&mut self) {
        let _ = self.variant.rtemu(&["down", &self.lab]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The topology file of lab `lab`: `links` separate `delay D` links `aI — bI`, addressed
/// 10.77.I.1 and .2.
fn topology_text(lab: &str, links: usize, delay: &str) -> String {
    let mut src =
        format!("lab = \"{lab}\"\nip = \"ipv4\"\nrouting = \"none\"\nneighbours = \"static\"\n");
    for i in 0..links {
        src.push_str(&format!(
            "[nodes.a{i}]\n[nodes.b{i}]\n[[links]]\nendpoints = [\"a{i}\", \"b{i}\"]\n\
             ipv4 = \"10.77.{i}.0/30\"\nnetem = \"delay {delay}\"\n"
        ));
    }
    src
}

fn topology(lab: &str, links: usize, delay: &str) -> Result<Topology> {
    Ok(Topology::parse(
        "precision.toml",
        &topology_text(lab, links, delay),
    )?)
}

/// Opens a UDP socket bound to `addr` in node `node` of the lab `state`.
fn socket_in(state: &State, node: &str, addr: Ipv4Addr) -> Result<UdpSocket> {
    let (_, ns) = state
        .nodes
        .iter()
        .find(|(n, _)| n == node)
        .with_context(|| format!("node {node} in the lab's state"))?;
    let ns = netns::named(ns);
    netns::run_in(&ns, move || UdpSocket::bind((addr, PORT)))?
        .with_context(|| format!("binding {addr}:{PORT} in {node}"))
}

/// The a→b direction of link `i` in `stats`.
fn forward(stats: &Stats, i: usize) -> Option<&Direction> {
    let link = format!("a{i}-b{i}");
    stats
        .directions
        .iter()
        .find(|d| d.link == link && d.dir == "a-b")
}

/// One run's figures.
#[derive(Debug, Clone, Default, serde::Serialize)]
struct Run {
    part: &'static str,
    engine: String,
    load: &'static str,
    delay: String,
    links: usize,
    threads: usize,
    pps: u64,
    sent: u64,
    received: usize,
    early: u64,
    p50_us: f64,
    p99_us: f64,
    p999_us: f64,
    max_us: f64,
    within_20us: f64,
    within_100us: f64,
    /// Stretches of datagrams more than 100 µs late with one at least 1 ms late: the path
    /// stopped ([`probe::Stall`]).
    probe_stalls: usize,
    /// The late datagrams in them.
    probe_stalled: usize,
    /// The share within 100 µs of the datagrams not due in one of them.
    within_100us_outside_stalls: f64,
    engine_p50_us: f64,
    engine_p99_us: f64,
    engine_lag_p99_us: f64,
    engine_early: u64,
    cpu_percent: f64,
    cpu_us_per_frame: f64,
    thread_cpu_percent: Vec<f64>,
    policy: Vec<String>,
    /// Times a release thread stepped down to `SCHED_OTHER` during the run.
    stepped_down: u64,
    /// The engine's stalls during the run (its warm-up and the lab's set-up are not the
    /// probe's).
    stalls: u64,
    /// The engine's longest stall during the run, µs, when it was longer than every one
    /// before the run (the engine keeps only the longest of its life); `None` otherwise.
    max_stall_us: Option<f64>,
    /// The engine's longest stall before the run, µs: the bound of the run's when
    /// `max_stall_us` is `None`.
    max_stall_before_us: f64,
    /// Softirq time (the kernel's packet work, in whatever thread ran it) on each CPU over the
    /// run, % of that CPU.
    softirq_percent: Vec<f64>,
    /// Time the hypervisor took each (virtual) CPU away over the run, % of that CPU: the
    /// tails no scheduling class can prevent.
    steal_percent: Vec<f64>,
    /// The first release thread's timed wake-ups over the run and why the late ones were
    /// late, from the kernel's trace (`--trace`).
    release_wakeups: Option<Attribution>,
}

/// The goal's bound on a datagram's error, ns.
const LATE_NS: i64 = 100_000;
/// Late datagrams due at most this far apart belong to one stall, ns (more than the gap
/// between datagrams at the lowest rate probed, 2 kpps).
const STALL_JOIN_NS: i64 = 1_000_000;
/// A stretch of late datagrams whose worst is at least this late is a stall, ns (the engine
/// counts a loop turn this long as one of its own).
const STALL_NS: i64 = 1_000_000;

/// Brings up `links` links of `delay`, starts `load`, probes at `pps` per link for
/// `seconds`, and takes it all down.
#[allow(clippy::too_many_arguments)]
fn run_one(
    part: &'static str,
    variant: &Variant,
    load: Load,
    delay: &str,
    links: usize,
    pps: u64,
    seconds: u32,
    lab: &str,
    trace: bool,
) -> Result<Run> {
    let name = LabName::new(lab)?;
    let _ = variant.rtemu(&["down", lab]);
    let topo = topology(lab, links, delay)?;
    let delay_ns = topo.segments[0]
        .impairment()
        .map(|i| i.config_for(false).delay.0)
        .context("the probe's link is impaired")? as i64;
    let dir = std::env::temp_dir().join(format!("rtemu-bench-precision-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let file = dir.join("precision.toml");
    std::fs::write(&file, topology_text(lab, links, delay))
        .with_context(|| format!("writing {}", file.display()))?;
    let guard = LabGuard {
        variant,
        lab: lab.to_owned(),
        dir,
    };
    let mut up = vec!["up".to_owned(), file.display().to_string()];
    up.extend(variant.flags.iter().cloned());
    if load == Load::InNodeOffEngine && variant.cpuset {
        up.extend(["--programs-cpus".to_owned(), "off-engine".to_owned()]);
    }
    variant.rtemu(&up.iter().map(String::as_str).collect::<Vec<_>>())?;
    let state = State::load(&name)?.context("the lab's state after up")?;
    let mut senders = Vec::new();
    let mut receivers = Vec::new();
    let mut to = Vec::new();
    for i in 0..links {
        let a = Ipv4Addr::new(10, 77, i as u8, 1);
        let b = Ipv4Addr::new(10, 77, i as u8, 2);
        senders.push(socket_in(&state, &format!("a{i}"), a)?);
        let rx = socket_in(&state, &format!("b{i}"), b)?;
        probe::prepare_receiver(&rx)?;
        receivers.push(rx);
        to.push(SocketAddr::from((b, PORT)));
    }
    // Static neighbours: the first datagram needs no resolution. A short warm-up all the same.
    for (s, b) in senders.iter().zip(&to) {
        let _ = s.send_to(b"warm", b);
    }
    std::thread::sleep(Duration::from_millis(200) + Duration::from_nanos(delay_ns as u64 * 2));
    let before = variant.stats(lab)?;
    // The CPUs the probe's threads keep off, as the lab's programs do in this load.
    let engine_cpus: Vec<usize> = match load {
        Load::InNodeOffEngine => before.threads.iter().filter_map(|t| t.cpu).collect(),
        _ => Vec::new(),
    };
    let recording = match trace {
        true => Some(trace_release_thread(lab, &before)?),
        false => None,
    };
    let busy = Busy::start(load, &state, seconds)?;
    // Let the load settle onto the CPUs.
    std::thread::sleep(Duration::from_millis(300));
    let done = Arc::new(AtomicBool::new(false));
    let receiver = {
        let (done, off) = (Arc::clone(&done), engine_cpus.clone());
        std::thread::spawn(move || {
            rtemu_engine::engine::keep_off(&off);
            probe::receive(&receivers, delay_ns, &done)
        })
    };
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let ticks_before = CpuTicks::read_each(cpus)?;
    let started = Instant::now();
    let sent = std::thread::scope(|s| {
        s.spawn(|| {
            // Below the engine's threads, above every busy loop: nothing runs between the
            // sender's clock read and its send. Without the privilege it runs as it can.
            let _ = rt::set_fifo(1);
            rtemu_engine::engine::keep_off(&engine_cpus);
            probe::send(&senders, &to, pps, f64::from(seconds))
        })
        .join()
        .expect("the probe's sender does not panic")
    });
    let wall_ns = Instant::now().nanos_since(started);
    let ticks_after = CpuTicks::read_each(cpus)?;
    let per_cpu = |share: fn(CpuTicks, CpuTicks) -> f64| -> Vec<f64> {
        ticks_before
            .iter()
            .zip(&ticks_after)
            .map(|(&b, &a)| share(b, a))
            .collect()
    };
    let softirq_percent = per_cpu(|b, a| b.shares(a, 1).0);
    let steal_percent = per_cpu(|b, a| b.steal_share(a, 1));
    done.store(true, Ordering::Relaxed);
    let probe = receiver
        .join()
        .map_err(|_| anyhow::anyhow!("the receiver panicked"))?;
    let release_wakeups = recording
        .map(Recording::finish)
        .transpose()?
        .map(|t| t.attribution);
    let after = variant.stats(lab)?;
    drop(busy);
    drop(guard);
    let (mut e_p50, mut e_p99, mut lag_p99, mut e_early, mut frames) = (0u64, 0u64, 0u64, 0, 0);
    for i in 0..links {
        let d = forward(&after, i).context("the link's a→b direction in the stats")?;
        e_p50 = e_p50.max(d.fidelity.released.p50_ns);
        e_p99 = e_p99.max(d.fidelity.released.p99_ns);
        lag_p99 = lag_p99.max(d.fidelity.arrival_lag.p99_ns);
        e_early += d.fidelity.early;
        frames += d.delivered - forward(&before, i).map_or(0, |d| d.delivered);
    }
    let cpu_ns = after
        .process_cpu_ns
        .zip(before.process_cpu_ns)
        .map_or(0, |(a, b)| a.saturating_sub(b));
    let thread_cpu_percent = after
        .threads
        .iter()
        .map(|t| {
            let b = before
                .threads
                .iter()
                .find(|x| x.index == t.index)
                .and_then(|x| x.cpu_ns);
            let used = t.cpu_ns.zip(b).map_or(0, |(a, b)| a.saturating_sub(b));
            100.0 * used as f64 / wall_ns as f64
        })
        .collect();
    let us = |ns: i64| ns as f64 / 1e3;
    let stalls = probe.stalls(LATE_NS, STALL_JOIN_NS, STALL_NS);
    Ok(Run {
        part,
        engine: variant.name.clone(),
        load: load.as_str(),
        delay: delay.to_owned(),
        links,
        threads: after.threads.len(),
        pps,
        sent,
        received: probe.errors_ns.len(),
        early: probe.early,
        p50_us: us(probe.percentile(0.5)),
        p99_us: us(probe.percentile(0.99)),
        p999_us: us(probe.percentile(0.999)),
        max_us: us(probe.percentile(1.0)),
        within_20us: probe.within(20_000),
        within_100us: probe.within(LATE_NS),
        probe_stalls: stalls.len(),
        probe_stalled: stalls.iter().map(|s| s.frames).sum(),
        within_100us_outside_stalls: probe.within_outside(LATE_NS, &stalls),
        engine_p50_us: e_p50 as f64 / 1e3,
        engine_p99_us: e_p99 as f64 / 1e3,
        engine_lag_p99_us: lag_p99 as f64 / 1e3,
        engine_early: e_early,
        // The process: release threads, collector, control; all of it is what the lab costs.
        cpu_percent: 100.0 * cpu_ns as f64 / wall_ns as f64,
        cpu_us_per_frame: cpu_ns as f64 / 1e3 / frames.max(1) as f64,
        thread_cpu_percent,
        policy: after.threads.iter().map(|t| t.policy.clone()).collect(),
        stepped_down: stepped_down(&after).saturating_sub(stepped_down(&before)),
        stalls: stall_count(&after).saturating_sub(stall_count(&before)),
        max_stall_us: (longest_stall_us(&after) > longest_stall_us(&before))
            .then(|| longest_stall_us(&after)),
        max_stall_before_us: longest_stall_us(&before),
        softirq_percent,
        steal_percent,
        release_wakeups,
    })
}

/// Starts recording the kernel's trace for lab `lab`'s first release thread (`rtemu-release0`
/// of the engine process whose command line names the lab), on its CPU (`stats`).
fn trace_release_thread(lab: &str, stats: &Stats) -> Result<Recording> {
    let cpus: Vec<usize> = match stats.threads.first().and_then(|t| t.cpu) {
        Some(cpu) => vec![cpu],
        None => (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect(),
    };
    let tid = release_thread_id(lab).with_context(|| format!("no release thread of lab {lab}"))?;
    Ok(Recording::start_for(tid, &cpus)?)
}

/// The thread id of `rtemu-release0` in the `rtemu engine` process of lab `lab`.
fn release_thread_id(lab: &str) -> Option<u32> {
    for proc in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(cmdline) = std::fs::read(proc.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
        if !(args.contains(&&b"engine"[..]) && args.contains(&lab.as_bytes())) {
            continue;
        }
        for task in std::fs::read_dir(proc.path().join("task")).ok()?.flatten() {
            let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
            if comm.trim_end() == "rtemu-release0" {
                return task.file_name().to_str()?.parse().ok();
            }
        }
    }
    None
}

/// The probe table's columns: the run's conditions (left), then its figures.
const PROBE_COLUMNS: [(&str, Align); 22] = [
    ("engine", Align::Left),
    ("load", Align::Left),
    ("delay", Align::Left),
    ("pps", Align::Right),
    ("received", Align::Right),
    ("early", Align::Right),
    ("p50 µs", Align::Right),
    ("p99 µs", Align::Right),
    ("p99.9 µs", Align::Right),
    ("max µs", Align::Right),
    ("≤ 20 µs", Align::Right),
    ("≤ 100 µs", Align::Right),
    ("stalls ≥ 1 ms (frames)", Align::Right),
    ("≤ 100 µs outside them", Align::Right),
    ("engine p50 / p99 µs", Align::Right),
    ("engine lag p99 µs", Align::Right),
    ("CPU %", Align::Right),
    ("µs/frame", Align::Right),
    ("engine stepped down / stalls (longest µs)", Align::Right),
    ("softirq % per CPU", Align::Right),
    ("steal % per CPU", Align::Right),
    (
        "release wake-ups > 100 µs late: absent / task / handler / waited (of all)",
        Align::Right,
    ),
];

/// One run as a row of the probe table.
fn probe_row(run: &Run) -> Vec<String> {
    vec![
        run.engine.clone(),
        run.load.to_owned(),
        run.delay.clone(),
        run.pps.to_string(),
        run.received.to_string(),
        run.early.to_string(),
        format!("{:.1}", run.p50_us),
        format!("{:.1}", run.p99_us),
        format!("{:.1}", run.p999_us),
        format!("{:.1}", run.max_us),
        format!("{:.2} %", run.within_20us),
        format!("{:.2} %", run.within_100us),
        format!("{} ({})", run.probe_stalls, run.probe_stalled),
        format!("{:.2} %", run.within_100us_outside_stalls),
        format!("{:.1} / {:.1}", run.engine_p50_us, run.engine_p99_us),
        format!("{:.1}", run.engine_lag_p99_us),
        format!("{:.1}", run.cpu_percent),
        format!("{:.1}", run.cpu_us_per_frame),
        engine_stalls_cell(run),
        per_cpu(&run.softirq_percent),
        per_cpu(&run.steal_percent),
        run.release_wakeups
            .as_ref()
            .map_or_else(|| "—".to_owned(), wakeups_cell),
    ]
}

/// A release thread's late wake-ups by cause, of all its timed wake-ups.
fn wakeups_cell(a: &Attribution) -> String {
    format!(
        "{} / {} / {} / {} ({})",
        a.absent.count, a.task.count, a.handler.count, a.waited.count, a.wakeups
    )
}

/// The engine's step-downs and stalls during `run`, with the longest stall (µs): exact when
/// it was the longest of the lab's life, else bounded by the longest before the run.
fn engine_stalls_cell(run: &Run) -> String {
    let longest = match run.max_stall_us {
        Some(us) => format!("{us:.0}"),
        None if run.stalls == 0 => "—".to_owned(),
        None => format!("≤ {:.0}", run.max_stall_before_us),
    };
    format!("{} / {} ({longest})", run.stepped_down, run.stalls)
}

/// The times `stats`' release threads stepped down over the lab's life.
fn stepped_down(stats: &Stats) -> u64 {
    stats.threads.iter().map(|t| t.stepped_down).sum()
}

/// The stalls `stats`' release threads counted over the lab's life.
fn stall_count(stats: &Stats) -> u64 {
    stats.threads.iter().map(|t| t.stalls).sum()
}

/// The longest stall of `stats`' release threads over the lab's life, µs.
fn longest_stall_us(stats: &Stats) -> f64 {
    stats
        .threads
        .iter()
        .map(|t| t.max_stall_ns as f64 / 1e3)
        .fold(0.0, f64::max)
}

/// A run as one line of JSON.
fn print_json(run: &Run) {
    println!("{}", serde_json::to_string(run).expect("a run serialises"));
}

/// A figure per CPU, `cpu0 / cpu1 / …`.
fn per_cpu(percent: &[f64]) -> String {
    percent
        .iter()
        .map(|p| format!("{p:.1}"))
        .collect::<Vec<_>>()
        .join(" / ")
}

/// Runs `rtemu-bench precision`.
pub fn run(opts: &Options) -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        bail!("rtemu-bench precision needs root (namespaces, the engine's sockets)");
    }
    let variants = variants(opts.before.as_deref(), opts.io.as_deref())?;
    let mut out = std::io::stdout().lock();
    if opts.runs("probe") {
        let table = if opts.json {
            None
        } else {
            writeln!(
                out,
                "## Probe through one link, old default against new, alternated\n"
            )?;
            Some(Table::start(&mut out, &PROBE_COLUMNS)?)
        };
        for round in 0..opts.rounds {
            for load in [Load::Idle, Load::Busy, Load::InNode, Load::InNodeOffEngine] {
                for delay in ["10ms", "1ms"] {
                    for pps in [2_000u64, 10_000] {
                        // Alternate which engine goes first, round by round.
                        let order: Vec<&Variant> = if round % 2 == 0 {
                            variants.iter().collect()
                        } else {
                            variants.iter().rev().collect()
                        };
                        for v in order {
                            let r = run_one(
                                "probe",
                                v,
                                load,
                                delay,
                                1,
                                pps,
                                opts.seconds,
                                "bprec",
                                opts.trace,
                            )?;
                            match &table {
                                Some(t) => t.row(&mut out, &probe_row(&r))?,
                                None => print_json(&r),
                            }
                        }
                    }
                }
            }
        }
        writeln!(out)?;
    }
    if opts.runs("idle") {
        let table = if opts.json {
            None
        } else {
            writeln!(out, "## CPU with no traffic\n")?;
            Some(Table::start_figures(
                &mut out,
                &["engine", "CPU % of one core"],
            )?)
        };
        for v in &variants {
            let r = run_one(
                "idle",
                v,
                Load::Idle,
                "10ms",
                1,
                0,
                opts.seconds,
                "bprec",
                false,
            )?;
            match &table {
                Some(t) => t.row(&mut out, &[v.name.clone(), format!("{:.2}", r.cpu_percent)])?,
                None => print_json(&r),
            }
        }
        writeln!(out)?;
    }
    if opts.runs("links") {
        let table = if opts.json {
            None
        } else {
            writeln!(
                out,
                "## Many links, each with its own 1 kpps probe (idle machine)\n"
            )?;
            let mut columns = [
                "links",
                "threads",
                "received",
                "early",
                "p50 µs",
                "p99 µs",
                "max µs",
                "≤ 100 µs",
                "engine p99 µs",
                "CPU %",
                "per thread CPU %",
            ]
            .map(|h| (h, Align::Right));
            // Several figures in one cell: text.
            columns[10].1 = Align::Left;
            Some(Table::start(&mut out, &columns)?)
        };
        for links in [1usize, 8, 32, 128] {
            for threads in [1usize, 2] {
                if threads > links {
                    continue;
                }
                let mut v = Variant::default_engine()?;
                v.flags = vec!["--engine-threads".into(), threads.to_string()];
                let r = run_one(
                    "links",
                    &v,
                    Load::Idle,
                    "10ms",
                    links,
                    1_000,
                    opts.seconds,
                    "bprec",
                    false,
                )?;
                match &table {
                    Some(t) => t.row(
                        &mut out,
                        &[
                            links.to_string(),
                            r.threads.to_string(),
                            r.received.to_string(),
                            r.early.to_string(),
                            format!("{:.1}", r.p50_us),
                            format!("{:.1}", r.p99_us),
                            format!("{:.1}", r.max_us),
                            format!("{:.2} %", r.within_100us),
                            format!("{:.1}", r.engine_p99_us),
                            format!("{:.1}", r.cpu_percent),
                            per_cpu(&r.thread_cpu_percent),
                        ],
                    )?,
                    None => print_json(&r),
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_engines_longest_stall_is_exact_only_when_the_run_set_it() {
        let run = |stalls, max_stall_us, max_stall_before_us| Run {
            stepped_down: 1,
            stalls,
            max_stall_us,
            max_stall_before_us,
            ..Run::default()
        };
        assert_eq!(engine_stalls_cell(&run(0, None, 2400.0)), "1 / 0 (—)");
        assert_eq!(
            engine_stalls_cell(&run(3, Some(9948.4), 2400.0)),
            "1 / 3 (9948)"
        );
        // Stalls in the run, none longer than the set-up's: only a bound is known.
        assert_eq!(engine_stalls_cell(&run(2, None, 2400.0)), "1 / 2 (≤ 2400)");
    }
}
