//! How much of each short window a real-time thread may run, so the kernel never throttles it
//! and the rest of the machine never starves.
//!
//! Linux lets real-time threads run at most `kernel.sched_rt_runtime_us` of every
//! `sched_rt_period_us` on a CPU (950 ms of every second by default); a thread that takes more is
//! stopped for the rest of the period, 50 ms at once, which for a packet engine is 50 ms of frames
//! released late. Newer kernels add a deadline server that runs starved normal threads for 50 ms
//! of each second, with the same effect. Neither happens to a thread that keeps its own real-time
//! share below the limit in every period, which it can do by construction: it knows when it is
//! awake (everything outside its blocking waits) and can step down to `SCHED_OTHER` for the rest
//! of a window once its share is spent.
//!
//! An [`RtBudget`] is that bookkeeping, pure (times are arguments): windows of
//! [`RtBudget::window_ns`] back to back from the first wake, each allowing
//! [`RtBudget::allowed_ns`] awake. Awake time is wall time between a wake and the next sleep, so
//! it counts time the thread was preempted too: it can only overstate the real-time runtime the
//! kernel charges, never understate it. With windows of 10 ms and 9 ms allowed, any second holds
//! at most 0.9 s + 9 ms of the thread's real-time running (the window that straddles its end),
//! below the kernel's 0.95 s, whatever the phase of the kernel's period; and normal threads on
//! the CPU get at least 1 ms of every 10 ms.

/// The window the engine's release threads account their real-time share over, ns.
pub const WINDOW_NS: u64 = 10_000_000;

/// What a release thread may be awake under `SCHED_FIFO` in each [`WINDOW_NS`], ns (90 %).
pub const ALLOWED_NS: u64 = 9_000_000;

/// The awake time per [`WINDOW_NS`] below which a release thread may spin towards a release
/// (50 %): past it, it sleeps until the release itself, which then starts later by its wake-up
/// latency but leaves the rest of its share for the frames. Spinning is what makes a busy thread
/// spend its share; frames alone rarely do.
pub const SPIN_ALLOWED_NS: u64 = 5_000_000;

/// Where a thread stands in its current window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// Its share of this window is not spent.
    Within,
    /// It has been awake for its whole share of this window: it should step down (or sleep)
    /// until [`RtBudget::window_end`].
    Spent,
}

/// Awake time per window of one thread (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RtBudget {
    window_ns: u64,
    allowed_ns: u64,
    /// Start of the current window.
    window_start: u64,
    /// Awake time in the current window up to `awake_since` (or the last sleep).
    used_ns: u64,
    /// When the thread last woke, while it is awake.
    awake_since: Option<u64>,
    /// Windows in which the share was spent.
    spent_windows: u64,
    /// Whether the current window was already counted in `spent_windows`.
    counted: bool,
}

impl RtBudget {
    /// A budget of `allowed_ns` awake in every `window_ns`, for a thread awake from `now`.
    /// `allowed_ns` is capped at `window_ns`; a zero window is taken as 1 ns.
    pub fn new(window_ns: u64, allowed_ns: u64, now: u64) -> RtBudget {
        let window_ns = window_ns.max(1);
        RtBudget {
            window_ns,
            allowed_ns: allowed_ns.min(window_ns),
            window_start: now,
            used_ns: 0,
            awake_since: Some(now),
            spent_windows: 0,
            counted: false,
        }
    }

    /// The engine's budget: [`ALLOWED_NS`] of every [`WINDOW_NS`], awake from `now`.
    pub fn engine(now: u64) -> RtBudget {
        RtBudget::new(WINDOW_NS, ALLOWED_NS, now)
    }

    /// The window's length, ns.
    pub fn window_ns(&self) -> u64 {
        self.window_ns
    }

    /// What the thread may be awake in each window, ns.
    pub fn allowed_ns(&self) -> u64 {
        self.allowed_ns
    }

    /// When the current window ends.
    pub fn window_end(&self) -> u64 {
        self.window_start + self.window_ns
    }

    /// Windows in which the thread spent its whole share so far.
    pub fn spent_windows(&self) -> u64 {
        self.spent_windows
    }

    /// The thread goes to sleep (blocks) at `now`.
    pub fn sleep(&mut self, now: u64) {
        self.roll(now);
        if let Some(since) = self.awake_since.take() {
            self.used_ns += now.saturating_sub(since);
        }
    }

    /// The thread woke at `now`.
    pub fn wake(&mut self, now: u64) {
        self.roll(now);
        if self.awake_since.is_none() {
            self.awake_since = Some(now);
        }
    }

    /// How long the thread has been awake in the window holding `now`, ns.
    pub fn used_ns(&mut self, now: u64) -> u64 {
        self.roll(now);
        self.used_ns
            + self
                .awake_since
                .map_or(0, |since| now.saturating_sub(since))
    }

    /// Where the thread stands at `now` (a new window starts afresh).
    pub fn check(&mut self, now: u64) -> Standing {
        self.roll(now);
        let running = self
            .awake_since
            .map_or(0, |since| now.saturating_sub(since));
        if self.used_ns + running >= self.allowed_ns {
            if !self.counted {
                self.counted = true;
                self.spent_windows += 1;
            }
            Standing::Spent
        } else {
            Standing::Within
        }
    }

    /// Moves to the window holding `now`, charging awake time before each boundary to the
    /// window it belongs to. Time never goes back here: an earlier `now` changes nothing.
    fn roll(&mut self, now: u64) {
        if now < self.window_end() {
            return;
        }
        let elapsed = (now - self.window_start) / self.window_ns;
        let start = self.window_start + elapsed * self.window_ns;
        self.window_start = start;
        self.used_ns = 0;
        self.counted = false;
        if let Some(since) = self.awake_since.as_mut() {
            // The awake stretch before the new window belonged to the old ones.
            *since = (*since).max(start);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_thread_awake_for_its_share_is_told_it_is_spent_until_the_window_ends() {
        let mut b = RtBudget::new(10_000, 9_000, 0);
        assert_eq!(b.check(8_999), Standing::Within);
        assert_eq!(b.check(9_000), Standing::Spent);
        assert_eq!(b.check(9_999), Standing::Spent);
        assert_eq!(b.spent_windows(), 1, "one window, counted once");
        // The next window starts afresh, awake from its start.
        assert_eq!(b.check(10_000), Standing::Within);
        assert_eq!(b.check(18_999), Standing::Within);
        assert_eq!(b.check(19_000), Standing::Spent);
        assert_eq!(b.spent_windows(), 2);
    }

    #[test]
    fn used_time_counts_the_current_stretch_and_restarts_with_each_window() {
        let mut b = RtBudget::new(10_000, 9_000, 0);
        assert_eq!(b.used_ns(3_000), 3_000);
        b.sleep(4_000);
        assert_eq!(b.used_ns(6_000), 4_000, "asleep since 4 µs");
        b.wake(6_000);
        assert_eq!(b.used_ns(7_000), 5_000);
        assert_eq!(b.used_ns(12_000), 2_000, "the new window from its start");
    }

    #[test]
    fn sleeps_are_not_charged() {
        let mut b = RtBudget::new(10_000, 9_000, 0);
        b.sleep(5_000); // awake 0–5 µs
        b.wake(7_000); // asleep 2 µs
        assert_eq!(b.check(8_000), Standing::Within); // 6 µs awake
        b.sleep(9_000); // 7 µs awake
        b.wake(9_500);
        assert_eq!(b.check(9_999), Standing::Within); // 7.499 µs awake
        assert_eq!(b.spent_windows(), 0);
        // Without the sleep, 9 µs awake by 9 µs would have spent it.
        let mut awake = RtBudget::new(10_000, 9_000, 0);
        assert_eq!(awake.check(9_000), Standing::Spent);
    }

    #[test]
    fn an_awake_stretch_across_a_boundary_counts_only_its_part_in_each_window() {
        let mut b = RtBudget::new(10_000, 9_000, 0);
        b.sleep(1_000);
        b.wake(5_000); // awake from 5 µs, through the boundary at 10 µs
        assert_eq!(b.check(9_999), Standing::Within); // 1 + 4.999
        assert_eq!(b.check(18_999), Standing::Within); // the new window: 8.999
        assert_eq!(b.check(19_000), Standing::Spent);
        // Long asleep: windows passed while asleep start empty.
        b.sleep(19_500);
        b.wake(55_000);
        assert_eq!(b.window_end(), 60_000);
        assert_eq!(b.check(59_999), Standing::Within);
    }

    proptest! {
        /// Whatever the pattern of sleeps and wakes, a thread that steps aside whenever it is told
        /// it is spent (sleeping until the window ends) is awake at most `allowed` in any window,
        /// and so at most ⌈period / window⌉ × allowed in any period, below what the kernel allows.
        #[test]
        fn obeying_the_budget_bounds_the_awake_time_of_every_window(
            steps in proptest::collection::vec((1u64..5_000, 0u64..3_000), 1..400)
        ) {
            let (window, allowed) = (10_000u64, 9_000u64);
            let mut b = RtBudget::new(window, allowed, 0);
            let mut now = 0u64;
            // Awake intervals actually run, to check against.
            let mut awake: Vec<(u64, u64)> = Vec::new();
            let mut since = 0u64;
            for (run, rest) in steps {
                // Run in small steps, checking the budget as the engine does each loop turn.
                let mut left = run;
                while left > 0 {
                    let step = left.min(100);
                    now += step;
                    left -= step;
                    if b.check(now) == Standing::Spent {
                        awake.push((since, now));
                        b.sleep(now);
                        now = b.window_end();
                        b.wake(now);
                        since = now;
                    }
                }
                if rest > 0 {
                    awake.push((since, now));
                    b.sleep(now);
                    now += rest;
                    b.wake(now);
                    since = now;
                }
            }
            awake.push((since, now));
            // Checked each 100 ns of running: at most 100 ns over in any window.
            let end = now / window + 1;
            for w in 0..end {
                let (lo, hi) = (w * window, (w + 1) * window);
                let used: u64 = awake
                    .iter()
                    .map(|&(s, e)| e.min(hi).saturating_sub(s.max(lo)))
                    .sum();
                prop_assert!(used <= allowed + 100, "window {w}: {used} ns awake");
            }
        }
    }
}
