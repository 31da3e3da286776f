//! Per-node CPU limits (the vimage paper's per-image CPU limit): one cgroup per limited node,
//! which every process rtemu starts in that node joins before it runs.
//!
//! cgroup v2 (`cpu.max`) is used where its `cpu` controller is available; otherwise the v1
//! `cpu` controller (`cpu.cfs_quota_us` over `cpu.cfs_period_us`), which enforces the same
//! bandwidth limit. Machines still mounting v1 hierarchies (with at most an empty v2 beside
//! them) have only the latter. Joining a cgroup and removing one are the same for every
//! controller (the lab's cpuset, [`crate::cpuset`], too).

use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::fcntl::OFlag;

use crate::sys::open_at;

/// `CGROUP_SUPER_MAGIC` (v1) and `CGROUP2_SUPER_MAGIC` (`linux/magic.h`).
const CGROUP_MAGICS: [i64; 2] = [0x0027_e0eb, 0x6367_7270];

/// The period of the bandwidth limit, µs: a node with `cpu = 0.5` runs at most 50 ms of every
/// 100 ms.
pub const PERIOD_US: u64 = 100_000;

/// Which cgroup interface a controller has here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// cgroup v2: the unified hierarchy (`cpu.max`, `cpuset.cpus`).
    V2,
    /// cgroup v1: a hierarchy of the controller's own (`cpu.cfs_quota_us` and
    /// `cpu.cfs_period_us`, `cpuset.cpus` and `cpuset.mems`).
    V1,
}

/// A cgroup hierarchy with a controller: CPU bandwidth ([`Controller::find`]) or cpusets
/// ([`crate::cpuset::Cpusets`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Controller {
    /// The directory new cgroups are made in.
    pub root: PathBuf,
    /// Its interface.
    pub version: Version,
}

impl Controller {
    /// The machine's CPU controller: cgroup v2's where it offers `cpu`, else v1's; `None` when
    /// neither is mounted.
    pub fn find() -> Option<Controller> {
        Controller::of("cpu", "cpu.cfs_quota_us")
    }

    /// The machine's controller `name`: cgroup v2's where the unified hierarchy offers it,
    /// else the v1 hierarchy of that name (which holds `file`); `None` when neither is mounted.
    pub(crate) fn of(name: &str, file: &str) -> Option<Controller> {
        for root in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
            let controllers = std::fs::read_to_string(Path::new(root).join("cgroup.controllers"));
            if controllers.is_ok_and(|c| c.split_whitespace().any(|w| w == name)) {
                return Some(Controller {
                    root: PathBuf::from(root),
                    version: Version::V2,
                });
            }
        }
        let v1 = Path::new("/sys/fs/cgroup").join(name);
        v1.join(file).exists().then_some(Controller {
            root: v1,
            version: Version::V1,
        })
    }

    /// The cgroup of namespace `ns` (named like it, so it is told apart as rtemu's).
    pub fn dir(&self, ns: &str) -> PathBuf {
        self.root.join(ns)
    }

    /// Makes the cgroup `dir` with a limit of `cores` CPUs (0.5: half of one core).
    pub fn create(&self, dir: &Path, cores: f64) -> io::Result<()> {
        let quota = ((cores * PERIOD_US as f64).round() as u64).max(1_000);
        if self.version == Version::V2 {
            // Children get the cpu controller only where their parent passes it on; it may
            // already be on, which the kernel accepts again.
            std::fs::write(self.root.join("cgroup.subtree_control"), "+cpu")?;
        }
        std::fs::create_dir(dir)?;
        match self.version {
            Version::V2 => std::fs::write(dir.join("cpu.max"), format!("{quota} {PERIOD_US}")),
            Version::V1 => {
                std::fs::write(dir.join("cpu.cfs_period_us"), PERIOD_US.to_string())?;
                std::fs::write(dir.join("cpu.cfs_quota_us"), quota.to_string())
            }
        }
    }
}

/// The file a process writes `0` to in order to join the cgroup `dir`.
pub fn procs_file(dir: &Path) -> PathBuf {
    dir.join("cgroup.procs")
}

/// Opens the `cgroup.procs` of the cgroup `dir` to write to it, refusing a symbolic link and
/// anything but a cgroup file system: what [`crate::sys::join_cgroup_on_exec`] writes to.
pub fn open_procs(dir: &Path) -> io::Result<OwnedFd> {
    let fd = open_at(
        None,
        &dir.join("cgroup.procs"),
        OFlag::O_WRONLY | OFlag::O_NOFOLLOW,
    )?;
    check_fs(&fd, dir)?;
    Ok(fd)
}

/// Checks that `fd` (opened at `path`) is on a cgroup file system.
pub(crate) fn check_fs(fd: &OwnedFd, path: &Path) -> io::Result<()> {
    let fs = nix::sys::statfs::fstatfs(fd)?;
    #[allow(clippy::unnecessary_cast)] // Its type differs between architectures.
    if !CGROUP_MAGICS.contains(&(fs.filesystem_type().0 as i64)) {
        return Err(io::Error::other(format!(
            "{} is not on a cgroup file system",
            path.display()
        )));
    }
    Ok(())
}

/// Removes the cgroup `dir` after ending the processes still in it. A cgroup is removable only
/// once its last process has exited, which takes a moment after a kill: retried for up to two
/// seconds. One that does not exist is fine.
pub fn remove(dir: &Path) -> io::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        match std::fs::read_to_string(procs_file(dir)) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
            Ok(pids) => {
                for pid in pids.lines().filter_map(|p| p.trim().parse::<i32>().ok()) {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(pid),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
            }
        }
        match std::fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(e),
        }
    }
}
