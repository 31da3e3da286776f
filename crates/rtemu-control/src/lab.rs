//! A lab's life: up from a parsed topology (with its engine when links are impaired), its
//! state, its links changed and read while traffic flows, and down with the engine's final
//! report. The lab itself (namespaces, interfaces, routes) is `rtemu-topo`'s work.

use std::ffi::OsString;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rtemu_clock::WaitStrategy;
use rtemu_engine::control::Request;
use rtemu_lab::rtt::between::{self, Leg};
use rtemu_lab::rtt::plan::{Probes, Protocol};
use rtemu_model::direction::Ways;
use rtemu_topo::lab::LabError;
use rtemu_topo::part::Stitching;
use rtemu_topo::state::{Detached, LabName, State, Unreadable};
use rtemu_topo::topology::Netem;
use rtemu_topo::Topology;

use crate::engine::{self, BuildModels, EngineOptions};
use crate::error::ControlError;
use crate::message::{Ack, FinalReport, Stats, Underlay};

/// A lab that came up.
#[derive(Debug)]
pub struct Up {
    /// Its state, as `rtemu ls` shows it.
    pub state: State,
    /// How its engine waits; `None` when it has no impaired links, hence no engine.
    pub engine_wait: Option<WaitStrategy>,
    /// Its impaired links (each carried by the engine).
    pub impaired: usize,
    /// The engine's release threads as they started (class, CPU, links); empty without an
    /// engine, or when it did not say.
    pub engine_threads: Vec<crate::message::EngineThread>,
    /// Its containers (on this host), and what starting them took.
    pub containers: rtemu_topo::launch::Launched,
    /// How long bringing it up took.
    pub elapsed: Duration,
}

/// What `rtemu up` says of a lab that came up: its engine (when it has one) on a line, then
/// its size and how long it took.
impl std::fmt::Display for Up {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(wait) = self.engine_wait {
            writeln!(
                f,
                "engine started for {} impaired links (wait {wait})",
                self.impaired
            )?;
            for t in &self.engine_threads {
                writeln!(f, "  {t}")?;
            }
        }
        if let Some(line) = programs_line(&self.state) {
            writeln!(f, "{line}")?;
        }
        if self.containers.containers > 0 {
            writeln!(f, "{}", self.containers)?;
        }
        write!(
            f,
            "lab {} is up: {} nodes, {} links and LANs ({:.0} ms)",
            self.state.lab,
            self.state.topology.nodes.len(),
            self.state.topology.segments.len(),
            self.elapsed.as_secs_f64() * 1e3
        )
    }
}

/// Brings `topo` (read from `file`, as `ls` shows it) up and, when it has impaired links,
/// starts its engine with `opts` (the wait strategy defaulting to
/// [`engine::default_wait`]); on failure nothing of the lab stays behind.
pub fn up(topo: &Topology, file: &str, opts: &EngineOptions) -> Result<Up, ControlError> {
    let started = Instant::now();
    let links = topo.segments.iter().filter(|s| s.impairment().is_some());
    let programs = engine::programs_cpus(topo, opts, links.count())?;
    let state = rtemu_topo::lab::up_with(topo, file, programs.as_deref())?;
    with_engine(state, opts, started)
}

/// Brings up host `host`'s part of the multi-host lab `topo`, stitched by `stitching` (see
/// [`rtemu_topo::lab::up_part`]), with offloads off on its ends of impaired links whose engine
/// runs elsewhere ([`engine::far_ends_without_offloads`]), and starts its engine with `opts`
/// when this host runs the engine of any impaired link; on failure nothing of the part stays
/// behind.
pub fn up_part(
    topo: &Topology,
    file: &str,
    host: &str,
    stitching: &Stitching,
    opts: &EngineOptions,
) -> Result<Up, ControlError> {
    let started = Instant::now();
    let here = topo
        .segments
        .iter()
        .filter(|s| s.impairment().is_some() && s.engine_host.as_deref() == Some(host));
    let programs = engine::programs_cpus(topo, opts, here.count())?;
    let state = rtemu_topo::lab::up_part(topo, file, host, stitching, programs.as_deref())?;
    if let Err(e) = engine::far_ends_without_offloads(&state) {
        let _ = rtemu_topo::lab::down(&state.lab);
        return Err(e.context(format!("lab {}", state.lab)));
    }
    with_engine(state, opts, started)
}

/// Starts the engine of the lab (or part) `state` that just came up, when it runs impaired
/// links, then its containers (so their entrypoints find their links carrying frames), taking
/// it down again if either does not start.
fn with_engine(state: State, opts: &EngineOptions, started: Instant) -> Result<Up, ControlError> {
    let impaired = engine::impaired(&state).len();
    let mut engine_wait = None;
    let mut engine_threads = Vec::new();
    if impaired > 0 {
        let wait = opts.wait.unwrap_or_else(engine::default_wait);
        if let Err(e) = engine::start(&state, wait, opts) {
            let _ = rtemu_topo::lab::down(&state.lab);
            return Err(e.context(format!("starting the engine of lab {}", state.lab)));
        }
        engine_wait = Some(wait);
        // What each release thread got (its class may have been refused); the engine answered
        // a moment ago, and a failure to read it again changes nothing of the lab.
        engine_threads = engine::stats(&state.lab)
            .map(|s| s.threads)
            .unwrap_or_default();
    }
    let containers = match rtemu_topo::launch::start_all(&state) {
        Ok(launched) => launched,
        Err(e) => {
            let _ = down(&state.lab);
            let e = ControlError::from(LabError::from(e));
            return Err(e.context(format!("lab {}", state.lab)));
        }
    };
    Ok(Up {
        state,
        engine_wait,
        impaired,
        engine_threads,
        containers,
        elapsed: started.elapsed(),
    })
}

/// Where the processes started in lab `s`'s nodes run, when they are kept off its engine's
/// CPUs, as `up` and `ls` say it.
fn programs_line(s: &State) -> Option<String> {
    s.programs.as_ref().map(|p| {
        format!(
            "  programs on CPUs {} (off the engine's; cpuset {})",
            p.cpu_list(),
            p.cgroup.display()
        )
    })
}

/// What taking a lab down did.
#[derive(Debug)]
pub struct Down {
    /// The engine's final report; `None` without an engine, or when it did not answer.
    pub report: Option<FinalReport>,
    /// Whether there was a lab to remove, or why removing it failed (the report stands
    /// either way).
    pub removed: Result<bool, ControlError>,
}

/// Stops lab `name`'s engine, keeping its final report, and removes the lab.
pub fn down(name: &LabName) -> Down {
    let report = engine::stop(name);
    Down {
        report,
        removed: rtemu_topo::lab::down(name).map_err(ControlError::from),
    }
}

/// The labs `rtemu ls` lists: `lab` alone (an error when it does not run), else every lab
/// that runs, and apart the lab directories whose state cannot be read.
pub fn states(lab: Option<&LabName>) -> Result<(Vec<State>, Vec<Unreadable>)> {
    let Some(name) = lab else {
        return Ok(State::load_all()?);
    };
    match State::load(name)? {
        Some(state) => Ok((vec![state], Vec::new())),
        None => bail!("no lab `{name}` is running"),
    }
}

/// The topology file at `path`, checked as `up` checks it, for a lab named `name` when given
/// (else as the file says).
pub fn load(path: &Path, name: Option<&LabName>) -> Result<Topology> {
    let mut topo = Topology::load_checked(path, &BuildModels)?;
    if let Some(name) = name {
        topo.lab = name.to_string();
    }
    Ok(topo)
}

/// The topology `name` names: the topology file at that path (checked, as `up` checks it),
/// else the running lab of that name; with the file it was read from, if any.
pub fn topology_named(name: &str) -> Result<(Topology, Option<PathBuf>)> {
    let path = Path::new(name);
    if path.is_file() {
        Ok((load(path, None)?, Some(path.to_owned())))
    } else if LabName::new(name).is_ok() {
        Ok((rtemu_topo::lab::resolve_lab(Some(name))?.topology, None))
    } else {
        bail!(
            "{} is neither a topology file nor a lab name (1 to 12 characters a-z, 0-9 and '-')",
            rtemu_sys::terminal::quoted(name)
        );
    }
}

/// The files `topo` names, which its lab reads: each impaired link's trace, and the tables
/// its netem parameters (scheduled ones too) draw from. They are inputs of every command that
/// reads `topo`: no output of it may be one of them.
pub fn files_named(topo: &Topology) -> Vec<PathBuf> {
    let tables = rtemu_sim::tables::FileTables::from_env();
    let mut files = Vec::new();
    for (_, imp) in topo.impaired_links() {
        files.extend(imp.trace.iter().map(PathBuf::from));
        let netems = [&imp.netem, &imp.netem_ab, &imp.netem_ba]
            .into_iter()
            .flatten();
        let netems = netems.chain(imp.schedule.iter().map(|c| &c.netem));
        files.extend(netems.flat_map(|n| tables.files_of(n.config())));
    }
    files
}

/// Takes lab `name` down (see [`down`]), writing its engine's final report to `out` as
/// `rtemu down` shows it and, when `fidelity` names a file, as JSON there; returns whether
/// there was a lab. The lab goes down whether or not its report could be saved.
pub fn take_down(name: &LabName, fidelity: Option<&Path>, out: &mut impl Write) -> Result<bool> {
    let down = down(name);
    let saved = match &down.report {
        Some(report) => crate::message::give_final_report(out, name.as_str(), report, fidelity)
            .context("writing the final report")?,
        None => Ok(()),
    };
    let removed = down.removed?;
    saved?;
    Ok(removed)
}

/// How a lab stands, as `rtemu ls` says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    /// Its `up` did not finish (killed, or failed without cleaning up).
    Incomplete,
    /// It has impaired links and its engine does not answer: they carry nothing.
    Degraded,
    /// Up, its engine (if it needs one) answering.
    Up,
}

/// How lab `state` stands; asks its engine when it has one.
pub fn health(state: &State) -> Health {
    // A part runs an engine only for the impaired links whose engine host it is.
    let has_engine = !engine::impaired(state).is_empty();
    if !state.complete {
        Health::Incomplete
    } else if has_engine && !engine::alive(&state.lab) {
        Health::Degraded
    } else {
        Health::Up
    }
}

/// The counters and fidelity of every impaired link of lab `state`; an error when it has none
/// (ideal links are plain veth pairs, counted by the kernel).
pub fn stats(state: &State) -> Result<Stats, ControlError> {
    need_impaired(state)?;
    engine::stats(&state.lab)
}

/// An error when lab `state` has no impaired links (hence no stats): ideal links are plain
/// veth pairs, counted by the kernel.
pub fn need_impaired(state: &State) -> Result<(), ControlError> {
    if engine::impaired(state).is_empty() {
        return Err(ControlError::NoEngine(state.lab.clone()));
    }
    Ok(())
}

/// Gives `show` the [`stats`] of lab `state`, then again every `every` until reading or
/// showing them fails; once without `every`.
pub fn watch_stats(
    state: &State,
    every: Option<Duration>,
    show: impl FnMut(&Stats) -> Result<()>,
) -> Result<()> {
    watch(every, || Ok(stats(state)?), show)
}

/// Gives `show` what `read` reads, then again every `every` until reading or showing fails;
/// once without `every` (`rtemu stats --watch`, of one lab or of one across hosts).
pub fn watch<T>(
    every: Option<Duration>,
    mut read: impl FnMut() -> Result<T>,
    mut show: impl FnMut(&T) -> Result<()>,
) -> Result<()> {
    loop {
        show(&read()?)?;
        match every {
            Some(pause) => std::thread::sleep(pause),
            None => return Ok(()),
        }
    }
}

/// How long a change to a link may take to be acknowledged.
const CHANGE_TIMEOUT: Duration = Duration::from_secs(5);

/// Gives link `link` of lab `lab` the model `netem` in the directions `ways`, while traffic
/// flows (frames in flight keep their release times). `netem` was parsed by the caller, so a
/// mistake is reported with its column before anything travels; its text goes to the engine.
pub fn set_link(lab: &LabName, link: &str, ways: Ways, netem: &Netem) -> Result<(), ControlError> {
    let request = Request::Set {
        link: link.to_owned(),
        ways,
        netem: netem.text().to_owned(),
    };
    engine::ask::<Ack>(lab, &request, CHANGE_TIMEOUT).map(drop)
}

/// Gives link `link` of lab `lab` each change of `changes` (the directions, how long after the
/// engine gets the request, the model), behind the frames then in flight; returns when the
/// engine has checked and queued them all, in one request (queueing none if one is bad).
pub fn schedule_link(
    lab: &LabName,
    link: &str,
    changes: &[(Ways, Duration, &Netem)],
) -> Result<(), ControlError> {
    let mut batch = Vec::with_capacity(changes.len());
    for &(ways, after, netem) in changes {
        batch.push(Request::Schedule {
            link: link.to_owned(),
            ways,
            after_ns: u64::try_from(after.as_nanos()).map_err(ControlError::TooFar)?,
            netem: netem.text().to_owned(),
        });
    }
    let request = if batch.len() == 1 {
        batch.remove(0)
    } else {
        Request::Batch(batch)
    };
    // The engine builds every model before it answers.
    let timeout = CHANGE_TIMEOUT + Duration::from_millis(changes.len() as u64);
    engine::ask::<Ack>(lab, &request, timeout).map(drop)
}

/// Cuts link `link` of lab `lab` (`down`: it carries nothing) or joins it again.
pub fn cut_link(lab: &LabName, link: &str, down: bool) -> Result<(), ControlError> {
    let request = Request::Cut {
        link: link.to_owned(),
        down,
    };
    engine::ask::<Ack>(lab, &request, CHANGE_TIMEOUT).map(drop)
}

/// Captures the interfaces `targets` name (`NODE:IF`, or a link's name for both its ends;
/// none: every interface) of lab `state` into the pcapng file `path`, written whole, until
/// `duration` passes, `count` packets are written or Ctrl-C (SIGINT), which ends the capture
/// cleanly; `on_start` is told the interfaces (`NODE:IF`) before the first packet. Returns the
/// packets written.
pub fn capture_to_file(
    state: &State,
    targets: &[String],
    path: &Path,
    (duration, count): (Option<Duration>, Option<u64>),
    on_start: impl FnOnce(&[String]),
) -> Result<u64> {
    let targets = rtemu_topo::capture::resolve_targets(state, targets)?;
    let inputs = files_named(&state.topology);
    let inputs: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
    let mut file = rtemu_report::output::Output::create(path, &inputs)?;
    let stop = stop_on_ctrl_c()?;
    let names: Vec<String> = targets.iter().map(|(n, i)| format!("{n}:{i}")).collect();
    on_start(&names);
    let limits = rtemu_topo::capture::Limits {
        duration,
        count,
        stop: &stop,
    };
    let packets = rtemu_topo::capture::capture(state, &targets, &mut file, &limits)?;
    file.commit()?;
    Ok(packets)
}

/// A flag Ctrl-C (SIGINT) sets, for a command that then ends cleanly (a capture writes what it
/// has) instead of dying.
pub fn stop_on_ctrl_c() -> Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGINT, Arc::clone(&stop))
        .context("installing the Ctrl-C handler")?;
    Ok(stop)
}

/// `rtemu lab rtt --lab LAB --from A --to B`: round trips of `protocol` between nodes `from`
/// and `to` of lab `state`, swept as `probes` says by `exe` (this program, run with the user's
/// arguments `forwarded`; see [`between::forwarded_args`]) in node `from`, against echo servers
/// it starts in node `to` for the run (UDP ones on `port`); `on_echo` is told of each as it
/// serves.
pub fn rtt_between(
    state: &State,
    (from, to): (&str, &str),
    (protocol, port, probes): (Protocol, u16, &Probes),
    (exe, forwarded): (&Path, &[OsString]),
    on_echo: &mut dyn FnMut(&Leg),
) -> Result<()> {
    let node_command: between::NodeCommand =
        &|node, argv| Ok(rtemu_topo::lab::node_command(state, node, argv)?);
    let lab = state.lab.to_string();
    let peers = between::Peers {
        lab: &lab,
        from,
        to,
        address: state.topology.peer_address(from, to),
        facing: state.topology.facing_interfaces(from, to),
    };
    let sweeps = (protocol.udp(), protocol.raw());
    let legs = between::legs(&peers, sweeps, port, node_command)?;
    // Refuse bad sizes here, before anything starts in the lab.
    let (_, sizes) = probes.sweeps(legs.iter().map(|l| l.target.clone()))?;
    let exe = exe.to_string_lossy();
    let sweep = between::sweep_argv(&exe, forwarded, protocol.name(), &legs);
    let echoes = (exe.as_ref(), legs.as_slice(), probes.echo_bound_ns(sizes));
    Ok(between::run(node_command, &peers, echoes, &sweep, on_echo)?)
}

/// Writes `states` as `rtemu ls` shows them: each lab with its health, its nodes with their
/// interfaces and addresses, and the processes started detached in it.
pub fn write_listing(out: &mut impl Write, states: &[State]) -> io::Result<()> {
    if states.is_empty() {
        writeln!(out, "no labs")?;
    }
    for s in states {
        let health = health(s);
        let status = match health {
            Health::Incomplete => "incomplete (run `rtemu down`)",
            Health::Degraded => {
                "DEGRADED: its engine is not running, impaired links carry nothing (run `rtemu down`)"
            }
            Health::Up => "up",
        };
        let detached = s.detached().unwrap_or_default().into_iter().map(|d| {
            let running = d.running();
            (d, running)
        });
        let containers = rtemu_topo::launch::lab_statuses(s)
            .into_iter()
            .map(|(node, (_, status))| (node, status.to_string()))
            .collect();
        write_lab(
            out,
            s,
            status,
            |si| Underlay::of(s, si),
            detached,
            &containers,
        )?;
        // What its engine's release threads got (CPU, class, step-downs, stalls), as `up`
        // said it; an engine that stops answering meanwhile just has no lines.
        if matches!(health, Health::Up) && !engine::impaired(s).is_empty() {
            for t in engine::stats(&s.lab)
                .map(|st| st.threads)
                .unwrap_or_default()
            {
                writeln!(out, "  {t}")?;
            }
        }
    }
    Ok(())
}

/// Writes lab `s` as `rtemu ls` shows it, its status said as `status`: its nodes (with their
/// host, in a multi-host lab) with their interfaces and addresses, the underlay that each
/// segment between hosts crosses (`underlay` of the segment's index), then `detached`, the
/// processes started detached in it with whether each still runs. An image node shows its
/// image and how its container stands (`containers`: node → state, as the runtime said it).
pub fn write_lab(
    out: &mut impl Write,
    s: &State,
    status: &str,
    underlay: impl Fn(usize) -> Option<Underlay>,
    detached: impl IntoIterator<Item = (Detached, bool)>,
    containers: &std::collections::BTreeMap<String, String>,
) -> io::Result<()> {
    // The file's name, an agent's words and command lines come from outside: shown, never
    // obeyed by the terminal.
    let shown = rtemu_sys::terminal::printable;
    writeln!(
        out,
        "lab {} ({}) from {}",
        s.lab,
        shown(status),
        shown(&s.file)
    )?;
    let t = &s.topology;
    for (node, ns) in &s.nodes {
        let Some(ni) = t.node_index(node) else {
            continue;
        };
        let on = t.nodes[ni]
            .host
            .as_ref()
            .map_or(String::new(), |h| format!(" on {h}"));
        writeln!(out, "  node {node}{on}  (netns {ns})")?;
        if let Some(c) = &t.nodes[ni].container {
            let state = containers.get(node).map_or("unknown", String::as_str);
            writeln!(out, "    image {}  {state}", c.image)?;
        }
        for net in &t.nodes[ni].loopback {
            writeln!(out, "    lo  {net}")?;
        }
        for seg in &t.segments {
            for m in seg.members.iter().filter(|m| m.node == ni) {
                let addrs: Vec<String> =
                    [m.ipv4.map(|a| a.to_string()), m.ipv6.map(|a| a.to_string())]
                        .into_iter()
                        .flatten()
                        .collect();
                writeln!(
                    out,
                    "    {:<15} {}  {}  on {}",
                    m.ifname,
                    m.mac,
                    addrs.join(" "),
                    seg.name
                )?;
            }
        }
    }
    for si in 0..t.segments.len() {
        if let Some(u) = underlay(si) {
            let name = &t.segments[si].name;
            writeln!(out, "  link {name} crosses hosts: {u} (measured at up)")?;
        }
    }
    // No line: every CPU, the default.
    if let Some(line) = programs_line(s) {
        writeln!(out, "{line}")?;
    }
    for (d, running) in detached {
        writeln!(
            out,
            "  detached pid {} in {}: {} ({}, log {})",
            d.pid,
            d.node,
            shown(&d.command.join(" ")),
            if running { "running" } else { "exited" },
            d.log.display()
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Kind;

    fn up(engine_wait: Option<WaitStrategy>) -> Up {
        let src = "lab = \"t1\"\n[nodes.a]\n[nodes.b]\n[nodes.c]\n\
                   [[links]]\nendpoints = [\"a\", \"b\"]\nnetem = \"delay 1ms\"\n\
                   [[links]]\nendpoints = [\"b\", \"c\"]\n";
        Up {
            state: State {
                lab: LabName::new("t1").unwrap(),
                file: "t.toml".to_owned(),
                namespaces: Vec::new(),
                nodes: Vec::new(),
                handovers: Vec::new(),
                cgroups: Vec::new(),
                programs: None,
                complete: true,
                topology: Topology::parse("t.toml", src).unwrap(),
                part: None,
            },
            engine_wait,
            impaired: 1,
            engine_threads: engine_wait
                .map(|_| {
                    vec![crate::message::EngineThread {
                        cpu: Some(1),
                        cpu_ns: Some(1),
                        index: 0,
                        links: vec!["a-b".into()],
                        margin_ns: 20_000,
                        max_stall_ns: 0,
                        policy: "SCHED_FIFO:40".into(),
                        priority: Some(40),
                        stalls: 0,
                        stepped_down: 0,
                        timer_slack_ns: Some(0),
                    }]
                })
                .unwrap_or_default(),
            containers: Default::default(),
            elapsed: Duration::from_micros(12_400),
        }
    }

    #[test]
    fn an_up_lab_is_told_with_its_engine_only_when_it_has_one() {
        assert_eq!(
            up(Some(WaitStrategy::Spin)).to_string(),
            "engine started for 1 impaired links (wait spin)\n  \
             release thread 0 on CPU 1, SCHED_FIFO:40, spin margin 20.0 µs: a-b\n\
             lab t1 is up: 3 nodes, 2 links and LANs (12 ms)"
        );
        assert_eq!(
            up(None).to_string(),
            "lab t1 is up: 3 nodes, 2 links and LANs (12 ms)"
        );
    }

    #[test]
    fn a_lab_without_impaired_links_has_no_stats_to_watch() {
        let mut state = up(None).state;
        let ideal = "lab = \"t1\"\n[nodes.a]\n[nodes.b]\n[[links]]\nendpoints = [\"a\", \"b\"]\n";
        state.topology = Topology::parse("t.toml", ideal).unwrap();
        let mut shown = 0;
        let e = watch_stats(&state, Some(Duration::from_secs(3600)), |_| {
            shown += 1;
            Ok(())
        });
        assert_eq!(shown, 0);
        assert!(e.unwrap_err().to_string().contains("has no impaired links"));
        let e = stats(&state).unwrap_err();
        assert!(matches!(e, ControlError::NoEngine(_)), "{e:?}");
        assert_eq!(e.kind(), Kind::Invalid);
    }

    /// A lab across hosts `h1` (192.0.2.1, an address no test machine holds) and `h2`, its
    /// one link impaired.
    fn across_hosts() -> Topology {
        let src = "lab = \"tx\"\n[hosts]\nh1 = { address = \"192.0.2.1\" }\n\
                   h2 = { address = \"192.0.2.2\" }\n[nodes.a]\nhost = \"h1\"\n\
                   [nodes.b]\nhost = \"h2\"\n[[links]]\nendpoints = [\"a\", \"b\"]\n\
                   netem = \"delay 1ms\"\n";
        Topology::parse("x.toml", src).unwrap()
    }

    #[test]
    fn a_lab_s_life_fails_with_typed_errors_before_it_makes_anything() {
        let opts = EngineOptions::default();
        let e = super::up(&across_hosts(), "x.toml", &opts).unwrap_err();
        assert!(matches!(e, ControlError::Lab(LabError::MultiHost { .. })));
        assert_eq!(e.kind(), Kind::Unsupported);
        // Programs kept off the engine's CPUs, which are not pinned.
        let mut one = across_hosts();
        one.hosts.clear();
        let unpinned = EngineOptions {
            cpus: Some(Vec::new()),
            programs: Some(rtemu_topo::topology::ProgramsCpus::OffEngine),
            ..EngineOptions::default()
        };
        let e = super::up(&one, "x.toml", &unpinned).unwrap_err();
        assert!(matches!(e, ControlError::OffEngine(_)), "{e:?}");
        assert_eq!(e.kind(), Kind::Conflict);
        let stitching = Stitching {
            port: 4789,
            vnis: [("a-b".to_owned(), 1 << 20)].into(),
        };
        let part = |host| up_part(&across_hosts(), "x.toml", host, &stitching, &opts);
        let e = part("h9").unwrap_err();
        assert!(matches!(e, ControlError::Lab(LabError::Part(_))), "{e:?}");
        assert_eq!(e.kind(), Kind::Invalid);
        let e = part("h1").unwrap_err();
        assert!(
            matches!(e, ControlError::Lab(LabError::NotThisHost { .. })),
            "{e:?}"
        );
        assert_eq!(e.kind(), Kind::Conflict);
    }

    #[test]
    fn a_link_change_fails_with_typed_errors() {
        // No lab of this name runs, so no engine answers.
        let lab = LabName::new("errors-none").unwrap();
        let netem = Netem::parse("delay 1ms").unwrap();
        for e in [
            set_link(&lab, "ab", Ways::Both, &netem).unwrap_err(),
            cut_link(&lab, "ab", true).unwrap_err(),
            schedule_link(&lab, "ab", &[(Ways::Both, Duration::ZERO, &netem)]).unwrap_err(),
        ] {
            assert!(matches!(e, ControlError::NoAnswer { .. }), "{e:?}");
            assert_eq!(e.kind(), Kind::Internal);
        }
        let e = schedule_link(&lab, "ab", &[(Ways::Both, Duration::MAX, &netem)]).unwrap_err();
        assert!(matches!(e, ControlError::TooFar(_)), "{e:?}");
        assert_eq!(e.kind(), Kind::Invalid);
    }

    #[test]
    fn a_topology_is_named_by_its_file_or_refused_naming_both_kinds() {
        let dir = std::env::temp_dir().join(format!("rtemu-named-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("t.toml");
        std::fs::write(
            &file,
            "lab = \"t1\"\n[nodes.a]\n[nodes.b]\n[[links]]\nendpoints = [\"a\", \"b\"]\n",
        )
        .unwrap();
        let read = topology_named(file.to_str().unwrap());
        std::fs::remove_dir_all(&dir).unwrap();
        let (topo, from) = read.unwrap();
        assert_eq!((topo.lab.as_str(), from), ("t1", Some(file)));
        let e = topology_named("Not a lab!").unwrap_err().to_string();
        assert!(
            e.starts_with("\"Not a lab!\" is neither a topology file nor a lab name"),
            "{e}"
        );
    }

    #[test]
    fn the_listing_says_how_each_lab_stands_and_where_its_nodes_run() {
        let mut out = Vec::new();
        write_listing(&mut out, &[]).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "no labs\n");

        let mut state = up(None).state;
        state.complete = false;
        state.nodes = vec![("a".to_owned(), "rtemu-t1.a".to_owned())];
        // A file name that would clear the screen is shown, not obeyed.
        state.file = "t\u{1b}[2J.toml".to_owned();
        let mut out = Vec::new();
        write_listing(&mut out, &[state]).unwrap();
        let text = String::from_utf8(out).unwrap();
        let mut lines = text.lines();
        assert_eq!(
            lines.next(),
            Some("lab t1 (incomplete (run `rtemu down`)) from t\\u{1b}[2J.toml")
        );
        assert_eq!(lines.next(), Some("  node a  (netns rtemu-t1.a)"));
        assert!(
            lines.next().is_some_and(|l| l.ends_with("  on a-b")),
            "{text}"
        );
    }
}
