//! A lab across hosts, driven as a user would: each "host" (a network namespace on an underlay
//! bridge, see `rtemu_testutil::multihost`) runs `rtemu serve --listen` as its agent, with its
//! own `/run/rtemu`, `/run/netns` and `/etc/netns`; `rtemu up FILE --credentials F` and
//! `rtemu down LAB` run as the coordinator in a third host namespace, with a state directory
//! of their own. The test reaches each agent over its Unix socket to run commands in nodes.
//!
//! Needs root; without it, prints why and passes, unless `RTEMU_REQUIRE_ROOT=1` (CI). Guards
//! take every lab down, end the agents and remove the namespaces whatever happens.

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use rtemu_serve::client::{request, Target};
use rtemu_testutil::multihost::{
    chain, check_delay_across, host_address, median_rtt, ping_all, settled_leftovers, Hosts,
    CHAIN_PLACEMENT, PRIVATE_STATE,
};
use rtemu_testutil::{root_or_skip, TempDir};
use serde_json::{json, Value};

const RTEMU: &str = env!("CARGO_BIN_EXE_rtemu");

/// The agents' TCP port (in the hosts' namespaces, so no other process's).
const PORT: u16 = 7781;

const WAIT: Duration = Duration::from_secs(60);

/// One host's agent: `rtemu serve` in the host's namespace, its state private, its socket and
/// token in the test's directory. Takes its labs down and ends when dropped.
struct Agent {
    child: Child,
    socket: Target,
}

impl Agent {
    fn start(netns: &str, address: &str, dir: &Path, host: &str) -> Agent {
        let socket = dir.join(format!("{host}.sock"));
        let token = dir.join(format!("{host}.token"));
        let child = Command::new("ip")
            .args(["netns", "exec", netns, "sh", "-c"])
            .arg(format!("{PRIVATE_STATE} && exec \"$@\""))
            .args(["sh", RTEMU, "serve", "--socket"])
            .arg(&socket)
            .args(["--listen", &format!("{address}:{PORT}"), "--token-file"])
            .arg(&token)
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let agent = Agent {
            child,
            socket: Target::Unix(socket),
        };
        let started = Instant::now();
        while request(&agent.socket, "GET", "/v1/vnis", &[], None, WAIT).is_err() {
            assert!(started.elapsed() < WAIT, "agent {host} did not answer");
            std::thread::sleep(Duration::from_millis(20));
        }
        agent
    }

    fn pid(&self) -> String {
        self.child.id().to_string()
    }

    /// `method path` over the agent's socket: the status and the JSON body.
    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let body = body.map(|b| b.to_string());
        let r = request(
            &self.socket,
            method,
            path,
            &[],
            body.as_deref().map(str::as_bytes),
            WAIT,
        )
        .unwrap();
        (r.status, r.json().unwrap_or(Value::Null))
    }

    /// Runs `argv` in node `node` of lab `lab`: its exit code and output.
    fn exec(&self, lab: &str, node: &str, argv: &[&str]) -> (i64, String) {
        let (status, reply) = self.call(
            "POST",
            &format!("/v1/labs/{lab}/nodes/{node}/exec"),
            Some(&json!({ "argv": argv })),
        );
        assert_eq!(status, 200, "{reply}");
        (
            reply["status"].as_i64().unwrap_or(-1),
            reply["stdout"].as_str().unwrap_or_default().to_owned(),
        )
    }

    /// What of any lab is left on this agent's host.
    fn leftovers(&self) -> Vec<String> {
        let pid = self.pid();
        settled_leftovers(&["nsenter", "-t", &pid, "-m", "-n"])
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        // Its engines run in their own process groups: take the labs down first.
        if let Ok(r) = request(&self.socket, "GET", "/v1/labs", &[], None, WAIT) {
            let labs: Vec<Value> = r.json().unwrap_or_default();
            for l in labs {
                let path = format!("/v1/labs/{}", l["name"].as_str().unwrap_or_default());
                let _ = request(&self.socket, "DELETE", &path, &[], None, WAIT);
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The coordinator: `rtemu ARGS` in namespace `netns`, with `state` as its `/run/rtemu`.
fn coordinate(netns: &str, state: &Path, args: &[&str]) -> Output {
    coordinator(netns, state, args).output().unwrap()
}

/// The command [`coordinate`] runs.
fn coordinator(netns: &str, state: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", netns, "sh", "-c"])
        .arg("mkdir -p /run/rtemu && mount --bind \"$1\" /run/rtemu && shift && exec \"$@\"")
        .arg("sh")
        .arg(state)
        .arg(RTEMU)
        .args(args);
    cmd
}

/// h1 and h2 running agents, and a third host namespace (`hosts.names[2]`), the coordinator's
/// machine, with a
/// state directory of its own and the agents' credentials (`hosts.toml` in the test's
/// directory). The agents go first when dropped, then the namespaces, then the directory.
struct Cluster {
    agents: Vec<Agent>,
    hosts: Hosts,
    state: PathBuf,
    tmp: TempDir,
}

impl Cluster {
    fn new(tag: &str) -> Cluster {
        let tmp = TempDir::new(&format!("mh-{tag}"));
        let dir = tmp.0.as_path();
        let hosts = Hosts::new(tag, 3);
        let state = dir.join("coordinator-run");
        std::fs::DirBuilder::new()
            .mode(0o755)
            .create(&state)
            .unwrap();
        let agents = (0..2)
            .map(|i| {
                let host = format!("h{}", i + 1);
                Agent::start(&hosts.names[i], &host_address(i), dir, &host)
            })
            .collect();
        write_credentials(dir, &dir.join("hosts.toml"));
        Cluster {
            agents,
            hosts,
            state,
            tmp,
        }
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn rtemu_up_spreads_a_lab_over_agents_undoes_a_failed_up_and_down_cleans_every_host() {
    if !root_or_skip("rtemu_up_over_agents", "creates network namespaces") {
        return;
    }
    let mut cluster = Cluster::new("a");
    let Cluster {
        agents,
        hosts,
        state,
        tmp,
    } = &mut cluster;
    let (dir, coord) = (tmp.0.as_path(), hosts.names[2].as_str());
    let creds_path = dir.join("hosts.toml");
    let creds = creds_path.to_str().unwrap();
    let tag = std::process::id() % 100_000;
    let lab_file = |lab: &str, netem| {
        let path = dir.join(format!("{lab}.toml"));
        std::fs::write(&path, chain(lab, netem, Some(PORT))).unwrap();
        path.display().to_string()
    };

    // Up across both hosts, a delay 10ms link between them (its engine on h1).
    let lab = format!("mhc{tag}");
    let file = lab_file(&lab, Some("delay 10ms"));
    let up = coordinate(coord, state, &["up", &file, "--credentials", creds]);
    assert!(up.status.success(), "{}", stderr(&up));
    assert!(
        stderr(&up).contains(&format!("lab {lab} is up on h1, h2 (VNIs: wan 1048576)")),
        "{}",
        stderr(&up)
    );
    let failed = ping_all(&CHAIN_PLACEMENT, |h, node, argv| {
        agents[h].exec(&lab, node, argv)
    });
    assert_eq!(failed, Vec::<String>::new());
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            &hosts.names[0],
            "ping",
            "-c",
            "20",
            "-i",
            "0.02",
        ])
        .arg(host_address(1))
        .output()
        .unwrap();
    let underlay = String::from_utf8_lossy(&out.stdout);
    let (code, across) = agents[0].exec(&lab, "b", &["ping", "-c", "20", "-i", "0.05", "c"]);
    assert_eq!(code, 0, "{across}");
    check_delay_across("rtemu up over agents", &underlay, &across);

    // A host that fails its part: lab `taken` already runs on h2 alone. The part built on h1
    // is taken down again, and h2's own lab is left alone.
    let taken = format!("mht{tag}");
    let taken_file = lab_file(&taken, None);
    let part = json!({"topology": std::fs::read_to_string(&taken_file).unwrap(),
                      "file": "elsewhere.toml", "host": "h2",
                      "stitching": {"port": 4789, "vnis": {"wan": 2_000_000}}});
    let (status, reply) = agents[1].call("POST", "/v1/parts", Some(&part));
    assert_eq!(status, 201, "{reply}");
    let failed = coordinate(coord, state, &["up", &taken_file, "--credentials", creds]);
    assert!(!failed.status.success());
    let e = stderr(&failed);
    assert!(e.contains("the parts built on h1 were taken down"), "{e}");
    assert!(
        e.contains(&format!("host `h2`: lab `{taken}` already exists")),
        "{e}"
    );
    let (status, _) = agents[0].call("GET", &format!("/v1/labs/{taken}"), None);
    assert_eq!(status, 404);
    let (status, _) = agents[1].call("DELETE", &format!("/v1/labs/{taken}"), None);
    assert_eq!(status, 200);

    // h2's agent is gone (its part went with its private namespaces): `down` cleans h1,
    // names h2 and keeps it in the record.
    drop(agents.pop());
    let down = coordinate(coord, state, &["down", &lab, "--credentials", creds]);
    assert!(!down.status.success());
    let e = stderr(&down);
    let unreachable = format!("host `h2`: its agent at {}:{PORT}", host_address(1));
    assert!(
        e.contains(&format!(
            "lab `{lab}` is down on h1, but not everywhere: {unreachable}"
        )),
        "{e}"
    );
    assert_eq!(agents[0].leftovers(), Vec::<String>::new());
    let records: Vec<_> = std::fs::read_dir(&*state).unwrap().collect();
    assert_eq!(records.len(), 1);

    // `up` of another lab names the host that is gone and builds nothing anywhere.
    let gone = format!("mhg{tag}");
    let gone_file = lab_file(&gone, None);
    let failed = coordinate(coord, state, &["up", &gone_file, "--credentials", creds]);
    assert!(!failed.status.success());
    let e = stderr(&failed);
    assert!(e.contains(&unreachable), "{e}");
    assert_eq!(agents[0].leftovers(), Vec::<String>::new());

    // h2 back (a new agent, a new token): `down` again finishes, and nothing is left anywhere.
    agents.push(Agent::start(&hosts.names[1], &host_address(1), dir, "h2"));
    write_credentials(dir, &creds_path);
    let down = coordinate(coord, state, &["down", &lab, "--credentials", creds]);
    assert!(down.status.success(), "{}", stderr(&down));
    assert!(
        stderr(&down).contains(&format!("lab {lab} is down on h2")),
        "{}",
        stderr(&down)
    );
    for a in agents.iter() {
        assert_eq!(a.leftovers(), Vec::<String>::new());
    }
    let records: Vec<_> = std::fs::read_dir(&*state).unwrap().collect();
    assert_eq!(records.len(), 0);
}

#[test]
fn ls_stats_link_set_and_capture_work_lab_wide_and_a_host_that_dies_shows_degraded() {
    if !root_or_skip("lab_wide_views", "creates network namespaces") {
        return;
    }
    let mut cluster = Cluster::new("w");
    let Cluster {
        agents,
        hosts,
        state,
        tmp,
    } = &mut cluster;
    let (dir, coord) = (tmp.0.as_path(), hosts.names[2].as_str());
    let creds_path = dir.join("hosts.toml");
    let creds = creds_path.to_str().unwrap();
    let rtemu = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--credentials", creds]);
        coordinate(coord, state, &all)
    };
    let lab = format!("mhw{}", std::process::id() % 100_000);
    let file = dir.join(format!("{lab}.toml"));
    std::fs::write(&file, chain(&lab, Some("delay 10ms"), Some(PORT))).unwrap();
    let file = file.to_str().unwrap();
    let up = rtemu(&["up", file]);
    assert!(up.status.success(), "{}", stderr(&up));
    // --replace takes the lab down on both hosts first, then brings it up again (new VNIs:
    // the kernel frees the old ones a moment later).
    let up = rtemu(&["up", "--replace", file]);
    assert!(
        stderr(&up).contains(&format!("lab {lab} is up on h1, h2 (VNIs: wan 1048577)")),
        "{}",
        stderr(&up)
    );

    // ls on the coordinator: the lab once, every node with its host.
    let ls = rtemu(&["ls"]);
    let text = String::from_utf8_lossy(&ls.stdout);
    assert!(ls.status.success(), "{}", stderr(&ls));
    let agents_at = format!(
        "up on h1 at {}:{PORT}, h2 at {}:{PORT}",
        host_address(0),
        host_address(1)
    );
    assert!(
        text.starts_with(&format!("lab {lab} ({agents_at}) from {file}\n")),
        "{text}"
    );
    for (node, host) in CHAIN_PLACEMENT {
        let line = format!("  node {node} on h{}  (netns rtemu-{lab}-{node})", host + 1);
        assert!(text.contains(&line), "{line} in {text}");
    }
    let ls = rtemu(&["ls", &lab, "--json"]);
    let listed: Value = serde_json::from_slice(&ls.stdout).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    let view = &listed[0];
    assert_eq!(view["status"], "up");
    let node = |name: &str| {
        view["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(
        (node("b")["host"].clone(), node("c")["host"].clone()),
        (json!("h1"), json!("h2"))
    );
    let wan_if = |n: &str| {
        let ifs = node(n)["interfaces"].as_array().unwrap().clone();
        let i = ifs.iter().find(|i| i["segment"] == "wan").unwrap();
        format!("{n}:{}", i["name"].as_str().unwrap())
    };

    // stats: the cross-host link's counters, from its engine on h1, rise with pings.
    let delivered = || {
        let out = rtemu(&["stats", &lab, "--json"]);
        assert!(out.status.success(), "{}", stderr(&out));
        let stats: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(stats["engines"][0]["host"], "h1", "{stats}");
        let wan: Vec<u64> = stats["directions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["link"] == "wan")
            .map(|d| d["delivered"].as_u64().unwrap())
            .collect();
        assert_eq!(wan.len(), 2, "{stats}");
        wan
    };
    let before = delivered();
    let (code, out) = agents[1].exec(&lab, "c", &["ping", "-c", "5", "-i", "0.05", "b"]);
    assert_eq!(code, 0, "{out}");
    let after = delivered();
    for (b, a) in before.iter().zip(&after) {
        assert!(
            a - b >= 5,
            "wan delivered {before:?} before 5 pings, {after:?} after"
        );
    }
    let table = rtemu(&["stats", &lab]);
    assert!(String::from_utf8_lossy(&table.stdout).contains("wan"));

    // link set through the engine host's agent: delay 30ms each way, measured from b.
    // (The netem words come last: they take every argument after them.)
    let set = coordinate(
        coord,
        state,
        &[
            "link",
            "set",
            "--credentials",
            creds,
            "--lab",
            &lab,
            "wan",
            "delay",
            "30ms",
        ],
    );
    assert!(set.status.success(), "{}", stderr(&set));
    let (code, out) = agents[0].exec(&lab, "b", &["ping", "-c", "5", "-i", "0.1", "c"]);
    assert_eq!(code, 0, "{out}");
    let rtt = median_rtt(&out);
    rtemu_testutil::say(&format!(
        "lab-wide link set delay 30ms: b → c median RTT {rtt:.3} ms"
    ));
    assert!(
        (60.0..61.0).contains(&rtt),
        "RTT {rtt} ms after delay 30ms each way"
    );
    let unknown = rtemu(&["link", "down", "--lab", &lab, "nope"]);
    assert!(!unknown.status.success());
    assert!(
        stderr(&unknown).contains("the engine carries no link `nope`"),
        "{}",
        stderr(&unknown)
    );

    // capture across hosts: both ends of wan, b on h1 and c on h2, in one file.
    let pcap = dir.join("wan.pcapng");
    let pcap_path = pcap.to_str().unwrap();
    let args = [
        "capture",
        "--lab",
        &lab,
        "wan",
        "--duration",
        "1.5",
        "-w",
        pcap_path,
    ];
    let capture = coordinator(coord, state, &args)
        .args(["--credentials", creds])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let (code, out) = agents[0].exec(&lab, "b", &["ping", "-c", "3", "-i", "0.1", "c"]);
    assert_eq!(code, 0, "{out}");
    let done = capture.wait_with_output().unwrap();
    assert!(done.status.success(), "{}", stderr(&done));
    let file = rtemu_topo::pcapng::read(&std::fs::read(&pcap).unwrap()).unwrap();
    assert_eq!(file.interfaces, [wan_if("b"), wan_if("c")]);
    for i in 0..2 {
        let n = file.packets.iter().filter(|p| p.interface == i).count();
        assert!(
            n >= 6,
            "{n} packets on {} (3 pings each way)",
            file.interfaces[i as usize]
        );
    }
    assert!(file.packets.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns));

    // h2's agent dies: ls shows the lab DEGRADED, naming h2 and why.
    drop(agents.pop());
    let ls = rtemu(&["ls"]);
    assert!(ls.status.success(), "{}", stderr(&ls));
    let text = String::from_utf8_lossy(&ls.stdout);
    rtemu_testutil::say(&format!("rtemu ls with h2's agent gone:\n{text}"));
    let gone = format!("host `h2`: its agent at {}:{PORT}", host_address(1));
    assert!(
        text.starts_with(&format!("lab {lab} (DEGRADED: {gone}")),
        "{text}"
    );
    let down = rtemu(&["down", &lab]);
    assert!(!down.status.success());
    assert_eq!(agents[0].leftovers(), Vec::<String>::new());
}

/// Writes the credentials file `path` (mode 0600) from the tokens the agents of h1 and h2
/// wrote in `dir`.
fn write_credentials(dir: &Path, path: &Path) {
    let mut text = String::new();
    for h in ["h1", "h2"] {
        let token = std::fs::read_to_string(dir.join(format!("{h}.token"))).unwrap();
        text += &format!("{h} = \"{}\"\n", token.trim());
    }
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}
