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
//!
//! `routing = "aggregate"` keeps those paths but merges each node's routes: destinations sorted
//! by address, a run of neighbours with the same next hop becomes the fewest aligned prefixes
//! that cover the run and reach at most into the unused space around it. No prefix of another
//! next hop, of the node's own subnets or of an unreachable destination is covered, so every
//! lab address is forwarded exactly as with one route per prefix. Pools hand out subnets in
//! file order, so a chain's or a tree's nodes need a few dozen routes instead of one per link.

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
    // A search from every node is n² steps (10⁸ at 10,000 nodes, seconds of one CPU before
    // the kernel gets any work): the sources are shared out over the machine's CPUs.
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    plan_in_shares(topo, topo.nodes.len().div_ceil(workers).max(MIN_SHARE))
}

/// Below this many sources a share is not worth a thread of its own.
const MIN_SHARE: usize = 256;

/// [`plan`], with the route searches of every `share` sources on a thread of their own. Every
/// source's routes depend on the graph alone, so the plan is the same however it is shared.
fn plan_in_shares(topo: &Topology, share: usize) -> Vec<NodePlan> {
    let mut plans = vec![NodePlan::default(); topo.nodes.len()];
    let mut interfaces = vec![0usize; topo.nodes.len()];
    for m in topo.segments.iter().flat_map(|s| &s.members) {
        interfaces[m.node] += 1;
    }
    match topo.routing {
        Routing::Static | Routing::Aggregate => {
            for v4 in [true, false] {
                static_routes(topo, v4, &mut plans, share);
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

/// One step of a path: leave through member `out` of segment `seg` towards member `peer`,
/// which is node `to` (kept here so a search need not visit the segment).
///
/// Small and flat on purpose: `static` routing searches from every node, n² steps in all,
/// and at 10,000 nodes the searches run from the cache or from memory.
#[derive(Clone, Copy)]
struct Hop {
    seg: u32,
    out: u32,
    peer: u32,
    to: u32,
}

/// A destination prefix and the nodes it is on.
struct Destination {
    net: IpNet,
    /// Its nodes, as a range of [`Graph::owners`].
    owners: std::ops::Range<usize>,
    loopback: bool,
}

/// One family's segments as hops between nodes, and its destinations.
struct Graph {
    /// The hops leaving node v are `hops[start[v]..start[v + 1]]`, in file order.
    start: Vec<usize>,
    hops: Vec<Hop>,
    destinations: Vec<Destination>,
    /// The nodes of every destination, one after another.
    owners: Vec<usize>,
}

impl Graph {
    fn new(topo: &Topology, v4: bool) -> Graph {
        let n = topo.nodes.len();
        let family = |seg: &crate::topology::Segment| {
            if v4 {
                seg.ipv4.map(IpNet::V4)
            } else {
                seg.ipv6.map(IpNet::V6)
            }
        };
        let mut degree = vec![0usize; n + 1];
        for seg in topo.segments.iter().filter(|s| family(s).is_some()) {
            for a in &seg.members {
                degree[a.node] += seg.members.iter().filter(|b| b.node != a.node).count();
            }
        }
        let mut start = Vec::with_capacity(n + 1);
        let mut total = 0;
        for d in &degree {
            start.push(total);
            total += d;
        }
        let mut fill = start.clone();
        let empty = Hop {
            seg: 0,
            out: 0,
            peer: 0,
            to: 0,
        };
        let mut hops = vec![empty; total];
        let (mut destinations, mut owners) = (Vec::new(), Vec::new());
        let index = |i: usize| u32::try_from(i).expect("fewer than 2³² segments and members");
        for (si, seg) in topo.segments.iter().enumerate() {
            let Some(net) = family(seg) else { continue };
            for (ai, a) in seg.members.iter().enumerate() {
                for (bi, b) in seg.members.iter().enumerate() {
                    if a.node != b.node {
                        hops[fill[a.node]] = Hop {
                            seg: index(si),
                            out: index(ai),
                            peer: index(bi),
                            to: index(b.node),
                        };
                        fill[a.node] += 1;
                    }
                }
            }
            let first = owners.len();
            owners.extend(seg.members.iter().map(|m| m.node));
            destinations.push(Destination {
                net,
                owners: first..owners.len(),
                loopback: false,
            });
        }
        for (ni, node) in topo.nodes.iter().enumerate() {
            for net in node
                .loopback
                .iter()
                .filter(|a| matches!(a, IpNet::V4(_)) == v4)
            {
                owners.push(ni);
                destinations.push(Destination {
                    net: net.trunc(),
                    owners: owners.len() - 1..owners.len(),
                    loopback: true,
                });
            }
        }
        Graph {
            start,
            hops,
            destinations,
            owners,
        }
    }
}

fn static_routes(topo: &Topology, v4: bool, plans: &mut [NodePlan], share: usize) {
    let graph = Graph::new(topo, v4);
    let aggregate = topo.routing == Routing::Aggregate;
    let space = aggregate.then(|| AddressSpace::new(topo, v4, &graph.destinations));
    let sources: Vec<usize> = (0..topo.nodes.len()).collect();
    // Each share searches with buffers of its own.
    let found: Vec<Found> = std::thread::scope(|s| {
        let searches: Vec<_> = sources
            .chunks(share)
            .map(|chunk| {
                let work = || search_from(topo, v4, &graph, space.as_ref(), chunk);
                std::thread::Builder::new()
                    .spawn_scoped(s, work)
                    .map_err(|_| work)
            })
            .collect();
        searches
            .into_iter()
            .map(|search| match search {
                Ok(thread) => thread.join().expect("a route search does not panic"),
                // No thread to be had: this one searches.
                Err(work) => work(),
            })
            .collect()
    });
    for found in found {
        for (source, routes) in found.routes {
            plans[source].routes.extend(routes);
        }
        for node in found.forwarders {
            plans[node].forwarding = true;
        }
    }
}

/// What the searches from a share of the nodes found.
struct Found {
    /// Each source's routes.
    routes: Vec<(usize, Vec<Route>)>,
    /// Nodes some source routes through (they forward), possibly more than once.
    forwarders: Vec<usize>,
}

/// A breadth-first search from each of `sources`, and the routes it gives.
fn search_from(
    topo: &Topology,
    v4: bool,
    graph: &Graph,
    space: Option<&AddressSpace>,
    sources: &[usize],
) -> Found {
    let n = topo.nodes.len();
    let destinations = &graph.destinations;
    let mut found = Found {
        routes: Vec::with_capacity(sources.len()),
        forwarders: Vec::new(),
    };
    // The next hop of every destination from the current source (`None`: its own or unreached).
    let mut next: Vec<Option<Hop>> = vec![None; destinations.len()];
    // Per search: every node's distance from the source (`u32::MAX`: not reached) and the
    // first hop towards it; the queue is the visited nodes in order.
    let mut dist = vec![u32::MAX; n];
    let mut first: Vec<Option<Hop>> = vec![None; n];
    let mut queue: Vec<usize> = Vec::with_capacity(n);
    // Whether a node is already in `found.forwarders`.
    let mut forwards = vec![false; n];

    for &source in sources {
        // Breadth-first search from `source`.
        for &v in &queue {
            dist[v] = u32::MAX;
            first[v] = None;
        }
        queue.clear();
        dist[source] = 0;
        queue.push(source);
        let mut head = 0;
        while head < queue.len() {
            let u = queue[head];
            head += 1;
            for hop in &graph.hops[graph.start[u]..graph.start[u + 1]] {
                let v = hop.to as usize;
                if dist[v] == u32::MAX {
                    dist[v] = dist[u] + 1;
                    first[v] = if u == source { Some(*hop) } else { first[u] };
                    queue.push(v);
                }
            }
        }
        let mut routes = Vec::new();
        for (d, next) in destinations.iter().zip(next.iter_mut()) {
            *next = None;
            let owners = &graph.owners[d.owners.clone()];
            if owners.contains(&source) {
                continue;
            }
            // The nearest owner; the first in file order among equals.
            let Some(owner) = owners
                .iter()
                .filter(|&&o| dist[o] != u32::MAX)
                .min_by_key(|&&o| dist[o])
            else {
                continue;
            };
            let hop = first[*owner].expect("a reached node other than the source has a first hop");
            let peer = hop.to as usize;
            // A node's own loopback is delivered, not forwarded.
            let delivered = d.loopback && owners[0] == peer;
            if !delivered && !forwards[peer] {
                forwards[peer] = true;
                found.forwarders.push(peer);
            }
            *next = Some(hop);
            if space.is_none() {
                routes.push(route(topo, v4, hop, d.net));
            }
        }
        if let Some(space) = space {
            aggregate_routes(topo, v4, space, &next, &mut routes);
        }
        found.routes.push((source, routes));
    }
    found
}

/// The route towards `dest` through `hop`.
fn route(topo: &Topology, v4: bool, hop: Hop, dest: IpNet) -> Route {
    let seg = &topo.segments[hop.seg as usize];
    let peer = &seg.members[hop.peer as usize];
    let via = if v4 {
        IpAddr::V4(peer.ipv4.expect("the segment carries IPv4").addr())
    } else {
        IpAddr::V6(peer.ipv6.expect("the segment carries IPv6").addr())
    };
    Route {
        dest,
        via,
        dev: seg.members[hop.out as usize].ifname.clone(),
    }
}

/// One node's routes of one family, merged: the fewest aligned prefixes such that each holds
/// destinations of one next hop only, besides unused addresses of the lab's pools.
///
/// Minimal among covers without overlaps: a block holding destinations of two next hops (or
/// of one and the node's own or unreached ones) cannot be a route, so its halves are covered
/// apart; a block that can be a route is never improved on by smaller ones. Only blocks that
/// hold a boundary between runs are split, so the work is runs × address width.
fn aggregate_routes(
    topo: &Topology,
    v4: bool,
    space: &AddressSpace,
    next: &[Option<Hop>],
    routes: &mut Vec<Route>,
) {
    let same = |a: Option<Hop>, b: Option<Hop>| match (a, b) {
        (Some(a), Some(b)) => (a.seg, a.out, a.peer) == (b.seg, b.out, b.peer),
        (None, None) => true,
        _ => false,
    };
    // run[k]: which run of one next hop the k-th destination by address belongs to.
    let mut run = Vec::with_capacity(space.order.len());
    for (k, &d) in space.order.iter().enumerate() {
        let fresh = k == 0 || !same(next[space.order[k - 1]], next[d]);
        run.push(run.last().copied().unwrap_or(0) + usize::from(fresh && k > 0));
    }
    let width = if v4 { 32 } else { 128 };
    let mut stack = vec![(
        0u128,
        if v4 { u128::from(u32::MAX) } else { u128::MAX },
        0u8,
    )];
    while let Some((start, end, prefix)) = stack.pop() {
        // The destinations the block [start, end] overlaps, by address.
        let first = space.last.partition_point(|&l| l < start);
        let past = space.first.partition_point(|&f| f <= end);
        if first >= past {
            continue;
        }
        let one_run = run[first] == run[past - 1];
        let pooled = space.pools.iter().any(|&(lo, hi)| lo <= start && end <= hi);
        // Outside the pools a block must be one destination exactly: its unused addresses
        // may be the outside world's.
        let exact = past - first == 1 && space.first[first] == start && space.last[first] == end;
        if one_run && (pooled || exact) {
            if let Some(hop) = next[space.order[first]] {
                let dest = if v4 {
                    let a = std::net::Ipv4Addr::from(start as u32);
                    IpNet::V4(ipnet::Ipv4Net::new(a, prefix).expect("a prefix of at most 32"))
                } else {
                    let a = std::net::Ipv6Addr::from(start);
                    IpNet::V6(ipnet::Ipv6Net::new(a, prefix).expect("a prefix of at most 128"))
                };
                routes.push(route(topo, v4, hop, dest));
            }
            continue;
        }
        if prefix == width {
            continue;
        }
        let half = 1u128 << (width - prefix - 1);
        // Pushed high half first, so routes come out in address order.
        stack.push((start + half, end, prefix + 1));
        stack.push((start, start + half - 1, prefix + 1));
    }
}

/// One family's destinations sorted by address, with the lab's pools: what aggregation
/// searches, built once per family.
struct AddressSpace {
    /// Indices into the destinations, by address.
    order: Vec<usize>,
    /// The first address of each destination, in that order.
    first: Vec<u128>,
    /// The last address of each destination, in that order.
    last: Vec<u128>,
    /// The first and last address of each pool of the family.
    pools: Vec<(u128, u128)>,
}

impl AddressSpace {
    fn new(topo: &Topology, v4: bool, destinations: &[Destination]) -> AddressSpace {
        let mut order: Vec<usize> = (0..destinations.len()).collect();
        order.sort_by_key(|&d| destinations[d].net.network());
        let bounds = |n: &IpNet| (address(n.network()), address(n.broadcast()));
        let (first, last) = order.iter().map(|&d| bounds(&destinations[d].net)).unzip();
        let pools = topo
            .pools
            .iter()
            .filter(|p| matches!(p, IpNet::V4(_)) == v4)
            .map(bounds)
            .collect();
        AddressSpace {
            order,
            first,
            last,
            pools,
        }
    }
}

fn address(a: IpAddr) -> u128 {
    match a {
        IpAddr::V4(a) => u32::from(a).into(),
        IpAddr::V6(a) => a.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chain of `n` nodes with links across it every few nodes and a LAN, so paths tie,
    /// branch and cross.
    fn tangled(n: usize, routing: &str) -> Topology {
        let mut src = rtemu_testutil::chain_topology("t", &format!("routing = \"{routing}\"\n"), n);
        let mut x: u64 = 7;
        for i in 0..n / 8 {
            // A fixed linear congruential sequence: the same tangle every run.
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let (a, b) = ((x >> 33) as usize % n, (x >> 13) as usize % n);
            if a != b {
                src += &format!("[[links]]\nname = \"x{i}\"\nendpoints = [\"n{a}\", \"n{b}\"]\n");
            }
        }
        src += "[[lans]]\nname = \"lan\"\nmembers = [\"n3\", \"n50\", \"n90\"]\n";
        Topology::parse("t.toml", &src).expect("a valid tangle")
    }

    /// However the sources are shared out over threads, every node gets the same routes in
    /// the same order and forwards alike.
    #[test]
    fn the_plan_is_the_same_however_the_searches_are_shared() {
        for routing in ["static", "aggregate"] {
            let topo = tangled(400, routing);
            let alone = plan_in_shares(&topo, usize::MAX);
            assert!(alone.iter().filter(|p| p.forwarding).count() > 100);
            assert!(alone.iter().all(|p| !p.routes.is_empty()));
            for share in [1, 37, 199] {
                assert!(
                    plan_in_shares(&topo, share) == alone,
                    "{routing}, shares of {share}"
                );
            }
        }
    }
}
