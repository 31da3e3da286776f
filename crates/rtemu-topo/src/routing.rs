//! What the kernel of every node must be told so every address of the lab is reachable:
//! shortest-path routes, permanent neighbour entries and IP forwarding.
//!
//! Pure functions of a [`Topology`]: the same file gives the same plan, and tests can state
//! the exact routes of every node without root.
//!
//! Shortest means fewest hops, a LAN counting as one hop between any two members. Paths are
//! found per address family over the segments that carry it (a link without IPv6 does not
//! carry IPv6 routes). Ties are broken by file order: the first segment, then the first
//! member, found by a breadth-first search wins, so plans are deterministic.

use std::collections::VecDeque;
use std::net::IpAddr;

use ipnet::IpNet;

use crate::topology::{Mac, NeighbourMode, Routing, SegmentKind, Topology};

/// A route through a gateway.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct Route {
    /// The destination prefix.
    pub dest: IpNet,
    /// The next hop: a neighbour's address on the segment behind `dev`.
    pub via: IpAddr,
    /// The node's interface towards `via`.
    pub dev: String,
}

/// A permanent neighbour (ARP or NDP) entry.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct Neighbour {
    /// The peer's address.
    pub addr: IpAddr,
    /// The peer interface's Ethernet address.
    pub mac: Mac,
    /// The node's interface the peer is reached on.
    pub dev: String,
}

/// Everything one node gets beyond its interfaces and addresses.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct NodePlan {
    /// Routes to every prefix the node is not on.
    pub routes: Vec<Route>,
    /// Permanent neighbour entries (empty unless `neighbours = "static"`).
    pub neighbours: Vec<Neighbour>,
    /// Whether the node forwards IPv4 and IPv6.
    pub forwarding: bool,
}

/// The plan of every node, indexed like [`Topology::nodes`].
///
/// With `routing = "static"` a node forwards when some other node routes through it towards a
/// prefix that is not the node's own loopback address. With `routing = "none"` every node
/// with two or more interfaces forwards, so a routing daemon only has to install routes.
pub fn plan(topo: &Topology) -> Vec<NodePlan> {
    let mut plans = vec![NodePlan::default(); topo.nodes.len()];
    let mut interfaces = vec![0usize; topo.nodes.len()];
    for m in topo.segments.iter().flat_map(|s| &s.members) {
        interfaces[m.node] += 1;
    }
    match topo.routing {
        Routing::Static => {
            for v4 in [true, false] {
                static_routes(topo, v4, &mut plans);
            }
        }
        Routing::None => {
            for (plan, &n) in plans.iter_mut().zip(&interfaces) {
                plan.forwarding = n >= 2;
            }
        }
    }
    // A node holding a host interface is the outside hosts' gateway into the lab.
    for seg in &topo.segments {
        if let SegmentKind::External { .. } = seg.kind {
            let node = seg.members[0].node;
            if interfaces[node] >= 2 {
                plans[node].forwarding = true;
            }
        }
    }
    if topo.neighbours == NeighbourMode::Static {
        for seg in &topo.segments {
            for a in &seg.members {
                for b in seg.members.iter().filter(|b| !std::ptr::eq(*b, a)) {
                    let peer = [
                        b.ipv4.map(|n| IpAddr::V4(n.addr())),
                        b.ipv6.map(|n| IpAddr::V6(n.addr())),
                    ];
                    for addr in peer.into_iter().flatten() {
                        plans[a.node].neighbours.push(Neighbour {
                            addr,
                            mac: b.mac,
                            dev: a.ifname.clone(),
                        });
                    }
                }
            }
        }
    }
    plans
}

/// One step of a path: leave through member `out` of segment `seg` towards member `peer`.
#[derive(Clone, Copy)]
struct Hop {
    seg: usize,
    out: usize,
    peer: usize,
}

/// A destination prefix and the nodes it is on.
struct Destination {
    net: IpNet,
    owners: Vec<usize>,
    loopback: bool,
}

fn static_routes(topo: &Topology, v4: bool, plans: &mut [NodePlan]) {
    let n = topo.nodes.len();
    // adjacency[node] = hops leaving that node, in file order.
    let mut adjacency: Vec<Vec<Hop>> = vec![Vec::new(); n];
    let mut destinations = Vec::new();
    for (si, seg) in topo.segments.iter().enumerate() {
        let net = if v4 {
            seg.ipv4.map(IpNet::V4)
        } else {
            seg.ipv6.map(IpNet::V6)
        };
        let Some(net) = net else { continue };
        for (ai, a) in seg.members.iter().enumerate() {
            for (bi, b) in seg.members.iter().enumerate() {
                if a.node != b.node {
                    adjacency[a.node].push(Hop {
                        seg: si,
                        out: ai,
                        peer: bi,
                    });
                }
            }
        }
        destinations.push(Destination {
            net,
            owners: seg.members.iter().map(|m| m.node).collect(),
            loopback: false,
        });
    }
    for (ni, node) in topo.nodes.iter().enumerate() {
        for net in node
            .loopback
            .iter()
            .filter(|a| matches!(a, IpNet::V4(_)) == v4)
        {
            destinations.push(Destination {
                net: net.trunc(),
                owners: vec![ni],
                loopback: true,
            });
        }
    }

    for source in 0..n {
        // Breadth-first search recording, for every node reached, its distance and the first
        // hop from `source` towards it.
        let mut dist: Vec<Option<usize>> = vec![None; n];
        let mut first: Vec<Option<Hop>> = vec![None; n];
        dist[source] = Some(0);
        let mut queue = VecDeque::from([source]);
        while let Some(u) = queue.pop_front() {
            for hop in &adjacency[u] {
                let v = topo.segments[hop.seg].members[hop.peer].node;
                if dist[v].is_none() {
                    dist[v] = Some(dist[u].expect("queued nodes have a distance") + 1);
                    first[v] = if u == source { Some(*hop) } else { first[u] };
                    queue.push_back(v);
                }
            }
        }
        for d in &destinations {
            if d.owners.contains(&source) {
                continue;
            }
            // The nearest owner; the first in file order among equals.
            let Some(owner) = d
                .owners
                .iter()
                .filter(|&&o| dist[o].is_some())
                .min_by_key(|&&o| dist[o])
            else {
                continue;
            };
            let hop = first[*owner].expect("a reached node other than the source has a first hop");
            let seg = &topo.segments[hop.seg];
            let peer = &seg.members[hop.peer];
            let via = if v4 {
                IpAddr::V4(peer.ipv4.expect("the segment carries IPv4").addr())
            } else {
                IpAddr::V6(peer.ipv6.expect("the segment carries IPv6").addr())
            };
            plans[source].routes.push(Route {
                dest: d.net,
                via,
                dev: seg.members[hop.out].ifname.clone(),
            });
            if !(d.loopback && d.owners[0] == peer.node) {
                plans[peer.node].forwarding = true;
            }
        }
    }
}
