//! The API over `rtemu-control`: labs up and down, their engines' stats, link changes. Every
//! function here blocks (netlink, processes, the engine's control socket): the handlers call
//! them on tokio's blocking threads.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use axum::http::StatusCode;
use rtemu_api::body::{
    self, DownReply, InterfaceCounters, Lab, LabStatus, LabSummary, NoEngine, PartRequest,
    ScheduleRequest, Stamp, StatsReply, UpRequest, Vnis,
};
use rtemu_control::engine::{BuildModels, EngineOptions};
use rtemu_control::error::ControlError;
use rtemu_control::lab::Health;
use rtemu_model::direction::Ways;
use rtemu_topo::state::{LabName, State};
use rtemu_topo::topology::{Netem, SegmentKind};
use rtemu_topo::Topology;

use crate::error::ApiError;
use crate::spread::Coordinator;

/// The name errors give an inline topology in place of a file's.
pub const INLINE: &str = "<request>";

/// The view of lab `state`, its state file at `stamp` before it was read, with its engine.
pub fn view(state: &State, stamp: Option<Stamp>) -> Lab {
    let status = LabStatus::of(state);
    let mut lab = body::lab_view(state, status, stamp);
    lab.engines = body::engines_here(state, status);
    lab
}

/// The summary of lab `state` the lab list shows, its state file at `stamp` before it was
/// read.
pub fn summary(state: &State, stamp: Option<Stamp>) -> LabSummary {
    body::lab_summary(state, LabStatus::of(state), stamp)
}

/// Checks the topology `text` a request carries; errors name it `file`.
fn parse_inline(file: &str, text: &str, dir: &Path) -> Result<Topology, ApiError> {
    let max = rtemu_topo::topology::MAX_TOPOLOGY_BYTES;
    if text.len() as u64 > max {
        return Err(ApiError::bad_request(format!(
            "the topology has {} bytes, over the {max} a topology may have",
            text.len()
        )));
    }
    Ok(Topology::parse_checked(file, text, dir, &BuildModels)?)
}

/// Reads, checks and brings up the topology `req` gives: one with `[hosts]` across its hosts'
/// agents when the server coordinates (`coordinator`).
pub fn up(req: &UpRequest, coordinator: Option<&Coordinator>) -> Result<Lab, ApiError> {
    let (topo, name) = check_up(req)?;
    if let (false, Some(c)) = (topo.hosts.is_empty(), coordinator) {
        let (text, file) = match (&req.topology, &req.file) {
            (Some(text), _) => (text.clone(), INLINE.to_owned()),
            (None, file) => {
                let file = Path::new(file.as_deref().unwrap_or_default());
                let read = std::fs::read_to_string(file)
                    .and_then(|text| Ok((text, std::path::absolute(file)?)))
                    .map_err(|e| {
                        ApiError::bad_request(format!("reading {}: {e}", file.display()))
                    })?;
                (read.0, read.1.display().to_string())
            }
        };
        return crate::spread::up(c, &topo, &text, &file, req.replace);
    }
    if req.replace {
        rtemu_control::lab::down(&name).removed?;
    }
    let file = req.file.as_deref().unwrap_or(INLINE);
    let up = rtemu_control::lab::up(&topo, file, &EngineOptions::default())?;
    Ok(view(&up.state, Stamp::of(&up.state.lab)))
}

/// Checks an up request before anything is made or removed on the host: exactly one of its
/// topology and file, the topology (with the models and the traces its links name) and the
/// lab name. [`up`] acts only on what this returns; the `api` fuzz target calls it too.
pub fn check_up(req: &UpRequest) -> Result<(Topology, LabName), ApiError> {
    let mut topo = match (&req.topology, &req.file) {
        (Some(text), None) => parse_inline(INLINE, text, Path::new(""))?,
        (None, Some(file)) => Topology::load_checked(Path::new(file), &BuildModels)?,
        _ => {
            return Err(ApiError::bad_request(
                "give exactly one of `topology` (the TOML text) and `file` (its path)",
            ))
        }
    };
    if let Some(name) = &req.name {
        topo.lab = LabName::new(name)?.to_string();
    }
    let name = LabName::new(&topo.lab)?;
    Ok((topo, name))
}

/// Checks the topology `req` gives and brings up this host's part of it, with its engine.
pub fn up_part(req: &PartRequest) -> Result<Lab, ApiError> {
    let topo = check_part(req)?;
    let stitching = req.stitching.clone().into();
    let up = rtemu_control::lab::up_part(
        &topo,
        &req.file,
        &req.host,
        &stitching,
        &EngineOptions::default(),
    )?;
    Ok(view(&up.state, Stamp::of(&up.state.lab)))
}

/// The longest file name a part request may give (Linux's `PATH_MAX`): every error names it.
pub const MAX_PART_FILE: usize = 4096;

/// Checks a part request before anything is made on the host: its file's name, its topology
/// (with the models and the traces its links name), the lab name it asks for, its host among
/// the file's `[hosts]`, and VNIs that fit the file's stitched segments. [`up_part`] acts only
/// on what this returns; the `part` fuzz target calls it too.
pub fn check_part(req: &PartRequest) -> Result<Topology, ApiError> {
    if req.file.len() > MAX_PART_FILE || req.file.contains('\0') {
        return Err(ApiError::bad_request(format!(
            "file {} is not a file name: give the topology's path, at most {MAX_PART_FILE} \
             bytes, without NUL",
            rtemu_sys::terminal::quoted(&req.file)
        )));
    }
    let topo = part_topology(req)?;
    topo.part(&req.host, &req.stitching.clone().into())
        .map_err(rtemu_topo::lab::LabError::from)?;
    Ok(topo)
}

/// The topology of `req`, under the name it asks for. Trace files are named relative to the
/// topology file, which the coordinator names by its absolute path, so a trace is looked for
/// at the same path on the engine's host (a relative file name leaves them relative to the
/// agent's working directory).
fn part_topology(req: &PartRequest) -> Result<Topology, ApiError> {
    let file = Path::new(&req.file);
    let dir = file
        .parent()
        .filter(|_| file.is_absolute())
        .unwrap_or(Path::new(""));
    let mut topo = parse_inline(&req.file, &req.topology, dir)?;
    if let Some(name) = &req.name {
        topo.lab = LabName::new(name)?.to_string();
    }
    Ok(topo)
}

/// The VNIs this host's labs use.
pub fn vnis() -> Result<Vnis, ApiError> {
    let in_use = rtemu_topo::lab::vnis_in_use()?;
    Ok(Vnis {
        vnis: in_use.into_iter().collect(),
    })
}

/// Takes lab `name` down.
pub fn down(name: &LabName) -> Result<DownReply, ApiError> {
    let down = rtemu_control::lab::down(name);
    Ok(DownReply {
        lab: name.to_string(),
        removed: down.removed?,
        report: down.report,
    })
}

/// A 503 when lab `state`'s engine does not answer (its impaired links carry nothing), else
/// `err` as it is.
fn engine_gone(state: &State, err: ControlError) -> ApiError {
    if rtemu_control::lab::health(state) == Health::Degraded {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            rtemu_control::error::message(&err),
        )
    } else {
        err.into()
    }
}

/// The stats of lab `state`.
pub fn stats(state: &State) -> Result<StatsReply, ApiError> {
    if state.topology.impaired_links().next().is_none() {
        return Ok(StatsReply::NoEngine(NoEngine {
            directions: Vec::new(),
            io: None,
            lab: state.lab.to_string(),
            monotonic_ns: None,
            pid: None,
            process_cpu_ns: None,
        }));
    }
    rtemu_control::lab::stats(state)
        .map(StatsReply::Engine)
        .map_err(|e| engine_gone(state, e))
}

/// The kernel's counters of every interface of lab `state`'s nodes (on links, LANs and host
/// interfaces), or of the nodes `only` names, node by node, each node's read at one instant.
/// A name the lab has no node of is a 404.
pub fn counters(
    state: &State,
    only: Option<&BTreeSet<String>>,
) -> Result<Vec<InterfaceCounters>, ApiError> {
    let mut out = Vec::new();
    for node in counted(state, only)? {
        let names: Vec<&str> = node.interfaces.iter().map(|&(name, _)| name).collect();
        let path = rtemu_engine::netns::named(node.netns);
        let counters =
            rtemu_engine::ifcounters::interfaces_counters(&path, &names).map_err(|e| {
                let why = rtemu_control::error::message(&e);
                let why = format!("node `{}`: {why}", node.name);
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, why)
            })?;
        for (&(interface, segment), c) in node.interfaces.iter().zip(counters) {
            out.push(InterfaceCounters {
                node: node.name.to_owned(),
                interface: interface.to_owned(),
                segment: segment.to_owned(),
                rx_bytes: c.rx_bytes,
                rx_packets: c.rx_packets,
                rx_dropped: c.rx_dropped,
                tx_bytes: c.tx_bytes,
                tx_packets: c.tx_packets,
                tx_dropped: c.tx_dropped,
            });
        }
    }
    Ok(out)
}

/// A node whose interfaces' counters are read.
#[derive(Debug, PartialEq)]
struct Counted<'a> {
    name: &'a str,
    netns: &'a str,
    /// Each interface's name and segment, in segment order.
    interfaces: Vec<(&'a str, &'a str)>,
}

/// The nodes of lab `state` (of this host's part) that `only` names, or every one, in the
/// state's order, with their interfaces. Only the asked nodes are looked up and gathered (not
/// the whole lab view: the web view asks for a few nodes of a large lab at every refresh). A
/// name this host's part has no node of is a 404.
fn counted<'a>(
    state: &'a State,
    only: Option<&BTreeSet<String>>,
) -> Result<Vec<Counted<'a>>, ApiError> {
    let topo = &state.topology;
    // (position in the state, index in the topology, name, namespace)
    let at = |(i, (name, netns)): (usize, &'a (String, String))| {
        Some((i, topo.node_index(name)?, name.as_str(), netns.as_str()))
    };
    let nodes: Vec<_> = match only {
        None => state.nodes.iter().enumerate().filter_map(at).collect(),
        Some(only) => {
            let mut asked = only
                .iter()
                .map(|name| {
                    state
                        .nodes
                        .iter()
                        .enumerate()
                        .find(|(_, (n, _))| n == name)
                        .and_then(at)
                        .ok_or_else(|| {
                            ApiError::not_found(format!(
                                "lab `{}` has no node {}",
                                state.lab,
                                rtemu_sys::terminal::quoted(name)
                            ))
                        })
                })
                .collect::<Result<Vec<_>, _>>()?;
            asked.sort_by_key(|&(i, ..)| i);
            asked
        }
    };
    let attachments = topo.attachments_by_node();
    Ok(nodes
        .into_iter()
        .map(|(_, ni, name, netns)| Counted {
            name,
            netns,
            interfaces: attachments[ni]
                .iter()
                .map(|&(seg, m)| (m.ifname.as_str(), seg.name.as_str()))
                .collect(),
        })
        .collect())
}

/// Checks that `link` is an impaired link of lab `state`: a 404 when the lab has no such link,
/// a 400 when it has but the link is ideal (only the engine's links can change).
fn impaired_link(state: &State, link: &str) -> Result<(), ApiError> {
    let Some(seg) = state
        .topology
        .segments
        .iter()
        .find(|s| s.name == link && matches!(s.kind, SegmentKind::Link { .. }))
    else {
        let names: Vec<String> = body::links(state).into_iter().map(|l| l.name).collect();
        return Err(ApiError::not_found(format!(
            "lab `{}` has no link `{link}`; its links are {}",
            state.lab,
            names.join(", ")
        )));
    };
    match &seg.kind {
        SegmentKind::Link {
            impairment: Some(_),
        } => Ok(()),
        _ => Err(ApiError::bad_request(format!(
            "link `{link}` of lab `{}` is ideal (a plain veth pair): only impaired links, which \
             the engine carries, can be changed",
            state.lab
        ))),
    }
}

/// Gives `link` of lab `state` the model `netem` in the directions `dir`.
pub fn set(state: &State, link: &str, dir: Ways, netem: &str) -> Result<(), ApiError> {
    impaired_link(state, link)?;
    let netem = parse_netem("netem", netem)?;
    rtemu_control::lab::set_link(&state.lab, link, dir, &netem).map_err(|e| engine_gone(state, e))
}

/// Cuts `link` of lab `state` (`down`) or joins it again.
pub fn cut(state: &State, link: &str, down: bool) -> Result<(), ApiError> {
    impaired_link(state, link)?;
    rtemu_control::lab::cut_link(&state.lab, link, down).map_err(|e| engine_gone(state, e))
}

/// The most changes one schedule request may hold.
pub const MAX_CHANGES: usize = 10_000;

/// The netem text `text` of a request's field `field`, parsed (a 400 quoting it short when it
/// does not parse).
pub fn parse_netem(field: &str, text: &str) -> Result<Netem, ApiError> {
    Netem::parse(text).map_err(|e| {
        ApiError::bad_request(format!(
            "{field} {}: {e}",
            rtemu_sys::terminal::quoted(text)
        ))
    })
}

/// The changes of a schedule request, checked (their count, times and netem texts): each
/// one's time after the request, directions and model.
pub fn schedule_steps(req: &ScheduleRequest) -> Result<Vec<(Duration, Ways, Netem)>, ApiError> {
    if req.changes.is_empty() || req.changes.len() > MAX_CHANGES {
        return Err(ApiError::bad_request(format!(
            "the schedule has {} changes: give 1 to {MAX_CHANGES}",
            req.changes.len()
        )));
    }
    let mut steps = Vec::new();
    for (i, c) in req.changes.iter().enumerate() {
        let at = rtemu_model::units::Time::parse(&c.at)
            .map_err(|e| ApiError::bad_request(format!("changes[{i}].at: {e}")))?;
        let netem = parse_netem(&format!("changes[{i}].netem"), &c.netem)?;
        steps.push((Duration::from_nanos(at.0), c.dir, netem));
    }
    Ok(steps)
}

/// Queues the changes of `req` in the engine of lab `state`, each for its time after `start`
/// (when the request came): all are checked first (times, netem texts), then sent in one
/// request, which the engine checks whole (building every model) before it queues any.
pub fn schedule(
    state: &State,
    link: &str,
    req: &ScheduleRequest,
    start: std::time::Instant,
) -> Result<(), ApiError> {
    impaired_link(state, link)?;
    let steps = schedule_steps(req)?;
    // Measured by the engine from when it gets the request: what passed since this one came
    // is taken off.
    let passed = start.elapsed();
    let changes: Vec<_> = steps
        .iter()
        .map(|(at, dir, netem)| (*dir, at.saturating_sub(passed), netem))
        .collect();
    rtemu_control::lab::schedule_link(&state.lab, link, &changes).map_err(|e| engine_gone(state, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(file: &str) -> PartRequest {
        PartRequest {
            topology: "lab = \"tr\"\n[hosts]\nh1 = { address = \"192.0.2.1\" }\n\
                       h2 = { address = \"192.0.2.2\" }\n[nodes.a]\nhost = \"h1\"\n\
                       [nodes.b]\nhost = \"h2\"\n[[links]]\nendpoints = [\"a\", \"b\"]\n\
                       trace = \"link.down\"\n"
                .to_owned(),
            file: file.to_owned(),
            name: Some("tr2".to_owned()),
            host: "h1".to_owned(),
            stitching: rtemu_api::body::Stitching {
                port: 4789,
                vnis: [("a-b".to_owned(), 1 << 20)].into(),
            },
        }
    }

    #[test]
    fn a_part_finds_its_traces_beside_the_topology_file_s_absolute_path() {
        let dir = std::env::temp_dir().join(format!("rtemu-part-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("link.down"), "1\n2\n").unwrap();
        let file = dir.join("split.toml");
        let topo = part_topology(&part(file.to_str().unwrap())).unwrap();
        assert_eq!(topo.lab, "tr2");
        // Without it, the error names the path it was looked for at.
        std::fs::remove_file(dir.join("link.down")).unwrap();
        let e = part_topology(&part(file.to_str().unwrap())).unwrap_err();
        let looked = dir.join("link.down");
        assert!(
            e.message.contains(&*looked.to_string_lossy()),
            "{}",
            e.message
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A lab of three nodes (a link, a LAN and a host interface) whose state holds `nodes`
    /// (a host's part holds some).
    fn counted_lab(nodes: &[&str]) -> State {
        let topology = "lab = \"views\"\n[nodes.a]\n[nodes.b]\n[nodes.c]\n[[links]]\n\
                        name = \"ab\"\nendpoints = [\"a\", \"b\"]\n[[lans]]\nname = \"office\"\n\
                        members = [\"a\", \"b\", \"c\"]\n[[externals]]\nnode = \"c\"\n\
                        host = \"uplink0\"\nmode = \"macvlan\"\n";
        State {
            lab: LabName::new("views").unwrap(),
            file: INLINE.into(),
            namespaces: vec![],
            nodes: nodes
                .iter()
                .map(|n| (n.to_string(), format!("rtemu-views.{n}")))
                .collect(),
            handovers: vec![],
            cgroups: vec![],
            programs: None,
            complete: true,
            topology: Topology::parse(INLINE, topology).unwrap(),
            part: None,
        }
    }

    /// The counters read of every node are the interfaces the lab view shows; those read of
    /// the nodes asked for are exactly those nodes' part of them, in the state's order (here
    /// not the topology's); a name the lab (or this host's part) has no node of is a 404
    /// naming it.
    #[test]
    fn counters_read_only_the_asked_nodes_interfaces() {
        let state = counted_lab(&["c", "a", "b"]);
        let all = counted(&state, None).unwrap();
        let view = body::nodes(&state);
        assert_eq!((all.len(), view.len()), (3, 3));
        for (c, v) in all.iter().zip(&view) {
            let interfaces: Vec<(&str, &str)> = v
                .interfaces
                .iter()
                .map(|i| (i.name.as_str(), i.segment.as_str()))
                .collect();
            assert_eq!((c.name, c.netns), (v.name.as_str(), v.netns.as_str()));
            assert_eq!(c.interfaces, interfaces);
        }
        assert_eq!(all[0].interfaces.len(), 2, "c's LAN and host interfaces");
        let asked = |names: &[&str]| {
            let only: BTreeSet<String> = names.iter().map(|n| n.to_string()).collect();
            counted(&state, Some(&only))
        };
        for names in [&["b"][..], &["c", "a"], &["a", "b", "c"]] {
            let part: Vec<&Counted> = all.iter().filter(|c| names.contains(&c.name)).collect();
            assert_eq!(asked(names).unwrap().iter().collect::<Vec<_>>(), part);
        }
        let unknown = |e| ApiError::not_found(format!("lab `views` has no node \"{e}\""));
        assert_eq!(asked(&["b", "zz"]).unwrap_err(), unknown("zz"));
        // A node of the topology that another host's part runs.
        let part = counted_lab(&["a", "b"]);
        let only = BTreeSet::from(["c".to_owned()]);
        assert_eq!(counted(&part, Some(&only)).unwrap_err(), unknown("c"));
        assert_eq!(counted(&part, None).unwrap().len(), 2);
    }
}
