//! Bringing a lab up and down: namespaces, veth pairs, bridges, addresses, routes and static
//! neighbours, made through netlink.
//!
//! Layout. Every node is a namespace `rtemu-<lab>-<node>`. A point-to-point link is a veth
//! pair whose two ends are created directly in the two node namespaces (`IFLA_NET_NS_FD` on
//! each end), so no end ever sits in the host namespace, not even after a crash. A LAN is a
//! bridge in the lab's own namespace `rtemu-<lab>`, with one veth pair per member: the node
//! end in the node, the port end in the lab namespace. An impaired link is two veth pairs,
//! node A's end to `e<n>a` and node B's end to `e<n>b` in the lab namespace ([`engine_ends`]),
//! where the real-time engine moves frames between them. Nothing in the kernel joins `e<n>a`
//! to `e<n>b`: without the engine an impaired link carries nothing, never a silent bypass.
//!
//! Lifecycle. The state file names every namespace before any is created; everything else
//! lives inside those namespaces. `down` ends the processes in them, removes them and their
//! `/etc/netns` directories and the state directory; it works on a half-built lab and is
//! idempotent. A failed `up` runs `down` before returning its error.

use std::collections::BTreeMap;
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::process::{Command, Stdio};

use futures_util::TryStreamExt;
use ipnet::IpNet;
use rtnetlink::packet_route::link::{InfoData, InfoKind, InfoVeth, LinkAttribute, MacVlanMode};
use rtnetlink::packet_route::neighbour::NeighbourState;
use rtnetlink::{
    Handle, LinkBridge, LinkMacVlan, LinkMessageBuilder, LinkUnspec, LinkVeth, RouteMessageBuilder,
};

use crate::cgroup;
use crate::routing::{plan, NodePlan};
use crate::state::{lab_dir, BadLabName, Detached, Handover, LabName, State, StateError};
use crate::sys;
use crate::topology::{Attachment, ExternalMode, Mac, SegmentKind, Topology};

/// Errors of the lab lifecycle.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// A lab of that name already runs.
    #[error("lab `{0}` already exists: bring it down first (`rtemu down {0}`)")]
    Exists(String),
    /// No lab of that name runs.
    #[error("no lab `{0}` is running (`rtemu ls` lists the labs)")]
    NoSuchLab(String),
    /// `--lab` was left out while not exactly one lab runs.
    #[error("{0} labs are running: name one with --lab")]
    WhichLab(usize),
    /// The lab has no such node.
    #[error("lab `{lab}` has no node `{node}`; its nodes are {nodes}")]
    NoSuchNode {
        /// The lab.
        lab: String,
        /// The node asked for.
        node: String,
        /// The nodes it has.
        nodes: String,
    },
    /// A namespace with one of the lab's names exists, and no lab state records it.
    #[error("network namespace {0} already exists and no rtemu lab made it: rtemu leaves it alone; remove it (`ip netns del {0}`) or name the lab differently (--name)")]
    ForeignNamespace(String),
    /// A capture target is neither `node:if` nor a link of the lab.
    #[error("`{0}` is not an interface or a link of the lab: write NODE:IF or LINK (`rtemu ls` lists them)")]
    BadTarget(String),
    /// A host interface named in the file does not exist.
    #[error("host interface `{0}` does not exist (`ip link` lists the host's interfaces)")]
    NoHostInterface(String),
    /// A CPU limit was asked for on a machine without a cgroup CPU controller.
    #[error(
        "node `{0}` has `cpu` set, but this machine has no cgroup cpu controller (cgroup v2 `cpu` \
         or v1 `cpu` under /sys/fs/cgroup) to enforce it; remove the line"
    )]
    CpuLimit(String),
    /// The topology spans several hosts: each host's agent builds its part.
    #[error("lab `{lab}` spans hosts {hosts}: a multi-host lab is built by the agent (`rtemu serve`) of each host, which this rtemu cannot drive yet; remove the `[hosts]` table to run the lab on this machine")]
    MultiHost {
        /// The lab.
        lab: String,
        /// Its hosts, comma-separated.
        hosts: String,
    },
    /// A name given is not a valid lab name.
    #[error(transparent)]
    BadName(#[from] BadLabName),
    /// A lab's state directory or file is not trusted, or could not be read or written.
    #[error(transparent)]
    State(#[from] StateError),
    /// `down` found objects of the lab's names that do not carry the lab's mark, and left them.
    #[error("lab `{lab}` is down, but {} of its names did not carry its mark and were left alone: {} (not made by this lab: inspect and remove them by hand)", .left.len(), .left.join(", "))]
    LeftAlone {
        /// The lab.
        lab: LabName,
        /// What was left, as `kind name (why)`.
        left: Vec<String>,
    },
    /// A system call or file operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What rtemu was doing.
        what: String,
        /// Why it failed.
        source: io::Error,
    },
    /// A netlink request failed.
    #[error("{what}: {source}")]
    Netlink {
        /// What rtemu was doing.
        what: String,
        /// Why it failed.
        source: rtnetlink::Error,
    },
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> LabError {
    let what = what.into();
    move |source| LabError::Io { what, source }
}

fn nl_err(what: impl Into<String>) -> impl FnOnce(rtnetlink::Error) -> LabError {
    let what = what.into();
    move |source| LabError::Netlink { what, source }
}

/// The namespace of node `node` in lab `lab`.
pub fn node_netns(lab: &str, node: &str) -> String {
    format!("rtemu-{lab}-{node}")
}

/// The lab's own namespace, holding the LAN bridges.
pub fn lab_netns(lab: &str) -> String {
    format!("rtemu-{lab}")
}

/// The engine's two interfaces of segment `index` (an impaired link), in the lab namespace:
/// the one facing the link's first node and the one facing its second.
pub fn engine_ends(index: usize) -> [String; 2] {
    [format!("e{index}a"), format!("e{index}b")]
}

/// The ownership mark (interface alias) of every interface and namespace rtemu creates in lab
/// `lab`.
pub fn ownership_mark(lab: &str) -> String {
    format!("rtemu:{lab}")
}

/// The loopback interface's index, the same in every network namespace (the kernel registers
/// it first).
const LOOPBACK_INDEX: u32 = 1;

/// Marks the namespace the calling thread is in with `mark`: its loopback interface gets it as
/// alias. Called inside a new namespace before it is named ([`sys::create_netns`]), so no
/// named namespace of a lab is ever unmarked.
fn mark_this_netns(mark: String) -> io::Result<()> {
    with_own_netlink(|handle| async move {
        let msg = LinkUnspec::new_with_index(LOOPBACK_INDEX)
            .append_extra_attribute(LinkAttribute::IfAlias(mark))
            .build();
        handle
            .link()
            .set(msg)
            .execute()
            .await
            .map_err(io::Error::other)
    })
}

/// Runs `f` with a netlink connection whose socket is in the calling thread's namespace, on a
/// runtime of its own: for threads that have entered a namespace outside any runtime.
fn with_own_netlink<T, F: std::future::Future<Output = io::Result<T>>>(
    f: impl FnOnce(Handle) -> F,
) -> io::Result<T> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()?;
    runtime.block_on(async move {
        let (conn, handle, _) = rtnetlink::new_connection()?;
        tokio::spawn(conn);
        f(handle).await
    })
}

/// What `down` finds under one of a lab's namespace names.
#[derive(Debug, PartialEq, Eq)]
enum Found {
    /// Nothing.
    Nothing,
    /// The empty mount point a crash left between creating it and mounting the namespace.
    Placeholder,
    /// A namespace with this mark (its loopback's alias).
    Marked(Option<String>),
}

/// What is at namespace name `ns`: nothing, a crash's placeholder, or a namespace and its mark.
fn find_netns(ns: &str) -> io::Result<Found> {
    use std::os::unix::fs::MetadataExt;
    let path = sys::netns_path(ns);
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Found::Nothing),
        Err(e) => return Err(e),
    };
    let dir = std::fs::metadata(sys::NETNS_DIR)?;
    // A mounted namespace file lives on nsfs, not on the directory's file system.
    if meta.is_file() && meta.len() == 0 && meta.dev() == dir.dev() {
        return Ok(Found::Placeholder);
    }
    let alias = sys::in_netns(ns, || {
        with_own_netlink(|handle| async move {
            let mut links = handle.link().get().match_index(LOOPBACK_INDEX).execute();
            let lo = links.try_next().await.map_err(io::Error::other)?;
            Ok(lo.and_then(|m| {
                m.attributes.into_iter().find_map(|a| match a {
                    LinkAttribute::IfAlias(alias) => Some(alias),
                    _ => None,
                })
            }))
        })
    })?;
    Ok(Found::Marked(alias))
}

/// Brings `topo` up. On error, everything made so far is removed again.
pub fn up(topo: &Topology, file: &str) -> Result<State, LabError> {
    if !topo.hosts.is_empty() {
        let hosts: Vec<&str> = topo.hosts.iter().map(|h| h.name.as_str()).collect();
        return Err(LabError::MultiHost {
            lab: topo.lab.clone(),
            hosts: hosts.join(", "),
        });
    }
    let limited: Vec<&crate::topology::Node> =
        topo.nodes.iter().filter(|n| n.cpu.is_some()).collect();
    let cpu = match limited.first() {
        None => None,
        Some(node) => {
            Some(cgroup::Controller::find().ok_or_else(|| LabError::CpuLimit(node.name.clone()))?)
        }
    };
    raise_open_files();
    let lab = LabName::new(&topo.lab)?;
    if lab_dir(&lab).exists() {
        return Err(LabError::Exists(topo.lab.clone()));
    }
    let has_lans = topo.segments.iter().any(|s| s.kind == SegmentKind::Lan)
        || topo.impaired_links().next().is_some();
    let nodes: Vec<(String, String)> = topo
        .nodes
        .iter()
        .map(|n| (n.name.clone(), node_netns(&topo.lab, &n.name)))
        .collect();
    let mut namespaces: Vec<String> = nodes.iter().map(|(_, ns)| ns.clone()).collect();
    if has_lans {
        namespaces.push(lab_netns(&topo.lab));
    }
    let handovers = topo
        .segments
        .iter()
        .filter_map(|seg| match &seg.kind {
            SegmentKind::External {
                host,
                mode: ExternalMode::Move,
            } => Some(Handover {
                host: host.clone(),
                netns: node_netns(&topo.lab, &topo.nodes[seg.members[0].node].name),
                ifname: seg.members[0].ifname.clone(),
            }),
            _ => None,
        })
        .collect();
    // A namespace of the lab's names that no state file records is someone else's: `up` would
    // fail on it, and the clean-up after that failure would remove it.
    if let Some(ns) = namespaces.iter().find(|ns| sys::netns_exists(ns)) {
        return Err(LabError::ForeignNamespace(ns.clone()));
    }
    let mut state = State {
        lab: lab.clone(),
        file: file.to_owned(),
        namespaces,
        nodes,
        handovers,
        cgroups: cpu
            .iter()
            .flat_map(|c| {
                limited
                    .iter()
                    .map(|n| (n.name.clone(), c.dir(&node_netns(&topo.lab, &n.name))))
            })
            .collect(),
        complete: false,
        topology: topo.clone(),
    };
    // Recorded before anything exists, so `down` can reap whatever the next steps make.
    if let Err(e) = state.create() {
        return Err(match e {
            StateError::Io { source, .. } if source.kind() == io::ErrorKind::AlreadyExists => {
                LabError::Exists(topo.lab.clone())
            }
            e => e.into(),
        });
    }
    match build(topo, &state, cpu.as_ref()) {
        Ok(()) => {
            state.complete = true;
            state.save()?;
            Ok(state)
        }
        Err(e) => {
            // Best effort: the original error is the one worth reporting.
            let _ = down(&topo.lab);
            Err(e)
        }
    }
}

/// Raises this process's open-file limit to its hard limit: building a lab holds a namespace
/// file and a netlink socket per node, so 1000 nodes need more than the common soft limit of
/// 1024. Best effort: a lab that still needs more fails with the kernel's "too many open files".
fn raise_open_files() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        if soft < hard {
            let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
        }
    }
}

/// Removes lab `lab`: its processes, namespaces, `/etc/netns` entries, cgroups and state.
/// Returns whether there was anything to remove.
///
/// Only what the lab's state file names, and only what carries the lab's mark, is touched:
/// the state file must pass [`State::check`] (a directory without one is refused and left),
/// a namespace must carry the lab's mark before its processes are killed and it is removed,
/// and a recorded process must still have its recorded start time.
pub fn down(lab: &str) -> Result<bool, LabError> {
    let lab = LabName::new(lab)?;
    crate::state::reap_unplaced(&lab);
    let Some(state) = State::load(&lab)? else {
        return Ok(false);
    };
    give_back(&state.handovers)?;
    // Best effort: whatever of them is still in the lab's namespaces ends with the rest below.
    end_detached(&state);
    let mark = ownership_mark(&lab);
    let mut left = Vec::new();
    for ns in &state.namespaces {
        match find_netns(ns).map_err(io_err(format!("examining namespace {ns}")))? {
            Found::Nothing => {}
            Found::Placeholder => {
                sys::delete_netns(ns).map_err(io_err(format!("removing namespace {ns}")))?
            }
            Found::Marked(m) if m.as_deref() == Some(mark.as_str()) => {
                let id = sys::netns_id(ns).map_err(io_err(format!("examining namespace {ns}")))?;
                // Processes keep a namespace alive after its mount is gone: end them first,
                // and once more after, for one that entered in between (a starting engine).
                kill_in_netns(id, ns)?;
                sys::delete_netns(ns).map_err(io_err(format!("removing namespace {ns}")))?;
                kill_in_netns(id, ns)?;
            }
            Found::Marked(m) => {
                left.push(format!(
                    "namespace {ns} (marked {:?}, not {mark:?})",
                    m.unwrap_or_default()
                ));
                continue;
            }
        }
        let etc = std::path::Path::new("/etc/netns").join(ns);
        match std::fs::remove_dir_all(&etc) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                return Err(io_err(format!("removing {}", etc.display()))(e))
            }
            _ => {}
        }
    }
    for (_, cg) in &state.cgroups {
        cgroup::remove(cg).map_err(io_err(format!("removing the cgroup {}", cg.display())))?;
    }
    state.remove_dir()?;
    if !left.is_empty() {
        return Err(LabError::LeftAlone { lab, left });
    }
    Ok(true)
}

/// SIGKILLs every process in the namespace of identity `id` (named `ns`, for messages).
fn kill_in_netns(id: Option<(u64, u64)>, ns: &str) -> Result<(), LabError> {
    let Some(id) = id else {
        return Ok(());
    };
    for pid in sys::pids_in_netns(id).map_err(io_err(format!("listing processes in {ns}")))? {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    Ok(())
}

/// Ends the process groups of the lab's detached processes (`exec --detach`) whose leader
/// still runs, also any that left the node's namespace. A recorded pid is signalled only while
/// it belongs to the process recorded (same start time), never to a later one that reuses it,
/// and only when it was recorded for one of the lab's nodes.
fn end_detached(state: &State) {
    for d in crate::state::detached(&state.lab).unwrap_or_default() {
        let of_the_lab = d.pid > 1 && state.nodes.iter().any(|(n, _)| *n == d.node);
        if of_the_lab && d.running() {
            let pid = nix::unistd::Pid::from_raw(d.pid);
            let _ = nix::sys::signal::killpg(pid, nix::sys::signal::Signal::SIGKILL);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        }
    }
}

/// Starts `argv` in node `node` of the lab in `state`, detached: in its own process group
/// (a Ctrl-C at the terminal spares it), standard input from `/dev/null`, standard output and
/// error into `/run/rtemu/<lab>/<node>.<n>.log` (`n` = 1, 2, … per node). It is recorded in the
/// lab's state directory ([`crate::state::detached`]) and ended by [`down`]. The caller does
/// not wait for it: once the caller exits, init reaps it.
pub fn exec_detached(state: &State, node: &str, argv: &[String]) -> Result<Detached, LabError> {
    let mut cmd = node_command(state, node, argv)?;
    let dir = lab_dir(&state.lab);
    // The first free number: creating the file claims it, also against a concurrent exec.
    let mut n = 1;
    let (log_path, log) = loop {
        let path = dir.join(format!("{node}.{n}.log"));
        match std::fs::File::create_new(&path) {
            Ok(f) => break (path, f),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => n += 1,
            Err(e) => return Err(io_err(format!("creating {}", path.display()))(e)),
        }
    };
    let out = log.try_clone().map_err(io_err("opening the log"))?;
    cmd.stdin(Stdio::null()).stdout(out).stderr(log);
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let what = format!("`{}` in node `{node}`", argv.join(" "));
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let _ = std::fs::remove_file(&log_path);
            return Err(io_err(format!("starting {what}"))(e));
        }
    };
    let pid = i32::try_from(child.id()).expect("pids fit in i32");
    // The child is not reaped yet, so its /proc entry is there even if it has exited.
    let start_time = crate::state::proc_stat(pid).map_or(0, |(_, start)| start);
    let record = Detached {
        pid,
        start_time,
        node: node.to_owned(),
        command: argv.to_vec(),
        log: log_path,
    };
    if let Err(e) = crate::state::record_detached(&state.lab, &record) {
        // Nothing runs that the lab does not know of.
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
        let _ = child.wait();
        return Err(io_err(format!("recording {what}"))(e));
    }
    Ok(record)
}

/// Moves host interfaces back from their nodes under their original names. One that is not in
/// its node (never moved, or the node is gone) is skipped: the kernel returns a physical
/// interface to the host by itself when its namespace disappears.
fn give_back(handovers: &[Handover]) -> Result<(), LabError> {
    if handovers.is_empty() {
        return Ok(());
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .map_err(io_err("starting the netlink runtime"))?;
    // This thread never leaves the host's namespace.
    let host_ns = std::fs::File::open("/proc/self/ns/net")
        .map(OwnedFd::from)
        .map_err(io_err("opening the host's namespace"))?;
    runtime.block_on(async {
        for h in handovers {
            if !sys::netns_exists(&h.netns) {
                continue;
            }
            let handle = connect(&h.netns)?;
            let idx = link_indices(&handle)
                .await
                .map_err(nl_err(format!("listing interfaces of {}", h.netns)))?;
            let Some(&index) = idx.get(&h.ifname) else {
                continue;
            };
            let msg = LinkUnspec::new_with_index(index)
                .down()
                .setns_by_fd(host_ns.as_raw_fd())
                .name(h.host.clone())
                .build();
            handle
                .link()
                .set(msg)
                .execute()
                .await
                .map_err(nl_err(format!(
                    "giving {} back to the host as {}",
                    h.ifname, h.host
                )))?;
        }
        Ok(())
    })
}

/// The lab `--lab` names, or the only running lab when it is left out.
pub fn resolve_lab(lab: Option<&str>) -> Result<State, LabError> {
    let name = match lab {
        Some(l) => LabName::new(l)?,
        None => {
            let labs = State::labs()?;
            match labs.as_slice() {
                [one] => one.clone(),
                _ => return Err(LabError::WhichLab(labs.len())),
            }
        }
    };
    State::load(&name)?.ok_or_else(|| LabError::NoSuchLab(name.to_string()))
}

/// A command that runs `argv` in node `node` of the lab in `state`.
pub fn node_command(state: &State, node: &str, argv: &[String]) -> Result<Command, LabError> {
    let Some((_, ns)) = state.nodes.iter().find(|(n, _)| n == node) else {
        let nodes: Vec<&str> = state.nodes.iter().map(|(n, _)| n.as_str()).collect();
        return Err(LabError::NoSuchNode {
            lab: state.lab.to_string(),
            node: node.to_owned(),
            nodes: nodes.join(", "),
        });
    };
    let mut cmd = Command::new(argv.first().map_or("sh", String::as_str));
    cmd.args(argv.iter().skip(1));
    if let Some((_, cg)) = state.cgroups.iter().find(|(n, _)| n == node) {
        sys::join_cgroup_on_exec(&mut cmd, &cgroup::procs_file(cg))
            .map_err(io_err(format!("joining {}", cg.display())))?;
    }
    sys::enter_netns_on_exec(&mut cmd, ns).map_err(io_err(format!("entering {ns}")))?;
    Ok(cmd)
}

/// Everything after the state file: namespaces, sysctls, links, addresses, routes,
/// neighbours, hosts files and start-up commands.
fn build(topo: &Topology, state: &State, cpu: Option<&cgroup::Controller>) -> Result<(), LabError> {
    for ns in &state.namespaces {
        let mark = ownership_mark(&state.lab);
        sys::create_netns(ns, move || mark_this_netns(mark))
            .map_err(io_err(format!("creating namespace {ns}")))?;
    }
    if let Some(c) = cpu {
        for (node, dir) in &state.cgroups {
            let cores = topo.nodes[topo.node_index(node).expect("a node of the lab")]
                .cpu
                .expect("only limited nodes have cgroups");
            c.create(dir, cores).map_err(io_err(format!(
                "making the CPU-limit cgroup {}",
                dir.display()
            )))?;
        }
    }
    if let Some(ns) = state
        .namespaces
        .iter()
        .find(|ns| **ns == lab_netns(&topo.lab))
    {
        // Bridges and their ports carry the nodes' frames and must add none of their own:
        // without IPv6 they send no duplicate address probes or MLD reports into the LANs.
        set_sysctls(
            ns,
            vec![
                ("net.ipv6.conf.all.disable_ipv6".into(), "1".into()),
                ("net.ipv6.conf.default.disable_ipv6".into(), "1".into()),
            ],
        )?;
    }
    let plans = plan(topo);
    for (node, p) in topo.nodes.iter().zip(&plans) {
        let mut sysctls = vec![
            // Addresses are usable at once: nothing else is on these segments, so duplicate
            // address detection only delays the first packets.
            ("net.ipv6.conf.all.accept_dad".to_owned(), "0".to_owned()),
            (
                "net.ipv6.conf.default.accept_dad".to_owned(),
                "0".to_owned(),
            ),
        ];
        if p.forwarding {
            sysctls.push(("net.ipv4.ip_forward".into(), "1".into()));
            sysctls.push(("net.ipv6.conf.all.forwarding".into(), "1".into()));
        }
        set_sysctls(&node_netns(&topo.lab, &node.name), sysctls)?;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .map_err(io_err("starting the netlink runtime"))?;
    runtime.block_on(build_links(topo, state, &plans))?;
    for node in &topo.nodes {
        set_sysctls(&node_netns(&topo.lab, &node.name), node.sysctls.clone())?;
    }
    write_hosts(topo)?;
    start_commands(topo, state)
}

/// Writes sysctls inside namespace `ns`.
fn set_sysctls(ns: &str, sysctls: Vec<(String, String)>) -> Result<(), LabError> {
    if sysctls.is_empty() {
        return Ok(());
    }
    sys::in_netns(ns, move || {
        for (key, value) in &sysctls {
            let path = format!("/proc/sys/{}", key.replace('.', "/"));
            std::fs::write(&path, value)
                .map_err(|e| io::Error::new(e.kind(), format!("sysctl {key}={value}: {e}")))?;
        }
        Ok(())
    })
    .map_err(io_err(format!("setting sysctls in {ns}")))
}

/// A netlink connection whose socket lives in namespace `ns`.
fn connect(ns: &str) -> Result<Handle, LabError> {
    // The socket must be made on the thread in the namespace, and registered with this
    // runtime's reactor, so that thread enters the runtime too.
    let runtime = tokio::runtime::Handle::current();
    let (conn, handle, _) = sys::in_netns(ns, move || {
        let _entered = runtime.enter();
        rtnetlink::new_connection()
    })
    .map_err(io_err(format!("opening netlink in {ns}")))?;
    tokio::spawn(conn);
    Ok(handle)
}

fn open_netns(ns: &str) -> Result<OwnedFd, LabError> {
    std::fs::File::open(sys::netns_path(ns))
        .map(OwnedFd::from)
        .map_err(io_err(format!("opening namespace {ns}")))
}

/// One end of a veth pair: its name, namespace, MAC and MTU.
struct End<'a> {
    name: &'a str,
    netns: &'a OwnedFd,
    mac: Option<Mac>,
    mtu: Option<u32>,
}

impl<'a> End<'a> {
    /// A node's end of a segment: the file's interface name and MAC, in the node's namespace.
    fn node(m: &'a Attachment, node_fds: &'a [OwnedFd], mtu: Option<u32>) -> End<'a> {
        End {
            name: &m.ifname,
            netns: &node_fds[m.node],
            mac: Some(m.mac),
            mtu,
        }
    }

    /// An end in the lab's namespace (a bridge port or an engine end), named by rtemu.
    fn lab(name: &'a str, netns: &'a OwnedFd, mtu: Option<u32>) -> End<'a> {
        End {
            name,
            netns,
            mac: None,
            mtu,
        }
    }
}

/// Creates a veth pair with each end directly in its namespace, from the host's netlink socket.
async fn veth(host: &Handle, a: End<'_>, b: End<'_>) -> Result<(), rtnetlink::Error> {
    let mut peer = LinkUnspec::new_with_name(b.name).setns_by_fd(b.netns.as_raw_fd());
    if let Some(mac) = b.mac {
        peer = peer.address(mac.0.to_vec());
    }
    if let Some(mtu) = b.mtu {
        peer = peer.mtu(mtu);
    }
    let mut msg = LinkMessageBuilder::<LinkVeth>::new_with_info_kind(InfoKind::Veth)
        .name(a.name.to_owned())
        .setns_by_fd(a.netns.as_raw_fd())
        .set_info_data(InfoData::Veth(InfoVeth::Peer(peer.build())));
    if let Some(mac) = a.mac {
        msg = msg.address(mac.0.to_vec());
    }
    if let Some(mtu) = a.mtu {
        msg = msg.mtu(mtu);
    }
    host.link().add(msg.build()).execute().await
}

/// The index of the host interface `name`.
async fn host_index(host: &Handle, name: &str) -> Result<u32, LabError> {
    let mut links = host.link().get().match_name(name.to_owned()).execute();
    match links.try_next().await {
        Ok(Some(msg)) => Ok(msg.header.index),
        Ok(None) | Err(_) => Err(LabError::NoHostInterface(name.to_owned())),
    }
}

/// Interface name → index in the namespace `handle` talks to.
async fn link_indices(handle: &Handle) -> Result<BTreeMap<String, u32>, rtnetlink::Error> {
    let mut links = handle.link().get().execute();
    let mut out = BTreeMap::new();
    while let Some(msg) = links.try_next().await? {
        for attr in &msg.attributes {
            if let LinkAttribute::IfName(name) = attr {
                out.insert(name.clone(), msg.header.index);
            }
        }
    }
    Ok(out)
}

/// Brings interface `index` up and marks it as the lab's.
async fn mark_up(
    handle: &Handle,
    index: u32,
    mark: Option<&str>,
    controller: Option<u32>,
) -> Result<(), rtnetlink::Error> {
    let mut msg = LinkUnspec::new_with_index(index).up();
    if let Some(mark) = mark {
        msg = msg.append_extra_attribute(LinkAttribute::IfAlias(mark.to_owned()));
    }
    if let Some(c) = controller {
        msg = msg.controller(c);
    }
    handle.link().set(msg.build()).execute().await
}

async fn build_links(topo: &Topology, state: &State, plans: &[NodePlan]) -> Result<(), LabError> {
    let lab = &topo.lab;
    let mark = ownership_mark(lab);
    let (conn, host, _) = rtnetlink::new_connection().map_err(io_err("opening netlink"))?;
    tokio::spawn(conn);
    let node_fds = state
        .nodes
        .iter()
        .map(|(_, ns)| open_netns(ns))
        .collect::<Result<Vec<_>, _>>()?;
    let handles = state
        .nodes
        .iter()
        .map(|(_, ns)| connect(ns))
        .collect::<Result<Vec<_>, _>>()?;
    let lab_ns = state.namespaces.iter().find(|ns| **ns == lab_netns(lab));
    let lab_side = match lab_ns {
        Some(ns) => Some((open_netns(ns)?, connect(ns)?)),
        None => None,
    };

    // Links and LAN ports.
    let mut bridges = Vec::new();
    let mut engine_links = Vec::new();
    for (si, seg) in topo.segments.iter().enumerate() {
        match &seg.kind {
            SegmentKind::Link {
                impairment: Some(_),
            } => {
                let (fd, _) = lab_side
                    .as_ref()
                    .expect("a lab with impaired links has a lab namespace");
                for (m, end) in seg.members.iter().zip(engine_ends(si)) {
                    let node = End::node(m, &node_fds, seg.mtu);
                    veth(&host, node, End::lab(&end, fd, seg.mtu))
                        .await
                        .map_err(nl_err(format!(
                            "joining `{}` to the engine of link `{}`",
                            topo.nodes[m.node].name, seg.name
                        )))?;
                }
                engine_links.push(si);
            }
            SegmentKind::Link { impairment: None } => {
                let (a, b) = (&seg.members[0], &seg.members[1]);
                let ends = (
                    End::node(a, &node_fds, seg.mtu),
                    End::node(b, &node_fds, seg.mtu),
                );
                veth(&host, ends.0, ends.1)
                    .await
                    .map_err(nl_err(format!("creating link `{}`", seg.name)))?;
            }
            SegmentKind::Lan => {
                let (fd, handle) = lab_side
                    .as_ref()
                    .expect("a lab with LANs has a lab namespace");
                let bridge = format!("br{si}");
                let mut msg = LinkBridge::new(&bridge);
                if let Some(mtu) = seg.mtu {
                    msg = msg.mtu(mtu);
                }
                handle
                    .link()
                    .add(msg.build())
                    .execute()
                    .await
                    .map_err(nl_err(format!("creating the bridge of LAN `{}`", seg.name)))?;
                for (mi, m) in seg.members.iter().enumerate() {
                    let port = format!("s{si}p{mi}");
                    let node = End::node(m, &node_fds, seg.mtu);
                    veth(&host, node, End::lab(&port, fd, seg.mtu))
                        .await
                        .map_err(nl_err(format!(
                            "joining `{}` to LAN `{}`",
                            topo.nodes[m.node].name, seg.name
                        )))?;
                }
                bridges.push((si, bridge));
            }
            SegmentKind::External { host: name, mode } => {
                let m = &seg.members[0];
                let index = host_index(&host, name).await?;
                let msg = match mode {
                    ExternalMode::Move => LinkUnspec::new_with_index(index)
                        .setns_by_fd(node_fds[m.node].as_raw_fd())
                        .name(m.ifname.clone())
                        .build(),
                    ExternalMode::Macvlan => {
                        LinkMacVlan::new(&m.ifname, index, MacVlanMode::Bridge)
                            .setns_by_fd(node_fds[m.node].as_raw_fd())
                            .address(m.mac.0.to_vec())
                            .build()
                    }
                };
                let request = match mode {
                    ExternalMode::Move => host.link().set(msg).execute().await,
                    ExternalMode::Macvlan => host.link().add(msg).execute().await,
                };
                request.map_err(nl_err(format!(
                    "handing host interface {name} to node `{}`",
                    topo.nodes[m.node].name
                )))?;
            }
        }
    }

    // Bridges and their ports up, in the lab namespace.
    if let Some((_, handle)) = &lab_side {
        let idx = link_indices(handle)
            .await
            .map_err(nl_err("listing the lab's bridges"))?;
        for end in engine_links.iter().flat_map(|si| engine_ends(*si)) {
            mark_up(handle, idx[&end], Some(&mark), None)
                .await
                .map_err(nl_err(format!("setting up {end}")))?;
        }
        for (si, bridge) in &bridges {
            let b = idx[bridge];
            mark_up(handle, b, Some(&mark), None)
                .await
                .map_err(nl_err(format!("setting up {bridge}")))?;
            for mi in 0..topo.segments[*si].members.len() {
                let port = idx[&format!("s{si}p{mi}")];
                mark_up(handle, port, Some(&mark), Some(b))
                    .await
                    .map_err(nl_err(format!("attaching port {mi} of {bridge}")))?;
            }
        }
    }

    // Per node: interfaces up, addresses, routes, neighbours.
    for (ni, node) in topo.nodes.iter().enumerate() {
        let handle = &handles[ni];
        let what = |x: &str| format!("{x} in node `{}`", node.name);
        let idx = link_indices(handle)
            .await
            .map_err(nl_err(what("listing interfaces")))?;
        let lo = idx["lo"];
        handle
            .link()
            .set(LinkUnspec::new_with_index(lo).up().build())
            .execute()
            .await
            .map_err(nl_err(what("bringing lo up")))?;
        for net in &node.loopback {
            handle
                .address()
                .add(lo, net.addr(), net.prefix_len())
                .execute()
                .await
                .map_err(nl_err(what(&format!("adding {net} to lo"))))?;
        }
        for seg in &topo.segments {
            // A moved host interface is not rtemu's: it gets no mark.
            let moved = matches!(
                seg.kind,
                SegmentKind::External {
                    mode: ExternalMode::Move,
                    ..
                }
            );
            for m in seg.members.iter().filter(|m| m.node == ni) {
                let i = idx[&m.ifname];
                mark_up(handle, i, (!moved).then_some(mark.as_str()), None)
                    .await
                    .map_err(nl_err(what(&format!("setting up {}", m.ifname))))?;
                let addrs = [m.ipv4.map(IpNet::V4), m.ipv6.map(IpNet::V6)];
                for net in addrs.into_iter().flatten() {
                    handle
                        .address()
                        .add(i, net.addr(), net.prefix_len())
                        .execute()
                        .await
                        .map_err(nl_err(what(&format!("adding {net} to {}", m.ifname))))?;
                }
            }
        }
        for r in &plans[ni].routes {
            let dev = idx[&r.dev];
            let msg = match (r.dest, r.via) {
                (IpNet::V4(d), IpAddr::V4(g)) => RouteMessageBuilder::<std::net::Ipv4Addr>::new()
                    .destination_prefix(d.network(), d.prefix_len())
                    .gateway(g)
                    .output_interface(dev)
                    .build(),
                (IpNet::V6(d), IpAddr::V6(g)) => RouteMessageBuilder::<std::net::Ipv6Addr>::new()
                    .destination_prefix(d.network(), d.prefix_len())
                    .gateway(g)
                    .output_interface(dev)
                    .build(),
                _ => unreachable!("routing plans a gateway of the destination's family"),
            };
            handle
                .route()
                .add(msg)
                .execute()
                .await
                .map_err(nl_err(what(&format!(
                    "adding route {} via {}",
                    r.dest, r.via
                ))))?;
        }
        for n in &plans[ni].neighbours {
            handle
                .neighbours()
                .add(idx[&n.dev], n.addr)
                .link_local_address(&n.mac.0)
                .state(NeighbourState::Permanent)
                .execute()
                .await
                .map_err(nl_err(what(&format!("adding neighbour {}", n.addr))))?;
        }
    }
    Ok(())
}

/// `/etc/netns/<ns>/hosts` for every node: every node's name with its first addresses.
fn write_hosts(topo: &Topology) -> Result<(), LabError> {
    let mut hosts = String::from("127.0.0.1\tlocalhost\n::1\tlocalhost\n");
    for (ni, node) in topo.nodes.iter().enumerate() {
        let mut v4 = node
            .loopback
            .iter()
            .find(|n| matches!(n, IpNet::V4(_)))
            .map(|n| n.addr());
        let mut v6 = node
            .loopback
            .iter()
            .find(|n| matches!(n, IpNet::V6(_)))
            .map(|n| n.addr());
        for m in topo
            .segments
            .iter()
            .flat_map(|s| &s.members)
            .filter(|m| m.node == ni)
        {
            v4 = v4.or(m.ipv4.map(|n| IpAddr::V4(n.addr())));
            v6 = v6.or(m.ipv6.map(|n| IpAddr::V6(n.addr())));
        }
        for addr in [v4, v6].into_iter().flatten() {
            hosts.push_str(&format!("{addr}\t{}\n", node.name));
        }
    }
    for node in &topo.nodes {
        let dir = std::path::Path::new("/etc/netns").join(node_netns(&topo.lab, &node.name));
        std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::write(dir.join("hosts"), &hosts))
            .map_err(io_err(format!("writing {}/hosts", dir.display())))?;
    }
    Ok(())
}

/// Starts every node's start-up commands (`sh -c`), detached, output in
/// `/run/rtemu/<lab>/<node>.log`, with `RTEMU_LAB`, `RTEMU_NODE` and `RTEMU_DIR` (the lab's
/// state directory, removed at `down`) set. `down` ends them with their namespace.
fn start_commands(topo: &Topology, state: &State) -> Result<(), LabError> {
    for node in topo.nodes.iter().filter(|n| !n.run.is_empty()) {
        let log_path = lab_dir(&state.lab).join(format!("{}.log", node.name));
        let log = std::fs::File::create(&log_path)
            .map_err(io_err(format!("creating {}", log_path.display())))?;
        for line in &node.run {
            let argv = ["sh".to_owned(), "-c".to_owned(), line.clone()];
            let mut cmd = node_command(state, &node.name, &argv)?;
            let out = log.try_clone().map_err(io_err("opening the log"))?;
            let err = log.try_clone().map_err(io_err("opening the log"))?;
            // Who and where the command is, so one command line can serve every node (a
            // routing daemon's configuration and control socket, for instance).
            cmd.env("RTEMU_LAB", &topo.lab)
                .env("RTEMU_NODE", &node.name)
                .env("RTEMU_DIR", lab_dir(&state.lab))
                .envs(node.env.iter().map(|(k, v)| (k, v)))
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err);
            // Its own process group, so a Ctrl-C at the terminal that ran `up` spares it.
            std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
            cmd.spawn()
                .map_err(io_err(format!("starting `{line}` in node `{}`", node.name)))?;
        }
    }
    Ok(())
}
