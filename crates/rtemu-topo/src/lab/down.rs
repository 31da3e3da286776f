//! Taking a lab down: its containers, processes, namespaces, hosts files, cgroups and state,
//! only what carries its mark.

use std::collections::BTreeSet;
use std::io;

use crate::cgroup;
use crate::naming::ownership_mark;
use crate::state::{LabName, State};
use crate::sys;

use super::builders::on_builders;
use super::error::{io_err, LabError};
use super::handover::give_back;
use super::netns::{find_netns, Found};

/// Removes lab `lab`: its processes, namespaces, `/etc/netns` entries, cgroups and state.
/// Returns whether there was anything to remove.
///
/// Only what the lab's state file names, and only what carries the lab's mark, is touched:
/// the state file must pass [`State::check`] (a directory without one is refused and left),
/// a namespace must carry the lab's mark before its processes are killed and it is removed,
/// and a recorded process must still have its recorded start time.
pub fn down(lab: &str) -> Result<bool, LabError> {
    let lab = LabName::new(lab)?;
    crate::state::reap_unplaced(&lab);
    let state = State::load(&lab)?;
    // Containers first, found by their labels: also those of a lab whose state file is lost.
    let containers = remove_containers(&lab, state.as_ref());
    let Some(state) = state else {
        return Ok(containers? > 0);
    };
    give_back(&state.handovers)?;
    // Best effort: whatever of them is still in the lab's namespaces ends with the rest below.
    end_detached(&state);
    let mark = ownership_mark(&lab);
    let mut left = Vec::new();
    // Examined, then removed all together: each step is one pass, however many nodes.
    let mut ours = Vec::new();
    let mut ids = BTreeSet::new();
    let examined = on_builders(&state.namespaces, |ns| {
        let found = find_netns(ns).map_err(io_err(format!("examining namespace {ns}")))?;
        let id = match &found {
            Found::Marked(m) if m.as_deref() == Some(mark.as_str()) => {
                sys::netns_id(ns).map_err(io_err(format!("examining namespace {ns}")))?
            }
            _ => None,
        };
        Ok((found, id))
    })?;
    for (ns, (found, id)) in state.namespaces.iter().zip(examined) {
        match found {
            Found::Nothing => {}
            Found::Placeholder => {
                sys::delete_netns(ns).map_err(io_err(format!("removing namespace {ns}")))?
            }
            Found::Marked(m) if m.as_deref() == Some(mark.as_str()) => {
                ids.extend(id);
                ours.push(ns);
                continue;
            }
            Found::Marked(m) => {
                left.push(format!(
                    "namespace {ns} (marked {:?}, not {mark:?})",
                    m.unwrap_or_default()
                ));
                continue;
            }
        }
        remove_etc_netns(ns)?;
    }
    // Processes keep a namespace alive after its mount is gone: end them first, and once more
    // after, for one that entered in between (a starting engine).
    kill_in_netns(&ids, &lab)?;
    on_builders(&ours, |ns| {
        sys::delete_netns(ns).map_err(io_err(format!("removing namespace {ns}")))
    })?;
    kill_in_netns(&ids, &lab)?;
    for ns in ours {
        remove_etc_netns(ns)?;
    }
    let cpuset = state.programs.iter().map(|p| &p.cgroup);
    for cg in state.cgroups.iter().map(|(_, cg)| cg).chain(cpuset) {
        cgroup::remove(cg).map_err(io_err(format!("removing the cgroup {}", cg.display())))?;
    }
    state.remove_dir()?;
    // Reported once the rest is gone: a second `down` finds what is left by its labels.
    containers?;
    if !left.is_empty() {
        return Err(LabError::LeftAlone { lab, left });
    }
    Ok(true)
}

/// Removes the containers labelled with lab `lab`; how many there were. A lab whose state
/// names image nodes needs the runtime; without a state file (lost, or never written), the
/// runtime is asked when it is installed. A lab with no image nodes costs nothing.
fn remove_containers(lab: &LabName, state: Option<&State>) -> Result<usize, LabError> {
    let rt = match state {
        Some(s) => {
            let here: Vec<usize> = s
                .nodes
                .iter()
                .filter_map(|(n, _)| s.topology.node_index(n))
                .collect();
            crate::launch::runtime_for(&s.topology, &here)?
        }
        None => crate::runtime::podman::Podman::find(),
    };
    let Some(rt) = rt else { return Ok(0) };
    let names = state.map(crate::launch::names).unwrap_or_default();
    crate::launch::remove(lab, &names, &rt).map_err(|e| crate::launch::LaunchError::from(e).into())
}

/// SIGKILLs every process in the namespaces of identities `ids` (of lab `lab`, for messages).
fn kill_in_netns(ids: &BTreeSet<(u64, u64)>, lab: &LabName) -> Result<(), LabError> {
    let pids = sys::pids_in_any_netns(ids).map_err(io_err(format!(
        "listing processes in lab {lab}'s namespaces"
    )))?;
    for pid in pids {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    Ok(())
}

/// Removes `/etc/netns/<ns>` (the hosts file of a node); missing is not an error.
fn remove_etc_netns(ns: &str) -> Result<(), LabError> {
    let etc = std::path::Path::new("/etc/netns").join(ns);
    match std::fs::remove_dir_all(&etc) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            Err(io_err(format!("removing {}", etc.display()))(e))
        }
        _ => Ok(()),
    }
}

/// Ends the process groups of the lab's detached processes (`exec --detach`) whose leader
/// still runs, also any that left the node's namespace. A recorded pid is signalled only while
/// it belongs to the process recorded (same start time), never to a later one that reuses it,
/// and only when it was recorded for one of the lab's nodes.
fn end_detached(state: &State) {
    for d in crate::state::detached(&state.lab).unwrap_or_default() {
        let of_the_lab = d.pid > 1 && state.nodes.iter().any(|(n, _)| *n == d.node);
        if of_the_lab && d.running() {
            let pid = nix::unistd::Pid::from_raw(d.pid);
            let _ = nix::sys::signal::killpg(pid, nix::sys::signal::Signal::SIGKILL);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        }
    }
}
