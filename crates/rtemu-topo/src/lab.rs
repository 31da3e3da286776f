//! Bringing a lab up and down: namespaces, veth pairs, bridges, addresses, routes and static
//! neighbours, made through netlink.
//!
//! Layout. Every node is a namespace `rtemu-<lab>.<node>`. A point-to-point link is a veth
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

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::process::{Command, Stdio};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

use futures_util::TryStreamExt;
use ipnet::IpNet;
use rtnetlink::packet_route::address::AddressAttribute;
use rtnetlink::packet_route::link::{InfoData, InfoKind, InfoVeth, LinkAttribute, MacVlanMode};
use rtnetlink::packet_route::neighbour::NeighbourState;
use rtnetlink::{
    Handle, LinkBridge, LinkMacVlan, LinkMessageBuilder, LinkUnspec, LinkVeth, LinkVxlan,
    RouteMessageBuilder,
};

use crate::cgroup;
use crate::external::{self, HostSide};
use crate::part::{PartError, Stitching, Tunnel, TunnelRole};
use crate::routing::{plan, NodePlan};
use crate::state::{
    lab_dir, BadLabName, Detached, Handover, LabName, PartState, State, StateError,
};
use crate::sys;
use crate::topology::{Attachment, ExternalMode, Host, Mac, SegmentKind, Topology};

pub use crate::naming::{engine_ends, lab_netns, legacy_node_netns, node_netns, ownership_mark};

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
    /// A namespace with one of the lab's names belongs to another lab (one an older rtemu
    /// named, whose node namespaces were `rtemu-<lab>-<node>`).
    #[error("network namespace {ns} belongs to lab `{other}`: take that lab down first (`rtemu down {other}`) or name this lab differently (--name)")]
    OtherLabsNamespace {
        /// The namespace.
        ns: String,
        /// The lab whose mark it carries.
        other: String,
    },
    /// A host interface to be moved into a node is the one the host is reached through.
    #[error("host interface `{host}` carries {why}: moving it into a node would cut the host off; hand over another interface, use mode = \"macvlan\", or set `uplink = true` in its [[externals]] to move it anyway (`down` gives it back with its addresses and routes)")]
    Uplink {
        /// The host interface.
        host: String,
        /// What it carries.
        why: String,
    },
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
    /// The topology spans several hosts: each host builds its part, driven by a coordinator.
    #[error("lab `{lab}` spans hosts {hosts}: each host builds its own part, through its agent (`rtemu serve --listen`), which `rtemu up FILE` drives (docs/multihost.md); or remove the `[hosts]` table to run the whole lab on this machine")]
    MultiHost {
        /// The lab.
        lab: String,
        /// Its hosts, comma-separated.
        hosts: String,
    },
    /// One host's part cannot be planned.
    #[error(transparent)]
    Part(#[from] PartError),
    /// A part is brought up on a machine that does not hold its host's address.
    #[error("host `{host}`'s address {address} is on no interface here: bring up `{host}`'s part on `{host}`, or correct its address in [hosts]")]
    NotThisHost {
        /// The host of the part.
        host: String,
        /// Its `[hosts]` address.
        address: IpAddr,
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
    /// A node without a container and without start-up commands has no output to show.
    #[error("node `{0}` has no container and no `run` commands, so no output: `rtemu exec --detach` commands log to /run/rtemu/<lab>/<node>.<n>.log")]
    NoLogs(String),
    /// The lab's containers could not be brought up or down.
    #[error(transparent)]
    Containers(#[from] crate::launch::LaunchError),
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
    let all = Share {
        nodes: (0..topo.nodes.len()).collect(),
        segments: (0..topo.segments.len()).collect(),
        stitch: None,
    };
    build_share(topo, file, &all)
}

/// Brings up host `host`'s part of the multi-host lab `topo` ([`Topology::part`]): its nodes,
/// its segments, and a VXLAN tunnel per segment that reaches other hosts, with the VNIs and
/// UDP port of `stitching` (the same on every host). Run on that host: the tunnels start at
/// the interface that holds its `[hosts]` address, and their sockets stay in the namespace
/// this process runs in. The stitched segments' MTU follows [`crate::part::tunnel_mtu`].
/// On error, everything made so far is removed again.
pub fn up_part(
    topo: &Topology,
    file: &str,
    host: &str,
    stitching: &Stitching,
) -> Result<State, LabError> {
    let part = topo.part(host, stitching)?;
    let underlay = find_underlay(&part.host)?;
    let mut topo = topo.clone();
    for t in &part.tunnels {
        let ipv6 = part.host.address.is_ipv6();
        topo.segments[t.segment].mtu = Some(crate::part::tunnel_mtu(
            &topo,
            t.segment,
            &underlay.name,
            underlay.mtu,
            ipv6,
        )?);
    }
    let peers: Vec<&Host> = topo
        .hosts
        .iter()
        .filter(|h| part.tunnels.iter().any(|t| t.remotes.contains(&h.address)))
        .collect();
    let underlay_rtts = crate::underlay::measure(&peers);
    let share = Share {
        nodes: part.nodes.clone(),
        segments: part.segments.clone(),
        stitch: Some(Stitch {
            underlay: underlay.index,
            local: part.host.address,
            port: stitching.port,
            state: PartState {
                host: part.host.name.clone(),
                stitching: stitching.clone(),
                tunnels: part.tunnels,
                underlay: underlay_rtts,
            },
        }),
    };
    build_share(&topo, file, &share)
}

/// The VNIs the labs on this host use (their parts' tunnels): a new lab's must differ, since
/// the kernel keeps one VXLAN device per VNI and port. A lab whose state cannot be read is
/// skipped; the kernel still refuses a VNI in use.
pub fn vnis_in_use() -> Result<BTreeSet<u32>, LabError> {
    let mut used = BTreeSet::new();
    for lab in State::labs()? {
        if let Ok(Some(state)) = State::load(&lab) {
            used.extend(
                state
                    .part
                    .iter()
                    .flat_map(|p| p.tunnels.iter().map(|t| t.vni)),
            );
        }
    }
    Ok(used)
}

/// What of a topology one `up` builds: every node and segment, or one host's part.
struct Share {
    /// Nodes, as indices into the topology's.
    nodes: Vec<usize>,
    /// Segments with a member among them, as indices into the topology's.
    segments: Vec<usize>,
    /// A part's tunnels and where they start.
    stitch: Option<Stitch>,
}

impl Share {
    /// Whether this share holds the engine of impaired link `si` (see [`State::runs_engine_of`]).
    fn runs_engine_of(&self, topo: &Topology, si: usize) -> bool {
        self.stitch
            .as_ref()
            .is_none_or(|st| topo.segments[si].engine_host.as_deref() == Some(&st.state.host))
    }

    /// The tunnel of segment `si`, when it is stitched.
    fn tunnel(&self, si: usize) -> Option<&Tunnel> {
        self.stitch
            .as_ref()
            .and_then(|st| st.state.tunnels.iter().find(|t| t.segment == si))
    }
}

/// How a part's tunnels are made.
struct Stitch {
    /// The underlay interface's index in this process's namespace.
    underlay: u32,
    /// This host's address on it.
    local: IpAddr,
    /// The tunnels' UDP port.
    port: u16,
    /// What the state file records.
    state: PartState,
}

/// The interface that carries a host's tunnels: the one holding its address.
struct Underlay {
    index: u32,
    name: String,
    mtu: u32,
}

/// The interface of this process's namespace that holds `host`'s address.
fn find_underlay(host: &Host) -> Result<Underlay, LabError> {
    let address = host.address;
    let found = with_own_netlink(|handle| async move {
        let mut addrs = handle.address().get().execute();
        let mut index = None;
        while let Some(msg) = addrs.try_next().await.map_err(io::Error::other)? {
            let ours = msg.attributes.iter().any(|a| {
                matches!(a, AddressAttribute::Address(a) | AddressAttribute::Local(a) if *a == address)
            });
            if ours {
                index = Some(msg.header.index);
            }
        }
        let Some(index) = index else {
            return Ok(None);
        };
        let mut links = handle.link().get().match_index(index).execute();
        let link = links.try_next().await.map_err(io::Error::other)?;
        let (mut name, mut mtu) = (String::new(), 1500);
        for a in link.into_iter().flat_map(|m| m.attributes) {
            match a {
                LinkAttribute::IfName(n) => name = n,
                LinkAttribute::Mtu(m) => mtu = m,
                _ => {}
            }
        }
        Ok(Some(Underlay { index, name, mtu }))
    })
    .map_err(io_err("looking for the underlay interface"))?;
    found.ok_or_else(|| LabError::NotThisHost {
        host: host.name.clone(),
        address,
    })
}

/// Brings up `share` of `topo`, with `cpu` limits where the file asks. On error, everything
/// made so far is removed again.
fn build_share(topo: &Topology, file: &str, share: &Share) -> Result<State, LabError> {
    let limited: Vec<&crate::topology::Node> = share
        .nodes
        .iter()
        .map(|&n| &topo.nodes[n])
        // A container's limit is its runtime's (`--cpus`).
        .filter(|n| n.cpu.is_some() && n.container.is_none())
        .collect();
    let cpu = match limited.first() {
        None => None,
        Some(node) => {
            Some(cgroup::Controller::find().ok_or_else(|| LabError::CpuLimit(node.name.clone()))?)
        }
    };
    let lab = LabName::new(&topo.lab)?;
    if lab_dir(&lab).exists() {
        return Err(LabError::Exists(topo.lab.clone()));
    }
    let segments = || share.segments.iter().map(|&si| &topo.segments[si]);
    // The lab namespace holds LAN bridges and the ends of the engine's links.
    let has_lans = segments().any(|s| s.kind == SegmentKind::Lan)
        || share
            .segments
            .iter()
            .any(|&si| topo.segments[si].impairment().is_some() && share.runs_engine_of(topo, si));
    let nodes: Vec<(String, String)> = share
        .nodes
        .iter()
        .map(|&n| {
            let name = &topo.nodes[n].name;
            (name.clone(), node_netns(&topo.lab, name))
        })
        .collect();
    let mut namespaces: Vec<String> = nodes.iter().map(|(_, ns)| ns.clone()).collect();
    if has_lans {
        namespaces.push(lab_netns(&topo.lab));
    }
    let handovers = segments()
        .filter_map(|seg| match &seg.kind {
            SegmentKind::External {
                host,
                mode: ExternalMode::Move,
                uplink,
            } => Some((
                Handover {
                    host: host.clone(),
                    netns: node_netns(&topo.lab, &topo.nodes[seg.members[0].node].name),
                    ifname: seg.members[0].ifname.clone(),
                    saved: HostSide::default(),
                },
                *uplink,
            )),
            _ => None,
        })
        .map(|(h, uplink)| read_host_side(h, uplink))
        .collect::<Result<Vec<_>, _>>()?;
    // A namespace of the lab's names that no state file records is someone else's: `up` would
    // fail on it, and the clean-up after that failure would remove it.
    if let Some(ns) = namespaces.iter().find(|ns| sys::netns_exists(ns)) {
        let other = match find_netns(ns) {
            Ok(Found::Marked(Some(mark))) => mark.strip_prefix("rtemu:").map(str::to_owned),
            _ => None,
        };
        return Err(match other {
            Some(other) => LabError::OtherLabsNamespace {
                ns: ns.clone(),
                other,
            },
            None => LabError::ForeignNamespace(ns.clone()),
        });
    }
    // Every image is on this host before anything is made: a missing one fails here.
    if let Some(rt) = crate::launch::runtime_for(topo, &share.nodes)? {
        crate::launch::resolve_images(topo, &share.nodes, &rt)?;
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
        part: share.stitch.as_ref().map(|s| s.state.clone()),
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
    match build(topo, share, &state, cpu.as_ref()) {
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
    let state = State::load(&lab)?;
    // Containers first, found by their labels: also those of a lab whose state file is lost.
    let containers = remove_containers(&lab, state.as_ref());
    let Some(state) = state else {
        return Ok(containers? > 0);
    };
    give_back(&state.handovers)?;
    // Best effort: whatever of them is still in the lab's namespaces ends with the rest below.
    end_detached(&state);
    let mark = ownership_mark(&lab);
    let mut left = Vec::new();
    // Examined, then removed all together: each step is one pass, however many nodes.
    let mut ours = Vec::new();
    let mut ids = BTreeSet::new();
    let examined = on_builders(&state.namespaces, |ns| {
        let found = find_netns(ns).map_err(io_err(format!("examining namespace {ns}")))?;
        let id = match &found {
            Found::Marked(m) if m.as_deref() == Some(mark.as_str()) => {
                sys::netns_id(ns).map_err(io_err(format!("examining namespace {ns}")))?
            }
            _ => None,
        };
        Ok((found, id))
    })?;
    for (ns, (found, id)) in state.namespaces.iter().zip(examined) {
        match found {
            Found::Nothing => {}
            Found::Placeholder => {
                sys::delete_netns(ns).map_err(io_err(format!("removing namespace {ns}")))?
            }
            Found::Marked(m) if m.as_deref() == Some(mark.as_str()) => {
                ids.extend(id);
                ours.push(ns);
                continue;
            }
            Found::Marked(m) => {
                left.push(format!(
                    "namespace {ns} (marked {:?}, not {mark:?})",
                    m.unwrap_or_default()
                ));
                continue;
            }
        }
        remove_etc_netns(ns)?;
    }
    // Processes keep a namespace alive after its mount is gone: end them first, and once more
    // after, for one that entered in between (a starting engine).
    kill_in_netns(&ids, &lab)?;
    on_builders(&ours, |ns| {
        sys::delete_netns(ns).map_err(io_err(format!("removing namespace {ns}")))
    })?;
    kill_in_netns(&ids, &lab)?;
    for ns in ours {
        remove_etc_netns(ns)?;
    }
    for (_, cg) in &state.cgroups {
        cgroup::remove(cg).map_err(io_err(format!("removing the cgroup {}", cg.display())))?;
    }
    state.remove_dir()?;
    // Reported once the rest is gone: a second `down` finds what is left by its labels.
    containers?;
    if !left.is_empty() {
        return Err(LabError::LeftAlone { lab, left });
    }
    Ok(true)
}

/// Removes the containers labelled with lab `lab`; how many there were. A lab whose state
/// names image nodes needs the runtime; without a state file (lost, or never written), the
/// runtime is asked when it is installed. A lab with no image nodes costs nothing.
fn remove_containers(lab: &LabName, state: Option<&State>) -> Result<usize, LabError> {
    let rt = match state {
        Some(s) => {
            let here: Vec<usize> = s
                .nodes
                .iter()
                .filter_map(|(n, _)| s.topology.node_index(n))
                .collect();
            crate::launch::runtime_for(&s.topology, &here)?
        }
        None => crate::runtime::podman::Podman::find(),
    };
    let Some(rt) = rt else { return Ok(0) };
    let names = state.map(crate::launch::names).unwrap_or_default();
    crate::launch::remove(lab, &names, &rt).map_err(|e| crate::launch::LaunchError::from(e).into())
}

/// SIGKILLs every process in the namespaces of identities `ids` (of lab `lab`, for messages).
fn kill_in_netns(ids: &BTreeSet<(u64, u64)>, lab: &LabName) -> Result<(), LabError> {
    let pids = sys::pids_in_any_netns(ids).map_err(io_err(format!(
        "listing processes in lab {lab}'s namespaces"
    )))?;
    for pid in pids {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    Ok(())
}

/// Removes `/etc/netns/<ns>` (the hosts file of a node); missing is not an error.
fn remove_etc_netns(ns: &str) -> Result<(), LabError> {
    let etc = std::path::Path::new("/etc/netns").join(ns);
    match std::fs::remove_dir_all(&etc) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            Err(io_err(format!("removing {}", etc.display()))(e))
        }
        _ => Ok(()),
    }
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
/// With `bare`, it runs in the node's namespace even when the node has a container
/// ([`exec_command`]).
pub fn exec_detached(
    state: &State,
    node: &str,
    argv: &[String],
    bare: bool,
) -> Result<Detached, LabError> {
    let mut cmd = exec_command(state, node, argv, bare, false)?;
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

/// `h` with what its interface carries on the host (see [`external`]); an interface the host is
/// reached through is refused unless `uplink` says to move it anyway. An interface that is
/// not there is left for the move to report.
fn read_host_side(mut h: Handover, uplink: bool) -> Result<Handover, LabError> {
    let host = h.host.clone();
    let side = with_own_netlink(|handle| async move {
        let mut links = handle.link().get().match_name(host).execute();
        match links.try_next().await {
            Ok(Some(link)) => external::read(&handle, link.header.index)
                .await
                .map(Some)
                .map_err(io::Error::other),
            Ok(None) | Err(_) => Ok(None),
        }
    })
    .map_err(io_err(format!(
        "reading what host interface {} carries",
        h.host
    )))?;
    let Some(side) = side else {
        return Ok(h);
    };
    if let Some(why) = side.reaches_host().filter(|_| !uplink) {
        return Err(LabError::Uplink {
            host: h.host.clone(),
            why,
        });
    }
    h.saved = side;
    Ok(h)
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
            // As it was: up or down, with its addresses and routes.
            let (conn, host, _) = rtnetlink::new_connection().map_err(io_err("opening netlink"))?;
            tokio::spawn(conn);
            let restored = host_index(&host, &h.host).await?;
            external::restore(&host, restored, &h.saved)
                .await
                .map_err(nl_err(format!("restoring what {} carried", h.host)))?;
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

/// A command that runs `argv` in node `node` of the lab in `state` as `rtemu exec` does: in
/// the node's container when it has one (its file system and environment; `interactive`
/// keeps standard input open, with a terminal when there is one), else, or with `bare`, in
/// its namespace ([`node_command`]).
pub fn exec_command(
    state: &State,
    node: &str,
    argv: &[String],
    bare: bool,
    interactive: bool,
) -> Result<Command, LabError> {
    if bare || !crate::launch::has_container(state, node) {
        return node_command(state, node, argv);
    }
    let here = [state.topology.node_index(node).expect("a node of the lab")];
    let rt = crate::launch::runtime_for(&state.topology, &here)?.expect("an image node");
    let name = crate::launch::container_name(&state.lab, node);
    Ok(crate::runtime::Runtime::exec(&rt, &name, argv, interactive))
}

/// A command that prints node `node`'s output, as `rtemu logs` does: its container's (its
/// entrypoint's and command's), else that of its start-up commands
/// (`/run/rtemu/<lab>/<node>.log`); the last `tail` lines when given, then what follows when
/// `follow`.
pub fn logs_command(
    state: &State,
    node: &str,
    follow: bool,
    tail: Option<u32>,
) -> Result<Command, LabError> {
    // The node's name is checked against the lab's before it becomes a path.
    node_command(state, node, &[])?;
    if crate::launch::has_container(state, node) {
        let here = [state.topology.node_index(node).expect("a node of the lab")];
        let rt = crate::launch::runtime_for(&state.topology, &here)?.expect("an image node");
        let name = crate::launch::container_name(&state.lab, node);
        return Ok(crate::runtime::Runtime::logs(&rt, &name, follow, tail));
    }
    let log = lab_dir(&state.lab).join(format!("{node}.log"));
    if !log.exists() {
        return Err(LabError::NoLogs(node.to_owned()));
    }
    let mut cmd = Command::new("tail");
    cmd.arg("-n")
        .arg(tail.map_or("+1".to_owned(), |n| n.to_string()));
    if follow {
        cmd.arg("--follow=name");
    }
    cmd.arg("--").arg(log);
    Ok(cmd)
}

/// Everything after the state file: namespaces, sysctls, links, tunnels, addresses, routes,
/// neighbours, hosts files and start-up commands of `share`.
fn build(
    topo: &Topology,
    share: &Share,
    state: &State,
    cpu: Option<&cgroup::Controller>,
) -> Result<(), LabError> {
    // Routes and neighbours come from the whole lab, so every host plans the same.
    let plans = plan(topo);
    // Each namespace is marked and given its first sysctls from inside, before it is named.
    let mut first: Vec<(&str, Vec<(String, String)>)> = share
        .nodes
        .iter()
        .zip(&state.nodes)
        .map(|(&ni, (_, ns))| (ns.as_str(), node_sysctls(&plans[ni])))
        .collect();
    let lab_ns = lab_netns(&topo.lab);
    if state.namespaces.contains(&lab_ns) {
        // Bridges and their ports carry the nodes' frames and must add none of their own:
        // without IPv6 they send no duplicate address probes or MLD reports into the LANs.
        let off =
            ["all", "default"].map(|c| (format!("net.ipv6.conf.{c}.disable_ipv6"), "1".to_owned()));
        first.push((&lab_ns, off.into()));
    }
    on_builders(&first, |(ns, sysctls)| {
        let (mark, sysctls) = (ownership_mark(&state.lab), sysctls.clone());
        sys::create_netns(ns, move || {
            mark_this_netns(mark)?;
            write_sysctls(&sysctls)
        })
        .map_err(io_err(format!("creating namespace {ns}")))
    })?;
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
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .map_err(io_err("starting the netlink runtime"))?;
    runtime.block_on(build_links(topo, share, state))?;
    set_up_nodes(topo, share, state, &plans)?;
    write_hosts(topo, &share.nodes)?;
    start_commands(topo, &share.nodes, state)
}

/// The sysctls a node's namespace gets when it is made.
fn node_sysctls(plan: &NodePlan) -> Vec<(String, String)> {
    // Addresses are usable at once: nothing else is on these segments, so duplicate address
    // detection only delays the first packets.
    let mut sysctls = ["all", "default"]
        .map(|c| (format!("net.ipv6.conf.{c}.accept_dad"), "0".to_owned()))
        .to_vec();
    if plan.forwarding {
        sysctls.push(("net.ipv4.ip_forward".into(), "1".into()));
        sysctls.push(("net.ipv6.conf.all.forwarding".into(), "1".into()));
    }
    sysctls
}

/// How many threads make a lab's namespaces and set up its nodes at once. The work is the
/// kernel's, done in the calling thread's system calls, and much of it waits (for locks other
/// namespaces hold, for RCU) rather than computes: a few threads overlap the waits and use
/// both CPUs.
const BUILDERS: usize = 8;

/// `f` of every item, computed on up to [`BUILDERS`] threads (on this one if none can be
/// started), in the items' order. After a failure no new item is started; the error returned
/// is that of the first item in `items` that failed, whichever thread saw it, so a failing
/// `up` says the same every time.
fn on_builders<T: Sync, R: Send + Sync>(
    items: &[T],
    f: impl Fn(&T) -> Result<R, LabError> + Sync,
) -> Result<Vec<R>, LabError> {
    let next = AtomicUsize::new(0);
    let done: Vec<OnceLock<R>> = items.iter().map(|_| OnceLock::new()).collect();
    let failed = Mutex::new(None::<(usize, LabError)>);
    let work = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let Some(item) = items.get(i) else { break };
        match f(item) {
            Ok(r) => {
                let _ = done[i].set(r);
            }
            Err(e) => {
                let mut failed = failed.lock().unwrap_or_else(PoisonError::into_inner);
                if failed.as_ref().is_none_or(|(j, _)| i < *j) {
                    *failed = Some((i, e));
                }
                // Items not yet started stay so.
                next.store(items.len(), Ordering::Relaxed);
                break;
            }
        }
    };
    std::thread::scope(|s| {
        let started = (0..BUILDERS.min(items.len()))
            .filter(|_| std::thread::Builder::new().spawn_scoped(s, work).is_ok())
            .count();
        if started == 0 {
            work();
        }
    });
    if let Some((_, e)) = failed.into_inner().unwrap_or_else(PoisonError::into_inner) {
        return Err(e);
    }
    Ok(done
        .into_iter()
        .map(|r| r.into_inner().expect("every item is done when none failed"))
        .collect())
}

/// Writes sysctls inside namespace `ns`.
fn set_sysctls(ns: &str, sysctls: Vec<(String, String)>) -> Result<(), LabError> {
    if sysctls.is_empty() {
        return Ok(());
    }
    sys::in_netns(ns, move || write_sysctls(&sysctls))
        .map_err(io_err(format!("setting sysctls in {ns}")))
}

/// Writes sysctls in the calling thread's namespace. Only keys of `net.` can be a namespace's
/// own, and the kernel shows a namespace other than the host's the machine-wide ones
/// (`net.core.rmem_max`) read-only or not at all: those are refused.
fn write_sysctls(sysctls: &[(String, String)]) -> io::Result<()> {
    let proc = sys::ProcSys::here();
    for (key, value) in sysctls {
        if !key.starts_with("net.") {
            return Err(io::Error::other(format!(
                "sysctl {key} is the whole machine's"
            )));
        }
        let file = proc.open(key).map_err(|e| match e.kind() {
            // Root may write every key of a namespace's own that can be written.
            io::ErrorKind::NotFound | io::ErrorKind::PermissionDenied => io::Error::new(
                e.kind(),
                format!(
                    "sysctl {key} is not a network namespace's own (the kernel keeps it for \
                     the whole machine, shows it read-only, or has no such key): a node does \
                     not set it"
                ),
            ),
            _ => io::Error::new(e.kind(), format!("sysctl {key}={value}: {e}")),
        })?;
        std::io::Write::write_all(&mut &file, value.as_bytes())
            .map_err(|e| io::Error::new(e.kind(), format!("sysctl {key}={value}: {e}")))?;
    }
    Ok(())
}

/// A netlink connection whose socket lives in namespace `ns`, and the future that carries its
/// messages (to be polled on the current runtime; the socket closes when it is dropped).
fn connect_in(ns: &str) -> Result<(impl std::future::Future<Output = ()>, Handle), LabError> {
    // The socket must be made on the thread in the namespace, and registered with this
    // runtime's reactor, so that thread enters the runtime too.
    let runtime = tokio::runtime::Handle::current();
    let (conn, handle, _) = sys::in_netns(ns, move || {
        let _entered = runtime.enter();
        rtnetlink::new_connection()
    })
    .map_err(io_err(format!("opening netlink in {ns}")))?;
    Ok((conn, handle))
}

/// A netlink connection whose socket lives in namespace `ns`, open as long as the runtime.
fn connect(ns: &str) -> Result<Handle, LabError> {
    let (conn, handle) = connect_in(ns)?;
    tokio::spawn(conn);
    Ok(handle)
}

/// Runs `f` with a netlink connection into namespace `ns`, whose socket is closed as soon as
/// `f` is done: a lab of any size holds one such socket at a time.
async fn with_netlink<T, F>(ns: &str, f: impl FnOnce(Handle) -> F) -> Result<T, LabError>
where
    F: std::future::Future<Output = Result<T, LabError>>,
{
    let (conn, handle) = connect_in(ns)?;
    let work = std::pin::pin!(f(handle));
    match futures_util::future::select(work, std::pin::pin!(conn)).await {
        futures_util::future::Either::Left((done, _)) => done,
        futures_util::future::Either::Right(((), _)) => Err(LabError::Io {
            what: format!("talking to netlink in {ns}"),
            source: io::Error::other("the connection closed"),
        }),
    }
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
    fn node(m: &'a Attachment, netns: &'a OwnedFd, mtu: Option<u32>) -> End<'a> {
        End {
            name: &m.ifname,
            netns,
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

/// How many node namespaces [`Namespaces`] keeps open: enough that the links of a chain, a
/// star or a grid in file order mostly find their nodes open.
const OPEN_NAMESPACES: usize = 16;

/// Descriptors of the nodes' namespaces, opened when a link needs them and kept for the next
/// few links, the least recently used closed first: at most [`OPEN_NAMESPACES`], plus those
/// the caller still holds, whatever the lab's size.
struct Namespaces<'a> {
    /// Each node's namespace by node index; `None` for nodes of other hosts.
    names: &'a [Option<&'a str>],
    /// The open ones, the most recently used last.
    open: VecDeque<(usize, Rc<OwnedFd>)>,
}

impl<'a> Namespaces<'a> {
    fn new(names: &'a [Option<&'a str>]) -> Namespaces<'a> {
        Namespaces {
            names,
            open: VecDeque::with_capacity(OPEN_NAMESPACES),
        }
    }

    /// Node `node`'s namespace, opened unless it still is.
    fn get(&mut self, node: usize) -> Result<Rc<OwnedFd>, LabError> {
        let fd = match self.open.iter().position(|(n, _)| *n == node) {
            Some(i) => self.open.remove(i).expect("a position in the queue").1,
            None => {
                if self.open.len() == OPEN_NAMESPACES {
                    self.open.pop_front();
                }
                Rc::new(open_netns(self.names[node].expect("a node of the share"))?)
            }
        };
        self.open.push_back((node, Rc::clone(&fd)));
        Ok(fd)
    }
}

/// Creates tunnel `t` of a part directly in its namespace `netns` from the host's netlink
/// socket, so its UDP socket is the host's: it starts at `stitch`'s underlay and address, and
/// is a node's interface (with `mac`), an engine end or a bridge port, with MTU `mtu`.
async fn tunnel(
    host: &Handle,
    t: &Tunnel,
    stitch: &Stitch,
    netns: &OwnedFd,
    mac: Option<Mac>,
    mtu: Option<u32>,
) -> Result<(), rtnetlink::Error> {
    let mut msg = LinkVxlan::new(&t.ifname, t.vni)
        .dev(stitch.underlay)
        .port(stitch.port);
    msg = match stitch.local {
        IpAddr::V4(a) => msg.local(a),
        IpAddr::V6(a) => msg.local6(a),
    };
    if t.role != TunnelRole::Bridge {
        // A link has one far end: every frame goes there, and there is nothing to learn.
        msg = match t.remotes[0] {
            IpAddr::V4(a) => msg.remote(a),
            IpAddr::V6(a) => msg.remote6(a),
        }
        .learning(false);
    }
    let mut msg = msg.setns_by_fd(netns.as_raw_fd());
    if let Some(mac) = mac {
        msg = msg.address(mac.0.to_vec());
    }
    if let Some(mtu) = mtu {
        msg = msg.mtu(mtu);
    }
    host.link().add(msg.build()).execute().await
}

/// Adds an all-zero forwarding entry to `remote` on the LAN tunnel `index` (in the namespace
/// `handle` talks to): broadcasts, multicasts and unknown destinations are copied to every
/// host with members (head-end replication), with no multicast needed on the underlay.
async fn flood_to(handle: &Handle, index: u32, remote: IpAddr) -> Result<(), rtnetlink::Error> {
    use rtnetlink::packet_core::{
        NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_APPEND, NLM_F_CREATE, NLM_F_REQUEST,
    };
    use rtnetlink::packet_route::neighbour::{
        NeighbourAddress, NeighbourAttribute, NeighbourFlags,
    };
    let mut req = handle.neighbours().add_bridge(index, &[0; 6]);
    let msg = req.message_mut();
    msg.header.flags = NeighbourFlags::Own;
    msg.attributes
        .push(NeighbourAttribute::Destination(match remote {
            IpAddr::V4(a) => NeighbourAddress::Inet(a),
            IpAddr::V6(a) => NeighbourAddress::Inet6(a),
        }));
    // Appended, not created exclusively: one all-zero entry per remote host.
    let mut nl = NetlinkMessage::from(rtnetlink::packet_route::RouteNetlinkMessage::NewNeighbour(
        msg.clone(),
    ));
    nl.header.flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_APPEND;
    let mut replies = handle.clone().request(nl)?;
    while let Some(reply) = futures_util::StreamExt::next(&mut replies).await {
        if let NetlinkPayload::Error(e) = reply.payload {
            return Err(rtnetlink::Error::NetlinkError(e));
        }
    }
    Ok(())
}

/// Makes the links, LANs and tunnels of `share`, then sets up every node: interfaces up,
/// addresses, routes and neighbours.
///
/// Descriptors stay bounded whatever the lab's size: a node's namespace is opened when one of
/// its links is made and closed soon after ([`Namespaces`]), and a node gets a netlink
/// connection only while it is set up ([`with_netlink`]). Only the host's connection and the
/// lab namespace's stay open throughout.
async fn build_links(topo: &Topology, share: &Share, state: &State) -> Result<(), LabError> {
    let lab = &topo.lab;
    let mark = ownership_mark(lab);
    let (conn, host_handle, _) = rtnetlink::new_connection().map_err(io_err("opening netlink"))?;
    tokio::spawn(conn);
    let host = &host_handle;
    let mut names = vec![None; topo.nodes.len()];
    for (&ni, (_, ns)) in share.nodes.iter().zip(&state.nodes) {
        names[ni] = Some(ns.as_str());
    }
    let local = |m: &&Attachment| names[m.node].is_some();
    let mut nodes = Namespaces::new(&names);
    let lab_ns = state.namespaces.iter().find(|ns| **ns == lab_netns(lab));
    let lab_side = match lab_ns {
        Some(ns) => Some((open_netns(ns)?, connect(ns)?)),
        None => None,
    };

    // Links, LAN ports and tunnels.
    let mut bridges = Vec::new();
    let mut engine_links = Vec::new();
    for &si in &share.segments {
        let seg = &topo.segments[si];
        let tunnel_of = share.tunnel(si);
        let stitch = share.stitch.as_ref();
        let make_tunnel = |netns, mac| {
            let t = tunnel_of.expect("a stitched segment");
            let st = stitch.expect("a part");
            let what = format!(
                "creating the VXLAN tunnel {} (VNI {}) of `{}`",
                t.ifname, t.vni, seg.name
            );
            async move {
                tunnel(host, t, st, netns, mac, seg.mtu)
                    .await
                    .map_err(nl_err(what))
            }
        };
        match &seg.kind {
            SegmentKind::Link { impairment } => {
                let engine_here = impairment.is_some() && share.runs_engine_of(topo, si);
                if engine_here {
                    let (fd, _) = lab_side
                        .as_ref()
                        .expect("a lab with impaired links has a lab namespace");
                    for (m, end) in seg.members.iter().zip(engine_ends(si)) {
                        if !local(&m) {
                            continue;
                        }
                        let node_fd = nodes.get(m.node)?;
                        let node = End::node(m, &node_fd, seg.mtu);
                        veth(host, node, End::lab(&end, fd, seg.mtu))
                            .await
                            .map_err(nl_err(format!(
                                "joining `{}` to the engine of link `{}`",
                                topo.nodes[m.node].name, seg.name
                            )))?;
                    }
                    if tunnel_of.is_some() {
                        make_tunnel(fd, None).await?;
                    }
                    engine_links.push(si);
                } else if let Some(t) = tunnel_of {
                    let TunnelRole::Node { member } = t.role else {
                        unreachable!("a link's tunnel away from its engine is a node's interface")
                    };
                    let m = &seg.members[member];
                    make_tunnel(&*nodes.get(m.node)?, Some(m.mac)).await?;
                } else {
                    let (a, b) = (&seg.members[0], &seg.members[1]);
                    let (a_fd, b_fd) = (nodes.get(a.node)?, nodes.get(b.node)?);
                    let ends = (End::node(a, &a_fd, seg.mtu), End::node(b, &b_fd, seg.mtu));
                    veth(host, ends.0, ends.1)
                        .await
                        .map_err(nl_err(format!("creating link `{}`", seg.name)))?;
                }
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
                let mut ports = Vec::new();
                for (mi, m) in seg.members.iter().enumerate().filter(|(_, m)| local(m)) {
                    let port = format!("s{si}p{mi}");
                    let node_fd = nodes.get(m.node)?;
                    let node = End::node(m, &node_fd, seg.mtu);
                    veth(host, node, End::lab(&port, fd, seg.mtu))
                        .await
                        .map_err(nl_err(format!(
                            "joining `{}` to LAN `{}`",
                            topo.nodes[m.node].name, seg.name
                        )))?;
                    ports.push(port);
                }
                if let Some(t) = tunnel_of {
                    make_tunnel(fd, None).await?;
                    ports.push(t.ifname.clone());
                }
                bridges.push((bridge, ports));
            }
            SegmentKind::External {
                host: name, mode, ..
            } => {
                let m = &seg.members[0];
                let index = host_index(host, name).await?;
                let node_fd = nodes.get(m.node)?;
                let msg = match mode {
                    ExternalMode::Move => LinkUnspec::new_with_index(index)
                        .setns_by_fd(node_fd.as_raw_fd())
                        .name(m.ifname.clone())
                        .build(),
                    ExternalMode::Macvlan => {
                        LinkMacVlan::new(&m.ifname, index, MacVlanMode::Bridge)
                            .setns_by_fd(node_fd.as_raw_fd())
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
    drop(nodes);

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
        for (bridge, ports) in &bridges {
            let b = idx[bridge];
            mark_up(handle, b, Some(&mark), None)
                .await
                .map_err(nl_err(format!("setting up {bridge}")))?;
            for port in ports {
                mark_up(handle, idx[port], Some(&mark), Some(b))
                    .await
                    .map_err(nl_err(format!("attaching {port} to {bridge}")))?;
            }
        }
        let lan_tunnels = share
            .stitch
            .iter()
            .flat_map(|st| &st.state.tunnels)
            .filter(|t| t.role == TunnelRole::Bridge);
        for t in lan_tunnels {
            for &remote in &t.remotes {
                flood_to(handle, idx[&t.ifname], remote)
                    .await
                    .map_err(nl_err(format!(
                        "adding {remote} to the flood list of {}",
                        t.ifname
                    )))?;
            }
        }
    }

    Ok(())
}

/// Per node, over a connection of its own, once every link exists: interfaces up, addresses,
/// routes, neighbours, and the node's own sysctls (which may name its interfaces).
fn set_up_nodes(
    topo: &Topology,
    share: &Share,
    state: &State,
    plans: &[NodePlan],
) -> Result<(), LabError> {
    let mark = ownership_mark(&topo.lab);
    let mut members: Vec<Vec<&Attachment>> = vec![Vec::new(); topo.nodes.len()];
    let mut moved = vec![Vec::new(); topo.nodes.len()];
    for seg in &topo.segments {
        // A moved host interface is not rtemu's: it gets no mark.
        let is_moved = matches!(
            seg.kind,
            SegmentKind::External {
                mode: ExternalMode::Move,
                ..
            }
        );
        for m in &seg.members {
            members[m.node].push(m);
            moved[m.node].push(is_moved);
        }
    }
    let nodes: Vec<(usize, &str)> = share
        .nodes
        .iter()
        .zip(&state.nodes)
        .map(|(&ni, (_, ns))| (ni, ns.as_str()))
        .collect();
    on_builders(&nodes, |&(ni, ns)| {
        let node = NodeSetUp {
            node: &topo.nodes[ni],
            members: &members[ni],
            moved: &moved[ni],
            plan: &plans[ni],
            mark: &mark,
        };
        tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .map_err(io_err("starting the netlink runtime"))?
            .block_on(with_netlink(
                ns,
                |handle| async move { node.run(&handle).await },
            ))?;
        set_sysctls(ns, topo.nodes[ni].sysctls.clone())
    })
    .map(drop)
}

/// What one node gets once its links exist.
struct NodeSetUp<'a> {
    node: &'a crate::topology::Node,
    /// Its attachments, in file order.
    members: &'a [&'a Attachment],
    /// For each attachment, whether it is a host interface moved in (which gets no mark).
    moved: &'a [bool],
    plan: &'a NodePlan,
    mark: &'a str,
}

impl NodeSetUp<'_> {
    /// Interfaces up, addresses, routes and neighbours, through `handle` (in the node).
    async fn run(&self, handle: &Handle) -> Result<(), LabError> {
        let what = |x: &str| format!("{x} in node `{}`", self.node.name);
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
        for net in &self.node.loopback {
            handle
                .address()
                .add(lo, net.addr(), net.prefix_len())
                .execute()
                .await
                .map_err(nl_err(what(&format!("adding {net} to lo"))))?;
        }
        for (m, &moved) in self.members.iter().zip(self.moved) {
            let i = idx[&m.ifname];
            mark_up(handle, i, (!moved).then_some(self.mark), None)
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
        for r in &self.plan.routes {
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
        for n in &self.plan.neighbours {
            handle
                .neighbours()
                .add(idx[&n.dev], n.addr)
                .link_local_address(&n.mac.0)
                .state(NeighbourState::Permanent)
                .execute()
                .await
                .map_err(nl_err(what(&format!("adding neighbour {}", n.addr))))?;
        }
        Ok(())
    }
}

/// `/etc/netns/<ns>/hosts` for the nodes `local` (indices): every node's name with its first
/// addresses, those on other hosts included. One file, hard-linked into every node's
/// directory: a copy per node would write every name once per node, which grows with the
/// square of the lab (2 GB for 10,000 nodes). So the nodes share it, edits too.
fn write_hosts(topo: &Topology, local: &[usize]) -> Result<(), LabError> {
    let loopback = |n: &crate::topology::Node, v4: bool| {
        n.loopback
            .iter()
            .find(|a| matches!(a, IpNet::V4(_)) == v4)
            .map(|a| a.addr())
    };
    let mut first: Vec<[Option<IpAddr>; 2]> = topo
        .nodes
        .iter()
        .map(|n| [loopback(n, true), loopback(n, false)])
        .collect();
    for m in topo.segments.iter().flat_map(|s| &s.members) {
        let [v4, v6] = &mut first[m.node];
        *v4 = v4.or(m.ipv4.map(|n| IpAddr::V4(n.addr())));
        *v6 = v6.or(m.ipv6.map(|n| IpAddr::V6(n.addr())));
    }
    let mut hosts = String::from("127.0.0.1\tlocalhost\n::1\tlocalhost\n");
    for (node, addrs) in topo.nodes.iter().zip(&first) {
        for addr in addrs.iter().flatten() {
            hosts.push_str(&format!("{addr}\t{}\n", node.name));
        }
    }
    let mut written: Option<std::path::PathBuf> = None;
    for node in local.iter().map(|&ni| &topo.nodes[ni]) {
        let dir = std::path::Path::new("/etc/netns").join(node_netns(&topo.lab, &node.name));
        let path = dir.join("hosts");
        std::fs::create_dir_all(&dir)
            .and_then(|()| match &written {
                None => rtemu_sys::output::write(&path, hosts.as_bytes()),
                Some(first) => {
                    // A file left by a crash is replaced.
                    match std::fs::remove_file(&path) {
                        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                        _ => {}
                    }
                    std::fs::hard_link(first, &path)
                }
            })
            .map_err(io_err(format!("writing {}", path.display())))?;
        written.get_or_insert(path);
    }
    Ok(())
}

/// Starts the start-up commands of the nodes `local` (indices) (`sh -c`), detached, output in
/// `/run/rtemu/<lab>/<node>.log`, with `RTEMU_LAB`, `RTEMU_NODE` and `RTEMU_DIR` (the lab's
/// state directory, removed at `down`) set. `down` ends them with their namespace.
fn start_commands(topo: &Topology, local: &[usize], state: &State) -> Result<(), LabError> {
    // An image node's start-up commands run in its container, once it started.
    for node in local
        .iter()
        .map(|&ni| &topo.nodes[ni])
        .filter(|n| !n.run.is_empty() && n.container.is_none())
    {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Results come back in the items' order, however the threads shared them out.
    #[test]
    fn builders_return_each_result_in_its_items_place() {
        let items: Vec<u64> = (0..500).collect();
        let out = on_builders(&items, |&i| {
            // Uneven work, so the threads finish out of order.
            std::thread::sleep(std::time::Duration::from_micros((i * 7919) % 200));
            Ok(i * i)
        })
        .unwrap();
        assert_eq!(out, items.iter().map(|i| i * i).collect::<Vec<_>>());
        assert_eq!(on_builders(&[] as &[u8], |_| Ok(())).unwrap(), []);
    }

    /// Every item from the tenth on fails: whichever thread fails first, the error reported
    /// is the tenth item's (taken before any later one, so always run to its end).
    #[test]
    fn builders_report_the_first_failing_item() {
        let items: Vec<usize> = (0..200).collect();
        for _ in 0..20 {
            let e = on_builders(&items, |&i| {
                std::thread::sleep(std::time::Duration::from_micros(((i * 31) % 7) as u64 * 50));
                match i {
                    i if i >= 10 => Err(LabError::NoHostInterface(format!("item {i}"))),
                    i => Ok(i),
                }
            })
            .unwrap_err();
            assert!(
                matches!(&e, LabError::NoHostInterface(n) if n == "item 10"),
                "{e}"
            );
        }
    }
}
