//! A node's views of a lab across hosts: a command run in it (`exec`) and its output (`logs`),
//! asked of the agent of the host the node runs on; and the kernel's counters of every node's
//! interfaces, asked of every host (each holds its own nodes').

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use rtemu_api::body::{ExecReply, ExecRequest, InterfaceCounters};

use crate::spread::{ask_each, Spread};
use crate::ClusterError;

/// How long past the command's own time limit its host's agent may take to answer.
const SLACK: Duration = Duration::from_secs(30);

/// The time limit of a command run without one (the agents' default).
const DEFAULT_EXEC: Duration = Duration::from_secs(60);

/// How long an agent may take to read its nodes' counters or a node's logs.
const READ_TIMEOUT: Duration = Duration::from_secs(15);

/// Runs `req` in node `node` of `spread`, through the agent of the node's host, which checks
/// the request as for a lab of its own.
pub fn exec(spread: &Spread, node: &str, req: &ExecRequest) -> Result<ExecReply, ClusterError> {
    let agent = spread.agent(host(spread, node)?)?;
    let body = serde_json::to_vec(req).map_err(anyhow::Error::from)?;
    // A limit out of range is the agent's to refuse: no more than a minute is waited for it.
    let limit = req
        .timeout
        .and_then(|t| Duration::try_from_secs_f64(t).ok())
        .unwrap_or(DEFAULT_EXEC)
        .min(Duration::from_secs(3600));
    let path = format!("/v1/labs/{}/nodes/{node}/exec", spread.lab);
    agent.call("POST", &path, Some(&body), limit + SLACK)
}

/// Node `node`'s output (its last `tail` lines), from the agent of the node's host.
pub fn logs(spread: &Spread, node: &str, tail: Option<u32>) -> Result<ExecReply, ClusterError> {
    let agent = spread.agent(host(spread, node)?)?;
    let mut path = format!("/v1/labs/{}/nodes/{node}/logs", spread.lab);
    if let Some(n) = tail {
        path += &format!("?tail={n}");
    }
    agent.call("GET", &path, None, READ_TIMEOUT)
}

/// The kernel's counters of every interface of every node of `spread` (or of the nodes `only`
/// names: a name the lab has no node of is refused before any agent is asked), each host's
/// from its agent (only the hosts of the nodes asked for), in the topology's order of nodes;
/// any host that cannot give its own fails the whole (the counters of half a lab would read
/// as a lab without traffic there).
pub fn counters(
    spread: &Spread,
    only: Option<&BTreeSet<String>>,
) -> Result<Vec<InterfaceCounters>, ClusterError> {
    let topo = spread.topology();
    let mut by_host: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    if let Some(only) = only {
        for node in only {
            by_host
                .entry(host(spread, node)?)
                .or_default()
                .push(node.as_str());
        }
    } else {
        for h in &topo.hosts {
            by_host.insert(h.name.as_str(), Vec::new());
        }
    }
    let agents = by_host
        .keys()
        .map(|h| spread.agent(h))
        .collect::<Result<Vec<_>, _>>()?;
    let each = ask_each(&agents, |a| {
        let mut query = form_urlencoded::Serializer::new(String::new());
        for node in &by_host[a.host.name.as_str()] {
            query.append_pair("node", node);
        }
        let path = format!("/v1/labs/{}/counters?{}", spread.lab, query.finish());
        a.call::<Vec<InterfaceCounters>>("GET", &path, None, READ_TIMEOUT)
    });
    let mut all = Vec::new();
    for counters in each {
        all.extend(counters?);
    }
    // Stable: each node's interfaces keep their agent's order.
    all.sort_by_key(|c| topo.node_index(&c.node));
    Ok(all)
}

/// The host node `node` of `spread` runs on.
fn host<'a>(spread: &'a Spread, node: &str) -> Result<&'a str, ClusterError> {
    spread
        .host_of(node)
        .ok_or_else(|| ClusterError::NoSuchNode {
            lab: spread.lab.clone(),
            node: node.to_owned(),
        })
}
