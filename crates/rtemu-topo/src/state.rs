//! The lab state file, `/run/rtemu/<lab>/state.json`: what a lab is made of, written before
//! anything is created so teardown is exact even after a crash.
//!
//! Every kernel object rtemu creates lives in a namespace the state file names (interfaces,
//! bridges, routes and neighbour entries vanish with their namespace), so the namespaces, their
//! `/etc/netns/<ns>` directories and the processes inside them are all `down` must remove.
//!
//! Beside it, `/run/rtemu/<lab>/detached.jsonl` lists the processes `rtemu exec --detach`
//! started ([`Detached`], one JSON object a line, appended as each starts), so `rtemu ls` can
//! show them and `down` ends them, also one that left its node's namespace.

use std::collections::BTreeSet;
use std::fmt;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::topology::{valid_ifname, valid_name, MAX_LAB_NAME, MAX_NODE_NAME};
use crate::Topology;

/// Where lab state directories live (`/run` is a tmpfs: a reboot forgets labs, as it forgets
/// namespaces).
pub const STATE_ROOT: &str = "/run/rtemu";

/// The state file in a lab's state directory.
pub const STATE_FILE: &str = "state.json";

/// A lab's name, checked: 1 to [`MAX_LAB_NAME`] characters a-z, 0-9 and '-', starting with a
/// letter and not ending with '-'. It becomes a directory under [`STATE_ROOT`] and part of
/// namespace names, so `..`, `/` and the empty name can never be one: every path built from a
/// lab name is built from this type ([`lab_dir`]).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct LabName(String);

/// A name that is not a valid lab name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid lab name {0:?}: use 1 to {max} characters a-z, 0-9 and '-', starting with a letter \
     and not ending with '-'",
    max = MAX_LAB_NAME
)]
pub struct BadLabName(pub String);

impl LabName {
    /// Checks `name`.
    pub fn new(name: &str) -> Result<LabName, BadLabName> {
        if valid_name(name, MAX_LAB_NAME) {
            Ok(LabName(name.to_owned()))
        } else {
            // Only a bounded, printable prefix of what was given goes into the message.
            Err(BadLabName(name.chars().take(40).collect()))
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for LabName {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for LabName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for LabName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for LabName {
    type Err = BadLabName;
    fn from_str(s: &str) -> Result<LabName, BadLabName> {
        LabName::new(s)
    }
}

impl TryFrom<String> for LabName {
    type Error = BadLabName;
    fn try_from(s: String) -> Result<LabName, BadLabName> {
        LabName::new(&s)
    }
}

impl From<LabName> for String {
    fn from(n: LabName) -> String {
        n.0
    }
}

impl PartialEq<str> for LabName {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for LabName {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

/// What a lab consists of.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// The lab's name.
    pub lab: LabName,
    /// The topology file it was brought up from.
    pub file: String,
    /// Every namespace of the lab, recorded before it is created.
    pub namespaces: Vec<String>,
    /// Node name → namespace name.
    pub nodes: Vec<(String, String)>,
    /// Host interfaces moved into nodes, recorded before they move, so `down` can give them
    /// back even after a crash.
    #[serde(default)]
    pub handovers: Vec<Handover>,
    /// Node name → its CPU-limit cgroup, for nodes with a `cpu` limit, recorded before the
    /// cgroup is made.
    #[serde(default)]
    pub cgroups: Vec<(String, PathBuf)>,
    /// The cpuset the processes started in the lab's nodes run in, off the engine's CPUs
    /// (`programs_cpus = "off-engine"`), recorded before it is made; `None`: they run on every
    /// CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub programs: Option<ProgramsCpuset>,
    /// Whether `up` finished.
    pub complete: bool,
    /// The validated topology, for `ls` and `graph`: the whole lab's, also for one host's part
    /// (whose stitched segments' `mtu` is then the one the tunnels allow).
    pub topology: Topology,
    /// For one host's part of a multi-host lab: which host, and its tunnels, recorded before
    /// they are made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part: Option<PartState>,
}

/// The cpuset of a lab's programs ([`crate::cpuset`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramsCpuset {
    /// The cgroup.
    pub cgroup: PathBuf,
    /// Its CPUs: every online CPU but the engine's.
    pub cpus: Vec<usize>,
}

impl ProgramsCpuset {
    /// Its CPUs as the kernel writes lists (`0,2-3`).
    pub fn cpu_list(&self) -> String {
        rtemu_clock::rt::format_cpu_list(&self.cpus)
    }
}

/// What the state of one host's part of a multi-host lab adds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartState {
    /// The host (its `[hosts]` name).
    pub host: String,
    /// The VNIs and UDP port the part was built with.
    pub stitching: crate::part::Stitching,
    /// Every VXLAN device of the part, each made directly in one of the lab's namespaces.
    pub tunnels: Vec<crate::part::Tunnel>,
    /// The underlay's round trip to each host the tunnels reach, measured as the part came up.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub underlay: Vec<crate::underlay::UnderlayRtt>,
}

impl State {
    /// For a link between this part's host and another: that host and the underlay's round
    /// trip to it as measured at `up` (see [`crate::underlay`]); `None` on one machine and for a
    /// segment this host holds alone.
    pub fn underlay_of(&self, segment: usize) -> Option<&crate::underlay::UnderlayRtt> {
        let part = self.part.as_ref()?;
        let hosts: Vec<&str> = self.topology.segments[segment]
            .members
            .iter()
            .filter_map(|m| self.topology.nodes[m.node].host.as_deref())
            .collect();
        if !hosts.contains(&part.host.as_str()) {
            return None;
        }
        let peer = hosts.into_iter().find(|h| *h != part.host)?;
        part.underlay.iter().find(|u| u.host == peer)
    }

    /// Whether this host runs the engine of impaired link `segment`: always on one machine;
    /// in a part, when the link's engine host is this one.
    pub fn runs_engine_of(&self, segment: usize) -> bool {
        match &self.part {
            None => true,
            Some(p) => self.topology.segments[segment].engine_host.as_deref() == Some(&p.host),
        }
    }
}

/// The state directory of `lab`.
pub fn lab_dir(lab: &LabName) -> PathBuf {
    Path::new(STATE_ROOT).join(lab.as_str())
}

/// Why a state directory or file is not acted on.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The lab name is not a valid one.
    #[error(transparent)]
    BadName(#[from] BadLabName),
    /// The state directory or its root is not a plain directory of this user's that only it
    /// can write: rtemu does not trust (or remove) what it holds.
    #[error("{path} is not a directory that only root can write ({why}): rtemu does not trust it; inspect it and remove it by hand")]
    Untrusted {
        /// The directory.
        path: String,
        /// What is wrong with it.
        why: String,
    },
    /// The directory holds no state file of a lab.
    #[error("{path} holds no lab state ({STATE_FILE} is missing): it was not made by `rtemu up`, so rtemu leaves it alone")]
    NoStateFile {
        /// The directory.
        path: String,
    },
    /// The state file is not one rtemu wrote for this lab.
    #[error("{path} is not a state file rtemu wrote for lab `{lab}` ({why}): rtemu does not act on it; inspect it and remove it by hand")]
    Foreign {
        /// The state file.
        path: String,
        /// The lab whose directory holds it.
        lab: LabName,
        /// What gives it away.
        why: String,
    },
    /// Reading or writing failed.
    #[error("{what}: {source}")]
    Io {
        /// What rtemu was doing.
        what: String,
        /// Why it failed.
        source: io::Error,
    },
}

fn io_at(what: impl fmt::Display, path: &Path) -> impl FnOnce(io::Error) -> StateError {
    let what = format!("{what} {}", path.display());
    move |source| StateError::Io { what, source }
}

/// Checks that `path` is a real directory (not a symbolic link) owned by this process's user
/// and writable by no one else; `Ok(false)` when it does not exist. Whatever rtemu keeps or
/// serves in a directory (state, sockets, tokens) goes only into one that passes.
pub fn trusted_dir(path: &Path) -> Result<bool, StateError> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(io_at("examining", path)(e)),
    };
    let untrusted = |why: &str| StateError::Untrusted {
        path: path.display().to_string(),
        why: why.to_owned(),
    };
    if meta.file_type().is_symlink() {
        return Err(untrusted("a symbolic link"));
    }
    if !meta.is_dir() {
        return Err(untrusted("not a directory"));
    }
    if meta.uid() != nix::unistd::geteuid().as_raw() {
        return Err(untrusted(&format!("owned by uid {}", meta.uid())));
    }
    if meta.permissions().mode() & 0o022 != 0 {
        return Err(untrusted(&format!(
            "mode {:o}: writable by others",
            meta.permissions().mode() & 0o7777
        )));
    }
    Ok(true)
}

/// Makes [`STATE_ROOT`] (mode 0755) when it is missing, and checks it is trusted.
pub fn state_root() -> Result<&'static Path, StateError> {
    let root = Path::new(STATE_ROOT);
    if !trusted_dir(root)? {
        match std::fs::DirBuilder::new().mode(0o755).create(root) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => {
                return Err(io_at("creating", root)(e))
            }
            _ => {}
        }
        trusted_dir(root)?;
    }
    Ok(root)
}

impl State {
    /// Creates lab `self.lab`'s state directory holding this state, atomically: the state file
    /// is written in a fresh directory beside it, which is then renamed into place without
    /// replacing anything. A crash leaves either no lab directory or one with a whole state
    /// file, so `down` never meets a lab directory it cannot tell as rtemu's. Fails with
    /// `AlreadyExists` when the lab's directory exists.
    pub fn create(&self) -> Result<(), StateError> {
        let root = state_root()?;
        let pid = std::process::id() as i32;
        let start = proc_stat(pid).map_or(0, |(_, start)| start);
        // One server process may create several labs at once (and the same lab twice): each
        // create stages in a directory of its own.
        static SEQUENCE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let seq = SEQUENCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let fresh = root.join(format!(".new-{}.{pid}.{start}.{seq}", self.lab));
        reap_unplaced(&self.lab);
        std::fs::DirBuilder::new()
            .mode(0o755)
            .create(&fresh)
            .map_err(io_at("creating", &fresh))?;
        let placed = self.write_into(&fresh).and_then(|()| {
            nix::fcntl::renameat2(
                None,
                &fresh,
                None,
                &lab_dir(&self.lab),
                nix::fcntl::RenameFlags::RENAME_NOREPLACE,
            )
            .map_err(|e| io_at("creating", &lab_dir(&self.lab))(e.into()))
        });
        if placed.is_err() {
            let _ = std::fs::remove_dir_all(&fresh);
        }
        placed
    }

    /// Writes the state file of an existing lab atomically (a crash leaves the old or the new
    /// file, never half).
    pub fn save(&self) -> Result<(), StateError> {
        let dir = lab_dir(&self.lab);
        if !trusted_dir(&dir)? {
            return Err(io_at("writing the state in", &dir)(
                io::ErrorKind::NotFound.into(),
            ));
        }
        self.write_into(&dir)
    }

    fn write_into(&self, dir: &Path) -> Result<(), StateError> {
        let tmp = dir.join("state.json.tmp");
        self.to_json()
            .map_err(io::Error::other)
            .and_then(|json| {
                let mut f = std::fs::File::create(&tmp)?;
                f.write_all(&json)?;
                f.sync_all()
            })
            .map_err(io_at("writing", &tmp))?;
        std::fs::rename(&tmp, dir.join(STATE_FILE)).map_err(io_at("writing", &tmp))
    }

    /// Reads the state of `lab`; `Ok(None)` when no such lab exists. A directory of that name
    /// without a state file, or a state file that is not rtemu's for this lab ([`State::check`]),
    /// is an error: nothing is done on what it says.
    pub fn load(lab: &str) -> Result<Option<State>, StateError> {
        let lab = LabName::new(lab)?;
        let dir = lab_dir(&lab);
        if !trusted_dir(Path::new(STATE_ROOT))? || !trusted_dir(&dir)? {
            return Ok(None);
        }
        let path = dir.join(STATE_FILE);
        let foreign = |why: String| StateError::Foreign {
            path: path.display().to_string(),
            lab: lab.clone(),
            why,
        };
        let bytes = match std::fs::symlink_metadata(&path) {
            // An empty directory is what a `down` killed between removing the state file and
            // the directory leaves (the state file goes last): no lab, for `reap_unplaced`.
            Err(e) if e.kind() == io::ErrorKind::NotFound && is_empty_dir(&dir) => return Ok(None),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(StateError::NoStateFile {
                    path: dir.display().to_string(),
                })
            }
            Err(e) => return Err(io_at("reading", &path)(e)),
            Ok(m) if !m.is_file() => return Err(foreign("not a regular file".into())),
            Ok(m) if m.len() > MAX_STATE_BYTES => {
                return Err(foreign(format!(
                    "{} bytes, over the {MAX_STATE_BYTES} a state file may have",
                    m.len()
                )))
            }
            Ok(_) => std::fs::read(&path).map_err(io_at("reading", &path))?,
        };
        State::from_json(&bytes, &lab).map(Some).map_err(foreign)
    }

    /// The state file's content.
    pub fn to_json(&self) -> serde_json::Result<Vec<u8>> {
        serde_json::to_vec_pretty(self)
    }

    /// Reads a state file's content `bytes` as lab `lab`'s state, checked ([`State::check`]);
    /// every link configuration in it is validated as it is read. The error says why it is
    /// not one.
    pub fn from_json(bytes: &[u8], lab: &LabName) -> Result<State, String> {
        // serde's message would quote the file; where the fault lies is enough.
        let state: State = serde_json::from_slice(bytes).map_err(|e| {
            format!(
                "not a lab state: {:?} error at line {} column {}",
                e.classify(),
                e.line(),
                e.column()
            )
        })?;
        state.check(lab)?;
        Ok(state)
    }

    /// Checks that everything this state names is something `up` makes for lab `lab`, so a
    /// crafted or stale state file cannot make `down` remove or kill anything else: the lab's
    /// name is its directory's, every node and namespace name is derived from the lab's as
    /// `up` derives it, every cgroup is the node's under the machine's CPU controller or the
    /// lab's under its cpuset controller, and every handed-over interface has an interface's
    /// name.
    pub fn check(&self, lab: &LabName) -> Result<(), String> {
        if self.lab != *lab {
            return Err(format!("it names lab `{}`", self.lab));
        }
        let mut allowed = BTreeSet::from([crate::naming::lab_netns(lab)]);
        for (node, ns) in &self.nodes {
            if !valid_name(node, MAX_NODE_NAME) {
                return Err(format!("invalid node name {node:?}"));
            }
            let expected = crate::naming::node_netns(lab, node);
            // A lab brought up by an rtemu from before the namespaces' `.`.
            let legacy = crate::naming::legacy_node_netns(lab, node);
            if *ns != expected && *ns != legacy {
                return Err(format!(
                    "node `{node}` has namespace {ns:?}, not {expected}"
                ));
            }
            allowed.insert(ns.clone());
        }
        if let Some(ns) = self.namespaces.iter().find(|ns| !allowed.contains(*ns)) {
            return Err(format!("namespace {ns:?} is not one of the lab's"));
        }
        let controller = crate::cgroup::Controller::find();
        for (node, dir) in &self.cgroups {
            // Named as the node's namespace is, now or by an older rtemu.
            let ns = self.nodes.iter().find(|(n, _)| n == node).map(|(_, ns)| ns);
            let expected = controller.as_ref().zip(ns).map(|(c, ns)| c.dir(ns));
            if ns.is_none() || expected.as_ref() != Some(dir) {
                return Err(format!("cgroup {} is not node `{node}`'s", dir.display()));
            }
        }
        if let Some(p) = &self.programs {
            let host = self.part.as_ref().map(|p| p.host.as_str());
            let expected = crate::cpuset::Cpusets::find().map(|c| c.dir(lab, host));
            if expected.as_ref() != Some(&p.cgroup) {
                return Err(format!(
                    "cpuset {} is not lab `{lab}`'s",
                    p.cgroup.display()
                ));
            }
        }
        for t in self.part.iter().flat_map(|p| &p.tunnels) {
            if !self.namespaces.contains(&t.netns) || !valid_ifname(&t.ifname) {
                return Err(format!(
                    "tunnel {:?} in {:?}: not an interface of the lab's namespaces",
                    t.ifname, t.netns
                ));
            }
        }
        for h in &self.handovers {
            if !self.nodes.iter().any(|(_, ns)| *ns == h.netns) {
                return Err(format!(
                    "handover into {:?}, not a node of the lab",
                    h.netns
                ));
            }
            if ![&h.host, &h.ifname].iter().all(|n| valid_ifname(n)) {
                return Err(format!(
                    "handover of {:?} as {:?}: not interface names",
                    h.host, h.ifname
                ));
            }
        }
        Ok(())
    }

    /// Removes this lab's state directory. Everything else in it goes first and the state
    /// file last, so a `down` killed half-way leaves a directory the next `down` still knows
    /// as the lab's.
    pub fn remove_dir(&self) -> Result<(), StateError> {
        let dir = lab_dir(&self.lab);
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io_at("listing", &dir)(e)),
        };
        for e in entries {
            let e = e.map_err(io_at("listing", &dir))?;
            if e.file_name() == STATE_FILE {
                continue;
            }
            let path = e.path();
            let gone = match e.file_type() {
                Ok(t) if t.is_dir() => std::fs::remove_dir_all(&path),
                _ => std::fs::remove_file(&path),
            };
            match gone {
                Err(e) if e.kind() != io::ErrorKind::NotFound => {
                    return Err(io_at("removing", &path)(e))
                }
                _ => {}
            }
        }
        let state = dir.join(STATE_FILE);
        match std::fs::remove_file(&state) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                return Err(io_at("removing", &state)(e))
            }
            _ => {}
        }
        std::fs::remove_dir(&dir).map_err(io_at("removing", &dir))
    }

    /// The processes `rtemu exec --detach` started in this lab (see [`detached`]).
    pub fn detached(&self) -> io::Result<Vec<Detached>> {
        detached(&self.lab)
    }

    /// The names of all labs with a state directory, sorted. Entries that are not lab names
    /// (an `up` still creating its directory, anything else) are not labs.
    pub fn labs() -> Result<Vec<LabName>, StateError> {
        let root = Path::new(STATE_ROOT);
        if !trusted_dir(root)? {
            return Ok(Vec::new());
        }
        let mut labs = Vec::new();
        for e in std::fs::read_dir(root).map_err(io_at("listing", root))? {
            let e = e.map_err(io_at("listing", root))?;
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            if let (true, Some(Ok(name))) = (is_dir, e.file_name().to_str().map(LabName::new)) {
                labs.push(name);
            }
        }
        labs.sort();
        Ok(labs)
    }

    /// The state of every lab, and apart the labs whose state cannot be read (a directory
    /// without a state file, a corrupt or foreign one), each with why: one broken directory
    /// does not hide the others. Labs that go down meanwhile are left out.
    pub fn load_all() -> Result<(Vec<State>, Vec<Unreadable>), StateError> {
        let mut states = Vec::new();
        let mut unreadable = Vec::new();
        for lab in State::labs()? {
            match State::load(&lab) {
                Ok(state) => states.extend(state),
                Err(error) => unreadable.push(Unreadable { lab, error }),
            }
        }
        Ok((states, unreadable))
    }
}

/// A lab directory whose state cannot be read ([`State::load_all`]).
#[derive(Debug)]
pub struct Unreadable {
    /// The directory's lab name.
    pub lab: LabName,
    /// Why its state cannot be read.
    pub error: StateError,
}

/// The pid and start time a staging directory's name carries after `.new-<lab>.`:
/// `<pid>.<start>` (an rtemu from before the sequence number) or `<pid>.<start>.<sequence>`.
fn unplaced_owner(rest: &str) -> Option<(i32, u64)> {
    let mut parts = rest.split('.');
    let pid = parts.next()?.parse().ok()?;
    let start = parts.next()?.parse().ok()?;
    match (parts.next(), parts.next()) {
        (None, _) => Some((pid, start)),
        (Some(seq), None) if seq.parse::<u64>().is_ok() => Some((pid, start)),
        _ => None,
    }
}

/// Removes what a killed `up` or `down` of lab `lab` left in [`STATE_ROOT`]: the lab's
/// directory when it is empty, and directories `.new-<lab>.<pid>.<start time>[.<sequence>]`
/// (ours by their name, in a directory only root writes, holding at most a state file) whose
/// process no longer runs (no process of that pid with that start time: pids are reused). A
/// running process's are never taken, this one's included: they are creates under way (a
/// server creates several at once), and a failed create removes its own.
pub fn reap_unplaced(lab: &LabName) {
    let prefix = format!(".new-{lab}.");
    let Ok(entries) = std::fs::read_dir(STATE_ROOT) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some((pid, start)) = name
            .to_str()
            .and_then(|n| n.strip_prefix(&prefix))
            .and_then(unplaced_owner)
        else {
            continue;
        };
        let gone = proc_stat(pid).is_none_or(|(state, s)| state == 'Z' || s != start);
        if gone {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
    // The lab's own directory left empty by a `down` killed just before removing it (an
    // empty directory holds nothing to check, and `remove_dir` removes only an empty one).
    let dir = lab_dir(lab);
    if trusted_dir(&dir).unwrap_or(false) && is_empty_dir(&dir) {
        let _ = std::fs::remove_dir(&dir);
    }
}

/// Whether `dir` is a directory with no entries.
fn is_empty_dir(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_none())
}

/// The largest state file rtemu reads (a 1000-node lab's is about 1 MB).
pub const MAX_STATE_BYTES: u64 = 64 << 20;

/// A host interface moved into a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Handover {
    /// Its name on the host, restored when it comes back.
    pub host: String,
    /// The node's namespace.
    pub netns: String,
    /// Its name inside the node.
    pub ifname: String,
    /// What it carried on the host, given back with it.
    #[serde(default)]
    pub saved: crate::external::HostSide,
}

/// The file in a lab's state directory listing the processes `rtemu exec --detach` started.
pub const DETACHED_FILE: &str = "detached.jsonl";

/// A process started in a node by `rtemu exec --detach`: the leader of its own process group,
/// with its output in `/run/rtemu/<lab>/<node>.<n>.log`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Detached {
    /// Its process id (and process group id).
    pub pid: i32,
    /// When it started, in clock ticks after boot (field 22 of `/proc/<pid>/stat`): a later
    /// process that reuses the pid has another start time, so it is never mistaken for this one.
    pub start_time: u64,
    /// The node it was started in.
    pub node: String,
    /// Its command line.
    pub command: Vec<String>,
    /// Where its standard output and error go.
    pub log: PathBuf,
}

impl Detached {
    /// What `rtemu exec --detach` says of it, once started in lab `lab`: where it runs, where
    /// its output goes, and what ends it.
    pub fn started(&self, lab: &LabName) -> String {
        format!(
            "started `{}` in node {} of lab {lab} as pid {}, output in {}; `rtemu down {lab}` ends it",
            rtemu_sys::terminal::printable(&self.command.join(" ")),
            self.node,
            self.pid,
            self.log.display()
        )
    }

    /// Whether the process still runs: its pid is live (not a zombie) with the recorded start
    /// time.
    pub fn running(&self) -> bool {
        proc_stat(self.pid).is_some_and(|(state, start)| state != 'Z' && start == self.start_time)
    }
}

/// The state letter (`R`, `S`, `Z`, …) and start time (clock ticks after boot) of process
/// `pid`, from `/proc/<pid>/stat`; `None` when there is no such process.
pub fn proc_stat(pid: i32) -> Option<(char, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may itself hold spaces and ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    // Field 3 was the state; the start time is field 22.
    let start = fields.nth(22 - 4)?.parse().ok()?;
    Some((state, start))
}

/// The processes `rtemu exec --detach` started in lab `lab`, in the order they started; empty
/// when there are none. A line a crash left half-written is skipped.
pub fn detached(lab: &LabName) -> io::Result<Vec<Detached>> {
    match std::fs::read_to_string(lab_dir(lab).join(DETACHED_FILE)) {
        Ok(text) => Ok(text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// Appends `process` to the list of lab `lab`'s detached processes. The line is written in one
/// `write` to a file opened for appending, so records of processes started at the same time
/// never interleave.
pub fn record_detached(lab: &LabName, process: &Detached) -> io::Result<()> {
    let mut line = serde_json::to_string(process).map_err(io::Error::other)?;
    line.push('\n');
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(lab_dir(lab).join(DETACHED_FILE))?
        .write_all(line.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_staging_directory_names_its_owner_with_or_without_a_sequence() {
        assert_eq!(unplaced_owner("12.345"), Some((12, 345)));
        assert_eq!(unplaced_owner("12.345.0"), Some((12, 345)));
        assert_eq!(
            unplaced_owner("12.345.18446744073709551615"),
            Some((12, 345))
        );
        for bad in [
            "",
            "12",
            "12.",
            "x.345",
            "12.345.",
            "12.345.x",
            "12.345.1.2",
            "-.1",
        ] {
            assert_eq!(unplaced_owner(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn proc_stat_reads_this_process_as_running() {
        let (state, start) = proc_stat(std::process::id() as i32).unwrap();
        // The process's state is its main thread's, which may be waiting for the test threads.
        assert!(matches!(state, 'R' | 'S' | 'D'), "state {state}");
        let me = Detached {
            pid: std::process::id() as i32,
            start_time: start,
            node: "a".into(),
            command: vec!["x".into()],
            log: "/dev/null".into(),
        };
        assert!(me.running());
        assert_eq!(
            me.started(&LabName::new("t1").unwrap()),
            format!(
                "started `x` in node a of lab t1 as pid {}, output in /dev/null; `rtemu down t1` \
                 ends it",
                me.pid
            )
        );
        assert!(!Detached {
            start_time: start + 1,
            ..me
        }
        .running());
    }
}
