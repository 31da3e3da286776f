//! The POSIX synchronisation objects the latency tests hand off through: a pthread mutex whose
//! protocol is chosen (priority inheritance or none), a semaphore, and a spin lock. One of
//! the crate's two modules with `unsafe` (the other is `rtt::sys`), one libc call per block.
//!
//! Rust's `std::sync::Mutex` has no priority inheritance, which is exactly what the
//! priority-inversion test needs to compare.
#![allow(unsafe_code)]

use std::cell::UnsafeCell;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

use rtemu_sys::errno::cvt_code;

/// A `pthread_mutex_t` with a chosen protocol.
pub struct PthreadMutex {
    // Boxed: a pthread mutex must not move once initialised.
    inner: Box<UnsafeCell<libc::pthread_mutex_t>>,
}

// SAFETY: a pthread mutex is made to be shared between threads; all access goes through the
// pthread calls, which synchronise internally.
unsafe impl Send for PthreadMutex {}
// SAFETY: as above.
unsafe impl Sync for PthreadMutex {}

impl PthreadMutex {
    /// A mutex with `PTHREAD_PRIO_INHERIT` when `inherit`, else `PTHREAD_PRIO_NONE`.
    pub fn new(inherit: bool) -> io::Result<PthreadMutex> {
        // SAFETY: an all-zero attribute object is valid storage for pthread_mutexattr_init.
        let mut attr: libc::pthread_mutexattr_t = unsafe { std::mem::zeroed() };
        // SAFETY: `attr` is valid, writable storage.
        cvt_code(unsafe { libc::pthread_mutexattr_init(&mut attr) })?;
        let protocol = if inherit {
            libc::PTHREAD_PRIO_INHERIT
        } else {
            libc::PTHREAD_PRIO_NONE
        };
        // SAFETY: `attr` was initialised above.
        let set = cvt_code(unsafe { libc::pthread_mutexattr_setprotocol(&mut attr, protocol) });
        let inner = Box::new(UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER));
        // SAFETY: `inner` is valid storage that will not move (boxed); `attr` is initialised.
        let init =
            set.and_then(|()| cvt_code(unsafe { libc::pthread_mutex_init(inner.get(), &attr) }));
        // SAFETY: `attr` was initialised and is no longer needed.
        unsafe { libc::pthread_mutexattr_destroy(&mut attr) };
        init.map(|()| PthreadMutex { inner })
    }

    /// Locks, blocking; the guard unlocks when dropped.
    pub fn lock(&self) -> io::Result<PthreadGuard<'_>> {
        // SAFETY: the mutex was initialised in `new` and lives as long as `self`.
        cvt_code(unsafe { libc::pthread_mutex_lock(self.inner.get()) })?;
        Ok(PthreadGuard { mutex: self })
    }
}

impl Drop for PthreadMutex {
    fn drop(&mut self) {
        // SAFETY: initialised in `new`; no guard can outlive `self`, so it is unlocked.
        unsafe { libc::pthread_mutex_destroy(self.inner.get()) };
    }
}

/// A held [`PthreadMutex`].
pub struct PthreadGuard<'a> {
    mutex: &'a PthreadMutex,
}

impl Drop for PthreadGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: this guard exists only while the calling thread holds the lock.
        unsafe { libc::pthread_mutex_unlock(self.mutex.inner.get()) };
    }
}

/// A process-private POSIX semaphore.
pub struct Semaphore {
    // Boxed: a semaphore must not move once initialised.
    inner: Box<UnsafeCell<libc::sem_t>>,
}

// SAFETY: POSIX semaphores are made to be shared between threads of a process.
unsafe impl Send for Semaphore {}
// SAFETY: as above.
unsafe impl Sync for Semaphore {}

impl Semaphore {
    /// A semaphore with count 0.
    pub fn new() -> io::Result<Semaphore> {
        // SAFETY: all-zero is valid storage for sem_init to initialise.
        let inner = Box::new(UnsafeCell::new(unsafe {
            std::mem::zeroed::<libc::sem_t>()
        }));
        // SAFETY: `inner` is valid storage that will not move; pshared 0 is thread-shared.
        if unsafe { libc::sem_init(inner.get(), 0, 0) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Semaphore { inner })
    }

    /// Increments the count, waking one waiter.
    pub fn post(&self) {
        // SAFETY: initialised in `new`. It fails only on overflow, which the strict
        // alternation of the latency tests rules out.
        unsafe { libc::sem_post(self.inner.get()) };
    }

    /// Waits until the count is positive and decrements it.
    pub fn wait(&self) {
        // SAFETY: initialised in `new`. Retried when a signal interrupts the wait.
        while unsafe { libc::sem_wait(self.inner.get()) } != 0 {}
    }
}

impl Drop for Semaphore {
    fn drop(&mut self) {
        // SAFETY: initialised in `new`; no thread waits on it once its owner drops it.
        unsafe { libc::sem_destroy(self.inner.get()) };
    }
}

/// A test-and-set spin lock, what `pthread_spin_lock` is: a waiter burns its CPU instead of
/// sleeping, and there is no priority inheritance to boost the holder.
#[derive(Debug, Default)]
pub struct SpinLock {
    held: AtomicBool,
}

impl SpinLock {
    /// An unlocked spin lock.
    pub fn new() -> SpinLock {
        SpinLock::default()
    }

    /// Takes the lock if it is free; the guard releases it when dropped.
    pub fn try_lock(&self) -> Option<SpinGuard<'_>> {
        self.held
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| SpinGuard { lock: self })
    }

    /// Spins until the lock is free, then takes it.
    pub fn lock(&self) -> SpinGuard<'_> {
        loop {
            if let Some(guard) = self.try_lock() {
                return guard;
            }
            std::hint::spin_loop();
        }
    }
}

/// A held [`SpinLock`].
#[derive(Debug)]
pub struct SpinGuard<'a> {
    lock: &'a SpinLock,
}

impl Drop for SpinGuard<'_> {
    fn drop(&mut self) {
        self.lock.held.store(false, Ordering::Release);
    }
}

/// Gives up the CPU to another runnable thread of the same priority.
pub fn yield_now() {
    // SAFETY: sched_yield takes no arguments and cannot fail on Linux.
    unsafe { libc::sched_yield() };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn mutexes_of_both_protocols_exclude() {
        for inherit in [true, false] {
            let mutex = Arc::new(PthreadMutex::new(inherit).unwrap());
            let counter = Arc::new(std::sync::atomic::AtomicU64::new(0));
            let threads: Vec<_> = (0..2)
                .map(|_| {
                    let (mutex, counter) = (Arc::clone(&mutex), Arc::clone(&counter));
                    std::thread::spawn(move || {
                        for _ in 0..10_000 {
                            let _guard = mutex.lock().unwrap();
                            // A non-atomic read-modify-write: lost updates if exclusion fails.
                            let v = counter.load(std::sync::atomic::Ordering::Relaxed);
                            counter.store(v + 1, std::sync::atomic::Ordering::Relaxed);
                        }
                    })
                })
                .collect();
            threads.into_iter().for_each(|t| t.join().unwrap());
            assert_eq!(counter.load(std::sync::atomic::Ordering::Relaxed), 20_000);
        }
    }

    #[test]
    fn spin_lock_excludes() {
        let lock = Arc::new(SpinLock::new());
        let counter = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let (lock, counter) = (Arc::clone(&lock), Arc::clone(&counter));
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        let _guard = lock.lock();
                        let v = counter.load(std::sync::atomic::Ordering::Relaxed);
                        counter.store(v + 1, std::sync::atomic::Ordering::Relaxed);
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(counter.load(std::sync::atomic::Ordering::Relaxed), 20_000);
        let held = lock.try_lock().unwrap();
        assert!(lock.try_lock().is_none());
        drop(held);
        assert!(lock.try_lock().is_some());
    }

    #[test]
    fn semaphore_hands_off_in_order() {
        let (ping, pong) = (
            Arc::new(Semaphore::new().unwrap()),
            Arc::new(Semaphore::new().unwrap()),
        );
        let (p2, q2) = (Arc::clone(&ping), Arc::clone(&pong));
        let echo = std::thread::spawn(move || {
            (0..1_000)
                .map(|_| {
                    p2.wait();
                    q2.post();
                })
                .count()
        });
        let mut replies = 0;
        for _ in 0..1_000 {
            ping.post();
            pong.wait();
            replies += 1;
        }
        assert_eq!((echo.join().unwrap(), replies), (1_000, 1_000));
    }
}
