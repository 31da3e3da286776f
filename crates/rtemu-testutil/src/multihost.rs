//! The multi-host tests' machines on one machine: each "host" is a network namespace whose
//! interface `u0` joins the network between the hosts, the underlay: either a bridge (in an
//! underlay namespace of its own), with no delay of its own, or an ordinary single-host rtemu
//! lab whose impaired links give it a delay (the kernel may have no netem, and rtemu's own
//! data plane is what the tests trust anyway). Shared by the library's tests (agents in a
//! helper mode) and the command line's (agents that are `rtemu serve`).

use std::process::Command;

use crate::try_ip as ip;

/// The underlay interface of every host.
pub const UNDERLAY_IF: &str = "u0";

/// The underlay address of host `i` (0-based): documentation addresses, never routed. Each
/// is the first of its own /30 (192.0.2.1, .5, .9, …), so a delayed underlay can route
/// between the hosts; on a bridge they share a /24.
pub fn host_address(i: usize) -> String {
    format!("192.0.2.{}", 4 * i + 1)
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

/// How a test suite runs the single-host rtemu lab that plays a delayed underlay: through the
/// library in its own process, or through the `rtemu` binary.
pub trait LabRunner {
    /// Brings up the lab of topology `text` with its engine; panics when it does not come up
    /// (having left nothing behind, as `up` does).
    fn up(&mut self, text: &str);
    /// Takes lab `name` down, its engine and namespaces with it; never panics (it runs when
    /// a test has failed too).
    fn down(&mut self, name: &str);
}

/// What joins the hosts.
enum Underlay {
    /// A bridge in the namespace of this name, no delay of its own.
    Bridge(String),
    /// An rtemu lab of this name, with a router `r` joined to each host by a link of
    /// `link_us` µs each way, run by `runner`.
    Lab {
        name: String,
        link_us: u32,
        runner: Box<dyn LabRunner>,
    },
}

/// The "machines": one namespace per host, each with interface `u0` on the underlay. Removed
/// when dropped, with the underlay.
pub struct Hosts {
    /// The hosts' namespaces, h1 first.
    pub names: Vec<String>,
    underlay: Underlay,
}

impl Hosts {
    /// `n` hosts on a bridge (no delay of its own), their namespaces named after `tag` and
    /// this process; the `ip` command that failed and why, with what was made removed again.
    pub fn new(tag: &str, n: usize) -> Result<Hosts, String> {
        let prefix = format!("rtmh{tag}{}", std::process::id() % 100_000);
        let u = format!("{prefix}-u");
        // Made before the namespaces, so that dropping it removes whatever was made.
        let hosts = Hosts {
            names: (1..=n).map(|i| format!("{prefix}-h{i}")).collect(),
            underlay: Underlay::Bridge(u.clone()),
        };
        let u = u.as_str();
        ip(&["netns", "add", u])?;
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

    /// `n` hosts that are the nodes `h1`, `h2`, … of an rtemu lab (named after `tag` and this
    /// process) run by `runner`: each host's `u0` is joined to a router `r` by a link with
    /// `delay {link_us}us` both ways, so a frame from host to host takes twice that, one way,
    /// plus the engine's own error. The hosts' namespaces are the lab's nodes'.
    pub fn delayed(tag: &str, n: usize, link_us: u32, runner: Box<dyn LabRunner>) -> Hosts {
        let name = format!("u{tag}{}", std::process::id() % 100_000);
        let mut hosts = Hosts {
            // The lab's node namespaces, as `rtemu_topo::lab::node_netns` names them.
            names: (1..=n).map(|i| format!("rtemu-{name}.h{i}")).collect(),
            underlay: Underlay::Lab {
                name: name.clone(),
                link_us,
                runner,
            },
        };
        let text = underlay_lab(&name, n, link_us);
        if let Underlay::Lab { runner, .. } = &mut hosts.underlay {
            runner.up(&text);
        }
        hosts
    }

    /// Checks that the underlay's round trip from host to host (`ping`, the output of several
    /// pings) is its model's — four link delays on a delayed underlay, none on a bridge — plus
    /// at most 0.5 ms, and returns its median in ms.
    pub fn check_underlay(&self, ping: &str) -> f64 {
        let model = match &self.underlay {
            Underlay::Bridge(_) => 0.0,
            Underlay::Lab { link_us, .. } => 4.0 * f64::from(*link_us) / 1e3,
        };
        let rtt = median_rtt(ping);
        assert!(
            rtt >= model && rtt <= model + 0.5,
            "underlay RTT {rtt:.3} ms, expected its model's {model:.3} ms plus at most 0.5 ms"
        );
        rtt
    }
}

/// The topology of a delayed underlay: hosts `h1`…`h{n}`, each with `u0` at
/// [`host_address`] on a /30 shared with router `r`, each link `delay {link_us}us`.
fn underlay_lab(name: &str, n: usize, link_us: u32) -> String {
    let mut text = format!("lab = \"{name}\"\nip = \"ipv4\"\n[nodes.r]\n");
    for i in 0..n {
        text += &format!("[nodes.h{}]\n", i + 1);
    }
    for i in 0..n {
        text += &format!(
            "[[links]]\nendpoints = [\"h{h}:{UNDERLAY_IF}\", \"r\"]\nipv4 = \"192.0.2.{net}/30\"\n\
             netem = \"delay {link_us}us\"\n",
            h = i + 1,
            net = 4 * i,
        );
    }
    text
}

impl Drop for Hosts {
    fn drop(&mut self) {
        match &mut self.underlay {
            Underlay::Bridge(u) => {
                for ns in self.names.iter().chain([&*u]) {
                    let _ = Command::new("ip").args(["netns", "del", ns]).output();
                }
            }
            Underlay::Lab { name, runner, .. } => runner.down(name),
        }
    }
}

/// The commands that make a host's agent's state private: a tmpfs on `/run/rtemu`,
/// `/run/netns` and `/etc/netns` (run in the mount namespace `ip netns exec` gives it, so the
/// mounts go with the agent), as a shell script.
pub const PRIVATE_STATE: &str = "for d in /run/rtemu /run/netns /etc/netns; do \
     mkdir -p $d && mount -t tmpfs -o mode=0755 tmpfs $d || exit 1; done";

/// The commands that give a host's agent the machine's cgroup hierarchies (which `up` uses for
/// nodes' CPU limits and the lab's cpuset), as a shell script: `ip netns exec` mounts a sysfs
/// of the host's network namespace on `/sys`, hiding what was mounted under `/sys/fs/cgroup`;
/// each hierarchy is mounted there again as this process sees it (a cgroup mount with the
/// same controllers and options is the same hierarchy), and its symbolic links made again.
pub fn machine_cgroups() -> String {
    const ROOT: &str = "/sys/fs/cgroup";
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut steps = Vec::new();
    for line in info.lines() {
        // ID PARENT MAJ:MIN ROOT POINT OPTIONS [TAGS…] - TYPE SOURCE SUPER-OPTIONS
        let Some((mount, fs)) = line.split_once(" - ") else {
            continue;
        };
        let point = mount.split(' ').nth(4).unwrap_or("");
        let mut fs = fs.split(' ');
        let (kind, options) = (fs.next().unwrap_or(""), fs.nth(1).unwrap_or(""));
        if point != ROOT && !point.starts_with(&format!("{ROOT}/")) {
            continue;
        }
        let options: Vec<&str> = options
            .split(',')
            .filter(|o| !matches!(*o, "rw" | "ro"))
            .collect();
        steps.push(match kind {
            "tmpfs" => format!("mount -t tmpfs -o mode=0755 tmpfs '{point}'"),
            "cgroup" => format!(
                "mkdir -p '{point}' && mount -t cgroup -o '{}' cgroup '{point}'",
                options.join(",")
            ),
            "cgroup2" => format!("mkdir -p '{point}' && mount -t cgroup2 cgroup2 '{point}'"),
            _ => continue,
        });
    }
    // `cpu` for `cpu,cpuacct` where they are mounted together.
    for entry in std::fs::read_dir(ROOT).into_iter().flatten().flatten() {
        if let Ok(target) = std::fs::read_link(entry.path()) {
            let (target, link) = (target.display(), entry.path());
            steps.push(format!("ln -s '{target}' '{}'", link.display()));
        }
    }
    if steps.is_empty() {
        return "true".to_owned();
    }
    steps.join(" && ")
}

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

/// Serialises the multi-host tests of one test binary: on two cores, one test's engines and
/// pings beside another's delay each other's releases past what the round-trip checks allow.
static CPUS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Holds the multi-host tests' lock for a test (one that failed holding it does not stop the
/// others).
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    CPUS.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
