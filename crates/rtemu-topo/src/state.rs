//! The lab state file, `/run/rtemu/<lab>/state.json`: what a lab is made of, written before
//! anything is created so teardown is exact even after a crash.
//!
//! Every kernel object rtemu creates lives in a namespace the state file names (interfaces,
//! bridges, routes and neighbour entries vanish with their namespace), so the namespaces, their
//! `/etc/netns/<ns>` directories and the processes inside them are all `down` must remove.

use std::io;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::Topology;

/// Where lab state directories live (`/run` is a tmpfs: a reboot forgets labs, as it forgets
/// namespaces).
pub const STATE_ROOT: &str = "/run/rtemu";

/// What a lab consists of.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// The lab's name.
    pub lab: String,
    /// The topology file it was brought up from.
    pub file: String,
    /// Every namespace of the lab, recorded before it is created.
    pub namespaces: Vec<String>,
    /// Node name → namespace name.
    pub nodes: Vec<(String, String)>,
    /// Host interfaces moved into nodes, recorded before they move, so `down` can give them
    /// back even after a crash.
    #[serde(default)]
    pub handovers: Vec<Handover>,
    /// Whether `up` finished.
    pub complete: bool,
    /// The validated topology, for `ls` and `graph`.
    pub topology: Topology,
}

/// The state directory of `lab`.
pub fn lab_dir(lab: &str) -> PathBuf {
    PathBuf::from(STATE_ROOT).join(lab)
}

impl State {
    /// Writes the state file atomically (a crash leaves the old or the new file, never half).
    pub fn save(&self) -> io::Result<()> {
        let dir = lab_dir(&self.lab);
        std::fs::create_dir_all(&dir)?;
        let tmp = dir.join("state.json.tmp");
        let json = serde_json::to_vec_pretty(self).map_err(io::Error::other)?;
        std::fs::write(&tmp, json)?;
        std::fs::File::open(&tmp)?.sync_all()?;
        std::fs::rename(tmp, dir.join("state.json"))
    }

    /// Reads the state of `lab`; `Ok(None)` when no such lab exists.
    pub fn load(lab: &str) -> io::Result<Option<State>> {
        match std::fs::read(lab_dir(lab).join("state.json")) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The names of all labs with a state directory, sorted.
    pub fn labs() -> io::Result<Vec<String>> {
        let mut labs = Vec::new();
        match std::fs::read_dir(STATE_ROOT) {
            Ok(entries) => {
                for e in entries {
                    let e = e?;
                    if e.file_type()?.is_dir() {
                        labs.push(e.file_name().to_string_lossy().into_owned());
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        labs.sort();
        Ok(labs)
    }
}

/// A host interface moved into a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Handover {
    /// Its name on the host, restored when it comes back.
    pub host: String,
    /// The node's namespace.
    pub netns: String,
    /// Its name inside the node.
    pub ifname: String,
}
