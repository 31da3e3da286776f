//! Time in integer nanoseconds on `CLOCK_MONOTONIC`, and the command line's reading of durations.
//!
//! Durations are plain `u64` nanoseconds: the engine and the lab add, subtract and compare
//! them on hot paths, and integers never lose precision the way `f64` seconds do after a few
//! days of uptime.

use std::ops::{Add, RangeInclusive, Sub};

use rtemu_model::units::{self, DurationError};

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

/// A duration that could not be parsed: [`units::DurationError`] with the text, which on the
/// command line is the user's own.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseDurationError {
    /// Nothing before the unit, or not a decimal number.
    #[error("`{0}` is not a duration: give a number and a unit, e.g. `50us`, `1.5ms`, `1s`")]
    NotANumber(String),
    /// A number with no unit or an unknown one.
    #[error("`{0}` has no known unit: use ns, us (or µs), ms, s or m, e.g. `50us`")]
    Unit(String),
    /// Not a whole number of nanoseconds.
    #[error("`{0}` is finer than 1 ns")]
    TooFine(String),
    /// Does not fit in 64-bit nanoseconds.
    #[error("`{0}` is too long: at most about 584 years fit in 64-bit nanoseconds")]
    Overflow(String),
    /// A duration outside the range its use allows ([`parse_duration_in`]).
    #[error(
        "{} is out of range: give {} to {} (a number with ns, us, ms, s or m)",
        format_duration_ns(*.given),
        format_duration_ns(*.min),
        format_duration_ns(*.max)
    )]
    OutOfRange {
        /// The duration given, ns.
        given: u64,
        /// The shortest allowed, ns.
        min: u64,
        /// The longest allowed, ns.
        max: u64,
    },
}

/// Parses `50us`, `1.5ms`, `1s`, `1500ns` into nanoseconds with rtemu's one duration parser
/// ([`units::parse_duration_ns`]). A unit is required, because a bare number is ambiguous
/// between tools (tc means µs, sleep(1) means seconds).
pub fn parse_duration_ns(text: &str) -> Result<u64, ParseDurationError> {
    units::parse_duration_ns(text, None).map_err(|e| {
        let text = text.trim().to_owned();
        match e {
            DurationError::NotANumber => ParseDurationError::NotANumber(text),
            DurationError::NoUnit | DurationError::UnknownUnit => ParseDurationError::Unit(text),
            DurationError::TooFine => ParseDurationError::TooFine(text),
            DurationError::TooLong => ParseDurationError::Overflow(text),
        }
    })
}

/// Parses as [`parse_duration_ns`] and takes only a duration within `range` (ns), naming the
/// range when it is not: a period of 0 that would loop for ever, or a limit of 0 that measures
/// nothing, is refused up front.
pub fn parse_duration_in(
    text: &str,
    range: RangeInclusive<u64>,
) -> Result<u64, ParseDurationError> {
    let ns = parse_duration_ns(text)?;
    if range.contains(&ns) {
        Ok(ns)
    } else {
        Err(ParseDurationError::OutOfRange {
            given: ns,
            min: *range.start(),
            max: *range.end(),
        })
    }
}

/// The one duration formatter, here for the command line's users of [`parse_duration_ns`].
pub use units::format_duration_ns;

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
        assert_eq!(parse_duration_ns("1.5ms"), Ok(1_500_000));
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
            parse_duration_ns("1.5ns"),
            Err(ParseDurationError::TooFine("1.5ns".into()))
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
    fn ranged_durations_are_refused_with_the_range() {
        assert_eq!(parse_duration_in("1us", 1_000..=1_000_000), Ok(1_000));
        assert_eq!(parse_duration_in("1ms", 1_000..=1_000_000), Ok(1_000_000));
        for bad in ["0s", "999ns", "2ms"] {
            let e = parse_duration_in(bad, 1_000..=1_000_000)
                .unwrap_err()
                .to_string();
            assert!(e.contains("out of range: give 1us to 1ms"), "{bad}: {e}");
        }
        assert_eq!(
            parse_duration_in("5", 1_000..=1_000_000),
            Err(ParseDurationError::Unit("5".into()))
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

        /// The clock's entry accepts exactly what the one parser accepts with a unit.
        #[test]
        fn agrees_with_the_one_parser(text in "[ 0-9.eE+-]{0,6}(ns|us|µs|ms|s|m|sec|min|h|)") {
            prop_assert_eq!(parse_duration_ns(&text).ok(), units::parse_duration_ns(&text, None).ok());
        }

        #[test]
        fn whatever_parses_formats_back_to_itself(text in "\\PC{0,12}") {
            if let Ok(ns) = parse_duration_ns(&text) {
                prop_assert_eq!(parse_duration_ns(&format_duration_ns(ns).to_string()), Ok(ns));
            }
        }
    }
}
