//! Waiting until an absolute deadline, by one of several strategies.
//!
//! The engine releases every packet at an absolute `CLOCK_MONOTONIC` deadline, and the lab
//! compares the ways Linux offers to get there. A [`WaitStrategy`] names a way; a [`Waiter`]
//! holds what that way needs (a timerfd, an epoll instance, the slack variable) and waits.
//!
//! Every strategy except [`WaitStrategy::Slack`] returns no earlier than the deadline: the
//! relative ones (`nanosleep`, `select`, `epoll`) recompute the remaining time from the clock
//! and round it up to their resolution, and all of them re-check the clock after waking (a
//! signal may end a sleep early). `slack` is the timing paper's *sleep with slack*: it
//! deliberately returns early to pay back earlier oversleeping, so it is right on average, not
//! per call.

use std::fmt;
use std::io;
use std::os::fd::OwnedFd;
use std::str::FromStr;

use crate::sys;
use crate::time::{format_duration_ns, parse_duration_ns, Instant, ParseDurationError};

/// The spin margin of `hybrid` when none is given: above the typical wake-up latency of a
/// virtual machine (tens of µs), so the spin phase usually starts before the deadline.
pub const DEFAULT_HYBRID_MARGIN_NS: u64 = 100_000;

/// The largest hybrid margin accepted: beyond it the "sleep" part is pointless and the strategy
/// is a busy wait by another name.
pub const MAX_HYBRID_MARGIN_NS: u64 = 1_000_000_000;

/// How to wait until a deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WaitStrategy {
    /// Sleep (absolute) until the wake-up latency this waiter has measured (its 99th
    /// percentile, with room: [`WakeLatency`]) before the deadline, then spin: `hybrid` with a
    /// margin that follows the machine. Name `auto`.
    Auto,
    /// `clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)`: one system call, no drift. Names
    /// `sleep`, `clock-abs`.
    Sleep,
    /// Read the clock until the deadline passes: the most precise, burns a whole CPU. Names
    /// `spin`, `busy`.
    Spin,
    /// Sleep (absolute) until `margin_ns` before the deadline, then spin. Names `hybrid`,
    /// `hybrid:X` (e.g. `hybrid:50us`).
    Hybrid {
        /// How long before the deadline the sleep ends and the spin starts, in ns.
        margin_ns: u64,
    },
    /// Relative `nanosleep` of the remaining time. Name `nanosleep`.
    Nanosleep,
    /// `select()` with no descriptors and a µs timeout, the timing paper's baseline. Name
    /// `select`.
    Select,
    /// A `CLOCK_MONOTONIC` timerfd armed with `TFD_TIMER_ABSTIME`, then `read`. Name `timerfd`.
    Timerfd,
    /// `epoll_wait` with a millisecond timeout: what a typical event loop's timer gets. Name
    /// `epoll`.
    Epoll,
    /// The timing paper's *sleep with slack*: relative sleeps shortened by the oversleep
    /// accumulated so far. Right on average, not per call. Name `slack`.
    Slack,
}

impl WaitStrategy {
    /// Every strategy once, `hybrid` with its default margin, in the order the lab reports them.
    pub const ALL: [WaitStrategy; 9] = [
        WaitStrategy::Select,
        WaitStrategy::Nanosleep,
        WaitStrategy::Sleep,
        WaitStrategy::Timerfd,
        WaitStrategy::Epoll,
        WaitStrategy::Slack,
        WaitStrategy::Spin,
        WaitStrategy::Hybrid {
            margin_ns: DEFAULT_HYBRID_MARGIN_NS,
        },
        WaitStrategy::Auto,
    ];

    /// Whether [`Waiter::wait_until`] with this strategy never returns before the deadline.
    pub fn never_early(self) -> bool {
        self != WaitStrategy::Slack
    }
}

impl fmt::Display for WaitStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaitStrategy::Sleep => f.write_str("sleep"),
            WaitStrategy::Spin => f.write_str("spin"),
            WaitStrategy::Auto => f.write_str("auto"),
            WaitStrategy::Hybrid { margin_ns } => {
                write!(f, "hybrid:{}", format_duration_ns(*margin_ns))
            }
            WaitStrategy::Nanosleep => f.write_str("nanosleep"),
            WaitStrategy::Select => f.write_str("select"),
            WaitStrategy::Timerfd => f.write_str("timerfd"),
            WaitStrategy::Epoll => f.write_str("epoll"),
            WaitStrategy::Slack => f.write_str("slack"),
        }
    }
}

/// A wait strategy name that could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseStrategyError {
    /// Not one of the names.
    #[error(
        "unknown wait strategy `{0}`: use auto, sleep (or clock-abs), spin (or busy), \
         hybrid[:MARGIN], nanosleep, select, timerfd, epoll or slack"
    )]
    Unknown(String),
    /// `hybrid:` with a margin that is not a duration.
    #[error("bad margin in `{input}`: {source}")]
    Margin {
        /// The whole strategy text.
        input: String,
        /// Why the margin did not parse.
        source: ParseDurationError,
    },
    /// `hybrid:` with a margin outside 1 ns ..= 1 s.
    #[error("margin in `{0}` is out of range: give 1ns to 1s, e.g. `hybrid:50us`")]
    MarginRange(String),
}

impl FromStr for WaitStrategy {
    type Err = ParseStrategyError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let trimmed = text.trim();
        let (name, margin) = match trimmed.split_once(':') {
            Some((name, margin)) => (name, Some(margin)),
            None => (trimmed, None),
        };
        let strategy = match (name, margin) {
            ("sleep" | "clock-abs", None) => WaitStrategy::Sleep,
            ("spin" | "busy", None) => WaitStrategy::Spin,
            ("auto", None) => WaitStrategy::Auto,
            ("nanosleep", None) => WaitStrategy::Nanosleep,
            ("select", None) => WaitStrategy::Select,
            ("timerfd", None) => WaitStrategy::Timerfd,
            ("epoll", None) => WaitStrategy::Epoll,
            ("slack", None) => WaitStrategy::Slack,
            ("hybrid", None) => WaitStrategy::Hybrid {
                margin_ns: DEFAULT_HYBRID_MARGIN_NS,
            },
            ("hybrid", Some(margin)) => {
                let margin_ns =
                    parse_duration_ns(margin).map_err(|source| ParseStrategyError::Margin {
                        input: trimmed.to_owned(),
                        source,
                    })?;
                if margin_ns == 0 || margin_ns > MAX_HYBRID_MARGIN_NS {
                    return Err(ParseStrategyError::MarginRange(trimmed.to_owned()));
                }
                WaitStrategy::Hybrid { margin_ns }
            }
            _ => return Err(ParseStrategyError::Unknown(trimmed.to_owned())),
        };
        Ok(strategy)
    }
}

/// A wait failed in the operating system.
#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    /// Creating the timerfd or epoll instance a strategy needs failed.
    #[error("cannot set up wait strategy `{strategy}`: {source}")]
    Setup {
        /// The strategy being set up.
        strategy: WaitStrategy,
        /// The operating system's error.
        source: io::Error,
    },
    /// A wait system call failed (other than being interrupted, which is retried).
    #[error("`{call}` failed while waiting: {source}")]
    Call {
        /// The system call.
        call: &'static str,
        /// The operating system's error.
        source: io::Error,
    },
}

/// The timing paper's slack variable: the oversleep accumulated so far, in ns (positive when
/// earlier sleeps were longer than requested). Pure, so its rule is tested without a clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SleepWithSlack {
    slack_ns: i64,
}

impl SleepWithSlack {
    /// The current slack in ns.
    pub fn slack_ns(self) -> i64 {
        self.slack_ns
    }

    /// How long to sleep for a request of `request_ns`: the request less the slack, or `None`
    /// when the slack already covers it (then the request is paid from the slack, no sleep).
    pub fn plan(&mut self, request_ns: u64) -> Option<u64> {
        let request = i64::try_from(request_ns).unwrap_or(i64::MAX);
        let sleep = request.saturating_sub(self.slack_ns);
        if sleep <= 0 {
            self.slack_ns -= request;
            None
        } else {
            Some(sleep as u64)
        }
    }

    /// Records that a planned sleep of `planned_ns` took `slept_ns`: the difference is the new
    /// slack (the earlier slack was spent by shortening this sleep).
    pub fn record(&mut self, planned_ns: u64, slept_ns: u64) {
        self.slack_ns = (slept_ns as i64).saturating_sub(planned_ns as i64);
    }
}

/// Samples [`WakeLatency`] keeps: the last this many wake-ups decide the margin.
const LATENCY_SAMPLES: usize = 256;

/// Wake-ups between two recomputations of the margin.
const LATENCY_EVERY: usize = 64;

/// The margin `auto` spins before it has measured [`LATENCY_EVERY`] wake-ups.
pub const AUTO_FIRST_MARGIN_NS: u64 = DEFAULT_HYBRID_MARGIN_NS;

/// The smallest margin `auto` spins: below it a clock read and a loop turn are the latency.
pub const AUTO_MIN_MARGIN_NS: u64 = 5_000;

/// The largest margin `auto` spins: a machine that wakes later than this at the 99th percentile
/// cannot keep real time by spinning longer, only by burning the CPU.
pub const AUTO_MAX_MARGIN_NS: u64 = 500_000;

/// How late timed sleeps wake on this thread, and the margin a sleep-then-spin wait needs to
/// start spinning before its deadline.
///
/// `auto` sleeps until `margin` before a deadline and spins the rest, so it must know how late
/// its sleeps end: that depends on the machine (a virtual machine wakes tens of µs late, bare
/// metal a few), its load and the thread's class (a `SCHED_FIFO` thread preempts normal ones at
/// once). It keeps the last [`LATENCY_SAMPLES`] oversleeps and, every [`LATENCY_EVERY`], sets
/// the margin to their 99th percentile × 1.25 + 2 µs, within
/// [[`AUTO_MIN_MARGIN_NS`], [`AUTO_MAX_MARGIN_NS`]]. The few wake-ups later than that start
/// their spin late; the rest spin no longer than needed, which is what a sleep-then-spin wait
/// costs in CPU. Pure and allocation-free: fixed arrays, times passed in.
#[derive(Debug, Clone)]
pub struct WakeLatency {
    samples: [u32; LATENCY_SAMPLES],
    /// Scratch for the percentile, so recording never allocates.
    scratch: [u32; LATENCY_SAMPLES],
    next: usize,
    filled: usize,
    since_update: usize,
    margin_ns: u64,
}

impl Default for WakeLatency {
    fn default() -> Self {
        WakeLatency::new()
    }
}

impl WakeLatency {
    /// No wake-up measured yet: the margin is [`AUTO_FIRST_MARGIN_NS`].
    pub fn new() -> WakeLatency {
        WakeLatency {
            samples: [0; LATENCY_SAMPLES],
            scratch: [0; LATENCY_SAMPLES],
            next: 0,
            filled: 0,
            since_update: 0,
            margin_ns: AUTO_FIRST_MARGIN_NS,
        }
    }

    /// Records that a sleep ended `late_ns` after the time it was set for.
    pub fn record(&mut self, late_ns: u64) {
        self.samples[self.next] = late_ns.min(u32::MAX as u64) as u32;
        self.next = (self.next + 1) % LATENCY_SAMPLES;
        self.filled = (self.filled + 1).min(LATENCY_SAMPLES);
        self.since_update += 1;
        if self.since_update >= LATENCY_EVERY {
            self.since_update = 0;
            let kept = &mut self.scratch[..self.filled];
            kept.copy_from_slice(&self.samples[..self.filled]);
            let rank = (self.filled * 99).div_ceil(100) - 1;
            let (_, p99, _) = kept.select_nth_unstable(rank);
            self.margin_ns =
                (u64::from(*p99) * 5 / 4 + 2_000).clamp(AUTO_MIN_MARGIN_NS, AUTO_MAX_MARGIN_NS);
        }
    }

    /// How long before a deadline a sleep should end, ns.
    pub fn margin_ns(&self) -> u64 {
        self.margin_ns
    }

    /// Wake-ups measured so far (at most [`LATENCY_SAMPLES`] are kept).
    pub fn samples(&self) -> usize {
        self.filled
    }
}

/// Waits until absolute deadlines with one [`WaitStrategy`].
///
/// Holds the per-strategy state, so create one per thread and reuse it: `wait_until` itself
/// allocates nothing.
#[derive(Debug)]
pub struct Waiter {
    strategy: WaitStrategy,
    fd: Option<OwnedFd>,
    slack: SleepWithSlack,
    latency: WakeLatency,
}

fn retry_interrupted(call: &'static str, result: io::Result<()>) -> Result<(), WaitError> {
    match result {
        Err(e) if e.kind() != io::ErrorKind::Interrupted => {
            Err(WaitError::Call { call, source: e })
        }
        _ => Ok(()),
    }
}

impl Waiter {
    /// A waiter for `strategy`, creating the timerfd or epoll instance it needs.
    pub fn new(strategy: WaitStrategy) -> Result<Waiter, WaitError> {
        let fd = match strategy {
            WaitStrategy::Timerfd => Some(sys::timerfd_create()),
            WaitStrategy::Epoll => Some(sys::epoll_create()),
            _ => None,
        }
        .transpose()
        .map_err(|source| WaitError::Setup { strategy, source })?;
        Ok(Waiter {
            strategy,
            fd,
            slack: SleepWithSlack::default(),
            latency: WakeLatency::new(),
        })
    }

    /// The strategy this waiter uses.
    pub fn strategy(&self) -> WaitStrategy {
        self.strategy
    }

    /// The wake-up latency `auto` has measured so far, and the margin it spins.
    pub fn latency(&self) -> &WakeLatency {
        &self.latency
    }

    /// Waits until `deadline`. Returns at once if it has passed. Never returns before it, except
    /// with [`WaitStrategy::Slack`] (see [`WaitStrategy::never_early`]).
    pub fn wait_until(&mut self, deadline: Instant) -> Result<(), WaitError> {
        match self.strategy {
            WaitStrategy::Slack => return self.wait_with_slack(deadline),
            WaitStrategy::Spin => spin_until(deadline),
            WaitStrategy::Hybrid { margin_ns } => {
                let wake = deadline - margin_ns;
                while Instant::now() < wake {
                    retry_interrupted(
                        "clock_nanosleep",
                        sys::clock_nanosleep_abs(wake.as_nanos()),
                    )?;
                }
                spin_until(deadline);
            }
            WaitStrategy::Auto => {
                let wake = deadline - self.latency.margin_ns();
                if Instant::now() < wake {
                    retry_interrupted(
                        "clock_nanosleep",
                        sys::clock_nanosleep_abs(wake.as_nanos()),
                    )?;
                    let woke = Instant::now();
                    // A signal may end the sleep early: that is no latency to learn from.
                    if woke >= wake {
                        self.latency.record(woke.nanos_since(wake));
                    }
                }
                spin_until(deadline);
            }
            _ => loop {
                let now = Instant::now();
                if now >= deadline {
                    break;
                }
                self.sleep_once(now, deadline)?;
            },
        }
        Ok(())
    }

    /// One blocking call towards `deadline` for the sleeping strategies.
    fn sleep_once(&mut self, now: Instant, deadline: Instant) -> Result<(), WaitError> {
        let remaining = deadline.nanos_since(now);
        match (self.strategy, &self.fd) {
            (WaitStrategy::Sleep, _) => retry_interrupted(
                "clock_nanosleep",
                sys::clock_nanosleep_abs(deadline.as_nanos()),
            ),
            (WaitStrategy::Nanosleep, _) => {
                retry_interrupted("nanosleep", sys::nanosleep(remaining))
            }
            // Rounded up: a shorter timeout would return early and cost another call.
            (WaitStrategy::Select, _) => {
                retry_interrupted("select", sys::select_sleep(remaining.div_ceil(1_000)))
            }
            (WaitStrategy::Timerfd, Some(fd)) => retry_interrupted(
                "timerfd read",
                sys::timerfd_wait_abs(fd, deadline.as_nanos()),
            ),
            (WaitStrategy::Epoll, Some(fd)) => {
                let ms = remaining.div_ceil(1_000_000).min(i32::MAX as u64) as i32;
                retry_interrupted("epoll_wait", sys::epoll_sleep(fd, ms))
            }
            // `new` creates the fd for timerfd and epoll; spin, hybrid, auto and slack never get
            // here.
            _ => unreachable!("sleep_once called for {}", self.strategy),
        }
    }

    fn wait_with_slack(&mut self, deadline: Instant) -> Result<(), WaitError> {
        let start = Instant::now();
        let Some(planned) = self.slack.plan(deadline.nanos_since(start)) else {
            return Ok(());
        };
        retry_interrupted("nanosleep", sys::nanosleep(planned))?;
        self.slack
            .record(planned, Instant::now().nanos_since(start));
        Ok(())
    }
}

fn spin_until(deadline: Instant) {
    while Instant::now() < deadline {
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_every_name_and_alias() {
        let cases = [
            ("sleep", WaitStrategy::Sleep),
            ("clock-abs", WaitStrategy::Sleep),
            ("spin", WaitStrategy::Spin),
            ("busy", WaitStrategy::Spin),
            ("nanosleep", WaitStrategy::Nanosleep),
            ("select", WaitStrategy::Select),
            ("timerfd", WaitStrategy::Timerfd),
            ("epoll", WaitStrategy::Epoll),
            ("slack", WaitStrategy::Slack),
            ("auto", WaitStrategy::Auto),
            (
                "hybrid",
                WaitStrategy::Hybrid {
                    margin_ns: DEFAULT_HYBRID_MARGIN_NS,
                },
            ),
            ("hybrid:50us", WaitStrategy::Hybrid { margin_ns: 50_000 }),
            (
                " hybrid:1s ",
                WaitStrategy::Hybrid {
                    margin_ns: 1_000_000_000,
                },
            ),
        ];
        for (text, want) in cases {
            assert_eq!(text.parse::<WaitStrategy>(), Ok(want), "{text}");
        }
    }

    #[test]
    fn rejects_bad_names_with_the_valid_ones() {
        let err = "sleeep".parse::<WaitStrategy>().unwrap_err();
        assert_eq!(err, ParseStrategyError::Unknown("sleeep".into()));
        assert!(err.to_string().contains("hybrid[:MARGIN]"));
        assert_eq!(
            "spin:5us".parse::<WaitStrategy>(),
            Err(ParseStrategyError::Unknown("spin:5us".into()))
        );
        assert_eq!(
            "hybrid:50".parse::<WaitStrategy>(),
            Err(ParseStrategyError::Margin {
                input: "hybrid:50".into(),
                source: ParseDurationError::Unit("50".into())
            })
        );
        assert_eq!(
            "hybrid:0us".parse::<WaitStrategy>(),
            Err(ParseStrategyError::MarginRange("hybrid:0us".into()))
        );
        assert_eq!(
            "hybrid:2s".parse::<WaitStrategy>(),
            Err(ParseStrategyError::MarginRange("hybrid:2s".into()))
        );
    }

    #[test]
    fn display_round_trips_for_all() {
        for strategy in WaitStrategy::ALL {
            assert_eq!(strategy.to_string().parse::<WaitStrategy>(), Ok(strategy));
        }
    }

    proptest! {
        #[test]
        fn hybrid_margins_round_trip(margin_ns in 1u64..=MAX_HYBRID_MARGIN_NS) {
            let strategy = WaitStrategy::Hybrid { margin_ns };
            prop_assert_eq!(strategy.to_string().parse::<WaitStrategy>(), Ok(strategy));
        }

        #[test]
        fn parse_errors_name_the_input(text in "[a-z:0-9]{0,12}") {
            if let Err(err) = text.parse::<WaitStrategy>() {
                prop_assert!(err.to_string().contains(text.trim()));
            }
        }

        /// Whatever the real sleeps do, the slack keeps the sum of actual sleeps equal to the
        /// sum of requests plus the last call's oversleep: errors do not accumulate.
        #[test]
        fn slack_does_not_accumulate_error(
            steps in proptest::collection::vec((1u64..10_000_000, 0u64..2_000_000), 1..200)
        ) {
            let mut slack = SleepWithSlack::default();
            let (mut requested, mut actual) = (0i64, 0i64);
            for (request, oversleep) in steps {
                requested += request as i64;
                if let Some(planned) = slack.plan(request) {
                    prop_assert!(planned <= request + slack.slack_ns().unsigned_abs());
                    slack.record(planned, planned + oversleep);
                    actual += (planned + oversleep) as i64;
                }
                prop_assert_eq!(actual - requested, slack.slack_ns());
            }
        }
    }

    #[test]
    fn the_auto_margin_follows_the_99th_percentile_of_recent_wake_ups() {
        let mut l = WakeLatency::new();
        assert_eq!(l.margin_ns(), AUTO_FIRST_MARGIN_NS);
        // 63 wake-ups: not yet enough to change the margin.
        for _ in 0..63 {
            l.record(20_000);
        }
        assert_eq!(l.margin_ns(), AUTO_FIRST_MARGIN_NS);
        l.record(20_000);
        assert_eq!(l.margin_ns(), 20_000 * 5 / 4 + 2_000);
        // One outlier in 256 is above the 99th percentile; three are not.
        for i in 0..192 {
            l.record(if i == 0 { 400_000 } else { 20_000 });
        }
        assert_eq!(l.samples(), 256);
        assert_eq!(l.margin_ns(), 27_000, "one late wake-up in 256 is ignored");
        for _ in 0..64 {
            l.record(300_000);
        }
        // Now 65 of 256 are late: the margin covers them.
        assert_eq!(l.margin_ns(), 300_000 * 5 / 4 + 2_000);
        for _ in 0..192 {
            l.record(900_000);
        }
        assert_eq!(l.margin_ns(), AUTO_MAX_MARGIN_NS, "capped");
        // A quiet machine brings it down again, to the floor.
        for _ in 0..256 {
            l.record(100);
        }
        assert_eq!(l.margin_ns(), AUTO_MIN_MARGIN_NS);
    }

    proptest! {
        /// The margin is always within its bounds and, once set from samples, covers at least
        /// 99 % of the samples it was computed from.
        #[test]
        fn the_auto_margin_covers_99_percent_within_its_bounds(
            lates in proptest::collection::vec(0u64..2_000_000, 64..600)
        ) {
            let mut l = WakeLatency::new();
            for (i, late) in lates.iter().enumerate() {
                l.record(*late);
                let m = l.margin_ns();
                prop_assert!((AUTO_MIN_MARGIN_NS..=AUTO_MAX_MARGIN_NS).contains(&m)
                    || (i < 63 && m == AUTO_FIRST_MARGIN_NS));
                if (i + 1) % LATENCY_EVERY == 0 && m < AUTO_MAX_MARGIN_NS {
                    let kept = &lates[(i + 1).saturating_sub(LATENCY_SAMPLES)..=i];
                    let covered = kept.iter().filter(|&&s| s <= m).count();
                    prop_assert!(covered * 100 >= kept.len() * 99, "{covered} of {}", kept.len());
                }
            }
        }
    }

    #[test]
    fn slack_pays_back_oversleep_without_sleeping() {
        let mut slack = SleepWithSlack::default();
        assert_eq!(slack.plan(1_000), Some(1_000));
        slack.record(1_000, 5_000); // overslept by 4 µs
        assert_eq!(slack.slack_ns(), 4_000);
        assert_eq!(slack.plan(3_000), None); // paid from the slack
        assert_eq!(slack.slack_ns(), 1_000);
        assert_eq!(slack.plan(3_000), Some(2_000));
        slack.record(2_000, 1_500); // woke early: the next sleep is longer
        assert_eq!(slack.plan(1_000), Some(1_500));
    }

    /// The contract the engine relies on: an absolute-deadline wait never returns early. Short
    /// deadlines (10 µs – 1 ms) so the test takes well under a second per strategy; lateness is
    /// not asserted, because a loaded machine may be arbitrarily late.
    #[test]
    fn no_strategy_but_slack_returns_before_its_deadline() {
        for strategy in WaitStrategy::ALL.into_iter().filter(|s| s.never_early()) {
            let mut waiter = Waiter::new(strategy).unwrap();
            let mut offset = 10_000u64;
            for _ in 0..20 {
                let deadline = Instant::now() + offset;
                waiter.wait_until(deadline).unwrap();
                let woke = Instant::now();
                assert!(
                    woke >= deadline,
                    "{strategy} woke {} ns early",
                    deadline.nanos_since(woke)
                );
                offset = (offset * 3 / 2).min(1_000_000);
            }
            // A deadline in the past returns at once, without error.
            waiter.wait_until(Instant::now() - 1_000_000).unwrap();
        }
    }
}
