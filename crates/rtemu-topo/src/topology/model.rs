//! What a validated topology is made of, and the questions asked of it.

use std::fmt;
use std::net::IpAddr;

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

use super::impairment::Impairment;
use crate::container::Container;

/// How routes are installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Routing {
    /// rtemu installs shortest-path routes to every address in every node.
    Static,
    /// The same shortest paths as [`Routing::Static`], each node's routes merged into the
    /// fewest prefixes that forward every lab address the same way: a few dozen routes per node
    /// where `Static` installs one per subnet (a 10,000-node chain: 10⁸ routes in all).
    Aggregate,
    /// No routes beyond the on-link ones: a routing daemon started by the user does the rest.
    None,
}

/// How neighbours (ARP/NDP) are resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NeighbourMode {
    /// Permanent entries for every on-link peer: no address resolution during a run.
    Static,
    /// The kernel resolves addresses as usual.
    Dynamic,
}

/// Where the processes rtemu starts in a lab's nodes may run (`programs_cpus`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProgramsCpus {
    /// On every CPU, the engine's among them: under `SCHED_FIFO` the engine preempts them at
    /// once (docs/benchmarks.md measured no difference worth a CPU on two).
    #[default]
    All,
    /// On every online CPU but the engine's release threads' (a cpuset cgroup of the lab).
    OffEngine,
}

impl ProgramsCpus {
    /// As the file and `up --programs-cpus` write it.
    pub fn as_str(self) -> &'static str {
        match self {
            ProgramsCpus::All => "all",
            ProgramsCpus::OffEngine => "off-engine",
        }
    }

    fn is_all(&self) -> bool {
        *self == ProgramsCpus::All
    }
}

impl std::str::FromStr for ProgramsCpus {
    type Err = String;

    fn from_str(text: &str) -> Result<ProgramsCpus, String> {
        match text {
            "all" => Ok(ProgramsCpus::All),
            "off-engine" => Ok(ProgramsCpus::OffEngine),
            other => Err(format!(
                "unknown programs_cpus `{}`: allowed are \"all\" (the nodes' programs on every \
                 CPU) and \"off-engine\" (on every CPU but the engine's)",
                other.chars().take(32).collect::<String>()
            )),
        }
    }
}

/// A locally administered, unicast Ethernet address.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct Mac(pub [u8; 6]);

impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }
}

impl Mac {
    /// The address rtemu gives the `index`-th interface of a lab: `02:72:74` ("rt", locally
    /// administered) followed by the index, so it is unique within a lab and the same on every
    /// `up` of the same file.
    pub fn for_interface(index: u32) -> Mac {
        let i = index.to_be_bytes();
        Mac([0x02, 0x72, 0x74, i[1], i[2], i[3]])
    }
}

/// A validated topology.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Topology {
    /// The lab's name.
    pub lab: String,
    /// How routes are installed.
    pub routing: Routing,
    /// How neighbours are resolved.
    pub neighbours: NeighbourMode,
    /// Nodes in name order.
    pub nodes: Vec<Node>,
    /// Links first (file order), then LANs (file order).
    pub segments: Vec<Segment>,
    /// The machines of a multi-host lab, in name order; empty for a lab on one machine.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<Host>,
    /// The pools (IPv4, IPv6) subnets without an address of their own came from: their unused
    /// addresses belong to the lab, so `routing = "aggregate"` may route them with their
    /// neighbours (addresses outside them may be the world's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pools: Vec<IpNet>,
    /// Where the lab's programs may run.
    #[serde(default, skip_serializing_if = "ProgramsCpus::is_all")]
    pub programs_cpus: ProgramsCpus,
}

/// One machine of a multi-host lab (`[hosts]`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Host {
    /// Its name in the file.
    pub name: String,
    /// Its address on the underlay: where its agent listens and its tunnels end.
    pub address: IpAddr,
    /// Its agent's TCP port.
    pub port: u16,
}

/// The TCP port of a host's agent when `[hosts]` does not give one.
pub const DEFAULT_AGENT_PORT: u16 = 7781;

/// A node: one network namespace.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Node {
    /// The node's name.
    pub name: String,
    /// Addresses on its loopback interface.
    pub loopback: Vec<IpNet>,
    /// Sysctls set in the node, in name order.
    pub sysctls: Vec<(String, String)>,
    /// Start-up commands (`sh -c`).
    pub run: Vec<String>,
    /// Environment of start-up commands.
    pub env: Vec<(String, String)>,
    /// CPU limit in cores.
    pub cpu: Option<f64>,
    /// In a multi-host lab, the host it runs on: the file's choice or rtemu's placement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The container it runs in its namespace; `None` for a bare namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<Container>,
}

/// What a segment is made of.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SegmentKind {
    /// A point-to-point link (a veth pair), maybe impaired.
    Link {
        /// The impairment, when the file asks for one.
        impairment: Option<Impairment>,
    },
    /// A broadcast segment (a bridge with one veth pair per member).
    Lan,
    /// A host interface handed to the segment's only member.
    External {
        /// The host interface's name.
        host: String,
        /// How it is handed over.
        mode: ExternalMode,
        /// Moved even when the host is reached through it (`uplink = true`).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        uplink: bool,
    },
}

/// How a host interface is handed to a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExternalMode {
    /// The interface moves into the node (renamed there) and returns to the host with its
    /// original name at `down`.
    Move,
    /// The node gets a macvlan interface on it; the host keeps the interface.
    Macvlan,
}

/// A link or a LAN.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Segment {
    /// Its name (unique among links and LANs).
    pub name: String,
    /// Link or LAN.
    pub kind: SegmentKind,
    /// MTU of every member interface (kernel default when `None`).
    pub mtu: Option<u32>,
    /// Its IPv4 subnet.
    pub ipv4: Option<Ipv4Net>,
    /// Its IPv6 subnet.
    pub ipv6: Option<Ipv6Net>,
    /// The node interfaces on it.
    pub members: Vec<Attachment>,
    /// In a multi-host lab, the host whose engine releases an impaired link's frames.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_host: Option<String>,
}

/// One node's interface on a segment.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Attachment {
    /// Index into [`Topology::nodes`].
    pub node: usize,
    /// Interface name inside the node.
    pub ifname: String,
    /// Its IPv4 address with the segment's prefix length.
    pub ipv4: Option<Ipv4Net>,
    /// Its IPv6 address with the segment's prefix length.
    pub ipv6: Option<Ipv6Net>,
    /// Its Ethernet address.
    pub mac: Mac,
}

impl Attachment {
    /// Its address of the family of `like`.
    pub fn addr_like(&self, like: IpAddr) -> Option<IpAddr> {
        match like {
            IpAddr::V4(_) => self.ipv4.map(|n| IpAddr::V4(n.addr())),
            IpAddr::V6(_) => self.ipv6.map(|n| IpAddr::V6(n.addr())),
        }
    }
}

impl Segment {
    /// An impaired link's impairment; `None` for an ideal link, a LAN or an external.
    pub fn impairment(&self) -> Option<&Impairment> {
        match &self.kind {
            SegmentKind::Link { impairment } => impairment.as_ref(),
            _ => None,
        }
    }
}

impl Topology {
    /// The index of the node called `name`.
    ///
    /// A binary search: the validator keeps nodes in name order, and callers look up every
    /// node of a lab in turn, which a scan made quadratic (a 10,000-node lab's views spent
    /// most of their time here). A topology not in that order (built by hand) is scanned.
    pub fn node_index(&self, name: &str) -> Option<usize> {
        self.nodes
            .binary_search_by(|n| n.name.as_str().cmp(name))
            .ok()
            .or_else(|| self.nodes.iter().position(|n| n.name == name))
    }

    /// Every segment's index by its name: for callers that look up many (each direction of a
    /// report), where a scan per lookup grows with links × segments.
    pub fn segment_indices(&self) -> std::collections::HashMap<&str, usize> {
        self.segments
            .iter()
            .enumerate()
            .map(|(i, s)| (s.name.as_str(), i))
            .collect()
    }

    /// Each node's attachments with their segments, indexed like [`Topology::nodes`], each in
    /// segment order: one pass over the segments, where asking per node would be quadratic.
    pub fn attachments_by_node(&self) -> Vec<Vec<(&Segment, &Attachment)>> {
        let mut by_node = vec![Vec::new(); self.nodes.len()];
        for seg in &self.segments {
            for m in &seg.members {
                by_node[m.node].push((seg, m));
            }
        }
        by_node
    }

    /// Whether any segment asks for the real-time engine.
    pub fn impaired_links(&self) -> impl Iterator<Item = (&Segment, &Impairment)> {
        self.segments
            .iter()
            .filter_map(|s| s.impairment().map(|i| (s, i)))
    }
}

/// Where two nodes reach each other: for tools run between them (`rtemu lab rtt --from A
/// --to B`).
impl Topology {
    /// The address `to` is reached at from `from`: its first address on a link or LAN both
    /// are on (IPv4 before IPv6), else its first address at all. `None` when a node is
    /// unknown or `to` has no address.
    pub fn peer_address(&self, from: &str, to: &str) -> Option<IpAddr> {
        let (a, b) = (self.node_index(from)?, self.node_index(to)?);
        let first = |m: &Attachment| {
            m.ipv4
                .map(|n| IpAddr::V4(n.addr()))
                .or(m.ipv6.map(|n| IpAddr::V6(n.addr())))
        };
        let shared = self
            .segments
            .iter()
            .filter(|seg| seg.members.iter().any(|m| m.node == a))
            .flat_map(|seg| seg.members.iter().filter(|m| m.node == b))
            .find_map(first);
        shared
            .or_else(|| {
                self.segments
                    .iter()
                    .flat_map(|seg| seg.members.iter().filter(|m| m.node == b))
                    .find_map(first)
            })
            .or_else(|| self.nodes[b].loopback.first().map(|n| n.addr()))
    }

    /// The interfaces of `from` and `to` on the first link or LAN both are on, in that
    /// order: where Ethernet frames leave `from` and arrive at `to` without crossing a
    /// router. `None` when a node is unknown or the two share no segment.
    pub fn facing_interfaces(&self, from: &str, to: &str) -> Option<(String, String)> {
        let (a, b) = (self.node_index(from)?, self.node_index(to)?);
        self.segments.iter().find_map(|seg| {
            let on = |node: usize| seg.members.iter().find(|m| m.node == node);
            Some((on(a)?.ifname.clone(), on(b)?.ifname.clone()))
        })
    }
}
