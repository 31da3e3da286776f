//! A lab across hosts, as the lab-wide views reach it from the machine that coordinates it or
//! from any host holding a part of it: its topology, which says on which host each node and
//! each impaired link's engine runs, and the agents of its hosts.

use std::path::Path;

use anyhow::{anyhow, Context, Result};
use rtemu_topo::state::{LabName, State};
use rtemu_topo::Topology;

use crate::{recorded, recorded_labs, Agent, ClusterError, Credentials, Recorded};

/// A lab this machine brought up across hosts, with the tokens of their agents.
pub struct Spread {
    /// The lab.
    pub lab: LabName,
    pub(super) recorded: Recorded,
    pub(super) credentials: Credentials,
}

impl Spread {
    /// Lab `lab` across hosts, with the agents' tokens in `credentials`: when this machine
    /// coordinates it, or holds a part of it and has the credentials file (a part's state
    /// holds the whole topology, so any host of the lab sees it whole). `None` otherwise: the
    /// lab may still run here alone, or as a part this host shows on its own.
    pub fn open(lab: &LabName, credentials: &Path) -> Result<Option<Spread>> {
        let recorded = match recorded(lab)? {
            Some(r) => r,
            None => match part_here(lab, credentials)? {
                Some((r, _)) => r,
                None => return Ok(None),
            },
        };
        Ok(Some(Spread {
            lab: lab.clone(),
            recorded,
            credentials: Credentials::load(credentials)?,
        }))
    }

    /// Lab `lab` when this machine coordinates it (it brought it up across hosts), with the
    /// agents' tokens `credentials`; `None` otherwise. Unlike [`Spread::open`], a part this
    /// host holds as an agent is not seen whole: a server that coordinates labs may be an
    /// agent too, and its agents' questions must not come back to it as questions to them.
    pub fn coordinated(
        lab: &LabName,
        credentials: &Credentials,
    ) -> Result<Option<Spread>, ClusterError> {
        Ok(recorded(lab)?.map(|recorded| Spread {
            lab: lab.clone(),
            recorded,
            credentials: credentials.clone(),
        }))
    }

    /// Every lab this machine coordinates (see [`Spread::coordinated`]), in name order.
    pub fn all_coordinated(credentials: &Credentials) -> Result<Vec<Spread>, ClusterError> {
        let mut labs = Vec::new();
        for lab in recorded_labs()? {
            labs.extend(Spread::coordinated(&lab, credentials)?);
        }
        Ok(labs)
    }

    /// Every lab this machine coordinates or holds a part of (see [`Spread::open`]); the
    /// credentials are read only when there is one.
    pub fn all(credentials: &Path) -> Result<Vec<Spread>> {
        let mut names = recorded_labs()?;
        if credentials_given(credentials)? {
            for lab in State::labs()? {
                if !names.contains(&lab) {
                    names.push(lab);
                }
            }
        }
        let mut labs = Vec::new();
        for lab in names {
            labs.extend(Spread::open(&lab, credentials)?);
        }
        Ok(labs)
    }

    /// Its topology, named as it runs.
    pub fn topology(&self) -> &Topology {
        &self.recorded.topology
    }

    /// The whole lab as one lab's state (see [`whole_state`]).
    pub fn state(&self) -> State {
        whole_state(&self.lab, &self.recorded.file, &self.recorded.topology)
    }

    /// The agent of every host of the lab, in `[hosts]` order.
    pub(crate) fn agents(&self) -> Result<Vec<Agent<'_>>, ClusterError> {
        self.credentials.agents(&self.recorded.topology.hosts)
    }

    /// The agent of host `host`.
    pub(crate) fn agent(&self, host: &str) -> Result<Agent<'_>, ClusterError> {
        let h = self
            .recorded
            .topology
            .hosts
            .iter()
            .find(|h| h.name == host)
            .ok_or_else(|| anyhow!("lab `{}` has no host `{host}`", self.lab))
            .map_err(ClusterError::Local)?;
        let mut agents = self.credentials.agents(std::slice::from_ref(h))?;
        Ok(agents.remove(0))
    }

    /// The host node `node` runs on.
    pub(crate) fn host_of(&self, node: &str) -> Option<&str> {
        let topo = &self.recorded.topology;
        topo.nodes[topo.node_index(node)?].host.as_deref()
    }
}

/// Whether the credentials file exists (a host without one shows its own part only).
fn credentials_given(credentials: &Path) -> Result<bool> {
    match std::fs::symlink_metadata(credentials) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e).with_context(|| format!("examining {}", credentials.display())),
    }
}

/// Lab `lab` as the part of it on this host knows it (the whole file and topology) and this
/// host's name in it, when there is such a part and the agents' credentials are at hand.
pub(crate) fn part_here(lab: &LabName, credentials: &Path) -> Result<Option<(Recorded, String)>> {
    if !credentials_given(credentials)? {
        return Ok(None);
    }
    let Some(state) = State::load(lab.as_str())? else {
        return Ok(None);
    };
    Ok(state.part.map(|part| {
        let recorded = Recorded {
            file: state.file,
            topology: state.topology,
        };
        (recorded, part.host)
    }))
}

/// Lab `lab` across hosts (brought up from `file` as `topo`) as one lab's state: every node
/// in the namespace its host gives it (named as on one machine), for the views and for naming
/// capture targets.
pub fn whole_state(lab: &LabName, file: &str, topo: &Topology) -> State {
    let nodes: Vec<(String, String)> = topo
        .nodes
        .iter()
        .map(|n| {
            let ns = rtemu_topo::lab::node_netns(&topo.lab, &n.name);
            (n.name.clone(), ns)
        })
        .collect();
    State {
        lab: lab.clone(),
        file: file.to_owned(),
        namespaces: nodes.iter().map(|(_, ns)| ns.clone()).collect(),
        nodes,
        handovers: Vec::new(),
        cgroups: Vec::new(),
        programs: None,
        complete: true,
        topology: topo.clone(),
        part: None,
    }
}

/// `ask` of every agent of `agents` at once (one thread each, so hosts that do not answer cost
/// one timeout, not one each), the answers in `agents`' order.
pub(crate) fn ask_each<T: Send>(
    agents: &[Agent<'_>],
    ask: impl Fn(&Agent<'_>) -> T + Sync,
) -> Vec<T> {
    std::thread::scope(|s| {
        // An agent whose thread cannot be started is asked by this thread, after the others.
        let asking: Vec<_> = agents
            .iter()
            .map(|a| rtemu_sys::thread::spawn_scoped(s, "rtemu-ask", || ask(a)).map_err(|_| a))
            .collect();
        asking
            .into_iter()
            .map(|t| match t {
                Ok(t) => t.join().expect("asking an agent does not panic"),
                Err(a) => ask(a),
            })
            .collect()
    })
}
