//! Opening a file to write at a path a user names, when rtemu may run as root, so that the
//! path cannot be aimed at something else: the one way every rtemu output is opened.
//!
//! * **No link planted by another user is followed.** A symbolic link in the path's last
//!   component is followed only when this user or root made it (`/dev/stdout` is root's);
//!   a link another user left in a shared directory (`/tmp/cap.pcapng -> /dev/vda`) is
//!   refused, whatever `fs.protected_symlinks` says. Each link is read through a descriptor
//!   of the link itself, so the link checked is the link followed.
//! * **Only files, pipes, terminals and `/dev/null`.** What the path names is examined before
//!   it is opened (opening some devices acts on them) and again on the descriptor after (the
//!   name may have been replaced in between): block devices, other character devices,
//!   sockets and directories are refused.
//! * **Whole or not at all.** A regular file (or a name where none is yet) is written to a
//!   new temporary file beside it, created with `O_EXCL` in the same directory descriptor,
//!   and renamed over the target by [`Output::commit`] once written and synced. Dropped
//!   without a commit, or on SIGINT/SIGTERM when the program calls [`remove_temporaries`]
//!   from its handler, the temporary goes and the file that stood there stays whole. Pipes,
//!   terminals and `/dev/null` are written in place.
//! * **Never over an input.** An output naming the same file as one of the command's inputs
//!   (by device and inode, so links and hard links count) is refused before anything is
//!   written; [`Identity`] also tells two outputs of one command apart.
#![allow(unsafe_code)]

use std::ffi::{CStr, CString, OsStr};
use std::fs::File;
use std::io::{self, Write};
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use crate::errno::cvt;

/// The most symbolic links followed for one output, as the kernel's own limit.
const MAX_HOPS: usize = 40;

/// `/proc`'s file system type: its links (`/proc/self/fd/1`) are the kernel's own, with no
/// path behind a pipe or a terminal, so they are opened through rather than read.
const PROC_SUPER_MAGIC: libc::c_long = 0x9fa0;

/// The longest part of a target's name kept in its temporary's name (the rest of
/// `NAME_MAX`, 255, is the temporary's own prefix and suffix).
const TMP_NAME_PART: usize = 200;

/// One file, as the kernel tells files apart; or, for a name where no file is yet, the name
/// in its directory. Two paths with one identity are one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity(Kind);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    /// An existing file: its device and inode.
    File { dev: u64, ino: u64 },
    /// A name where no file is yet, in the directory of this device and inode.
    New { dev: u64, ino: u64, name: Vec<u8> },
}

impl Identity {
    /// The identity of the output `path` would be: what [`Output::create`] would write,
    /// links followed as it follows them. Errors when it would refuse `path`.
    pub fn of_output(path: &Path) -> io::Result<Identity> {
        Ok(resolve(path)?.identity())
    }

    /// The identity of the input `path`: the file it names, links followed, as a reader
    /// opens it.
    pub fn of_input(path: &Path) -> io::Result<Identity> {
        let meta = std::fs::metadata(path)?;
        use std::os::unix::fs::MetadataExt;
        Ok(Identity(Kind::File {
            dev: meta.dev(),
            ino: meta.ino(),
        }))
    }
}

/// Where an output's path leads, its links followed and checked.
struct Resolved {
    /// The directory the last name is in.
    dir: OwnedFd,
    name: CString,
    /// What is there (links followed for a `/proc` link), `None` when nothing is.
    stat: Option<libc::stat>,
    /// The last link was one of `/proc`'s: the file is opened through it.
    through_proc: bool,
}

impl Resolved {
    fn identity(&self) -> Identity {
        match &self.stat {
            Some(st) => Identity(Kind::File {
                dev: st.st_dev,
                ino: st.st_ino,
            }),
            None => {
                // The directory was opened a moment ago: its fstat cannot fail but for EIO.
                let dir = fstat(self.dir.as_raw_fd()).ok();
                Identity(Kind::New {
                    dev: dir.map_or(0, |d| d.st_dev),
                    ino: dir.map_or(0, |d| d.st_ino),
                    name: self.name.as_bytes().to_vec(),
                })
            }
        }
    }
}

fn invalid(kind: io::ErrorKind, msg: String) -> io::Error {
    io::Error::new(kind, msg)
}

fn cstring(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        invalid(
            io::ErrorKind::InvalidInput,
            "a path with a NUL byte".to_owned(),
        )
    })
}

/// `fstat(2)` of `fd`.
fn fstat(fd: RawFd) -> io::Result<libc::stat> {
    let mut st = MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `st` is writable memory of the size fstat fills; on success it is initialised.
    cvt(unsafe { libc::fstat(fd, st.as_mut_ptr()) })?;
    // SAFETY: fstat returned 0, so it filled `st`.
    Ok(unsafe { st.assume_init() })
}

/// `fstatat(2)` of `name` in `dir`, following a last link or not.
fn fstatat(dir: RawFd, name: &CStr, follow: bool) -> io::Result<libc::stat> {
    let flags = if follow { 0 } else { libc::AT_SYMLINK_NOFOLLOW };
    let mut st = MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `name` is a NUL-terminated string alive for the call; `st` is writable.
    cvt(unsafe { libc::fstatat(dir, name.as_ptr(), st.as_mut_ptr(), flags) })?;
    // SAFETY: fstatat returned 0, so it filled `st`.
    Ok(unsafe { st.assume_init() })
}

/// `openat(2)`, the descriptor owned.
fn openat(dir: RawFd, name: &CStr, flags: libc::c_int, mode: libc::mode_t) -> io::Result<OwnedFd> {
    // SAFETY: `name` is NUL-terminated and alive for the call; O_CLOEXEC keeps the descriptor
    // from programs this process starts.
    let fd = cvt(unsafe {
        libc::openat(
            dir,
            name.as_ptr(),
            flags | libc::O_CLOEXEC,
            libc::c_uint::from(mode),
        )
    })?;
    // SAFETY: openat returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The target of the symbolic link open (`O_PATH | O_NOFOLLOW`) at `link`.
fn readlink(link: &OwnedFd) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize + 1];
    // SAFETY: an empty name reads the link `link` is open at (Linux ≥ 2.6.39); `buf` is
    // writable for its length.
    let n = cvt(unsafe {
        libc::readlinkat(
            link.as_raw_fd(),
            c"".as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    })? as usize;
    if n >= buf.len() {
        return Err(invalid(
            io::ErrorKind::InvalidInput,
            "a symbolic link longer than PATH_MAX".to_owned(),
        ));
    }
    buf.truncate(n);
    Ok(buf)
}

fn is(st: &libc::stat, kind: libc::mode_t) -> bool {
    st.st_mode & libc::S_IFMT == kind
}

/// `path`'s directory, opened (its own links followed), and its last name: a name of a file,
/// not `.`, `..` or nothing.
fn split(at: RawFd, path: &Path, shown: &Path) -> io::Result<(OwnedFd, CString)> {
    let bytes = path.as_os_str().as_bytes();
    let name = path
        .file_name()
        .filter(|_| !bytes.ends_with(b"/") && !bytes.ends_with(b"/."))
        .ok_or_else(|| {
            invalid(
                io::ErrorKind::InvalidInput,
                format!("{} names no file", shown.display()),
            )
        })?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.as_os_str(),
        _ => OsStr::new("."),
    };
    let dir = openat(
        at,
        &cstring(dir.as_bytes())?,
        libc::O_PATH | libc::O_DIRECTORY,
        0,
    )?;
    Ok((dir, cstring(name.as_bytes())?))
}

/// Whether a link of owner `uid` may be followed: this user's or root's. Anyone else's may
/// point anywhere this user can write, and was made to.
fn trusted_link(uid: libc::uid_t) -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    uid == 0 || uid == unsafe { libc::geteuid() }
}

fn on_proc(dir: &OwnedFd) -> io::Result<bool> {
    let mut fs = MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: `fs` is writable memory of the size fstatfs fills.
    cvt(unsafe { libc::fstatfs(dir.as_raw_fd(), fs.as_mut_ptr()) })?;
    // SAFETY: fstatfs returned 0, so it filled `fs`.
    let fs = unsafe { fs.assume_init() };
    #[allow(clippy::unnecessary_cast)] // f_type's type differs between libcs
    Ok(fs.f_type as libc::c_long == PROC_SUPER_MAGIC)
}

/// Follows `path` to what an output there would write: through links this user or root made
/// (see the module's documentation), refusing any other.
fn resolve(path: &Path) -> io::Result<Resolved> {
    let (mut dir, mut name) = split(libc::AT_FDCWD, path, path)?;
    for _ in 0..MAX_HOPS {
        let st = match fstatat(dir.as_raw_fd(), &name, false) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
            Ok(st) => Some(st),
        };
        if !st.as_ref().is_some_and(|st| is(st, libc::S_IFLNK)) {
            return Ok(Resolved {
                dir,
                name,
                stat: st,
                through_proc: false,
            });
        }
        // The link itself, held open: the one whose owner is checked is the one read.
        let link = openat(dir.as_raw_fd(), &name, libc::O_PATH | libc::O_NOFOLLOW, 0)?;
        let lst = fstat(link.as_raw_fd())?;
        if !is(&lst, libc::S_IFLNK) {
            continue; // replaced since: look again
        }
        let target = readlink(&link)?;
        if !trusted_link(lst.st_uid) {
            return Err(invalid(
                io::ErrorKind::PermissionDenied,
                format!(
                    "{} is a symbolic link (to {:?}) that user {} made: rtemu follows only \
                     its own user's or root's links when it writes, so another user cannot \
                     aim its output elsewhere; remove the link or name the file itself",
                    path.display(),
                    String::from_utf8_lossy(&target),
                    lst.st_uid
                ),
            ));
        }
        if on_proc(&dir)? {
            let st = fstatat(dir.as_raw_fd(), &name, true)?;
            return Ok(Resolved {
                dir,
                name,
                stat: Some(st),
                through_proc: true,
            });
        }
        let target = PathBuf::from(OsStr::from_bytes(&target));
        (dir, name) = split(dir.as_raw_fd(), &target, path)?;
    }
    Err(io::Error::from_raw_os_error(libc::ELOOP))
}

/// Whether a character device of number `rdev` is one an output may be written to: the null
/// device, or a terminal (checked again once open).
fn harmless_char_device(rdev: libc::dev_t) -> bool {
    let (major, minor) = (libc::major(rdev), libc::minor(rdev));
    // 1:3 /dev/null; 4: virtual consoles and serial lines; 5:0 /dev/tty, 5:1 the console;
    // 136–143: pseudo-terminals.
    (major, minor) == (1, 3)
        || major == 4
        || (major == 5 && minor <= 1)
        || (136..=143).contains(&major)
}

/// Refuses what an output is never written to, with the reason.
fn refuse_kind(path: &Path, st: &libc::stat) -> io::Result<()> {
    let what = match st.st_mode & libc::S_IFMT {
        libc::S_IFREG | libc::S_IFIFO => return Ok(()),
        libc::S_IFCHR if harmless_char_device(st.st_rdev) => return Ok(()),
        libc::S_IFCHR => "a character device",
        libc::S_IFBLK => "a block device",
        libc::S_IFDIR => "a directory",
        libc::S_IFSOCK => "a socket",
        _ => "not a file",
    };
    Err(invalid(
        io::ErrorKind::InvalidInput,
        format!(
            "{} is {what}: rtemu writes its outputs only to regular files, pipes, terminals \
             and /dev/null",
            path.display()
        ),
    ))
}

/// A temporary file of this process that a signal handler may remove: its directory's
/// descriptor and its name, kept alive (leaked) for as long as it is registered.
struct Registered {
    dir: RawFd,
    name: CString,
}

/// The temporaries [`remove_temporaries`] removes. A fixed array of pointers, so a signal
/// handler can walk it without a lock or an allocation; an output made while all are taken is
/// not removed on a signal (but still on an error or a panic).
static TEMPORARIES: [AtomicPtr<Registered>; 64] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; 64];

/// Records a temporary; the slot it took, if any.
fn register(dir: RawFd, name: &CStr) -> Option<usize> {
    let entry = Box::into_raw(Box::new(Registered {
        dir,
        name: name.to_owned(),
    }));
    for (i, slot) in TEMPORARIES.iter().enumerate() {
        if slot
            .compare_exchange(
                std::ptr::null_mut(),
                entry,
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .is_ok()
        {
            return Some(i);
        }
    }
    // SAFETY: `entry` came from Box::into_raw above and was published nowhere.
    drop(unsafe { Box::from_raw(entry) });
    None
}

/// Forgets the temporary in `slot` (it was renamed or removed).
fn unregister(slot: usize) {
    let entry = TEMPORARIES[slot].swap(std::ptr::null_mut(), Ordering::AcqRel);
    if !entry.is_null() {
        // SAFETY: whoever swaps a pointer out owns it; a signal handler that took it first
        // left null here, so this is the only owner.
        drop(unsafe { Box::from_raw(entry) });
    }
}

/// Removes every temporary file of an output not yet committed. Async-signal-safe (atomic
/// swaps and `unlinkat` only): for a SIGINT or SIGTERM handler that then ends the program, so
/// a killed run leaves no temporary behind. Outputs still being written afterwards fail at
/// their commit.
pub fn remove_temporaries() {
    for slot in &TEMPORARIES {
        let entry = slot.swap(std::ptr::null_mut(), Ordering::AcqRel);
        if !entry.is_null() {
            // SAFETY: the entry is this function's now (swapped out); it is leaked, not
            // freed, since freeing is not async-signal-safe. unlinkat only reads the name.
            unsafe {
                libc::unlinkat((*entry).dir, (*entry).name.as_ptr(), 0);
            }
        }
    }
}

/// Makes each of `signals` (SIGINT, SIGTERM) remove every temporary not yet committed
/// ([`remove_temporaries`]) and then end the program as it would have without a handler. For
/// a program that does not handle these signals itself: a handler installed later for one of
/// them chains to this one (signal-hook does), which would end the program.
pub fn remove_temporaries_on(signals: &[libc::c_int]) -> io::Result<()> {
    extern "C" fn handler(signal: libc::c_int) {
        remove_temporaries();
        // SAFETY: signal and raise are async-signal-safe. The signal is blocked while its
        // handler runs, so the raised one waits until the handler returns, then takes the
        // default action: the program ends as the signal would have ended it.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::raise(signal);
        }
    }
    for &signal in signals {
        // SAFETY: a zeroed sigaction is a valid one (no flags, an empty mask) to fill in.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = handler as extern "C" fn(libc::c_int) as libc::sighandler_t;
        // SAFETY: the action lives for the call; the handler is async-signal-safe.
        cvt(unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) })?;
    }
    Ok(())
}

/// The temporary file a regular output is written to before it is renamed over its target.
#[derive(Debug)]
struct Temporary {
    dir: OwnedFd,
    name: CString,
    target: CString,
    slot: Option<usize>,
}

impl Temporary {
    /// After its rename into place (`placed`): forgotten when it was renamed, removed when not.
    fn settle(&mut self, placed: io::Result<()>) -> io::Result<()> {
        match placed {
            Ok(()) => {
                if let Some(slot) = self.slot.take() {
                    unregister(slot);
                }
                Ok(())
            }
            Err(e) => {
                self.remove();
                Err(e)
            }
        }
    }

    /// Removes the temporary (it was not committed).
    fn remove(&mut self) {
        if let Some(slot) = self.slot.take() {
            unregister(slot);
        }
        // SAFETY: unlinkat reads the NUL-terminated name; the directory is open.
        unsafe { libc::unlinkat(self.dir.as_raw_fd(), self.name.as_ptr(), 0) };
    }
}

/// A new temporary beside `name` in `dir`: `.NAME.rtemu-PID-N.tmp`, made with `O_EXCL`
/// (never an existing file, never through a link), mode `mode` less the umask.
fn new_temporary(dir: &OwnedFd, name: &CStr, mode: libc::mode_t) -> io::Result<(File, Temporary)> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let base = &name.to_bytes()[..name.to_bytes().len().min(TMP_NAME_PART)];
    for _ in 0..100 {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let mut tmp = b".".to_vec();
        tmp.extend_from_slice(base);
        tmp.extend_from_slice(format!(".rtemu-{}-{n}.tmp", std::process::id()).as_bytes());
        let tmp = cstring(&tmp)?;
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW;
        match openat(dir.as_raw_fd(), &tmp, flags, mode) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
            Ok(fd) => {
                let dir = dir.try_clone()?;
                let slot = register(dir.as_raw_fd(), &tmp);
                return Ok((
                    File::from(fd),
                    Temporary {
                        dir,
                        name: tmp,
                        target: name.to_owned(),
                        slot,
                    },
                ));
            }
        }
    }
    Err(io::Error::from_raw_os_error(libc::EEXIST))
}

/// A file being written; see the module's documentation.
#[derive(Debug)]
pub struct Output {
    path: PathBuf,
    file: File,
    /// `None` when the target is written in place.
    tmp: Option<Temporary>,
    identity: Identity,
}

impl Output {
    /// Starts writing `path` (see the module's documentation), refusing when it is the same
    /// file as one of `inputs`. The errors name `path` and say why.
    pub fn create(path: &Path, inputs: &[&Path]) -> io::Result<Output> {
        let place = resolve(path)?;
        let identity = place.identity();
        for input in inputs {
            if Identity::of_input(input).is_ok_and(|i| i == identity) {
                return Err(invalid(
                    io::ErrorKind::AlreadyExists,
                    format!(
                        "{} is also an input of this command ({}): write the output to \
                         another file",
                        path.display(),
                        input.display()
                    ),
                ));
            }
        }
        let Resolved {
            dir,
            name,
            stat,
            through_proc,
        } = place;
        if let Some(st) = &stat {
            refuse_kind(path, st)?;
        }
        match stat {
            Some(st) if through_proc || !is(&st, libc::S_IFREG) => {
                let file = open_in_place(path, &dir, &name, &st, through_proc)?;
                Ok(Output {
                    path: path.to_owned(),
                    file,
                    tmp: None,
                    identity,
                })
            }
            _ => {
                let (file, tmp) = new_temporary(&dir, &name, 0o666)?;
                // A file written over keeps its permissions (not set-id bits: the new file
                // is this user's).
                if let Some(st) = stat {
                    // SAFETY: fchmod on a descriptor this function owns.
                    let _ = unsafe { libc::fchmod(file.as_raw_fd(), st.st_mode & 0o777) };
                }
                Ok(Output {
                    path: path.to_owned(),
                    file,
                    tmp: Some(tmp),
                    identity,
                })
            }
        }
    }

    /// The file this output is (see [`Identity::of_output`]).
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// Its path, as given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Finishes the file: syncs it and puts it in place of the target.
    pub fn commit(mut self) -> io::Result<()> {
        self.file.flush()?;
        let Some(mut tmp) = self.tmp.take() else {
            return Ok(());
        };
        let placed = self.file.sync_all().and_then(|()| {
            // SAFETY: both names are NUL-terminated and alive; both are in the directory
            // `tmp.dir` is open at, so a directory swapped in meanwhile changes nothing.
            cvt(unsafe {
                libc::renameat(
                    tmp.dir.as_raw_fd(),
                    tmp.name.as_ptr(),
                    tmp.dir.as_raw_fd(),
                    tmp.target.as_ptr(),
                )
            })
            .map(drop)
        });
        tmp.settle(placed)
    }
}

/// Writes `bytes` to `path` whole through an [`Output`]: for files rtemu keeps for itself
/// (a node's `/etc/netns/…/hosts`), so they too are never written through a link.
pub fn write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut out = Output::create(path, &[])?;
    out.write_all(bytes)?;
    out.commit()
}

/// Writes `bytes` to a new file at `path` of mode `mode` (less the umask), whole or not at
/// all, for a secret rtemu makes (a private key): never over anything already at `path`, a
/// link included, and never through a link in its last component. The file is written as a
/// temporary beside it and renamed into place with `RENAME_NOREPLACE`; an error (an existing
/// `path`: `AlreadyExists`) leaves nothing behind.
pub fn write_new(path: &Path, bytes: &[u8], mode: libc::mode_t) -> io::Result<()> {
    let (dir, name) = split(libc::AT_FDCWD, path, path)?;
    let (mut file, mut tmp) = new_temporary(&dir, &name, mode)?;
    let placed = file
        .write_all(bytes)
        .and_then(|()| file.sync_all())
        .and_then(|()| {
            // SAFETY: both names are NUL-terminated and alive; both are in the directory
            // `tmp.dir` is open at.
            cvt(unsafe {
                libc::renameat2(
                    tmp.dir.as_raw_fd(),
                    tmp.name.as_ptr(),
                    tmp.dir.as_raw_fd(),
                    tmp.target.as_ptr(),
                    libc::RENAME_NOREPLACE,
                )
            })
        });
    tmp.settle(placed.map(drop))
}

/// Opens a pipe, a terminal or the null device (or a file behind a `/proc` link) at `name` in
/// `dir`, checked to be the `st` examined before.
fn open_in_place(
    path: &Path,
    dir: &OwnedFd,
    name: &CStr,
    st: &libc::stat,
    through_proc: bool,
) -> io::Result<File> {
    // A file behind `/dev/stdout` is the shell's: appended to, never truncated or replaced.
    let mut flags = libc::O_WRONLY | libc::O_NOCTTY;
    if through_proc {
        flags |= libc::O_APPEND;
    } else {
        flags |= libc::O_NOFOLLOW;
    }
    let fd = openat(dir.as_raw_fd(), name, flags, 0)?;
    let now = fstat(fd.as_raw_fd())?;
    if (now.st_dev, now.st_ino, now.st_mode & libc::S_IFMT)
        != (st.st_dev, st.st_ino, st.st_mode & libc::S_IFMT)
    {
        return Err(invalid(
            io::ErrorKind::Interrupted,
            format!("{} changed while it was opened: try again", path.display()),
        ));
    }
    refuse_kind(path, &now)?;
    let is_null = is(&now, libc::S_IFCHR) && now.st_rdev == libc::makedev(1, 3);
    // SAFETY: isatty only examines the open descriptor.
    if is(&now, libc::S_IFCHR) && !is_null && unsafe { libc::isatty(fd.as_raw_fd()) } != 1 {
        return Err(invalid(
            io::ErrorKind::InvalidInput,
            format!(
                "{} is a character device that is no terminal: rtemu writes its outputs only \
                 to regular files, pipes, terminals and /dev/null",
                path.display()
            ),
        ));
    }
    Ok(File::from(fd))
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.file.write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        if let Some(tmp) = &mut self.tmp {
            tmp.remove();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, MetadataExt};

    /// A fresh directory, removed when dropped (also when the test fails).
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(tag: &str) -> Scratch {
            let dir =
                std::env::temp_dir().join(format!("rtemu-sys-out-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Scratch(dir)
        }

        fn join(&self, name: &str) -> PathBuf {
            self.0.join(name)
        }

        fn names(&self) -> Vec<String> {
            let mut names: Vec<String> = std::fs::read_dir(&self.0)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            names
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn a_new_secret_is_private_and_replaces_nothing_not_even_a_dangling_link() {
        let dir = Scratch::new("new");
        let key = dir.join("agent.key");
        write_new(&key, b"secret", 0o600).unwrap();
        let meta = std::fs::symlink_metadata(&key).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o600);
        assert_eq!(std::fs::read(&key).unwrap(), b"secret");
        let again = write_new(&key, b"other", 0o600).unwrap_err();
        assert_eq!(again.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&key).unwrap(), b"secret");
        // A link planted where the key goes is not written through, even one to nothing.
        let aimed = dir.join("aimed");
        let link = dir.join("link.key");
        symlink(&aimed, &link).unwrap();
        let e = write_new(&link, b"secret", 0o600).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert!(!aimed.exists(), "written through the link");
        assert_eq!(dir.names(), ["agent.key", "link.key"], "no temporary left");
    }

    #[test]
    fn a_file_is_replaced_whole_keeping_its_mode_and_a_dropped_one_leaves_it() {
        let dir = Scratch::new("whole");
        let target = dir.join("out.txt");
        std::fs::write(&target, "good").unwrap();
        std::fs::set_permissions(&target, std::os::unix::fs::PermissionsExt::from_mode(0o640))
            .unwrap();
        {
            let mut out = Output::create(&target, &[]).unwrap();
            out.write_all(b"half").unwrap();
            assert_eq!(dir.names().len(), 2, "the temporary beside it");
        }
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "good");
        assert_eq!(dir.names(), ["out.txt"]);
        write(&target, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
        assert_eq!(std::fs::metadata(&target).unwrap().mode() & 0o777, 0o640);
        assert_eq!(dir.names(), ["out.txt"]);
    }

    #[test]
    fn own_links_are_followed_to_the_file_they_name() {
        let dir = Scratch::new("own-link");
        std::fs::create_dir(dir.join("data")).unwrap();
        symlink("data/real.pcap", dir.join("out.pcap")).unwrap();
        write(&dir.join("out.pcap"), b"frames").unwrap();
        // The link stays a link; the file it names is written.
        assert!(std::fs::symlink_metadata(dir.join("out.pcap"))
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(
            std::fs::read(dir.join("data/real.pcap")).unwrap(),
            b"frames"
        );
    }

    #[test]
    fn a_link_of_another_user_is_never_followed() {
        if !rtemu_testutil::root_or_skip("another user's link", "makes a link owned by nobody") {
            return;
        }
        let dir = Scratch::new("planted");
        // A world-writable sticky directory, as /tmp, where user 65534 planted two links.
        std::fs::set_permissions(&dir.0, std::os::unix::fs::PermissionsExt::from_mode(0o1777))
            .unwrap();
        let victim = dir.join("victim");
        std::fs::write(&victim, "precious").unwrap();
        for (name, to) in [
            ("cap.pcapng", victim.as_path()),
            ("dev.pcapng", Path::new("/dev/null")),
        ] {
            let link = dir.join(name);
            symlink(to, &link).unwrap();
            std::os::unix::fs::lchown(&link, Some(65534), Some(65534)).unwrap();
            let e = Output::create(&link, &[]).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
            assert!(e.to_string().contains("that user 65534 made"), "{e}");
            assert!(Identity::of_output(&link).is_err());
        }
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        // Root's own link is followed.
        symlink(&victim, dir.join("root.txt")).unwrap();
        write(&dir.join("root.txt"), b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "new");
        assert_eq!(
            dir.names(),
            ["cap.pcapng", "dev.pcapng", "root.txt", "victim"]
        );
    }

    /// A block device of this machine, if any (`/dev/loop0`, a disk).
    fn some_block_device() -> Option<PathBuf> {
        use std::os::unix::fs::FileTypeExt;
        let dev = std::fs::read_dir("/dev").ok()?.flatten();
        dev.filter(|e| e.file_type().is_ok_and(|t| t.is_block_device()))
            .map(|e| e.path())
            .next()
    }

    #[test]
    fn devices_are_refused_before_they_are_opened_but_dev_null_is_written() {
        let dir = Scratch::new("devices");
        // /dev/zero: a character device that is not /dev/null and no terminal.
        let mut refused = vec![PathBuf::from("/dev/zero")];
        match some_block_device() {
            Some(disk) => refused.push(disk),
            None => eprintln!("no block device in /dev: only the character device is tried"),
        }
        for (i, device) in refused.iter().enumerate() {
            // By its own name, and through a link this user made (the link is followed).
            let link = dir.join(&format!("out{i}.pcapng"));
            symlink(device, &link).unwrap();
            for path in [device.as_path(), link.as_path()] {
                let e = Output::create(path, &[]).unwrap_err();
                assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
                assert!(
                    e.to_string()
                        .contains("device: rtemu writes its outputs only"),
                    "{e}"
                );
            }
        }
        write(Path::new("/dev/null"), b"gone").unwrap();
        symlink("/dev/null", dir.join("null")).unwrap();
        write(&dir.join("null"), b"gone").unwrap();
        let e = Output::create(&dir.0, &[]).unwrap_err();
        assert!(e.to_string().contains("is a directory"), "{e}");
        for bad in ["", "x/", "..", "x/.."] {
            assert!(Output::create(Path::new(bad), &[]).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_pipe_is_written_in_place() {
        let dir = Scratch::new("fifo");
        let fifo = dir.join("f");
        let c = cstring(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: mkfifo reads the NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(fifo).unwrap())
        };
        write(&fifo, b"through").unwrap();
        assert_eq!(reader.join().unwrap(), b"through");
        assert_eq!(dir.names(), ["f"]);
    }

    #[test]
    fn an_input_is_refused_as_output_by_any_of_its_names() {
        let dir = Scratch::new("inputs");
        let input = dir.join("in.pcap");
        std::fs::write(&input, "capture").unwrap();
        symlink(&input, dir.join("link.pcap")).unwrap();
        std::fs::hard_link(&input, dir.join("hard.pcap")).unwrap();
        for name in ["in.pcap", "link.pcap", "hard.pcap", "./in.pcap"] {
            let e = Output::create(&dir.join(name), &[&input]).unwrap_err();
            assert!(e.to_string().contains("also an input"), "{name}: {e}");
        }
        assert_eq!(std::fs::read_to_string(&input).unwrap(), "capture");
        // Two names of one file that does not exist yet are one identity; others are not.
        let new = Identity::of_output(&dir.join("new.csv")).unwrap();
        assert_eq!(
            new,
            Identity::of_output(&dir.join(".").join("new.csv")).unwrap()
        );
        assert_ne!(new, Identity::of_output(&dir.join("new2.csv")).unwrap());
        assert_eq!(
            Identity::of_output(&dir.join("link.pcap")).unwrap(),
            Identity::of_input(&input).unwrap()
        );
    }
}
