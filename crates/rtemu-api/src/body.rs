//! The API's request and reply bodies (see docs/api.md), the error body among them, and the
//! views of a lab built from its state file.

use std::collections::BTreeMap;

use rtemu_model::direction::Ways;
use rtemu_topo::state::{LabName, State};
use rtemu_topo::topology::{ExternalMode, SegmentKind};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Whether a lab works.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum LabStatus {
    /// Everything is in place (and its engine answers, when it has impaired links).
    Up,
    /// Its `up` did not finish: bring it down.
    Incomplete,
    /// Its engine does not answer: its impaired links carry nothing; bring it down.
    Degraded,
    /// Its state directory holds no state rtemu can read (`error` says why): the other labs
    /// are listed all the same; inspect the directory.
    Unreadable,
}

impl LabStatus {
    /// How lab `state` (one on this machine, or this host's part) stands; asks its engine
    /// when it has one.
    pub fn of(state: &State) -> LabStatus {
        use rtemu_control::lab::Health;
        match rtemu_control::lab::health(state) {
            Health::Up => LabStatus::Up,
            Health::Incomplete => LabStatus::Incomplete,
            Health::Degraded => LabStatus::Degraded,
        }
    }
}

/// A running lab.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Lab {
    /// Its name.
    pub name: String,
    /// The topology file it came from (`<request>` for a topology sent inline).
    pub file: String,
    /// Whether it works.
    pub status: LabStatus,
    /// Its nodes.
    pub nodes: Vec<Node>,
    /// Its point-to-point links.
    pub links: Vec<Link>,
    /// Its LANs.
    pub lans: Vec<Lan>,
    /// The host interfaces handed to its nodes.
    pub externals: Vec<External>,
    /// The processes `rtemu exec --detach` started in it.
    pub detached: Vec<Detached>,
    /// Why its state cannot be read, when its status is `unreadable`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The CPUs the processes started in its nodes run on, as the kernel writes lists
    /// (`0,2-3`), when they are kept off its engine's (`programs_cpus = "off-engine"`);
    /// absent: every CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub programs_cpus: Option<String>,
    /// A lab across hosts, as the server that coordinates it shows it: each host's part,
    /// in `[hosts]` order (its status is `up` only when every part is). Empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<HostPart>,
    /// Its engines, with their release threads (the links each serves, its class, CPU and
    /// load) as they were when the view was made; `GET /v1/labs/{lab}/stats` reads them live.
    /// On one machine, its engine, named by the machine's host name (a host's part: by the
    /// host's `[hosts]` name); a lab across hosts, as the server that coordinates it shows
    /// it: the engine of each engine host, in `[hosts]` order. An engine that does not answer
    /// is left out (the status, or its host's part, says why), as is a lab without impaired
    /// links, which has none. Not part of `revision`: their counters move all the time, and
    /// which thread serves which link changes only with the lab (or its parts), which it
    /// covers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub engines: Vec<HostEngine>,
    /// Changes whenever anything above does (see [`revision`]), the engines' readings aside:
    /// the `ETag` of `GET /v1/labs/{lab}`, and what the lab list says of the lab.
    pub revision: String,
}

/// A lab as the lab list (`GET /v1/labs`) shows it: what it is and how it stands, its
/// topology counted rather than listed. `GET /v1/labs/{lab}` gives it whole, when its
/// `revision` is not the one the caller holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct LabSummary {
    /// Its name.
    pub name: String,
    /// The topology file it came from (`<request>` for a topology sent inline).
    pub file: String,
    /// Whether it works.
    pub status: LabStatus,
    /// Why its state cannot be read, when its status is `unreadable`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How many nodes it has (of one host's part: that host's).
    pub nodes: usize,
    /// How many point-to-point links.
    pub links: usize,
    /// How many LANs.
    pub lans: usize,
    /// How many host interfaces are handed to its nodes.
    pub externals: usize,
    /// How many processes `rtemu exec --detach` started in it.
    pub detached: usize,
    /// As [`Lab::programs_cpus`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub programs_cpus: Option<String>,
    /// As [`Lab::hosts`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<HostPart>,
    /// The lab's [`Lab::revision`] now: a caller holding the lab of that revision need not
    /// fetch it again.
    pub revision: String,
}

/// How one host's part of a lab across hosts stands, as its agent says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum PartStatus {
    /// Built, its engine (if it runs one) answering.
    Up,
    /// Its `up` did not finish.
    Incomplete,
    /// Its engine does not answer: the impaired links it carries carry nothing.
    Degraded,
    /// The agent answers but holds no part of the lab (taken down, or the host restarted).
    Missing,
    /// The agent does not answer, or refuses the question.
    Unreachable,
}

/// One host of a lab across hosts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct HostPart {
    /// The host.
    pub host: String,
    /// Where its agent listens (IP:PORT).
    pub agent: String,
    /// How its part stands.
    pub status: PartStatus,
    /// Why it is not up, naming the host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// The CPUs the processes started in its nodes run on, when they are kept off its
    /// engine's, as [`Lab::programs_cpus`] says it of a lab on one host; absent: every CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub programs_cpus: Option<String>,
}

/// A node: a network namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Node {
    /// Its name.
    pub name: String,
    /// Its network namespace (`ip netns exec NETNS …`).
    pub netns: String,
    /// Addresses on its loopback interface, as CIDR.
    pub loopback: Vec<String>,
    /// Its interfaces on links and LANs.
    pub interfaces: Vec<Interface>,
    /// In a multi-host lab, the host it runs on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The container it runs, when it has an image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<NodeContainer>,
}

/// A node's container and how it stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct NodeContainer {
    /// Its image.
    pub image: String,
    /// `created`, `running`, `healthy`, `unhealthy`, `exited`, `missing`, or the runtime's own
    /// word.
    pub state: String,
    /// Its exit status, once it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
}

impl NodeContainer {
    /// A container of `image` in `status`.
    pub fn new(image: String, status: &rtemu_topo::runtime::Status) -> NodeContainer {
        use rtemu_topo::runtime::Status;
        let (state, exit_code) = match status {
            Status::Exited { exit_code } => ("exited".to_owned(), Some(*exit_code)),
            Status::Other { runtime_state } => (runtime_state.clone(), None),
            other => (other.to_string(), None),
        };
        NodeContainer {
            image,
            state,
            exit_code,
        }
    }
}

/// One interface of a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Interface {
    /// Its name in the node.
    pub name: String,
    /// Its Ethernet address.
    pub mac: String,
    /// Its addresses, as CIDR (IPv4 first).
    pub addresses: Vec<String>,
    /// The link or LAN it is on.
    pub segment: String,
}

/// A point-to-point link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Link {
    /// Its name.
    pub name: String,
    /// Its first endpoint.
    pub a: String,
    /// Its second endpoint.
    pub b: String,
    /// Whether the real-time engine carries it.
    pub impaired: bool,
    /// The netem parameters from `a` to `b` as the topology gave them (`null`: none).
    pub a_to_b: Option<String>,
    /// The netem parameters from `b` to `a` as the topology gave them (`null`: none).
    pub b_to_a: Option<String>,
    /// For a link between hosts: the underlay it crosses besides its model, its round trip
    /// measured when the part came up (absent on one machine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub underlay: Option<rtemu_control::message::Underlay>,
}

/// A LAN: a bridge joining its members.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Lan {
    /// Its name.
    pub name: String,
    /// The nodes on it.
    pub members: Vec<String>,
    /// Its IPv4 subnet.
    pub ipv4: Option<String>,
    /// Its IPv6 subnet.
    pub ipv6: Option<String>,
}

/// A host interface handed to a node (`[[externals]]`), so hosts outside the lab take part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct External {
    /// Its segment's name (the `segment` of the node's interface on it).
    pub name: String,
    /// The node that has it.
    pub node: String,
    /// The host interface.
    pub host: String,
    /// `move` (the interface itself is in the node) or `macvlan` (the node has a macvlan on
    /// it, and the host keeps it).
    pub mode: String,
}

/// One interface's packet counters as the kernel keeps them (`GET …/counters`): for ideal
/// links and LANs the only counters there are, since the engine does not carry them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct InterfaceCounters {
    /// The node.
    pub node: String,
    /// The interface's name in the node.
    pub interface: String,
    /// The link, LAN or external interface it is on.
    pub segment: String,
    /// Bytes it received.
    pub rx_bytes: u64,
    /// Frames it received.
    pub rx_packets: u64,
    /// Frames it dropped on receive.
    pub rx_dropped: u64,
    /// Bytes it sent.
    pub tx_bytes: u64,
    /// Frames it sent.
    pub tx_packets: u64,
    /// Frames it dropped on send (a veth: its peer's backlog was full).
    pub tx_dropped: u64,
}

/// A process `rtemu exec --detach` started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Detached {
    /// Its process id (and process group).
    pub pid: i32,
    /// The node it runs in.
    pub node: String,
    /// Its command line.
    pub command: Vec<String>,
    /// Whether it still runs.
    pub running: bool,
    /// The file holding its output.
    pub log: String,
}

/// `POST /v1/labs`: a lab from a topology, given inline or as a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpRequest {
    /// The topology file's text (TOML). Exactly one of `topology` and `file`.
    #[serde(default)]
    pub topology: Option<String>,
    /// A topology file's path (relative to the server's working directory).
    #[serde(default)]
    pub file: Option<String>,
    /// Run the lab under this name instead of the topology's `lab`.
    #[serde(default)]
    pub name: Option<String>,
    /// Bring an existing lab of the same name down first.
    #[serde(default)]
    pub replace: bool,
}

/// `POST /v1/parts`: this host's part of a multi-host lab, as a coordinator (`rtemu up` on
/// any machine) asks every host's agent for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PartRequest {
    /// The whole topology file's text (TOML), the same for every host.
    pub topology: String,
    /// The file's name, for messages and `ls`.
    pub file: String,
    /// Run the lab under this name instead of the topology's `lab`.
    #[serde(default)]
    pub name: Option<String>,
    /// This host's name in the file's `[hosts]`.
    pub host: String,
    /// The VNIs and UDP port every host's part is stitched with.
    pub stitching: Stitching,
}

/// The VNI of every stitched segment of a lab and its tunnels' UDP port, the same on each
/// host (`rtemu_topo::part::Stitching`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Stitching {
    /// The tunnels' UDP port.
    pub port: u16,
    /// Segment name → VNI, for every segment with members on several hosts.
    pub vnis: std::collections::BTreeMap<String, u32>,
}

impl From<rtemu_topo::part::Stitching> for Stitching {
    fn from(s: rtemu_topo::part::Stitching) -> Stitching {
        Stitching {
            port: s.port,
            vnis: s.vnis,
        }
    }
}

impl From<Stitching> for rtemu_topo::part::Stitching {
    fn from(s: Stitching) -> rtemu_topo::part::Stitching {
        rtemu_topo::part::Stitching {
            port: s.port,
            vnis: s.vnis,
        }
    }
}

/// `GET /v1/vnis`: the VXLAN VNIs this host's labs use, which a coordinator leaves out when it
/// allocates a new lab's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Vnis {
    /// In ascending order.
    pub vnis: Vec<u32>,
}

/// `POST …/links/{link}/set`: new netem parameters for an impaired link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetRequest {
    /// The parameters, in netem's syntax (`delay 50ms loss 1%`).
    pub netem: String,
    /// The directions they are for.
    #[serde(default)]
    pub dir: Ways,
}

/// One change of a schedule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduledChange {
    /// When, after the request: a duration with its unit (`10s`, `1.5ms`).
    pub at: String,
    /// The parameters from then on, in netem's syntax.
    pub netem: String,
    /// The directions they are for.
    #[serde(default)]
    pub dir: Ways,
}

/// `POST …/links/{link}/schedule`: changes at set times.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduleRequest {
    /// The changes (in any order).
    pub changes: Vec<ScheduledChange>,
}

/// `POST …/nodes/{node}/exec`: a command to run in a node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecRequest {
    /// The program and its arguments (no shell; 1 to 256 elements).
    pub argv: Vec<String>,
    /// Seconds it may run, in (0, 3600] (default 60); then its process group is killed (in a
    /// container, the runtime's exec client: what it started in the container ends at `down`).
    #[serde(default)]
    pub timeout: Option<f64>,
    /// In a node with a container: run in the node's network namespace, outside the container
    /// (default: inside it, with its file system and environment).
    #[serde(default)]
    pub netns: bool,
}

/// What a command run in a node did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ExecReply {
    /// Its exit code; `null` when a signal ended it (or the timeout did).
    pub status: Option<i32>,
    /// The signal that ended it.
    pub signal: Option<i32>,
    /// Its standard output (invalid UTF-8 replaced; at most 16 MiB kept).
    pub stdout: String,
    /// Its standard error (likewise).
    pub stderr: String,
    /// Whether the timeout ended it.
    pub timed_out: bool,
    /// How long it ran, in seconds.
    pub duration: f64,
}

/// What `DELETE /v1/labs/{lab}` answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct DownReply {
    /// The lab.
    pub lab: String,
    /// Whether there was a lab to remove.
    pub removed: bool,
    /// Its engine's final report; `null` without an engine, or when it did not answer.
    pub report: Option<rtemu_control::message::FinalReport>,
}

/// What `GET /v1/labs/{lab}/stats` answers: the engine's stats, or, for a lab without impaired
/// links (hence without an engine), the same shape with no directions and no engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum StatsReply {
    /// The engine's answer.
    Engine(rtemu_control::message::Stats),
    /// A lab across hosts: every engine's directions merged.
    Hosts(SpreadStats),
    /// A lab without an engine.
    NoEngine(NoEngine),
}

/// The stats of a lab without impaired links.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct NoEngine {
    /// Always empty.
    pub directions: Vec<rtemu_control::message::Direction>,
    /// Always `null`.
    pub io: Option<String>,
    /// The lab.
    pub lab: String,
    /// Always `null`.
    pub monotonic_ns: Option<u64>,
    /// Always `null`.
    pub pid: Option<u32>,
    /// Always `null`.
    pub process_cpu_ns: Option<u64>,
}

/// The stats of a lab across hosts: every impaired link's directions, from the engine of the
/// host that carries it, and each engine that counted them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SpreadStats {
    /// The lab.
    pub lab: String,
    /// Each direction of each impaired link, in the topology's order.
    pub directions: Vec<rtemu_control::message::Direction>,
    /// The engines, one per engine host, in `[hosts]` order.
    pub engines: Vec<HostEngine>,
    /// The engine hosts that gave no stats (the lab is degraded there), with their links.
    pub missing: Vec<MissingStats>,
}

/// An engine host whose stats could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct MissingStats {
    /// The host.
    pub host: String,
    /// The impaired links whose engine runs there, which the report therefore lacks.
    pub links: Vec<String>,
    /// Why (the agent's words, or that it did not answer).
    pub problem: String,
}

impl std::fmt::Display for MissingStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "no stats of {} (engine on `{}`): {}",
            self.links.join(", "),
            self.host,
            self.problem
        )
    }
}

/// One host's engine, as its stats describe it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct HostEngine {
    /// Its host: its `[hosts]` name in a lab across hosts, else the machine's host name.
    pub host: String,
    /// The packet I/O it runs on.
    pub io: String,
    /// When it read its counters, ns on its host's `CLOCK_MONOTONIC` (hosts' clocks differ).
    pub monotonic_ns: u64,
    /// Its process id on its host.
    pub pid: u32,
    /// The CPU time it used so far, ns.
    pub process_cpu_ns: Option<u64>,
    /// Its release threads (a direction's `thread` indexes those of its link's engine).
    pub threads: Vec<rtemu_control::message::EngineThread>,
}

impl HostEngine {
    /// The engine of host `host`, as its `stats` describe it.
    pub fn of(host: String, stats: &rtemu_control::message::Stats) -> HostEngine {
        HostEngine {
            host,
            io: stats.io.clone(),
            monotonic_ns: stats.monotonic_ns,
            pid: stats.pid,
            process_cpu_ns: stats.process_cpu_ns,
            threads: stats.threads.clone(),
        }
    }
}

/// The body of every reply that is not a success.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    /// What went wrong, as the command line says it (topology errors as FILE:LINE:COLUMN:
    /// MESSAGE).
    pub error: String,
}

/// Where a lab's state file stood when it was read: the file is only ever replaced whole (a
/// new file renamed into place, a new directory at each `up`), never written in place, so a
/// new state is a new file. Taken before the state is read, so a state replaced between the
/// two reads as a revision that is already old: the caller fetches again, never keeps a stale
/// view under a new revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
}

impl Stamp {
    /// Lab `lab`'s state file's; `None` when it has none.
    pub fn of(lab: &LabName) -> Option<Stamp> {
        use std::os::unix::fs::MetadataExt;
        let path = rtemu_topo::state::lab_dir(lab).join(rtemu_topo::state::STATE_FILE);
        let m = std::fs::symlink_metadata(path).ok()?;
        Some(Stamp {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
        })
    }
}

/// A lab's revision: a digest of `parts`, what its view is made of (the state file's
/// [`Stamp`], and what changes while the lab runs: its status, detached processes,
/// containers, hosts' parts). Equal parts give equal revisions, on any server.
pub fn revision(parts: &impl Serialize) -> String {
    let json = serde_json::to_vec(parts).expect("a revision's parts serialise");
    let digest = ring::digest::digest(&ring::digest::SHA256, &json);
    // 128 bits: no two views a lab ever has share one.
    digest.as_ref()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// What a lab's view shows that changes while it runs, read once for its view or summary.
struct Live {
    detached: Vec<Detached>,
    containers: BTreeMap<String, NodeContainer>,
}

impl Live {
    fn of(state: &State) -> Live {
        let detached = state
            .detached()
            .unwrap_or_default()
            .into_iter()
            .map(|d| Detached {
                running: d.running(),
                pid: d.pid,
                node: d.node,
                command: d.command,
                log: d.log.display().to_string(),
            })
            .collect();
        let containers = rtemu_topo::launch::lab_statuses(state)
            .into_iter()
            .map(|(node, (image, status))| (node, NodeContainer::new(image, &status)))
            .collect();
        Live {
            detached,
            containers,
        }
    }

    /// The revision of a lab's view with this, its state file at `stamp` and in `status`.
    fn revision(&self, stamp: Option<Stamp>, status: LabStatus) -> String {
        revision(&(stamp, status, &self.detached, &self.containers))
    }
}

/// The view of a lab its state file gives, with its `status`; `stamp` is where its state file
/// stood before it was read ([`Stamp::of`]).
pub fn lab_view(state: &State, status: LabStatus, stamp: Option<Stamp>) -> Lab {
    let live = Live::of(state);
    Lab {
        name: state.lab.to_string(),
        file: state.file.clone(),
        status,
        nodes: nodes_with(state, &live.containers),
        links: links(state),
        lans: lans(state),
        externals: externals(state),
        revision: live.revision(stamp, status),
        detached: live.detached,
        programs_cpus: programs_cpus(state),
        error: None,
        hosts: Vec::new(),
        engines: Vec::new(),
    }
}

/// The engine of lab `state` on this machine (of this host's part, of a lab across hosts),
/// as [`Lab::engines`] shows it, when the lab's `status` is up: one engine, named by the
/// part's host or else this machine's host name; none without impaired links here, or when
/// the engine does not answer (its status says so).
pub fn engines_here(state: &State, status: LabStatus) -> Vec<HostEngine> {
    if status != LabStatus::Up {
        return Vec::new();
    }
    let Ok(stats) = rtemu_control::lab::stats(state) else {
        return Vec::new();
    };
    let host = match &state.part {
        Some(part) => part.host.clone(),
        None => nix::unistd::gethostname()
            .ok()
            .and_then(|h| h.into_string().ok())
            .unwrap_or_else(|| "localhost".to_owned()),
    };
    vec![HostEngine::of(host, &stats)]
}

/// The summary of a lab the lab list shows, as [`lab_view`] takes it: its topology counted,
/// never walked node by node.
pub fn lab_summary(state: &State, status: LabStatus, stamp: Option<Stamp>) -> LabSummary {
    let live = Live::of(state);
    let kinds = state.topology.segments.iter().map(|s| &s.kind);
    let (mut links, mut lans, mut externals) = (0, 0, 0);
    for kind in kinds {
        match kind {
            SegmentKind::Link { .. } => links += 1,
            SegmentKind::Lan => lans += 1,
            SegmentKind::External { .. } => externals += 1,
        }
    }
    LabSummary {
        name: state.lab.to_string(),
        file: state.file.clone(),
        status,
        error: None,
        nodes: state.nodes.len(),
        links,
        lans,
        externals,
        detached: live.detached.len(),
        programs_cpus: programs_cpus(state),
        hosts: Vec::new(),
        revision: live.revision(stamp, status),
    }
}

/// The CPUs a lab's programs run on, when kept off its engine's.
fn programs_cpus(state: &State) -> Option<String> {
    state
        .programs
        .as_ref()
        .map(rtemu_topo::state::ProgramsCpuset::cpu_list)
}

/// The entry of a lab directory whose state cannot be read: its name, status and why.
pub fn unreadable_view(lab: &rtemu_topo::state::Unreadable) -> Lab {
    let error = rtemu_control::error::message(&lab.error);
    Lab {
        name: lab.lab.to_string(),
        file: String::new(),
        status: LabStatus::Unreadable,
        nodes: Vec::new(),
        links: Vec::new(),
        lans: Vec::new(),
        externals: Vec::new(),
        detached: Vec::new(),
        programs_cpus: None,
        revision: revision(&(LabStatus::Unreadable, &error)),
        error: Some(error),
        hosts: Vec::new(),
        engines: Vec::new(),
    }
}

/// The same entry, as the lab list shows it.
pub fn unreadable_summary(lab: &rtemu_topo::state::Unreadable) -> LabSummary {
    let view = unreadable_view(lab);
    LabSummary {
        name: view.name,
        file: view.file,
        status: view.status,
        error: view.error,
        nodes: 0,
        links: 0,
        lans: 0,
        externals: 0,
        detached: 0,
        programs_cpus: None,
        hosts: Vec::new(),
        revision: view.revision,
    }
}

/// The nodes of a lab with their interfaces (of one host's part: that host's nodes).
pub fn nodes(state: &State) -> Vec<Node> {
    nodes_with(state, &Live::of(state).containers)
}

/// The same, with each node's container as `containers` says it stands.
fn nodes_with(state: &State, containers: &BTreeMap<String, NodeContainer>) -> Vec<Node> {
    let topo = &state.topology;
    let attachments = topo.attachments_by_node();
    state
        .nodes
        .iter()
        .filter_map(|(name, netns)| Some((topo.node_index(name)?, name, netns)))
        .map(|(ni, name, netns)| Node {
            container: containers.get(name).cloned(),
            name: name.clone(),
            host: topo.nodes[ni].host.clone(),
            netns: netns.clone(),
            loopback: topo.nodes[ni]
                .loopback
                .iter()
                .map(ToString::to_string)
                .collect(),
            interfaces: attachments[ni]
                .iter()
                .map(|&(seg, m)| Interface {
                    name: m.ifname.clone(),
                    mac: m.mac.to_string(),
                    addresses: [m.ipv4.map(|a| a.to_string()), m.ipv6.map(|a| a.to_string())]
                        .into_iter()
                        .flatten()
                        .collect(),
                    segment: seg.name.clone(),
                })
                .collect(),
        })
        .collect()
}

/// The point-to-point links of a lab.
pub fn links(state: &State) -> Vec<Link> {
    let topo = &state.topology;
    topo.segments
        .iter()
        .enumerate()
        .filter_map(|(si, seg)| {
            let SegmentKind::Link { impairment } = &seg.kind else {
                return None;
            };
            let end = |i: usize| {
                seg.members
                    .get(i)
                    .map_or_else(String::new, |m| topo.nodes[m.node].name.clone())
            };
            Some(Link {
                name: seg.name.clone(),
                a: end(0),
                b: end(1),
                impaired: impairment.is_some(),
                a_to_b: impairment
                    .as_ref()
                    .and_then(|i| i.netem_for(false))
                    .map(|n| n.text().to_owned()),
                b_to_a: impairment
                    .as_ref()
                    .and_then(|i| i.netem_for(true))
                    .map(|n| n.text().to_owned()),
                underlay: rtemu_control::message::Underlay::of(state, si),
            })
        })
        .collect()
}

/// The host interfaces handed to a lab's nodes.
pub fn externals(state: &State) -> Vec<External> {
    let topo = &state.topology;
    topo.segments
        .iter()
        .filter_map(|seg| {
            let SegmentKind::External { host, mode, .. } = &seg.kind else {
                return None;
            };
            Some(External {
                name: seg.name.clone(),
                node: seg
                    .members
                    .first()
                    .map_or_else(String::new, |m| topo.nodes[m.node].name.clone()),
                host: host.clone(),
                mode: match mode {
                    ExternalMode::Move => "move",
                    ExternalMode::Macvlan => "macvlan",
                }
                .to_owned(),
            })
        })
        .collect()
}

/// The LANs of a lab.
pub fn lans(state: &State) -> Vec<Lan> {
    let topo = &state.topology;
    topo.segments
        .iter()
        .filter(|seg| matches!(seg.kind, SegmentKind::Lan))
        .map(|seg| Lan {
            name: seg.name.clone(),
            members: seg
                .members
                .iter()
                .map(|m| topo.nodes[m.node].name.clone())
                .collect(),
            ipv4: seg.ipv4.map(|n| n.to_string()),
            ipv6: seg.ipv6.map(|n| n.to_string()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtemu_topo::state::LabName;
    use rtemu_topo::Topology;

    const TOPO: &str = r#"
lab = "views"
[nodes.a]
[nodes.b]
[nodes.c]
[[links]]
name = "ab"
endpoints = ["a", "b"]
netem = "delay 5ms"
[[lans]]
name = "office"
members = ["a", "b", "c"]
[[externals]]
node = "c"
host = "uplink0"
mode = "macvlan"
ipv4 = "198.51.100.7/24"
"#;

    fn state() -> State {
        State {
            lab: LabName::new("views").unwrap(),
            file: "<request>".into(),
            namespaces: vec![],
            nodes: ["a", "b", "c"]
                .iter()
                .map(|n| (n.to_string(), format!("rtemu-views-{n}")))
                .collect(),
            handovers: vec![],
            cgroups: vec![],
            programs: None,
            complete: true,
            topology: Topology::parse("<request>", TOPO).unwrap(),
            part: None,
        }
    }

    #[test]
    fn views_show_links_lans_and_interfaces() {
        let s = state();
        let lab = lab_view(&s, LabStatus::Degraded, None);
        assert_eq!(
            (lab.name.as_str(), lab.status),
            ("views", LabStatus::Degraded)
        );
        assert_eq!(
            (lab.nodes.len(), lab.links.len(), lab.lans.len()),
            (3, 1, 1)
        );
        let links = links(&s);
        assert_eq!(links.len(), 1);
        assert_eq!(
            (links[0].a.as_str(), links[0].b.as_str(), links[0].impaired),
            ("a", "b", true)
        );
        assert_eq!(links[0].a_to_b.as_deref(), Some("delay 5ms"));
        assert_eq!(links[0].b_to_a.as_deref(), Some("delay 5ms"));
        let lans = lans(&s);
        assert_eq!(lans.len(), 1);
        assert_eq!(lans[0].members, ["a", "b", "c"]);
        let nodes = nodes(&s);
        let a = &nodes[0];
        assert_eq!(a.netns, "rtemu-views-a");
        let segs: Vec<&str> = a.interfaces.iter().map(|i| i.segment.as_str()).collect();
        assert_eq!(segs, ["ab", "office"]);
        assert!(a.interfaces.iter().all(|i| !i.addresses.is_empty()));
        assert_eq!(nodes[2].interfaces.len(), 2);
        let externals = externals(&s);
        assert_eq!(externals.len(), 1);
        let e = &externals[0];
        assert_eq!(
            (e.node.as_str(), e.host.as_str(), e.mode.as_str()),
            ("c", "uplink0", "macvlan")
        );
        let on_it = nodes[2].interfaces.iter().find(|i| i.segment == e.name);
        assert_eq!(
            on_it.map(|i| i.addresses.as_slice()),
            Some(&["198.51.100.7/24".to_owned()][..])
        );
        assert_eq!(lab.externals, externals);
        // Programs on every CPU: nothing said.
        assert_eq!(lab.programs_cpus, None);
    }

    #[test]
    fn a_summary_counts_what_the_view_lists_under_the_same_revision() {
        let s = state();
        let stamp = Stamp {
            dev: 1,
            ino: 2,
            size: 3,
            mtime_ns: 4,
        };
        let lab = lab_view(&s, LabStatus::Up, Some(stamp));
        let summary = lab_summary(&s, LabStatus::Up, Some(stamp));
        assert_eq!(
            (
                summary.nodes,
                summary.links,
                summary.lans,
                summary.externals
            ),
            (
                lab.nodes.len(),
                lab.links.len(),
                lab.lans.len(),
                lab.externals.len()
            )
        );
        assert_eq!((summary.nodes, summary.links), (3, 1));
        assert_eq!(summary.revision, lab.revision);
        assert_eq!(summary.revision.len(), 32);
        // The summary has no list of any of them.
        let json = serde_json::to_value(&summary).unwrap();
        assert!(json["nodes"].is_u64() && json["links"].is_u64(), "{json}");
        // A new state file, or a new status, is a new revision.
        let replaced = Stamp { ino: 5, ..stamp };
        let revisions = [
            lab_summary(&s, LabStatus::Up, Some(replaced)).revision,
            lab_summary(&s, LabStatus::Degraded, Some(stamp)).revision,
            lab_summary(&s, LabStatus::Up, None).revision,
        ];
        for r in &revisions {
            assert_ne!(r, &lab.revision);
        }
        assert_ne!(revisions[0], revisions[1]);
    }

    #[test]
    fn a_labs_view_says_where_its_programs_run_when_kept_off_the_engine() {
        let mut s = state();
        s.programs = Some(rtemu_topo::state::ProgramsCpuset {
            cgroup: "/sys/fs/cgroup/cpuset/rtemu-views".into(),
            cpus: vec![0, 2, 3],
        });
        let lab = lab_view(&s, LabStatus::Up, None);
        assert_eq!(lab.programs_cpus.as_deref(), Some("0,2-3"));
        let json = serde_json::to_value(&lab).unwrap();
        assert_eq!(json["programs_cpus"], "0,2-3");
    }
}
