//! The link part of `rtemu-bench topo --hosts N`: what a VXLAN-stitched ideal link costs
//! against a local one. A two-node lab a–b over the cluster's agents, once with both nodes on
//! h1 (a local veth pair) and once with a on h1 and b on h2 (the link stitched over the
//! underlay), and the underlay itself between the hosts' namespaces: ping round trips (median
//! and 99th percentile) and iperf3 TCP throughput both ways. Measured and printed, never
//! asserted.

use std::process::Command;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use rtemu_testutil::multihost::{host_address, hosts_table};
use serde::Serialize;
use serde_json::Value;

use crate::cluster::{Agent, Cluster, PORT};
use crate::engine::{p50_p99, ping_rtts};
use crate::topo::{timed, Stop};

/// iperf3's port in the nodes and the hosts.
const IPERF_PORT: u16 = 5201;

/// What was measured on one path.
#[derive(Debug, Serialize)]
pub(crate) struct LinkRow {
    /// Which path: `local link`, `stitched link` or `underlay`.
    pub path: &'static str,
    /// Where its ends are.
    pub ends: &'static str,
    /// Median ping round trip, µs.
    pub rtt_p50_us: f64,
    /// 99th percentile round trip, µs.
    pub rtt_p99_us: f64,
    /// iperf3 TCP from the first end to the second, Mbit/s (the receiver's count).
    pub forward_mbit_s: f64,
    /// The same the other way (iperf3 `-R`).
    pub reverse_mbit_s: f64,
}

/// The two ends of a path and how to run a program at each.
enum Ends<'a> {
    /// Nodes `a` and `b` of `lab`, through their hosts' agents.
    Lab {
        lab: &'a str,
        a: &'a Agent,
        b: &'a Agent,
    },
    /// The namespaces of two hosts, b at `address`.
    Underlay {
        a: &'a str,
        b: &'a str,
        address: String,
    },
}

impl Ends<'_> {
    /// Runs `argv` at end b (`at_b`) or a for at most `limit`: its standard output, or an
    /// error with its standard error when it fails.
    fn run(&self, at_b: bool, argv: &[&str], limit: Duration) -> Result<String> {
        let what = argv.join(" ");
        match self {
            Ends::Lab { lab, a, b } => {
                let (agent, node) = if at_b { (b, "b") } else { (a, "a") };
                let reply = agent.exec(lab, node, argv, limit)?;
                if reply.status != Some(0) {
                    bail!(
                        "`{what}` in node {node} failed ({:?}): {} {}",
                        reply.status,
                        reply.stderr.trim(),
                        reply.stdout.trim()
                    );
                }
                Ok(reply.stdout)
            }
            Ends::Underlay { a, b, .. } => {
                let ns = if at_b { b } else { a };
                let out = Command::new("timeout")
                    .arg(limit.as_secs().to_string())
                    .args(["ip", "netns", "exec", ns])
                    .args(argv)
                    .output()
                    .with_context(|| format!("running `{what}` in {ns}"))?;
                if !out.status.success() {
                    bail!(
                        "`{what}` in {ns} failed ({}): {} {}",
                        out.status,
                        String::from_utf8_lossy(&out.stderr).trim(),
                        String::from_utf8_lossy(&out.stdout).trim()
                    );
                }
                Ok(String::from_utf8_lossy(&out.stdout).into_owned())
            }
        }
    }

    /// Where end a reaches end b.
    fn target(&self) -> &str {
        match self {
            Ends::Lab { .. } => "b",
            Ends::Underlay { address, .. } => address,
        }
    }

    /// The round trips a → b of `pings` pings 10 ms apart, after one unmeasured ping that
    /// resolves the neighbour.
    fn rtts(&self, pings: u32) -> Result<Vec<f64>> {
        let to = self.target();
        let limit = Duration::from_secs(30);
        self.run(false, &["ping", "-n", "-c", "1", "-W", "2", to], limit)?;
        let count = pings.to_string();
        let limit = limit + Duration::from_millis(10 * u64::from(pings));
        let out = self.run(
            false,
            &["ping", "-n", "-c", &count, "-i", "0.01", "-W", "2", to],
            limit,
        )?;
        let rtts = ping_rtts(&out);
        if rtts.is_empty() {
            bail!("no ping came back: {out}");
        }
        Ok(rtts)
    }

    /// iperf3 TCP for `seconds` from a to b (or b to a, `reverse`): the receiver's Mbit/s.
    fn tcp(&self, seconds: u32, reverse: bool) -> Result<f64> {
        let port = IPERF_PORT.to_string();
        let limit = Duration::from_secs(u64::from(seconds) + 30);
        let secs = seconds.to_string();
        let mut argv = vec![
            "iperf3",
            "-c",
            self.target(),
            "-p",
            &port,
            "-t",
            &secs,
            "-J",
        ];
        if reverse {
            argv.push("-R");
        }
        // The server runs in the foreground for one connection, its run waited for on a
        // thread: a daemonized one (`-D`) may be killed with its parent's process group (an
        // agent's exec ends what its command leaves in its group) before it leaves it.
        let out = std::thread::scope(|scope| {
            let server =
                scope.spawn(|| self.run(true, &["iperf3", "-s", "-1", "-p", &port], limit));
            let client = self
                .wait_listening(&port)
                .and_then(|()| self.run(false, &argv, limit));
            let served = server
                .join()
                .map_err(|_| anyhow!("the iperf3 server's thread panicked"))?;
            let out = client?;
            served.context("the iperf3 server")?;
            Ok::<_, anyhow::Error>(out)
        })?;
        let report: Value = serde_json::from_str(&out).context("reading iperf3's JSON")?;
        iperf_received_mbit_s(&report)
    }

    /// Waits until something listens on TCP `port` at end b (the iperf3 server, started on
    /// another thread), up to 10 s.
    fn wait_listening(&self, port: &str) -> Result<()> {
        let filter = format!("sport = :{port}");
        let started = std::time::Instant::now();
        let limit = Duration::from_secs(10);
        while self
            .run(true, &["ss", "-Htln", &filter], limit)?
            .trim()
            .is_empty()
        {
            if started.elapsed() > limit {
                bail!("nothing listens on TCP port {port} 10 s after iperf3 -s started");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    fn measure(
        &self,
        path: &'static str,
        ends: &'static str,
        opts: &LinkOptions,
    ) -> Result<LinkRow> {
        let (rtt_p50_us, rtt_p99_us) = p50_p99(self.rtts(opts.pings)?);
        opts.stop.check()?;
        let forward_mbit_s = self.tcp(opts.seconds, false)?;
        opts.stop.check()?;
        let reverse_mbit_s = self.tcp(opts.seconds, true)?;
        Ok(LinkRow {
            path,
            ends,
            rtt_p50_us,
            rtt_p99_us,
            forward_mbit_s,
            reverse_mbit_s,
        })
    }
}

/// The receiver's throughput of an iperf3 TCP report (`end.sum_received`), Mbit/s.
fn iperf_received_mbit_s(report: &Value) -> Result<f64> {
    report["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .map(|b| b / 1e6)
        .with_context(|| {
            format!("no end.sum_received.bits_per_second in iperf3's report: {report}")
        })
}

/// How much to measure.
pub(crate) struct LinkOptions<'a> {
    /// Pings per path.
    pub pings: u32,
    /// Seconds of iperf3 each way.
    pub seconds: u32,
    /// Ctrl-C.
    pub stop: &'a Stop,
}

/// The two-node lab `lab` with b on host `b_host`, a on h1, over two hosts' agents.
fn pair(lab: &str, b_host: &str) -> String {
    format!(
        "# rtemu-bench topo --hosts: a link a–b\nlab = \"{lab}\"\nrouting = \"none\"\nip = \"ipv4\"\n\
         {}[nodes.a]\nhost = \"h1\"\n[nodes.b]\nhost = \"{b_host}\"\n\
         [[links]]\nname = \"ab\"\nendpoints = [\"a\", \"b\"]\n",
        hosts_table(2, Some(PORT))
    )
}

/// Takes a cluster lab down when dropped, whatever happened.
pub(crate) struct ClusterLabGuard<'a> {
    /// The cluster.
    pub cluster: &'a Cluster,
    /// The lab.
    pub lab: String,
}

impl Drop for ClusterLabGuard<'_> {
    fn drop(&mut self) {
        let credentials = self.cluster.credentials();
        let args = [
            "down".as_ref(),
            self.lab.as_ref(),
            "--credentials".as_ref(),
            credentials.as_os_str(),
        ];
        let _ = self.cluster.coordinate(&args).output();
    }
}

/// Brings one pair up over the cluster, measures it, takes it down.
fn pair_row(
    cluster: &Cluster,
    dir: &std::path::Path,
    stitched: bool,
    opts: &LinkOptions,
) -> Result<LinkRow> {
    let id = std::process::id() % 100_000;
    let (lab, b_host, path, ends) = if stitched {
        (
            format!("bss{id}"),
            "h2",
            "stitched link",
            "a on h1, b on h2",
        )
    } else {
        (format!("bsl{id}"), "h1", "local link", "a, b on h1")
    };
    let file = dir.join(format!("{lab}.toml"));
    std::fs::write(&file, pair(&lab, b_host))
        .with_context(|| format!("writing {}", file.display()))?;
    let credentials = cluster.credentials();
    let _lab = ClusterLabGuard {
        cluster,
        lab: lab.clone(),
    };
    let up = cluster.coordinate(&[
        "up".as_ref(),
        file.as_os_str(),
        "--credentials".as_ref(),
        credentials.as_os_str(),
    ]);
    timed(
        up,
        "rtemu up",
        &dir.join(format!("{lab}.up.log")),
        Duration::from_secs(60),
        opts.stop,
    )?;
    let link = Ends::Lab {
        lab: &lab,
        a: &cluster.agents[0],
        b: &cluster.agents[if stitched { 1 } else { 0 }],
    };
    link.measure(path, ends, opts)
}

/// Measures the local link, the stitched link and the underlay on `cluster` (at least two
/// agents), writing the labs' files and logs to `dir`.
pub(crate) fn measure(
    cluster: &Cluster,
    dir: &std::path::Path,
    opts: &LinkOptions,
) -> Result<Vec<LinkRow>> {
    let local = pair_row(cluster, dir, false, opts).context("the local link")?;
    opts.stop.check()?;
    let stitched = pair_row(cluster, dir, true, opts).context("the stitched link")?;
    opts.stop.check()?;
    let underlay = Ends::Underlay {
        a: &cluster.hosts.names[0],
        b: &cluster.hosts.names[1],
        address: host_address(1),
    }
    .measure("underlay", "h1 to h2, no lab", opts)
    .context("the underlay")?;
    Ok(vec![local, stitched, underlay])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pairs_place_b_as_asked_and_only_the_stitched_one_crosses() {
        for (b_host, crossing) in [("h1", 0), ("h2", 1)] {
            let topo = rtemu_topo::Topology::parse("p.toml", &pair("bss1", b_host)).unwrap();
            assert_eq!(topo.nodes.len(), 2);
            assert_eq!(topo.stitched().count(), crossing);
        }
    }

    #[test]
    fn the_receivers_throughput_is_read_from_iperf3s_report() {
        let report = serde_json::json!({"end": {"sum_received": {"bits_per_second": 9.5e9}}});
        assert_eq!(iperf_received_mbit_s(&report).unwrap(), 9500.0);
        assert!(iperf_received_mbit_s(&serde_json::json!({"error": "x"})).is_err());
    }
}
