//! How a release thread waits between loop turns: asleep until a frame or the approach of its
//! next release, then spinning the last stretch.
//!
//! The thread has two reasons to run: a frame arrived on one of its interfaces, or one of its
//! copies is due. Both are known to the kernel (the receive sockets become readable) or to the
//! thread (the head of its timing queues), so it never polls: it sleeps in one
//! [`WakeSet::sleep_until`] on its sockets until `margin` before the next release, or with no
//! deadline when nothing is queued, and a lab without traffic costs no CPU. Near a release it
//! turns the loop without sleeping, receiving as it goes, and the last [`SPIN_APPROACH_NS`] are
//! spun with the shared spin waiter so the send starts within a clock read of its deadline.
//!
//! `margin` is the strategy's:
//!
//! * `auto` (the default): the wake-up latency this thread has measured on its own timed
//!   sleeps ([`WakeLatency`]); under `SCHED_FIFO` on an idle or busy machine that is the
//!   scheduler's wake-up latency, typically 5–30 µs in a virtual machine;
//! * `hybrid:X`: `X`;
//! * `spin`: never sleeps (the loop is the busy wait; the thread's CPU is all the engine's);
//! * `sleep` and the other sleeping strategies: sleep with that strategy's call until the next
//!   release, at most a poll interval at a time, and block on the sockets only when nothing is
//!   queued. A frame that arrives during such a sleep is noticed when it ends; it keeps its
//!   kernel arrival stamp, so it is released on time if its delay outlasts the wait.
//!
//! Where an I/O layer has no descriptor to sleep on (the unit tests' memory I/O), sleeps end at
//! least every poll interval instead.

use rtemu_clock::budget::{RtBudget, SPIN_ALLOWED_NS};
use rtemu_clock::wait::{WaitError, WakeLatency};
use rtemu_clock::wake::{Bell, WakeSet, Woke};
use rtemu_clock::{Instant, WaitStrategy, Waiter};

/// How close to a release the loop hands over to the shared spin waiter.
pub(crate) const SPIN_APPROACH_NS: u64 = 2_000;

/// Waits between the loop turns of one release thread.
#[derive(Debug)]
pub(crate) struct Pacer {
    strategy: WaitStrategy,
    /// The thread's receive sockets (those that have a descriptor) and its bell.
    wake: WakeSet,
    /// Whether `wake` watches every receiving interface; if not, sleeps end each poll interval
    /// so the others are polled.
    watches_all: bool,
    /// The sleeping strategies' waiter.
    sleeper: Waiter,
    spinner: Waiter,
    latency: WakeLatency,
    poll_interval_ns: u64,
}

impl Pacer {
    /// A pacer for `strategy` over `wake`, the set of the thread's receive sockets;
    /// `watches_all` says whether every receiving interface is in it.
    pub(crate) fn new(
        strategy: WaitStrategy,
        poll_interval_ns: u64,
        wake: WakeSet,
        watches_all: bool,
    ) -> Result<Pacer, WaitError> {
        let sleeper = match strategy {
            WaitStrategy::Spin | WaitStrategy::Hybrid { .. } | WaitStrategy::Auto => {
                Waiter::new(WaitStrategy::Sleep)?
            }
            other => Waiter::new(other)?,
        };
        Ok(Pacer {
            strategy,
            wake,
            watches_all,
            sleeper,
            spinner: Waiter::new(WaitStrategy::Spin)?,
            latency: WakeLatency::new(),
            poll_interval_ns,
        })
    }

    /// The bell that wakes this thread from any sleep.
    pub(crate) fn bell(&self) -> Bell {
        self.wake.bell()
    }

    /// The margin before a release at which the thread stops sleeping, ns (0 for `spin` and
    /// the sleeping strategies, which do not spin).
    pub(crate) fn margin_ns(&self) -> u64 {
        match self.strategy {
            WaitStrategy::Auto => self.latency.margin_ns(),
            WaitStrategy::Hybrid { margin_ns } => margin_ns,
            _ => 0,
        }
    }

    /// Waits after an idle loop turn at `now`, with the next release at `next` (if any),
    /// telling `budget` when the thread sleeps and wakes.
    pub(crate) fn pace(
        &mut self,
        now: Instant,
        next: Option<Instant>,
        budget: &mut RtBudget,
    ) -> Result<(), WaitError> {
        match self.strategy {
            WaitStrategy::Spin => {}
            WaitStrategy::Hybrid { .. } | WaitStrategy::Auto => {
                // Spin only while the window's share allows: past half of it, sleep until the
                // release itself (late by a wake-up, still in real time) and keep the rest of
                // the share for frames.
                let margin = if budget.used_ns(now.as_nanos()) < SPIN_ALLOWED_NS {
                    self.margin_ns()
                } else {
                    0
                };
                match next {
                    None => {
                        self.block(now, None, budget)?;
                    }
                    Some(t) if t.nanos_since(now) > margin => {
                        let wake_at = t - margin;
                        let (woke, at) = self.block(now, Some(wake_at), budget)?;
                        // Only a sleep that ran to its deadline says how late wake-ups are.
                        if woke == Woke::Deadline && at >= wake_at {
                            self.latency.record(at.nanos_since(wake_at));
                        }
                    }
                    Some(_) => {}
                }
            }
            _ => match next {
                None => {
                    self.block(now, None, budget)?;
                }
                Some(t) => {
                    budget.sleep(now.as_nanos());
                    self.sleeper
                        .wait_until(t.min(now + self.poll_interval_ns))?;
                    budget.wake(Instant::now().as_nanos());
                }
            },
        }
        match next {
            Some(t) if Instant::now() < t && t.nanos_since(now) <= SPIN_APPROACH_NS => {
                self.spinner.wait_until(t)
            }
            _ => Ok(()),
        }
    }

    /// Sleeps until a socket has input, the bell rings or `deadline`; returns why and when the
    /// thread woke.
    fn block(
        &mut self,
        now: Instant,
        deadline: Option<Instant>,
        budget: &mut RtBudget,
    ) -> Result<(Woke, Instant), WaitError> {
        budget.sleep(now.as_nanos());
        let woke = if self.watches_all {
            self.wake.sleep_until(deadline)?
        } else {
            // Some interface cannot be slept on: wake each poll interval to poll it.
            let poll_end = now + self.poll_interval_ns;
            let until = deadline.map_or(poll_end, |d| d.min(poll_end));
            match self.wake.sleep_until(Some(until))? {
                Woke::Deadline if deadline.is_some_and(|d| until >= d) => Woke::Deadline,
                Woke::Deadline => Woke::Ready,
                other => other,
            }
        };
        let at = Instant::now();
        budget.wake(at.as_nanos());
        Ok((woke, at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;

    fn budget() -> RtBudget {
        RtBudget::engine(Instant::now().as_nanos())
    }

    #[test]
    fn auto_sleeps_until_its_margin_before_the_release_and_learns_its_wake_up_latency() {
        // A poll interval longer than the test: each sleep runs to its deadline.
        let mut pacer = Pacer::new(
            WaitStrategy::Auto,
            10_000_000_000,
            WakeSet::new().unwrap(),
            false,
        )
        .unwrap();
        let mut b = budget();
        let first = pacer.margin_ns();
        for _ in 0..64 {
            let now = Instant::now();
            let release = now + 1_000_000;
            pacer.pace(now, Some(release), &mut b).unwrap();
            let woke = Instant::now();
            // Woke no earlier than the margin before the release.
            assert!(
                woke >= release - first.max(pacer.margin_ns()),
                "woke too early"
            );
        }
        // 64 timed wake-ups measured: the margin now follows them (whatever they were).
        assert!(pacer.latency.samples() >= 64);
    }

    #[test]
    fn hybrid_does_not_sleep_inside_its_margin() {
        let mut pacer = Pacer::new(
            WaitStrategy::Hybrid {
                margin_ns: 1_000_000,
            },
            200_000,
            WakeSet::new().unwrap(),
            false,
        )
        .unwrap();
        let mut b = budget();
        let now = Instant::now();
        pacer.pace(now, Some(now + 500_000), &mut b).unwrap();
        assert!(Instant::now().nanos_since(now) < 400_000);
    }

    #[test]
    fn with_nothing_queued_the_thread_sleeps_until_input_or_its_bell() {
        let (mut tx, rx) = UnixStream::pair().unwrap();
        let mut set = WakeSet::new().unwrap();
        set.watch(rx.as_fd()).unwrap();
        let mut pacer = Pacer::new(WaitStrategy::Auto, 50_000, set, true).unwrap();
        let mut b = budget();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(30));
            tx.write_all(b"x").unwrap();
            tx
        });
        let now = Instant::now();
        pacer.pace(now, None, &mut b).unwrap();
        // Slept until the input: far longer than any poll interval.
        assert!(Instant::now().nanos_since(now) >= 25_000_000);
        let _tx = writer.join().unwrap();

        let (_tx2, rx2) = UnixStream::pair().unwrap();
        let mut set = WakeSet::new().unwrap();
        set.watch(rx2.as_fd()).unwrap();
        let mut pacer = Pacer::new(WaitStrategy::Sleep, 50_000, set, true).unwrap();
        let bell = pacer.bell();
        let ringer = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(30));
            bell.ring();
        });
        let now = Instant::now();
        pacer.pace(now, None, &mut b).unwrap();
        assert!(Instant::now().nanos_since(now) >= 25_000_000);
        ringer.join().unwrap();
    }

    #[test]
    fn sleeping_strategies_wake_for_the_next_release_or_the_poll_interval() {
        let mut pacer =
            Pacer::new(WaitStrategy::Sleep, 300_000, WakeSet::new().unwrap(), false).unwrap();
        let mut b = budget();
        let now = Instant::now();
        pacer.pace(now, Some(now + 100_000), &mut b).unwrap();
        assert!(Instant::now() >= now + 100_000);
        let now = Instant::now();
        pacer.pace(now, Some(now + 10_000_000_000), &mut b).unwrap();
        let slept = Instant::now().nanos_since(now);
        assert!(slept >= 300_000, "{slept}");
        // The 10 s release was not waited for; generous bound for a loaded machine.
        assert!(slept < 5_000_000_000, "{slept}");
    }

    #[test]
    fn spin_hands_the_last_microseconds_to_the_spin_waiter() {
        let mut pacer =
            Pacer::new(WaitStrategy::Spin, 50_000, WakeSet::new().unwrap(), false).unwrap();
        let mut b = budget();
        let now = Instant::now();
        let due = now + 1_500;
        pacer.pace(now, Some(due), &mut b).unwrap();
        assert!(Instant::now() >= due);
        assert_eq!(pacer.margin_ns(), 0, "spin never sleeps");
    }

    #[test]
    fn sleeps_are_not_charged_to_the_real_time_budget() {
        let mut pacer =
            Pacer::new(WaitStrategy::Auto, 50_000, WakeSet::new().unwrap(), false).unwrap();
        let start = Instant::now().as_nanos();
        let mut b = RtBudget::new(1_000_000_000, 10_000_000, start);
        // 50 ms of waiting for releases far away: almost all asleep.
        let end = Instant::now() + 50_000_000;
        while Instant::now() < end {
            let now = Instant::now();
            pacer.pace(now, Some(now + 5_000_000), &mut b).unwrap();
        }
        assert_eq!(
            b.check(Instant::now().as_nanos()),
            rtemu_clock::budget::Standing::Within,
            "50 ms of sleeping used less than 10 ms of the budget"
        );
    }
}
