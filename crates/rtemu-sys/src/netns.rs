//! Moving a thread into a network namespace, and running code there.
//!
//! `setns(2)` moves only the calling thread, and a socket belongs for its whole life to the
//! namespace it was made in. So code that needs another namespace (opening a packet socket in
//! a lab, reading a node's `/proc/sys/net`) runs on a short-lived thread that enters it
//! ([`run_in`]), and the rest of the process stays where it was.
#![allow(unsafe_code)]

use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

/// Moves the calling thread into the network namespace behind `ns` (an open descriptor of
/// `/run/netns/NAME` or `/proc/PID/ns/net`). Threads it starts later begin there too. Needs
/// `CAP_SYS_ADMIN`; `EINVAL` when `ns` is not a network namespace.
///
/// Only a system call: safe to use between `fork` and `exec`.
pub fn enter(ns: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: `ns` is an open descriptor for the whole call; setns only reads it, and
    // CLONE_NEWNET makes the kernel check it is a network namespace.
    if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Why [`run_in`] did not return the closure's result.
#[derive(Debug)]
pub enum RunError {
    /// `setns` refused; the closure did not run.
    Enter(io::Error),
    /// No thread could be started to enter it; the closure did not run.
    Spawn(crate::thread::SpawnError),
    /// The closure panicked.
    Panicked,
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::Enter(e) => write!(f, "entering the network namespace: {e}"),
            RunError::Spawn(e) => e.fmt(f),
            RunError::Panicked => f.write_str("the thread in the network namespace panicked"),
        }
    }
}

impl std::error::Error for RunError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RunError::Enter(e) => Some(e),
            RunError::Spawn(e) => Some(e),
            RunError::Panicked => None,
        }
    }
}

/// Runs `f` on a new thread that has entered the network namespace behind `ns`, and returns
/// its result. The calling thread's namespace never changes.
pub fn run_in<T: Send + 'static>(
    ns: OwnedFd,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, RunError> {
    crate::thread::spawn("rtemu-in-netns", move || {
        enter(ns.as_fd())?;
        Ok(f())
    })
    .map_err(RunError::Spawn)?
    .join()
    .map_err(|_| RunError::Panicked)?
    .map_err(RunError::Enter)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;
    use std::os::unix::fs::MetadataExt;

    /// The identity of the network namespace the calling thread is in.
    fn own_netns() -> (u64, u64) {
        let m = std::fs::metadata("/proc/thread-self/ns/net").unwrap();
        (m.dev(), m.ino())
    }

    /// A new, unnamed network namespace: it lives as long as the returned descriptor, so
    /// nothing is left behind when a test fails.
    fn fresh_netns() -> OwnedFd {
        std::thread::spawn(|| {
            // SAFETY: unshare changes only this short-lived thread.
            let ret = unsafe { libc::unshare(libc::CLONE_NEWNET) };
            assert_eq!(ret, 0, "unshare: {}", io::Error::last_os_error());
            OwnedFd::from(File::open("/proc/thread-self/ns/net").unwrap())
        })
        .join()
        .unwrap()
    }

    #[test]
    fn the_closure_runs_in_the_namespace_and_the_caller_stays() {
        if !rtemu_testutil::root_or_skip("run_in", "creates a network namespace") {
            return;
        }
        let before = own_netns();
        let ns = fresh_netns();
        let m = std::fs::metadata(format!("/proc/self/fd/{}", ns.as_raw_fd())).unwrap();
        let target = (m.dev(), m.ino());
        assert_ne!(target, before);
        assert_eq!(run_in(ns, own_netns).unwrap(), target);
        assert_eq!(own_netns(), before);
    }

    #[test]
    fn a_panic_in_the_closure_is_reported() {
        if !rtemu_testutil::root_or_skip("run_in panic", "enters a network namespace") {
            return;
        }
        let ns = OwnedFd::from(File::open("/proc/self/ns/net").unwrap());
        let err = run_in(ns, || -> u8 { panic!("on purpose") }).unwrap_err();
        assert!(matches!(err, RunError::Panicked), "{err:?}");
    }

    #[test]
    fn a_file_that_is_no_namespace_is_refused_before_the_closure_runs() {
        let not_ns = OwnedFd::from(File::open("/proc/self/status").unwrap());
        let ran = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = ran.clone();
        let err = run_in(not_ns, move || {
            flag.store(true, std::sync::atomic::Ordering::SeqCst)
        })
        .unwrap_err();
        match err {
            RunError::Enter(e) => assert_eq!(e.raw_os_error(), Some(libc::EINVAL)),
            other => panic!("{other:?}"),
        }
        assert!(!ran.load(std::sync::atomic::Ordering::SeqCst));
    }
}
