//! rtemu's virtual networks: a lab of nodes (network namespaces) joined by point-to-point links
//! (veth pairs) and LAN segments (bridges), described by one TOML file.
//!
//! * [`spec`]: the file as written, with the position of every value;
//! * [`topology`]: the validated [`Topology`] (names checked, interfaces named, addresses
//!   assigned), with errors that name the file, line and column;
//! * [`claims`]: the subnets and addresses a file claims, overlaps found in logarithmic time;
//! * [`placement`]: which host each node of a multi-host lab runs on;
//! * [`part`]: one host's part of a multi-host lab and its VXLAN tunnels to the others;
//! * [`underlay`]: the round trip across the underlay to the other hosts, measured as a part
//!   comes up, so it can be shown beside the links between hosts;
//! * [`routing`]: the routes, static neighbours and forwarding flags every node gets;
//! * [`graph`]: the topology as Graphviz DOT or Mermaid text, or as SVG through Graphviz;
//! * [`naming`]: the names of what a lab makes (namespaces, engine ends, the ownership mark);
//! * [`lab`]: bringing a lab up and down through netlink, with [`state`] (the state file that
//!   makes teardown exact) and [`sys`] (named namespaces; the crate's only `unsafe`);
//! * [`external`]: what a host interface moved into a node carried, checked before it moves
//!   and given back at `down`;
//! * [`capture`] and [`pcapng`]: packets of several node interfaces into one file;
//! * [`cgroup`]: per-node CPU limits, and joining and removing cgroups;
//! * [`cpuset`]: the lab's programs kept off the engine's CPUs;
//! * [`container`]: a node's container image and how it runs, as the file says.
//!
//! [`spec`], [`topology`], [`placement`], [`part`] and [`routing`] are pure: no root, no I/O beyond reading the file;
//! so are [`graph`]'s DOT and Mermaid forms (its SVG runs Graphviz's `dot`).
#![deny(unsafe_code)]
#![warn(missing_docs)]
// Every unsafe block says why it is sound.
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod capture;
pub mod cgroup;
pub mod claims;
pub mod container;
pub mod cpuset;
pub mod error;
pub mod external;
pub mod graph;
pub mod lab;
pub mod launch;
pub mod naming;
pub mod part;
pub mod pcapng;
pub mod placement;
pub mod routing;
pub mod runtime;
pub mod spec;
pub mod state;
#[allow(unsafe_code)]
pub mod sys;
pub mod topology;
pub mod underlay;

pub use error::{LoadError, SpecError};
pub use topology::Topology;
