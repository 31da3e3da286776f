//! `rtemu bench topo`: how long `rtemu up` and `rtemu down` take for generated chains and
//! stars of 10, 100 and 1000 nodes, beside the same namespaces and veth pairs made with one
//! `ip` command per object in a shell loop, in the same run. Measured and printed as a Markdown
//! table, never asserted. Needs root.
//!
//! Every step runs as a child process with a time limit (killed past it); every lab and every
//! baseline namespace is removed again, after an error, a time-out or a Ctrl-C too.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rtemu_topo::lab;
use serde::Serialize;

/// Node counts of the generated topologies.
const SIZES: [usize; 3] = [10, 100, 1000];

/// The generated shapes: a chain (node i to node i + 1) and a star (node 0 to every other).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Shape {
    Chain,
    Star,
}

impl Shape {
    fn name(self) -> &'static str {
        match self {
            Shape::Chain => "chain",
            Shape::Star => "star",
        }
    }

    /// The links of `nodes` nodes, as pairs of node numbers.
    fn links(self, nodes: usize) -> Vec<(usize, usize)> {
        (1..nodes)
            .map(|i| match self {
                Shape::Chain => (i - 1, i),
                Shape::Star => (0, i),
            })
            .collect()
    }
}

/// Runs per size: the median of 3 up to 100 nodes, one run of 1000.
fn runs(nodes: usize) -> usize {
    if nodes >= 1000 {
        1
    } else {
        3
    }
}

/// The time limit of one step (an `up`, a `down`, a baseline loop or its clean-up).
fn limit(nodes: usize) -> Duration {
    Duration::from_secs(60 + nodes as u64 * 3 / 10)
}

/// The topology file: ideal links, IPv4 addresses from the pool, on-link routes only
/// (`routing = "none"`) and dynamic neighbours, so rtemu makes the baseline's namespaces and
/// veth pairs plus what a lab needs to be usable (addresses, interfaces up, sysctls, hosts
/// files, the state file).
fn topology(lab: &str, shape: Shape, nodes: usize) -> String {
    let mut src =
        format!("# rtemu bench topo: {shape:?}, {nodes} nodes\nlab = \"{lab}\"\nrouting = \"none\"\nip = \"ipv4\"\n");
    for i in 0..nodes {
        src.push_str(&format!("[nodes.n{i}]\n"));
    }
    for (a, b) in shape.links(nodes) {
        src.push_str(&format!("[[links]]\nendpoints = [\"n{a}\", \"n{b}\"]\n"));
    }
    src
}

/// The baseline as a shell script: `ip netns add` per node, then `ip link add … netns …` per
/// link, each veth end created directly in its namespace (as rtemu does).
fn baseline_script(prefix: &str, shape: Shape, nodes: usize) -> String {
    let last = nodes - 1;
    let peer = match shape {
        Shape::Chain => "$((i - 1))",
        Shape::Star => "0",
    };
    format!(
        "set -e\n\
         for i in $(seq 0 {last}); do ip netns add {prefix}$i; done\n\
         for i in $(seq 1 {last}); do ip link add l${{i}}a netns {prefix}{peer} type veth peer name l${{i}}b netns {prefix}$i; done\n"
    )
}

/// The baseline's namespaces left on the host (`/run/netns/<prefix>…`).
fn baseline_namespaces(prefix: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(rtemu_topo::sys::NETNS_DIR)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(prefix))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// The clean-up of the baseline as a shell script: `ip netns del` per namespace.
fn baseline_cleanup_script(prefix: &str) -> String {
    format!("for ns in /run/netns/{prefix}*; do [ -e \"$ns\" ] && ip netns del \"${{ns##*/}}\"; done; true\n")
}

/// Set by Ctrl-C or SIGTERM: the benchmark stops at the next check and cleans up.
struct Stop(Arc<AtomicBool>);

impl Stop {
    fn install() -> Result<Stop> {
        let flag = Arc::new(AtomicBool::new(false));
        for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register(signal, Arc::clone(&flag))
                .context("installing the signal handler")?;
        }
        Ok(Stop(flag))
    }

    fn check(&self) -> Result<()> {
        if self.0.load(Ordering::Relaxed) {
            bail!("interrupted");
        }
        Ok(())
    }
}

/// Runs `cmd` in its own process group (a Ctrl-C reaches only the benchmark, which then ends
/// it) and returns its wall time in seconds; kills it past `limit` or at a stop. Its output
/// goes to `log`, whose end a failure quotes.
fn timed(mut cmd: Command, what: &str, log: &Path, limit: Duration, stop: &Stop) -> Result<f64> {
    let out = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let err = out.try_clone().context("opening the log")?;
    cmd.stdin(Stdio::null()).stdout(out).stderr(err);
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let start = Instant::now();
    let mut child = cmd.spawn().with_context(|| format!("starting {what}"))?;
    loop {
        if let Some(status) = child
            .try_wait()
            .with_context(|| format!("waiting for {what}"))?
        {
            let secs = start.elapsed().as_secs_f64();
            if !status.success() {
                let text = std::fs::read_to_string(log).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(5).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                bail!("{what} failed ({status}): {}", tail.join(" / "));
            }
            return Ok(secs);
        }
        let late = start.elapsed() > limit;
        if late || stop.0.load(Ordering::Relaxed) {
            let _ = child.kill();
            let _ = child.wait();
            if late {
                bail!("{what} took longer than {} s: killed", limit.as_secs());
            }
            bail!("interrupted during {what}");
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Removes the lab when dropped, whatever happened (`down` works on a half-built lab).
struct LabGuard(String);

impl Drop for LabGuard {
    fn drop(&mut self) {
        if let Err(e) = lab::down(&self.0) {
            eprintln!("rtemu bench topo: removing lab {}: {e}", self.0);
        }
    }
}

/// Removes the baseline's namespaces when dropped, whatever happened.
struct BaselineGuard(String);

impl Drop for BaselineGuard {
    fn drop(&mut self) {
        for ns in baseline_namespaces(&self.0) {
            let _ = Command::new("ip")
                .args(["netns", "del", &ns])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// Removes the benchmark's scratch directory when dropped.
struct DirGuard(PathBuf);

impl Drop for DirGuard {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The medians of one shape and size, seconds.
#[derive(Debug, Serialize)]
struct Row {
    shape: Shape,
    nodes: usize,
    links: usize,
    runs: usize,
    rtemu_up_s: f64,
    rtemu_down_s: f64,
    ip_baseline_s: f64,
    ip_cleanup_s: f64,
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// Waits a little after a teardown: the kernel frees a removed namespace's interfaces in the
/// background, and the next measurement should not pay for the last one's.
fn settle(nodes: usize, stop: &Stop) -> Result<()> {
    let until = Instant::now() + Duration::from_millis(200 + 3 * nodes as u64);
    while Instant::now() < until {
        stop.check()?;
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// One shape and size: `runs` rounds of rtemu up, rtemu down, baseline, baseline clean-up.
fn measure(shape: Shape, nodes: usize, dir: &Path, stop: &Stop) -> Result<Row> {
    let exe = std::env::current_exe().context("finding the rtemu executable")?;
    let id = std::process::id() % 1000;
    let tag = shape
        .name()
        .chars()
        .next()
        .expect("shape names are not empty");
    // At most 12 characters: "bt" + c|s + up to 4 digits + "-" + up to 3 digits.
    let lab_name = format!("bt{tag}{nodes}-{id}");
    // Checked before any guard exists: a guard would remove someone else's lab of that name.
    if rtemu_topo::state::lab_dir(&lab_name).exists() {
        bail!("a lab named {lab_name} exists already: remove it with `rtemu down {lab_name}`");
    }
    let prefix = format!("rtbb{}-{tag}{nodes}-", std::process::id());
    let file = dir.join(format!("{lab_name}.toml"));
    std::fs::write(&file, topology(&lab_name, shape, nodes))
        .with_context(|| format!("writing {}", file.display()))?;
    let script = baseline_script(&prefix, shape, nodes);
    let cleanup = baseline_cleanup_script(&prefix);
    let limit = limit(nodes);
    let log = |step: &str| dir.join(format!("{lab_name}.{step}.log"));
    let (mut up, mut down, mut ip_up, mut ip_down) = (vec![], vec![], vec![], vec![]);
    for run in 1..=runs(nodes) {
        stop.check()?;
        eprintln!(
            "rtemu bench topo: {} of {nodes} nodes, run {run}/{}",
            shape.name(),
            runs(nodes)
        );
        {
            let _lab = LabGuard(lab_name.clone());
            let mut cmd = Command::new(&exe);
            cmd.arg("up").arg(&file);
            up.push(timed(cmd, "rtemu up", &log("up"), limit, stop)?);
            let mut cmd = Command::new(&exe);
            cmd.args(["down", &lab_name]);
            down.push(timed(cmd, "rtemu down", &log("down"), limit, stop)?);
        }
        settle(nodes, stop)?;
        {
            let _ns = BaselineGuard(prefix.clone());
            let mut cmd = Command::new("sh");
            cmd.args(["-c", &script]);
            ip_up.push(timed(cmd, "the ip baseline", &log("ip"), limit, stop)?);
            let made = baseline_namespaces(&prefix).len();
            if made != nodes {
                bail!("the ip baseline made {made} namespaces, not {nodes}");
            }
            let mut cmd = Command::new("sh");
            cmd.args(["-c", &cleanup]);
            ip_down.push(timed(
                cmd,
                "the ip baseline's clean-up",
                &log("ipdel"),
                limit,
                stop,
            )?);
        }
        settle(nodes, stop)?;
    }
    Ok(Row {
        shape,
        nodes,
        links: nodes - 1,
        runs: runs(nodes),
        rtemu_up_s: median(up),
        rtemu_down_s: median(down),
        ip_baseline_s: median(ip_up),
        ip_cleanup_s: median(ip_down),
    })
}

/// Runs `rtemu bench topo`; `json` prints JSON instead of the table.
pub fn run(json: bool) -> Result<()> {
    super::need_root("rtemu bench topo")?;
    for program in ["ip", "sh", "seq"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {program}")])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !found {
            bail!("rtemu bench topo needs `{program}` (Debian packages iproute2, coreutils)");
        }
    }
    let stop = Stop::install()?;
    let dir = std::env::temp_dir().join(format!("rtemu-bench-topo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let _dir = DirGuard(dir.clone());
    let mut rows = Vec::new();
    for nodes in SIZES {
        for shape in [Shape::Chain, Shape::Star] {
            rows.push(
                measure(shape, nodes, &dir, &stop)
                    .with_context(|| format!("{} of {nodes} nodes", shape.name()))?,
            );
        }
    }
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, &rows)?;
        writeln!(out)?;
        return Ok(());
    }
    writeln!(
        out,
        "rtemu bench topo: wall time of `rtemu up` and `rtemu down` (child processes), beside \
         `ip netns add` per node and `ip link add … netns … type veth peer … netns …` per link \
         in a shell loop; median of 3 runs (1 run of 1000 nodes)\n"
    )?;
    writeln!(
        out,
        "| shape | nodes | links | rtemu up s | rtemu down s | ip baseline s | ratio (up / ip) | ip cleanup s |"
    )?;
    writeln!(
        out,
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    )?;
    for r in &rows {
        writeln!(
            out,
            "| {} | {} | {} | {:.3} | {:.3} | {:.3} | {:.2} | {:.3} |",
            r.shape.name(),
            r.nodes,
            r.links,
            r.rtemu_up_s,
            r.rtemu_down_s,
            r.ip_baseline_s,
            r.rtemu_up_s / r.ip_baseline_s,
            r.ip_cleanup_s
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_topologies_are_valid_with_the_expected_links() {
        for shape in [Shape::Chain, Shape::Star] {
            for nodes in SIZES {
                let lab = format!("bt{}{nodes}-999", shape.name().chars().next().unwrap());
                assert!(lab.len() <= rtemu_topo::topology::MAX_LAB_NAME, "{lab}");
                let topo =
                    rtemu_topo::Topology::parse("b.toml", &topology(&lab, shape, nodes)).unwrap();
                assert_eq!(topo.nodes.len(), nodes);
                assert_eq!(topo.segments.len(), nodes - 1);
            }
        }
        assert_eq!(Shape::Star.links(4), [(0, 1), (0, 2), (0, 3)]);
        assert_eq!(Shape::Chain.links(3), [(0, 1), (1, 2)]);
    }

    #[test]
    fn the_baseline_script_names_every_namespace_with_its_prefix() {
        let s = baseline_script("p-", Shape::Star, 10);
        assert!(
            s.contains("seq 0 9") && s.contains("netns p-0 type veth"),
            "{s}"
        );
        assert!(baseline_cleanup_script("p-").contains("/run/netns/p-*"));
    }
}
