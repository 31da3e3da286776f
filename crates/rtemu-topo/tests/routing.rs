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
