//! Time in integer nanoseconds on `CLOCK_MONOTONIC`, and the duration syntax of the command line.
//!
//! Durations are plain `u64` nanoseconds: the engine and the lab add, subtract and compare
//! them on hot paths, and integers never lose precision the way `f64` seconds do after a few
//! days of uptime.

use std::fmt;
use std::ops::{Add, Sub};

/// One nanosecond expressed in each unit the duration syntax accepts.
const UNITS: [(&str, u64); 6] = [
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
];

/// A point in time: nanoseconds since an unspecified start, read from `CLOCK_MONOTONIC`.
///
/// Arithmetic saturates: a deadline never wraps into the past, and a difference of two instants
/// in the wrong order is zero rather than a panic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(u64);

impl Instant {
    /// Reads `CLOCK_MONOTONIC` (a vDSO call, no system call, on common clocksources).
    pub fn now() -> Instant {
        Instant(crate::sys::clock_gettime_ns(libc::CLOCK_MONOTONIC))
    }

    /// The instant `ns` nanoseconds after the clock's start.
    pub const fn from_nanos(ns: u64) -> Instant {
        Instant(ns)
    }

    /// Nanoseconds since the clock's start.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Nanoseconds from `earlier` to `self`, or 0 if `earlier` is later.
    pub const fn nanos_since(self, earlier: Instant) -> u64 {
        self.0.saturating_sub(earlier.0)
    }

    /// Signed nanoseconds from `earlier` to `self` (negative when `self` comes first).
    pub const fn signed_nanos_since(self, earlier: Instant) -> i64 {
        self.0.wrapping_sub(earlier.0) as i64
    }
}

impl Add<u64> for Instant {
    type Output = Instant;
    fn add(self, ns: u64) -> Instant {
        Instant(self.0.saturating_add(ns))
    }
}

impl Sub<u64> for Instant {
    type Output = Instant;
    fn sub(self, ns: u64) -> Instant {
        Instant(self.0.saturating_sub(ns))
    }
}

/// CPU time the calling thread has used, in ns (`CLOCK_THREAD_CPUTIME_ID`).
///
/// The lab reads it around a measurement to report how much CPU a wait strategy burns.
pub fn thread_cpu_time_ns() -> u64 {
    crate::sys::clock_gettime_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Reads `CLOCK_REALTIME` in ns since the Unix epoch (a vDSO call, like [`Instant::now`]).
///
/// Only for turning the kernel's receive stamps, which it takes on this clock, into
/// [`Instant`]s: it steps when the system time is set, so never measure with it.
pub fn realtime_ns() -> u64 {
    crate::sys::clock_gettime_ns(libc::CLOCK_REALTIME)
}

/// A duration that could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseDurationError {
    /// Nothing before the unit, or not a decimal number.
    #[error("`{0}` is not a duration: give a whole number and a unit, e.g. `50us`, `2ms`, `1s`")]
    NotANumber(String),
    /// A number with no unit or an unknown one.
    #[error("`{0}` has no known unit: use ns, us (or µs), ms, s or m, e.g. `50us`")]
    Unit(String),
    /// Does not fit in 64-bit nanoseconds.
    #[error("`{0}` is too long: at most about 584 years fit in 64-bit nanoseconds")]
    Overflow(String),
}

/// Parses `50us`, `2ms`, `1s`, `1500ns` into nanoseconds. A unit is required, because a bare
/// number is ambiguous between tools (tc means µs, sleep(1) means seconds).
pub fn parse_duration_ns(text: &str) -> Result<u64, ParseDurationError> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| ParseDurationError::Unit(text.to_owned()))?;
    let (number, unit) = text.split_at(split);
    if number.is_empty() {
        return Err(ParseDurationError::NotANumber(text.to_owned()));
    }
    let scale = UNITS
        .iter()
        .find(|(name, _)| *name == unit)
        .map(|(_, scale)| *scale)
        .ok_or_else(|| ParseDurationError::Unit(text.to_owned()))?;
    let value: u64 = number
        .parse()
        .map_err(|_| ParseDurationError::Overflow(text.to_owned()))?;
    value
        .checked_mul(scale)
        .ok_or_else(|| ParseDurationError::Overflow(text.to_owned()))
}

/// Writes a nanosecond duration in the largest unit that keeps it whole (`50us`, `2ms`), the
/// inverse of [`parse_duration_ns`].
pub fn format_duration_ns(ns: u64) -> impl fmt::Display {
    struct Show(u64);
    impl fmt::Display for Show {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            let (name, scale) = [("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1_000)]
                .into_iter()
                .find(|(_, scale)| self.0 != 0 && self.0 % scale == 0)
                .unwrap_or(("ns", 1));
            write!(f, "{}{}", self.0 / scale, name)
        }
    }
    Show(ns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_each_unit() {
        assert_eq!(parse_duration_ns("1500ns"), Ok(1500));
        assert_eq!(parse_duration_ns("50us"), Ok(50_000));
        assert_eq!(parse_duration_ns("50µs"), Ok(50_000));
        assert_eq!(parse_duration_ns("2ms"), Ok(2_000_000));
        assert_eq!(parse_duration_ns(" 3s "), Ok(3_000_000_000));
        assert_eq!(parse_duration_ns("1m"), Ok(60_000_000_000));
    }

    #[test]
    fn rejects_bad_durations_with_the_reason() {
        assert_eq!(
            parse_duration_ns("50"),
            Err(ParseDurationError::Unit("50".into()))
        );
        assert_eq!(
            parse_duration_ns("50 ms"),
            Err(ParseDurationError::Unit("50 ms".into()))
        );
        assert_eq!(
            parse_duration_ns("ms"),
            Err(ParseDurationError::NotANumber("ms".into()))
        );
        assert_eq!(
            parse_duration_ns("-5ms"),
            Err(ParseDurationError::NotANumber("-5ms".into()))
        );
        assert_eq!(
            parse_duration_ns("99999999999999999999s"),
            Err(ParseDurationError::Overflow("99999999999999999999s".into()))
        );
        assert_eq!(
            parse_duration_ns("18446744073709551615s"),
            Err(ParseDurationError::Overflow("18446744073709551615s".into()))
        );
    }

    #[test]
    fn instant_arithmetic_saturates() {
        let t = Instant::from_nanos(100);
        assert_eq!((t + 50).as_nanos(), 150);
        assert_eq!((t - 500).as_nanos(), 0);
        assert_eq!((t + u64::MAX).as_nanos(), u64::MAX);
        assert_eq!(t.nanos_since(Instant::from_nanos(40)), 60);
        assert_eq!(Instant::from_nanos(40).nanos_since(t), 0);
        assert_eq!(Instant::from_nanos(40).signed_nanos_since(t), -60);
    }

    #[test]
    fn monotonic_clock_does_not_go_backwards() {
        let mut last = Instant::now();
        for _ in 0..10_000 {
            let now = Instant::now();
            assert!(now >= last);
            last = now;
        }
    }

    proptest! {
        #[test]
        fn format_then_parse_round_trips(ns in 0u64..u64::MAX / 2) {
            let text = format_duration_ns(ns).to_string();
            prop_assert_eq!(parse_duration_ns(&text), Ok(ns));
        }

        #[test]
        fn whatever_parses_formats_back_to_itself(text in "\\PC{0,12}") {
            if let Ok(ns) = parse_duration_ns(&text) {
                prop_assert_eq!(parse_duration_ns(&format_duration_ns(ns).to_string()), Ok(ns));
            }
        }
    }
}
