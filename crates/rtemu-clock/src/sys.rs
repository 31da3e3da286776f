//! Thin wrappers over the libc calls this crate needs: the only place with `unsafe`.
//!
//! Each wrapper turns the C convention (negative return, `errno`) into `io::Result`, or returns
//! the error number directly where the call reports it that way (`clock_nanosleep`,
//! `pthread_*`).
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use rtemu_sys::errno::{cvt, cvt_code};

const NANOS_PER_SEC: u64 = 1_000_000_000;

fn timespec(ns: u64) -> libc::timespec {
    libc::timespec {
        tv_sec: (ns / NANOS_PER_SEC) as libc::time_t,
        tv_nsec: (ns % NANOS_PER_SEC) as libc::c_long,
    }
}

/// Reads `clock` in nanoseconds.
pub(crate) fn clock_gettime_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clocks passed (CLOCK_MONOTONIC,
    // CLOCK_REALTIME, CLOCK_THREAD_CPUTIME_ID) exist on every Linux this crate supports, so
    // the call cannot fail.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * NANOS_PER_SEC + ts.tv_nsec as u64
}

/// `clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, deadline)`; returns early only on a signal.
pub(crate) fn clock_nanosleep_abs(deadline_ns: u64) -> io::Result<()> {
    let ts = timespec(deadline_ns);
    // SAFETY: `ts` is a valid timespec; with TIMER_ABSTIME the remainder pointer may be null.
    let err = unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    };
    cvt_code(err)
}

/// Relative `nanosleep(ns)`.
pub(crate) fn nanosleep(ns: u64) -> io::Result<()> {
    let ts = timespec(ns);
    // SAFETY: `ts` is a valid timespec and the remainder pointer may be null.
    cvt(unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) }).map(drop)
}

/// `select(0, NULL, NULL, NULL, timeout)`: the classic portable sleep, microsecond resolution.
pub(crate) fn select_sleep(us: u64) -> io::Result<()> {
    let mut tv = libc::timeval {
        tv_sec: (us / 1_000_000) as libc::time_t,
        tv_usec: (us % 1_000_000) as libc::suseconds_t,
    };
    // SAFETY: with nfds 0 the fd sets may be null; `tv` is a valid, writable timeval.
    cvt(unsafe {
        libc::select(
            0,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut tv,
        )
    })
    .map(drop)
}

/// A new `CLOCK_MONOTONIC` timerfd.
pub(crate) fn timerfd_create() -> io::Result<OwnedFd> {
    // SAFETY: plain syscall with constant arguments.
    let fd = cvt(unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_CLOEXEC) })?;
    // SAFETY: `fd` was just returned by the kernel and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Arms `fd` for the absolute `deadline_ns` and blocks in `read` until it expires.
pub(crate) fn timerfd_wait_abs(fd: &OwnedFd, deadline_ns: u64) -> io::Result<()> {
    let spec = libc::itimerspec {
        it_interval: timespec(0),
        it_value: timespec(deadline_ns.max(1)),
    };
    // SAFETY: `fd` is a live timerfd; `spec` is valid; the old-value pointer may be null.
    cvt(unsafe {
        libc::timerfd_settime(
            fd.as_raw_fd(),
            libc::TFD_TIMER_ABSTIME,
            &spec,
            std::ptr::null_mut(),
        )
    })?;
    let mut expirations = 0u64;
    // SAFETY: reads exactly 8 bytes into a u64, as the timerfd read protocol requires.
    let n = unsafe {
        libc::read(
            fd.as_raw_fd(),
            (&mut expirations as *mut u64).cast(),
            std::mem::size_of::<u64>(),
        )
    };
    cvt(n).map(drop)
}

/// A new, empty epoll instance.
pub(crate) fn epoll_create() -> io::Result<OwnedFd> {
    // SAFETY: plain syscall with a constant flag.
    let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
    // SAFETY: `fd` was just returned by the kernel and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `epoll_wait` on an empty set with a millisecond timeout: what an event loop's timer gets.
pub(crate) fn epoll_sleep(fd: &OwnedFd, ms: i32) -> io::Result<()> {
    let mut event = libc::epoll_event { events: 0, u64: 0 };
    // SAFETY: `fd` is a live epoll fd; `event` is a valid buffer of one event.
    cvt(unsafe { libc::epoll_wait(fd.as_raw_fd(), &mut event, 1, ms) }).map(drop)
}

/// `epoll_ctl(EPOLL_CTL_ADD)` of `fd` for input, level-triggered, with `token` as its data.
pub(crate) fn epoll_add(epoll: &OwnedFd, fd: libc::c_int, token: u64) -> io::Result<()> {
    let mut event = libc::epoll_event {
        events: libc::EPOLLIN as u32,
        u64: token,
    };
    // SAFETY: `epoll` is a live epoll fd; `event` is a valid event; the kernel checks `fd`.
    cvt(unsafe { libc::epoll_ctl(epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut event) })
        .map(drop)
}

/// `epoll_pwait2` into `events` for at most `timeout_ns` (forever when `None`), with the
/// thread's signal mask unchanged; returns how many events were written.
pub(crate) fn epoll_wait_ns(
    epoll: &OwnedFd,
    events: &mut [libc::epoll_event],
    timeout_ns: Option<u64>,
) -> io::Result<usize> {
    let ts = timeout_ns.map(timespec);
    let ts_ptr = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `epoll` is a live epoll fd; `events` is a writable buffer of the length passed;
    // the timeout is a valid timespec or null (wait forever); a null sigmask leaves the mask.
    let n = unsafe {
        libc::syscall(
            libc::SYS_epoll_pwait2,
            epoll.as_raw_fd(),
            events.as_mut_ptr(),
            events.len().min(i32::MAX as usize) as libc::c_int,
            ts_ptr,
            std::ptr::null::<libc::sigset_t>(),
            0usize,
        )
    };
    cvt(n).map(|n| n as usize)
}

/// A new non-blocking eventfd.
pub(crate) fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: plain syscall with constant arguments.
    let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) })?;
    // SAFETY: `fd` was just returned by the kernel and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Adds 1 to the eventfd `fd`'s counter (a full counter already wakes its readers: ignored).
pub(crate) fn eventfd_ring(fd: &OwnedFd) {
    let one = 1u64;
    // SAFETY: writes exactly 8 bytes from a u64, as the eventfd protocol requires.
    unsafe { libc::write(fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
}

/// Resets the eventfd `fd`'s counter to 0 (nothing to read is no error).
pub(crate) fn eventfd_drain(fd: &OwnedFd) {
    let mut count = 0u64;
    // SAFETY: reads exactly 8 bytes into a u64, as the eventfd protocol requires; the fd is
    // non-blocking, so an empty counter returns EAGAIN at once.
    unsafe { libc::read(fd.as_raw_fd(), (&mut count as *mut u64).cast(), 8) };
}

/// The calling thread's kernel id (`gettid`).
pub(crate) fn gettid() -> libc::pid_t {
    // SAFETY: gettid takes no arguments and cannot fail.
    unsafe { libc::gettid() }
}

/// `prctl(PR_SET_TIMERSLACK, ns)` for the calling thread.
pub(crate) fn set_timer_slack(ns: u64) -> io::Result<()> {
    // SAFETY: PR_SET_TIMERSLACK takes one unsigned long argument; the rest are ignored.
    cvt(unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) }).map(drop)
}

/// `prctl(PR_GET_TIMERSLACK)` for the calling thread, in ns.
pub(crate) fn timer_slack() -> io::Result<u64> {
    // SAFETY: PR_GET_TIMERSLACK takes no arguments and returns the slack.
    cvt(unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) }).map(|v| v as u64)
}

/// `pthread_setschedparam` on the calling thread; returns the error number on failure.
pub(crate) fn set_thread_sched(policy: libc::c_int, priority: libc::c_int) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `pthread_self()` is always a valid handle to the calling thread; `param` is valid.
    let err = unsafe { libc::pthread_setschedparam(libc::pthread_self(), policy, &param) };
    cvt_code(err)
}

/// The calling thread's scheduling policy and priority.
pub(crate) fn thread_sched() -> io::Result<(libc::c_int, libc::c_int)> {
    let mut policy = 0;
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: both out-pointers are valid and writable; the handle is the calling thread.
    let err = unsafe { libc::pthread_getschedparam(libc::pthread_self(), &mut policy, &mut param) };
    cvt_code(err).map(|()| (policy, param.sched_priority))
}

/// Pins the calling thread to `cpus`.
pub(crate) fn set_affinity(cpus: &[usize]) -> io::Result<()> {
    // SAFETY: an all-zero cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        // SAFETY: CPU_SET writes inside `set`; the caller checked `cpu < CPU_SETSIZE`.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is the calling thread.
    cvt(unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) })
        .map(drop)
}

/// The CPUs the calling thread may run on.
pub(crate) fn affinity() -> io::Result<Vec<usize>> {
    // SAFETY: an all-zero cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable cpu_set_t of the size passed; pid 0 is this thread.
    cvt(unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) })?;
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: `cpu` is below CPU_SETSIZE, so CPU_ISSET reads inside `set`.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect())
}

/// `mlockall(MCL_CURRENT | MCL_FUTURE)`.
pub(crate) fn mlockall() -> io::Result<()> {
    // SAFETY: plain syscall with constant flags.
    cvt(unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) }).map(drop)
}

/// `munlockall()`.
pub(crate) fn munlockall() -> io::Result<()> {
    // SAFETY: plain syscall without arguments.
    cvt(unsafe { libc::munlockall() }).map(drop)
}
