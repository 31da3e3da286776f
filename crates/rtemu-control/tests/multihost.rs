//! Multi-host labs on one machine: each "host" is a network namespace joined to the others by
//! an underlay bridge, and each host's part of the lab is built by an agent process of its own
//! (this test binary in its helper mode), inside that host's namespace and in a private mount
//! namespace with its own `/run/rtemu`, `/run/netns` and `/etc/netns`, so the parts' state
//! directories and named namespaces are as separate as on two machines.
//!
//! The hosts of the tests that measure delay are the nodes of an ordinary rtemu lab (run by
//! the library in this process) whose impaired links give the underlay a delay of its own, so
//! a model's delay is shown to add to a non-zero underlay's.
//!
//! These tests need root. Without it they print why and pass, unless `RTEMU_REQUIRE_ROOT=1`
//! (CI) makes them fail. Guards end the agents and remove the host namespaces whatever
//! happens; an agent's lab namespaces are mounted only in its own mount namespace, so they
//! vanish with it.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::thread::JoinHandle;

use rtemu_control::engine::{self, RunOptions};
use rtemu_testutil::multihost::{
    chain, check_delay_across, host_address, hosts_table, ping_all, serial, settled_leftovers,
    Hosts, LabRunner, CHAIN_PLACEMENT, PRIVATE_STATE,
};
use rtemu_testutil::{program_or_skip, root_or_skip};
use rtemu_topo::lab;
use rtemu_topo::part::Stitching;
use rtemu_topo::state::{LabName, State};
use rtemu_topo::Topology;
use serde_json::{json, Value};

/// What starts an agent's reply on its standard output (libtest writes there too).
const REPLY: &str = "@@ ";

/// An agent process building one host's part; killed when dropped (its mount namespace, and
/// with it every namespace of its part, goes with it).
struct Agent {
    host: String,
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Agent {
    /// Starts the agent of `host` in the host namespace `netns`.
    fn start(host: &str, netns: &str) -> Agent {
        let exe = std::env::current_exe().unwrap();
        let mut child = Command::new("ip")
            .args(["netns", "exec", netns])
            .arg(exe)
            .args(["agent_process", "--exact", "--ignored", "--test-threads=1"])
            .env("RTEMU_MULTIHOST_AGENT", host)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Agent {
            host: host.to_owned(),
            stdin: child.stdin.take().unwrap(),
            stdout: BufReader::new(child.stdout.take().unwrap()),
            child,
        }
    }

    /// Sends `request` and returns the reply; panics on an error reply.
    fn ask(&mut self, request: Value) -> Value {
        writeln!(self.stdin, "{request}").unwrap();
        self.stdin.flush().unwrap();
        let mut line = String::new();
        loop {
            line.clear();
            let n = self.stdout.read_line(&mut line).unwrap();
            assert!(n > 0, "agent {} exited on {request}", self.host);
            // libtest may have begun the line ("test agent_process ... ").
            if let Some((_, reply)) = line.split_once(REPLY) {
                let reply: Value = serde_json::from_str(reply).unwrap();
                if let Some(e) = reply.get("error") {
                    panic!("agent {}: {request}: {e}", self.host);
                }
                return reply;
            }
        }
    }

    /// Runs `argv` in node `node` (or in the host's own namespace when `node` is `None`).
    fn exec(&mut self, node: Option<&str>, argv: &[&str]) -> (i64, String) {
        let reply = self.ask(json!({"exec": {"node": node, "argv": argv}}));
        (
            reply["code"].as_i64().unwrap(),
            reply["stdout"].as_str().unwrap().to_owned(),
        )
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Not a test on its own (ignored unless asked for): the agent process [`Agent::start`]
/// starts. It takes a private `/run/rtemu`, `/run/netns` and `/etc/netns`, then answers one
/// JSON request a line on standard input until it ends.
#[test]
#[ignore = "helper process of the multi-host tests"]
fn agent_process() {
    let Ok(host) = std::env::var("RTEMU_MULTIHOST_AGENT") else {
        return;
    };
    let ok = Command::new("sh")
        .args(["-c", PRIVATE_STATE])
        .status()
        .unwrap();
    assert!(
        ok.success(),
        "mounting tmpfs on the agent's state directories"
    );
    let mut agent = AgentState::default();
    for line in std::io::stdin().lines() {
        let request: Value = serde_json::from_str(&line.unwrap()).unwrap();
        let reply = agent
            .serve(&host, &request)
            .unwrap_or_else(|e| json!({ "error": format!("{e:#}") }));
        let mut out = std::io::stdout().lock();
        writeln!(out, "{REPLY}{reply}").unwrap();
        out.flush().unwrap();
    }
}

/// What an agent holds: its part, once up, and the thread running its engine.
#[derive(Default)]
struct AgentState {
    part: Option<State>,
    engine: Option<JoinHandle<anyhow::Result<()>>>,
}

impl AgentState {
    /// One request: `in_use`, `up`, `exec`, `show` or `down`.
    fn serve(&mut self, host: &str, request: &Value) -> anyhow::Result<Value> {
        if request.get("in_use").is_some() {
            return Ok(json!({ "vnis": lab::vnis_in_use()? }));
        }
        if let Some(up) = request.get("up") {
            let text = up["topology"].as_str().unwrap_or_default();
            let topo = Topology::parse("multihost.toml", text)?;
            let stitching: Stitching = serde_json::from_value(up["stitching"].clone())?;
            let built = lab::up_part(&topo, "multihost.toml", host, &stitching, None)?;
            engine::far_ends_without_offloads(&built)?;
            if !engine::impaired(&built).is_empty() {
                // In the part's own mount namespace.
                self.engine = Some(engine_thread(&built.lab)?);
            }
            self.part = Some(built);
            return Ok(json!({ "ok": true }));
        }
        if let Some(exec) = request.get("exec") {
            let argv: Vec<String> = serde_json::from_value(exec["argv"].clone())?;
            let mut cmd = match (exec["node"].as_str(), &self.part) {
                (Some(node), Some(part)) => lab::node_command(part, node, &argv)?,
                (Some(node), None) => anyhow::bail!("no part is up to run in node {node}"),
                (None, _) => {
                    let mut c = Command::new(&argv[0]);
                    c.args(&argv[1..]);
                    c
                }
            };
            let out = cmd.output()?;
            return Ok(json!({
                "code": out.status.code().unwrap_or(-1),
                "stdout": String::from_utf8_lossy(&out.stdout),
            }));
        }
        if request.get("show").is_some() {
            // What `rtemu ls` and `rtemu stats` print of the part.
            let part = self
                .part
                .as_ref()
                .ok_or_else(|| anyhow::anyhow!("no part is up"))?;
            let mut ls = Vec::new();
            rtemu_control::lab::write_listing(&mut ls, std::slice::from_ref(part))?;
            let mut stats = Vec::new();
            let directions = rtemu_control::lab::stats(part)?.directions;
            rtemu_control::message::write_table(&mut stats, &directions, false)?;
            return Ok(json!({
                "ls": String::from_utf8_lossy(&ls),
                "stats": String::from_utf8_lossy(&stats),
            }));
        }
        if request.get("down").is_some() {
            let part = self
                .part
                .take()
                .ok_or_else(|| anyhow::anyhow!("no part is up"))?;
            rtemu_control::lab::down(&part.lab).removed?;
            if let Some(e) = self.engine.take() {
                e.join()
                    .map_err(|_| anyhow::anyhow!("the engine panicked"))??;
            }
            return Ok(json!({ "left": settled_leftovers(&[]) }));
        }
        anyhow::bail!("unknown request {request}")
    }
}

/// Runs lab `lab`'s engine as a thread of this process (in the tests' binary there is no
/// `rtemu engine` to start), once it answers.
fn engine_thread(lab: &LabName) -> anyhow::Result<JoinHandle<anyhow::Result<()>>> {
    let opts = RunOptions {
        lab: lab.clone(),
        wait: engine::default_wait(),
        cpus: Vec::new(),
        priority: engine::Priority::default(),
        threads: 1,
        io: None,
        sizing_pps: engine::SIZING_PPS,
    };
    let thread = std::thread::spawn(move || engine::run(&opts));
    let started = std::time::Instant::now();
    while !engine::alive(lab) {
        anyhow::ensure!(
            started.elapsed().as_secs() < 10 && !thread.is_finished(),
            "the engine of lab {lab} did not answer"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Ok(thread)
}

/// The lab of a delayed underlay, run by the library in this process, its engine a thread.
#[derive(Default)]
struct InProcess {
    engine: Option<JoinHandle<anyhow::Result<()>>>,
}

impl LabRunner for InProcess {
    fn up(&mut self, text: &str) {
        let topo = Topology::parse("underlay.toml", text).unwrap();
        let state = lab::up(&topo, "underlay.toml").unwrap();
        self.engine = Some(engine_thread(&state.lab).unwrap());
    }

    fn down(&mut self, name: &str) {
        if let Ok(name) = LabName::new(name) {
            let _ = rtemu_control::lab::down(&name).removed;
        }
        if let Some(e) = self.engine.take() {
            let _ = e.join();
        }
    }
}

/// The one-way delay of each link of a delayed underlay (host to router): host to host, a
/// frame takes twice this.
const UNDERLAY_LINK_US: u32 = 500;

/// A lab spread over `hosts`: allocates the VNIs from what every agent uses (as a
/// coordinator would), brings every part up, and returns the agents, in host order.
fn bring_up(hosts: &Hosts, src: &str) -> Vec<Agent> {
    let topo = Topology::parse("multihost.toml", src).unwrap();
    let mut agents: Vec<Agent> = topo
        .hosts
        .iter()
        .zip(&hosts.names)
        .map(|(h, ns)| Agent::start(&h.name, ns))
        .collect();
    let mut in_use = BTreeSet::new();
    for a in &mut agents {
        let reply = a.ask(json!({"in_use": null}));
        in_use.extend(serde_json::from_value::<Vec<u32>>(reply["vnis"].clone()).unwrap());
    }
    let stitching = Stitching::allocate(&topo, &in_use).unwrap();
    for a in &mut agents {
        a.ask(json!({"up": {"topology": src, "stitching": stitching}}));
    }
    agents
}

/// Takes every part down and returns what each host has left.
fn take_down(agents: &mut [Agent]) -> Vec<String> {
    let mut left = Vec::new();
    for a in agents.iter_mut() {
        let reply = a.ask(json!({"down": null}));
        for l in reply["left"].as_array().into_iter().flatten() {
            left.push(format!("{}: {}", a.host, l.as_str().unwrap_or_default()));
        }
    }
    left
}

/// A lab name unique to this test and process.
fn unique_lab(tag: &str) -> String {
    format!("mh{tag}{}", std::process::id() % 100_000)
}

#[test]
fn a_chain_split_over_two_hosts_by_an_ideal_tunnel_pings_by_name_and_leaves_nothing() {
    if !root_or_skip("chain_over_two_hosts", "creates network namespaces") {
        return;
    }
    let _serial = serial();
    let hosts = Hosts::new("i", 2).unwrap();
    let src = chain(&unique_lab("i"), None, None);
    let mut agents = bring_up(&hosts, &src);
    // b's end of the stitched link is a VXLAN device, with the tunnel's MTU (1500 - 50).
    let (_, link) = agents[0].exec(Some("b"), &["ip", "-d", "-o", "link", "show", "eth1"]);
    assert!(link.contains("vxlan id"), "{link}");
    assert!(link.contains("mtu 1450"), "{link}");
    let failed = ping_all(&CHAIN_PLACEMENT, |h, n, argv| agents[h].exec(Some(n), argv));
    assert_eq!(failed, Vec::<String>::new());
    let left = take_down(&mut agents);
    assert_eq!(left, Vec::<String>::new());
}

#[test]
fn an_impaired_link_between_hosts_delays_by_its_model_plus_the_underlay() {
    if !root_or_skip("impaired_over_two_hosts", "creates network namespaces") {
        return;
    }
    let _serial = serial();
    let hosts = Hosts::delayed("d", 2, UNDERLAY_LINK_US, Box::<InProcess>::default());
    let src = chain(&unique_lab("d"), Some("delay 10ms"), None);
    let mut agents = bring_up(&hosts, &src);
    let failed = ping_all(&CHAIN_PLACEMENT, |h, n, argv| agents[h].exec(Some(n), argv));
    assert_eq!(failed, Vec::<String>::new());

    let peer = host_address(1);
    let (code, out) = agents[0].exec(None, &["ping", "-c", "20", "-i", "0.02", &peer]);
    assert_eq!(code, 0, "{out}");
    let underlay = hosts.check_underlay(&out);
    let (code, across) = agents[0].exec(Some("b"), &["ping", "-c", "20", "-i", "0.05", "c"]);
    assert_eq!(code, 0, "{across}");
    check_delay_across("across hosts", &out, &across);
    // `ls` and `stats` on the engine's host show the underlay's round trip beside the link,
    // as measured when the part came up: the ping's within 0.5 ms.
    let shown = agents[0].ask(json!({"show": null}));
    for view in ["ls", "stats"] {
        let text = shown[view].as_str().unwrap();
        let ms: f64 = text
            .split_once("link wan crosses hosts: underlay h1↔h2 RTT ")
            .and_then(|(_, rest)| rest.split_once(" ms"))
            .and_then(|(ms, _)| ms.parse().ok())
            .unwrap_or_else(|| panic!("no underlay RTT in {view}: {text}"));
        rtemu_testutil::say(&format!(
            "{view} shows underlay RTT {ms:.3} ms; ping {underlay:.3} ms"
        ));
        assert!((ms - underlay).abs() <= 0.5, "{view}: {text}");
        // Only the link between the hosts: c–d runs on h2 alone.
        assert_eq!(text.matches("crosses hosts").count(), 1, "{view}: {text}");
    }
    let left = take_down(&mut agents);
    assert_eq!(left, Vec::<String>::new());
}

#[test]
fn a_lan_over_three_hosts_floods_to_each_and_pings_by_name() {
    if !root_or_skip("lan_over_three_hosts", "creates network namespaces") {
        return;
    }
    let _serial = serial();
    let hosts = Hosts::delayed("l", 3, UNDERLAY_LINK_US, Box::<InProcess>::default());
    let name = unique_lab("l");
    let src = format!(
        r#"lab = "{name}"
{}[nodes.w]
host = "h1"
[nodes.x]
host = "h1"
[nodes.y]
host = "h2"
[nodes.z]
host = "h3"
[[lans]]
name = "office"
members = ["w", "x", "y", "z"]
"#,
        hosts_table(3, None)
    );
    let mut agents = bring_up(&hosts, &src);
    // h1's bridge floods to both other hosts: one all-zero entry each.
    let lab_ns = lab::lab_netns(&name);
    let (_, fdb) = agents[0].exec(
        None,
        &["bridge", "-n", &lab_ns, "fdb", "show", "dev", "s0vx"],
    );
    for peer in [host_address(1), host_address(2)] {
        assert!(
            fdb.contains(&format!("00:00:00:00:00:00 dst {peer}")),
            "{fdb}"
        );
    }
    let placement = [("w", 0), ("x", 0), ("y", 1), ("z", 2)];
    let failed = ping_all(&placement, |h, n, argv| agents[h].exec(Some(n), argv));
    assert_eq!(failed, Vec::<String>::new());
    let left = take_down(&mut agents);
    assert_eq!(left, Vec::<String>::new());
}

#[test]
fn iperf3_through_a_cross_host_rate_link_gets_the_rate_within_one_percent() {
    let test = "rate_link_over_two_hosts";
    if !root_or_skip(test, "creates network namespaces")
        || !program_or_skip(test, "iperf3", "--version", "iperf3")
    {
        return;
    }
    let _serial = serial();
    let hosts = Hosts::delayed("r", 2, UNDERLAY_LINK_US, Box::<InProcess>::default());
    let src = chain(&unique_lab("r"), Some("rate 50mbit"), None);
    let mut agents = bring_up(&hosts, &src);
    let (code, out) = agents[1].exec(
        Some("d"),
        &["iperf3", "-s", "-D", "-1", "--idle-timeout", "60", "-J"],
    );
    assert_eq!(code, 0, "iperf3 -s: {out}");
    std::thread::sleep(std::time::Duration::from_millis(300));
    // UDP over IPv4 at 60 Mbit/s of payload, more than the link carries, so its queue stays
    // full and d receives what the link releases; bounded in time whatever happens.
    let (code, out) = agents[0].exec(
        Some("a"),
        &[
            "timeout",
            "30",
            "iperf3",
            "-4",
            "-c",
            "d",
            "-u",
            "-b",
            "60M",
            "-l",
            &IPERF_PAYLOAD.to_string(),
            "-t",
            "5",
            "-J",
            "--get-server-output",
        ],
    );
    assert_eq!(code, 0, "iperf3 -c: {out}");
    let report: Value = serde_json::from_str(&out).unwrap();
    let intervals = report["server_output_json"]["intervals"]
        .as_array()
        .unwrap_or_else(|| panic!("no server intervals in {out}"));
    // The whole seconds in between: the first holds the start, the last the end.
    assert!(intervals.len() >= 4, "{out}");
    let steady = &intervals[1..intervals.len() - 1];
    let bytes: f64 = steady
        .iter()
        .map(|i| i["sum"]["bytes"].as_f64().unwrap())
        .sum();
    let seconds: f64 = steady
        .iter()
        .map(|i| i["sum"]["seconds"].as_f64().unwrap())
        .sum();
    // rtemu's rate counts whole Ethernet frames (see docs/models.md): each datagram's
    // payload plus UDP (8), IPv4 (20) and Ethernet (14) headers.
    let frame = f64::from(IPERF_PAYLOAD + 42);
    let rate = bytes * 8.0 / seconds * frame / f64::from(IPERF_PAYLOAD);
    rtemu_testutil::say(&format!(
        "iperf3 through rate 50mbit across hosts: {:.3} Mbit/s of payload, {:.3} Mbit/s of frames",
        bytes * 8.0 / seconds / 1e6,
        rate / 1e6
    ));
    assert!(
        (rate - 50e6).abs() <= 0.5e6,
        "{rate} bit/s of frames through rate 50mbit"
    );
    let left = take_down(&mut agents);
    assert_eq!(left, Vec::<String>::new());
}

/// The UDP payload of the rate test's datagrams: one frame each within the tunnel's MTU (1450).
const IPERF_PAYLOAD: u32 = 1400;
