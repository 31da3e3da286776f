//! A lab across hosts, driven as a user would: each "host" (a network namespace on an underlay,
//! see `rtemu_testutil::multihost`) runs `rtemu serve --listen` as its agent, with its
//! own `/run/rtemu`, `/run/netns` and `/etc/netns`; `rtemu up FILE --credentials F` and
//! `rtemu down LAB` run as the coordinator in a third host namespace, with a state directory
//! of their own (the cluster of `rtemu_bench::cluster`, which `rtemu-bench topo --hosts` runs
//! on too). The test reaches each agent over its Unix socket to run commands in nodes.
//! The hosts of the test that measures delay are the nodes of an ordinary rtemu lab (`rtemu up`
//! of its own) whose impaired links give the underlay a delay, so the model's delay is shown to
//! add to it.
//!
//! Needs root; without it, prints why and passes, unless `RTEMU_REQUIRE_ROOT=1` (CI). Guards
//! take every lab down, end the agents and remove the namespaces whatever happens.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use rtemu_bench::cluster::{Agent, Cluster, Coordinator, PORT};
use rtemu_testutil::multihost::{
    chain, check_delay_across, host_address, median_rtt, ping_all, serial, settled_leftovers,
    Hosts, LabRunner, CHAIN_PLACEMENT,
};
use rtemu_testutil::{root_or_skip, TempDir};
use serde_json::{json, Value};

const RTEMU: &str = env!("CARGO_BIN_EXE_rtemu");

/// Runs `argv` in node `node` of lab `lab` through `agent`: its exit code and output.
fn exec(agent: &Agent, lab: &str, node: &str, argv: &[&str]) -> (i64, String) {
    let reply = agent
        .exec(lab, node, argv, Duration::from_secs(60))
        .unwrap();
    (reply.status.map_or(-1, i64::from), reply.stdout)
}

/// `rtemu capture ARGS` as the coordinator runs it, its stderr piped.
fn spawn_capture(cluster: &Cluster, args: &[&str], creds: &str) -> std::process::Child {
    cluster
        .coordinate(args)
        .args(["--credentials", creds])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Three pings from b (on h1) to c (on h2) across wan, once a capture had time to start.
fn ping_b_to_c(cluster: &Cluster, lab: &str) {
    std::thread::sleep(Duration::from_millis(300));
    let (code, out) = exec(
        &cluster.agents[0],
        lab,
        "b",
        &["ping", "-c", "3", "-i", "0.1", "c"],
    );
    assert_eq!(code, 0, "{out}");
}

/// The capture of wan in the pcapng file `pcap`: both ends (`ends`, `NODE:IF`), each with
/// the three pings each way.
fn wan_pings_in(pcap: &[u8], ends: &[String]) -> rtemu_topo::pcapng::Capture {
    let file = rtemu_topo::pcapng::read(pcap).unwrap();
    assert_eq!(file.interfaces, ends);
    for i in 0..2 {
        let n = file.packets.iter().filter(|p| p.interface == i).count();
        assert!(
            n >= 6,
            "{n} packets on {} (3 pings each way)",
            file.interfaces[i as usize]
        );
    }
    file
}

/// What of any lab is left on `agent`'s host.
fn leftovers(agent: &Agent) -> Vec<String> {
    let pid = agent.pid().to_string();
    settled_leftovers(&["nsenter", "-t", &pid, "-m", "-n"])
}

/// The coordinator's `rtemu ARGS` in `cluster`, run to the end.
fn coordinate(cluster: &Cluster, args: &[&str]) -> Output {
    cluster.coordinate(args).output().unwrap()
}

/// The lab of a delayed underlay, run by `rtemu up` and `rtemu down` on this machine, its
/// topology file in `dir`.
struct Binary {
    dir: PathBuf,
}

impl LabRunner for Binary {
    fn up(&mut self, text: &str) {
        let file = self.dir.join("underlay.toml");
        std::fs::write(&file, text).unwrap();
        let up = Command::new(RTEMU).arg("up").arg(&file).output().unwrap();
        assert!(up.status.success(), "underlay: {}", stderr(&up));
    }

    fn down(&mut self, name: &str) {
        let _ = Command::new(RTEMU).args(["down", name]).output();
    }
}

/// Agents on h1 and h2 and the coordinator on h3, the hosts the nodes of an rtemu lab
/// (`rtemu up`) whose links to its router take 500 µs each way: 2 ms of underlay round trip
/// between two hosts. Files in `dir`.
fn delayed_cluster(tag: &str, dir: &Path) -> Cluster {
    let runner = Box::new(Binary {
        dir: dir.to_owned(),
    });
    let hosts = Hosts::delayed(tag, 3, 500, runner);
    Cluster::on_hosts(RTEMU.as_ref(), hosts, 2, dir).unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn rtemu_up_spreads_a_lab_over_agents_undoes_a_failed_up_and_down_cleans_every_host() {
    if !root_or_skip("rtemu_up_over_agents", "creates network namespaces") {
        return;
    }
    let _serial = serial();
    let tmp = TempDir::new("mh-a");
    let dir = tmp.0.as_path();
    // h1 and h2 run agents; a third namespace is the coordinator's machine.
    let mut cluster = delayed_cluster("a", dir);
    let creds_path = cluster.credentials();
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
    let up = coordinate(&cluster, &["up", &file, "--credentials", creds]);
    assert!(up.status.success(), "{}", stderr(&up));
    assert!(
        stderr(&up).contains(&format!("lab {lab} is up on h1, h2 (VNIs: wan 1048576)")),
        "{}",
        stderr(&up)
    );
    let failed = ping_all(&CHAIN_PLACEMENT, |h, node, argv| {
        exec(&cluster.agents[h], &lab, node, argv)
    });
    assert_eq!(failed, Vec::<String>::new());
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            &cluster.hosts.names[0],
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
    let underlay_ms = cluster.hosts.check_underlay(&underlay);
    let (code, across) = exec(
        &cluster.agents[0],
        &lab,
        "b",
        &["ping", "-c", "20", "-i", "0.05", "c"],
    );
    assert_eq!(code, 0, "{across}");
    check_delay_across("rtemu up over agents", &underlay, &across);
    // h1's engine reports the underlay's round trip beside the link, as measured at up.
    let (status, stats) = cluster.agents[0]
        .call("GET", &format!("/v1/labs/{lab}/stats"), None)
        .unwrap();
    assert_eq!(status, 200, "{stats}");
    let shown = stats["directions"][0]["underlay"]["rtt_ns"]
        .as_f64()
        .unwrap_or_else(|| panic!("no underlay in {stats}"))
        / 1e6;
    assert!(
        (shown - underlay_ms).abs() <= 0.5,
        "underlay RTT shown {shown:.3} ms, pinged {underlay_ms:.3} ms"
    );
    // The coordinator's lab-wide ls shows it too, from the parts' views.
    let ls = coordinate(&cluster, &["ls", &lab, "--credentials", creds]);
    let text = String::from_utf8_lossy(&ls.stdout);
    assert!(
        text.contains("  link wan crosses hosts: underlay h1↔h2 RTT "),
        "{text}"
    );
    let ls = coordinate(&cluster, &["ls", &lab, "--json", "--credentials", creds]);
    let listed: Value = serde_json::from_slice(&ls.stdout).unwrap();
    let wan = listed[0]["links"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == "wan")
        .unwrap()
        .clone();
    let listed_ms = wan["underlay"]["rtt_ns"].as_f64().unwrap_or(f64::NAN) / 1e6;
    assert!(
        (listed_ms - underlay_ms).abs() <= 0.5,
        "lab-wide ls: underlay RTT {listed_ms:.3} ms, pinged {underlay_ms:.3} ms: {wan}"
    );

    // A host that fails its part: lab `taken` already runs on h2 alone. The part built on h1
    // is taken down again, and h2's own lab is left alone.
    let taken = format!("mht{tag}");
    let taken_file = lab_file(&taken, None);
    let part = json!({"topology": std::fs::read_to_string(&taken_file).unwrap(),
                      "file": "elsewhere.toml", "host": "h2",
                      "stitching": {"port": 4789, "vnis": {"wan": 2_000_000}}});
    let (status, reply) = cluster.agents[1]
        .call("POST", "/v1/parts", Some(&part))
        .unwrap();
    assert_eq!(status, 201, "{reply}");
    let failed = coordinate(&cluster, &["up", &taken_file, "--credentials", creds]);
    assert!(!failed.status.success());
    let e = stderr(&failed);
    assert!(e.contains("the parts built on h1 were taken down"), "{e}");
    assert!(
        e.contains(&format!("host `h2`: lab `{taken}` already exists")),
        "{e}"
    );
    let (status, _) = cluster.agents[0]
        .call("GET", &format!("/v1/labs/{taken}"), None)
        .unwrap();
    assert_eq!(status, 404);
    let (status, _) = cluster.agents[1]
        .call("DELETE", &format!("/v1/labs/{taken}"), None)
        .unwrap();
    assert_eq!(status, 200);

    // h2's agent is gone (its part went with its private namespaces): `down` cleans h1,
    // names h2 and keeps it in the record.
    drop(cluster.agents.pop());
    let down = coordinate(&cluster, &["down", &lab, "--credentials", creds]);
    assert!(!down.status.success());
    let e = stderr(&down);
    let unreachable = format!("host `h2`: its agent at {}:{PORT}", host_address(1));
    assert!(
        e.contains(&format!(
            "lab `{lab}` is down on h1, but not everywhere: {unreachable}"
        )),
        "{e}"
    );
    assert_eq!(leftovers(&cluster.agents[0]), Vec::<String>::new());
    let records: Vec<_> = std::fs::read_dir(cluster.state()).unwrap().collect();
    assert_eq!(records.len(), 1);

    // `up` of another lab names the host that is gone and builds nothing anywhere.
    let gone = format!("mhg{tag}");
    let gone_file = lab_file(&gone, None);
    let failed = coordinate(&cluster, &["up", &gone_file, "--credentials", creds]);
    assert!(!failed.status.success());
    let e = stderr(&failed);
    assert!(e.contains(&unreachable), "{e}");
    assert_eq!(leftovers(&cluster.agents[0]), Vec::<String>::new());

    // h2 back (a new agent, a new token): `down` again finishes, and nothing is left anywhere.
    let h2 = cluster.start_agent(1).unwrap();
    cluster.agents.push(h2);
    cluster.write_credentials().unwrap();
    let down = coordinate(&cluster, &["down", &lab, "--credentials", creds]);
    assert!(down.status.success(), "{}", stderr(&down));
    assert!(
        stderr(&down).contains(&format!("lab {lab} is down on h2")),
        "{}",
        stderr(&down)
    );
    for a in &cluster.agents {
        assert_eq!(leftovers(a), Vec::<String>::new());
    }
    let records: Vec<_> = std::fs::read_dir(cluster.state()).unwrap().collect();
    assert_eq!(records.len(), 0);
}

#[test]
fn ls_stats_link_set_and_capture_work_lab_wide_and_a_host_that_dies_shows_degraded() {
    if !root_or_skip("lab_wide_views", "creates network namespaces") {
        return;
    }
    let _serial = serial();
    let tmp = TempDir::new("mh-w");
    let dir = tmp.0.as_path();
    let mut cluster = Cluster::start(RTEMU.as_ref(), "w", 2, dir).unwrap();
    let creds_path = cluster.credentials();
    let creds = creds_path.to_str().unwrap();
    let rtemu = |cluster: &Cluster, args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--credentials", creds]);
        coordinate(cluster, &all)
    };
    let lab = format!("mhw{}", std::process::id() % 100_000);
    let file = dir.join(format!("{lab}.toml"));
    // c–d impaired too, so h2 runs an engine of its own.
    let text = chain(&lab, Some("delay 10ms"), Some(PORT)).replace(
        "endpoints = [\"c\", \"d\"]\n",
        "endpoints = [\"c\", \"d\"]\nnetem = \"delay 1ms\"\n",
    );
    std::fs::write(&file, text).unwrap();
    let file = file.to_str().unwrap();
    let up = rtemu(&cluster, &["up", file]);
    assert!(up.status.success(), "{}", stderr(&up));
    // --replace takes the lab down on both hosts first, then brings it up again (new VNIs:
    // the kernel frees the old ones a moment later).
    let up = rtemu(&cluster, &["up", "--replace", file]);
    assert!(
        stderr(&up).contains(&format!("lab {lab} is up on h1, h2 (VNIs: wan 1048577)")),
        "{}",
        stderr(&up)
    );

    // ls on the coordinator: the lab once, every node with its host.
    let ls = rtemu(&cluster, &["ls"]);
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
        let line = format!("  node {node} on h{}  (netns rtemu-{lab}.{node})", host + 1);
        assert!(text.contains(&line), "{line} in {text}");
    }
    // Each engine host's release threads, named by host: wan's on h1, c-d's on h2.
    let threads: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(": release thread "))
        .collect();
    assert_eq!(threads.len(), 2, "{text}");
    assert!(
        threads[0].starts_with("  h1: release thread 0 ") && threads[0].ends_with(": wan"),
        "{text}"
    );
    assert!(
        threads[1].starts_with("  h2: release thread 0 ") && threads[1].ends_with(": c-d"),
        "{text}"
    );
    let ls = rtemu(&cluster, &["ls", &lab, "--json"]);
    let listed: Value = serde_json::from_slice(&ls.stdout).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    let view = &listed[0];
    assert_eq!(view["status"], "up");
    let engines: Vec<(&str, &str, &str)> = view["engines"]
        .as_array()
        .unwrap_or_else(|| panic!("no engines in {view}"))
        .iter()
        .map(|e| {
            let t = &e["threads"][0];
            let (policy, link) = (t["policy"].as_str(), t["links"][0].as_str());
            (e["host"].as_str().unwrap(), link.unwrap(), policy.unwrap())
        })
        .collect();
    assert_eq!(
        engines.iter().map(|e| (e.0, e.1)).collect::<Vec<_>>(),
        [("h1", "wan"), ("h2", "c-d")],
        "{view}"
    );
    assert!(engines.iter().all(|e| e.2.starts_with("SCHED_")), "{view}");
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

    // From h2, a host of the lab that neither coordinates it nor runs `wan`'s engine: its
    // part's state holds the whole topology, so with the credentials it sees the lab whole,
    // and the link's counters from h1's engine.
    let on_h2 = |args: &[&str]| {
        let pid = cluster.agents[1].pid().to_string();
        let out = Command::new("nsenter")
            .args(["-t", &pid, "-m", "-n", RTEMU])
            .args(args)
            .args(["--credentials", creds])
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let text = on_h2(&["ls", &lab]);
    assert!(
        text.starts_with(&format!("lab {lab} ({agents_at})")),
        "{text}"
    );
    for (node, host) in CHAIN_PLACEMENT {
        let line = format!("  node {node} on h{}  (netns rtemu-{lab}.{node})", host + 1);
        assert!(text.contains(&line), "{line} on h2 in {text}");
    }
    let stats: Value = serde_json::from_str(&on_h2(&["stats", &lab, "--json"])).unwrap();
    assert_eq!(stats["engines"][0]["host"], "h1", "{stats}");

    // stats: the cross-host link's counters, from its engine on h1, rise with pings.
    let delivered = || {
        let out = rtemu(&cluster, &["stats", &lab, "--json"]);
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
    let (code, out) = exec(
        &cluster.agents[1],
        &lab,
        "c",
        &["ping", "-c", "5", "-i", "0.05", "b"],
    );
    assert_eq!(code, 0, "{out}");
    let after = delivered();
    for (b, a) in before.iter().zip(&after) {
        assert!(
            a - b >= 5,
            "wan delivered {before:?} before 5 pings, {after:?} after"
        );
    }
    let table = rtemu(&cluster, &["stats", &lab]);
    assert!(String::from_utf8_lossy(&table.stdout).contains("wan"));

    // link set through the engine host's agent: delay 30ms each way, measured from b.
    // (The netem words come last: they take every argument after them.)
    let set = coordinate(
        &cluster,
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
    let (code, out) = exec(
        &cluster.agents[0],
        &lab,
        "b",
        &["ping", "-c", "5", "-i", "0.1", "c"],
    );
    assert_eq!(code, 0, "{out}");
    let rtt = median_rtt(&out);
    rtemu_testutil::say(&format!(
        "lab-wide link set delay 30ms: b → c median RTT {rtt:.3} ms"
    ));
    assert!(
        (60.0..61.0).contains(&rtt),
        "RTT {rtt} ms after delay 30ms each way"
    );
    let unknown = rtemu(&cluster, &["link", "down", "--lab", &lab, "nope"]);
    assert!(!unknown.status.success());
    assert!(
        stderr(&unknown).contains("the engine carries no link `nope`"),
        "{}",
        stderr(&unknown)
    );

    // capture across hosts until Ctrl-C: SIGINT to the coordinator's rtemu (`ip netns exec`
    // and `sh` exec it, so the child's pid is rtemu's) ends each agent's capture, and the file
    // keeps what both hosts sent. The agents' open files come back to what they were: no
    // capture socket nor connection is left (and the capture below still works).
    let open_files = |a: &Agent| {
        std::fs::read_dir(format!("/proc/{}/fd", a.pid()))
            .unwrap()
            .count()
    };
    let before: Vec<usize> = cluster.agents.iter().map(open_files).collect();
    let pcap = dir.join("wan-ctrl-c.pcapng");
    let pcap_path = pcap.to_str().unwrap();
    let args = ["capture", "--lab", &lab, "wan", "-w", pcap_path];
    let mut capture = spawn_capture(&cluster, &args, creds);
    let mut said = BufReader::new(capture.stderr.take().unwrap());
    let mut first = String::new();
    said.read_line(&mut first).unwrap();
    assert!(first.contains("across hosts (Ctrl-C stops)"), "{first}");
    let comm = std::fs::read_to_string(format!("/proc/{}/comm", capture.id())).unwrap();
    assert_eq!(comm.trim(), "rtemu");
    ping_b_to_c(&cluster, &lab);
    let during: Vec<usize> = cluster.agents.iter().map(open_files).collect();
    assert!(
        during.iter().zip(&before).all(|(d, b)| d > b),
        "each agent's capture holds files: {during:?} (before {before:?})"
    );
    let sent = std::time::Instant::now();
    let kill = Command::new("kill")
        .args(["-INT", &capture.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let status = capture.wait().unwrap();
    let took = sent.elapsed();
    let mut rest = String::new();
    said.read_to_string(&mut rest).unwrap();
    assert!(status.success(), "{rest}");
    let file = wan_pings_in(&std::fs::read(&pcap).unwrap(), &[wan_if("b"), wan_if("c")]);
    assert!(
        rest.contains(&format!("{} packets written", file.packets.len())),
        "{rest}"
    );
    let settled = std::time::Instant::now();
    let above = |now: &[usize]| now.iter().zip(&before).any(|(n, b)| n > b);
    while above(&cluster.agents.iter().map(open_files).collect::<Vec<_>>()) {
        assert!(
            settled.elapsed() < Duration::from_secs(10),
            "the agents' open files stay {:?} (before the capture {before:?})",
            cluster.agents.iter().map(open_files).collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    rtemu_testutil::say(&format!(
        "capture across hosts until Ctrl-C: {} packets, exit {took:?} after SIGINT; agents' \
         open files {before:?} before, {during:?} during, back in {:?}",
        file.packets.len(),
        settled.elapsed()
    ));

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
    let capture = spawn_capture(&cluster, &args, creds);
    ping_b_to_c(&cluster, &lab);
    let done = capture.wait_with_output().unwrap();
    assert!(done.status.success(), "{}", stderr(&done));
    let file = wan_pings_in(&std::fs::read(&pcap).unwrap(), &[wan_if("b"), wan_if("c")]);
    assert!(file.packets.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns));

    // h2's agent dies: ls shows the lab DEGRADED, naming h2 and why.
    drop(cluster.agents.pop());
    let ls = rtemu(&cluster, &["ls"]);
    assert!(ls.status.success(), "{}", stderr(&ls));
    let text = String::from_utf8_lossy(&ls.stdout);
    rtemu_testutil::say(&format!("rtemu ls with h2's agent gone:\n{text}"));
    let gone = format!("host `h2`: its agent at {}:{PORT}", host_address(1));
    assert!(
        text.starts_with(&format!("lab {lab} (DEGRADED: {gone}")),
        "{text}"
    );
    // stats: wan's from h1's engine, and c-d named as missing with h2; a failed reading.
    let out = rtemu(&cluster, &["stats", &lab, "--json"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(&format!(
            "lab `{lab}` is degraded: no stats of c-d (engine on `h2`)"
        )),
        "{}",
        stderr(&out)
    );
    let stats: Value = serde_json::from_slice(&out.stdout).unwrap();
    let links: Vec<&str> = stats["directions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["link"].as_str().unwrap())
        .collect();
    assert_eq!(links, ["wan", "wan"], "{stats}");
    assert_eq!(stats["missing"][0]["links"], json!(["c-d"]), "{stats}");

    // `down` on h1, a host of the lab (not its coordinator): h1's part goes (with its
    // engine's final report, as on one machine) and h2, unreachable, is named.
    let pid = cluster.agents[0].pid().to_string();
    let down = Command::new("nsenter")
        .args([
            "-t",
            &pid,
            "-m",
            "-n",
            RTEMU,
            "down",
            &lab,
            "--credentials",
            creds,
        ])
        .output()
        .unwrap();
    assert!(!down.status.success());
    let said = stderr(&down);
    assert!(
        said.contains(&format!(
            "lab `{lab}` is down on h1, but not everywhere: {gone}"
        )),
        "{said}"
    );
    let report = String::from_utf8_lossy(&down.stdout);
    assert!(report.contains("wan"), "no final report of wan: {report}");
    assert_eq!(leftovers(&cluster.agents[0]), Vec::<String>::new());
    let down = rtemu(&cluster, &["down", &lab]);
    assert!(!down.status.success());
    assert!(stderr(&down).contains(&gone), "{}", stderr(&down));
}

/// The coordinator's API as these tests call it.
trait Calls {
    /// `method path` over its socket: the status, the raw body (to look for tokens in) and
    /// the body as JSON.
    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, String, Value);
}

impl Calls for Coordinator {
    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, String, Value) {
        let reply = self.request(method, path, body).unwrap();
        let text = reply.text();
        let json = serde_json::from_str(&text).unwrap_or(Value::Null);
        (reply.status, text, json)
    }
}

/// Node `node` of lab `lab` as `coordinator` lists it.
fn nodes_json(coordinator: &Coordinator, lab: &str, node: &str) -> Value {
    let (_, text, nodes) = coordinator.call("GET", &format!("/v1/labs/{lab}/nodes"), None);
    nodes
        .as_array()
        .unwrap_or_else(|| panic!("{text}"))
        .iter()
        .find(|n| n["name"] == node)
        .unwrap()
        .clone()
}

/// The median round trip of three pings from b (h1) to c (h2) across wan, ms.
fn rtt_b_to_c(cluster: &Cluster, lab: &str) -> f64 {
    let (code, out) = exec(
        &cluster.agents[0],
        lab,
        "b",
        &["ping", "-c", "3", "-i", "0.1", "c"],
    );
    assert_eq!(code, 0, "{out}");
    median_rtt(&out)
}

#[test]
fn the_api_of_a_coordinating_server_drives_a_lab_across_hosts_as_one_lab() {
    if !root_or_skip("api_across_hosts", "creates network namespaces") {
        return;
    }
    let _serial = serial();
    let tmp = TempDir::new("mh-api");
    let dir = tmp.0.as_path();
    let cluster = Cluster::start(RTEMU.as_ref(), "api", 2, dir).unwrap();
    let tokens: Vec<String> = (1..=2)
        .map(|h| std::fs::read_to_string(dir.join(format!("h{h}.token"))).unwrap())
        .map(|t| t.trim().to_owned())
        .collect();
    let coordinator = cluster.serve(None).unwrap();
    let lab = format!("mha{}", std::process::id() % 100_000);
    // c (on h2) says a word at start, for its logs.
    let topology = chain(&lab, Some("delay 10ms"), Some(PORT)).replace(
        "[nodes.c]\nhost = \"h2\"\n",
        "[nodes.c]\nhost = \"h2\"\nrun = [\"echo c on h2\"]\n",
    );
    assert!(topology.contains("echo c on h2"));
    let up_body = json!({ "topology": topology });
    let mut said = String::new();

    // Up across both hosts, shown as one lab with its hosts.
    let (status, text, up) = coordinator.call("POST", "/v1/labs", Some(&up_body));
    assert_eq!(status, 201, "{text}");
    said += &text;
    assert_eq!(up["status"], "up", "{text}");
    let hosts: Vec<(&str, &str)> = up["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["host"].as_str().unwrap(), h["status"].as_str().unwrap()))
        .collect();
    assert_eq!(hosts, [("h1", "up"), ("h2", "up")]);
    let (status, text, labs) = coordinator.call("GET", "/v1/labs", None);
    assert_eq!(status, 200, "{text}");
    said += &text;
    let listed: Vec<&Value> = labs
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["name"] == lab.as_str())
        .collect();
    assert_eq!(listed.len(), 1, "{text}");
    assert_eq!(listed[0]["hosts"].as_array().unwrap().len(), 2);
    let (_, text, nodes) = coordinator.call("GET", &format!("/v1/labs/{lab}/nodes"), None);
    said += &text;
    let placed: Vec<(&str, &str)> = nodes
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["name"].as_str().unwrap(), n["host"].as_str().unwrap()))
        .collect();
    assert_eq!(placed, [("a", "h1"), ("b", "h1"), ("c", "h2"), ("d", "h2")]);
    let (_, text, links) = coordinator.call("GET", &format!("/v1/labs/{lab}/links"), None);
    said += &text;
    assert!(
        links.as_array().unwrap().iter().any(|l| l["name"] == "wan"),
        "{text}"
    );

    // The same lab again is a conflict, and builds nothing more.
    let (status, text, _) = coordinator.call("POST", "/v1/labs", Some(&up_body));
    assert_eq!(status, 409, "{text}");
    said += &text;

    // Traffic across wan, then the stats of every engine host, merged.
    let before = rtt_b_to_c(&cluster, &lab);
    assert!(
        (20.0..60.0).contains(&before),
        "rtt {before} ms over delay 10ms each way"
    );
    let (status, text, stats) = coordinator.call("GET", &format!("/v1/labs/{lab}/stats"), None);
    assert_eq!(status, 200, "{text}");
    said += &text;
    let engines: Vec<&str> = stats["engines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["host"].as_str().unwrap())
        .collect();
    assert_eq!(engines, ["h1"], "{text}");
    let wan: Vec<&Value> = stats["directions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["link"] == "wan")
        .collect();
    assert_eq!(wan.len(), 2, "{text}");
    assert!(
        wan.iter().all(|d| d["delivered"].as_u64().unwrap() >= 3),
        "{text}"
    );
    assert!(stats["missing"].as_array().unwrap().is_empty(), "{text}");
    // The lab's view names the engine host's release threads too, and what each serves.
    let (status, text, view) = coordinator.call("GET", &format!("/v1/labs/{lab}"), None);
    assert_eq!(status, 200, "{text}");
    said += &text;
    assert_eq!(view["engines"][0]["host"], "h1", "{text}");
    assert_eq!(
        view["engines"][0]["threads"][0]["links"],
        json!(["wan"]),
        "{text}"
    );
    assert_eq!(view["engines"].as_array().unwrap().len(), 1, "{text}");

    // A change of wan goes to its engine's host (h1) and takes effect there.
    let set = json!({ "netem": "delay 60ms" });
    let (status, text, _) =
        coordinator.call("POST", &format!("/v1/labs/{lab}/links/wan/set"), Some(&set));
    assert_eq!(status, 200, "{text}");
    // Judged against the model, not against `before`, whose pings may have waited on a busy
    // machine: 60 ms each way is at least 120 ms (no copy leaves early), which the old 10 ms,
    // or the new delay on one way only, cannot give.
    let after = rtt_b_to_c(&cluster, &lab);
    assert!(
        after >= 119.0,
        "rtt {before} ms, then {after} ms after delay 60ms each way"
    );
    // The request's faults are 4xx, named; the agent's refusal is relayed as it is.
    for (path, body, want) in [
        ("links/nope/set", json!({ "netem": "delay 1ms" }), 404),
        ("links/wan/set", json!({ "netem": "delay lots" }), 400),
        ("links/wan/schedule", json!({ "changes": [] }), 400),
    ] {
        let (status, text, _) =
            coordinator.call("POST", &format!("/v1/labs/{lab}/{path}"), Some(&body));
        assert_eq!(status, want, "{path}: {text}");
        said += &text;
    }

    // A node's exec and logs go to its host: c is on h2, whose namespaces only h2's agent
    // sees; its ping of b crosses wan.
    let ping = json!({ "argv": ["ping", "-c", "1", "-W", "5", "b"] });
    let (status, text, ran) =
        coordinator.call("POST", &format!("/v1/labs/{lab}/nodes/c/exec"), Some(&ping));
    assert_eq!(status, 200, "{text}");
    assert_eq!(ran["status"], 0, "{text}");
    assert!(
        ran["stdout"].as_str().unwrap().contains("1 received"),
        "{text}"
    );
    let (status, text, logs) =
        coordinator.call("GET", &format!("/v1/labs/{lab}/nodes/c/logs?tail=5"), None);
    assert_eq!(status, 200, "{text}");
    assert!(
        logs["stdout"].as_str().unwrap().contains("c on h2"),
        "{text}"
    );
    for path in ["nodes/nope/exec", "nodes/nope/logs"] {
        let method = if path.ends_with("exec") {
            "POST"
        } else {
            "GET"
        };
        let (status, text, _) =
            coordinator.call(method, &format!("/v1/labs/{lab}/{path}"), Some(&ping));
        assert_eq!(status, 404, "{path}: {text}");
        assert!(text.contains("has no node `nope`"), "{text}");
    }

    // The kernel's counters of every node, each host's from its agent, in the topology's
    // order; c's end of wan counted the pings.
    let (status, text, counters) =
        coordinator.call("GET", &format!("/v1/labs/{lab}/counters"), None);
    assert_eq!(status, 200, "{text}");
    let counters = counters.as_array().unwrap();
    let mut nodes: Vec<&str> = counters
        .iter()
        .map(|c| c["node"].as_str().unwrap())
        .collect();
    nodes.dedup();
    assert_eq!(nodes, ["a", "b", "c", "d"], "{text}");
    let c_wan = counters
        .iter()
        .find(|c| c["node"] == "c" && c["segment"] == "wan")
        .unwrap();
    assert!(c_wan["rx_packets"].as_u64().unwrap() >= 4, "{text}");
    // Only the nodes named, asked of their hosts alone; a name the lab lacks is a 404.
    let (status, text, only) = coordinator.call(
        "GET",
        &format!("/v1/labs/{lab}/counters?node=c&node=a"),
        None,
    );
    assert_eq!(status, 200, "{text}");
    let mut named: Vec<&str> = only
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["node"].as_str().unwrap())
        .collect();
    named.dedup();
    assert_eq!(named, ["a", "c"], "{text}");
    let (status, text, _) =
        coordinator.call("GET", &format!("/v1/labs/{lab}/counters?node=nope"), None);
    assert_eq!(status, 404, "{text}");

    // A capture of wan's two ends, b's on h1 and c's on h2, as one pcapng file.
    let wan_if = |n: &str| {
        let node = nodes_json(&coordinator, &lab, n);
        let i = node["interfaces"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["segment"] == "wan")
            .unwrap()
            .clone();
        format!("{n}:{}", i["name"].as_str().unwrap())
    };
    let ends = [wan_if("b"), wan_if("c")];
    let captured = std::thread::scope(|s| {
        let capture = s.spawn(|| {
            let path = format!("/v1/labs/{lab}/capture?target=wan&duration=1.5");
            coordinator.request("GET", &path, None).unwrap()
        });
        ping_b_to_c(&cluster, &lab);
        capture.join().unwrap()
    });
    assert_eq!(captured.status, 200, "{}", captured.text());
    wan_pings_in(&captured.body, &ends);
    let (status, text, _) = coordinator.call(
        "GET",
        &format!("/v1/labs/{lab}/capture?target=x:y&count=1"),
        None,
    );
    assert_eq!(status, 400, "{text}");

    // Down everywhere, with the engines' final report as one: nothing is left on any host,
    // nor the coordinator's record.
    let (status, text, down) = coordinator.call("DELETE", &format!("/v1/labs/{lab}"), None);
    assert_eq!(status, 200, "{text}");
    assert_eq!(down["removed"], true);
    let reported: Vec<(&str, u64)> = down["report"]["directions"]
        .as_array()
        .unwrap_or_else(|| panic!("no final report: {text}"))
        .iter()
        .map(|d| {
            (
                d["link"].as_str().unwrap(),
                d["delivered"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(reported.len(), 2, "{text}");
    assert!(
        reported.iter().all(|(l, n)| *l == "wan" && *n >= 8),
        "{text}"
    );
    assert_eq!(down["report"]["lab"], lab.as_str(), "{text}");
    for agent in &cluster.agents {
        assert_eq!(leftovers(agent), Vec::<String>::new());
    }
    let records: Vec<_> = std::fs::read_dir(cluster.state())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".hosts.json"))
        .collect();
    assert!(records.is_empty(), "the record of the lab is left");
    let (status, text, _) = coordinator.call("GET", &format!("/v1/labs/{lab}"), None);
    assert_eq!(status, 404, "{text}");
    said += &text;
    for token in &tokens {
        assert!(!said.contains(token.as_str()), "an agent's token was shown");
    }
}

/// The CPUs listed in field `Cpus_allowed_list` of a `/proc/PID/status`.
fn cpus_allowed(status: &str) -> String {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap_or_else(|| panic!("no Cpus_allowed_list in {status}"))
        .trim()
        .to_owned()
}

/// The cpusets of lab `lab` under the machine's cpuset controller (the namespace hosts share
/// the machine's cgroups).
fn lab_cpusets(lab: &str) -> Vec<String> {
    let sets = rtemu_topo::cpuset::Cpusets::find().expect("a cpuset controller");
    let mut found: Vec<String> = std::fs::read_dir(&sets.0.root)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with(&format!("rtemu-{lab}")))
        .collect();
    found.sort();
    found
}

#[test]
fn each_host_keeps_its_parts_programs_off_its_engine_in_a_cpuset_that_down_removes() {
    if !root_or_skip(
        "cpuset_across_hosts",
        "creates network namespaces and cpusets",
    ) {
        return;
    }
    if rtemu_clock::rt::affinity().unwrap().len() < 2 {
        // One CPU: no engine is pinned, so `up` refuses (tests/cpuset.rs checks it says so).
        rtemu_testutil::say("cpuset_across_hosts: one CPU, no engine CPU to keep off");
        return;
    }
    let _serial = serial();
    let tmp = TempDir::new("mh-cs");
    let dir = tmp.0.as_path();
    let cluster = Cluster::start(RTEMU.as_ref(), "cs", 2, dir).unwrap();
    let creds_path = cluster.credentials();
    let creds = creds_path.to_str().unwrap();
    let rtemu = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--credentials", creds]);
        coordinate(&cluster, &all)
    };
    let lab = format!("mhc{}", std::process::id() % 100_000);
    let file = dir.join(format!("{lab}.toml"));
    // Both hosts run an engine (wan's on h1, c-d's on h2), hence a cpuset each.
    let text = chain(&lab, Some("delay 1ms"), Some(PORT))
        .replacen('\n', "\nprograms_cpus = \"off-engine\"\n", 1)
        .replace(
            "endpoints = [\"c\", \"d\"]\n",
            "endpoints = [\"c\", \"d\"]\nnetem = \"delay 1ms\"\n",
        );
    std::fs::write(&file, text).unwrap();
    let up = rtemu(&["up", file.to_str().unwrap()]);
    assert!(up.status.success(), "{}", stderr(&up));

    let made = lab_cpusets(&lab);
    let stats: Value = serde_json::from_slice(&rtemu(&["stats", &lab, "--json"]).stdout).unwrap();
    let online = rtemu_topo::cpuset::online().unwrap();
    // What `ls` must say of each host's part.
    let mut said = Vec::new();
    for (i, (host, node)) in [("h1", "b"), ("h2", "c")].into_iter().enumerate() {
        // Every online CPU but those of this host's release threads.
        let engine = stats["engines"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["host"] == host)
            .unwrap_or_else(|| panic!("no engine on {host}: {stats}"));
        let pinned: Vec<usize> = engine["threads"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["cpu"].as_u64().expect("a pinned release thread") as usize)
            .collect();
        let expected = rtemu_topo::cpuset::off_engine(&online, &pinned).unwrap();
        let expected = rtemu_clock::rt::format_cpu_list(&expected);
        said.push(format!(
            "  {host}: programs on CPUs {expected} (off the engine's)"
        ));
        let (code, out) = exec(
            &cluster.agents[i],
            &lab,
            node,
            &[
                "sh",
                "-c",
                "cat /proc/self/status; echo ====; cat /proc/self/cgroup",
            ],
        );
        assert_eq!(code, 0, "{out}");
        let (status, cgroups) = out.split_once("====").unwrap();
        assert_eq!(cpus_allowed(status), expected, "{node} on {host}");
        // In its host's part's cpuset, one of the lab's.
        let set = cgroups
            .lines()
            .find_map(|l| {
                let mut f = l.splitn(3, ':');
                let controllers = f.nth(1)?;
                let v1 = controllers.split(',').any(|c| c == "cpuset");
                let path = f.next()?.trim_start_matches('/');
                (v1 || controllers.is_empty()).then_some(path)
            })
            .unwrap_or_else(|| panic!("no cpuset in {cgroups}"))
            .to_owned();
        assert!(
            made.contains(&set),
            "{node} in {set}, the lab's are {made:?}"
        );
    }
    assert_eq!(made.len(), 2, "one cpuset per host's part: {made:?}");
    let ls = rtemu(&["ls", &lab]);
    let text = String::from_utf8_lossy(&ls.stdout);
    for line in &said {
        assert!(text.contains(&format!("\n{line}\n")), "{line} in {text}");
    }

    let down = rtemu(&["down", &lab]);
    assert!(down.status.success(), "{}", stderr(&down));
    assert_eq!(lab_cpusets(&lab), Vec::<String>::new(), "left after down");
}
