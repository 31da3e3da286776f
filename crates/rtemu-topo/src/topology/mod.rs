//! The validated topology: every name checked, every interface named, every address assigned.
//!
//! [`Topology::parse`] is the only way to build one from a file, so code that receives a
//! [`Topology`] can rely on: unique valid names, nodes that exist, interface names that fit the
//! kernel's 15 characters and are unique per node, subnets that do not overlap one another or
//! any loopback address, and subnets large enough for their members.
//!
//! * `model`: what a topology is made of (nodes, segments, their interfaces and hosts);
//! * `impairment`: an impaired link's netem parameters, trace and schedule;
//! * `record`: an impairment as a state file holds it, validated again when read back;
//! * `load`: reading a file and checking what only building its links shows;
//! * `names`: which lab, node and interface names are valid;
//! * `validate`: the file checked in passes, each named for what it checks.

mod impairment;
mod load;
mod model;
mod names;
mod record;
mod validate;

pub use impairment::{Change, Impairment, Netem};
pub use load::{Culprit, LinkCheck, LinkCheckError};
pub use model::{
    Attachment, ExternalMode, Host, Mac, NeighbourMode, Node, ProgramsCpus, Routing, Segment,
    SegmentKind, Topology, DEFAULT_AGENT_PORT,
};
pub use names::{valid_ifname, valid_name};

/// Longest lab name: it is part of every namespace name and of interface ownership marks.
pub const MAX_LAB_NAME: usize = 12;
/// Longest node, link or LAN name.
pub const MAX_NODE_NAME: usize = 32;
/// The largest topology file read: 16 MiB (a 1000-node file is about 100 KiB).
pub const MAX_TOPOLOGY_BYTES: u64 = 16 << 20;

/// Longest interface name the kernel accepts (`IFNAMSIZ - 1`).
pub const MAX_IFNAME: usize = 15;
/// The IPv4 pool used when the file has no `[pool] ipv4`.
pub const DEFAULT_POOL_V4: &str = "10.0.0.0/8";
/// The IPv6 pool used when the file has no `[pool] ipv6`.
pub const DEFAULT_POOL_V6: &str = "fd00:7274::/32";

/// The most routes `routing = "static"` may install in a lab (one per destination per node):
/// a 2,000-node chain needs 4 million, which take a minute to install; far more would take an
/// hour and gigabytes, where `aggregate` needs a few per node.
pub const MAX_STATIC_ROUTES: usize = 10_000_000;
