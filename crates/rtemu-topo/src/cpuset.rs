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

use std::io;
use std::path::{Path, PathBuf};

use rtemu_clock::rt::format_cpu_list;

use crate::cgroup::{pids_in, Controller, Hierarchy, Kernel, Version};
use crate::naming::lab_cpuset;
use crate::topology::{valid_name, MAX_LAB_NAME, MAX_NODE_NAME};

/// The cgroup hierarchy with the cpuset controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cpusets(pub Controller);

impl Cpusets {
    /// The machine's cpuset controller: cgroup v2's where it offers `cpuset`, else v1's;
    /// `None` when neither is mounted.
    pub fn find() -> Option<Cpusets> {
        Controller::of("cpuset", "cpuset.cpus").map(Cpusets)
    }

    /// The cpuset of lab `lab` (a valid lab name, [`crate::state::LabName`]), or of its part
    /// on host `host` ([`lab_cpuset`]).
    pub fn dir(&self, lab: &str, host: Option<&str>) -> PathBuf {
        self.0.root.join(lab_cpuset(lab, host))
    }

    /// Makes lab `lab`'s cpuset (of its part on host `host`), holding `cpus` and the memory
    /// nodes of its parent. The caller holds the lab's state (created, so no lab of that name
    /// is up in this state root): a cpuset of that name with no process in it is a leftover,
    /// removed and made again; one with processes is another's ([`CpusetError::InUse`]).
    pub fn create(&self, lab: &str, host: Option<&str>, cpus: &[usize]) -> Result<(), CpusetError> {
        let cgroup = self.dir(lab, host);
        let io = |source| CpusetError::Io {
            cgroup: cgroup.clone(),
            source,
        };
        // The names become a path: checked again here, where they do.
        if !valid_name(lab, MAX_LAB_NAME) || !host.is_none_or(|h| valid_name(h, MAX_NODE_NAME)) {
            return Err(io(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a lab or host name",
            )));
        }
        let root = Kernel::open(&self.0.root).map_err(io)?;
        match make(&root, self.0.version, &lab_cpuset(lab, host), cpus) {
            Ok(()) => Ok(()),
            Err(Made::InUse(pids)) => Err(CpusetError::InUse {
                cgroup,
                lab: lab.to_owned(),
                pids,
            }),
            Err(Made::Io(e)) => Err(io(e)),
        }
    }

    /// Restricts the cgroup `dir` (another of this hierarchy's, a node's CPU limit) to `cpus`
    /// too: on cgroup v2 a process is in one cgroup only, so a limited node's cgroup carries
    /// both limits.
    pub fn restrict(&self, dir: &Path, cpus: &[usize]) -> io::Result<()> {
        let root = Kernel::open(&self.0.root)?;
        let name = dir
            .strip_prefix(&self.0.root)
            .ok()
            .and_then(|n| n.to_str())
            .filter(|n| !n.contains('/'))
            .ok_or_else(|| io::Error::other(format!("{} is not a cgroup here", dir.display())))?;
        root.write(&format!("{name}/cpuset.cpus"), &format_cpu_list(cpus))
    }
}

/// Why a lab's cpuset could not be made.
#[derive(Debug, thiserror::Error)]
pub enum CpusetError {
    /// A cpuset of the lab's name exists with processes in it, though no lab of that name is
    /// up in this state root: a lab of that name is up from another state root that shares
    /// this machine's cgroups (an agent in a mount namespace of its own), or those processes
    /// outlived the lab that started them. Never taken: they may be another lab's programs.
    #[error("{}", in_use(.cgroup, .lab, .pids))]
    InUse {
        /// The cpuset.
        cgroup: PathBuf,
        /// The lab whose name it carries.
        lab: String,
        /// The processes in it.
        pids: Vec<i32>,
    },
    /// The kernel refused a step (or the hierarchy is not a cgroup file system).
    #[error("making the cpuset {}: {source}", .cgroup.display())]
    Io {
        /// The cpuset.
        cgroup: PathBuf,
        /// Why.
        source: io::Error,
    },
}

/// What [`CpusetError::InUse`] says: the cpuset, why it is not taken, and the ways out.
fn in_use(cgroup: &Path, lab: &str, pids: &[i32]) -> String {
    let up = format!(
        "a lab `{lab}` is up elsewhere on this machine (from another state root, such as \
         another agent's)"
    );
    let out = "or bring this lab up under another name (--name)";
    if pids.is_empty() {
        return format!(
            "the cpuset {} is in use: {up}; take that lab down, {out}",
            cgroup.display()
        );
    }
    let pids: Vec<String> = pids.iter().map(ToString::to_string).collect();
    format!(
        "the cpuset {} is in use (processes {} run in it): {up}, or they outlived one; take \
         that lab down or end them, {out}",
        cgroup.display(),
        pids.join(", ")
    )
}

/// Why [`make`] failed: processes are in a cpuset of that name, or the kernel refused.
#[derive(Debug)]
enum Made {
    InUse(Vec<i32>),
    Io(io::Error),
}

impl From<io::Error> for Made {
    fn from(e: io::Error) -> Made {
        Made::Io(e)
    }
}

/// Makes the cpuset `name` of `hierarchy` (of `version`), holding `cpus` and the memory nodes
/// of its parent, in the order the kernel needs. One of that name already there is a
/// leftover when no process is in it: removed, and made again with `cpus` (its own may be a
/// dead run's); with processes in it, it is left as it is.
fn make(
    hierarchy: &impl Hierarchy,
    version: Version,
    name: &str,
    cpus: &[usize],
) -> Result<(), Made> {
    let mems = match version {
        // The root of v2 has no `cpuset.mems` of its own: what it holds is the effective.
        Version::V2 => {
            // Children get the controller's files only where their parent passes it on, and
            // only those made after it does; it may already be on, which the kernel accepts
            // again.
            hierarchy.write("cgroup.subtree_control", "+cpuset")?;
            hierarchy.read("cpuset.mems.effective")?
        }
        Version::V1 => hierarchy.read("cpuset.mems")?,
    };
    match hierarchy.mkdir(name) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            let pids = pids_in(hierarchy, name)?;
            if !pids.is_empty() {
                return Err(Made::InUse(pids));
            }
            match hierarchy.rmdir(name).and_then(|()| hierarchy.mkdir(name)) {
                // A process joined it meanwhile (the kernel keeps a cgroup with one), or
                // another up made it again.
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::ResourceBusy | io::ErrorKind::AlreadyExists
                    ) =>
                {
                    return Err(Made::InUse(pids_in(hierarchy, name).unwrap_or_default()));
                }
                remade => remade?,
            }
        }
        made => made?,
    }
    // A v1 cpuset takes no process before it has CPUs and memory nodes.
    hierarchy.write(&format!("{name}/cpuset.cpus"), &format_cpu_list(cpus))?;
    Ok(hierarchy.write(&format!("{name}/cpuset.mems"), mems.trim())?)
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
            engine: format_cpu_list(engine),
            online: format_cpu_list(online),
        });
    }
    Ok(left)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroup::model::Model;
    use rtemu_clock::rt::parse_cpu_list;
    use std::time::Duration;

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
    fn on_cgroup_v2_the_root_passes_cpuset_on_before_the_labs_cpuset_gets_cpus_then_mems() {
        let v2 = Model::new(Version::V2);
        make(&v2, Version::V2, &lab_cpuset("lab1", None), &[0, 1, 3]).unwrap();
        assert_eq!(
            v2.take_log(),
            [
                "write cgroup.subtree_control +cpuset",
                "read cpuset.mems.effective",
                "mkdir rtemu-lab1",
                "write rtemu-lab1/cpuset.cpus 0-1,3",
                "write rtemu-lab1/cpuset.mems 0",
            ]
        );
        assert_eq!(v2.file("cgroup.subtree_control").unwrap(), "cpuset");
        assert_eq!(v2.file("rtemu-lab1/cpuset.cpus").unwrap(), "0-1,3");
        assert_eq!(v2.file("rtemu-lab1/cpuset.mems").unwrap(), "0");
        // Passed on already (another lab's): the kernel takes it again.
        make(&v2, Version::V2, "rtemu-lab2", &[2]).unwrap();
        assert_eq!(v2.file("rtemu-lab2/cpuset.cpus").unwrap(), "2");

        // Why the order: a cgroup made before its parent passes cpuset on has no cpuset files.
        let early = Model::new(Version::V2);
        early.mkdir("rtemu-lab1").unwrap();
        let kind = early
            .write("rtemu-lab1/cpuset.cpus", "0")
            .unwrap_err()
            .kind();
        assert_eq!(kind, io::ErrorKind::NotFound);
    }

    #[test]
    fn a_leftover_cpuset_with_no_process_is_made_again_with_the_new_cpus() {
        for version in [Version::V1, Version::V2] {
            let h = Model::new(version);
            // A dead run's, with its CPUs.
            make(&h, version, "rtemu-lab1", &[0, 1]).unwrap();
            h.take_log();
            make(&h, version, "rtemu-lab1", &[3]).unwrap();
            let log = h.take_log();
            let from = log.iter().position(|l| l == "mkdir rtemu-lab1").unwrap();
            assert_eq!(
                log[from..],
                [
                    "mkdir rtemu-lab1",
                    // Refused (it exists): no process in it, so a leftover.
                    "read rtemu-lab1/cgroup.procs",
                    "rmdir rtemu-lab1",
                    "mkdir rtemu-lab1",
                    "write rtemu-lab1/cpuset.cpus 3",
                    "write rtemu-lab1/cpuset.mems 0",
                ],
                "{version:?}"
            );
            assert_eq!(
                h.file("rtemu-lab1/cpuset.cpus").unwrap(),
                "3",
                "{version:?}"
            );
        }
    }

    #[test]
    fn a_cpuset_of_the_labs_name_with_processes_is_left_as_it_is_and_refused() {
        let h = Model::new(Version::V1);
        make(&h, Version::V1, "rtemu-lab1", &[0, 1]).unwrap();
        h.write("rtemu-lab1/cgroup.procs", "41").unwrap();
        h.write("rtemu-lab1/cgroup.procs", "42").unwrap();
        h.take_log();
        let Err(Made::InUse(pids)) = make(&h, Version::V1, "rtemu-lab1", &[3]) else {
            panic!("a cpuset with processes in it is not made again");
        };
        assert_eq!(pids, [41, 42]);
        // Looked at, never removed, its processes never signalled, its CPUs unchanged.
        assert_eq!(
            h.take_log(),
            [
                "read cpuset.mems",
                "mkdir rtemu-lab1",
                "read rtemu-lab1/cgroup.procs"
            ]
        );
        assert_eq!(h.file("rtemu-lab1/cpuset.cpus").unwrap(), "0-1");
        assert_eq!(h.file("rtemu-lab1/cgroup.procs").unwrap(), "41\n42\n");

        // What the user reads: the cpuset, its processes, and the ways out.
        let e = CpusetError::InUse {
            cgroup: "/sys/fs/cgroup/cpuset/rtemu-lab1".into(),
            lab: "lab1".into(),
            pids,
        };
        assert_eq!(
            e.to_string(),
            "the cpuset /sys/fs/cgroup/cpuset/rtemu-lab1 is in use (processes 41, 42 run in \
             it): a lab `lab1` is up elsewhere on this machine (from another state root, such \
             as another agent's), or they outlived one; take that lab down or end them, or \
             bring this lab up under another name (--name)"
        );
    }

    /// A hierarchy where process 43 joins the cgroup being removed just before its `rmdir`:
    /// another lab's program started between the look and the removal.
    struct Joining(Model);

    impl Hierarchy for Joining {
        fn read(&self, path: &str) -> io::Result<String> {
            self.0.read(path)
        }
        fn write(&self, path: &str, text: &str) -> io::Result<()> {
            self.0.write(path, text)
        }
        fn mkdir(&self, name: &str) -> io::Result<()> {
            self.0.mkdir(name)
        }
        fn rmdir(&self, name: &str) -> io::Result<()> {
            self.0.write(&format!("{name}/cgroup.procs"), "43")?;
            self.0.rmdir(name)
        }
        fn kill(&self, pid: i32) {
            self.0.kill(pid)
        }
    }

    #[test]
    fn a_process_that_joins_a_leftover_before_its_removal_keeps_it() {
        let h = Joining(Model::new(Version::V2));
        make(&h, Version::V2, "rtemu-lab1", &[0]).unwrap();
        let Err(Made::InUse(pids)) = make(&h, Version::V2, "rtemu-lab1", &[3]) else {
            panic!("a cpuset a process joined is not made again");
        };
        assert_eq!(pids, [43]);
        assert_eq!(h.0.file("rtemu-lab1/cpuset.cpus").unwrap(), "0");
    }

    #[test]
    fn on_cgroup_v1_the_labs_cpuset_gets_its_parents_memory_nodes_before_a_process_joins() {
        let v1 = Model::new(Version::V1);
        make(&v1, Version::V1, &lab_cpuset("lab1", None), &[1, 2]).unwrap();
        assert_eq!(
            v1.take_log(),
            [
                "read cpuset.mems",
                "mkdir rtemu-lab1",
                "write rtemu-lab1/cpuset.cpus 1-2",
                "write rtemu-lab1/cpuset.mems 0",
            ]
        );
        // Now it takes a process (v1 refuses one while its CPUs or memory nodes are empty).
        v1.write("rtemu-lab1/cgroup.procs", "0").unwrap();
        let bare = Model::new(Version::V1);
        bare.mkdir("rtemu-lab1").unwrap();
        let kind = bare
            .write("rtemu-lab1/cgroup.procs", "0")
            .unwrap_err()
            .kind();
        assert_eq!(kind, io::ErrorKind::StorageFull);
        // CPUs its parent lacks are refused, as the kernel refuses them.
        let refused = make(&v1, Version::V1, "rtemu-lab2", &[7]);
        assert!(
            matches!(refused, Err(Made::Io(ref e)) if e.kind() == io::ErrorKind::InvalidInput),
            "{refused:?}"
        );
    }

    #[test]
    fn removing_a_labs_cpuset_ends_its_processes_and_waits_until_they_left() {
        for version in [Version::V1, Version::V2] {
            let h = Model::new(version);
            make(&h, version, "rtemu-lab1", &[1]).unwrap();
            h.write("rtemu-lab1/cgroup.procs", "41").unwrap();
            h.write("rtemu-lab1/cgroup.procs", "42").unwrap();
            h.take_log();
            crate::cgroup::remove_in(&h, "rtemu-lab1", Duration::from_secs(5)).unwrap();
            assert_eq!(
                h.take_log(),
                [
                    "read rtemu-lab1/cgroup.procs",
                    "kill 41",
                    "kill 42",
                    // Killed, not yet gone: refused, tried again.
                    "rmdir rtemu-lab1",
                    "read rtemu-lab1/cgroup.procs",
                    "rmdir rtemu-lab1",
                ],
                "{version:?}"
            );
            assert!(!h.cgroup("rtemu-lab1"));
            // Nothing else went with it; gone already is fine.
            assert!(h.file("cgroup.procs").is_some());
            crate::cgroup::remove_in(&h, "rtemu-lab1", Duration::ZERO).unwrap();
        }
    }

    #[test]
    fn a_root_that_is_no_cgroup_file_system_or_a_name_no_labs_gets_nothing_made() {
        let dir = std::env::temp_dir().join(format!("rtemu-cpuset-fake-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let sets = Cpusets(Controller {
            root: dir.clone(),
            version: Version::V2,
        });
        let no_fs = sets
            .create("lab1", Some("h1"), &[0])
            .unwrap_err()
            .to_string();
        let kind = |e: CpusetError| match e {
            CpusetError::Io { source, .. } => source.kind(),
            other => panic!("{other}"),
        };
        let bad_name = kind(sets.create("../lab1", None, &[0]).unwrap_err());
        let bad_host = kind(sets.create("lab1", Some("../h1"), &[0]).unwrap_err());
        let made: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(no_fs.contains("not on a cgroup file system"), "{no_fs}");
        // Naming the cpuset it was making.
        assert!(no_fs.starts_with("making the cpuset "), "{no_fs}");
        assert!(no_fs.contains("/rtemu-lab1@h1: "), "{no_fs}");
        assert_eq!(
            (bad_name, bad_host),
            (io::ErrorKind::InvalidInput, io::ErrorKind::InvalidInput)
        );
        assert!(made.is_empty(), "{made:?}");
    }

    #[test]
    fn a_labs_cpuset_is_named_with_rtemus_mark() {
        let c = Cpusets(Controller {
            root: PathBuf::from("/sys/fs/cgroup/cpuset"),
            version: Version::V1,
        });
        let lab = "lab1";
        assert_eq!(
            c.dir(lab, None),
            PathBuf::from("/sys/fs/cgroup/cpuset/rtemu-lab1")
        );
        // A part's, of its host too: namespace hosts of one machine share its cgroups.
        assert_eq!(
            c.dir(lab, Some("h2")),
            PathBuf::from("/sys/fs/cgroup/cpuset/rtemu-lab1@h2")
        );
        // v1: the CPU limits are another hierarchy; v2: the same one.
        let limit = Path::new("/sys/fs/cgroup/cpu/rtemu-lab1.a");
        assert!(!one_hierarchy(&c.dir(lab, None), limit));
        let v2 = Cpusets(Controller {
            root: PathBuf::from("/sys/fs/cgroup"),
            version: Version::V2,
        });
        let limit = Path::new("/sys/fs/cgroup/rtemu-lab1.a");
        assert!(one_hierarchy(&v2.dir(lab, None), limit));
    }
}
