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
//!
//! Modules: `up` and `down` the lifecycle, over the `shares` of a
//! topology one `up` builds; `netns` the namespaces and netlink into them; `links` the
//! links and LANs, `tunnels` a part's VXLAN tunnels, `nodes` each node's set-up,
//! `handover` the host interfaces handed to nodes; `exec` commands in nodes; `builders`
//! the threads that do all this at once; `error` what goes wrong.

mod builders;
mod down;
mod error;
mod exec;
mod handover;
mod links;
mod netns;
mod nodes;
mod shares;
mod tunnels;
mod up;

pub use crate::naming::{engine_ends, lab_netns, legacy_node_netns, node_netns, ownership_mark};
pub use down::down;
pub(crate) use error::io_err;
pub use error::LabError;
pub use exec::{exec_command, exec_detached, logs_command, node_command, resolve_lab};
pub use up::{up, up_part, up_with, vnis_in_use};
