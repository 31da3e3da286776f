//! Routes, static neighbours and forwarding, stated exactly per node.

use std::path::Path;

use rtemu_topo::routing::{plan, NodePlan};
use rtemu_topo::Topology;

/// A node's routes as `dest via gateway dev ifname` lines, sorted.
fn routes(topo: &Topology, plans: &[NodePlan], node: &str) -> Vec<String> {
    let mut r: Vec<String> = plans[topo.node_index(node).unwrap()]
        .routes
        .iter()
        .map(|r| format!("{} via {} dev {}", r.dest, r.via, r.dev))
        .collect();
    r.sort();
    r
}

fn example() -> Topology {
    Topology::load(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/east-west-north.toml"),
    )
    .unwrap()
}

#[test]
fn east_west_north_routes_are_the_shortest_paths() {
    let topo = example();
    let plans = plan(&topo);
    assert_eq!(
        routes(&topo, &plans, "tindy1"),
        [
            "192.168.1.0/24 via 198.51.100.1 dev eth0",
            "192.168.2.0/30 via 198.51.100.1 dev eth0",
            "192.168.3.0/24 via 198.51.100.1 dev eth0",
            "fd00:3:2::/64 via fd00:3:1::1 dev eth0",
            "fd00:3:3::/64 via fd00:3:1::1 dev eth0",
            "fd00:3:4::/64 via fd00:3:1::1 dev eth0",
        ]
    );
    assert_eq!(
        routes(&topo, &plans, "north"),
        [
            "192.168.3.0/24 via 192.168.2.2 dev ng0",
            "198.51.100.0/24 via 192.168.1.1 dev ve0",
            "fd00:3:1::/64 via fd00:3:2::1 dev ve0",
            "fd00:3:4::/64 via fd00:3:3::2 dev ng0",
        ]
    );
    assert_eq!(
        routes(&topo, &plans, "west"),
        [
            "192.168.2.0/30 via 192.168.1.2 dev ve0",
            "192.168.3.0/24 via 192.168.1.2 dev ve0",
            "fd00:3:3::/64 via fd00:3:2::2 dev ve0",
            "fd00:3:4::/64 via fd00:3:2::2 dev ve0",
        ]
    );
    let forwarding: Vec<(&str, bool)> = topo
        .nodes
        .iter()
        .zip(&plans)
        .map(|(n, p)| (n.name.as_str(), p.forwarding))
        .collect();
    assert_eq!(
        forwarding,
        [
            ("east", true),
            ("north", true),
            ("tindy1", false),
            ("tpx30", false),
            ("west", true)
        ]
    );
}

#[test]
fn static_neighbours_cover_every_on_link_peer_with_its_mac() {
    let topo = example();
    let plans = plan(&topo);
    let tindy = &plans[topo.node_index("tindy1").unwrap()];
    let n: Vec<String> = tindy
        .neighbours
        .iter()
        .map(|n| format!("{} lladdr {} dev {}", n.addr, n.mac, n.dev))
        .collect();
    // west:fxp0 is the third interface of the lab (after north:ng0 and east:ng0).
    assert_eq!(
        n,
        [
            "198.51.100.1 lladdr 02:72:74:00:00:02 dev eth0",
            "fd00:3:1::1 lladdr 02:72:74:00:00:02 dev eth0",
        ]
    );
    // west has two peers (tindy1 and north), two families each.
    assert_eq!(plans[topo.node_index("west").unwrap()].neighbours.len(), 4);
    // Dynamic neighbours: no entries at all.
    let src = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/east-west-north.toml"),
    )
    .unwrap()
    .replace("neighbours = \"static\"", "neighbours = \"dynamic\"");
    let dynamic = Topology::parse("x", &src).unwrap();
    assert!(plan(&dynamic).iter().all(|p| p.neighbours.is_empty()));
}

#[test]
fn a_lan_is_one_hop_and_loopbacks_are_routed_to_their_node() {
    // a - b - c chain plus a LAN joining a and c: c is one hop from a over the LAN.
    let src = r#"
lab = "d"
ip = "ipv4"
[nodes.a]
[nodes.b]
[nodes.c]
addresses = ["192.0.2.3/32"]
[[links]]
endpoints = ["a", "b"]
ipv4 = "10.0.1.0/24"
[[links]]
endpoints = ["b", "c"]
ipv4 = "10.0.2.0/24"
[[lans]]
name = "lan"
members = ["a", "c"]
ipv4 = "10.0.3.0/24"
"#;
    let topo = Topology::parse("d.toml", src).unwrap();
    let plans = plan(&topo);
    assert_eq!(
        routes(&topo, &plans, "a"),
        [
            "10.0.2.0/24 via 10.0.1.2 dev eth0",
            "192.0.2.3/32 via 10.0.3.2 dev eth1"
        ]
    );
    // b reaches the LAN through a (the first equal-cost neighbour in file order).
    assert_eq!(
        routes(&topo, &plans, "b"),
        [
            "10.0.3.0/24 via 10.0.1.1 dev eth0",
            "192.0.2.3/32 via 10.0.2.2 dev eth1"
        ]
    );
    // Only c's own loopback is routed through c, so c does not forward; a reaches
    // 10.0.2.0/24 through b (b and c are both one hop away, b comes first).
    let fw: Vec<bool> = plans.iter().map(|p| p.forwarding).collect();
    assert_eq!(fw, [true, true, false]);
}

#[test]
fn a_family_is_only_routed_over_segments_that_carry_it() {
    // a - b carries both families, b - c only IPv4: c has no IPv6 route and nobody has an IPv6
    // route through b - c.
    let src = r#"
lab = "f"
ip = "ipv4"
[nodes.a]
[nodes.b]
[nodes.c]
[[links]]
endpoints = ["a", "b"]
ipv6 = "fd00:9::/64"
[[links]]
endpoints = ["b", "c"]
ipv4 = "10.9.0.0/24"
ip = "dual"
"#;
    // `ip` is a top-level key; the one above sits in the link table and must be refused.
    let err = Topology::parse("f.toml", src).unwrap_err();
    assert!(err.message.contains("unknown field `ip`"), "{err}");
    let src = src.replace("ip = \"dual\"\n", "");
    let topo = Topology::parse("f.toml", &src).unwrap();
    assert!(topo.segments[1].ipv6.is_none());
    let plans = plan(&topo);
    let c = routes(&topo, &plans, "c");
    assert_eq!(c, ["10.0.0.0/24 via 10.9.0.1 dev eth0"]);
    let a = routes(&topo, &plans, "a");
    assert_eq!(a, ["10.9.0.0/24 via 10.0.0.2 dev eth0"]);
    assert!(plans[2].neighbours.is_empty());
}

#[test]
fn routing_none_installs_no_routes_but_lets_routers_forward() {
    let src = "lab = \"n\"\nrouting = \"none\"\n[nodes.a]\n[nodes.b]\n[nodes.c]\n[[links]]\nendpoints = [\"a\", \"b\"]\n[[links]]\nendpoints = [\"b\", \"c\"]\n";
    let topo = Topology::parse("n.toml", src).unwrap();
    let plans = plan(&topo);
    assert!(plans.iter().all(|p| p.routes.is_empty()));
    let fw: Vec<bool> = plans.iter().map(|p| p.forwarding).collect();
    assert_eq!(fw, [false, true, false]);
}

#[test]
fn an_external_subnet_is_routed_to_its_node_which_forwards() {
    let src = r#"
lab = "x"
ip = "ipv4"
[nodes.a]
[nodes.b]
[nodes.c]
[[links]]
endpoints = ["a", "b"]
ipv4 = "10.0.1.0/24"
[[links]]
endpoints = ["b", "c"]
ipv4 = "10.0.2.0/24"
[[externals]]
node = "a"
host = "enp3s0"
ifname = "up0"
ipv4 = "203.0.113.7/24"
"#;
    let topo = Topology::parse("x.toml", src).unwrap();
    let ext = topo.segments.last().unwrap();
    assert_eq!(ext.members[0].ipv4.unwrap().to_string(), "203.0.113.7/24");
    assert_eq!(ext.ipv4.unwrap().to_string(), "203.0.113.0/24");
    let plans = plan(&topo);
    assert_eq!(
        routes(&topo, &plans, "c"),
        [
            "10.0.1.0/24 via 10.0.2.1 dev eth0",
            "203.0.113.0/24 via 10.0.2.1 dev eth0"
        ]
    );
    assert_eq!(
        routes(&topo, &plans, "a"),
        ["10.0.2.0/24 via 10.0.1.2 dev eth0"]
    );
    // a forwards between the outside and the lab even though no lab node routes through it.
    let fw: Vec<bool> = plans.iter().map(|p| p.forwarding).collect();
    assert_eq!(fw, [true, true, false]);
}

/// The route `routes` chooses for `addr` by longest prefix, as `via dev`.
fn lookup(routes: &[rtemu_topo::routing::Route], addr: std::net::IpAddr) -> Option<String> {
    routes
        .iter()
        .filter(|r| r.dest.contains(&addr))
        .max_by_key(|r| r.dest.prefix_len())
        .map(|r| format!("{} {}", r.via, r.dev))
}

/// A topology of `nodes` nodes from `links` (pairs), `lans` (member lists) and loopbacks on the
/// nodes `loopbacks` names, in the order given: pools hand out subnets in file order.
fn random_topology(
    routing: &str,
    nodes: usize,
    links: &[(usize, usize)],
    lans: &[Vec<usize>],
    loopbacks: &[usize],
) -> String {
    let mut src = format!("lab = \"agg\"\nrouting = \"{routing}\"\n");
    for i in 0..nodes {
        src += &format!("[nodes.n{i}]\n");
        if loopbacks.contains(&i) {
            src += &format!("addresses = [\"192.0.2.{i}/32\", \"2001:db8::{i:x}/128\"]\n");
        }
    }
    for (i, (a, b)) in links.iter().enumerate() {
        src += &format!("[[links]]\nname = \"k{i}\"\nendpoints = [\"n{a}\", \"n{b}\"]\n");
    }
    for (i, members) in lans.iter().enumerate() {
        let members: Vec<String> = members.iter().map(|m| format!("\"n{m}\"")).collect();
        src += &format!(
            "[[lans]]\nname = \"l{i}\"\nmembers = [{}]\n",
            members.join(", ")
        );
    }
    src
}

/// Every address a lab's routes can be asked about: the first and last of every subnet and
/// loopback address.
fn lab_addresses(topo: &Topology) -> Vec<std::net::IpAddr> {
    let nets = topo
        .segments
        .iter()
        .flat_map(|s| [s.ipv4.map(ipnet::IpNet::V4), s.ipv6.map(ipnet::IpNet::V6)])
        .flatten()
        .chain(
            topo.nodes
                .iter()
                .flat_map(|n| n.loopback.iter().map(|a| a.trunc())),
        );
    nets.flat_map(|n| [n.network(), n.broadcast()]).collect()
}

use proptest::prelude::*;

proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// Aggregation changes how many routes there are, never where a lab address goes: for every
    /// node and the first and last address of every subnet and loopback, the longest matching
    /// aggregated route leads to the same next hop as the one route per prefix (or, for the
    /// node's own and unreachable prefixes, there is none either way).
    #[test]
    fn aggregated_routes_forward_every_lab_address_as_per_prefix_routes_do(
        (nodes, links, lans, loopbacks) in (2usize..24).prop_flat_map(|n| (
            Just(n),
            proptest::collection::vec((0..n, 0..n), 1..n * 2),
            proptest::collection::vec(proptest::collection::btree_set(0..n, 2..=3.min(n)), 0..3),
            proptest::collection::vec(0..n, 0..4),
        ))
    ) {
        let links: Vec<(usize, usize)> = links.into_iter().filter(|(a, b)| a != b).collect();
        let lans: Vec<Vec<usize>> = lans
            .into_iter()
            .filter(|m| m.len() >= 2)
            .map(|m| m.into_iter().collect())
            .collect();
        let exact = Topology::parse(
            "agg.toml",
            &random_topology("static", nodes, &links, &lans, &loopbacks),
        )
        .unwrap();
        let merged = Topology::parse(
            "agg.toml",
            &random_topology("aggregate", nodes, &links, &lans, &loopbacks),
        )
        .unwrap();
        let (exact_plans, merged_plans) = (plan(&exact), plan(&merged));
        let addresses = lab_addresses(&exact);
        for (node, (e, m)) in exact_plans.iter().zip(&merged_plans).enumerate() {
            prop_assert!(m.routes.len() <= e.routes.len());
            // Beyond the pools (where the world's addresses may be) only whole lab prefixes.
            for r in &m.routes {
                prop_assert!(
                    merged.pools.iter().any(|p| p.contains(&r.dest))
                        || e.routes.iter().any(|x| x.dest == r.dest),
                    "n{} routes {} beyond the pools",
                    node,
                    r.dest
                );
            }
            prop_assert_eq!(e.forwarding, m.forwarding);
            for &addr in &addresses {
                prop_assert_eq!(
                    lookup(&e.routes, addr),
                    lookup(&m.routes, addr),
                    "node n{} towards {}",
                    node,
                    addr
                );
            }
        }
    }
}

#[test]
fn a_long_chain_needs_a_few_dozen_aggregated_routes_per_node() {
    let n = 1_000;
    let src = rtemu_testutil::chain_topology("agg", "routing = \"aggregate\"\n", n);
    let topo = Topology::parse("chain.toml", &src).unwrap();
    let plans = plan(&topo);
    let most = plans.iter().map(|p| p.routes.len()).max().unwrap();
    let total: usize = plans.iter().map(|p| p.routes.len()).sum();
    // One route per subnet would be n - 2 per family for every node (about 2 × 10⁶ in all);
    // each side of a node is one run of one next hop, a few prefixes per family.
    // (Measured: at most 36 per node, 19,950 in all.)
    assert!(most <= 100, "a node holds {most} routes");
    assert!(total < n * 100, "{total} routes in all");
    // And they still lead the right way: n0 reaches the last subnet through n1.
    let last = topo.segments.last().unwrap().ipv4.unwrap().network();
    assert_eq!(
        lookup(&plans[0].routes, last.into()),
        Some(format!(
            "{} eth0",
            topo.segments[0].members[1].ipv4.unwrap().addr()
        ))
    );
}

#[test]
fn static_routing_past_its_bound_is_refused_with_the_way_out() {
    // 3,000 dual-stack nodes: 3,000 × 5,998 destinations, past 10 million routes.
    let src = rtemu_testutil::chain_topology("big", "routing = \"static\"\n", 3_000);
    let err = Topology::parse("big.toml", &src).unwrap_err();
    assert_eq!((err.line, err.column), (2, 11), "{err}");
    assert!(
        err.message.contains("about 17994000 routes")
            && err.message.contains("at most 10000000")
            && err.message.contains("\"aggregate\""),
        "{err}"
    );
    let aggregate = src.replace("routing = \"static\"", "routing = \"aggregate\"");
    assert!(Topology::parse("big.toml", &aggregate).is_ok());
}
