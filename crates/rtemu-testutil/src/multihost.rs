//! The multi-host tests' machines on one machine: each "host" is a network namespace whose
//! interface `u0` sits on a bridge (in an underlay namespace of its own) that plays the
//! network between the hosts. Shared by the library's tests (agents in a helper mode) and the
//! command line's (agents that are `rtemu serve`).

use std::process::Command;

use crate::try_ip as ip;

/// The underlay interface of every host.
pub const UNDERLAY_IF: &str = "u0";

/// The underlay address of host `i` (0-based): documentation addresses, never routed.
pub fn host_address(i: usize) -> String {
    format!("192.0.2.{}", i + 1)
}

/// The `[hosts]` table of `n` hosts h1, h2, … at their underlay addresses, their agents on
/// `port` when given.
pub fn hosts_table(n: usize, port: Option<u16>) -> String {
    let port = port.map_or(String::new(), |p| format!(", port = {p}"));
    let mut table = String::from("[hosts]\n");
    for i in 0..n {
        table += &format!(
            "h{} = {{ address = \"{}\"{port} }}\n",
            i + 1,
            host_address(i)
        );
    }
    table
}

/// The chain a–b | c–d: a and b on h1, c and d on h2 (agents on `port` when given), link
/// `wan` between b and c with `netem` (none: ideal).
pub fn chain(lab: &str, netem: Option<&str>, port: Option<u16>) -> String {
    let netem = netem.map_or(String::new(), |n| format!("netem = \"{n}\"\n"));
    format!(
        r#"lab = "{lab}"
{}[nodes.a]
host = "h1"
[nodes.b]
host = "h1"
[nodes.c]
host = "h2"
[nodes.d]
host = "h2"
[[links]]
endpoints = ["a", "b"]
[[links]]
name = "wan"
endpoints = ["b", "c"]
{netem}[[links]]
endpoints = ["c", "d"]
"#,
        hosts_table(2, port)
    )
}

/// The chain's nodes and the index of their host.
pub const CHAIN_PLACEMENT: [(&str, usize); 4] = [("a", 0), ("b", 0), ("c", 1), ("d", 1)];

/// The "machines": one namespace per host, each with interface `u0` on a bridge in an
/// underlay namespace. Removed when dropped.
pub struct Hosts {
    /// The hosts' namespaces, h1 first.
    pub names: Vec<String>,
    underlay: String,
}

impl Hosts {
    /// `n` hosts, their namespaces named after `tag` and this process; the `ip` command that
    /// failed and why, with what was made removed again.
    pub fn new(tag: &str, n: usize) -> Result<Hosts, String> {
        let prefix = format!("rtmh{tag}{}", std::process::id() % 100_000);
        let hosts = Hosts {
            names: (1..=n).map(|i| format!("{prefix}-h{i}")).collect(),
            underlay: format!("{prefix}-u"),
        };
        ip(&["netns", "add", &hosts.underlay])?;
        let u = hosts.underlay.as_str();
        ip(&["-n", u, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", u, "link", "set", "br0", "up"])?;
        for (i, h) in hosts.names.iter().enumerate() {
            let port = format!("p{i}");
            ip(&["netns", "add", h])?;
            ip(&[
                "link",
                "add",
                UNDERLAY_IF,
                "netns",
                h,
                "type",
                "veth",
                "peer",
                "name",
                &port,
                "netns",
                u,
            ])?;
            ip(&["-n", u, "link", "set", &port, "master", "br0", "up"])?;
            let addr = format!("{}/24", host_address(i));
            ip(&["-n", h, "addr", "add", &addr, "dev", UNDERLAY_IF])?;
            ip(&["-n", h, "link", "set", UNDERLAY_IF, "up"])?;
            ip(&["-n", h, "link", "set", "lo", "up"])?;
        }
        Ok(hosts)
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for ns in self.names.iter().chain([&self.underlay]) {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

/// The commands that make a host's agent's state private: a tmpfs on `/run/rtemu`,
/// `/run/netns` and `/etc/netns` (run in the mount namespace `ip netns exec` gives it, so the
/// mounts go with the agent), as a shell script.
pub const PRIVATE_STATE: &str = "for d in /run/rtemu /run/netns /etc/netns; do \
     mkdir -p $d && mount -t tmpfs -o mode=0755 tmpfs $d || exit 1; done";

/// What of any lab is left on a host, seen through `enter` (a command prefix that runs in the
/// host's namespaces, e.g. `nsenter -t PID -m -n`; empty: this process's): named namespaces,
/// state directory entries, `/etc/netns` entries, interfaces other than the underlay, and UDP
/// sockets (a tunnel's).
pub fn leftovers(enter: &[&str]) -> Vec<String> {
    let run = |args: &[&str]| {
        let all: Vec<&str> = enter.iter().chain(args).copied().collect();
        let out = Command::new(all[0]).args(&all[1..]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let mut left = Vec::new();
    for dir in ["/run/netns", "/run/rtemu", "/etc/netns"] {
        left.extend(
            run(&["ls", "-A", dir])
                .lines()
                .map(|e| format!("{dir}/{e}")),
        );
    }
    for l in run(&["ip", "-o", "link"]).lines() {
        let name = l.split(':').nth(1).unwrap_or("").trim();
        let name = name.split('@').next().unwrap_or(name);
        if name != "lo" && name != UNDERLAY_IF {
            left.push(format!("interface {name}"));
        }
    }
    left.extend(run(&["ss", "-Huan"]).lines().map(|l| format!("socket {l}")));
    left
}

/// What [`leftovers`] finds once the kernel has freed what a `down` removed (devices and a
/// tunnel's socket go in the background, shortly after), waiting up to 5 s.
pub fn settled_leftovers(enter: &[&str]) -> Vec<String> {
    let since = std::time::Instant::now();
    let mut left = leftovers(enter);
    while !left.is_empty() && since.elapsed().as_secs() < 5 {
        std::thread::sleep(std::time::Duration::from_millis(50));
        left = leftovers(enter);
    }
    left
}

/// Pings every node of `placement` (node, index of its host) from every other by name, with
/// `exec(host, node, argv)` returning the exit code and output; returns the pairs that failed.
pub fn ping_all(
    placement: &[(&str, usize)],
    mut exec: impl FnMut(usize, &str, &[&str]) -> (i64, String),
) -> Vec<String> {
    let mut failed = Vec::new();
    for &(from, host) in placement {
        for &(to, _) in placement.iter().filter(|(n, _)| *n != from) {
            let (code, out) = exec(host, from, &["ping", "-c", "1", "-W", "2", to]);
            if code != 0 {
                failed.push(format!("{from} → {to}: {out}"));
            }
        }
    }
    failed
}

/// The median round-trip time in ms of `ping` output.
pub fn median_rtt(ping: &str) -> f64 {
    let mut xs: Vec<f64> = ping
        .lines()
        .filter_map(|l| l.split("time=").nth(1))
        .filter_map(|t| t.split_whitespace().next()?.parse().ok())
        .collect();
    assert!(!xs.is_empty(), "no round trips in {ping}");
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// Checks that the chain's round trip b → c across hosts (`across`, the output of 20 pings)
/// is its link's `delay 10ms` both ways plus the underlay's round trip (`underlay`, likewise),
/// within 0.5 ms, and says both medians, as `what` measured them.
pub fn check_delay_across(what: &str, underlay: &str, across: &str) {
    let (underlay, across) = (median_rtt(underlay), median_rtt(across));
    crate::say(&format!(
        "{what}: b → c median RTT {across:.3} ms; underlay h1 → h2 {underlay:.3} ms"
    ));
    assert!(
        (across - (20.0 + underlay)).abs() <= 0.5,
        "RTT {across:.3} ms, expected 20 ms + the underlay's {underlay:.3} ms within 0.5 ms"
    );
}
