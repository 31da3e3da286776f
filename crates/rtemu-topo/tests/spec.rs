//! The topology file: golden error messages, properties of the validator, and what a valid
//! file turns into.

use std::path::Path;

use proptest::prelude::*;
use rtemu_topo::topology::{Mac, NeighbourMode, Routing, SegmentKind};
use rtemu_topo::Topology;

/// Every `tests/golden/NAME.toml` is invalid; its error must read exactly as
/// `tests/golden/NAME.err`. Set `RTEMU_BLESS=1` to rewrite the `.err` files after a deliberate
/// change of wording (and review the diff).
#[test]
fn error_messages_match_golden_files() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let bless = std::env::var_os("RTEMU_BLESS").is_some();
    let mut cases = 0;
    let mut failures = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
    {
        cases += 1;
        let name = path.file_name().unwrap().to_str().unwrap();
        let source = std::fs::read_to_string(path).unwrap();
        let err = match Topology::parse(name, &source) {
            Ok(_) => {
                failures.push(format!("{name}: accepted, but it is invalid"));
                continue;
            }
            Err(e) => e,
        };
        // The position must lie inside the file.
        assert!(
            err.line >= 1 && err.line <= source.lines().count().max(1),
            "{name}: line {}",
            err.line
        );
        let actual = format!("{err}\n");
        let golden = path.with_extension("err");
        if bless {
            std::fs::write(&golden, &actual).unwrap();
        } else {
            let expected = std::fs::read_to_string(&golden).unwrap_or_default();
            if expected != actual {
                failures.push(format!(
                    "{name}:\n  expected: {expected}  actual:   {actual}"
                ));
            }
        }
    }
    assert!(cases >= 20, "only {cases} golden cases found");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_example_file_is_valid_and_as_written() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/east-west-north.toml");
    let topo = Topology::load(&path).unwrap();
    assert_eq!(topo.lab, "ewn");
    assert_eq!(topo.routing, Routing::Static);
    assert_eq!(topo.neighbours, NeighbourMode::Static);
    let names: Vec<&str> = topo.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["east", "north", "tindy1", "tpx30", "west"]);
    // Links come before LANs.
    let segs: Vec<&str> = topo.segments.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(segs, ["north-east", "west-side", "west-north", "east-side"]);
    let ne = &topo.segments[0];
    assert!(matches!(ne.kind, SegmentKind::Link { impairment: None }));
    assert_eq!(ne.members[0].ifname, "ng0");
    assert_eq!(ne.members[0].ipv4.unwrap().to_string(), "192.168.2.1/30");
    assert_eq!(ne.members[1].ipv4.unwrap().to_string(), "192.168.2.2/30");
    assert_eq!(ne.members[1].ipv6.unwrap().to_string(), "fd00:3:3::2/64");
    // tindy1 had no interface name: it gets eth0.
    let ws = &topo.segments[1];
    assert_eq!(topo.nodes[ws.members[1].node].name, "tindy1");
    assert_eq!(ws.members[1].ifname, "eth0");
}

#[test]
fn pool_addresses_skip_explicit_subnets_and_names_skip_explicit_interfaces() {
    let src = r#"
lab = "p"
[pool]
ipv4 = "10.0.0.0/16"
ipv4_prefix = 24
ipv6 = "fd00:1::/48"
[nodes.a]
[nodes.b]
[nodes.c]
[[links]]
endpoints = ["a:eth0", "b"]
ipv4 = "10.0.1.0/24"
[[links]]
endpoints = ["a", "c"]
[[lans]]
name = "all"
members = ["a", "b", "c"]
mtu = 9000
netem = "x"
"#;
    let err = Topology::parse("p.toml", src).unwrap_err();
    assert!(err.message.contains("unknown field `netem`"), "{err}");
    let topo = Topology::parse("p.toml", &src.replace("netem = \"x\"\n", "")).unwrap();
    let a_c = &topo.segments[1];
    // 10.0.0.0/24 is free, 10.0.1.0/24 is taken by the first link.
    assert_eq!(topo.segments[0].ipv6.unwrap().to_string(), "fd00:1::/64");
    assert_eq!(a_c.ipv4.unwrap().to_string(), "10.0.0.0/24");
    assert_eq!(topo.segments[2].ipv4.unwrap().to_string(), "10.0.2.0/24");
    assert_eq!(
        a_c.members[0].ifname, "eth1",
        "eth0 of a is taken explicitly"
    );
    assert_eq!(topo.segments[2].members[0].ifname, "eth2");
    assert_eq!(topo.segments[2].mtu, Some(9000));
    // MACs are distinct across the lab and locally administered unicast.
    let macs: std::collections::BTreeSet<Mac> = topo
        .segments
        .iter()
        .flat_map(|s| s.members.iter().map(|m| m.mac))
        .collect();
    assert_eq!(macs.len(), 7);
    assert!(macs.iter().all(|m| m.0[0] & 0x03 == 0x02));
}

#[test]
fn impaired_links_are_parsed_for_later() {
    let src = "lab = \"i\"\n[nodes.a]\n[nodes.b]\n[[links]]\nendpoints = [\"a\", \"b\"]\nnetem = \"delay 10ms\"\n";
    let topo = Topology::parse("i.toml", src).unwrap();
    let impaired: Vec<_> = topo.impaired_links().collect();
    assert_eq!(impaired.len(), 1);
    let netem = impaired[0].1.netem.as_ref().unwrap();
    assert_eq!(netem.text(), "delay 10ms");
    assert_eq!(netem.config().delay, rtemu_model::units::Time(10_000_000));
}

#[test]
fn single_family_files_get_only_that_family() {
    let src =
        "lab = \"f\"\nip = \"ipv6\"\n[nodes.a]\n[nodes.b]\n[[links]]\nendpoints = [\"a\", \"b\"]\n";
    let topo = Topology::parse("f.toml", src).unwrap();
    assert!(topo.segments[0].ipv4.is_none());
    assert_eq!(topo.segments[0].ipv6.unwrap().to_string(), "fd00:7274::/64");
}

/// Pieces of topology files, valid and invalid, for the generator below.
const FRAGMENTS: &[&str] = &[
    "lab = \"x\"\n",
    "lab = \"\"\n",
    "lab = 3\n",
    "[nodes.a]\n",
    "[nodes.b]\n",
    "[nodes.é]\n",
    "addresses = [\"10.0.0.1/32\"]\n",
    "addresses = [\"::1/200\"]\n",
    "cpu = 2.0\n",
    "cpu = -1.0\n",
    "sysctls = { \"net.ipv4.ip_forward\" = 1 }\n",
    "env = { A = \"b\" }\n",
    "[[links]]\n",
    "endpoints = [\"a\", \"b\"]\n",
    "endpoints = [\"a:\", \"b:eth0\"]\n",
    "endpoints = []\n",
    "ipv4 = \"10.0.0.0/24\"\n",
    "ipv4 = \"10.0.0.0/31\"\n",
    "ipv6 = \"fd00::/64\"\n",
    "mtu = 1500\n",
    "mtu = -5\n",
    "[[lans]]\n",
    "name = \"l\"\n",
    "members = [\"a\", \"b\"]\n",
    "members = [\"a\", \"a\"]\n",
    "[pool]\n",
    "ipv4_prefix = 64\n",
    "ipv4 = \"0.0.0.0/0\"\n",
    "routing = \"none\"\n",
    "neighbours = \"static\"\n",
    "ip = \"ipv4\"\n",
    "netem = \"loss 1%\"\n",
    "=\n",
    "\"\n",
    "[\n",
];

proptest! {
    /// Any text: an error with a position inside the text, or a topology. Never a panic.
    #[test]
    fn arbitrary_text_never_panics(src in "\\PC{0,200}") {
        if let Err(e) = Topology::parse("x.toml", &src) {
            prop_assert!(e.line >= 1 && e.line <= src.lines().count() + 1);
            prop_assert!(e.column >= 1);
        }
    }

    /// Plausible files made of valid and invalid fragments: same contract, and every accepted
    /// topology keeps the invariants validation promises.
    #[test]
    fn fragment_files_never_panic_and_accepted_ones_hold_invariants(
        picks in proptest::collection::vec(0..FRAGMENTS.len(), 0..24)
    ) {
        let src: String = picks.iter().map(|&i| FRAGMENTS[i]).collect();
        match Topology::parse("x.toml", &src) {
            Err(e) => {
                prop_assert!(e.line >= 1 && e.line <= src.lines().count() + 1);
                prop_assert!(!e.message.is_empty());
            }
            Ok(t) => {
                for (i, _) in t.nodes.iter().enumerate() {
                    let names: Vec<&str> = t.segments.iter().flat_map(|s| &s.members)
                        .filter(|m| m.node == i).map(|m| m.ifname.as_str()).collect();
                    let unique: std::collections::BTreeSet<&str> = names.iter().copied().collect();
                    prop_assert_eq!(unique.len(), names.len());
                    prop_assert!(names.iter().all(|n| n.len() <= 15));
                }
                let nets: Vec<ipnet::IpNet> = t.segments.iter()
                    .flat_map(|s| [s.ipv4.map(ipnet::IpNet::V4), s.ipv6.map(ipnet::IpNet::V6)])
                    .flatten().collect();
                for (i, a) in nets.iter().enumerate() {
                    for b in &nets[i + 1..] {
                        prop_assert!(!a.contains(&b.network()) && !b.contains(&a.network()));
                    }
                }
            }
        }
    }
}

/// Records every direction `load_checked` asks to build (a scheduled change by its
/// configuration in netem syntax), and fails the one naming table `bad`.
struct Recorder(std::cell::RefCell<Vec<(String, bool, Option<String>)>>);

impl rtemu_topo::topology::LinkCheck for Recorder {
    fn direction(
        &self,
        link: &str,
        imp: &rtemu_topo::topology::Impairment,
        netem: Option<&rtemu_model::LinkConfig>,
        backwards: bool,
    ) -> Result<(), rtemu_topo::topology::LinkCheckError> {
        let cfg = netem.cloned().unwrap_or_else(|| imp.config_for(backwards));
        self.0
            .borrow_mut()
            .push((link.to_owned(), backwards, netem.map(|c| c.to_string())));
        if cfg.distribution == rtemu_model::config::DistName::Table("bad".into()) {
            return Err(rtemu_topo::topology::LinkCheckError {
                culprit: rtemu_topo::topology::Culprit::Netem,
                message: "no such table".into(),
            });
        }
        Ok(())
    }
}

#[test]
fn load_checked_builds_both_directions_and_every_scheduled_change() {
    let dir = std::env::temp_dir().join(format!("rtemu-spec-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("lab.toml");
    let topo = "lab = \"t\"\n[nodes.a]\n[nodes.b]\n[[links]]\nendpoints = [\"a\", \"b\"]\n\
                netem_ab = \"delay 1ms\"\nnetem_ba = \"delay 2ms\"\n\
                schedule = [{ at = \"1s\", netem = \"delay 3ms\", dir = \"b-a\" }]\n";
    std::fs::write(&file, topo).unwrap();
    let rec = Recorder(Default::default());
    let loaded = Topology::load_checked(&file, &rec);
    let calls = rec.0.into_inner();
    let bad = topo.replace("delay 3ms", "delay 3ms 1ms distribution bad");
    std::fs::write(&file, &bad).unwrap();
    let err = Topology::load_checked(&file, &Recorder(Default::default()));
    // Without a check, the same file loads: only building finds the table missing.
    let unchecked = Topology::load(&file);
    std::fs::remove_dir_all(&dir).unwrap();
    loaded.unwrap();
    unchecked.unwrap();
    assert_eq!(
        calls,
        vec![
            ("a-b".to_owned(), false, None),
            ("a-b".to_owned(), true, None),
            ("a-b".to_owned(), true, Some("delay 3ms".to_owned())),
        ]
    );
    let err = err.unwrap_err().to_string();
    assert!(
        err.ends_with("lab.toml:8:49: netem: no such table"),
        "{err}"
    );
}

#[test]
fn a_peer_is_reached_on_a_shared_segment_first() {
    const SRC: &str = r#"
lab = "t"
ip = "ipv4"
[nodes.a]
[nodes.b]
[nodes.c]
[[links]]
endpoints = ["b", "c"]
ipv4 = "10.0.0.0/30"
[[links]]
endpoints = ["a", "b"]
ipv4 = "10.0.1.0/30"
"#;
    let topo = rtemu_topo::Topology::parse("t.toml", SRC).unwrap();
    // Whether `addr` lies in the /30 `net` of this file.
    let on = |net: &str, addr: std::net::IpAddr| match addr {
        std::net::IpAddr::V4(v4) => {
            let [a, b, c, d] = v4.octets();
            net == format!("{a}.{b}.{c}.0/30") && d < 4
        }
        std::net::IpAddr::V6(_) => false,
    };
    let b = topo.peer_address("a", "b").unwrap();
    assert!(on("10.0.1.0/30", b), "{b}");
    // No segment shared with c: its first address at all.
    let c = topo.peer_address("a", "c").unwrap();
    assert!(on("10.0.0.0/30", c), "{c}");
    assert_eq!(topo.peer_address("a", "nobody"), None);
    // Frames need a shared segment: b is a's only neighbour, on b's second interface.
    assert_eq!(
        topo.facing_interfaces("a", "b"),
        Some(("eth0".into(), "eth1".into()))
    );
    assert_eq!(
        topo.facing_interfaces("b", "a"),
        Some(("eth1".into(), "eth0".into()))
    );
    assert_eq!(topo.facing_interfaces("a", "c"), None);
    assert_eq!(topo.facing_interfaces("a", "nobody"), None);
}

/// An image node's keys turn into its container as written: containerlab's names, argument
/// strings split as a shell splits them, capabilities normalised, memory in bytes, health
/// check times in ns, binds resolved against the file's directory, `wait_for` in start order.
#[test]
fn container_keys_turn_into_the_nodes_container() {
    use rtemu_topo::container::{Condition, HealthTest, Pull, Restart};
    let dir = std::env::temp_dir().join(format!("rtemu-ctr-spec-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("site")).unwrap();
    let src = r#"lab = "c"
[nodes.web]
image = "localhost/web:1"
pull = "never"
entrypoint = "/bin/sh -c 'httpd -f -p 80'"
env = { GREETING = "hi" }
binds = ["site:/www:ro", "site:/rw"]
caps = ["net_admin", "CAP_NET_RAW", "NET_ADMIN"]
memory = "64m"
cpu = 0.5
healthcheck = { test = ["CMD", "wget", "-q", "-O-", "http://localhost/"], interval = "200ms", retries = 5, start_period = "1s" }
restart = "on-failure:2"
[nodes.client]
image = "localhost/client:1"
cmd = ["sleep", "infinity"]
wait_for = ["web:healthy", "db"]
[nodes.db]
image = "localhost/db:1"
healthcheck = { test = "test -e /ready" }
[nodes.bare]
[[links]]
endpoints = ["web", "client"]
"#;
    let path = dir.join("lab.toml");
    std::fs::write(&path, src).unwrap();
    let loaded = Topology::load(&path);
    let topo = Topology::parse("lab.toml", src).unwrap();
    let missing = Topology::parse_checked(
        "lab.toml",
        src,
        Path::new("/nonexistent"),
        &Recorder(Default::default()),
    );
    std::fs::remove_dir_all(&dir).unwrap();
    let node = |t: &Topology, n: &str| t.nodes[t.node_index(n).unwrap()].clone();

    let web = node(&topo, "web").container.unwrap();
    assert_eq!(web.image, "localhost/web:1");
    assert_eq!(web.pull, Pull::Never);
    let words: Vec<&str> = web
        .entrypoint
        .as_ref()
        .unwrap()
        .iter()
        .map(String::as_str)
        .collect();
    assert_eq!(words, ["/bin/sh", "-c", "httpd -f -p 80"]);
    assert_eq!(web.cmd, None);
    assert_eq!(web.caps, ["CAP_NET_ADMIN", "CAP_NET_RAW"]);
    assert_eq!(web.memory, Some(64 << 20));
    assert_eq!(web.restart, Restart::OnFailure { max: Some(2) });
    let h = web.healthcheck.unwrap();
    assert_eq!(
        h.test,
        HealthTest::Cmd(vec![
            "wget".into(),
            "-q".into(),
            "-O-".into(),
            "http://localhost/".into()
        ])
    );
    assert_eq!(
        (h.interval_ns, h.timeout_ns, h.start_period_ns, h.retries),
        (200_000_000, 5_000_000_000, 1_000_000_000, 5)
    );
    assert_eq!(node(&topo, "web").cpu, Some(0.5));
    assert_eq!(
        node(&topo, "web").env,
        [("GREETING".to_owned(), "hi".to_owned())]
    );
    // Parsed from text alone, bind paths stay as written (as trace paths do).
    assert_eq!(web.binds[0].host, "site");
    assert_eq!(
        (web.binds[0].container.as_str(), web.binds[0].read_only),
        ("/www", true)
    );
    assert_eq!(
        (web.binds[1].container.as_str(), web.binds[1].read_only),
        ("/rw", false)
    );

    let client = node(&topo, "client").container.unwrap();
    assert_eq!(client.pull, Pull::IfNotPresent);
    assert_eq!(
        client.cmd.as_deref(),
        Some(&["sleep".to_owned(), "infinity".to_owned()][..])
    );
    let waits: Vec<(&str, Condition)> = client
        .wait_for
        .iter()
        .map(|w| (w.node.as_str(), w.condition))
        .collect();
    assert_eq!(
        waits,
        [("web", Condition::Healthy), ("db", Condition::Running)]
    );
    assert_eq!(
        node(&topo, "db")
            .container
            .unwrap()
            .healthcheck
            .unwrap()
            .test,
        HealthTest::Shell("test -e /ready".into())
    );
    assert_eq!(node(&topo, "bare").container, None);

    // Start order: db and web first (node order: bare, client, db, web), then client.
    let containers: Vec<_> = topo.nodes.iter().map(|n| n.container.clone()).collect();
    let order =
        rtemu_topo::container::start_order(topo.nodes.iter().map(|n| n.name.as_str()), &containers)
            .unwrap();
    assert_eq!(order, [vec![2, 3], vec![1]]);

    // Loaded from its file, binds are relative to the file's directory.
    let loaded = loaded.unwrap();
    let web = node(&loaded, "web").container.unwrap();
    assert_eq!(Path::new(&web.binds[0].host), dir.join("site"));
    // Checked, a host path that does not exist fails at its value.
    let e = missing.unwrap_err();
    assert_eq!((e.line, e.column), (7, 10), "{e}");
    assert!(
        e.message.starts_with("bind: host path /nonexistent/site: "),
        "{e}"
    );
}

/// Validation is linear in the file: 20,000 nodes take well under a second (docs/benchmarks.md);
/// the quadratic validator took minutes. The bound is generous, for loaded CI machines.
#[test]
fn a_twenty_thousand_node_chain_validates_within_a_generous_bound() {
    let n = 20_000;
    let mut src =
        String::from("lab = \"big\"\nrouting = \"aggregate\"\n[pool]\nipv4_prefix = 30\n");
    for i in 0..n {
        src.push_str(&format!("[nodes.n{i}]\n"));
    }
    for i in 1..n {
        src.push_str(&format!(
            "[[links]]\nendpoints = [\"n{}\", \"n{i}\"]\n",
            i - 1
        ));
    }
    let start = std::time::Instant::now();
    let topo = Topology::parse("big.toml", &src).unwrap();
    let took = start.elapsed();
    assert_eq!((topo.nodes.len(), topo.segments.len()), (n, n - 1));
    // Every link got its own /30 of the pool, in order: the last, 4 × 19,998 addresses in.
    let last = std::net::Ipv4Addr::from(0x0a00_0000 + 4 * (n as u32 - 2));
    assert_eq!(
        topo.segments[n - 2].ipv4.unwrap().to_string(),
        format!("{last}/30")
    );
    assert!(took < std::time::Duration::from_secs(30), "{took:?}");
}

#[test]
fn nodes_are_found_by_name_in_name_order_and_out_of_it() {
    // n10 sorts before n2: name order is the strings', not the numbers'.
    let src = rtemu_testutil::chain_topology("idx", "", 12);
    let topo = Topology::parse("chain.toml", &src).unwrap();
    let names: Vec<&str> = topo.nodes.iter().map(|n| n.name.as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted, "the validator keeps nodes in name order");
    let mut shuffled = topo.clone();
    shuffled.nodes.rotate_left(5);
    shuffled.nodes.swap(0, 7);
    for t in [&topo, &shuffled] {
        for (i, n) in t.nodes.iter().enumerate() {
            assert_eq!(t.node_index(&n.name), Some(i), "{}", n.name);
        }
        for absent in ["n12", "n", "m0", "zz", ""] {
            assert_eq!(t.node_index(absent), None, "{absent}");
        }
    }
    // Every attachment once, under its own node, in segment order.
    let by_node = topo.attachments_by_node();
    for (ni, list) in by_node.iter().enumerate() {
        assert!(list.iter().all(|(_, m)| m.node == ni));
    }
    let count: usize = by_node.iter().map(Vec::len).sum();
    assert_eq!(
        count,
        topo.segments.iter().map(|s| s.members.len()).sum::<usize>()
    );
}
