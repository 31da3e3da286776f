//! `rtemu ls` on the coordinating machine: each lab it brought up across hosts is shown once,
//! as one lab, every node with its host, from the record's topology and each agent's word on
//! its part; a host whose agent does not answer, or that lost its part, makes the lab
//! DEGRADED, naming the host and why. The labs that run here alone are listed as before.

use std::io::{self, Write};
use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use rtemu_api::body::{self, HostEngine, Lab, LabStatus, LabSummary};
use rtemu_topo::state::{Detached, LabName, State};
use serde::ser::{Serialize, Serializer};

use crate::spread::{ask_each, Spread};
use crate::ClusterError;

/// How long an agent may take to say how its part stands before its host counts as gone.
const LS_TIMEOUT: Duration = Duration::from_secs(2);

pub use rtemu_api::body::{HostPart, PartStatus};

/// A lab across hosts as one lab: the API's view of the whole lab (every node with its
/// host; `status` up only when every host's part is; every engine host's release threads),
/// and each host's part.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SpreadLab {
    /// The whole lab, with its hosts (`hosts`, in `[hosts]` order).
    #[serde(flatten)]
    pub lab: Lab,
    #[serde(skip)]
    whole: State,
}

/// What one agent said of its part: its view, `None` when it holds none, or why it could not
/// be asked.
pub type Answer = Result<Option<Lab>, String>;

impl SpreadLab {
    /// The lab `whole` (see [`Spread::state`]) from the answers of its hosts' agents, each
    /// with the host and the agent's address, in `[hosts]` order, and the `engines` of its
    /// engine hosts that gave their stats.
    pub fn merge(
        whole: State,
        answers: Vec<(String, String, Answer)>,
        engines: Vec<HostEngine>,
    ) -> SpreadLab {
        let mut detached = Vec::new();
        let mut links = Vec::new();
        // Each node's container as the host it runs on sees it.
        let mut containers = std::collections::BTreeMap::new();
        let parts = Parts::from_answers(answers, |part: Lab| {
            detached.extend(part.detached);
            containers.extend(
                part.nodes
                    .into_iter()
                    .filter_map(|n| Some((n.name, n.container?))),
            );
            links.extend(part.links);
            Word {
                status: part.status,
                error: part.error,
                revision: part.revision,
                programs_cpus: part.programs_cpus,
            }
        });
        let mut lab = body::lab_view(&whole, parts.status, None);
        lab.revision = parts.revision;
        lab.detached = detached;
        lab.hosts = parts.hosts;
        lab.engines = engines;
        for node in &mut lab.nodes {
            node.container = containers.remove(&node.name);
        }
        // A link between hosts crosses the underlay as its part on either end measured it.
        for link in &mut lab.links {
            link.underlay = links
                .iter()
                .find(|l| l.name == link.name && l.underlay.is_some())
                .and_then(|l| l.underlay.clone());
        }
        SpreadLab { lab, whole }
    }

    /// Writes the lab as `rtemu ls` shows a lab, its status naming its hosts (and, when it
    /// is not up, what is wrong on which), then, after each host's name, where its part's
    /// programs run when kept off its engine's CPUs, and each engine host's release threads,
    /// as `rtemu stats` of the lab says them.
    pub fn write(&self, out: &mut impl Write) -> io::Result<()> {
        let name = &self.lab.name;
        let status = match self.lab.status {
            LabStatus::Up => {
                let on: Vec<String> = self
                    .lab
                    .hosts
                    .iter()
                    .map(|h| format!("{} at {}", h.host, h.agent))
                    .collect();
                format!("up on {}", on.join(", "))
            }
            bad => {
                let problems: Vec<&str> = self
                    .lab
                    .hosts
                    .iter()
                    .filter_map(|h| h.problem.as_deref())
                    .collect();
                let word = if bad == LabStatus::Degraded {
                    "DEGRADED"
                } else {
                    "incomplete"
                };
                format!("{word}: {} (run `rtemu down {name}`)", problems.join("; "))
            }
        };
        let detached = self.lab.detached.iter().map(|d| {
            let process = Detached {
                pid: d.pid,
                // Not compared: its agent said whether it runs.
                start_time: 0,
                node: d.node.clone(),
                command: d.command.clone(),
                log: d.log.clone().into(),
            };
            (process, d.running)
        });
        let segments = &self.whole.topology.segments;
        let underlay = |si: usize| {
            let link = self
                .lab
                .links
                .iter()
                .find(|l| l.name == segments[si].name)?;
            link.underlay.clone()
        };
        let containers = self
            .lab
            .nodes
            .iter()
            .filter_map(|n| {
                let c = n.container.as_ref()?;
                let state = match c.exit_code {
                    Some(code) => format!("exited with code {code}"),
                    None => c.state.clone(),
                };
                Some((n.name.clone(), state))
            })
            .collect();
        rtemu_control::lab::write_lab(out, &self.whole, &status, underlay, detached, &containers)?;
        for h in &self.lab.hosts {
            if let Some(cpus) = &h.programs_cpus {
                writeln!(
                    out,
                    "  {}: programs on CPUs {cpus} (off the engine's)",
                    h.host
                )?;
            }
        }
        for e in &self.lab.engines {
            for t in &e.threads {
                writeln!(out, "  {}: {t}", e.host)?;
            }
        }
        Ok(())
    }
}

/// What an agent says of how its part stands, in either of the API's views of it (the lab or
/// its list entry).
struct Word {
    status: LabStatus,
    /// Why its state cannot be read.
    error: Option<String>,
    revision: String,
    /// Where its programs run, when kept off its engine's CPUs.
    programs_cpus: Option<String>,
}

/// How the hosts' parts of a lab across hosts stand, from what their agents answered: the
/// one reading of the answers behind both the lab's view ([`SpreadLab::merge`]) and its entry
/// in the lab list ([`spread_summary`]), so the two agree on status and revision.
struct Parts {
    /// Each host's part, in `[hosts]` order.
    hosts: Vec<HostPart>,
    /// The whole lab's: up only when every part is.
    status: LabStatus,
    /// The whole lab's (see [`revision`]).
    revision: String,
}

impl Parts {
    /// Reads each host's answer (host, agent's address, what the agent said); `take` takes
    /// what the lab shows of a part that answered, and gives the agent's [`Word`] on it.
    fn from_answers<P>(
        answers: Vec<(String, String, Result<Option<P>, String>)>,
        mut take: impl FnMut(P) -> Word,
    ) -> Parts {
        let mut hosts = Vec::new();
        let mut revisions = Vec::new();
        for (host, agent, answer) in answers {
            let mut programs_cpus = None;
            let (status, problem) = match answer {
                Err(why) => (PartStatus::Unreachable, Some(why)),
                Ok(None) => missing(&host),
                Ok(Some(part)) => {
                    let word = take(part);
                    programs_cpus = word.programs_cpus;
                    revisions.push(word.revision);
                    part_status(&host, word.status, word.error)
                }
            };
            hosts.push(HostPart {
                host,
                agent,
                status,
                problem,
                programs_cpus,
            });
        }
        Parts {
            status: whole_status(&hosts),
            revision: revision(&hosts, &revisions),
            hosts,
        }
    }
}

/// The status and problem of host `host`'s part, whose agent holds none.
fn missing(host: &str) -> (PartStatus, Option<String>) {
    (
        PartStatus::Missing,
        Some(format!(
            "host `{host}`: its agent holds no part of the lab (taken down, or the host \
             restarted)"
        )),
    )
}

/// The status and problem of host `host`'s part, which its agent lists as `status` (`error`:
/// why its state cannot be read).
fn part_status(
    host: &str,
    status: LabStatus,
    error: Option<String>,
) -> (PartStatus, Option<String>) {
    match status {
        LabStatus::Up => (PartStatus::Up, None),
        LabStatus::Incomplete => (
            PartStatus::Incomplete,
            Some(format!("host `{host}`: its part's `up` did not finish")),
        ),
        LabStatus::Degraded => (
            PartStatus::Degraded,
            Some(format!(
                "host `{host}`: its engine is not running, the impaired links it carries \
                 carry nothing"
            )),
        ),
        LabStatus::Unreadable => (
            PartStatus::Incomplete,
            Some(format!(
                "host `{host}`: its part's state cannot be read: {}",
                error.unwrap_or_default()
            )),
        ),
    }
}

/// A lab's status from its hosts' parts: up only when every part is.
fn whole_status(hosts: &[HostPart]) -> LabStatus {
    if hosts.iter().all(|h| h.status == PartStatus::Up) {
        LabStatus::Up
    } else if hosts
        .iter()
        .all(|h| matches!(h.status, PartStatus::Up | PartStatus::Incomplete))
    {
        LabStatus::Incomplete
    } else {
        LabStatus::Degraded
    }
}

/// The revision of a lab across hosts: of how each host's part stands and of the revision of
/// each part that answered (which covers its record: a new `up` makes every part anew). A
/// problem's words are left out: an agent that does not answer may say so differently to the
/// list and to the lab's view, which must give the same revision.
fn revision(hosts: &[HostPart], parts: &[String]) -> String {
    let stands: Vec<(&str, &str, PartStatus)> = hosts
        .iter()
        .map(|h| (h.host.as_str(), h.agent.as_str(), h.status))
        .collect();
    body::revision(&(stands, parts))
}

/// Asks every host's agent of `spread` how its part stands, as its lab list says: the lab
/// counted, not listed (`GET /v1/labs` of a coordinating server). Its revision is the one
/// [`spread_lab`] gives the lab at the same time.
pub fn spread_summary(spread: &Spread) -> Result<LabSummary, ClusterError> {
    let agents = spread.agents()?;
    let name = spread.lab.to_string();
    let answers = ask_each(&agents, |a| {
        let answer = a
            .reply("GET", "/v1/labs", None, LS_TIMEOUT)
            .and_then(|r| {
                let labs = a.ok(r)?.json::<Vec<LabSummary>>();
                labs.map_err(|e| ClusterError::Unreachable {
                    host: a.host.name.clone(),
                    agent: a.addr(),
                    why: format!("its reply: {e}"),
                })
            })
            .map(|labs| labs.into_iter().find(|l| l.name == name))
            .map_err(|e| e.to_string());
        (a.host.name.clone(), a.addr().to_string(), answer)
    });
    Ok(summary(&spread.state(), answers))
}

/// The list entry of the lab `whole` (see [`Spread::state`]) from its hosts' agents' entries
/// of their parts, as [`SpreadLab::merge`] takes their views.
fn summary(
    whole: &State,
    answers: Vec<(String, String, Result<Option<LabSummary>, String>)>,
) -> LabSummary {
    let mut detached = 0;
    let parts = Parts::from_answers(answers, |part: LabSummary| {
        detached += part.detached;
        Word {
            status: part.status,
            error: part.error,
            revision: part.revision,
            programs_cpus: part.programs_cpus,
        }
    });
    let mut summary = body::lab_summary(whole, parts.status, None);
    summary.revision = parts.revision;
    summary.detached = detached;
    summary.hosts = parts.hosts;
    summary
}

/// Asks every host's agent of `spread` how its part stands, and each engine host's what its
/// engine's release threads do (a host whose engine does not answer just has none: how its
/// part stands says why).
pub fn spread_lab(spread: &Spread) -> Result<SpreadLab, ClusterError> {
    let agents = spread.agents()?;
    let path = format!("/v1/labs/{}", spread.lab);
    let engine_hosts = crate::stats::engine_hosts(spread.topology());
    let answers = ask_each(&agents, |a| {
        let answer = a
            .reply("GET", &path, None, LS_TIMEOUT)
            .and_then(|r| match r.status {
                404 => Ok(None),
                _ => {
                    let lab = a.ok(r)?.json::<Lab>();
                    Ok(Some(lab.map_err(|e| ClusterError::Unreachable {
                        host: a.host.name.clone(),
                        agent: a.addr(),
                        why: format!("its reply: {e}"),
                    })?))
                }
            })
            .map_err(|e| e.to_string());
        // Only of a part that is there: a host that does not answer costs one timeout.
        let engine = (matches!(answer, Ok(Some(_)))
            && engine_hosts.contains(&a.host.name.as_str()))
        .then(|| crate::stats::engine_stats(a, &spread.lab, LS_TIMEOUT).ok())
        .flatten()
        .map(|s| HostEngine::of(a.host.name.clone(), &s));
        ((a.host.name.clone(), a.addr().to_string(), answer), engine)
    });
    let (answers, engines): (Vec<_>, Vec<_>) = answers.into_iter().unzip();
    let engines = engines.into_iter().flatten().collect();
    Ok(SpreadLab::merge(spread.state(), answers, engines))
}

/// The labs `rtemu ls` lists on this machine: those it runs alone (or holds a part of), and
/// those it coordinates across hosts.
#[derive(Debug)]
pub struct Listing {
    /// The labs that run here (parts of labs coordinated here left out: they show whole).
    pub local: Vec<State>,
    /// The labs coordinated here.
    pub spread: Vec<SpreadLab>,
    /// The lab directories here whose state cannot be read.
    pub unreadable: Vec<rtemu_topo::state::Unreadable>,
}

/// `lab` alone (an error when it runs neither here nor across hosts from here), else every
/// lab; `credentials` holds the agents' tokens.
pub fn list(lab: Option<&LabName>, credentials: &Path) -> Result<Listing> {
    let spreads = match lab {
        Some(l) => Spread::open(l, credentials)?.into_iter().collect(),
        None => Spread::all(credentials)?,
    };
    let spread = spreads
        .iter()
        .map(spread_lab)
        .collect::<Result<Vec<_>, _>>()?;
    let (local, unreadable) = if lab.is_some() && !spread.is_empty() {
        (Vec::new(), Vec::new())
    } else {
        let (mut states, unreadable) = rtemu_control::lab::states(lab)?;
        states.retain(|s| !spreads.iter().any(|sp| sp.lab == s.lab));
        (states, unreadable)
    };
    Ok(Listing {
        local,
        spread,
        unreadable,
    })
}

impl Listing {
    /// Writes the labs as `rtemu ls` shows them: those that run here first.
    pub fn write(&self, out: &mut impl Write) -> io::Result<()> {
        if !self.local.is_empty() || self.spread.is_empty() {
            rtemu_control::lab::write_listing(out, &self.local)?;
        }
        for s in &self.spread {
            s.write(out)?;
        }
        Ok(())
    }
}

/// One JSON array, as `rtemu ls --json` prints it: a lab that runs here as its state (as
/// before), a lab across hosts as a [`SpreadLab`] (it has `hosts`).
impl Serialize for Listing {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        /// A lab here: its state, how each of its containers stands, and its engine, as a
        /// lab across hosts gives its engines.
        #[derive(serde::Serialize)]
        struct Local<'a> {
            #[serde(flatten)]
            state: &'a State,
            #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
            containers: std::collections::BTreeMap<String, rtemu_topo::runtime::Status>,
            #[serde(skip_serializing_if = "Vec::is_empty")]
            engines: Vec<HostEngine>,
        }
        #[derive(serde::Serialize)]
        #[serde(untagged)]
        enum Entry<'a> {
            Local(Local<'a>),
            Spread(&'a SpreadLab),
        }
        let local = self.local.iter().map(|state| {
            let containers = rtemu_topo::launch::lab_statuses(state)
                .into_iter()
                .map(|(node, (_, status))| (node, status))
                .collect();
            let engines = body::engines_here(state, LabStatus::of(state));
            Entry::Local(Local {
                state,
                containers,
                engines,
            })
        });
        s.collect_seq(local.chain(self.spread.iter().map(Entry::Spread)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spread::whole_state;
    use rtemu_topo::Topology;

    fn whole() -> State {
        let text = rtemu_testutil::multihost::chain("sp", Some("delay 10ms"), None);
        let topo = Topology::parse("sp.toml", &text).unwrap();
        whole_state(&LabName::new("sp").unwrap(), "sp.toml", &topo)
    }

    /// What host `host`'s agent would say of its part, `status` as it says.
    fn part(whole: &State, host: &str, status: LabStatus) -> Answer {
        let mut state = whole.clone();
        state.nodes.retain(|(n, _)| {
            whole.topology.nodes[whole.topology.node_index(n).unwrap()]
                .host
                .as_deref()
                == Some(host)
        });
        let mut lab = body::lab_view(&state, status, None);
        // h2 keeps its programs off its engine's CPU.
        lab.programs_cpus = (host == "h2").then(|| "0".to_owned());
        lab.detached = vec![body::Detached {
            pid: 42,
            node: state.nodes[0].0.clone(),
            command: vec!["sleep".into(), "9".into()],
            running: true,
            log: format!("/run/rtemu/sp/{host}.log"),
        }];
        Ok(Some(lab))
    }

    /// Host `host`'s engine, its release thread `index` serving `links` on CPU `cpu`.
    fn engine(host: &str, pid: u32, threads: &[(usize, usize, &[&str])]) -> HostEngine {
        let threads = threads
            .iter()
            .map(|(index, cpu, links)| {
                serde_json::from_value(serde_json::json!({
                    "cpu": cpu, "cpu_ns": 1_000_000, "index": index, "links": links,
                    "margin_ns": 12_000, "max_stall_ns": 0, "policy": "SCHED_FIFO:40",
                    "priority": 40, "stalls": 0, "stepped_down": 0, "timer_slack_ns": 1
                }))
                .unwrap()
            })
            .collect();
        HostEngine {
            host: host.into(),
            io: "af-packet".into(),
            monotonic_ns: u64::from(pid),
            pid,
            process_cpu_ns: Some(2_000_000),
            threads,
        }
    }

    /// Both hosts' agents answering, each part up.
    fn all_up(whole: &State) -> Vec<(String, String, Answer)> {
        let hosts = [("h1", "192.0.2.1:7781"), ("h2", "192.0.2.2:7781")];
        hosts
            .into_iter()
            .map(|(h, agent)| (h.into(), agent.into(), part(whole, h, LabStatus::Up)))
            .collect()
    }

    fn text(lab: &SpreadLab) -> String {
        let mut out = Vec::new();
        lab.write(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_lab_whose_hosts_all_answer_up_shows_once_with_each_nodes_host() {
        let w = whole();
        let answers = all_up(&w);
        let engines = vec![
            engine("h1", 7, &[(0, 1, &["wan"])]),
            engine("h2", 9, &[(0, 1, &["cd"]), (1, 0, &["ef"])]),
        ];
        let lab = SpreadLab::merge(w, answers, engines);
        assert_eq!(lab.lab.status, LabStatus::Up);
        let hosts: Vec<Option<&str>> = lab.lab.nodes.iter().map(|n| n.host.as_deref()).collect();
        assert_eq!(hosts, [Some("h1"), Some("h1"), Some("h2"), Some("h2")]);
        let t = text(&lab);
        assert!(
            t.starts_with(
                "lab sp (up on h1 at 192.0.2.1:7781, h2 at 192.0.2.2:7781) from sp.toml\n  \
                 node a on h1  (netns rtemu-sp.a)\n"
            ),
            "{t}"
        );
        assert!(t.contains("\n  node c on h2  (netns rtemu-sp.c)\n"), "{t}");
        assert!(
            t.contains("  detached pid 42 in c: sleep 9 (running, log /run/rtemu/sp/h2.log)"),
            "{t}"
        );
        assert!(
            t.contains("\n  h2: programs on CPUs 0 (off the engine's)\n"),
            "{t}"
        );
        assert!(!t.contains("h1: programs"), "{t}");
        // Each engine host's release threads, after the host's name, in `[hosts]` order.
        let threads: Vec<&str> = t.lines().filter(|l| l.contains("release thread")).collect();
        assert_eq!(
            threads,
            [
                "  h1: release thread 0 on CPU 1, SCHED_FIFO:40, spin margin 12.0 µs: wan",
                "  h2: release thread 0 on CPU 1, SCHED_FIFO:40, spin margin 12.0 µs: cd",
                "  h2: release thread 1 on CPU 0, SCHED_FIFO:40, spin margin 12.0 µs: ef",
            ],
            "{t}"
        );
        let json = serde_json::to_value(&lab).unwrap();
        assert_eq!(json["engines"][1]["host"], "h2");
        assert_eq!(json["engines"][1]["threads"][1]["links"][0], "ef");
        assert_eq!(json["engines"][0]["threads"][0]["policy"], "SCHED_FIFO:40");
        assert_eq!(json["status"], "up");
        assert_eq!(json["nodes"][3]["host"], "h2");
        assert_eq!(json["hosts"][1]["status"], "up");
        assert_eq!(json["hosts"][1]["programs_cpus"], "0");
        assert!(json["hosts"][0].get("programs_cpus").is_none(), "{json}");
        assert_eq!(json["detached"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn a_spread_lab_s_revision_follows_its_parts_and_how_they_stand() {
        let w = whole();
        let revision = |h2: Answer| {
            let h1 = part(&w, "h1", LabStatus::Up);
            let answers = vec![
                ("h1".into(), "192.0.2.1:7781".into(), h1),
                ("h2".into(), "192.0.2.2:7781".into(), h2),
            ];
            SpreadLab::merge(w.clone(), answers, Vec::new())
                .lab
                .revision
        };
        let base = revision(part(&w, "h2", LabStatus::Up));
        assert_eq!(base, revision(part(&w, "h2", LabStatus::Up)));
        // The engines' readings move all the time: not part of it.
        let answers = all_up(&w);
        let read = SpreadLab::merge(
            w.clone(),
            answers,
            vec![engine("h1", 7, &[(0, 1, &["wan"])])],
        );
        assert_eq!(read.lab.engines.len(), 1);
        assert_eq!(base, read.lab.revision);
        let mut changed = part(&w, "h2", LabStatus::Up);
        if let Ok(Some(lab)) = &mut changed {
            lab.revision = "another".into();
        }
        assert_ne!(base, revision(changed));
        assert_ne!(base, revision(part(&w, "h2", LabStatus::Degraded)));
        assert_ne!(base, revision(Ok(None)));
        // How an agent that does not answer says so is not part of it.
        let gone = revision(Err("refused".into()));
        assert_ne!(base, gone);
        assert_eq!(gone, revision(Err("timed out".into())));
    }

    #[test]
    fn a_host_that_is_gone_or_lost_its_part_makes_the_lab_degraded_naming_it() {
        let w = whole();
        let gone = "host `h2`: its agent at 192.0.2.2:7781: Connection refused (os error 111)";
        let answers = vec![
            (
                "h1".into(),
                "192.0.2.1:7781".into(),
                part(&w, "h1", LabStatus::Up),
            ),
            ("h2".into(), "192.0.2.2:7781".into(), Err(gone.to_owned())),
        ];
        let lab = SpreadLab::merge(w.clone(), answers, Vec::new());
        assert_eq!(lab.lab.status, LabStatus::Degraded);
        assert_eq!(lab.lab.hosts[1].status, PartStatus::Unreachable);
        let t = text(&lab);
        assert!(
            t.starts_with(&format!(
                "lab sp (DEGRADED: {gone} (run `rtemu down sp`)) from"
            )),
            "{t}"
        );
        // Its nodes are still listed, on the host that is gone.
        assert!(t.contains("  node d on h2  (netns rtemu-sp.d)"), "{t}");

        let answers = vec![
            ("h1".into(), "192.0.2.1:7781".into(), Ok(None)),
            (
                "h2".into(),
                "192.0.2.2:7781".into(),
                part(&w, "h2", LabStatus::Degraded),
            ),
        ];
        let lab = SpreadLab::merge(w.clone(), answers, Vec::new());
        assert_eq!(lab.lab.status, LabStatus::Degraded);
        let t = text(&lab);
        assert!(
            t.contains("DEGRADED: host `h1`: its agent holds no part of the lab"),
            "{t}"
        );
        assert!(t.contains("; host `h2`: its engine is not running"), "{t}");

        let answers = vec![
            (
                "h1".into(),
                "192.0.2.1:7781".into(),
                part(&w, "h1", LabStatus::Incomplete),
            ),
            (
                "h2".into(),
                "192.0.2.2:7781".into(),
                part(&w, "h2", LabStatus::Up),
            ),
        ];
        let lab = SpreadLab::merge(w, answers, Vec::new());
        assert_eq!(lab.lab.status, LabStatus::Incomplete);
        assert!(text(&lab).contains("(incomplete: host `h1`: its part's `up` did not finish"));
    }

    /// The lab list's entry of each host's part, as its agent would list it beside `part`.
    fn listed(answer: &Answer) -> Result<Option<LabSummary>, String> {
        let Some(lab) = answer.clone()? else {
            return Ok(None);
        };
        Ok(Some(LabSummary {
            name: lab.name,
            file: lab.file,
            status: lab.status,
            error: lab.error,
            nodes: lab.nodes.len(),
            links: lab.links.len(),
            lans: lab.lans.len(),
            externals: lab.externals.len(),
            detached: lab.detached.len(),
            programs_cpus: lab.programs_cpus,
            hosts: lab.hosts,
            revision: lab.revision,
        }))
    }

    #[test]
    fn the_lab_list_and_the_lab_s_view_agree_on_how_a_spread_lab_stands() {
        let w = whole();
        let cases: [[Answer; 2]; 4] = [
            [part(&w, "h1", LabStatus::Up), part(&w, "h2", LabStatus::Up)],
            [
                part(&w, "h1", LabStatus::Incomplete),
                part(&w, "h2", LabStatus::Up),
            ],
            [Ok(None), part(&w, "h2", LabStatus::Degraded)],
            [part(&w, "h1", LabStatus::Up), Err("refused".into())],
        ];
        for [h1, h2] in cases {
            let answers = vec![
                ("h1".to_owned(), "192.0.2.1:7781".to_owned(), h1),
                ("h2".to_owned(), "192.0.2.2:7781".to_owned(), h2),
            ];
            let entries = answers
                .iter()
                .map(|(host, agent, answer)| (host.clone(), agent.clone(), listed(answer)))
                .collect();
            let entry = summary(&w, entries);
            let lab = SpreadLab::merge(w.clone(), answers, Vec::new()).lab;
            assert_eq!(entry.status, lab.status);
            assert_eq!(entry.revision, lab.revision);
            assert_eq!(entry.hosts, lab.hosts);
            assert_eq!(entry.detached, lab.detached.len());
            assert_eq!(entry.nodes, lab.nodes.len());
        }
    }
}
