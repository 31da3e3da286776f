//! Sleeping until a descriptor has input, a bell rings, or a deadline passes.
//!
//! A thread with nothing to do until some event should not poll: it should block until the
//! event, so that it costs nothing while nothing happens, and run at once when something does.
//! A [`WakeSet`] is one epoll instance watching the descriptors a thread waits on (for the
//! engine, its receive sockets), plus a [`Bell`] any other thread can ring (to stop it, or to
//! hand it a change), with a deadline of nanosecond resolution (`epoll_pwait2`, Linux 5.11): no
//! timer to arm per sleep, one system call per wait.
//!
//! The deadline is absolute; the kernel takes a relative timeout computed from a clock read
//! just before the call, so a wait that times out never ends before its deadline.

use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::Arc;

use crate::sys;
use crate::time::Instant;
use crate::wait::WaitError;

/// The epoll token of the bell (descriptors get their position, from 0).
const BELL: u64 = u64::MAX;

/// Events taken per wait: enough to tell the bell from the rest, whatever else is ready.
const EVENTS: usize = 8;

/// Why a [`WakeSet::sleep_until`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Woke {
    /// A watched descriptor has input (or a signal interrupted the wait).
    Ready,
    /// The bell rang (and was silenced).
    Bell,
    /// The deadline passed.
    Deadline,
}

/// Wakes the thread sleeping on a [`WakeSet`], from any thread. Cloneable; ringing a bell
/// whose set is gone does nothing.
#[derive(Debug, Clone)]
pub struct Bell(Arc<OwnedFd>);

impl Bell {
    /// Wakes the sleeper now, or makes its next sleep return at once.
    pub fn ring(&self) {
        sys::eventfd_ring(&self.0);
    }
}

/// Descriptors one thread sleeps on, with its bell (see the module doc).
#[derive(Debug)]
pub struct WakeSet {
    epoll: OwnedFd,
    bell: Bell,
    watched: u64,
    events: [libc::epoll_event; EVENTS],
}

impl WakeSet {
    /// An empty set with its bell.
    pub fn new() -> io::Result<WakeSet> {
        let epoll = sys::epoll_create()?;
        let bell = Bell(Arc::new(sys::eventfd()?));
        sys::epoll_add(&epoll, std::os::fd::AsRawFd::as_raw_fd(&*bell.0), BELL)?;
        Ok(WakeSet {
            epoll,
            bell,
            watched: 0,
            events: [libc::epoll_event { events: 0, u64: 0 }; EVENTS],
        })
    }

    /// Watches `fd` for input from now on (level-triggered: input present when a sleep starts
    /// ends it at once). The descriptor must outlive the set's use of it.
    pub fn watch(&mut self, fd: BorrowedFd<'_>) -> io::Result<()> {
        sys::epoll_add(
            &self.epoll,
            std::os::fd::AsRawFd::as_raw_fd(&fd),
            self.watched,
        )?;
        self.watched += 1;
        Ok(())
    }

    /// How many descriptors the set watches, the bell aside.
    pub fn watched(&self) -> u64 {
        self.watched
    }

    /// A bell that wakes this set's sleeper.
    pub fn bell(&self) -> Bell {
        self.bell.clone()
    }

    /// Sleeps until a watched descriptor has input, the bell rings, or `deadline` passes
    /// (never, when `None`). A deadline already past returns [`Woke::Deadline`] without a
    /// system call.
    pub fn sleep_until(&mut self, deadline: Option<Instant>) -> Result<Woke, WaitError> {
        let timeout = match deadline {
            Some(d) => {
                let now = Instant::now();
                if now >= d {
                    return Ok(Woke::Deadline);
                }
                Some(d.nanos_since(now))
            }
            None => None,
        };
        let n = match sys::epoll_wait_ns(&self.epoll, &mut self.events, timeout) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(Woke::Ready),
            Err(e) => {
                let call = "epoll_pwait2";
                return Err(if e.raw_os_error() == Some(libc::ENOSYS) {
                    WaitError::Call {
                        call,
                        source: io::Error::new(
                            io::ErrorKind::Unsupported,
                            "epoll_pwait2 needs Linux 5.11 or later",
                        ),
                    }
                } else {
                    WaitError::Call { call, source: e }
                });
            }
        };
        if n == 0 {
            return Ok(Woke::Deadline);
        }
        if self.events[..n].iter().any(|e| e.u64 == BELL) {
            sys::eventfd_drain(&self.bell.0);
            return Ok(Woke::Bell);
        }
        Ok(Woke::Ready)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;

    #[test]
    fn a_deadline_is_never_woken_before() {
        let mut set = WakeSet::new().unwrap();
        for offset in [10_000u64, 100_000, 1_000_000] {
            let deadline = Instant::now() + offset;
            assert_eq!(set.sleep_until(Some(deadline)).unwrap(), Woke::Deadline);
            assert!(Instant::now() >= deadline);
        }
        // A deadline in the past returns at once.
        let past = Instant::now() - 1_000;
        assert_eq!(set.sleep_until(Some(past)).unwrap(), Woke::Deadline);
    }

    #[test]
    fn input_on_a_watched_descriptor_wakes_the_sleeper_and_stays_ready_until_read() {
        let (mut tx, rx) = UnixStream::pair().unwrap();
        let mut set = WakeSet::new().unwrap();
        set.watch(rx.as_fd()).unwrap();
        assert_eq!(set.watched(), 1);
        let writer = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            tx.write_all(b"x").unwrap();
            tx
        });
        let start = Instant::now();
        // Forever, were it not for the input.
        assert_eq!(set.sleep_until(None).unwrap(), Woke::Ready);
        assert!(Instant::now().nanos_since(start) >= 15_000_000);
        let _tx = writer.join().unwrap();
        // Level-triggered: unread input ends the next sleep at once.
        let far = Instant::now() + 5_000_000_000;
        assert_eq!(set.sleep_until(Some(far)).unwrap(), Woke::Ready);
    }

    #[test]
    fn the_bell_wakes_the_sleeper_from_another_thread_once() {
        let mut set = WakeSet::new().unwrap();
        let bell = set.bell();
        let ringer = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            bell.ring();
        });
        assert_eq!(set.sleep_until(None).unwrap(), Woke::Bell);
        ringer.join().unwrap();
        // Two rings from another thread, both done before the sleep (a second ring racing the
        // sleeper's wake could come after it and ring again): one wake silences both, and the
        // next sleep waits for its deadline.
        let bell = set.bell();
        std::thread::spawn(move || {
            bell.ring();
            bell.ring();
        })
        .join()
        .unwrap();
        assert_eq!(set.sleep_until(None).unwrap(), Woke::Bell);
        let soon = Instant::now() + 2_000_000;
        assert_eq!(set.sleep_until(Some(soon)).unwrap(), Woke::Deadline);
        // A ring before the sleep is not lost.
        set.bell().ring();
        assert_eq!(set.sleep_until(None).unwrap(), Woke::Bell);
    }
}
