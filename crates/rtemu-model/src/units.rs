//! Quantities with units, read and written as tc writes them: times (`20ms`), rates
//! (`10mbit`), sizes (`64kb`) and percentages (`1%`).
//!
//! The parsers follow iproute2's conventions so that pasted netem lines mean the same thing:
//! a time without a unit is in microseconds, `bps` is *bytes* per second, `kb` is 1024 bytes,
//! and a percentage may be written with or without `%`. The structured (TOML/JSON) form
//! accepts the same strings, or plain numbers in the base unit (ns, bit/s, bytes, fraction).
//!
//! Every duration rtemu reads (netem times, topology schedules, trace files, lab flags, wait
//! strategies) goes through [`parse_duration_ns`], so `1.5ms` means the same everywhere; each
//! reader chooses only what a bare number means (tc's microseconds, a trace column's unit, or
//! an error). Every rate goes through [`Rate::parse`].

use std::fmt;

use serde::{de, Deserialize, Deserializer, Serialize, Serializer};

/// Why a quantity could not be read. The caller adds which word it was.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    /// Not a number followed by a known unit.
    #[error("expected {what}, e.g. {example}")]
    Malformed {
        /// What kind of quantity was expected.
        what: &'static str,
        /// A valid example.
        example: &'static str,
    },
    /// A time finer than the nanoseconds rtemu counts in.
    #[error("{0}")]
    Duration(DurationError),
    /// A number outside the valid range.
    #[error("must be between {min} and {max}")]
    OutOfRange {
        /// The smallest valid value, written with its unit.
        min: String,
        /// The largest valid value, written with its unit.
        max: String,
    },
}

/// `number × scale` as a whole number, or `None` when negative or beyond `max`. Exact in
/// integer arithmetic when the number is written without fraction or exponent (so large
/// values survive a round trip through `Display`), rounded otherwise.
fn amount(number: &str, value: f64, scale: f64, max: u64) -> Option<u64> {
    if !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()) && scale.fract() == 0.0 {
        let exact = number.parse::<u128>().ok()?.checked_mul(scale as u128)?;
        return u64::try_from(exact).ok().filter(|&v| v <= max);
    }
    let x = (value * scale).round();
    (x >= 0.0 && x <= max as f64).then_some(x as u64)
}

fn split_number(s: &str) -> Option<(f64, &str, &str)> {
    let end = s
        .find(|c: char| {
            !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E')
        })
        .unwrap_or(s.len());
    // `e` belongs to the number only when digits follow it (`1e-5`), not in a unit.
    let mut end = end;
    while end > 0 && s[..end].ends_with(['e', 'E', '+', '-']) {
        end -= 1;
    }
    let value: f64 = s[..end].parse().ok()?;
    value.is_finite().then_some((value, &s[..end], &s[end..]))
}

/// The duration units: name, multiplier, and power of ten (one unit is `multiplier × 10^power`
/// ns). tc's spellings (`msec`, `secs`…) are accepted too, and `µs` as `us`.
const DURATION_UNITS: [(&str, u128, i64); 15] = [
    ("ns", 1, 0),
    ("nsec", 1, 0),
    ("nsecs", 1, 0),
    ("us", 1, 3),
    ("µs", 1, 3),
    ("usec", 1, 3),
    ("usecs", 1, 3),
    ("ms", 1, 6),
    ("msec", 1, 6),
    ("msecs", 1, 6),
    ("s", 1, 9),
    ("sec", 1, 9),
    ("secs", 1, 9),
    ("m", 6, 10),
    // The unit of a bare number when its reader gives one, in powers of ten only.
    ("", 1, 0),
];

/// Why a duration could not be read. The messages never quote the text: it may come from a
/// file the user may not read (a trace opened under sudo); callers add where it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// No number, or not a decimal one.
    #[error(
        "expected a duration: a number and a unit, e.g. 1.5ms (units: ns, us or µs, ms, s, m)"
    )]
    NotANumber,
    /// A number without a unit where its reader has none to assume.
    #[error("a duration needs a unit (ns, us or µs, ms, s or m; e.g. 1.5ms)")]
    NoUnit,
    /// A unit that is none of the known ones.
    #[error("a duration has an unknown unit (units: ns, us or µs, ms, s, m)")]
    UnknownUnit,
    /// Not a whole number of nanoseconds.
    #[error("a duration is finer than 1 ns")]
    TooFine,
    /// More than `u64::MAX` nanoseconds.
    #[error("a duration is too long (at most 18446744073709551615 ns, about 584 years)")]
    TooLong,
}

/// Reads a non-negative duration to nanoseconds, exactly: a decimal number (`2`, `1.5`, `.25`,
/// `1e3`) and a unit (`ns`, `us` or `µs`, `ms`, `s`, `m` for minutes, and tc's `usec`, `msec`,
/// `sec`… spellings); spaces around it are ignored. A bare number is in `bare_unit_ns`, or
/// [`DurationError::NoUnit`] without one. Refuses what is not a whole number of ns or does not
/// fit in 64 bits rather than rounding it.
pub fn parse_duration_ns(text: &str, bare_unit_ns: Option<u64>) -> Result<u64, DurationError> {
    use DurationError::*;
    let text = text.trim();
    let mantissa_end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (mantissa, rest) = text.split_at(mantissa_end);
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int.is_empty() && frac.is_empty() || frac.contains('.') {
        return Err(NotANumber);
    }
    // An exponent only when digits follow the `e` (no unit starts with `e`).
    let (exponent, unit) = match rest.strip_prefix(['e', 'E']) {
        Some(e) => {
            let digits_at = usize::from(e.starts_with(['+', '-']));
            let end = e[digits_at..]
                .find(|c: char| !c.is_ascii_digit())
                .map_or(e.len(), |i| i + digits_at);
            if end == digits_at {
                return Err(NotANumber);
            }
            // Beyond ±10000 the value is 0, too long or too fine whatever the digits.
            let magnitude = e[digits_at..end]
                .bytes()
                .fold(0i64, |m, d| (m * 10 + i64::from(d - b'0')).min(10_000));
            (
                if e.starts_with('-') {
                    -magnitude
                } else {
                    magnitude
                },
                &e[end..],
            )
        }
        None => (0, rest),
    };
    let (multiplier, power) = match DURATION_UNITS.iter().find(|(name, ..)| *name == unit) {
        Some(&("", ..)) => match bare_unit_ns {
            Some(ns) => (u128::from(ns), 0),
            None => return Err(NoUnit),
        },
        Some(&(_, multiplier, power)) => (multiplier, power),
        None => return Err(UnknownUnit),
    };
    // value = digits × 10^(exponent − fraction length) × multiplier × 10^power, in integers.
    let digits = format!("{int}{frac}");
    let digits = digits.trim_start_matches('0');
    let significant = digits.trim_end_matches('0');
    if significant.is_empty() {
        return Ok(0);
    }
    let mut shift =
        exponent - frac.len() as i64 + power + (digits.len() - significant.len()) as i64;
    let Ok(mut ns) = significant.parse::<u128>() else {
        // Over 38 significant digits: beyond 20 of them above 1 ns the value is too long,
        // otherwise the last ones fall below 1 ns.
        return Err(if significant.len() as i64 + shift > 20 {
            TooLong
        } else {
            TooFine
        });
    };
    ns = ns.checked_mul(multiplier).ok_or(TooLong)?;
    while shift < 0 {
        if ns % 10 != 0 {
            return Err(TooFine);
        }
        ns /= 10;
        shift += 1;
    }
    while shift > 0 {
        ns = ns
            .checked_mul(10)
            .filter(|&n| n <= u128::from(u64::MAX))
            .ok_or(TooLong)?;
        shift -= 1;
    }
    u64::try_from(ns).map_err(|_| TooLong)
}

/// A duration or an absolute offset in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Time(pub u64);

impl Time {
    /// Reads a tc time with [`parse_duration_ns`]: `20ms`, `1.5s`, `250us`, `100ns`; no unit
    /// means microseconds, as in tc.
    pub fn parse(s: &str) -> Result<Time, UnitError> {
        match parse_duration_ns(s, Some(1_000)) {
            Ok(ns) if ns <= u64::MAX / 2 => Ok(Time(ns)),
            Ok(_) | Err(DurationError::TooLong) => Err(UnitError::OutOfRange {
                min: "0s".into(),
                max: "292 years".into(),
            }),
            Err(DurationError::TooFine) => Err(UnitError::Duration(DurationError::TooFine)),
            Err(_) => Err(UnitError::Malformed {
                what: "a time",
                example: "20ms, 1.5s, 250us (units: ns, us, ms, s, m)",
            }),
        }
    }
}

/// Writes `ns` in the largest unit that keeps it whole (`2s`, `1500us`, `7ns`; 0 is `0us`), so
/// that [`parse_duration_ns`] reads back exactly `ns`.
pub fn format_duration_ns(ns: u64) -> impl fmt::Display {
    Time(ns)
}

impl fmt::Display for Time {
    /// The largest unit that writes the value exactly.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0;
        if ns == 0 {
            f.write_str("0us")
        } else if ns % 1_000_000_000 == 0 {
            write!(f, "{}s", ns / 1_000_000_000)
        } else if ns % 1_000_000 == 0 {
            write!(f, "{}ms", ns / 1_000_000)
        } else if ns % 1_000 == 0 {
            write!(f, "{}us", ns / 1_000)
        } else {
            write!(f, "{ns}ns")
        }
    }
}

/// A link rate in bits per second.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rate(pub u64);

impl Rate {
    /// Reads a tc rate: `10mbit`, `1.5gbit`, `100kbit`, `500bit`, `1mibit`, `125kbps` (bytes
    /// per second, as in tc), a prefix alone for bits (`64k`, `10M`), or a bare number of bits
    /// per second. Prefixes are case-insensitive and decimal unless written `ki`, `mi`…
    pub fn parse(s: &str) -> Result<Rate, UnitError> {
        const BAD: UnitError = UnitError::Malformed {
            what: "a rate",
            example: "10mbit, 64k, 1.5gbit, 125kbps (units: bit, kbit, mbit, gbit, tbit, or k, m, g, t alone; bps for bytes)",
        };
        let (value, number, unit) = split_number(s.trim()).ok_or(BAD)?;
        let lower = unit.to_ascii_lowercase();
        let (prefix, per_byte) = if let Some(p) = lower.strip_suffix("bit") {
            (p, false)
        } else if let Some(p) = lower.strip_suffix("bps") {
            (p, true)
        } else {
            (lower.as_str(), false)
        };
        let multiplier = match prefix {
            "" => 1.0,
            "k" => 1e3,
            "m" => 1e6,
            "g" => 1e9,
            "t" => 1e12,
            "ki" => 1024.0,
            "mi" => 1024.0 * 1024.0,
            "gi" => 1024.0 * 1024.0 * 1024.0,
            "ti" => 1024.0f64.powi(4),
            _ => return Err(BAD),
        };
        let scale = multiplier * if per_byte { 8.0 } else { 1.0 };
        amount(number, value, scale, 1_000_000_000_000_000)
            .filter(|&bits| bits >= 1)
            .map(Rate)
            .ok_or_else(|| UnitError::OutOfRange {
                min: "1bit".into(),
                max: "1000tbit".into(),
            })
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        for (unit, scale) in [
            ("tbit", 1_000_000_000_000u64),
            ("gbit", 1_000_000_000),
            ("mbit", 1_000_000),
            ("kbit", 1_000),
        ] {
            if b % scale == 0 {
                return write!(f, "{}{unit}", b / scale);
            }
        }
        write!(f, "{b}bit")
    }
}

/// A size in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Size(pub u64);

impl Size {
    /// Reads a tc size: `1500`, `1500b`, `64kb` or `64k` (×1024), `1mb`/`1m`, `1gb`/`1g`.
    pub fn parse(s: &str) -> Result<Size, UnitError> {
        const BAD: UnitError = UnitError::Malformed {
            what: "a size",
            example: "1500b, 64kb, 1mb",
        };
        let (value, number, unit) = split_number(s).ok_or(BAD)?;
        let multiplier = match unit.to_ascii_lowercase().as_str() {
            "" | "b" => 1.0,
            "k" | "kb" => 1024.0,
            "m" | "mb" => 1024.0 * 1024.0,
            "g" | "gb" => 1024.0 * 1024.0 * 1024.0,
            _ => return Err(BAD),
        };
        amount(number, value, multiplier, 1 << 50)
            .map(Size)
            .ok_or_else(|| UnitError::OutOfRange {
                min: "0b".into(),
                max: "1024tb".into(),
            })
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        for (unit, scale) in [("gb", 1u64 << 30), ("mb", 1 << 20), ("kb", 1 << 10)] {
            if b != 0 && b % scale == 0 {
                return write!(f, "{}{unit}", b / scale);
            }
        }
        write!(f, "{b}b")
    }
}

/// A fraction in `[0, 1]`, written by tc as a percentage.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default)]
pub struct Percent(pub f64);

impl Percent {
    /// Reads `1%`, `0.5%` or a bare `1` (which tc also reads as 1 %).
    ///
    /// The fraction is the decimal written, divided by 100 exactly (`1.1%` reads as the
    /// nearest double to 0.011, not as `1.1 / 100`), so that [`Percent`]'s `Display` reads
    /// back to the very same fraction.
    pub fn parse(s: &str) -> Result<Percent, UnitError> {
        const BAD: UnitError = UnitError::Malformed {
            what: "a percentage",
            example: "1%, 0.5%, 25%",
        };
        let body = s.strip_suffix('%').unwrap_or(s);
        let value: f64 = body
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite())
            .ok_or(BAD)?;
        if !(0.0..=100.0).contains(&value) {
            return Err(UnitError::OutOfRange {
                min: "0%".into(),
                max: "100%".into(),
            });
        }
        if value == 0.0 {
            return Ok(Percent(0.0));
        }
        // Shift the decimal exponent by two and let the float parser round once. A value in
        // (0, 100] has an exponent that fits an i64 whenever it is written with one.
        let (mantissa, exponent) = match body.find(['e', 'E']) {
            Some(i) => (&body[..i], body[i + 1..].parse::<i64>().map_err(|_| BAD)?),
            None => (body, 0),
        };
        format!("{mantissa}e{}", exponent - 2)
            .parse()
            .map(Percent)
            .map_err(|_| BAD)
    }
}

impl fmt::Display for Percent {
    /// As a percentage that [`Percent::parse`] reads back to the same fraction: the shortest
    /// decimal of the fraction, its point moved two places.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let decimal = format!("{}", self.0);
        let (sign, digits) = match decimal.strip_prefix('-') {
            Some(d) => ("-", d),
            None => ("", decimal.as_str()),
        };
        let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
        let frac = format!("{frac:0<2}");
        let int = format!("{int}{}", &frac[..2]);
        let int = int.trim_start_matches('0');
        let rest = frac[2..].trim_end_matches('0');
        let int = if int.is_empty() { "0" } else { int };
        if rest.is_empty() {
            write!(f, "{sign}{int}%")
        } else {
            write!(f, "{sign}{int}.{rest}%")
        }
    }
}

/// Implements serde for a quantity: serialised as its tc string, deserialised from that string
/// or from a plain number in the base unit. The `@de` form implements only deserialisation.
macro_rules! serde_via_string {
    ($ty:ident, $what:literal, |$n:ident| $from_number:expr) => {
        serde_via_string!(@de $ty, $what, |$n| $from_number);
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
    };
    (@de $ty:ident, $what:literal, |$n:ident| $from_number:expr) => {

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl de::Visitor<'_> for V {
                    type Value = $ty;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str($what)
                    }
                    fn visit_str<E: de::Error>(self, v: &str) -> Result<$ty, E> {
                        $ty::parse(v).map_err(|e| E::custom(format!("{v:?}: {e}")))
                    }
                    fn visit_u64<E: de::Error>(self, $n: u64) -> Result<$ty, E> {
                        self.visit_f64($n as f64)
                    }
                    fn visit_i64<E: de::Error>(self, $n: i64) -> Result<$ty, E> {
                        self.visit_f64($n as f64)
                    }
                    fn visit_f64<E: de::Error>(self, $n: f64) -> Result<$ty, E> {
                        $from_number.map_err(|e: UnitError| E::custom(format!("{}: {e}", $n)))
                    }
                }
                d.deserialize_any(V)
            }
        }
    };
}

serde_via_string!(
    Time,
    "a time such as \"20ms\" or a number of nanoseconds",
    |n| { Time::parse(&format!("{n}ns")) }
);
serde_via_string!(
    Rate,
    "a rate such as \"10mbit\" or a number of bits per second",
    |n| { Rate::parse(&format!("{n}bit")) }
);
serde_via_string!(Size, "a size such as \"64kb\" or a number of bytes", |n| {
    Size::parse(&format!("{n}b"))
});
// A fraction is written as a number: the percentage string could lose the last bit.
impl Serialize for Percent {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.0)
    }
}

serde_via_string!(@de Percent, "a percentage such as \"1%\" or a fraction between 0 and 1", |n| {
    if (0.0..=1.0).contains(&n) {
        Ok(Percent(n))
    } else {
        Err(UnitError::OutOfRange { min: "0".into(), max: "1 (a fraction; write \"N%\" for a percentage)".into() })
    }
});

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn times_follow_tc() {
        assert_eq!(Time::parse("20ms"), Ok(Time(20_000_000)));
        assert_eq!(Time::parse("1.5s"), Ok(Time(1_500_000_000)));
        assert_eq!(Time::parse("100"), Ok(Time(100_000)));
        assert_eq!(Time::parse("7ns"), Ok(Time(7)));
        assert!(Time::parse("-1ms").is_err());
        assert!(Time::parse("10 parsecs").is_err());
        assert!(Time::parse("ms").is_err());
    }

    #[test]
    fn durations_read_exactly_in_every_unit() {
        let ok = |s: &str, ns: u64| assert_eq!(parse_duration_ns(s, None), Ok(ns), "{s}");
        ok("1500ns", 1500);
        ok("50us", 50_000);
        ok("50µs", 50_000);
        ok("1.5ms", 1_500_000);
        ok(".25s", 250_000_000);
        ok(" 3s ", 3_000_000_000);
        ok("1m", 60_000_000_000);
        ok("0.5m", 30_000_000_000);
        ok("5e-11m", 3);
        ok("1e3us", 1_000_000);
        ok("2.5E+2ms", 250_000_000);
        ok("20msec", 20_000_000);
        ok("1.0010us", 1_001);
        ok("0.000s", 0);
        ok("18446744073709551615ns", u64::MAX);
        ok("18446744073.709551615s", u64::MAX);
        assert_eq!(parse_duration_ns("3", Some(1_000_000)), Ok(3_000_000));
        assert_eq!(parse_duration_ns("1.5", Some(1_000)), Ok(1_500));
    }

    #[test]
    fn bad_durations_say_why_without_quoting_the_text() {
        use DurationError::*;
        let bad = |s: &str, e: DurationError| assert_eq!(parse_duration_ns(s, None), Err(e), "{s}");
        bad("50", NoUnit);
        bad("1.5", NoUnit);
        bad("50 ms", UnknownUnit);
        bad("5min", UnknownUnit);
        bad("5h", UnknownUnit);
        bad("ms", NotANumber);
        bad("-5ms", NotANumber);
        bad("1.2.3ms", NotANumber);
        bad(".ms", NotANumber);
        bad("1e", NotANumber);
        bad("1.0010ns", TooFine);
        bad("2.5e-11m", TooFine);
        bad("1e-10000s", TooFine);
        bad("18446744073709551616ns", TooLong);
        bad("99999999999999999999s", TooLong);
        bad("1e10000s", TooLong);
        bad("123456789012345678901234567890123456789012.5ns", TooLong);
        assert!(parse_duration_ns("5h", None)
            .unwrap_err()
            .to_string()
            .contains("units: ns, us or µs, ms, s, m"));
        assert_eq!(Time::parse("1.5ns"), Err(UnitError::Duration(TooFine)));
    }

    #[test]
    fn rates_follow_tc() {
        assert_eq!(Rate::parse("10mbit"), Ok(Rate(10_000_000)));
        assert_eq!(Rate::parse("125kbps"), Ok(Rate(1_000_000)));
        assert_eq!(Rate::parse("1mibit"), Ok(Rate(1_048_576)));
        assert_eq!(Rate::parse("1Gbit"), Ok(Rate(1_000_000_000)));
        assert_eq!(Rate::parse("64k"), Ok(Rate(64_000)));
        assert_eq!(Rate::parse("10M"), Ok(Rate(10_000_000)));
        assert_eq!(Rate::parse("1.5gbit"), Ok(Rate(1_500_000_000)));
        assert_eq!(Rate::parse(" 1000 "), Ok(Rate(1_000)));
        assert!(Rate::parse("0bit").is_err());
        assert!(Rate::parse("10x").is_err());
        assert!(Rate::parse("10 furlongs").is_err());
    }

    #[test]
    fn sizes_and_percents_follow_tc() {
        assert_eq!(Size::parse("64kb"), Ok(Size(65_536)));
        assert_eq!(Size::parse("1500"), Ok(Size(1500)));
        assert_eq!(Percent::parse("1%"), Ok(Percent(0.01)));
        assert_eq!(Percent::parse("25"), Ok(Percent(0.25)));
        assert_eq!(
            Percent::parse("120%"),
            Err(UnitError::OutOfRange {
                min: "0%".into(),
                max: "100%".into()
            })
        );
    }

    #[test]
    fn serde_accepts_strings_and_base_numbers() {
        #[derive(Deserialize, Serialize, PartialEq, Debug)]
        struct T {
            a: Time,
            b: Rate,
            c: Percent,
        }
        let t: T = serde_json::from_str(r#"{"a":"20ms","b":1000,"c":0.25}"#).unwrap();
        assert_eq!(
            t,
            T {
                a: Time(20_000_000),
                b: Rate(1000),
                c: Percent(0.25)
            }
        );
        let back: T = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
        assert_eq!(back, t);
        let err = serde_json::from_str::<T>(r#"{"a":"20ms","b":1000,"c":25}"#).unwrap_err();
        assert!(err.to_string().contains("fraction"), "{err}");
    }

    proptest! {
        #[test]
        fn display_reads_back(ns in 0u64..1 << 60, bits in 1u64..1_000_000_000_000_000, bytes in 0u64..1 << 40, p in 0.0f64..=1.0) {
            prop_assert_eq!(Time::parse(&Time(ns).to_string()), Ok(Time(ns)));
            prop_assert_eq!(Rate::parse(&Rate(bits).to_string()), Ok(Rate(bits)));
            prop_assert_eq!(Size::parse(&Size(bytes).to_string()), Ok(Size(bytes)));
            prop_assert_eq!(Percent::parse(&Percent(p).to_string()), Ok(Percent(p)));
        }

        /// Any duration printed by the one formatter reads back, and so does any duration
        /// written as an exact decimal in any power-of-ten unit.
        #[test]
        fn durations_print_and_read_back(ns in any::<u64>(), unit in 0usize..4) {
            prop_assert_eq!(parse_duration_ns(&format_duration_ns(ns).to_string(), None), Ok(ns));
            let (name, scale) = [("ns", 1u64), ("us", 1_000), ("ms", 1_000_000), ("s", 1_000_000_000)][unit];
            let text = format!("{}.{:0width$}{name}", ns / scale, ns % scale, width = scale.ilog10() as usize);
            prop_assert_eq!(parse_duration_ns(&text, None), Ok(ns), "{}", text);
        }

        /// Netem's and the topology's entry ([`Time::parse`]) reads what the one parser reads,
        /// a bare number in microseconds as tc does.
        #[test]
        fn time_reads_as_the_one_parser_reads(
            text in "[0-9]{0,3}(\\.[0-9]{0,4})?(e-?[0-9])?(ns|us|µs|ms|s|m|sec|min|)",
        ) {
            let one = parse_duration_ns(&text, Some(1_000)).ok().filter(|&ns| ns <= u64::MAX / 2);
            prop_assert_eq!(Time::parse(&text).ok().map(|t| t.0), one, "{}", text);
        }

        #[test]
        fn parsers_never_panic(s in "\\PC{0,12}") {
            let _ = (Time::parse(&s), Rate::parse(&s), Size::parse(&s), Percent::parse(&s));
            let _ = parse_duration_ns(&s, None);
        }
    }
}
