//! Named network namespaces, made and removed the way `ip netns` does, and running code or
//! programs inside them. The crate's only `unsafe` lives here.
//!
//! A named namespace is a bind mount of a namespace file onto `/run/netns/NAME`: `ip netns`
//! lists it and `ip netns exec` enters it. It lives as long as the mount (or a process in it)
//! does, so removing the mount and ending the processes removes the namespace and every
//! interface, bridge, route and neighbour entry in it.

use std::collections::BTreeSet;
use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use nix::fcntl::OFlag;
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::sched::{unshare, CloneFlags};
use rtemu_sys::netns;

/// Where named namespaces are mounted (as `ip netns` expects).
pub const NETNS_DIR: &str = "/run/netns";

/// The mount point of namespace `name`.
pub fn netns_path(name: &str) -> PathBuf {
    Path::new(NETNS_DIR).join(name)
}

/// Creates the named namespace `name`, running `init` inside it before it gets its name (so
/// whatever `init` does, such as marking it, is there when anyone can see it); fails with
/// `AlreadyExists` when the name is taken.
pub fn create_netns(
    name: &str,
    init: impl FnOnce() -> io::Result<()> + Send + 'static,
) -> io::Result<()> {
    std::fs::create_dir_all(NETNS_DIR)?;
    let path = netns_path(name);
    File::create_new(&path)?;
    // unshare() moves only the calling thread into the new namespace, so a short-lived thread
    // does it and leaves the rest of the process where it was.
    let target = path.clone();
    let made = rtemu_sys::thread::spawn("rtemu-new-netns", move || -> io::Result<()> {
        unshare(CloneFlags::CLONE_NEWNET)?;
        init()?;
        mount(
            Some("/proc/thread-self/ns/net"),
            &target,
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        )?;
        Ok(())
    })
    .map_err(io::Error::from)
    .and_then(|t| {
        t.join()
            .map_err(|_| io::Error::other("namespace thread panicked"))
    })
    .and_then(|made| made);
    if made.is_err() {
        let _ = std::fs::remove_file(&path);
    }
    made
}

/// Removes the named namespace `name` (its mount and mount point). Missing is not an error.
pub fn delete_netns(name: &str) -> io::Result<()> {
    let path = netns_path(name);
    match umount2(&path, MntFlags::MNT_DETACH) {
        // EINVAL: not a mount point (a crash between creating the file and mounting it).
        Ok(()) | Err(nix::Error::EINVAL) | Err(nix::Error::ENOENT) => {}
        Err(e) => return Err(e.into()),
    }
    match std::fs::remove_file(&path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Whether the named namespace exists.
pub fn netns_exists(name: &str) -> bool {
    netns_path(name).exists()
}

/// The identity (device and inode) of the named namespace; `None` when there is none.
pub fn netns_id(name: &str) -> io::Result<Option<(u64, u64)>> {
    match std::fs::metadata(netns_path(name)) {
        Ok(m) => Ok(Some((m.dev(), m.ino()))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The processes whose network namespace is the named one (like `ip netns pids`).
pub fn netns_pids(name: &str) -> io::Result<Vec<i32>> {
    match netns_id(name)? {
        Some(id) => pids_in_netns(id),
        None => Ok(Vec::new()),
    }
}

/// The processes in the network namespace of identity `id` (see [`netns_id`]), also once its
/// name is gone.
pub fn pids_in_netns(id: (u64, u64)) -> io::Result<Vec<i32>> {
    pids_in_any_netns(&BTreeSet::from([id]))
}

/// The processes whose network namespace is one of identities `ids` (see [`netns_id`]): one
/// pass over `/proc`, however many namespaces.
pub fn pids_in_any_netns(ids: &BTreeSet<(u64, u64)>) -> io::Result<Vec<i32>> {
    let mut pids = Vec::new();
    if ids.is_empty() {
        return Ok(pids);
    }
    for entry in std::fs::read_dir("/proc")? {
        let entry = entry?;
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        // A process may exit while we look: skip what cannot be read.
        if let Ok(m) = std::fs::metadata(entry.path().join("ns/net")) {
            if ids.contains(&(m.dev(), m.ino())) {
                pids.push(pid);
            }
        }
    }
    Ok(pids)
}

/// Runs `f` on a new thread that has entered the named namespace, and returns its result.
/// Sockets made by `f` stay in that namespace; files under `/proc/sys/net` opened by `f` are
/// that namespace's.
pub fn in_netns<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    let ns = File::open(netns_path(name))?;
    netns::run_in(ns.into(), f).map_err(|e| match e {
        netns::RunError::Enter(e) => e,
        netns::RunError::Panicked => io::Error::other("namespace thread panicked"),
        netns::RunError::Spawn(e) => e.into(),
    })?
}

/// `/proc/sys` of the calling thread's network namespace, through a proc instance of its own
/// when the kernel gives one.
///
/// Every namespace that has looked up `/proc/sys/net` leaves a dentry of that name on the
/// shared `/proc` for as long as it lives, and the kernel compares each lookup of the name
/// with all of them (`proc_sys_compare`): through `/proc`, a sysctl of a lab's node costs time
/// in proportion to the namespaces on the machine, and bringing up a lab grows with the square
/// of its nodes. A new proc instance (`fsopen`/`fsmount`, detached: no one else sees it) holds
/// only the dentries of the namespace it is used in, and is gone with its descriptor. Where
/// the kernel refuses one, `/proc` serves.
pub struct ProcSys {
    /// The root of the private proc instance; `None`: use `/proc`.
    root: Option<OwnedFd>,
}

impl ProcSys {
    /// A private proc instance, or `/proc` when the kernel refuses one. Files opened through
    /// it belong to the network namespace of the thread that opens them.
    pub fn here() -> ProcSys {
        ProcSys {
            root: private_proc().ok(),
        }
    }

    /// Opens sysctl `key` (`net.ipv4.ip_forward`) for writing, never through a symbolic
    /// link. The namespace is that of the calling thread.
    pub fn open(&self, key: &str) -> io::Result<File> {
        let path = format!("sys/{}", key.replace('.', "/"));
        match &self.root {
            Some(root) => {
                let flags = OFlag::O_WRONLY | OFlag::O_NOFOLLOW;
                Ok(open_at(Some(root), Path::new(&path), flags)?.into())
            }
            None => {
                use std::os::unix::fs::OpenOptionsExt;
                std::fs::OpenOptions::new()
                    .write(true)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(Path::new("/proc").join(path))
            }
        }
    }
}

/// Opens `path` with `flags` (and close-on-exec), relative to the directory `dir` when given.
/// With `O_NOFOLLOW`, how a root-owned file is opened so that a link planted in its place
/// cannot aim the access elsewhere.
pub fn open_at(dir: Option<&OwnedFd>, path: &Path, flags: OFlag) -> io::Result<OwnedFd> {
    use std::os::fd::FromRawFd;
    let flags = flags | OFlag::O_CLOEXEC;
    let dir = dir.map(|d| d.as_raw_fd());
    let fd = nix::fcntl::openat(dir, path, flags, nix::sys::stat::Mode::empty())?;
    // SAFETY: `fd` was just opened and is owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A new proc instance, mounted nowhere: its descriptor is its root.
///
/// The new mount API (fsopen, fsconfig, fsmount) has no wrapper in nix, and no libc function
/// either: the system calls are made by number.
fn private_proc() -> io::Result<OwnedFd> {
    use rtemu_sys::errno::cvt;
    use std::os::fd::{AsRawFd, FromRawFd};
    // SAFETY: fsopen reads a NUL-terminated file system name and returns a new descriptor.
    let fs =
        cvt(unsafe { libc::syscall(libc::SYS_fsopen, c"proc".as_ptr(), libc::FSOPEN_CLOEXEC) })?;
    // SAFETY: the descriptor was just made and is owned by nothing else.
    let fs = unsafe { OwnedFd::from_raw_fd(fs as i32) };
    // SAFETY: FSCONFIG_CMD_CREATE takes no key, value or auxiliary number.
    cvt(unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            fs.as_raw_fd(),
            libc::FSCONFIG_CMD_CREATE,
            std::ptr::null::<libc::c_char>(),
            std::ptr::null::<libc::c_void>(),
            0,
        )
    })?;
    let attrs = libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV | libc::MOUNT_ATTR_NOEXEC;
    // SAFETY: fsmount takes the configured context's descriptor and two flag words, and
    // returns a new descriptor.
    let mnt = cvt(unsafe {
        libc::syscall(
            libc::SYS_fsmount,
            fs.as_raw_fd(),
            libc::FSMOUNT_CLOEXEC,
            attrs as libc::c_uint,
        )
    })?;
    // SAFETY: the descriptor was just made and is owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(mnt as i32) })
}

/// Makes `cmd` run inside the named namespace, with the namespace's own `/sys` and
/// `/etc/netns/NAME/hosts` (when present) in place of `/etc/hosts`, as `ip netns exec` does.
///
/// Makes the child of `cmd` receive SIGKILL when the thread that started it ends (with this
/// process, killed or not), so a helper program (the container runtime) never goes on
/// making things after the `up` that asked for them is gone.
pub fn die_with_parent_on_exec(cmd: &mut Command) {
    // SAFETY: the closure runs in the forked child before exec and makes one system call
    // (prctl) with constant arguments; it allocates nothing, so it is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Makes the child of `cmd` join the cgroup whose `cgroup.procs` is open as `procs`
/// ([`crate::cgroup::open_procs`]) between `fork` and `exec`, so it and everything it starts
/// are limited from their first instruction. Opened before the fork, the file is the one
/// checked; the descriptor closes at `exec`.
pub fn join_cgroup_on_exec(cmd: &mut Command, procs: OwnedFd) {
    // SAFETY: the closure runs in the forked child before exec; it makes one system call
    // (write) on a descriptor it owns and a static buffer, and allocates nothing, so it is
    // async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            // "0": the writing process itself.
            if libc::write(procs.as_raw_fd(), b"0".as_ptr().cast(), 1) != 1 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// The child enters the namespace between `fork` and `exec`: it joins the network namespace,
/// takes a private mount namespace (so its mounts are its own and vanish with it), mounts a
/// fresh sysfs and the hosts file. Only system calls run there, on strings prepared beforehand.
pub fn enter_netns_on_exec(cmd: &mut Command, name: &str) -> io::Result<()> {
    let ns = File::open(netns_path(name))?;
    let hosts = Path::new("/etc/netns").join(name).join("hosts");
    let hosts = if hosts.exists() {
        Some(CString::new(hosts.into_os_string().into_encoded_bytes())?)
    } else {
        None
    };
    let etc_hosts = CString::new("/etc/hosts").expect("no NUL in a literal");
    let root = CString::new("/").expect("no NUL in a literal");
    let sys = CString::new("/sys").expect("no NUL in a literal");
    let sysfs = CString::new("sysfs").expect("no NUL in a literal");
    // SAFETY: the closure runs in the forked child before exec; it only makes system calls
    // (setns, unshare, mount, umount2) on a file descriptor and C strings created before the fork, and
    // allocates nothing, so it is async-signal-safe. `ns` outlives the spawn because the
    // closure owns it.
    unsafe {
        cmd.pre_exec(move || {
            netns::enter(ns.as_fd())?;
            if libc::unshare(libc::CLONE_NEWNS) != 0 {
                return Err(io::Error::last_os_error());
            }
            // Keep our mounts from propagating back to the host's mount namespace.
            let flags = libc::MS_REC | libc::MS_SLAVE;
            if libc::mount(
                std::ptr::null(),
                root.as_ptr(),
                std::ptr::null(),
                flags,
                std::ptr::null(),
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
            // sysfs shows the interfaces of the namespace that mounted it: mount a fresh one
            // so /sys/class/net lists the node's interfaces. Failing that (no /sys), the
            // command still runs in the node.
            if libc::umount2(sys.as_ptr(), libc::MNT_DETACH) == 0 {
                libc::mount(
                    sysfs.as_ptr(),
                    sys.as_ptr(),
                    sysfs.as_ptr(),
                    0,
                    std::ptr::null(),
                );
            }
            if let Some(hosts) = &hosts {
                if libc::mount(
                    hosts.as_ptr(),
                    etc_hosts.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND,
                    std::ptr::null(),
                ) != 0
                {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_private_proc_instance_serves_sysctls() {
        if !rtemu_testutil::root_or_skip(
            "a_private_proc_instance_serves_sysctls",
            "mounts a private proc instance",
        ) {
            return;
        }
        let proc = ProcSys::here();
        assert!(proc.root.is_some(), "{:?}", private_proc().err());
        // Its root is a proc: it holds this process's own directory.
        let own = std::fs::metadata(format!(
            "/proc/self/fd/{}/{}",
            std::os::fd::AsRawFd::as_raw_fd(proc.root.as_ref().unwrap()),
            std::process::id()
        ));
        assert!(own.unwrap().is_dir());
        let f = proc.open("net.ipv4.conf.lo.forwarding").unwrap();
        let target = std::fs::read_link(format!(
            "/proc/self/fd/{}",
            std::os::fd::AsRawFd::as_raw_fd(&f)
        ))
        .unwrap();
        assert!(
            target.ends_with("sys/net/ipv4/conf/lo/forwarding"),
            "{target:?}"
        );
        let e = proc.open("net.ipv4.no_such_key").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
    }
}
