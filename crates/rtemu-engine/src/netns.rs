//! Running set-up code inside a network namespace.
//!
//! A socket belongs to the namespace it was created in for its whole life, so the engine opens
//! its packet sockets (and switches offloads) on a short-lived thread that has entered the lab's
//! namespace, and uses them from its own thread afterwards. The calling thread's namespace never
//! changes.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use rtemu_sys::netns::{self as sys_netns, RunError};

/// Entering a namespace failed.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    /// The namespace file could not be opened.
    #[error("opening network namespace {path}: {source}")]
    Open {
        /// The path given.
        path: String,
        /// Why.
        source: io::Error,
    },
    /// `setns` refused.
    #[error("entering network namespace {path}: {source} (needs CAP_SYS_ADMIN)")]
    Enter {
        /// The path given.
        path: String,
        /// Why.
        source: io::Error,
    },
    /// The closure panicked.
    #[error("the set-up thread in network namespace {0} panicked")]
    Panicked(String),
    /// No thread could be started to enter the namespace.
    #[error(transparent)]
    Spawn(rtemu_sys::thread::SpawnError),
}

/// The path of a namespace named by `ip netns add NAME`.
pub fn named(name: &str) -> std::path::PathBuf {
    Path::new("/run/netns").join(name)
}

/// Moves the calling thread into the network namespace at `path`. Threads it starts later
/// begin there too. A process whose main thread does this is listed among the namespace's
/// processes (`/proc/PID/ns/net`), which is how a lab's teardown finds its engine.
pub fn enter(path: &Path) -> Result<(), NetnsError> {
    let (ns, shown) = open(path)?;
    sys_netns::enter(ns.as_fd()).map_err(|source| NetnsError::Enter {
        path: shown,
        source,
    })
}

/// Whether the calling thread is in the network namespace at `path`: false once that name is
/// gone (the lab was taken down) or names another namespace. A lab's engine that entered its
/// namespace in the very moment `down` removed it finds out here and ends, rather than run on
/// in a namespace nothing can reach.
pub fn still_in(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (
        std::fs::metadata(path),
        std::fs::metadata("/proc/thread-self/ns/net"),
    ) {
        (Ok(named), Ok(own)) => (named.dev(), named.ino()) == (own.dev(), own.ino()),
        _ => false,
    }
}

/// Runs `f` on a new thread inside the network namespace at `path` (`/run/netns/NAME`,
/// `/proc/PID/ns/net`) and returns its result.
pub fn run_in<T: Send + 'static>(
    path: &Path,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, NetnsError> {
    let (ns, shown) = open(path)?;
    sys_netns::run_in(ns, f).map_err(|e| match e {
        RunError::Enter(source) => NetnsError::Enter {
            path: shown,
            source,
        },
        RunError::Panicked => NetnsError::Panicked(shown),
        RunError::Spawn(e) => NetnsError::Spawn(e),
    })
}

/// The namespace file at `path`, and the path as errors show it.
fn open(path: &Path) -> Result<(OwnedFd, String), NetnsError> {
    let shown = path.display().to_string();
    match File::open(path) {
        Ok(f) => Ok((f.into(), shown)),
        Err(source) => Err(NetnsError::Open {
            path: shown,
            source,
        }),
    }
}
