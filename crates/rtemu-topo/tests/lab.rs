//! Labs on the real kernel: connectivity, static neighbours and teardown that leaves nothing.
//!
//! These tests need root (namespaces, mounts, netlink). Without it they print why and pass,
//! unless `RTEMU_REQUIRE_ROOT=1` (CI) makes them fail. Every lab has a name unique to the test
//! and process, and a guard removes it even when an assertion fails. Traffic stays inside the
//! namespaces the test created.

use std::path::Path;
use std::process::{Command, Output};

use rtemu_model::wire::is_address_resolution;
use rtemu_topo::lab::{self, node_netns};
use rtemu_topo::state::{lab_dir, LabName};
use rtemu_topo::Topology;

use rtemu_testutil::{ip, root_or_skip as needs_root, skip, skipping_forbidden};

/// Whether the test may run; panics when root is required but missing.
fn root_or_skip(test: &str) -> bool {
    needs_root(test, "creates network namespaces")
}

/// A lab name unique to this test and process (lab names are at most 12 characters).
fn unique_lab(tag: &str) -> String {
    format!("t{tag}{}", std::process::id() % 100_000)
}

/// The state directory of lab `lab`.
fn state_dir(lab: &str) -> std::path::PathBuf {
    lab_dir(&LabName::new(lab).unwrap())
}

/// Removes the lab when dropped, whatever happened.
struct Guard(String);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = lab::down(&self.0);
    }
}

fn example(lab: &str) -> Topology {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/east-west-north.toml");
    let src = std::fs::read_to_string(&path)
        .unwrap()
        .replace("lab = \"ewn\"", &format!("lab = \"{lab}\""));
    Topology::parse("east-west-north.toml", &src).unwrap()
}

fn run_in(lab: &str, node: &str, argv: &[&str]) -> Output {
    let state = lab::resolve_lab(Some(lab)).unwrap();
    let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
    lab::node_command(&state, node, &argv)
        .unwrap()
        .output()
        .unwrap()
}

/// Namespaces, state and `/etc/netns` entries of `lab` left on the host.
fn leftovers(lab: &str, topo: &Topology) -> Vec<String> {
    let mut left = Vec::new();
    let mut names: Vec<String> = topo
        .nodes
        .iter()
        .map(|n| node_netns(lab, &n.name))
        .collect();
    names.push(lab::lab_netns(lab));
    for ns in names {
        if Path::new("/run/netns").join(&ns).exists() {
            left.push(format!("/run/netns/{ns}"));
        }
        if Path::new("/etc/netns").join(&ns).exists() {
            left.push(format!("/etc/netns/{ns}"));
        }
    }
    if state_dir(lab).exists() {
        left.push(state_dir(lab).display().to_string());
    }
    let listed = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout);
    left.extend(
        listed
            .lines()
            .filter(|l| l.contains(&format!("rtemu-{lab}")))
            .map(str::to_owned),
    );
    left
}

#[test]
fn east_west_north_pings_across_routers_in_both_families_and_leaves_nothing() {
    if !root_or_skip("east_west_north") {
        return;
    }
    let name = unique_lab("ewn");
    let topo = example(&name);
    let _guard = Guard(name.clone());
    lab::up(&topo, "east-west-north.toml").unwrap();

    // tindy1 → tpx30 crosses west, north and east (three routers), by name through the hosts
    // file and by address in both families.
    for target in ["192.168.3.2", "fd00:3:4::2", "tpx30"] {
        let out = run_in(
            &name,
            "tindy1",
            &["ping", "-n", "-c", "2", "-W", "1", "-i", "0.2", target],
        );
        assert!(
            out.status.success(),
            "ping {target}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("2 received"), "{text}");
    }
    // The exit code is the command's own; ping exits 2 when it has no route (nothing leaves
    // the lab: tindy1 has no default route).
    assert_eq!(
        run_in(&name, "tindy1", &["sh", "-c", "exit 7"])
            .status
            .code(),
        Some(7)
    );
    let out = run_in(
        &name,
        "tindy1",
        &["ping", "-n", "-c", "1", "-W", "1", "203.0.113.9"],
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Static neighbours are permanent, with the planned MAC of west:fxp0.
    let out = run_in(&name, "tindy1", &["ip", "neigh", "show", "dev", "eth0"]);
    let neigh = String::from_utf8_lossy(&out.stdout);
    assert!(
        neigh.contains("198.51.100.1 lladdr 02:72:74:00:00:02 PERMANENT"),
        "{neigh}"
    );
    assert!(
        neigh.contains("fd00:3:1::1 lladdr 02:72:74:00:00:02 PERMANENT"),
        "{neigh}"
    );
    // Every interface rtemu made carries the lab's mark.
    let out = run_in(
        &name,
        "north",
        &[
            "cat",
            "/sys/class/net/ng0/ifalias",
            "/sys/class/net/ve0/ifalias",
        ],
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("rtemu:{name}\nrtemu:{name}\n")
    );

    assert!(lab::down(&name).unwrap());
    assert_eq!(leftovers(&name, &topo), Vec::<String>::new());
    assert!(!lab::down(&name).unwrap(), "down is idempotent");
}

/// A node of a long chain gets more routes than `up` sends at once (64): every one is
/// installed, and the far end answers in both families.
#[test]
fn every_route_of_a_long_chain_is_installed_and_the_far_end_answers() {
    if !root_or_skip("long_chain_routes") {
        return;
    }
    let name = unique_lab("lcr");
    let n = 60;
    let topo = chain(&name, n);
    let _guard = Guard(name.clone());
    lab::up(&topo, "chain.toml").unwrap();
    let plans = rtemu_topo::routing::plan(&topo);
    for node in ["n0", "n30"] {
        let planned = &plans[topo.node_index(node).unwrap()].routes;
        assert!(planned.len() > 64, "{node} has {} routes", planned.len());
        // The connected subnets (no gateway) aside.
        let mut installed = 0;
        for family in ["-4", "-6"] {
            let out = run_in(&name, node, &["ip", family, "route", "show"]);
            let text = String::from_utf8_lossy(&out.stdout);
            installed += text.lines().filter(|l| l.contains(" via ")).count();
        }
        assert_eq!(installed, planned.len(), "routes in {node}");
    }
    let last = &topo.segments.last().unwrap().members[1];
    let targets = [
        last.ipv4.unwrap().addr().to_string(),
        last.ipv6.unwrap().addr().to_string(),
    ];
    for target in &targets {
        let ping = ["ping", "-n", "-c", "3", "-i", "0.2", "-W", "3", target];
        let out = run_in(&name, "n0", &ping);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "ping {target}: {text}");
    }
    assert!(lab::down(&name).unwrap());
    assert_eq!(leftovers(&name, &topo), Vec::<String>::new());
}

/// A chain of `n` nodes, `n - 1` links, dual stack.
fn chain(lab: &str, n: usize) -> Topology {
    let src = rtemu_testutil::chain_topology(lab, "neighbours = \"static\"\n", n);
    Topology::parse("chain.toml", &src).unwrap()
}

/// The host's own interfaces: a lab must never add one (veth ends are born in their nodes).
fn host_interfaces() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir("/sys/class/net")
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Not a test on its own (ignored unless asked for): the child process that
/// `sigkill_during_up_then_down_leaves_nothing` kills. It brings up the
/// lab named by `RTEMU_TOPO_CHILD_LAB` and waits to be killed.
#[test]
#[ignore = "helper process of sigkill_during_up_then_down_leaves_nothing"]
fn child_up_for_sigkill() {
    let Some(name) = std::env::var_os("RTEMU_TOPO_CHILD_LAB") else {
        return;
    };
    let topo = chain(name.to_str().unwrap(), 10);
    lab::up(&topo, "chain.toml").unwrap();
    std::thread::sleep(std::time::Duration::from_secs(5));
}

#[test]
fn sigkill_during_up_then_down_leaves_nothing() {
    if !root_or_skip("sigkill_during_up") {
        return;
    }
    let before = host_interfaces();
    // Kill points spread over `up` (which takes tens of milliseconds for this chain), from
    // before the state file exists to after the lab is complete.
    // `None`: kill as soon as the state file exists, which is always mid-way (the state file
    // comes first and a 10-node `up` takes tens of milliseconds more).
    let points = [
        None,
        Some(0u64),
        Some(2),
        Some(5),
        Some(10),
        Some(20),
        Some(40),
        Some(80),
        Some(300),
    ];
    for (i, point) in points.into_iter().enumerate() {
        let name = unique_lab(&format!("k{i}"));
        let _guard = Guard(name.clone());
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "child_up_for_sigkill",
                "--exact",
                "--ignored",
                "--test-threads=1",
            ])
            .env("RTEMU_TOPO_CHILD_LAB", &name)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        match point {
            Some(ms) => std::thread::sleep(std::time::Duration::from_millis(ms)),
            None => {
                let state = state_dir(&name).join("state.json");
                let start = std::time::Instant::now();
                while !state.exists() && start.elapsed().as_secs() < 10 {
                    std::thread::sleep(std::time::Duration::from_micros(200));
                }
            }
        }
        child.kill().unwrap();
        child.wait().unwrap();
        let found = match rtemu_topo::state::State::load(&name) {
            Ok(Some(s)) if s.complete => "complete",
            Ok(Some(_)) => "half-built",
            _ => "not started",
        };
        eprintln!("killed at {point:?} ms: lab {found}");
        if point.is_none() {
            assert_eq!(
                found, "half-built",
                "killed as soon as the state file appeared"
            );
        }
        lab::down(&name).unwrap();
        let left = leftovers(&name, &chain(&name, 10));
        assert_eq!(left, Vec::<String>::new(), "killed at {point:?} ms");
        assert_eq!(host_interfaces(), before, "killed at {point:?} ms");
    }
}

#[test]
fn a_failed_up_removes_what_it_made_and_says_why() {
    if !root_or_skip("a_failed_up") {
        return;
    }
    let name = unique_lab("f");
    let _guard = Guard(name.clone());
    // The sysctl is applied after every namespace, link and route exists: the failure comes
    // as late as possible.
    let src = format!(
        "lab = \"{name}\"\n[nodes.a]\nsysctls = {{ \"net.ipv4.no_such_knob\" = 1 }}\n[nodes.b]\n[[links]]\nendpoints = [\"a\", \"b\"]\n"
    );
    let topo = Topology::parse("f.toml", &src).unwrap();
    let err = lab::up(&topo, "f.toml").unwrap_err().to_string();
    assert!(err.contains("net.ipv4.no_such_knob"), "{err}");
    assert_eq!(leftovers(&name, &topo), Vec::<String>::new());
}

/// An impaired link ends in two engine interfaces in the lab namespace, marked as the lab's,
/// and nothing in the kernel joins them: with no engine running, it carries nothing.
#[test]
fn an_impaired_link_ends_at_the_engine_and_carries_nothing_without_it() {
    if !root_or_skip("impaired layout") {
        return;
    }
    let name = unique_lab("i");
    let _guard = Guard(name.clone());
    let src = format!("lab = \"{name}\"\nneighbours = \"static\"\n[nodes.a]\n[nodes.b]\n[[links]]\nendpoints = [\"a\", \"b\"]\nnetem = \"delay 5ms\"\n");
    let topo = Topology::parse("i.toml", &src).unwrap();
    lab::up(&topo, "i.toml").unwrap();
    let links = Command::new("ip")
        .args(["-n", &lab::lab_netns(&name), "-o", "link", "show"])
        .output()
        .unwrap();
    let links = String::from_utf8_lossy(&links.stdout);
    for end in lab::engine_ends(0) {
        let line = links
            .lines()
            .find(|l| l.contains(&format!(" {end}@")))
            .unwrap_or_else(|| panic!("no {end} in the lab namespace: {links}"));
        assert!(line.contains(&lab::ownership_mark(&name)), "{line}");
        assert!(line.contains("UP"), "{line}");
    }
    let out = run_in(&name, "a", &["ping", "-n", "-c", "1", "-W", "1", "b"]);
    assert!(
        !out.status.success(),
        "an impaired link carried ping without its engine"
    );
    lab::down(&name).unwrap();
    assert_eq!(leftovers(&name, &topo), Vec::<String>::new());
}

/// A namespace with a lab's name that rtemu did not make is refused, and left alone.
#[test]
fn a_foreign_namespace_of_the_labs_name_is_refused_and_left_alone() {
    if !root_or_skip("foreign namespace") {
        return;
    }
    let name = unique_lab("n");
    let _guard = Guard(name.clone());
    let foreign = node_netns(&name, "n1");
    struct Foreign(String);
    impl Drop for Foreign {
        fn drop(&mut self) {
            let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
        }
    }
    assert!(Command::new("ip")
        .args(["netns", "add", &foreign])
        .status()
        .unwrap()
        .success());
    let _foreign = Foreign(foreign.clone());
    let topo = chain(&name, 2);
    let err = lab::up(&topo, "chain.toml").unwrap_err().to_string();
    assert!(
        err.contains(&foreign) && err.contains("no rtemu lab made it"),
        "{err}"
    );
    assert!(
        std::path::Path::new("/run/netns").join(&foreign).exists(),
        "the foreign namespace was removed"
    );
    assert!(!state_dir(&name).exists(), "a refused up left its state");
}

#[test]
fn an_existing_lab_is_refused_before_anything_is_made() {
    if !root_or_skip("refusals") {
        return;
    }
    let name = unique_lab("r");
    let _guard = Guard(name.clone());
    let topo = chain(&name, 2);
    lab::up(&topo, "chain.toml").unwrap();
    let err = lab::up(&topo, "chain.toml").unwrap_err().to_string();
    assert!(err.contains("already exists"), "{err}");
    // The refusal left the running lab intact: n0 still reaches n1.
    let out = run_in(&name, "n0", &["ping", "-n", "-c", "1", "-W", "1", "n1"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn traceroute_shows_the_papers_hops_through_west_north_east() {
    if !root_or_skip("traceroute") {
        return;
    }
    if !rtemu_testutil::program_or_skip("traceroute", "traceroute", "--version", "traceroute") {
        return;
    }
    let name = unique_lab("tr");
    let topo = example(&name);
    let _guard = Guard(name.clone());
    lab::up(&topo, "east-west-north.toml").unwrap();
    // One probe per hop, one second per probe at most, UDP to the lab's own addresses.
    let out = run_in(
        &name,
        "tindy1",
        &[
            "traceroute",
            "-n",
            "-q",
            "1",
            "-w",
            "1",
            "-m",
            "6",
            "192.168.3.2",
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let hops: Vec<&str> = text
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    // Each router answers from its interface towards tindy1: west on tindy1's LAN, north on
    // west's LAN, east on the north-east link; then tpx30 itself.
    assert_eq!(
        hops,
        ["198.51.100.1", "192.168.1.2", "192.168.2.2", "192.168.3.2"],
        "{text}"
    );
}

#[test]
fn start_up_commands_run_in_their_node_with_their_environment_and_end_at_down() {
    if !root_or_skip("start_up_commands") {
        return;
    }
    let name = unique_lab("s");
    let _guard = Guard(name.clone());
    let src = format!(
        "lab = \"{name}\"\n[nodes.a]\nrun = [\"echo $GREETING; ip -o link show eth0 >/dev/null && echo in-node; exec sleep 600\"]\nenv = {{ GREETING = \"hello\" }}\n[nodes.b]\n[[links]]\nendpoints = [\"a\", \"b\"]\n"
    );
    let topo = Topology::parse("s.toml", &src).unwrap();
    lab::up(&topo, "s.toml").unwrap();
    let log = state_dir(&name).join("a.log");
    let start = std::time::Instant::now();
    let mut text = String::new();
    while start.elapsed().as_secs() < 5 {
        text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("in-node") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(text, "hello\nin-node\n");
    let pids = rtemu_topo::sys::netns_pids(&node_netns(&name, "a")).unwrap();
    assert_eq!(pids.len(), 1, "the sleep runs in node a");
    assert!(lab::down(&name).unwrap());
    // The test process is the command's parent (the `rtemu up` process would be, and init
    // after it exits): reap it, so a killed process is not mistaken for a live zombie.
    let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pids[0]), None);
    assert!(
        !Path::new(&format!("/proc/{}", pids[0])).exists(),
        "the start-up command was ended"
    );
    assert_eq!(leftovers(&name, &topo), Vec::<String>::new());
}

/// An "outside host": a namespace of the test's own with a veth pair whose other end stays in
/// the host namespace, as a physical interface with a host behind it would. Removed on drop.
struct Outside {
    ns: String,
    host_end: String,
}

impl Outside {
    fn new(tag: &str, addr: &str, via: &str) -> Outside {
        let id = std::process::id() % 100_000;
        let o = Outside {
            ns: format!("rtemu-test-{tag}{id}"),
            host_end: format!("rtx{tag}{id}"),
        };
        let peer = format!("rty{tag}{id}");
        ip(&["netns", "add", &o.ns]);
        ip(&[
            "link",
            "add",
            &o.host_end,
            "type",
            "veth",
            "peer",
            "name",
            &peer,
            "netns",
            &o.ns,
        ]);
        ip(&["-n", &o.ns, "addr", "add", addr, "dev", &peer]);
        ip(&["-n", &o.ns, "link", "set", &peer, "up"]);
        // Up, as a host's cabled interface would be (a macvlan carries nothing otherwise).
        ip(&["link", "set", &o.host_end, "up"]);
        ip(&["-n", &o.ns, "route", "add", "10.0.0.0/8", "via", via]);
        o
    }

    fn ping(&self, target: &str) -> Output {
        Command::new("ip")
            .args([
                "netns", "exec", &self.ns, "ping", "-n", "-c", "2", "-i", "0.2", "-W", "1", target,
            ])
            .output()
            .unwrap()
    }
}

impl Drop for Outside {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["link", "del", &self.host_end])
            .output();
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).output();
    }
}

#[test]
fn external_interfaces_carry_outside_traffic_and_moved_ones_come_back() {
    if !root_or_skip("external_interfaces") {
        return;
    }
    // Outside host m sits behind an interface moved into node a; outside host v behind one
    // that node b reaches through a macvlan.
    let m = Outside::new("m", "203.0.113.2/24", "203.0.113.1");
    let v = Outside::new("v", "198.18.0.2/24", "198.18.0.1");
    let name = unique_lab("x");
    let src = format!(
        r#"lab = "{name}"
ip = "ipv4"
[nodes.a]
[nodes.b]
[[links]]
endpoints = ["a", "b"]
ipv4 = "10.1.0.0/24"
[[externals]]
node = "a"
host = "{}"
ifname = "fxp0"
ipv4 = "203.0.113.1/24"
[[externals]]
node = "b"
host = "{}"
mode = "macvlan"
ipv4 = "198.18.0.1/24"
"#,
        m.host_end, v.host_end
    );
    let topo = Topology::parse("x.toml", &src).unwrap();
    let guard = Guard(name.clone());
    lab::up(&topo, "x.toml").unwrap();
    assert!(
        !Path::new("/sys/class/net").join(&m.host_end).exists(),
        "moved into node a"
    );
    assert!(
        Path::new("/sys/class/net").join(&v.host_end).exists(),
        "macvlan: the host keeps it"
    );

    // Outside → through a → b, and outside → b's macvlan → a.
    let out = m.ping("10.1.0.2");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = v.ping("10.1.0.1");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    drop(guard);
    assert!(
        Path::new("/sys/class/net").join(&m.host_end).exists(),
        "given back under its name"
    );
    assert_eq!(leftovers(&name, &topo), Vec::<String>::new());
}

/// Enhanced packet blocks of a pcapng file in native byte order: (interface, ns, frame).
fn pcapng_packets(bytes: &[u8]) -> Vec<(u32, u64, Vec<u8>)> {
    let u32_at = |i: usize| u32::from_ne_bytes(bytes[i..i + 4].try_into().unwrap());
    let mut at = 0;
    let mut out = Vec::new();
    while at < bytes.len() {
        let (kind, len) = (u32_at(at), u32_at(at + 4) as usize);
        if kind == 6 {
            let ts = (u64::from(u32_at(at + 12)) << 32) | u64::from(u32_at(at + 16));
            let caplen = u32_at(at + 20) as usize;
            out.push((
                u32_at(at + 8),
                ts,
                bytes[at + 28..at + 28 + caplen].to_vec(),
            ));
        }
        at += len;
    }
    out
}

/// Whether an Ethernet frame is an ICMP (v4) echo request.
/// Whether `frame` is an IPv6 router solicitation or advertisement (ICMPv6 133, 134): a
/// node's kernel solicits routers on its own a random while after its interface comes up,
/// static neighbours or not, so a capture may see one; it resolves no address.
fn is_router_discovery(frame: &[u8]) -> bool {
    frame.get(12..14) == Some(&[0x86, 0xdd][..])
        && frame.get(20) == Some(&58)
        && matches!(frame.get(54), Some(133 | 134))
}

fn is_echo_request(frame: &[u8]) -> bool {
    u16::from_be_bytes([frame[12], frame[13]]) == 0x0800 && frame[23] == 1 && frame[34] == 8
}

#[test]
fn one_capture_of_four_interfaces_shows_the_echo_hop_by_hop_on_one_clock_without_arp() {
    if !root_or_skip("capture") {
        return;
    }
    let name = unique_lab("c");
    let topo = example(&name);
    let _guard = Guard(name.clone());
    lab::up(&topo, "east-west-north.toml").unwrap();
    let state = lab::resolve_lab(Some(&name)).unwrap();
    let wanted: Vec<String> = ["tindy1:eth0", "west:fxp0", "west:ve0", "north:ve0"]
        .map(String::from)
        .to_vec();
    let targets = rtemu_topo::capture::resolve_targets(&state, &wanted).unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let file = std::thread::scope(|s| {
        let cap = s.spawn(|| {
            let mut out = Vec::new();
            let limits = rtemu_topo::capture::Limits {
                duration: Some(std::time::Duration::from_secs(5)),
                count: None,
                stop: &stop,
            };
            rtemu_topo::capture::capture(&state, &targets, &mut out, &limits).unwrap();
            out
        });
        // Let the sockets open before the traffic starts.
        std::thread::sleep(std::time::Duration::from_millis(200));
        let out = run_in(
            &name,
            "tindy1",
            &[
                "ping",
                "-n",
                "-c",
                "2",
                "-i",
                "0.2",
                "-W",
                "1",
                "192.168.3.2",
            ],
        );
        assert!(out.status.success());
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        cap.join().unwrap()
    });
    let packets = pcapng_packets(&file);
    let resolution: Vec<String> = packets
        .iter()
        .filter(|(_, _, f)| is_address_resolution(f) && !is_router_discovery(f))
        .map(|(id, _, f)| format!("{}: {:02x?}", wanted[*id as usize], &f[..f.len().min(80)]))
        .collect();
    assert!(
        resolution.is_empty(),
        "static neighbours, yet: {resolution:#?}"
    );
    // The first echo request crosses the four interfaces in path order, stamped by one clock.
    let first: Vec<u64> = (0..4)
        .map(|i| {
            packets
                .iter()
                .find(|(id, _, f)| *id == i && is_echo_request(f))
                .unwrap_or_else(|| panic!("no echo on {}", wanted[i as usize]))
                .1
        })
        .collect();
    assert!(first.windows(2).all(|w| w[0] <= w[1]), "{first:?}");
    // Two requests and two replies on each interface.
    for i in 0..4u32 {
        let icmp = packets
            .iter()
            .filter(|(id, _, f)| {
                *id == i && u16::from_be_bytes([f[12], f[13]]) == 0x0800 && f[23] == 1
            })
            .count();
        assert_eq!(icmp, 4, "{}", wanted[i as usize]);
    }
    assert!(rtemu_topo::capture::resolve_targets(&state, &["west:nope".to_owned()]).is_err());
}

#[test]
fn a_routing_daemon_started_by_the_lab_converges_over_ospf() {
    if !root_or_skip("ospf") {
        return;
    }
    if !rtemu_testutil::program_or_skip("ospf", "bird", "--version", "bird2") {
        return;
    }
    let name = unique_lab("o");
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/ospf-chain.toml");
    let src = std::fs::read_to_string(&path)
        .unwrap()
        .replace("lab = \"ospf\"", &format!("lab = \"{name}\""));
    let topo = Topology::parse("ospf-chain.toml", &src).unwrap();
    let _guard = Guard(name.clone());
    lab::up(&topo, "ospf-chain.toml").unwrap();
    // rtemu installed no route to r3's far subnet (`routing = "none"`); OSPF must. Bounded:
    // 30 tries about a second apart (hellos every second; it takes a few).
    let mut converged = false;
    for _ in 0..30 {
        if run_in(
            &name,
            "r1",
            &["ping", "-n", "-c", "1", "-W", "1", "10.0.2.2"],
        )
        .status
        .success()
        {
            converged = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(700));
    }
    let routes = run_in(&name, "r1", &["ip", "route", "show", "10.0.2.0/24"]);
    let routes = String::from_utf8_lossy(&routes.stdout);
    let log = std::fs::read_to_string(state_dir(&name).join("r1.log")).unwrap_or_default();
    assert!(
        converged,
        "no route after 30 tries; r1's routes: {routes}; its log: {log}"
    );
    assert!(
        routes.contains("via 10.0.1.2") && routes.contains("proto bird"),
        "{routes}"
    );
    let pids = rtemu_topo::sys::netns_pids(&node_netns(&name, "r2")).unwrap();
    assert!(lab::down(&name).unwrap());
    for pid in pids {
        let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None);
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "bird {pid} was ended"
        );
    }
    assert_eq!(leftovers(&name, &topo), Vec::<String>::new());
}

#[test]
fn the_east_west_north_example_draws_as_svg_with_every_node() {
    // No root needed; Graphviz is. CI (RTEMU_REQUIRE_ROOT=1) installs it through install.sh.
    let topo = example("ewn");
    let svg = match rtemu_topo::graph::svg(&topo) {
        Err(rtemu_topo::graph::SvgError::NoGraphviz(program)) if !skipping_forbidden() => {
            skip(
                "the SVG test",
                &format!("Graphviz's `{program}` is not installed (Debian package graphviz)"),
            );
            return;
        }
        other => other.unwrap(),
    };
    assert!(svg.contains("<svg"), "not SVG: {svg}");
    assert!(svg.trim_end().ends_with("</svg>"), "not a whole SVG: {svg}");
    for node in &topo.nodes {
        // Graphviz writes each node's name as its title and its label.
        assert!(
            svg.contains(&format!("<title>{}</title>", node.name)),
            "no node {} in {svg}",
            node.name
        );
        assert!(
            svg.contains(&format!(">{}</text>", node.name)),
            "no label {} in {svg}",
            node.name
        );
    }
}

#[test]
fn a_detached_command_runs_in_its_node_with_a_log_and_ends_at_down() {
    if !root_or_skip("exec_detached") {
        return;
    }
    let name = unique_lab("d");
    let topo = chain(&name, 2);
    let _guard = Guard(name.clone());
    lab::up(&topo, "chain.toml").unwrap();
    let state = lab::resolve_lab(Some(&name)).unwrap();
    let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let sleeper = lab::exec_detached(&state, "n1", &argv(&["sleep", "1000"]), false).unwrap();
    let talker = lab::exec_detached(
        &state,
        "n1",
        &argv(&["sh", "-c", "echo out; echo err >&2; exec sleep 1000"]),
        false,
    )
    .unwrap();
    assert_eq!(sleeper.log, state_dir(&name).join("n1.1.log"));
    assert_eq!(talker.log, state_dir(&name).join("n1.2.log"));
    assert!(sleeper.log.exists(), "the log exists while it runs");

    // Both run in node n1's namespace, each the leader of its own process group.
    let pids = rtemu_topo::sys::netns_pids(&node_netns(&name, "n1")).unwrap();
    for d in [&sleeper, &talker] {
        assert!(pids.contains(&d.pid), "{} not in n1: {pids:?}", d.pid);
        assert!(d.running());
        assert_eq!(
            nix::unistd::getpgid(Some(nix::unistd::Pid::from_raw(d.pid)))
                .unwrap()
                .as_raw(),
            d.pid
        );
    }
    let start = std::time::Instant::now();
    let mut text = String::new();
    while start.elapsed().as_secs() < 5 {
        text = std::fs::read_to_string(&talker.log).unwrap();
        if text.lines().count() == 2 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(text, "out\nerr\n");
    // The lab's record lists both, with their command lines.
    let listed = state.detached().unwrap();
    assert_eq!(listed, vec![sleeper.clone(), talker.clone()]);
    assert_eq!(listed[0].command, ["sleep", "1000"]);
    assert_eq!(listed[0].node, "n1");

    // An unknown node is refused before anything starts.
    assert!(matches!(
        lab::exec_detached(&state, "nope", &argv(&["true"]), false),
        Err(lab::LabError::NoSuchNode { .. })
    ));

    assert!(lab::down(&name).unwrap());
    // The test process is their parent (`rtemu exec --detach` exits at once, leaving them to
    // init): reap them, so a killed process is not mistaken for a live zombie.
    for d in [&sleeper, &talker] {
        let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(d.pid), None);
        assert!(
            !Path::new(&format!("/proc/{}", d.pid)).exists(),
            "pid {} was ended at down",
            d.pid
        );
    }
    // The record and the logs went with the state directory.
    assert!(!sleeper.log.exists());
    assert_eq!(leftovers(&name, &topo), Vec::<String>::new());
}

/// A TCP listener for `perl` (perl-base, in every Debian): accepts one connection on port 5201
/// of the address in its argument, reads it to the end and prints the number of bytes.
const COUNT_BYTES: &str = r#"use IO::Socket::IP;
my $s = IO::Socket::IP->new(LocalHost => $ARGV[0], LocalPort => 5201, Listen => 1, ReuseAddr => 1)
    or die "listen: $@";
my $c = $s->accept or die "accept: $!";
my ($n, $r, $b) = (0);
$n += $r while ($r = sysread($c, $b, 65536)) > 0;
print "$n\n";"#;

#[test]
fn tcp_crosses_three_routers_and_three_lans_from_tindy1_to_tpx30() {
    if !root_or_skip("tcp_east_west_north") {
        return;
    }
    let name = unique_lab("tcp");
    let topo = example(&name);
    let _guard = Guard(name.clone());
    lab::up(&topo, "east-west-north.toml").unwrap();
    let state = lab::resolve_lab(Some(&name)).unwrap();
    // 400 000 bytes from tindy1 over west-side, west, west-north, north, north-east, east and
    // east-side, in both families: bash's /dev/tcp sends, a listener in tpx30 counts. Every
    // step is bounded by `timeout`; `down` (or the guard) ends whatever is left.
    for (listen, target) in [("0.0.0.0", "192.168.3.2"), ("::", "fd00:3:4::2")] {
        let argv: Vec<String> = ["timeout", "20", "perl", "-e", COUNT_BYTES, listen]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let listener = lab::node_command(&state, "tpx30", &argv)
            .unwrap()
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Waits (5 s at most) until it listens.
        let start = std::time::Instant::now();
        loop {
            let out = run_in(&name, "tpx30", &["ss", "-Hltn", "sport = :5201"]);
            if String::from_utf8_lossy(&out.stdout).contains("5201") {
                break;
            }
            assert!(start.elapsed().as_secs() < 5, "nothing listens in tpx30");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let send = format!("head -c 400000 /dev/zero > /dev/tcp/{target}/5201");
        let out = run_in(&name, "tindy1", &["timeout", "20", "bash", "-c", &send]);
        assert!(
            out.status.success(),
            "sending to {target}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let out = listener.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "listening on {listen}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "400000\n",
            "bytes received from tindy1 at {target}"
        );
    }
    assert!(lab::down(&name).unwrap());
    assert_eq!(leftovers(&name, &topo), Vec::<String>::new());
}

/// Names that are not lab names never become paths: `down` refuses them before it looks at
/// anything.
#[test]
fn down_refuses_what_is_not_a_lab_name() {
    for bad in [
        "",
        ".",
        "..",
        "/",
        "/tmp",
        "../etc",
        "a/b",
        "a/../b",
        "Lab",
        "-x",
        "x-",
        "9x",
        "abcdefghijklm",
        "a b",
        "a\0b",
    ] {
        match lab::down(bad) {
            Err(lab::LabError::BadName(e)) => {
                assert!(e.to_string().contains("invalid lab name"), "{e}")
            }
            other => panic!("down({bad:?}) gave {other:?}"),
        }
    }
}

/// A directory of a lab's name that holds no state file is not a lab: `down` says so, fails
/// and removes nothing.
#[test]
fn down_leaves_a_directory_without_a_lab_state_alone() {
    if !root_or_skip("down without state") {
        return;
    }
    let name = unique_lab("s");
    let dir = state_dir(&name);
    struct Remove(std::path::PathBuf);
    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    std::fs::create_dir_all(&dir).unwrap();
    let _remove = Remove(dir.clone());
    std::fs::write(dir.join("keep"), "not rtemu's").unwrap();
    let err = lab::down(&name).unwrap_err().to_string();
    assert!(err.contains("holds no lab state"), "{err}");
    assert!(
        dir.join("keep").exists(),
        "down removed a directory without a state"
    );
}

/// An empty directory of a lab's name is what a `down` killed just before its last `rmdir`
/// leaves: no lab, so the next `down` removes it and succeeds, and `up` can use the name again.
#[test]
fn down_removes_the_empty_directory_a_killed_down_left() {
    if !root_or_skip("down after a killed down") {
        return;
    }
    let name = unique_lab("e");
    let dir = state_dir(&name);
    std::fs::create_dir_all(&dir).unwrap();
    let loaded = rtemu_topo::state::State::load(&name).map(|s| s.is_none());
    let removed = lab::down(&name);
    let left = dir.exists();
    let _ = std::fs::remove_dir(&dir);
    assert!(loaded.unwrap(), "an empty lab directory loaded as a lab");
    assert!(
        !removed.unwrap(),
        "down reported a lab where there was none"
    );
    assert!(!left, "down left the empty lab directory");
}

/// A process the test started, killed when dropped.
struct Sleeper(std::process::Child);

impl Sleeper {
    fn in_netns(ns: &str) -> Sleeper {
        Sleeper(
            Command::new("ip")
                .args(["netns", "exec", ns, "sleep", "60"])
                .spawn()
                .unwrap(),
        )
    }

    fn alive(&mut self) -> bool {
        self.0.try_wait().unwrap().is_none()
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A namespace made by `ip netns add`, deleted when dropped.
struct OutsideNs(String);

impl OutsideNs {
    fn add(name: &str) -> OutsideNs {
        assert!(Command::new("ip")
            .args(["netns", "add", name])
            .status()
            .unwrap()
            .success());
        OutsideNs(name.to_owned())
    }
}

impl Drop for OutsideNs {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
        // A lab's hosts file for a namespace of this name, which `down` leaves with the
        // namespace it did not make.
        let _ = std::fs::remove_dir_all(Path::new("/etc/netns").join(&self.0));
    }
}

/// A state file that names something the lab did not make (another namespace, a cgroup that
/// is not its node's, a cpuset that is not the lab's) is refused whole: `down` does nothing on it, and says why.
#[test]
fn a_state_file_naming_what_the_lab_did_not_make_is_not_acted_on() {
    if !root_or_skip("crafted state") {
        return;
    }
    let name = unique_lab("c");
    let _guard = Guard(name.clone());
    lab::up(&chain(&name, 2), "chain.toml").unwrap();
    let file = state_dir(&name).join("state.json");
    let original = std::fs::read_to_string(&file).unwrap();
    let outside_name = format!("rtemu-out{}", std::process::id());
    let _outside = OutsideNs::add(&outside_name);
    let mut sleeper = Sleeper::in_netns(&outside_name);
    let crafted = |edit: &dyn Fn(&mut serde_json::Value)| {
        let mut v: serde_json::Value = serde_json::from_str(&original).unwrap();
        edit(&mut v);
        std::fs::write(&file, v.to_string()).unwrap();
    };
    type Edit<'a> = &'a dyn Fn(&mut serde_json::Value);
    let cases: [(&str, Edit); 5] = [
        ("is not one of the lab's", &|v| {
            v["namespaces"]
                .as_array_mut()
                .unwrap()
                .push(outside_name.clone().into())
        }),
        ("not rtemu-", &|v| {
            v["nodes"][0][1] = outside_name.clone().into()
        }),
        ("cgroup", &|v| {
            v["cgroups"] = serde_json::json!([["n0", "/sys/fs/cgroup"]]);
        }),
        ("cpuset", &|v| {
            v["programs"] = serde_json::json!({"cgroup": "/sys/fs/cgroup/cpuset", "cpus": [0]});
        }),
        ("names lab", &|v| v["lab"] = "other".into()),
    ];
    for (why, edit) in cases {
        crafted(edit);
        let err = lab::down(&name).unwrap_err().to_string();
        assert!(
            err.contains("is not a state file rtemu wrote")
                && err.contains(why.trim_start_matches("not ")),
            "{why}: {err}"
        );
        assert!(
            sleeper.alive(),
            "{why}: down killed a process it did not start"
        );
        assert!(Path::new("/run/netns").join(&outside_name).exists());
        assert!(
            Path::new("/run/netns")
                .join(node_netns(&name, "n0"))
                .exists(),
            "{why}: down acted on a state it refused"
        );
    }
    std::fs::write(&file, &original).unwrap();
    assert!(lab::down(&name).unwrap());
}

/// A namespace of the lab's name that does not carry the lab's mark is someone else's: `down`
/// removes the rest of the lab, leaves that namespace and its processes, and fails naming it.
#[test]
fn down_leaves_an_unmarked_namespace_of_the_labs_name_alone() {
    if !root_or_skip("unmarked namespace") {
        return;
    }
    let name = unique_lab("u");
    let _guard = Guard(name.clone());
    let topo = chain(&name, 2);
    lab::up(&topo, "chain.toml").unwrap();
    let ns = node_netns(&name, "n1");
    // The lab's own namespace goes; an outsider takes its name.
    assert!(Command::new("ip")
        .args(["netns", "del", &ns])
        .status()
        .unwrap()
        .success());
    let _outside = OutsideNs::add(&ns);
    let mut sleeper = Sleeper::in_netns(&ns);
    let err = lab::down(&name).unwrap_err().to_string();
    assert!(err.contains(&ns) && err.contains("left alone"), "{err}");
    assert!(
        sleeper.alive(),
        "down killed a process in a namespace it did not make"
    );
    assert!(Path::new("/run/netns").join(&ns).exists());
    assert!(!Path::new("/run/netns")
        .join(node_netns(&name, "n0"))
        .exists());
    assert!(!state_dir(&name).exists());
}

/// A recorded detached process is ended only while it is the one recorded for a node of the
/// lab: another start time or another node, and it is left running.
#[test]
fn down_ends_only_the_detached_processes_it_recorded() {
    if !root_or_skip("detached records") {
        return;
    }
    let name = unique_lab("d");
    let _guard = Guard(name.clone());
    lab::up(&chain(&name, 2), "chain.toml").unwrap();
    let mut stale = Sleeper(Command::new("sleep").arg("60").spawn().unwrap());
    let mut elsewhere = Sleeper(Command::new("sleep").arg("60").spawn().unwrap());
    let record = |pid: u32, start: u64, node: &str| rtemu_topo::state::Detached {
        pid: pid as i32,
        start_time: start,
        node: node.into(),
        command: vec!["sleep".into()],
        log: "/dev/null".into(),
    };
    let lab_name = LabName::new(&name).unwrap();
    let start = |pid: u32| rtemu_topo::state::proc_stat(pid as i32).unwrap().1;
    rtemu_topo::state::record_detached(
        &lab_name,
        &record(stale.0.id(), start(stale.0.id()) + 1, "n0"),
    )
    .unwrap();
    rtemu_topo::state::record_detached(
        &lab_name,
        &record(elsewhere.0.id(), start(elsewhere.0.id()), "zz"),
    )
    .unwrap();
    assert!(lab::down(&name).unwrap());
    assert!(stale.alive(), "a pid with another start time was killed");
    assert!(
        elsewhere.alive(),
        "a pid recorded for no node of the lab was killed"
    );
}

/// What an `up` killed before its state was in place left is reaped once its process is gone,
/// told by pid and start time: a pid reused by another process does not keep it, and a running
/// `up`'s is never taken.
#[test]
fn unplaced_state_of_a_killed_up_is_reaped_by_pid_and_start_time() {
    if !root_or_skip("unplaced state") {
        return;
    }
    let name = unique_lab("p");
    let lab = LabName::new(&name).unwrap();
    let (_, init_start) = rtemu_topo::state::proc_stat(1).unwrap();
    let root = Path::new(rtemu_topo::state::STATE_ROOT);
    std::fs::create_dir_all(root).unwrap();
    let live = root.join(format!(".new-{name}.1.{init_start}"));
    let reused = root.join(format!(".new-{name}.1.{}.3", init_start + 1));
    // A create under way in this very process (a server makes several at once).
    let me = std::process::id() as i32;
    let (_, my_start) = rtemu_topo::state::proc_stat(me).unwrap();
    let mine = root.join(format!(".new-{name}.{me}.{my_start}.7"));
    for d in [&live, &reused, &mine] {
        std::fs::create_dir_all(d).unwrap();
    }
    rtemu_topo::state::reap_unplaced(&lab);
    let kept = [&live, &reused, &mine].map(|d| d.exists());
    for d in [&live, &reused, &mine] {
        let _ = std::fs::remove_dir_all(d);
    }
    assert!(kept[0], "a running process's directory was reaped");
    assert!(!kept[1], "a directory of a reused pid was kept");
    assert!(kept[2], "this process's create under way was reaped");
}

/// Creates of one lab's state at once in one process (concurrent `POST /v1/labs` in a server):
/// exactly one places it, every other is told the lab exists, none fails otherwise.
#[test]
fn concurrent_creates_of_one_lab_place_one_and_refuse_the_rest_as_existing() {
    if !root_or_skip("concurrent creates") {
        return;
    }
    let name = unique_lab("q");
    let _guard = Guard(name.clone());
    let src = format!("lab = \"{name}\"\n[nodes.a]\n");
    let topo = Topology::parse("q.toml", &src).unwrap();
    let state = rtemu_topo::state::State {
        lab: LabName::new(&name).unwrap(),
        file: "q.toml".into(),
        namespaces: Vec::new(),
        nodes: Vec::new(),
        handovers: Vec::new(),
        cgroups: Vec::new(),
        programs: None,
        complete: false,
        topology: topo,
        part: None,
    };
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8).map(|_| s.spawn(|| state.create())).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let placed = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(placed, 1, "{results:?}");
    for r in results.iter().filter_map(|r| r.as_ref().err()) {
        assert!(
            matches!(r, rtemu_topo::state::StateError::Io { source, .. }
                if source.kind() == std::io::ErrorKind::AlreadyExists),
            "{r}"
        );
    }
    let root = Path::new(rtemu_topo::state::STATE_ROOT);
    let staged: Vec<_> = std::fs::read_dir(root)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with(&format!(".new-{name}.")))
        .collect();
    assert_eq!(staged, Vec::<String>::new(), "staging directories left");
}

/// A machine-wide key among a node's sysctls (here a global `net.core` one, which the file's
/// `net.` rule lets through) fails `up` with the reason, and the host keeps its value.
#[test]
fn a_machine_wide_sysctl_never_reaches_the_host() {
    if !root_or_skip("machine-wide sysctl") {
        return;
    }
    let name = unique_lab("g");
    let _guard = Guard(name.clone());
    let before = std::fs::read_to_string("/proc/sys/net/core/rmem_max").unwrap();
    let value: u64 = before.trim().parse::<u64>().unwrap() + 4096;
    let src = format!(
        "lab = \"{name}\"\n[nodes.a]\nsysctls = {{ \"net.core.rmem_max\" = {value} }}\n[nodes.b]\n[[links]]\nendpoints = [\"a\", \"b\"]\n"
    );
    let topo = Topology::parse("g.toml", &src).unwrap();
    let err = lab::up(&topo, "g.toml").unwrap_err().to_string();
    assert!(err.contains("not a network namespace's own"), "{err}");
    assert_eq!(
        std::fs::read_to_string("/proc/sys/net/core/rmem_max").unwrap(),
        before
    );
    assert_eq!(leftovers(&name, &topo), Vec::<String>::new());
}

/// Two labs whose names share a prefix, with nodes that made one namespace name before (lab
/// `K` node `a-b`, lab `K-a` node `b`), run side by side and each goes down alone.
#[test]
fn labs_whose_names_share_a_prefix_get_namespaces_of_their_own() {
    if !root_or_skip("shared prefix") {
        return;
    }
    let short = format!("k{}", std::process::id() % 100_000);
    let long = format!("{short}-a");
    let topo = |lab: &str, node: &str| {
        let src = format!("lab = \"{lab}\"\n[nodes.{node}]\n[nodes.z]\n[[links]]\nendpoints = [\"{node}\", \"z\"]\n");
        Topology::parse("p.toml", &src).unwrap()
    };
    let (first, second) = (topo(&short, "a-b"), topo(&long, "b"));
    let _guards = (Guard(short.clone()), Guard(long.clone()));
    lab::up(&first, "p.toml").unwrap();
    lab::up(&second, "p.toml").unwrap();
    assert_ne!(node_netns(&short, "a-b"), node_netns(&long, "b"));
    assert!(lab::down(&long).unwrap());
    assert_eq!(leftovers(&long, &second), Vec::<String>::new());
    assert!(Path::new("/run/netns")
        .join(node_netns(&short, "a-b"))
        .exists());
    assert!(lab::down(&short).unwrap());
    assert_eq!(leftovers(&short, &first), Vec::<String>::new());
}

/// A lab an older rtemu made names its node namespaces `rtemu-<lab>-<node>`: `down` still
/// takes them down (they carry the lab's mark).
#[test]
fn down_removes_the_namespaces_of_a_lab_named_the_old_way() {
    if !root_or_skip("old names") {
        return;
    }
    let name = unique_lab("ol");
    let _guard = Guard(name.clone());
    lab::up(&chain(&name, 1), "chain.toml").unwrap();
    // A node namespace as the older naming made it, with the lab's mark.
    let old = lab::legacy_node_netns(&name, "n1");
    let _outside = OutsideNs::add(&old);
    ip(&[
        "-n",
        &old,
        "link",
        "set",
        "lo",
        "alias",
        &format!("rtemu:{name}"),
    ]);
    let file = state_dir(&name).join("state.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    v["nodes"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!(["n1", old]));
    v["namespaces"]
        .as_array_mut()
        .unwrap()
        .push(old.clone().into());
    std::fs::write(&file, v.to_string()).unwrap();
    assert!(lab::down(&name).unwrap());
    assert!(!Path::new("/run/netns").join(&old).exists());
    assert!(!state_dir(&name).exists());
}

/// A host interface with an address the host is reached at is not moved unless the file says
/// `uplink = true`; moved, it comes back at `down` up, with its address and its route.
#[test]
fn an_uplink_moves_only_when_asked_and_comes_back_as_it_was() {
    if !root_or_skip("uplink") {
        return;
    }
    let id = std::process::id() % 100_000;
    let (dev, peer) = (format!("rtu{id}"), format!("rtv{id}"));
    struct Veth(String);
    impl Drop for Veth {
        fn drop(&mut self) {
            let _ = Command::new("ip").args(["link", "del", &self.0]).output();
        }
    }
    ip(&["link", "add", &dev, "type", "veth", "peer", "name", &peer]);
    let _veth = Veth(dev.clone());
    ip(&["addr", "add", "198.51.100.1/24", "dev", &dev]);
    ip(&["link", "set", &dev, "up"]);
    ip(&["link", "set", &peer, "up"]);
    ip(&[
        "route",
        "add",
        "203.0.113.0/24",
        "via",
        "198.51.100.9",
        "dev",
        &dev,
        "metric",
        "77",
    ]);
    let carried = || {
        let show = |args: &[&str]| {
            let o = Command::new("ip").args(args).output().unwrap();
            String::from_utf8_lossy(&o.stdout).into_owned()
        };
        let addr = show(&["-o", "addr", "show", "dev", &dev]);
        let route = show(&["route", "show", "dev", &dev]);
        let up = show(&["-o", "link", "show", "dev", &dev]).contains(",UP");
        (
            addr.contains("198.51.100.1/24"),
            route.contains("203.0.113.0/24 via 198.51.100.9") && route.contains("metric 77"),
            up,
        )
    };
    assert_eq!(carried(), (true, true, true));
    let name = unique_lab("up");
    let src = |uplink: &str| {
        format!(
            "lab = \"{name}\"\n[nodes.a]\n[[externals]]\nnode = \"a\"\nhost = \"{dev}\"\n{uplink}"
        )
    };
    let topo = Topology::parse("u.toml", &src("")).unwrap();
    let _guard = Guard(name.clone());
    let err = lab::up(&topo, "u.toml").unwrap_err().to_string();
    assert!(
        err.contains("the host's address 198.51.100.1/24") && err.contains("uplink = true"),
        "{err}"
    );
    assert_eq!(leftovers(&name, &topo), Vec::<String>::new());
    assert_eq!(carried(), (true, true, true), "refused, yet changed");

    let topo = Topology::parse("u.toml", &src("uplink = true\n")).unwrap();
    lab::up(&topo, "u.toml").unwrap();
    assert!(
        !Path::new("/sys/class/net").join(&dev).exists(),
        "not moved"
    );
    assert!(lab::down(&name).unwrap());
    assert_eq!(carried(), (true, true, true), "not given back as it was");
    assert_eq!(leftovers(&name, &topo), Vec::<String>::new());
}

#[test]
fn a_chain_with_aggregated_routes_pings_end_to_end_in_both_families() {
    if !root_or_skip("aggregated_routes") {
        return;
    }
    let name = unique_lab("agg");
    // 60 nodes: a reply starts with the kernel's default hop limit, 64.
    let n = 60;
    let src = rtemu_testutil::chain_topology(&name, "routing = \"aggregate\"\n", n);
    let topo = Topology::parse("chain.toml", &src).unwrap();
    let _guard = Guard(name.clone());
    lab::up(&topo, "chain.toml").unwrap();
    let last = format!("n{}", n - 1);
    // The kernel's own tables: a handful of routes where one per subnet would be 58 a family.
    for family in ["-4", "-6"] {
        let table = run_in(&name, "n0", &["ip", family, "route", "show"]);
        let table = String::from_utf8_lossy(&table.stdout);
        let routes = table.lines().filter(|l| l.contains(" via ")).count();
        assert!(
            (1..=12).contains(&routes),
            "n0 holds {routes} {family} routes"
        );
    }
    // Both ends, across 58 forwarding nodes, each way in both families.
    for (from, to) in [("n0", last.as_str()), (last.as_str(), "n0")] {
        for family in ["-4", "-6"] {
            let ping = run_in(&name, from, &["ping", family, "-c", "1", "-W", "5", to]);
            assert!(
                ping.status.success(),
                "{from} → {to} ({family}): {}",
                String::from_utf8_lossy(&ping.stdout)
            );
        }
    }
    assert!(lab::down(&name).unwrap());
    assert_eq!(leftovers(&name, &topo), Vec::<String>::new());
}
