//! Labs of thousands of nodes: `up` holds a bounded number of descriptors, grows linearly, and
//! `down` leaves nothing.
//!
//! These tests need root. Without it they print why and pass, unless `RTEMU_REQUIRE_ROOT=1`
//! (CI) makes them fail. Each lab is brought up and down by a child process (this test binary
//! running an ignored helper), so its descriptor limit and CPU time are its own; a guard in
//! the parent removes the lab whatever happens.

use std::path::Path;
use std::process::Command;

use nix::sys::resource::{getrusage, setrlimit, Resource, UsageWho};
use rtemu_topo::lab::{self, node_netns};
use rtemu_topo::state::{lab_dir, LabName};
use rtemu_topo::Topology;

use rtemu_testutil::root_or_skip;

/// The descriptor limit the helper runs under: far below the nodes of the lab it builds.
const FD_LIMIT: u64 = 256;

/// A chain of `n` nodes over ideal links, IPv4 only, no routes: the shape of issue 25.
fn chain(lab: &str, n: usize) -> Topology {
    let header = "routing = \"none\"\nip = \"ipv4\"\n";
    Topology::parse(
        "chain.toml",
        &rtemu_testutil::chain_topology(lab, header, n),
    )
    .unwrap()
}

/// The namespaces of lab `lab`'s nodes (its own namespace left out).
fn node_namespaces(lab: &str) -> Vec<String> {
    let own = lab::lab_netns(lab);
    let mut all = rtemu_testutil::lab_namespaces(lab);
    all.retain(|n| *n != own);
    all
}

/// CPU time (user and system) this process has used, in seconds.
fn cpu_seconds() -> f64 {
    let usage = getrusage(UsageWho::RUSAGE_SELF).unwrap();
    let secs = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 * 1e-6;
    secs(usage.user_time()) + secs(usage.system_time())
}

/// Not a test on its own (ignored unless asked for): run by [`run_helper`]. Under a
/// descriptor limit of [`FD_LIMIT`], brings up a chain of `RTEMU_SIZE_NODES` nodes as lab
/// `RTEMU_SIZE_LAB`, checks every node's namespace is there, prints the CPU seconds `up`
/// took, and brings the lab down.
#[test]
#[ignore = "helper process of the tests in this file"]
fn child_up_and_down_under_a_descriptor_limit() {
    let (Some(name), Some(nodes)) = (
        std::env::var_os("RTEMU_SIZE_LAB"),
        std::env::var_os("RTEMU_SIZE_NODES"),
    ) else {
        return;
    };
    let name = name.into_string().unwrap();
    let nodes: usize = nodes.into_string().unwrap().parse().unwrap();
    let topo = chain(&name, nodes);
    setrlimit(Resource::RLIMIT_NOFILE, FD_LIMIT, FD_LIMIT).unwrap();
    let before = cpu_seconds();
    lab::up(&topo, "chain.toml").unwrap();
    let cpu = cpu_seconds() - before;
    let made = node_namespaces(&name);
    assert_eq!(made.len(), nodes, "every node has its namespace");
    println!("UP_CPU_SECONDS {cpu}");
    assert!(lab::down(&name).unwrap());
}

/// Removes the lab when dropped, whatever happened.
struct Guard(String);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = lab::down(&self.0);
    }
}

/// Runs the helper for a chain of `nodes` nodes as lab `name`; returns the CPU seconds its
/// `up` took, after checking that nothing of the lab is left.
fn run_helper(name: &str, nodes: usize) -> f64 {
    let _guard = Guard(name.to_owned());
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "child_up_and_down_under_a_descriptor_limit",
            "--exact",
            "--ignored",
            "--test-threads=1",
            "--nocapture",
        ])
        .env("RTEMU_SIZE_LAB", name)
        .env("RTEMU_SIZE_NODES", nodes.to_string())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{nodes} nodes under {FD_LIMIT} descriptors: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    // Nothing of the lab is left: namespaces, hosts files, state.
    assert_eq!(node_namespaces(name), Vec::<String>::new());
    let etc: Vec<String> = std::fs::read_dir("/etc/netns")
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&node_netns(name, "")))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(etc, Vec::<String>::new());
    assert!(!lab_dir(&LabName::new(name).unwrap()).exists());
    assert!(!Path::new("/run/netns").join(lab::lab_netns(name)).exists());
    // The harness prints its own words on the same line.
    stdout
        .split("UP_CPU_SECONDS ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the helper says how long up took")
        .parse()
        .unwrap()
}

/// A lab name unique to this test and process (lab names are at most 12 characters).
fn unique_lab(tag: &str) -> String {
    format!("t{tag}{}", std::process::id() % 100_000)
}

#[test]
fn two_thousand_nodes_come_up_under_256_descriptors_in_linear_time_and_leave_nothing() {
    if !root_or_skip("size", "creates thousands of network namespaces") {
        return;
    }
    // The smaller lab first: it also warms up what the kernel caches.
    let small = run_helper(&unique_lab("zs"), 400);
    let large = run_helper(&unique_lab("zl"), 2000);
    let ratio = large / small;
    eprintln!("up: 400 nodes {small:.2} s, 2000 nodes {large:.2} s of CPU, ratio {ratio:.1}");
    // Linear is 5; the square of the size (what `up` was: a sysctl looked at every namespace
    // of the machine) measured 11 here. CPU time, not wall time, so others' load matters less.
    assert!(
        ratio < 8.0,
        "up took {ratio:.1} times as long for 5 times the nodes ({small:.2} s of CPU for 400, \
         {large:.2} s for 2000): it grows faster than linearly"
    );
}
