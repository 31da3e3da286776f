//! Per-node CPU limits: a node's processes run in its cgroup, are throttled to its share, and
//! the cgroup goes at `down`.
//!
//! Needs root and a cgroup CPU controller. Without root the test prints why and passes, unless
//! `RTEMU_REQUIRE_ROOT=1` (CI) makes it fail.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use rtemu_topo::cgroup::Controller;
use rtemu_topo::lab::{self, node_netns};
use rtemu_topo::state::STATE_ROOT;
use rtemu_topo::Topology;

struct Guard(String);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = lab::down(&self.0);
    }
}

fn root_or_skip(test: &str) -> bool {
    rtemu_testutil::root_or_skip(test, "creates network namespaces and cgroups")
}

/// CPU seconds a process used, from `/proc/<pid>/stat` (utime + stime, in USER_HZ = 100).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .map(|v| v.parse().unwrap())
        .collect();
    (f[0] + f[1]) as f64 / 100.0
}

#[test]
fn a_nodes_processes_get_its_cpu_share_and_its_cgroup_goes_at_down() {
    if !root_or_skip("a_nodes_processes_get_its_cpu_share_and_its_cgroup_goes_at_down") {
        return;
    }
    let controller = Controller::find().expect("a cgroup cpu controller (cgroup v2 or v1)");
    let name = format!("tcpu{}", std::process::id() % 100_000);
    let _guard = Guard(name.clone());
    let src = format!("lab = \"{name}\"\n[nodes.a]\ncpu = 0.2\n[nodes.b]\n");
    let topo = Topology::parse("cpu.toml", &src).unwrap();
    let state = lab::up(&topo, "cpu.toml").unwrap();
    let cg = controller.dir(&node_netns(&name, "a"));
    assert_eq!(state.cgroups, vec![("a".to_owned(), cg.clone())]);
    assert!(cg.is_dir());

    // A busy loop in node a for one second of wall time gets about 0.2 s of CPU.
    let spin = [
        "sh".to_owned(),
        "-c".to_owned(),
        "while :; do :; done".to_owned(),
    ];
    let mut child = lab::node_command(&state, "a", &spin)
        .unwrap()
        .spawn()
        .unwrap();
    let started = Instant::now();
    std::thread::sleep(Duration::from_millis(1500));
    let used = cpu_seconds(child.id());
    let wall = started.elapsed().as_secs_f64();
    let procs = std::fs::read_to_string(cg.join("cgroup.procs")).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        procs.lines().any(|p| p.trim() == child.id().to_string()),
        "the command is not in {}: {procs}",
        cg.display()
    );
    // 0.2 of a core, with room for a loaded machine below and the first period above.
    assert!(
        used < 0.2 * wall + 0.15,
        "{used} s of CPU in {wall} s at cpu = 0.2"
    );
    assert!(used > 0.05, "{used} s of CPU: the loop hardly ran");

    // Node b has no limit: no cgroup of its own.
    assert!(!controller.dir(&node_netns(&name, "b")).exists());

    lab::down(&name).unwrap();
    assert!(!cg.exists(), "down left {}", cg.display());
    assert!(!Path::new(STATE_ROOT).join(&name).exists());
    let netns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&netns.stdout).contains(&name));
}
