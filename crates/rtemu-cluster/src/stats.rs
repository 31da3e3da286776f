//! `rtemu stats LAB` of a lab across hosts: each impaired link's counters come from the engine
//! that carries it, on its engine host; the directions of every engine make one report, in
//! the topology's order, shown as one lab's stats are.

use std::time::Duration;

use anyhow::{bail, Result};
use rtemu_api::body::StatsReply;
use rtemu_control::message::{Done, FinalReport, Stats};
use rtemu_topo::state::LabName;
use rtemu_topo::Topology;

use crate::spread::{ask_each, Spread};
use crate::{Agent, ClusterError};

/// How long an engine host's agent may take to answer.
const STATS_TIMEOUT: Duration = Duration::from_secs(5);

pub use rtemu_api::body::{HostEngine as Engine, MissingStats as Missing, SpreadStats};

/// The report of lab `topo` from each engine host's stats, and the hosts (with why) that gave
/// none.
pub fn merge(
    topo: &Topology,
    each: Vec<(String, Stats)>,
    failed: Vec<(String, String)>,
) -> SpreadStats {
    let mut directions = Vec::new();
    let mut engines = Vec::new();
    for (host, stats) in each {
        engines.push(Engine::of(host, &stats));
        directions.extend(stats.directions);
    }
    // Stable: each link's directions keep their engine's order (a-b, then b-a).
    let index = topo.segment_indices();
    directions.sort_by_key(|d| index.get(d.link.as_str()).copied());
    let missing = failed
        .into_iter()
        .map(|(host, problem)| Missing {
            links: links_on(topo, &host),
            host,
            problem,
        })
        .collect();
    SpreadStats {
        lab: topo.lab.clone(),
        directions,
        engines,
        missing,
    }
}

/// The final reports of the engines of lab `lab` (`topo`, when known: the order of its
/// links), one per engine host, as one report, as `rtemu down` shows a lab's on one machine:
/// every direction in the topology's order, the release threads numbered one after another
/// (each direction naming its own), the CPU time of all, the longest wall time, and each
/// notice after its host's name. An engine that failed to report is a notice naming its host
/// beside the others' counters; `Failed` only when every one failed. `None` without reports.
pub fn final_report(
    lab: &LabName,
    topo: Option<&Topology>,
    each: Vec<(String, FinalReport)>,
) -> Option<FinalReport> {
    if each.is_empty() {
        return None;
    }
    let mut merged = Done {
        cpu_ns: 0,
        directions: Vec::new(),
        lab: lab.clone(),
        notices: Vec::new(),
        threads: Vec::new(),
        wall_ns: 0,
    };
    let mut failed = Vec::new();
    let mut reported = false;
    for (host, report) in each {
        match report {
            FinalReport::Done(done) => {
                reported = true;
                let first = merged.threads.len();
                merged.cpu_ns += done.cpu_ns;
                merged.wall_ns = merged.wall_ns.max(done.wall_ns);
                merged
                    .directions
                    .extend(done.directions.into_iter().map(|mut d| {
                        d.thread = d.thread.map(|t| t + first);
                        d
                    }));
                merged.threads.extend(done.threads.into_iter().map(|mut t| {
                    t.index += first;
                    t
                }));
                let notices = done.notices.into_iter();
                merged
                    .notices
                    .extend(notices.map(|n| format!("host `{host}`: {n}")));
            }
            FinalReport::Failed { error, .. } => failed.push(format!(
                "host `{host}`: its engine failed while stopping: {error}"
            )),
        }
    }
    if !reported {
        return Some(FinalReport::Failed {
            error: failed.join("; "),
            lab: lab.clone(),
        });
    }
    merged.notices.extend(failed);
    if let Some(topo) = topo {
        // Stable: each link's directions keep their engine's order (a-b, then b-a).
        let index = topo.segment_indices();
        merged
            .directions
            .sort_by_key(|d| index.get(d.link.as_str()).copied());
    }
    Some(FinalReport::Done(merged))
}

/// An error naming every engine host of `stats` that gave no stats, and its links; `Ok` when
/// none is missing.
pub fn complete(stats: &SpreadStats) -> Result<()> {
    if stats.missing.is_empty() {
        return Ok(());
    }
    let missing: Vec<String> = stats.missing.iter().map(ToString::to_string).collect();
    bail!("lab `{}` is degraded: {}", stats.lab, missing.join("; "))
}

/// `rtemu stats [--watch]` of `spread`: gives `show` a reading, then again every `every`. A
/// degraded lab fails a single reading (after `show`); with `every` it goes on, telling `warn`
/// each time.
pub fn watch(
    spread: &Spread,
    every: Option<Duration>,
    mut show: impl FnMut(&SpreadStats) -> Result<()>,
    mut warn: impl FnMut(&anyhow::Error),
) -> Result<()> {
    rtemu_control::lab::watch(
        every,
        || read(spread),
        |s| {
            show(s)?;
            match complete(s) {
                Err(e) if every.is_some() => {
                    warn(&e);
                    Ok(())
                }
                done => done,
            }
        },
    )
}

/// The impaired links of `topo` whose engine runs on `host`, in the topology's order.
fn links_on(topo: &Topology, host: &str) -> Vec<String> {
    topo.segments
        .iter()
        .filter(|s| s.impairment().is_some() && s.engine_host.as_deref() == Some(host))
        .map(|s| s.name.clone())
        .collect()
}

/// The engine hosts of `topo`'s impaired links, in `[hosts]` order.
pub(crate) fn engine_hosts(topo: &Topology) -> Vec<&str> {
    topo.hosts
        .iter()
        .map(|h| h.name.as_str())
        .filter(|h| {
            topo.segments
                .iter()
                .any(|s| s.impairment().is_some() && s.engine_host.as_deref() == Some(h))
        })
        .collect()
}

/// Reads the stats of every engine of `spread` at once. An engine host that cannot give them
/// is listed in [`SpreadStats::missing`] beside the others' stats (a degraded lab still shows
/// what runs); it is an error only when no engine host gives any.
pub fn read(spread: &Spread) -> Result<SpreadStats> {
    rtemu_control::lab::need_impaired(&spread.state())?;
    Ok(read_engines(spread)?)
}

/// [`read`] of a lab with or without impaired links: one without gives a report of no
/// directions and no engine, as a lab on one machine does.
pub fn read_engines(spread: &Spread) -> Result<SpreadStats, ClusterError> {
    let topo = spread.topology();
    let agents = engine_hosts(topo)
        .into_iter()
        .map(|h| spread.agent(h))
        .collect::<Result<Vec<_>, _>>()?;
    let answers = ask_each(&agents, |a| {
        (
            a.host.name.clone(),
            engine_stats(a, &spread.lab, STATS_TIMEOUT),
        )
    });
    let mut each = Vec::new();
    let mut failed = Vec::new();
    for (host, stats) in answers {
        match stats {
            Ok(s) => each.push((host, s)),
            Err(why) => failed.push((host, why)),
        }
    }
    if each.is_empty() && !failed.is_empty() {
        let why: Vec<String> = failed.into_iter().map(|(_, why)| why).collect();
        return Err(ClusterError::Unavailable(format!(
            "the stats of lab `{}` could not be read from any engine host: {}",
            spread.lab,
            why.join("; ")
        )));
    }
    Ok(merge(topo, each, failed))
}

/// Asks `agent`, an engine host's, for the stats of its engine of lab `lab`, waiting at most
/// `timeout`; why it gave none, naming the host.
pub(crate) fn engine_stats(
    agent: &Agent<'_>,
    lab: &LabName,
    timeout: Duration,
) -> Result<Stats, String> {
    let path = format!("/v1/labs/{lab}/stats");
    match agent.call::<StatsReply>("GET", &path, None, timeout) {
        Ok(StatsReply::Engine(s)) => Ok(s),
        Ok(StatsReply::NoEngine(_) | StatsReply::Hosts(_)) => Err(format!(
            "host `{}`: its part of the lab runs no engine",
            agent.host.name
        )),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtemu_control::message::Direction;
    use serde_json::json;

    /// The chain a–b | c–d over h1 and h2 with two impaired links: `wan` (b–c, its engine on
    /// b's host h1) and `cd` (on h2).
    fn topology() -> Topology {
        let text = rtemu_testutil::multihost::chain("sp", Some("delay 10ms"), None).replace(
            "[[links]]\nendpoints = [\"c\", \"d\"]\n",
            "[[links]]\nname = \"cd\"\nendpoints = [\"c\", \"d\"]\nnetem = \"loss 1%\"\n",
        );
        Topology::parse("sp.toml", &text).unwrap()
    }

    fn direction(link: &str, dir: &str, delivered: u64) -> Direction {
        let p = json!({"max_ns": 3, "p50_ns": 1, "p999_ns": 2, "p99_ns": 2});
        serde_json::from_value(json!({
            "buffers": null, "conserved": true, "corrupted": 0, "cut": false,
            "delivered": delivered, "delivered_bytes": delivered * 100, "dir": dir,
            "dropped": {"loss": 0}, "duplicates": 0,
            "fidelity": {"arrival_lag": p, "count": delivered, "early": 0, "late": 0,
                         "late_after_ns": 100_000, "lost": 0, "released": p,
                         "released_histogram": {"counts": [], "edges_ns": []}, "started": p},
            "from": "x", "in_flight": 0, "kernel_drops": null, "link": link, "marked": 0, "netem": null,
            "received": delivered, "received_bytes": delivered * 100, "resolution_passed": 0,
            "to": "y", "trace_underruns": 0, "tx_busy": 0
        }))
        .unwrap()
    }

    fn stats(pid: u32, directions: Vec<Direction>) -> Stats {
        Stats {
            directions,
            io: "af-packet".into(),
            lab: LabName::new("sp").unwrap(),
            monotonic_ns: u64::from(pid) * 1000,
            pid,
            process_cpu_ns: Some(5),
            threads: Vec::new(),
        }
    }

    #[test]
    fn each_engine_host_is_asked_once_in_hosts_order() {
        assert_eq!(engine_hosts(&topology()), ["h1", "h2"]);
        let one = Topology::parse(
            "sp.toml",
            &rtemu_testutil::multihost::chain("sp", Some("delay 10ms"), None),
        )
        .unwrap();
        assert_eq!(engine_hosts(&one), ["h1"]);
    }

    #[test]
    fn engines_directions_merge_in_the_topologys_order() {
        let topo = topology();
        let h1 = stats(
            7,
            vec![direction("wan", "a-b", 1), direction("wan", "b-a", 2)],
        );
        let h2 = stats(
            9,
            vec![direction("cd", "a-b", 3), direction("cd", "b-a", 4)],
        );
        // The later link's engine answers first: the report still follows the topology.
        let merged = merge(
            &topo,
            vec![("h2".into(), h2), ("h1".into(), h1)],
            Vec::new(),
        );
        let seen: Vec<(&str, &str, u64)> = merged
            .directions
            .iter()
            .map(|d| (d.link.as_str(), d.dir.as_str(), d.delivered))
            .collect();
        assert_eq!(
            seen,
            [
                ("wan", "a-b", 1),
                ("wan", "b-a", 2),
                ("cd", "a-b", 3),
                ("cd", "b-a", 4)
            ]
        );
        let engines: Vec<(&str, u32, u64)> = merged
            .engines
            .iter()
            .map(|e| (e.host.as_str(), e.pid, e.monotonic_ns))
            .collect();
        assert_eq!(engines, [("h2", 9, 9000), ("h1", 7, 7000)]);
        assert_eq!(merged.lab, "sp");
        assert!(merged.missing.is_empty());
    }

    #[test]
    fn an_engine_host_that_gives_no_stats_is_named_with_its_links_beside_the_others() {
        let topo = topology();
        let h1 = stats(
            7,
            vec![direction("wan", "a-b", 1), direction("wan", "b-a", 2)],
        );
        let gone = (
            "h2".to_owned(),
            "its agent at 192.0.2.5:7781: refused".to_owned(),
        );
        let merged = merge(&topo, vec![("h1".into(), h1)], vec![gone]);
        assert_eq!(merged.directions.len(), 2);
        assert_eq!(
            merged.missing,
            [Missing {
                host: "h2".into(),
                links: vec!["cd".into()],
                problem: "its agent at 192.0.2.5:7781: refused".into(),
            }]
        );
        assert_eq!(
            merged.missing[0].to_string(),
            "no stats of cd (engine on `h2`): its agent at 192.0.2.5:7781: refused"
        );
        let json = serde_json::to_value(&merged).unwrap();
        assert_eq!(json["missing"][0]["links"], json!(["cd"]));
        let e = complete(&merged).unwrap_err().to_string();
        assert_eq!(e, format!("lab `sp` is degraded: {}", merged.missing[0]));
    }

    fn done(wall_ns: u64, directions: Vec<Direction>, threads: usize) -> FinalReport {
        let thread = |index| {
            serde_json::from_value(json!({
                "cpu": null, "cpu_ns": null, "index": index, "links": [], "margin_ns": 0,
                "max_stall_ns": 0, "policy": "SCHED_OTHER", "priority": null, "stalls": 0,
                "stepped_down": 0, "timer_slack_ns": null
            }))
            .unwrap()
        };
        FinalReport::Done(Done {
            cpu_ns: wall_ns / 10,
            directions,
            lab: LabName::new("sp").unwrap(),
            notices: vec!["no AF_XDP".into()],
            threads: (0..threads).map(thread).collect(),
            wall_ns,
        })
    }

    #[test]
    fn engines_final_reports_make_one_in_the_topologys_order_with_threads_renumbered() {
        let topo = topology();
        let lab = LabName::new("sp").unwrap();
        let on = |mut d: Direction, t| {
            d.thread = Some(t);
            d
        };
        let h1 = done(
            500,
            vec![
                on(direction("wan", "a-b", 1), 1),
                on(direction("wan", "b-a", 2), 0),
            ],
            2,
        );
        let h2 = done(700, vec![on(direction("cd", "a-b", 3), 0)], 1);
        // The later link's engine answers first: the report still follows the topology.
        let Some(FinalReport::Done(merged)) = final_report(
            &lab,
            Some(&topo),
            vec![("h2".into(), h2), ("h1".into(), h1)],
        ) else {
            panic!("no merged report")
        };
        let seen: Vec<(&str, u64, Option<usize>)> = merged
            .directions
            .iter()
            .map(|d| (d.link.as_str(), d.delivered, d.thread))
            .collect();
        // h2's thread came first (0); h1's two follow it (1 and 2).
        assert_eq!(
            seen,
            [("wan", 1, Some(2)), ("wan", 2, Some(1)), ("cd", 3, Some(0))]
        );
        let indices: Vec<usize> = merged.threads.iter().map(|t| t.index).collect();
        assert_eq!(indices, [0, 1, 2]);
        assert_eq!((merged.cpu_ns, merged.wall_ns), (120, 700));
        assert_eq!(
            merged.notices,
            ["host `h2`: no AF_XDP", "host `h1`: no AF_XDP"]
        );
        assert_eq!(final_report(&lab, Some(&topo), Vec::new()), None);
    }

    #[test]
    fn an_engine_that_failed_to_report_is_named_beside_the_others_counters() {
        let lab = LabName::new("sp").unwrap();
        let failed = || FinalReport::Failed {
            error: "release thread died".into(),
            lab: lab.clone(),
        };
        let h1 = done(500, vec![direction("wan", "a-b", 1)], 1);
        let Some(FinalReport::Done(merged)) =
            final_report(&lab, None, vec![("h1".into(), h1), ("h2".into(), failed())])
        else {
            panic!("no merged report")
        };
        assert_eq!(merged.directions.len(), 1);
        assert_eq!(
            merged.notices.last().unwrap(),
            "host `h2`: its engine failed while stopping: release thread died"
        );
        // None reported: the failures, each named.
        let all = final_report(
            &lab,
            None,
            vec![("h1".into(), failed()), ("h2".into(), failed())],
        );
        assert_eq!(
            all,
            Some(FinalReport::Failed {
                error: "host `h1`: its engine failed while stopping: release thread died; \
                        host `h2`: its engine failed while stopping: release thread died"
                    .into(),
                lab,
            })
        );
    }
}
