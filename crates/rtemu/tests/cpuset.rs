//! The lab's programs kept off the engine's CPUs (`programs_cpus = "off-engine"`, `up
//! --programs-cpus`): a start-up command and an `exec` run only on the CPUs the engine's
//! release threads do not use, inside the lab's cpuset, which `ls` names and `down` removes.
//! (A crashed `up` or engine leaves no cpuset behind: tests/crash.rs.)
//!
//! Needs root; without it the test says why and passes, unless `RTEMU_REQUIRE_ROOT=1`.

mod common;

use common::{root_or_skip, rtemu, text, Lab};
use rtemu_topo::cpuset::Cpusets;

/// Two nodes on an impaired link (so an engine runs); node a starts a program of its own.
const TOPO: &str = r#"
lab = "LAB"
neighbours = "static"
[nodes.a]
run = ["exec sleep 600"]
[nodes.b]
[[links]]
endpoints = ["a", "b"]
netem = "delay 1ms"
"#;

/// A field of `/proc/PID/status`.
fn status_field(status: &str, field: &str) -> String {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .unwrap_or_else(|| panic!("no {field} in {status}"))
        .trim()
        .to_owned()
}

#[test]
fn programs_kept_off_the_engine_run_only_on_the_other_cpus_until_down() {
    if !root_or_skip("the lab's programs off the engine's CPUs") {
        return;
    }
    let cpus = rtemu_clock::rt::affinity().unwrap();
    if cpus.len() < 2 {
        // One CPU: the engine is not pinned, so there is nothing to keep off; `up` says so.
        let dir = std::env::temp_dir().join(format!("rtemu-cpuset-one-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("lab.toml");
        std::fs::write(&file, TOPO.replace("LAB", "cpusetone")).unwrap();
        let out = rtemu(&[
            "up",
            file.to_str().unwrap(),
            "--programs-cpus",
            "off-engine",
        ]);
        let _ = rtemu(&["down", "cpusetone"]);
        let _ = std::fs::remove_dir_all(&dir);
        assert!(!out.status.success(), "{}", text(&out));
        assert!(text(&out).contains("not pinned"), "{}", text(&out));
        return;
    }
    let lab = Lab::up_args("cs", TOPO, &[], &["--programs-cpus", "off-engine"]);
    let sets = Cpusets::find().expect("a cpuset controller");
    let cgroup = sets.dir(&lab.name, None);
    assert!(cgroup.is_dir(), "{} was not made", cgroup.display());

    let stats = lab.stats();
    let engine: Vec<usize> = stats["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["cpu"].as_u64().expect("a pinned release thread") as usize)
        .collect();
    let online = rtemu_topo::cpuset::online().unwrap();
    let expected: Vec<usize> = online
        .iter()
        .copied()
        .filter(|c| !engine.contains(c))
        .collect();
    let expected = rtemu_clock::rt::format_cpu_list(&expected);
    assert!(!expected.is_empty());

    // Where the cgroup shows in /proc/PID/cgroup: v1's cpuset line, v2's only line.
    let member = format!("/rtemu-{}", lab.name);
    let in_cpuset = |cgroups: &str| {
        cgroups.lines().any(|l| {
            let mut f = l.splitn(3, ':');
            let (_, controllers, path) = (f.next(), f.next().unwrap_or(""), f.next());
            let v1 = controllers.split(',').any(|c| c == "cpuset");
            (v1 || controllers.is_empty()) && path == Some(member.as_str())
        })
    };

    // An `exec`: allowed only the programs' CPUs from its first instruction, in the cpuset.
    let out = lab.exec(
        "b",
        &[
            "sh",
            "-c",
            "cat /proc/self/status; echo ====; cat /proc/self/cgroup",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    let (status, cgroups) = said.split_once("====").unwrap();
    assert_eq!(
        status_field(status, "Cpus_allowed_list"),
        expected,
        "{said}"
    );
    assert!(in_cpuset(cgroups), "not in {member}: {cgroups}");

    // The start-up command: the cpuset holds it, and it too stays off the engine's CPUs.
    let pids = std::fs::read_to_string(cgroup.join("cgroup.procs")).unwrap();
    let pids: Vec<&str> = pids.split_whitespace().collect();
    let sleeper = pids
        .iter()
        .find(|p| {
            std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| c == b"sleep\x00600\x00")
        })
        .unwrap_or_else(|| panic!("node a's start-up command is not in the cpuset: {pids:?}"));
    let status = std::fs::read_to_string(format!("/proc/{sleeper}/status")).unwrap();
    assert_eq!(status_field(&status, "Cpus_allowed_list"), expected);
    let cgroups = std::fs::read_to_string(format!("/proc/{sleeper}/cgroup")).unwrap();
    assert!(in_cpuset(&cgroups), "not in {member}: {cgroups}");

    // `ls` says where the programs run.
    let ls = rtemu(&["ls", &lab.name]);
    assert!(
        text(&ls).contains(&format!("programs on CPUs {expected} (off the engine's")),
        "{}",
        text(&ls)
    );

    let down = rtemu(&["down", &lab.name]);
    assert!(down.status.success(), "{}", text(&down));
    assert!(!cgroup.exists(), "{} is left after down", cgroup.display());
}

#[test]
fn the_default_leaves_programs_on_every_cpu_without_a_cpuset() {
    if !root_or_skip("the lab's programs on every CPU") {
        return;
    }
    let lab = Lab::up("ca", TOPO);
    let sets = Cpusets::find().expect("a cpuset controller");
    let cgroup = sets.dir(&lab.name, None);
    assert!(!cgroup.exists(), "{} made by default", cgroup.display());
    let out = lab.exec("b", &["cat", "/proc/self/status"]);
    let allowed = status_field(&String::from_utf8_lossy(&out.stdout), "Cpus_allowed_list");
    let mine = rtemu_clock::rt::format_cpu_list(&rtemu_clock::rt::affinity().unwrap());
    assert_eq!(allowed, mine);
    assert!(!text(&rtemu(&["ls", &lab.name])).contains("programs on CPUs"));
}
