//! The container runtime behind one small interface: resolving images, starting a container
//! into a namespace rtemu made, checking its health, finding a lab's containers by their
//! labels, and the command lines of `exec` and `logs`.
//!
//! [`podman`] is the one implementation: rootful podman joins a foreign network namespace
//! (`--network ns:PATH`), is daemonless, and brings image storage, pulls, `load`/`import`,
//! logs, health checks and exec. An OCI runtime driven directly (runc with a bundle) can
//! implement the same trait.
//!
//! Every container a lab starts is named `rtemu-<lab>-<node>` (its namespace's name) and
//! labelled [`LAB_LABEL`]`=<lab>` and [`NODE_LABEL`]`=<node>`: the labels are rtemu's mark, so
//! only containers that carry them are ever removed, and `down` finds them without the state
//! file.

pub mod podman;

use std::path::PathBuf;
use std::process::Command;

use serde::{Deserialize, Serialize};

use crate::container::Container;

/// The label naming a container's lab.
pub const LAB_LABEL: &str = "rtemu.lab";
/// The label naming a container's node.
pub const NODE_LABEL: &str = "rtemu.node";

/// Why the runtime could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The runtime's program is not installed.
    #[error("{program} is not installed: node `{node}` runs an image, and rtemu starts images with rootful podman (Debian/Ubuntu: `apt-get install podman runc`, or run install.sh)")]
    Missing {
        /// The program looked for.
        program: &'static str,
        /// A node that needs it.
        node: String,
    },
    /// Running the runtime's program failed.
    #[error("running `{command}`: {source}")]
    Spawn {
        /// The command line.
        command: String,
        /// Why.
        source: std::io::Error,
    },
    /// The runtime's program said no.
    #[error("`{command}` failed ({status}): {stderr}")]
    Failed {
        /// The command line.
        command: String,
        /// Its exit status.
        status: String,
        /// The last lines of what it wrote to standard error.
        stderr: String,
    },
    /// Its output was not what this version of rtemu understands.
    #[error("`{command}` wrote output rtemu does not understand: {why}")]
    Output {
        /// The command line.
        command: String,
        /// What was wrong.
        why: String,
    },
}

/// Everything a container of a node is started with.
#[derive(Debug, Clone)]
pub struct RunSpec<'a> {
    /// The container's name, `rtemu-<lab>-<node>`.
    pub name: String,
    /// Its lab.
    pub lab: &'a str,
    /// Its node (also its host name).
    pub node: &'a str,
    /// The node's network namespace, which the container joins.
    pub netns: PathBuf,
    /// The node's hosts file, mounted as the container's `/etc/hosts`.
    pub hosts: Option<PathBuf>,
    /// The resolver configuration a process in the bare node sees, mounted as the
    /// container's `/etc/resolv.conf`.
    pub resolv: Option<PathBuf>,
    /// What the topology file says of the container.
    pub container: &'a Container,
    /// Its environment: rtemu's variables, then the node's `env`.
    pub env: Vec<(String, String)>,
    /// The node's CPU limit in cores.
    pub cpu: Option<f64>,
    /// The CPUs it may run on (the lab's programs kept off the engine's); `None`: every CPU.
    pub cpuset: Option<Vec<usize>>,
}

/// How a container stands, as `ls` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "lowercase")]
pub enum Status {
    /// Made, not started (or starting).
    Created,
    /// Running, with no health check, or none run yet.
    Running,
    /// Running, its last health check passed.
    Healthy,
    /// Running, its last health check failed.
    Unhealthy,
    /// Ended.
    Exited {
        /// Its exit status.
        exit_code: i32,
    },
    /// The runtime has no such container.
    Missing,
    /// A state rtemu does not name (paused, stopping, …), as the runtime says it.
    Other {
        /// The runtime's word.
        runtime_state: String,
    },
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Status::Created => f.write_str("created"),
            Status::Running => f.write_str("running"),
            Status::Healthy => f.write_str("healthy"),
            Status::Unhealthy => f.write_str("unhealthy"),
            Status::Exited { exit_code } => write!(f, "exited with code {exit_code}"),
            Status::Missing => f.write_str("missing"),
            Status::Other { runtime_state } => f.write_str(runtime_state),
        }
    }
}

/// One container the runtime holds with a lab's label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// The runtime's id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its node label, when it has one.
    pub node: Option<String>,
    /// Its image.
    pub image: String,
    /// How it stands.
    pub status: Status,
}

/// A container runtime.
pub trait Runtime: Sync {
    /// Whether the host holds `image`.
    fn has_image(&self, image: &str) -> Result<bool, RuntimeError>;
    /// Pulls `image` from its registry.
    fn pull(&self, image: &str) -> Result<(), RuntimeError>;
    /// Creates and starts the container `spec` describes, detached; returns once it runs.
    fn run(&self, spec: &RunSpec<'_>) -> Result<(), RuntimeError>;
    /// Runs container `name`'s health check once: whether it passed.
    fn check_health(&self, name: &str) -> Result<bool, RuntimeError>;
    /// Every container labelled with lab `lab`, in any state.
    fn list(&self, lab: &str) -> Result<Vec<Listed>, RuntimeError>;
    /// The containers a create that was killed half-way left in image storage: no labels, no
    /// process, only a name (which keeps the next `up` from using it).
    fn orphans(&self) -> Result<Vec<Listed>, RuntimeError>;
    /// Stops (at once) and removes the containers of `ids`.
    fn remove(&self, ids: &[String]) -> Result<(), RuntimeError>;
    /// The command that runs `argv` in container `name` with its file system and environment;
    /// `interactive` keeps standard input open and gives it a terminal.
    fn exec(&self, name: &str, argv: &[String], interactive: bool) -> Command;
    /// The command that prints container `name`'s output: its last `tail` lines when given,
    /// then what follows when `follow`.
    fn logs(&self, name: &str, follow: bool, tail: Option<u32>) -> Command;
}
