//! What can go wrong bringing a lab up or down, and the helpers that say what rtemu was doing.

use std::io;
use std::net::IpAddr;

use crate::part::PartError;
use crate::state::{BadLabName, LabName, StateError};

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
    /// The lab's programs were to be kept off the engine's CPUs on a machine without a cgroup
    /// cpuset controller.
    #[error(
        "keeping the lab's programs off the engine's CPUs needs a cgroup cpuset controller \
         (cgroup v2 `cpuset`, or v1 `cpuset` under /sys/fs/cgroup), which this machine lacks; \
         run them on every CPU (`programs_cpus = \"all\"`, the default)"
    )]
    NoCpuset,
    /// The lab's cpuset could not be made: one of its name is another lab's, or the kernel
    /// refused.
    #[error(transparent)]
    Cpuset(#[from] crate::cpuset::CpusetError),
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

/// A [`LabError::Io`] of doing `what`, for `map_err`.
pub(crate) fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> LabError {
    let what = what.into();
    move |source| LabError::Io { what, source }
}

pub(super) fn nl_err(what: impl Into<String>) -> impl FnOnce(rtnetlink::Error) -> LabError {
    let what = what.into();
    move |source| LabError::Netlink { what, source }
}
