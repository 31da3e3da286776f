//! Keeping a lab's programs off its engine's CPUs (`programs_cpus = "off-engine"`): one cpuset
//! cgroup per lab, named `rtemu-<lab>` like the lab's namespace (rtemu's mark), whose CPUs are
//! every online CPU but those of the engine's release threads. Every process rtemu starts in
//! the lab's nodes joins it between `fork` and `exec` ([`crate::sys::join_cgroup_on_exec`]), so
//! it never runs a moment on the engine's CPUs; containers get the same list
//! (`--cpuset-cpus`).
//!
//! cgroup v2 where the unified hierarchy offers `cpuset` (passed on to the root's children
//! first), else the v1 `cpuset` hierarchy. Every file is opened under a descriptor of the
//! hierarchy's root, checked to be a cgroup file system, without following a symbolic link, so
//! nothing planted on the way can aim a write elsewhere.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;
use nix::sys::stat::Mode;

use crate::cgroup::{Controller, Version};
use crate::naming::lab_netns;
use crate::sys::open_at;
use crate::topology::{valid_name, MAX_LAB_NAME};

/// The cgroup hierarchy with the cpuset controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cpusets(pub Controller);

impl Cpusets {
    /// The machine's cpuset controller: cgroup v2's where it offers `cpuset`, else v1's;
    /// `None` when neither is mounted.
    pub fn find() -> Option<Cpusets> {
        Controller::of("cpuset", "cpuset.cpus").map(Cpusets)
    }

    /// The cpuset of lab `lab` (a valid lab name, [`crate::state::LabName`]).
    pub fn dir(&self, lab: &str) -> PathBuf {
        self.0.root.join(lab_netns(lab))
    }

    /// Makes lab `lab`'s cpuset, holding `cpus` and the memory nodes of its parent. Fails
    /// when it exists already.
    pub fn create(&self, lab: &str, cpus: &[usize]) -> io::Result<()> {
        // The name becomes a path: checked again here, where it does.
        if !valid_name(lab, MAX_LAB_NAME) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a lab name",
            ));
        }
        let root = self.open_root()?;
        let mems = match self.0.version {
            // The root of v2 has no `cpuset.mems` of its own: what it holds is the effective.
            Version::V2 => {
                // Children get the controller only where their parent passes it on; it may
                // already be on, which the kernel accepts again.
                write_at(&root, "cgroup.subtree_control", "+cpuset")?;
                read_at(&root, "cpuset.mems.effective")?
            }
            Version::V1 => read_at(&root, "cpuset.mems")?,
        };
        let name = lab_netns(lab);
        nix::sys::stat::mkdirat(
            Some(root.as_raw_fd()),
            name.as_str(),
            Mode::from_bits_truncate(0o755),
        )?;
        let dir = open_dir(&root, &name)?;
        // A v1 cpuset takes no process before it has CPUs and memory nodes.
        write_at(&dir, "cpuset.cpus", &rtemu_clock::rt::format_cpu_list(cpus))?;
        write_at(&dir, "cpuset.mems", mems.trim())
    }

    /// Restricts the cgroup `dir` (another of this hierarchy's, a node's CPU limit) to `cpus`
    /// too: on cgroup v2 a process is in one cgroup only, so a limited node's cgroup carries
    /// both limits.
    pub fn restrict(&self, dir: &Path, cpus: &[usize]) -> io::Result<()> {
        let root = self.open_root()?;
        let name = dir
            .strip_prefix(&self.0.root)
            .ok()
            .and_then(|n| n.to_str())
            .filter(|n| !n.contains('/'))
            .ok_or_else(|| io::Error::other(format!("{} is not a cgroup here", dir.display())))?;
        let dir = open_dir(&root, name)?;
        write_at(&dir, "cpuset.cpus", &rtemu_clock::rt::format_cpu_list(cpus))
    }

    fn open_root(&self) -> io::Result<OwnedFd> {
        let root = open_at(None, &self.0.root, OFlag::O_RDONLY | OFlag::O_DIRECTORY)?;
        crate::cgroup::check_fs(&root, &self.0.root)?;
        Ok(root)
    }
}

fn open_dir(root: &OwnedFd, name: &str) -> io::Result<OwnedFd> {
    open_at(
        Some(root),
        Path::new(name),
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW,
    )
}

fn write_at(dir: &OwnedFd, name: &str, text: &str) -> io::Result<()> {
    let fd = open_at(
        Some(dir),
        Path::new(name),
        OFlag::O_WRONLY | OFlag::O_NOFOLLOW,
    )?;
    std::fs::File::from(fd).write_all(text.as_bytes())
}

fn read_at(dir: &OwnedFd, name: &str) -> io::Result<String> {
    let fd = open_at(
        Some(dir),
        Path::new(name),
        OFlag::O_RDONLY | OFlag::O_NOFOLLOW,
    )?;
    let mut text = String::new();
    // A CPU or memory node list: a few bytes (4 KiB is more than 1,000 single nodes).
    std::fs::File::from(fd)
        .take(4096)
        .read_to_string(&mut text)?;
    Ok(text)
}

/// Whether the cpuset `cpuset` and the cgroup `cgroup` (another controller's) are of one
/// hierarchy (cgroup v2), where a process is in one cgroup only.
pub fn one_hierarchy(cpuset: &Path, cgroup: &Path) -> bool {
    cpuset.parent() == cgroup.parent()
}

/// The CPUs online now (`/sys/devices/system/cpu/online`).
pub fn online() -> io::Result<Vec<usize>> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online")?;
    rtemu_clock::rt::parse_cpu_list(&text).map_err(io::Error::other)
}

/// Why a lab's programs cannot be kept off its engine's CPUs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OffEngineError {
    /// The engine's release threads are not pinned, so there is no CPU to keep off.
    #[error(
        "the lab's programs cannot be kept off the engine's CPUs: its release threads are not \
         pinned (one CPU each is pinned only where at least one is left for everything else); \
         pin them with `--engine-cpus LIST`, or run the programs on every CPU \
         (`programs_cpus = \"all\"`, the default)"
    )]
    NotPinned,
    /// The engine's CPUs are all the online CPUs.
    #[error(
        "the lab's programs cannot be kept off the engine's CPUs {engine}: no other CPU is \
         online (online: {online}); give the engine fewer CPUs (`--engine-cpus`), or run the \
         programs on every CPU (`programs_cpus = \"all\"`, the default)"
    )]
    NoneLeft {
        /// The engine's CPUs, as the kernel writes lists.
        engine: String,
        /// The online CPUs.
        online: String,
    },
}

/// The CPUs a lab's programs may use when kept off the engine's: every CPU of `online` that is
/// not in `engine`, in order.
pub fn off_engine(online: &[usize], engine: &[usize]) -> Result<Vec<usize>, OffEngineError> {
    if engine.is_empty() {
        return Err(OffEngineError::NotPinned);
    }
    let left: Vec<usize> = online
        .iter()
        .copied()
        .filter(|c| !engine.contains(c))
        .collect();
    if left.is_empty() {
        return Err(OffEngineError::NoneLeft {
            engine: rtemu_clock::rt::format_cpu_list(engine),
            online: rtemu_clock::rt::format_cpu_list(online),
        });
    }
    Ok(left)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtemu_clock::rt::{format_cpu_list, parse_cpu_list};

    #[test]
    fn the_programs_get_every_online_cpu_but_the_engines() {
        assert_eq!(off_engine(&[0, 1], &[1]), Ok(vec![0]));
        assert_eq!(off_engine(&[0, 1, 2, 3, 8], &[2, 3]), Ok(vec![0, 1, 8]));
        // An engine CPU that is offline takes nothing away.
        assert_eq!(off_engine(&[0, 1, 2], &[5]), Ok(vec![0, 1, 2]));
        let text = format_cpu_list(&off_engine(&parse_cpu_list("0-7").unwrap(), &[4, 5]).unwrap());
        assert_eq!(text, "0-3,6-7");
    }

    #[test]
    fn nothing_left_or_nothing_pinned_is_refused_with_the_way_out() {
        assert_eq!(off_engine(&[0, 1], &[]), Err(OffEngineError::NotPinned));
        let one = off_engine(&[0], &[0]).unwrap_err();
        assert_eq!(
            one,
            OffEngineError::NoneLeft {
                engine: "0".into(),
                online: "0".into()
            }
        );
        let said = one.to_string();
        assert!(
            said.contains("--engine-cpus") && said.contains("\"all\""),
            "{said}"
        );
        let said = OffEngineError::NotPinned.to_string();
        assert!(said.contains("--engine-cpus LIST"), "{said}");
    }

    proptest::proptest! {
        #[test]
        fn the_programs_and_the_engine_share_no_cpu_and_lose_none(
            online in proptest::collection::btree_set(0usize..64, 1..16),
            engine in proptest::collection::btree_set(0usize..64, 0..4),
        ) {
            let online: Vec<usize> = online.into_iter().collect();
            let engine: Vec<usize> = engine.into_iter().collect();
            match off_engine(&online, &engine) {
                Ok(left) => {
                    proptest::prop_assert!(left.iter().all(|c| !engine.contains(c)));
                    proptest::prop_assert!(left.iter().all(|c| online.contains(c)));
                    // Every online CPU is the engine's or the programs'.
                    proptest::prop_assert!(online.iter().all(|c| engine.contains(c) || left.contains(c)));
                    // As the kernel writes and reads it back.
                    proptest::prop_assert_eq!(parse_cpu_list(&format_cpu_list(&left)), Ok(left));
                }
                Err(OffEngineError::NotPinned) => proptest::prop_assert!(engine.is_empty()),
                Err(OffEngineError::NoneLeft { .. }) => {
                    proptest::prop_assert!(online.iter().all(|c| engine.contains(c)));
                }
            }
        }
    }

    #[test]
    fn a_labs_cpuset_is_named_with_rtemus_mark() {
        let c = Cpusets(Controller {
            root: PathBuf::from("/sys/fs/cgroup/cpuset"),
            version: Version::V1,
        });
        let lab = "lab1";
        assert_eq!(
            c.dir(lab),
            PathBuf::from("/sys/fs/cgroup/cpuset/rtemu-lab1")
        );
        // v1: the CPU limits are another hierarchy; v2: the same one.
        let limit = Path::new("/sys/fs/cgroup/cpu/rtemu-lab1.a");
        assert!(!one_hierarchy(&c.dir(lab), limit));
        let v2 = Cpusets(Controller {
            root: PathBuf::from("/sys/fs/cgroup"),
            version: Version::V2,
        });
        let limit = Path::new("/sys/fs/cgroup/rtemu-lab1.a");
        assert!(one_hierarchy(&v2.dir(lab), limit));
    }
}
