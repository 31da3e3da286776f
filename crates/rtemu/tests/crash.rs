//! Crash safety: `rtemu up`, a lab's engine and `rtemu down` itself are SIGKILLed at random
//! moments, 100 times, each followed by `rtemu down`. After every round nothing the lab made
//! is left (namespaces, `/etc/netns` entries, interfaces, cgroups, the cpuset of its programs,
//! `/run/rtemu` entries, processes), and a second lab that runs throughout is undisturbed.
//!
//! Needs root; without it the test says why and passes, unless `RTEMU_REQUIRE_ROOT=1`.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{root_or_skip, rtemu, text, Lab};

/// The lab that is killed: an impaired link through the engine, a LAN (a bridge in the lab's
/// namespace), a node with a CPU limit (a cgroup) and, where there are two CPUs to share out,
/// its programs kept off the engine's CPU (a cpuset).
const VICTIM: &str = r#"
lab = "LAB"
neighbours = "static"
[nodes.a]
[nodes.b]
[nodes.c]
cpu = 0.5
[[links]]
name = "ab"
endpoints = ["a", "b"]
netem = "delay 5ms loss 1%"
[[lans]]
name = "lan"
members = ["b", "c"]
"#;

/// The lab that must not notice: two nodes on a plain link.
const BYSTANDER: &str = r#"
lab = "LAB"
neighbours = "static"
[nodes.x]
[nodes.y]
[[links]]
endpoints = ["x", "y"]
"#;

/// A small deterministic generator for the kill moments (the seed is printed, so a failing
/// round can be replayed).
struct XorShift(u64);

impl XorShift {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// The host's interfaces: a lab never adds one.
fn host_interfaces() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir("/sys/class/net")
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Every trace of lab `lab` on the machine.
fn leftovers(lab: &str) -> Vec<String> {
    let ns = format!("rtemu-{lab}");
    let mut left = Vec::new();
    for dir in ["/run/netns", "/etc/netns"] {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name == ns || name.starts_with(&format!("{ns}-")) {
                left.push(format!("{dir}/{name}"));
            }
        }
    }
    for e in std::fs::read_dir("/run/rtemu")
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = e.file_name().to_string_lossy().into_owned();
        if name == lab || name.starts_with(&format!(".new-{lab}.")) {
            left.push(format!("/run/rtemu/{name}"));
        }
    }
    if let Some(c) = rtemu_topo::cpuset::Cpusets::find() {
        let dir = c.0.root.join(&ns);
        if dir.exists() {
            left.push(format!("cpuset {}", dir.display()));
        }
    }
    if let Some(c) = rtemu_topo::cgroup::Controller::find() {
        for e in std::fs::read_dir(&c.root).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(&format!("{ns}-")) {
                left.push(format!("cgroup {}", e.path().display()));
            }
        }
    }
    let engine = format!("engine\0{lab}\0");
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let is_pid = e
            .file_name()
            .to_str()
            .is_some_and(|n| n.parse::<u32>().is_ok());
        if !is_pid {
            continue;
        }
        if let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) {
            if String::from_utf8_lossy(&cmdline).contains(&engine) {
                left.push(format!(
                    "engine process {}",
                    e.file_name().to_string_lossy()
                ));
            }
        }
    }
    left
}

/// The pid of lab `lab`'s engine, waiting up to a second for it to show.
fn engine_pid(lab: &str) -> Option<i32> {
    let engine = format!("engine\0{lab}\0");
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(1) {
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
                continue;
            };
            if let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) {
                if String::from_utf8_lossy(&cmdline).contains(&engine) {
                    return Some(pid);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

/// Starts `rtemu ARGS…` without waiting for it.
fn spawn(args: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_rtemu"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("rtemu starts")
}

fn sigkill(pid: i32) {
    // SAFETY: kill(2) takes no pointers; a pid that has exited is only an error.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
}

#[test]
fn a_hundred_sigkills_in_up_engine_and_down_leave_nothing_behind() {
    if !root_or_skip("crash safety") {
        return;
    }
    let bystander = Lab::up("by", BYSTANDER);
    let name = format!("k{}", std::process::id() % 100_000);
    let dir = std::env::temp_dir().join(format!("rtemu-crash-{name}"));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("victim.toml");
    let mut victim = VICTIM.replace("LAB", &name);
    if rtemu_clock::rt::affinity().unwrap().len() >= 2 {
        victim = victim.replace("neighbours", "programs_cpus = \"off-engine\"\nneighbours");
    }
    std::fs::write(&file, victim).unwrap();
    let file = file.to_str().unwrap();
    struct Down<'a>(&'a str, &'a Path);
    impl Drop for Down<'_> {
        fn drop(&mut self) {
            let _ = rtemu(&["down", self.0]);
            let _ = std::fs::remove_dir_all(self.1);
        }
    }
    let _down = Down(&name, &dir);
    let interfaces = host_interfaces();
    let seed = 0x5eed_u64 ^ u64::from(std::process::id());
    eprintln!("crash safety: seed {seed:#x}");
    let mut rng = XorShift(seed | 1);
    let mut counts = [0u32; 3];
    for round in 0..100 {
        let phase = round % 3;
        let moment = match phase {
            // `up`: from before its state file to after its engine answers.
            0 => {
                let ms = rng.below(700);
                let mut up = spawn(&["up", file]);
                std::thread::sleep(Duration::from_millis(ms));
                sigkill(up.id() as i32);
                let _ = up.wait();
                ms
            }
            // The engine, while the lab runs.
            1 => {
                let up = rtemu(&["up", file]);
                assert!(up.status.success(), "round {round}: {}", text(&up));
                let ms = rng.below(200);
                std::thread::sleep(Duration::from_millis(ms));
                let pid = engine_pid(&name).expect("the engine runs");
                sigkill(pid);
                ms
            }
            // `down` itself.
            _ => {
                let up = rtemu(&["up", file]);
                assert!(up.status.success(), "round {round}: {}", text(&up));
                let ms = rng.below(300);
                let mut down = spawn(&["down", &name]);
                std::thread::sleep(Duration::from_millis(ms));
                sigkill(down.id() as i32);
                let _ = down.wait();
                ms
            }
        };
        counts[phase] += 1;
        let down = rtemu(&["down", &name]);
        assert!(
            down.status.success(),
            "round {round} (phase {phase}, killed after {moment} ms): down failed: {}",
            text(&down)
        );
        // An engine that entered its namespace just as `down` removed it ends by itself
        // within a second (it checks its namespace's name twice a second).
        let start = Instant::now();
        let mut left = leftovers(&name);
        while !left.is_empty() && start.elapsed() < Duration::from_secs(3) {
            std::thread::sleep(Duration::from_millis(50));
            left = leftovers(&name);
        }
        assert!(
            left.is_empty(),
            "round {round} (phase {phase}, killed after {moment} ms): left {left:?}"
        );
        assert_eq!(
            host_interfaces(),
            interfaces,
            "round {round}: host interfaces"
        );
    }
    assert_eq!(counts.iter().sum::<u32>(), 100);
    // The other lab ran through it all and still carries traffic.
    let ls = rtemu(&["ls", &bystander.name]);
    assert!(text(&ls).contains("(up)"), "{}", text(&ls));
    let ping = rtemu(&[
        "exec",
        "--lab",
        &bystander.name,
        "x",
        "--",
        "ping",
        "-n",
        "-c",
        "1",
        "-W",
        "2",
        "y",
    ]);
    assert!(ping.status.success(), "{}", text(&ping));
}
