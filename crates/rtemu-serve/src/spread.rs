//! Labs across hosts, when the server coordinates them (`rtemu serve --credentials F`): the
//! same calls into `rtemu-cluster` the command line makes (`rtemu up` of a topology with
//! `[hosts]`, `ls`, `stats`, `link`, `capture`, `down`, a node's `exec` and `logs`), answered as the API answers for a lab on one
//! machine. Only labs this machine brought up across hosts are seen whole: the part a server
//! holds as another coordinator's agent shows as its part, so an agent's answer never comes
//! back to it as a question. Every function here blocks (the agents' replies).

use std::collections::BTreeSet;
use std::sync::Arc;

use rtemu_api::body::{
    DownReply, ExecReply, ExecRequest, InterfaceCounters, Lab, LabSummary, ScheduleRequest,
    StatsReply,
};
use rtemu_cluster::link::Change;
use rtemu_cluster::spread::Spread;
use rtemu_cluster::Credentials;
use rtemu_topo::state::LabName;
use rtemu_topo::Topology;

use crate::error::ApiError;

/// The agents' credentials of a coordinating server, read and checked at its start.
pub type Coordinator = Arc<Credentials>;

/// Lab `lab` when `coordinator` brought it up across hosts.
pub fn open(coordinator: &Coordinator, lab: &LabName) -> Result<Option<Spread>, ApiError> {
    Ok(Spread::coordinated(lab, coordinator)?)
}

/// The whole lab: every node with its host, each host's part as its agent says.
pub fn view(spread: &Spread) -> Result<Lab, ApiError> {
    Ok(rtemu_cluster::listing::spread_lab(spread)?.lab)
}

/// The lab counted, each host's part as its agent lists it.
pub fn summary(spread: &Spread) -> Result<LabSummary, ApiError> {
    Ok(rtemu_cluster::listing::spread_summary(spread)?)
}

/// Every lab `coordinator` brought up across hosts, as the lab list shows them.
pub fn labs(coordinator: &Coordinator) -> Result<Vec<LabSummary>, ApiError> {
    Spread::all_coordinated(coordinator)?
        .iter()
        .map(summary)
        .collect()
}

/// Brings up `topo` (its text `text`, named `file`) across its hosts; with `replace`, takes
/// the lab of that name down first (everywhere this machine brought it up, and here).
pub fn up(
    coordinator: &Coordinator,
    topo: &Topology,
    text: &str,
    file: &str,
    replace: bool,
) -> Result<Lab, ApiError> {
    let lab = LabName::new(&topo.lab)?;
    if replace {
        rtemu_cluster::down_coordinated(&lab, coordinator)?;
        rtemu_control::lab::down(&lab).removed?;
    }
    rtemu_cluster::up_from_text(topo, text, file, coordinator)?;
    let spread = open(coordinator, &lab)?.ok_or_else(|| {
        ApiError::new(
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            format!("lab `{lab}` is up, but its record is gone"),
        )
    })?;
    view(&spread)
}

/// Takes lab `lab` down on every host; `None` when `coordinator` did not bring it up.
pub fn down(coordinator: &Coordinator, lab: &LabName) -> Result<Option<DownReply>, ApiError> {
    let down = rtemu_cluster::down_coordinated(lab, coordinator)?;
    Ok(down.map(|d| DownReply {
        lab: d.lab.to_string(),
        removed: true,
        report: d.report,
    }))
}

/// Every engine host's stats, merged in the topology's order.
pub fn stats(spread: &Spread) -> Result<StatsReply, ApiError> {
    Ok(StatsReply::Hosts(rtemu_cluster::stats::read_engines(
        spread,
    )?))
}

/// Has the engine host of `link` queue the changes of `req`.
pub fn schedule(spread: &Spread, link: &str, req: &ScheduleRequest) -> Result<(), ApiError> {
    Ok(rtemu_cluster::link::schedule(spread, link, req)?)
}

/// Has the engine host of `link` make `change`.
pub fn change(spread: &Spread, link: &str, change: &Change) -> Result<(), ApiError> {
    Ok(rtemu_cluster::link::change(spread, link, change)?)
}

/// The kernel's counters of every node's interfaces (or of the nodes `only` names), each
/// host's from its agent.
pub fn counters(
    spread: &Spread,
    only: Option<&BTreeSet<String>>,
) -> Result<Vec<InterfaceCounters>, ApiError> {
    Ok(rtemu_cluster::node::counters(spread, only)?)
}

/// Has the agent of `node`'s host run `req` in it.
pub fn exec(spread: &Spread, node: &str, req: &ExecRequest) -> Result<ExecReply, ApiError> {
    Ok(rtemu_cluster::node::exec(spread, node, req)?)
}

/// `node`'s output, from its host's agent.
pub fn logs(spread: &Spread, node: &str, tail: Option<u32>) -> Result<ExecReply, ApiError> {
    Ok(rtemu_cluster::node::logs(spread, node, tail)?)
}
