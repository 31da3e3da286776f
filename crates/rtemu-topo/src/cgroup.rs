//! Per-node CPU limits (the vimage paper's per-image CPU limit): one cgroup per limited node,
//! which every process rtemu starts in that node joins before it runs.
//!
//! cgroup v2 (`cpu.max`) is used where its `cpu` controller is available; otherwise the v1
//! `cpu` controller (`cpu.cfs_quota_us` over `cpu.cfs_period_us`), which enforces the same
//! bandwidth limit. Machines still mounting v1 hierarchies (with at most an empty v2 beside
//! them) have only the latter. Joining a cgroup and removing one are the same for every
//! controller (the lab's cpuset, [`crate::cpuset`], too).

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
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
    let not_one = || io::Error::other(format!("{} is not a cgroup", dir.display()));
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(not_one)?;
    let root = dir.parent().ok_or_else(not_one)?;
    let root = match Kernel::open(root) {
        // The hierarchy itself is gone, and the cgroup with it.
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        root => root?,
    };
    remove_in(&root, name, Duration::from_secs(2))
}

/// [`remove`] of the cgroup `name` of `hierarchy`, retried for up to `patience`.
pub(crate) fn remove_in(
    hierarchy: &impl Hierarchy,
    name: &str,
    patience: Duration,
) -> io::Result<()> {
    let deadline = Instant::now() + patience;
    loop {
        match pids_in(hierarchy, name) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
            Ok(pids) => {
                for pid in pids {
                    hierarchy.kill(pid);
                }
            }
        }
        match hierarchy.rmdir(name) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(e),
        }
    }
}

/// The processes in the cgroup `name` of `hierarchy` (`NotFound` when there is no such cgroup).
pub(crate) fn pids_in(hierarchy: &impl Hierarchy, name: &str) -> io::Result<Vec<i32>> {
    let procs = hierarchy.read(&format!("{name}/cgroup.procs"))?;
    Ok(procs
        .lines()
        .filter_map(|p| p.trim().parse().ok())
        .collect())
}

/// A cgroup hierarchy's files, named from its root (`cgroup.subtree_control`,
/// `rtemu-lab/cpuset.cpus`: at most a cgroup and a file), as rtemu makes and removes cgroups
/// in it: the kernel's ([`Kernel`]), or a model of the kernel's rules in tests, where neither
/// v2's cpuset nor, unprivileged, any hierarchy can be had.
pub(crate) trait Hierarchy {
    /// The text of file `path`: a CPU list, a cgroup's processes.
    fn read(&self, path: &str) -> io::Result<String>;
    /// Writes `text` to file `path`, which must exist: the kernel makes a cgroup's files.
    fn write(&self, path: &str, text: &str) -> io::Result<()>;
    /// Makes the cgroup `name`; fails when it exists.
    fn mkdir(&self, name: &str) -> io::Result<()>;
    /// Removes the cgroup `name`; fails while a process is in it.
    fn rmdir(&self, name: &str) -> io::Result<()>;
    /// Ends process `pid`, one of a cgroup's.
    fn kill(&self, pid: i32);
}

/// The most of a cgroup file read: `cgroup.procs` of 100,000 processes.
const MAX_READ: u64 = 1 << 20;

/// The kernel's hierarchy at a root checked to be a cgroup file system: every file is opened
/// under a descriptor of it without following a symbolic link, so nothing planted on the way
/// can aim a write elsewhere.
pub(crate) struct Kernel(OwnedFd);

impl Kernel {
    /// The hierarchy whose root (or the cgroup in it new ones are made in) is `root`.
    pub(crate) fn open(root: &Path) -> io::Result<Kernel> {
        let fd = open_at(None, root, OFlag::O_RDONLY | OFlag::O_DIRECTORY)?;
        check_fs(&fd, root)?;
        Ok(Kernel(fd))
    }

    fn open_file(&self, path: &str, flags: OFlag) -> io::Result<OwnedFd> {
        let flags = flags | OFlag::O_NOFOLLOW;
        match path.split_once('/') {
            None => open_at(Some(&self.0), Path::new(path), flags),
            Some((cgroup, file)) => {
                let dir = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW;
                let cgroup = open_at(Some(&self.0), Path::new(cgroup), dir)?;
                open_at(Some(&cgroup), Path::new(file), flags)
            }
        }
    }
}

impl Hierarchy for Kernel {
    fn read(&self, path: &str) -> io::Result<String> {
        let mut text = String::new();
        let file = std::fs::File::from(self.open_file(path, OFlag::O_RDONLY)?);
        file.take(MAX_READ).read_to_string(&mut text)?;
        Ok(text)
    }

    fn write(&self, path: &str, text: &str) -> io::Result<()> {
        let file = self.open_file(path, OFlag::O_WRONLY)?;
        std::fs::File::from(file).write_all(text.as_bytes())
    }

    fn mkdir(&self, name: &str) -> io::Result<()> {
        let mode = nix::sys::stat::Mode::from_bits_truncate(0o755);
        Ok(nix::sys::stat::mkdirat(
            Some(self.0.as_raw_fd()),
            name,
            mode,
        )?)
    }

    fn rmdir(&self, name: &str) -> io::Result<()> {
        let flag = nix::unistd::UnlinkatFlags::RemoveDir;
        Ok(nix::unistd::unlinkat(Some(self.0.as_raw_fd()), name, flag)?)
    }

    fn kill(&self, pid: i32) {
        // Gone already is as good.
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// A model of the kernel's rules for a cgroup hierarchy with the cpuset controller, v1's or
/// v2's, on a machine of CPUs 0-3 and memory node 0, logging every operation in order: what
/// the code that makes and removes cgroups is tested against where the machine has no such
/// hierarchy (cgroup v2's cpuset on a v1 machine) or the test is not root.
#[cfg(test)]
pub(crate) mod model {
    use std::cell::RefCell;
    use std::collections::{BTreeMap, BTreeSet};
    use std::io::{self, ErrorKind};

    use rtemu_clock::rt::parse_cpu_list;

    use super::{Hierarchy, Version};

    /// The hierarchy: its files by path from the root, and what happened to them.
    pub(crate) struct Model {
        version: Version,
        files: RefCell<BTreeMap<String, String>>,
        log: RefCell<Vec<String>>,
        /// Killed processes: they leave their cgroup a moment later (at the next `rmdir`).
        dying: RefCell<BTreeSet<i32>>,
    }

    fn refused(kind: ErrorKind, why: &str) -> io::Error {
        io::Error::new(kind, why.to_owned())
    }

    impl Model {
        /// A hierarchy of `version` with no cgroup made yet.
        pub(crate) fn new(version: Version) -> Model {
            let files: &[(&str, &str)] = match version {
                // The root of v2 has only the effective lists, and passes on no controller yet.
                Version::V2 => &[
                    ("cgroup.controllers", "cpuset cpu io memory pids\n"),
                    ("cgroup.subtree_control", "\n"),
                    ("cgroup.procs", ""),
                    ("cpuset.cpus.effective", "0-3\n"),
                    ("cpuset.mems.effective", "0\n"),
                ],
                Version::V1 => &[
                    ("cgroup.procs", ""),
                    ("cpuset.cpus", "0-3\n"),
                    ("cpuset.mems", "0\n"),
                ],
            };
            let files = files
                .iter()
                .map(|(p, t)| (p.to_string(), t.to_string()))
                .collect();
            Model {
                version,
                files: RefCell::new(files),
                log: RefCell::new(Vec::new()),
                dying: RefCell::new(BTreeSet::new()),
            }
        }

        /// The text of file `path`, if it exists.
        pub(crate) fn file(&self, path: &str) -> Option<String> {
            self.files.borrow().get(path).cloned()
        }

        /// Whether the cgroup `name` exists.
        pub(crate) fn cgroup(&self, name: &str) -> bool {
            self.file(&format!("{name}/cgroup.procs")).is_some()
        }

        /// The operations so far, in order (`write PATH TEXT`, `read PATH`, `mkdir NAME`,
        /// `rmdir NAME`, `kill PID`), forgotten once taken.
        pub(crate) fn take_log(&self) -> Vec<String> {
            std::mem::take(&mut self.log.borrow_mut())
        }

        fn say(&self, what: String) {
            self.log.borrow_mut().push(what);
        }

        /// The value file `path` takes when `text` is written to it (its text now `old`), or
        /// the kernel's refusal.
        fn written(&self, path: &str, old: &str, text: &str) -> io::Result<String> {
            let (cgroup, file) = path.rsplit_once('/').unwrap_or(("", path));
            let files = self.files.borrow();
            let list = |text: &str| {
                parse_cpu_list(text).map_err(|e| refused(ErrorKind::InvalidInput, &e.to_string()))
            };
            match file {
                "cgroup.subtree_control" => {
                    let offered = files.get("cgroup.controllers").cloned().unwrap_or_default();
                    let mut on: BTreeSet<&str> = old.split_whitespace().collect();
                    for word in text.split_whitespace() {
                        let (sign, controller) = word.split_at(1);
                        if !offered.split_whitespace().any(|c| c == controller) {
                            return Err(refused(ErrorKind::InvalidInput, "no such controller"));
                        }
                        match sign {
                            "+" => on.insert(controller),
                            "-" => on.remove(controller),
                            _ => return Err(refused(ErrorKind::InvalidInput, "+ or -")),
                        };
                    }
                    Ok(on.into_iter().collect::<Vec<_>>().join(" "))
                }
                // v1: within the parent's (v2 takes any list and grants what the parent has).
                "cpuset.cpus" | "cpuset.mems" if self.version == Version::V1 => {
                    let parent = list(&files[file])?;
                    if list(text)?.iter().any(|c| !parent.contains(c)) {
                        return Err(refused(ErrorKind::InvalidInput, "not the parent's"));
                    }
                    Ok(text.to_owned())
                }
                "cgroup.procs" => {
                    let empty = |f: &str| {
                        let path = format!("{cgroup}/{f}");
                        files.get(&path).is_none_or(|t| t.trim().is_empty())
                    };
                    if self.version == Version::V1 && (empty("cpuset.cpus") || empty("cpuset.mems"))
                    {
                        // ENOSPC: a v1 cpuset without CPUs or memory nodes takes no process.
                        return Err(refused(ErrorKind::StorageFull, "no CPUs or memory nodes"));
                    }
                    Ok(format!("{old}{}\n", text.trim()))
                }
                _ => Ok(text.to_owned()),
            }
        }
    }

    impl Hierarchy for Model {
        fn read(&self, path: &str) -> io::Result<String> {
            self.say(format!("read {path}"));
            self.file(path)
                .ok_or_else(|| refused(ErrorKind::NotFound, "no such file"))
        }

        fn write(&self, path: &str, text: &str) -> io::Result<()> {
            self.say(format!("write {path} {text}"));
            let old = self
                .file(path)
                .ok_or_else(|| refused(ErrorKind::NotFound, "the kernel makes no file"))?;
            let new = self.written(path, &old, text)?;
            self.files.borrow_mut().insert(path.to_owned(), new);
            Ok(())
        }

        fn mkdir(&self, name: &str) -> io::Result<()> {
            self.say(format!("mkdir {name}"));
            if self.cgroup(name) {
                return Err(refused(ErrorKind::AlreadyExists, "exists"));
            }
            let mut made = vec!["cgroup.procs"];
            let cpuset = match self.version {
                // A child has the files of the controllers its parent passes on as it is made.
                Version::V2 => {
                    let passed = self.file("cgroup.subtree_control").unwrap_or_default();
                    made.push("cgroup.controllers");
                    passed.split_whitespace().any(|c| c == "cpuset")
                }
                Version::V1 => true,
            };
            if cpuset {
                made.extend(["cpuset.cpus", "cpuset.mems"]);
            }
            let mut files = self.files.borrow_mut();
            for f in made {
                files.insert(format!("{name}/{f}"), String::new());
            }
            Ok(())
        }

        fn rmdir(&self, name: &str) -> io::Result<()> {
            self.say(format!("rmdir {name}"));
            let procs = format!("{name}/cgroup.procs");
            let Some(members) = self.file(&procs) else {
                return Err(refused(ErrorKind::NotFound, "no such cgroup"));
            };
            let pids: Vec<i32> = members.lines().filter_map(|p| p.parse().ok()).collect();
            if !pids.is_empty() {
                // The killed leave now, but not in time for this attempt.
                let dying = self.dying.borrow();
                let left: String = pids
                    .iter()
                    .filter(|p| !dying.contains(p))
                    .map(|p| format!("{p}\n"))
                    .collect();
                self.files.borrow_mut().insert(procs, left);
                return Err(refused(ErrorKind::ResourceBusy, "a process is in it"));
            }
            let prefix = format!("{name}/");
            self.files
                .borrow_mut()
                .retain(|p, _| !p.starts_with(&prefix));
            Ok(())
        }

        fn kill(&self, pid: i32) {
            self.say(format!("kill {pid}"));
            self.dying.borrow_mut().insert(pid);
        }
    }
}
