//! The lab state file, `/run/rtemu/<lab>/state.json`: what a lab is made of, written before
//! anything is created so teardown is exact even after a crash.
//!
//! Every kernel object rtemu creates lives in a namespace the state file names (interfaces,
//! bridges, routes and neighbour entries vanish with their namespace), so the namespaces, their
//! `/etc/netns/<ns>` directories and the processes inside them are all `down` must remove.
//!
//! Beside it, `/run/rtemu/<lab>/detached.jsonl` lists the processes `rtemu exec --detach`
//! started ([`Detached`], one JSON object a line, appended as each starts), so `rtemu ls` can
//! show them and `down` ends them, also one that left its node's namespace.

use std::io::{self, Write};
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
    /// Node name → its CPU-limit cgroup, for nodes with a `cpu` limit, recorded before the
    /// cgroup is made.
    #[serde(default)]
    pub cgroups: Vec<(String, PathBuf)>,
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

    /// The processes `rtemu exec --detach` started in this lab (see [`detached`]).
    pub fn detached(&self) -> io::Result<Vec<Detached>> {
        detached(&self.lab)
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

/// The file in a lab's state directory listing the processes `rtemu exec --detach` started.
pub const DETACHED_FILE: &str = "detached.jsonl";

/// A process started in a node by `rtemu exec --detach`: the leader of its own process group,
/// with its output in `/run/rtemu/<lab>/<node>.<n>.log`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Detached {
    /// Its process id (and process group id).
    pub pid: i32,
    /// When it started, in clock ticks after boot (field 22 of `/proc/<pid>/stat`): a later
    /// process that reuses the pid has another start time, so it is never mistaken for this one.
    pub start_time: u64,
    /// The node it was started in.
    pub node: String,
    /// Its command line.
    pub command: Vec<String>,
    /// Where its standard output and error go.
    pub log: PathBuf,
}

impl Detached {
    /// Whether the process still runs: its pid is live (not a zombie) with the recorded start
    /// time.
    pub fn running(&self) -> bool {
        proc_stat(self.pid).is_some_and(|(state, start)| state != 'Z' && start == self.start_time)
    }
}

/// The state letter (`R`, `S`, `Z`, …) and start time (clock ticks after boot) of process
/// `pid`, from `/proc/<pid>/stat`; `None` when there is no such process.
pub fn proc_stat(pid: i32) -> Option<(char, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may itself hold spaces and ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    // Field 3 was the state; the start time is field 22.
    let start = fields.nth(22 - 4)?.parse().ok()?;
    Some((state, start))
}

/// The processes `rtemu exec --detach` started in lab `lab`, in the order they started; empty
/// when there are none. A line a crash left half-written is skipped.
pub fn detached(lab: &str) -> io::Result<Vec<Detached>> {
    match std::fs::read_to_string(lab_dir(lab).join(DETACHED_FILE)) {
        Ok(text) => Ok(text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// Appends `process` to the list of lab `lab`'s detached processes. The line is written in one
/// `write` to a file opened for appending, so records of processes started at the same time
/// never interleave.
pub fn record_detached(lab: &str, process: &Detached) -> io::Result<()> {
    let mut line = serde_json::to_string(process).map_err(io::Error::other)?;
    line.push('\n');
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(lab_dir(lab).join(DETACHED_FILE))?
        .write_all(line.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_reads_this_process_as_running() {
        let (state, start) = proc_stat(std::process::id() as i32).unwrap();
        // The process's state is its main thread's, which may be waiting for the test threads.
        assert!(matches!(state, 'R' | 'S' | 'D'), "state {state}");
        let me = Detached {
            pid: std::process::id() as i32,
            start_time: start,
            node: "a".into(),
            command: vec!["x".into()],
            log: "/dev/null".into(),
        };
        assert!(me.running());
        assert!(!Detached {
            start_time: start + 1,
            ..me
        }
        .running());
    }
}
