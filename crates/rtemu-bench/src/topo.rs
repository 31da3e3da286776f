//! `rtemu-bench topo`: how long `rtemu up` and `rtemu down` take, and how much memory they
//! peak at, for generated chains, stars, grids and random graphs of 10, 100 and 1000 nodes,
//! beside the same namespaces and veth pairs made with one `ip` command per object in a shell
//! script, in the same run. Measured and printed as a Markdown table, never asserted. Needs root.
//!
//! The peak memory is the maximum resident set size of the `rtemu up` and `rtemu down` child
//! processes as GNU time (`/usr/bin/time -f %M`, Debian package `time`) reports it from
//! `wait4`; without it the columns stay empty.
//!
//! With `--hosts N` (2 to 8) the same labs, given a `[hosts]` table of N hosts and placed by
//! rtemu, are brought up and down across N agents on this machine (the cluster of
//! [`crate::cluster`]: a network namespace per host on an underlay bridge, `rtemu serve` in
//! each with its own state, and a coordinator running `rtemu up FILE --credentials F` in a
//! namespace of its own) beside the plain lab on this machine, in the same run; then
//! [`crate::stitch`] measures an ideal link stitched between two hosts against a local one.
//! All hosts share this machine's CPUs, so the figures show the cost of the coordination and
//! the tunnels, not the speed-up of real machines.
//!
//! Every step runs as a child process with a time limit (killed past it); every lab, every
//! baseline namespace, the agents and the hosts are removed again, after an error, a time-out
//! or a Ctrl-C too.

use std::collections::HashSet;
use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rtemu_report::text::{Align, Table};
use rtemu_testutil::multihost::hosts_table;
use rtemu_topo::lab;
use serde::Serialize;

use crate::cluster::{Cluster, PORT};
use crate::stitch::{self, ClusterLabGuard, LinkOptions};

/// Node counts of the generated topologies.
const SIZES: [usize; 3] = [10, 100, 1000];

/// The generated shapes: a chain (node i to node i + 1), a star (node 0 to every other), a
/// grid (rows of `ceil(sqrt(n))` nodes, each linked to its right and lower neighbour; the last
/// row may be short) and a random connected graph (a random spanning tree plus random extra
/// links up to 1.5 links per node, from a fixed seed, so every run builds the same graph).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Shape {
    Chain,
    Star,
    Grid,
    Random,
}

/// Every shape, in the order measured.
const SHAPES: [Shape; 4] = [Shape::Chain, Shape::Star, Shape::Grid, Shape::Random];

/// The random graph's seed.
const SEED: u64 = 0x7274_656d_7521_0001;

/// xorshift64 (Marsaglia): enough randomness for a benchmark graph, no dependency.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A number below `n` (`n > 0`); the modulo bias is irrelevant here.
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

impl Shape {
    fn name(self) -> &'static str {
        match self {
            Shape::Chain => "chain",
            Shape::Star => "star",
            Shape::Grid => "grid",
            Shape::Random => "random",
        }
    }

    /// The links of `nodes` nodes, as pairs of node numbers.
    fn links(self, nodes: usize) -> Vec<(usize, usize)> {
        match self {
            Shape::Chain => (1..nodes).map(|i| (i - 1, i)).collect(),
            Shape::Star => (1..nodes).map(|i| (0, i)).collect(),
            Shape::Grid => {
                let cols = (1..=nodes).find(|c| c * c >= nodes).unwrap_or(1);
                let mut links = Vec::new();
                for i in 0..nodes {
                    if (i + 1) % cols != 0 && i + 1 < nodes {
                        links.push((i, i + 1));
                    }
                    if i + cols < nodes {
                        links.push((i, i + cols));
                    }
                }
                links
            }
            Shape::Random => {
                let mut rng = XorShift(SEED);
                // A spanning tree: node i joins a random earlier node, so the graph is connected.
                let mut links: Vec<(usize, usize)> =
                    (1..nodes).map(|i| (rng.below(i), i)).collect();
                let mut seen: HashSet<(usize, usize)> = links.iter().copied().collect();
                let max = nodes * nodes.saturating_sub(1) / 2;
                let want = (nodes * 3 / 2).min(max);
                while links.len() < want {
                    let (a, b) = (rng.below(nodes), rng.below(nodes));
                    let pair = (a.min(b), a.max(b));
                    if a != b && seen.insert(pair) {
                        links.push(pair);
                    }
                }
                links
            }
        }
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
fn topology(lab: &str, shape: Shape, nodes: usize, links: &[(usize, usize)]) -> String {
    let mut src =
        format!("# rtemu-bench topo: {shape:?}, {nodes} nodes\nlab = \"{lab}\"\nrouting = \"none\"\nip = \"ipv4\"\n");
    for i in 0..nodes {
        src.push_str(&format!("[nodes.n{i}]\n"));
    }
    for (a, b) in links {
        src.push_str(&format!("[[links]]\nendpoints = [\"n{a}\", \"n{b}\"]\n"));
    }
    src
}

/// The baseline as a shell script: `ip netns add` per node (a loop), then one
/// `ip link add … netns …` line per link, each veth end created directly in its namespace (as
/// rtemu does).
fn baseline_script(prefix: &str, nodes: usize, links: &[(usize, usize)]) -> String {
    let last = nodes - 1;
    let mut script =
        format!("set -e\nfor i in $(seq 0 {last}); do ip netns add {prefix}$i; done\n");
    for (k, (a, b)) in links.iter().enumerate() {
        script.push_str(&format!(
            "ip link add l{k}a netns {prefix}{a} type veth peer name l{k}b netns {prefix}{b}\n"
        ));
    }
    script
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
pub(crate) struct Stop(Arc<AtomicBool>);

impl Stop {
    pub(crate) fn install() -> Result<Stop> {
        let flag = Arc::new(AtomicBool::new(false));
        for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register(signal, Arc::clone(&flag))
                .context("installing the signal handler")?;
        }
        Ok(Stop(flag))
    }

    pub(crate) fn check(&self) -> Result<()> {
        if self.0.load(Ordering::Relaxed) {
            bail!("interrupted");
        }
        Ok(())
    }
}

/// Runs `cmd` in its own process group (a Ctrl-C reaches only the benchmark, which then ends
/// it) and returns its wall time in seconds; kills the group past `limit` or at a stop. Its
/// output goes to `log`, whose end a failure quotes.
pub(crate) fn timed(
    mut cmd: Command,
    what: &str,
    log: &Path,
    limit: Duration,
    stop: &Stop,
) -> Result<f64> {
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
            // The whole group: under GNU time the child is `time`, rtemu its child.
            let _ = Command::new("sh")
                .args(["-c", &format!("kill -9 -{}", child.id())])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
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
            eprintln!("rtemu-bench topo: removing lab {}: {e}", self.0);
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

/// The benchmark's scratch directory, removed when dropped.
pub(crate) struct DirGuard(pub(crate) PathBuf);

impl DirGuard {
    /// `rtemu-bench-WHAT-PID` in the temporary directory, new and private: the agents' tokens
    /// and the credentials file live in it (in a shared /tmp a directory someone else made
    /// first could hold links).
    pub(crate) fn new(what: &str) -> Result<DirGuard> {
        let dir = std::env::temp_dir().join(format!("rtemu-bench-{what}-{}", std::process::id()));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .with_context(|| format!("creating {}", dir.display()))?;
        Ok(DirGuard(dir))
    }
}

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
    /// The largest peak resident set size of `rtemu up` over the runs, MiB (None without GNU
    /// time).
    rtemu_up_peak_mib: Option<f64>,
    /// The same of `rtemu down`.
    rtemu_down_peak_mib: Option<f64>,
    ip_baseline_s: f64,
    ip_cleanup_s: f64,
}

/// GNU time, when installed: it reports a child's peak resident set size (`%M`, KiB, from
/// `wait4`'s `ru_maxrss`), which this process cannot read without a `libc` dependency.
const GNU_TIME: &str = "/usr/bin/time";

fn have_gnu_time() -> bool {
    Command::new(GNU_TIME)
        .args(["-f", "%M", "-o", "/dev/null", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs rtemu with `args` under [`timed`], under GNU time when `rss` names the file it writes
/// the peak to; returns the wall time and the peak in MiB.
fn rtemu_step(
    args: &[&std::ffi::OsStr],
    what: &str,
    log: &Path,
    rss: Option<&Path>,
    limit: Duration,
    stop: &Stop,
) -> Result<(f64, Option<f64>)> {
    let exe = crate::rtemu()?;
    let mut cmd = match rss {
        Some(file) => {
            let _ = std::fs::remove_file(file);
            let mut cmd = Command::new(GNU_TIME);
            cmd.args(["-f", "%M", "-o"]).arg(file).arg(&exe);
            cmd
        }
        None => Command::new(&exe),
    };
    cmd.args(args);
    let secs = timed(cmd, what, log, limit, stop)?;
    let peak = match rss {
        Some(file) => Some(
            parse_peak_kib(&std::fs::read_to_string(file).unwrap_or_default()).with_context(
                || format!("reading the peak memory of {what} from {}", file.display()),
            )? as f64
                / 1024.0,
        ),
        None => None,
    };
    Ok((secs, peak))
}

/// The `%M` of GNU time's output file: the last line, KiB.
fn parse_peak_kib(text: &str) -> Result<u64> {
    let line = text.lines().last().unwrap_or("").trim();
    line.parse()
        .with_context(|| format!("`{line}` is not a number of KiB"))
}

fn peak(xs: &[Option<f64>]) -> Option<f64> {
    xs.iter()
        .copied()
        .collect::<Option<Vec<f64>>>()?
        .into_iter()
        .reduce(f64::max)
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

/// `name` (at most 12 characters: "bt" or "bh" + c|s|g|r + up to 4 digits + "-" + up to 3
/// digits), if no lab of that name runs on this machine. Checked before any guard exists: a
/// guard would remove someone else's lab of that name.
fn fresh_lab(name: &str) -> Result<String> {
    if rtemu_topo::state::lab_dir(&rtemu_topo::state::LabName::new(name)?).exists() {
        bail!("a lab named {name} exists already: remove it with `rtemu down {name}`");
    }
    Ok(name.to_owned())
}

/// The first letter of a shape's name, for lab names.
fn shape_tag(shape: Shape) -> char {
    shape
        .name()
        .chars()
        .next()
        .expect("shape names are not empty")
}

/// Run `run` of a shape and size begins: it stops at a Ctrl-C, and says which.
fn begin_run(shape: Shape, nodes: usize, run: usize, stop: &Stop) -> Result<()> {
    stop.check()?;
    eprintln!(
        "rtemu-bench topo: {} of {nodes} nodes, run {run}/{}",
        shape.name(),
        runs(nodes)
    );
    Ok(())
}

/// `rtemu up FILE` then `rtemu down LAB` on this machine, their logs in `dir`, the lab
/// removed whatever happens: each one's wall time and peak memory (when `rss` names the files
/// GNU time writes it to for `up` and `down`).
fn up_down_here(
    lab: &str,
    file: &Path,
    dir: &Path,
    rss: [Option<&Path>; 2],
    limit: Duration,
    stop: &Stop,
) -> Result<[(f64, Option<f64>); 2]> {
    let _lab = LabGuard(lab.to_owned());
    let log = |step: &str| dir.join(format!("{lab}.{step}.log"));
    let up_args = ["up".as_ref(), file.as_os_str()];
    let up = rtemu_step(&up_args, "rtemu up", &log("up"), rss[0], limit, stop)?;
    let down_args = ["down".as_ref(), lab.as_ref()];
    let down = rtemu_step(&down_args, "rtemu down", &log("down"), rss[1], limit, stop)?;
    Ok([up, down])
}

/// One shape and size: `runs` rounds of rtemu up, rtemu down, baseline, baseline clean-up.
fn measure(shape: Shape, nodes: usize, dir: &Path, time: bool, stop: &Stop) -> Result<Row> {
    let id = std::process::id() % 1000;
    let tag = shape_tag(shape);
    let lab_name = fresh_lab(&format!("bt{tag}{nodes}-{id}"))?;
    let prefix = format!("rtbb{}-{tag}{nodes}-", std::process::id());
    let file = dir.join(format!("{lab_name}.toml"));
    let links = shape.links(nodes);
    std::fs::write(&file, topology(&lab_name, shape, nodes, &links))
        .with_context(|| format!("writing {}", file.display()))?;
    // A file, not `sh -c`: a script of 2000 links is past the kernel's 128 KiB per argument.
    let script = dir.join(format!("{lab_name}.ip.sh"));
    std::fs::write(&script, baseline_script(&prefix, nodes, &links))
        .with_context(|| format!("writing {}", script.display()))?;
    let cleanup = baseline_cleanup_script(&prefix);
    let limit = limit(nodes);
    let log = |step: &str| dir.join(format!("{lab_name}.{step}.log"));
    let rss = |step: &str| time.then(|| dir.join(format!("{lab_name}.{step}.rss")));
    let (up_rss, down_rss) = (rss("up"), rss("down"));
    let (mut up, mut down, mut ip_up, mut ip_down) = (vec![], vec![], vec![], vec![]);
    let (mut up_peak, mut down_peak) = (vec![], vec![]);
    for run in 1..=runs(nodes) {
        begin_run(shape, nodes, run, stop)?;
        let rss = [up_rss.as_deref(), down_rss.as_deref()];
        let [(up_s, up_mib), (down_s, down_mib)] =
            up_down_here(&lab_name, &file, dir, rss, limit, stop)?;
        up.push(up_s);
        up_peak.push(up_mib);
        down.push(down_s);
        down_peak.push(down_mib);
        settle(nodes, stop)?;
        {
            let _ns = BaselineGuard(prefix.clone());
            let mut cmd = Command::new("sh");
            cmd.arg(&script);
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
        links: links.len(),
        runs: runs(nodes),
        rtemu_up_s: median(up),
        rtemu_down_s: median(down),
        rtemu_up_peak_mib: peak(&up_peak),
        rtemu_down_peak_mib: peak(&down_peak),
        ip_baseline_s: median(ip_up),
        ip_cleanup_s: median(ip_down),
    })
}

/// What `rtemu-bench topo` measures.
pub struct Options {
    /// Print JSON instead of the tables.
    pub json: bool,
    /// The node counts (empty: 10, 100 and 1000).
    pub nodes: Vec<usize>,
    /// Spread each lab over this many agents on this machine, against one host, and measure
    /// a stitched link against a local one; none: one host against plain `ip` commands.
    pub hosts: Option<usize>,
    /// Pings per path of the link part.
    pub pings: u32,
    /// Seconds of iperf3 each way per path of the link part.
    pub seconds: u32,
}

/// Fails unless every one of `programs` can be started, naming the Debian packages.
fn need_programs(programs: &[&str], packages: &str) -> Result<()> {
    for program in programs {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {program}")])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !found {
            bail!("rtemu-bench topo needs `{program}` (Debian packages {packages})");
        }
    }
    Ok(())
}

/// Runs `rtemu-bench topo`.
pub fn run(opts: &Options) -> Result<()> {
    rtemu_control::root::need_root("rtemu-bench topo")?;
    need_programs(&["ip", "sh", "seq"], "iproute2, coreutils")?;
    let stop = Stop::install()?;
    let scratch = DirGuard::new("topo")?;
    let dir = &scratch.0;
    let sizes = if opts.nodes.is_empty() {
        SIZES.to_vec()
    } else {
        opts.nodes.clone()
    };
    match opts.hosts {
        Some(hosts) => run_hosts(opts, hosts, &sizes, dir, &stop),
        None => run_one_host(opts.json, &sizes, dir, &stop),
    }
}

/// One host against `ip`: the rows of every shape of every size, as a table or JSON.
fn run_one_host(json: bool, sizes: &[usize], dir: &Path, stop: &Stop) -> Result<()> {
    let time = have_gnu_time();
    if !time {
        eprintln!(
            "rtemu-bench topo: {GNU_TIME} (GNU time, Debian package `time`) is missing: \
             no peak memory"
        );
    }
    let mut rows = Vec::new();
    for &nodes in sizes {
        for shape in SHAPES {
            rows.push(
                measure(shape, nodes, dir, time, stop)
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
        "rtemu-bench topo: wall time of `rtemu up` and `rtemu down` (child processes) and their \
         peak resident set size (GNU time's %M, the largest of the runs), beside `ip netns add` \
         per node and `ip link add … netns … type veth peer … netns …` per link in a shell \
         script; median of 3 runs (1 run of 1000 nodes)\n"
    )?;
    let table = Table::start_figures(
        &mut out,
        &[
            "shape",
            "nodes",
            "links",
            "rtemu up s",
            "rtemu down s",
            "up peak MiB",
            "down peak MiB",
            "ip baseline s",
            "ratio (up / ip)",
            "ip cleanup s",
        ],
    )?;
    let mib = |m: Option<f64>| m.map_or_else(|| "–".to_owned(), |m| format!("{m:.1}"));
    for r in &rows {
        table.row(
            &mut out,
            &[
                r.shape.name().to_string(),
                r.nodes.to_string(),
                r.links.to_string(),
                format!("{:.3}", r.rtemu_up_s),
                format!("{:.3}", r.rtemu_down_s),
                mib(r.rtemu_up_peak_mib),
                mib(r.rtemu_down_peak_mib),
                format!("{:.3}", r.ip_baseline_s),
                format!("{:.2}", r.rtemu_up_s / r.ip_baseline_s),
                format!("{:.3}", r.ip_cleanup_s),
            ],
        )?;
    }
    Ok(())
}

/// The medians of one shape and size on one host and over the cluster's agents, seconds.
#[derive(Debug, Serialize)]
struct HostsRow {
    shape: Shape,
    nodes: usize,
    links: usize,
    /// Links whose ends rtemu placed on different hosts (VXLAN-stitched).
    stitched: usize,
    runs: usize,
    one_host_up_s: f64,
    one_host_down_s: f64,
    hosts_up_s: f64,
    hosts_down_s: f64,
}

/// One shape and size: `runs` rounds of `rtemu up` and `rtemu down` on this machine, then of
/// the same lab with `[hosts]` through the cluster's coordinator.
fn measure_hosts(
    shape: Shape,
    nodes: usize,
    cluster: &Cluster,
    dir: &Path,
    stop: &Stop,
) -> Result<HostsRow> {
    let id = std::process::id() % 1000;
    let tag = shape_tag(shape);
    let local = fresh_lab(&format!("bt{tag}{nodes}-{id}"))?;
    // Only in the agents' and the coordinator's private state: no one else's.
    let spread = format!("bh{tag}{nodes}-{id}");
    let links = shape.links(nodes);
    let local_file = dir.join(format!("{local}.toml"));
    std::fs::write(&local_file, topology(&local, shape, nodes, &links))
        .with_context(|| format!("writing {}", local_file.display()))?;
    let spread_file = dir.join(format!("{spread}.toml"));
    let spread_src =
        topology(&spread, shape, nodes, &links) + &hosts_table(cluster.agents.len(), Some(PORT));
    let stitched = rtemu_topo::Topology::parse(&spread_file.display().to_string(), &spread_src)?
        .stitched()
        .count();
    std::fs::write(&spread_file, spread_src)
        .with_context(|| format!("writing {}", spread_file.display()))?;
    let credentials = cluster.credentials();
    let with_credentials = |verb: &str, what: &std::ffi::OsStr| {
        cluster.coordinate(&[
            verb.as_ref(),
            what,
            "--credentials".as_ref(),
            credentials.as_os_str(),
        ])
    };
    let limit = limit(nodes);
    let log = |step: &str| dir.join(format!("{spread}.{step}.log"));
    let (mut up, mut down, mut spread_up, mut spread_down) = (vec![], vec![], vec![], vec![]);
    for run in 1..=runs(nodes) {
        begin_run(shape, nodes, run, stop)?;
        let [(up_s, _), (down_s, _)] =
            up_down_here(&local, &local_file, dir, [None, None], limit, stop)?;
        up.push(up_s);
        down.push(down_s);
        settle(nodes, stop)?;
        {
            let _lab = ClusterLabGuard {
                cluster,
                lab: spread.clone(),
            };
            let cmd = with_credentials("up", spread_file.as_os_str());
            spread_up.push(timed(cmd, "rtemu up over agents", &log("up"), limit, stop)?);
            let cmd = with_credentials("down", spread.as_ref());
            let what = "rtemu down over agents";
            spread_down.push(timed(cmd, what, &log("down"), limit, stop)?);
        }
        settle(nodes, stop)?;
    }
    Ok(HostsRow {
        shape,
        nodes,
        links: links.len(),
        stitched,
        runs: runs(nodes),
        one_host_up_s: median(up),
        one_host_down_s: median(down),
        hosts_up_s: median(spread_up),
        hosts_down_s: median(spread_down),
    })
}

/// The cluster of `hosts` agents: every shape of every size on one host and over the agents,
/// then the link part; as tables or JSON.
fn run_hosts(opts: &Options, hosts: usize, sizes: &[usize], dir: &Path, stop: &Stop) -> Result<()> {
    need_programs(
        &["ping", "iperf3", "mount", "timeout"],
        "iputils-ping, iperf3, mount, coreutils",
    )?;
    let exe = crate::rtemu()?;
    eprintln!("rtemu-bench topo: starting {hosts} agents");
    let cluster = Cluster::start(&exe, "b", hosts, dir)?;
    let mut rows = Vec::new();
    for &nodes in sizes {
        for shape in SHAPES {
            rows.push(
                measure_hosts(shape, nodes, &cluster, dir, stop).with_context(|| {
                    format!("{} of {nodes} nodes over {hosts} hosts", shape.name())
                })?,
            );
        }
    }
    let mut out = std::io::stdout().lock();
    // The first table as soon as it is measured: the link part may still fail.
    if !opts.json {
        writeln!(
            out,
            "rtemu-bench topo --hosts {hosts}: wall time of `rtemu up FILE` and `rtemu down LAB` \
             on one host (this machine), beside the same lab with `[hosts]` h1…h{hosts} (nodes \
             placed by rtemu) brought up and down by a coordinator (`--credentials`, in a \
             namespace of its own) over {hosts} agents (`rtemu serve`, each in a namespace of its \
             own on an underlay bridge, all on this machine's CPUs); child processes, median of 3 \
             runs (1 run of 1000 nodes)\n"
        )?;
        let table = Table::start_figures(
            &mut out,
            &[
                "shape",
                "nodes",
                "links",
                "stitched links",
                "1 host up s",
                "1 host down s",
                &format!("{hosts} hosts up s"),
                &format!("{hosts} hosts down s"),
                &format!("up ratio ({hosts} / 1)"),
                &format!("down ratio ({hosts} / 1)"),
            ],
        )?;
        for r in &rows {
            table.row(
                &mut out,
                &[
                    r.shape.name().to_string(),
                    r.nodes.to_string(),
                    r.links.to_string(),
                    r.stitched.to_string(),
                    format!("{:.3}", r.one_host_up_s),
                    format!("{:.3}", r.one_host_down_s),
                    format!("{:.3}", r.hosts_up_s),
                    format!("{:.3}", r.hosts_down_s),
                    format!("{:.2}", r.hosts_up_s / r.one_host_up_s),
                    format!("{:.2}", r.hosts_down_s / r.one_host_down_s),
                ],
            )?;
        }
        out.flush()?;
    }
    eprintln!("rtemu-bench topo: a local and a stitched link");
    let link_opts = LinkOptions {
        pings: opts.pings,
        seconds: opts.seconds,
        stop,
    };
    let links = stitch::measure(&cluster, dir, &link_opts)?;
    if opts.json {
        let all = serde_json::json!({"hosts": hosts, "up_down": rows, "links": links});
        serde_json::to_writer_pretty(&mut out, &all)?;
        writeln!(out)?;
        return Ok(());
    }
    writeln!(
        out,
        "\nAn ideal link a–b, local (both on h1) and stitched (a on h1, b on h2), and the \
         underlay between h1 and h2: ping a → b ({} pings 10 ms apart, after one unmeasured), \
         iperf3 TCP for {} s each way (the receiver's rate)\n",
        opts.pings, opts.seconds
    )?;
    let mut columns = [
        "path",
        "ends",
        "RTT p50 µs",
        "RTT p99 µs",
        "TCP a → b Mbit/s",
        "TCP b → a Mbit/s",
    ]
    .map(|h| (h, Align::Right));
    columns[0].1 = Align::Left;
    columns[1].1 = Align::Left;
    let table = Table::start(&mut out, &columns)?;
    for l in &links {
        table.row(
            &mut out,
            &[
                l.path.to_string(),
                l.ends.to_string(),
                format!("{:.1}", l.rtt_p50_us),
                format!("{:.1}", l.rtt_p99_us),
                format!("{:.0}", l.forward_mbit_s),
                format!("{:.0}", l.reverse_mbit_s),
            ],
        )?;
    }
    let (local, stitched) = (&links[0], &links[1]);
    writeln!(
        out,
        "\nThe stitch adds {:.1} µs to the median round trip ({:.1} µs at the 99th percentile) \
         and carries {:.0} % (a → b) and {:.0} % (b → a) of the local link's TCP throughput.",
        stitched.rtt_p50_us - local.rtt_p50_us,
        stitched.rtt_p99_us - local.rtt_p99_us,
        100.0 * stitched.forward_mbit_s / local.forward_mbit_s,
        100.0 * stitched.reverse_mbit_s / local.reverse_mbit_s
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_topologies_are_valid_with_the_expected_links() {
        for shape in SHAPES {
            for nodes in SIZES {
                let lab = format!("bt{}{nodes}-999", shape.name().chars().next().unwrap());
                assert!(lab.len() <= rtemu_topo::topology::MAX_LAB_NAME, "{lab}");
                let links = shape.links(nodes);
                let topo =
                    rtemu_topo::Topology::parse("b.toml", &topology(&lab, shape, nodes, &links))
                        .unwrap();
                assert_eq!(topo.nodes.len(), nodes);
                assert_eq!(topo.segments.len(), links.len());
            }
        }
        assert_eq!(Shape::Star.links(4), [(0, 1), (0, 2), (0, 3)]);
        assert_eq!(Shape::Chain.links(3), [(0, 1), (1, 2)]);
        // ceil(sqrt(10)) = 4 columns: 0 1 2 3 / 4 5 6 7 / 8 9.
        assert_eq!(
            Shape::Grid.links(10),
            [
                (0, 1),
                (0, 4),
                (1, 2),
                (1, 5),
                (2, 3),
                (2, 6),
                (3, 7),
                (4, 5),
                (4, 8),
                (5, 6),
                (5, 9),
                (6, 7),
                (8, 9)
            ]
        );
        assert_eq!(Shape::Grid.links(100).len(), 180);
        assert_eq!(Shape::Grid.links(1000).len(), 1936);
    }

    #[test]
    fn the_random_graph_is_connected_simple_and_the_same_every_time() {
        for nodes in SIZES {
            let links = Shape::Random.links(nodes);
            assert_eq!(links.len(), nodes * 3 / 2);
            assert_eq!(links, Shape::Random.links(nodes));
            let distinct: HashSet<(usize, usize)> =
                links.iter().map(|&(a, b)| (a.min(b), a.max(b))).collect();
            assert_eq!(distinct.len(), links.len(), "no link twice");
            assert!(links.iter().all(|&(a, b)| a != b && a < nodes && b < nodes));
            // Connected: a flood from node 0 reaches every node.
            let mut reached = vec![false; nodes];
            reached[0] = true;
            let mut todo = vec![0];
            while let Some(n) = todo.pop() {
                for &(a, b) in &links {
                    for (x, y) in [(a, b), (b, a)] {
                        if x == n && !reached[y] {
                            reached[y] = true;
                            todo.push(y);
                        }
                    }
                }
            }
            assert!(reached.iter().all(|&r| r), "{nodes} nodes");
        }
    }

    #[test]
    fn the_baseline_script_names_every_namespace_with_its_prefix() {
        let s = baseline_script("p-", 10, &Shape::Star.links(10));
        assert!(
            s.contains("seq 0 9")
                && s.contains("ip link add l0a netns p-0 type veth peer name l0b netns p-1\n"),
            "{s}"
        );
        assert_eq!(
            s.lines().filter(|l| l.starts_with("ip link add")).count(),
            9
        );
        assert!(baseline_cleanup_script("p-").contains("/run/netns/p-*"));
    }

    #[test]
    fn the_peak_is_the_last_line_of_gnu_times_file() {
        assert_eq!(parse_peak_kib("1572\n").unwrap(), 1572);
        assert_eq!(
            parse_peak_kib("Command exited with non-zero status 1\n2048\n").unwrap(),
            2048
        );
        assert!(parse_peak_kib("").is_err());
        assert_eq!(peak(&[Some(1.0), Some(3.0), Some(2.0)]), Some(3.0));
        assert_eq!(peak(&[Some(1.0), None]), None);
    }
}
