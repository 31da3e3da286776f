//! Labs on the real kernel: connectivity, static neighbours and teardown that leaves nothing.
//!
//! These tests need root (namespaces, mounts, netlink). Without it they print why and pass,
//! unless `RTEMU_REQUIRE_ROOT=1` (CI) makes them fail. Every lab has a name unique to the test
//! and process, and a guard removes it even when an assertion fails. Traffic stays inside the
//! namespaces the test created.

use std::path::Path;
use std::process::{Command, Output};

use rtemu_topo::lab::{self, node_netns};
use rtemu_topo::state::lab_dir;
use rtemu_topo::Topology;

/// Whether the test may run; panics when root is required but missing.
fn root_or_skip(test: &str) -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    assert!(
        std::env::var_os("RTEMU_REQUIRE_ROOT").is_none_or(|v| v != "1"),
        "{test}: needs root and RTEMU_REQUIRE_ROOT=1 is set"
    );
    eprintln!("skipping {test}: needs root (creates network namespaces)");
    false
}

/// A lab name unique to this test and process (lab names are at most 12 characters).
fn unique_lab(tag: &str) -> String {
    format!("t{tag}{}", std::process::id() % 100_000)
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
    if lab_dir(lab).exists() {
        left.push(lab_dir(lab).display().to_string());
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
