//! Multi-host topology files: `[hosts]`, pinned and placed nodes, the engine's host, and how
//! `rtemu graph` shows the placement.

use std::collections::{BTreeMap, BTreeSet};

use rtemu_topo::graph;
use rtemu_topo::lab;
use rtemu_topo::part::{
    tunnel_mtu, Part, PartError, Stitching, Tunnel, TunnelRole, FIRST_VNI, MAX_VNI, VXLAN_PORT,
};
use rtemu_topo::topology::DEFAULT_AGENT_PORT;
use rtemu_topo::Topology;

/// The four-node chain of the multi-host test: a and b pinned to h1, d to h2, c placed.
const CHAIN: &str = r#"
lab = "split"
[hosts]
h1 = { address = "192.0.2.10" }
h2 = { address = "192.0.2.11", port = 9000 }
[nodes.a]
host = "h1"
[nodes.b]
host = "h1"
[nodes.c]
[nodes.d]
host = "h2"
[[links]]
endpoints = ["a", "b"]
[[links]]
name = "wan"
endpoints = ["b", "c"]
netem = "delay 10ms"
[[links]]
endpoints = ["c", "d"]
"#;

fn host_of<'a>(topo: &'a Topology, node: &str) -> &'a str {
    let n = &topo.nodes[topo.node_index(node).unwrap()];
    n.host.as_deref().unwrap()
}

#[test]
fn hosts_are_read_with_their_agent_ports() {
    let topo = Topology::parse("split.toml", CHAIN).unwrap();
    let hosts: Vec<(&str, String, u16)> = topo
        .hosts
        .iter()
        .map(|h| (h.name.as_str(), h.address.to_string(), h.port))
        .collect();
    assert_eq!(
        hosts,
        [
            ("h1", "192.0.2.10".to_owned(), DEFAULT_AGENT_PORT),
            ("h2", "192.0.2.11".to_owned(), 9000)
        ]
    );
}

#[test]
fn an_unpinned_node_follows_its_impaired_link_within_the_share() {
    let topo = Topology::parse("split.toml", CHAIN).unwrap();
    // h1 already holds its share (2 of 4), so c cannot join b there: it goes to h2 and the
    // impaired link crosses, with its engine on its first endpoint's host.
    assert_eq!(
        ["a", "b", "c", "d"].map(|n| host_of(&topo, n)),
        ["h1", "h1", "h2", "h2"]
    );
    let wan = topo.segments.iter().find(|s| s.name == "wan").unwrap();
    assert_eq!(wan.engine_host.as_deref(), Some("h1"));
    let ideal = topo.segments.iter().find(|s| s.name == "a-b").unwrap();
    assert_eq!(ideal.engine_host, None);
}

#[test]
fn the_engine_can_be_moved_to_the_other_endpoints_host() {
    let src = CHAIN.replace(
        "netem = \"delay 10ms\"",
        "netem = \"delay 10ms\"\nengine = \"h2\"",
    );
    let topo = Topology::parse("split.toml", &src).unwrap();
    let wan = topo.segments.iter().find(|s| s.name == "wan").unwrap();
    assert_eq!(wan.engine_host.as_deref(), Some("h2"));
}

#[test]
fn unpinned_nodes_keep_an_impaired_link_on_one_host_when_there_is_room() {
    // Only d is pinned: b and c fit on h1 together, a joins d.
    let src = CHAIN.replace("host = \"h1\"\n", "");
    let topo = Topology::parse("split.toml", &src).unwrap();
    assert_eq!(
        ["a", "b", "c", "d"].map(|n| host_of(&topo, n)),
        ["h2", "h1", "h1", "h2"]
    );
    let on_h1 = topo
        .nodes
        .iter()
        .filter(|n| n.host.as_deref() == Some("h1"));
    assert_eq!(on_h1.count(), 2, "two nodes per host");
}

#[test]
fn a_file_without_hosts_places_nothing_and_serialises_as_before() {
    let src = "lab = \"one\"\n[nodes.a]\n[nodes.b]\n[[links]]\nendpoints = [\"a\", \"b\"]\nnetem = \"delay 1ms\"\n";
    let topo = Topology::parse("one.toml", src).unwrap();
    assert!(topo.hosts.is_empty());
    assert!(topo.nodes.iter().all(|n| n.host.is_none()));
    assert!(topo.segments.iter().all(|s| s.engine_host.is_none()));
    let json = serde_json::to_string(&topo).unwrap();
    for key in ["\"hosts\"", "\"host\"", "\"engine_host\""] {
        assert!(!json.contains(key), "{key} in {json}");
    }
    let back: Topology = serde_json::from_str(&json).unwrap();
    assert_eq!(back, topo);
}

#[test]
fn placement_survives_the_state_file_form() {
    let topo = Topology::parse("split.toml", CHAIN).unwrap();
    let back: Topology = serde_json::from_str(&serde_json::to_string(&topo).unwrap()).unwrap();
    assert_eq!(back, topo);
}

#[test]
fn graphs_draw_each_host_around_its_nodes_and_mark_stitched_links() {
    let topo = Topology::parse("split.toml", CHAIN).unwrap();
    let dot = graph::dot(&topo);
    let h1 = dot.find("subgraph \"cluster:h1\"").expect(&dot);
    let h2 = dot.find("subgraph \"cluster:h2\"").expect(&dot);
    let (first, second) = (&dot[h1..h2], &dot[h2..]);
    assert!(first.contains("label=\"host h1 (192.0.2.10)\""), "{dot}");
    assert!(
        first.contains("\"a\";") && first.contains("\"b\";"),
        "{dot}"
    );
    let second = &second[..second.find("  }").unwrap()];
    assert!(
        second.contains("\"c\";") && second.contains("\"d\";"),
        "{dot}"
    );
    let wan = dot.lines().find(|l| l.contains("\"b\" -- \"c\"")).unwrap();
    assert!(
        wan.contains("vxlan") && wan.contains("style=dashed"),
        "{wan}"
    );
    let local = dot.lines().find(|l| l.contains("\"a\" -- \"b\"")).unwrap();
    assert!(
        !local.contains("vxlan") && !local.contains("dashed"),
        "{local}"
    );

    let mermaid = graph::mermaid(&topo);
    assert!(
        mermaid.contains(
            "  subgraph m_h2[\"host h2 (192.0.2.11)\"]\n  n_c[\"c\"]\n  n_d[\"d\"]\n  end\n"
        ),
        "{mermaid}"
    );
    assert!(mermaid.contains("n_b -.-|"), "{mermaid}");
}

#[test]
fn up_refuses_a_multi_host_lab_before_making_anything() {
    let topo = Topology::parse("split.toml", CHAIN).unwrap();
    let err = rtemu_topo::lab::up(&topo, "split.toml").unwrap_err();
    assert!(
        matches!(&err, rtemu_topo::lab::LabError::MultiHost { lab, hosts } if lab == "split" && hosts == "h1, h2"),
        "{err}"
    );
    assert!(
        !rtemu_topo::state::lab_dir(&rtemu_topo::state::LabName::new("split").unwrap()).exists()
    );
}

/// The VNIs of the chain's one stitched segment, `wan`, with 1048576 taken on some host.
fn stitching(topo: &Topology) -> Stitching {
    Stitching::allocate(topo, &BTreeSet::from([FIRST_VNI])).unwrap()
}

#[test]
fn vnis_go_to_the_stitched_segments_only_and_skip_those_in_use() {
    let topo = Topology::parse("split.toml", CHAIN).unwrap();
    let names: Vec<&str> = topo
        .stitched()
        .map(|si| topo.segments[si].name.as_str())
        .collect();
    assert_eq!(names, ["wan"]);
    let s = stitching(&topo);
    assert_eq!(s.port, VXLAN_PORT);
    assert_eq!(s.vnis, BTreeMap::from([("wan".to_owned(), FIRST_VNI + 1)]));
}

#[test]
fn each_host_builds_its_nodes_and_one_tunnel_end_of_the_impaired_link() {
    let topo = Topology::parse("split.toml", CHAIN).unwrap();
    let s = stitching(&topo);
    let wan = topo.segments.iter().position(|g| g.name == "wan").unwrap();
    let h1 = topo.part("h1", &s).unwrap();
    let h2 = topo.part("h2", &s).unwrap();
    let names = |p: &Part| -> Vec<String> {
        p.nodes
            .iter()
            .map(|&n| topo.nodes[n].name.clone())
            .collect()
    };
    assert_eq!(names(&h1), ["a", "b"]);
    assert_eq!(names(&h2), ["c", "d"]);
    // h1 runs the engine (the first endpoint's host): the tunnel is its far end, toward c.
    assert_eq!(
        h1.tunnels,
        [Tunnel {
            segment: wan,
            role: TunnelRole::Engine { end: 1 },
            netns: lab::lab_netns("split"),
            ifname: lab::engine_ends(wan)[1].clone(),
            vni: FIRST_VNI + 1,
            remotes: vec!["192.0.2.11".parse().unwrap()],
        }]
    );
    // On h2 the tunnel is c's own interface, with the name the whole file gives it.
    let c = &topo.segments[wan].members[1];
    assert_eq!(
        h2.tunnels,
        [Tunnel {
            segment: wan,
            role: TunnelRole::Node { member: 1 },
            netns: lab::node_netns("split", "c"),
            ifname: c.ifname.clone(),
            vni: FIRST_VNI + 1,
            remotes: vec!["192.0.2.10".parse().unwrap()],
        }]
    );
    assert!(h1.segments.contains(&wan) && h2.segments.contains(&wan));
}

#[test]
fn a_part_needs_hosts_a_known_host_and_a_vni_for_every_stitched_segment() {
    let topo = Topology::parse("split.toml", CHAIN).unwrap();
    let s = stitching(&topo);
    assert!(matches!(
        topo.part("h9", &s),
        Err(PartError::UnknownHost { host, hosts, .. }) if host == "h9" && hosts == "h1, h2"
    ));
    let none = Stitching {
        port: VXLAN_PORT,
        vnis: BTreeMap::new(),
    };
    assert_eq!(topo.part("h1", &none), Err(PartError::NoVni("wan".into())));
    let big = Stitching {
        port: VXLAN_PORT,
        vnis: BTreeMap::from([("wan".to_owned(), MAX_VNI + 1)]),
    };
    assert!(
        matches!(topo.part("h1", &big), Err(PartError::BadVni { vni, .. }) if vni == MAX_VNI + 1)
    );
    let single = Topology::parse("one.toml", "lab = \"one\"\n[nodes.a]\n").unwrap();
    assert_eq!(
        single.part("h1", &none),
        Err(PartError::NoHosts("one".into()))
    );
}

#[test]
fn a_tunnels_mtu_is_the_underlays_less_the_headers_or_the_files_when_smaller() {
    let topo = Topology::parse("split.toml", CHAIN).unwrap();
    let wan = topo.segments.iter().position(|g| g.name == "wan").unwrap();
    assert_eq!(tunnel_mtu(&topo, wan, "eth0", 1500, false), Ok(1450));
    assert_eq!(tunnel_mtu(&topo, wan, "eth0", 1500, true), Ok(1430));
    let mut asks = topo.clone();
    asks.segments[wan].mtu = Some(1400);
    assert_eq!(tunnel_mtu(&asks, wan, "eth0", 1500, false), Ok(1400));
    asks.segments[wan].mtu = Some(1500);
    let err = tunnel_mtu(&asks, wan, "eth0", 1500, false).unwrap_err();
    assert_eq!(
        err.to_string(),
        "link `wan` has mtu 1500, but a VXLAN tunnel over eth0 (MTU 1500) carries at most 1450 \
         (50 bytes of IPv4 VXLAN headers): lower the mtu to 1450 or raise eth0's MTU to 1550"
    );
}
