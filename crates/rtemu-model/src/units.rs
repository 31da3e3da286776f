//! Quantities with units, read and written as tc writes them: times (`20ms`), rates
//! (`10mbit`), sizes (`64kb`) and percentages (`1%`).
//!
//! The parsers follow iproute2's conventions so that pasted netem lines mean the same thing:
//! a time without a unit is in microseconds, `bps` is *bytes* per second, `kb` is 1024 bytes,
//! and a percentage may be written with or without `%`. The structured (TOML/JSON) form
//! accepts the same strings, or plain numbers in the base unit (ns, bit/s, bytes, fraction).

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

/// A duration or an absolute offset in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Time(pub u64);

impl Time {
    /// Reads a tc time: `20ms`, `1.5s`, `250us`, `100ns`; no unit means microseconds.
    pub fn parse(s: &str) -> Result<Time, UnitError> {
        const BAD: UnitError = UnitError::Malformed {
            what: "a time",
            example: "20ms, 1.5s, 250us",
        };
        let (value, number, unit) = split_number(s).ok_or(BAD)?;
        let scale = match unit {
            "s" | "sec" | "secs" => 1e9,
            "ms" | "msec" | "msecs" => 1e6,
            "" | "us" | "usec" | "usecs" => 1e3,
            "ns" | "nsec" | "nsecs" => 1.0,
            _ => return Err(BAD),
        };
        amount(number, value, scale, u64::MAX / 2)
            .map(Time)
            .ok_or_else(|| UnitError::OutOfRange {
                min: "0s".into(),
                max: "292 years".into(),
            })
    }
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
    /// Reads a tc rate: `10mbit`, `1gbit`, `100kbit`, `500bit`, `1mibit`, `125kbps` (bytes per
    /// second, as in tc), or a bare number of bits per second.
    pub fn parse(s: &str) -> Result<Rate, UnitError> {
        const BAD: UnitError = UnitError::Malformed {
            what: "a rate",
            example: "10mbit, 1gbit, 125kbps",
        };
        let (value, number, unit) = split_number(s).ok_or(BAD)?;
        let lower = unit.to_ascii_lowercase();
        let (prefix, per_byte) = if let Some(p) = lower.strip_suffix("bit") {
            (p, false)
        } else if let Some(p) = lower.strip_suffix("bps") {
            (p, true)
        } else if lower.is_empty() {
            ("", false)
        } else {
            return Err(BAD);
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
    fn rates_follow_tc() {
        assert_eq!(Rate::parse("10mbit"), Ok(Rate(10_000_000)));
        assert_eq!(Rate::parse("125kbps"), Ok(Rate(1_000_000)));
        assert_eq!(Rate::parse("1mibit"), Ok(Rate(1_048_576)));
        assert_eq!(Rate::parse("1Gbit"), Ok(Rate(1_000_000_000)));
        assert!(Rate::parse("0bit").is_err());
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

        #[test]
        fn parsers_never_panic(s in "\\PC{0,12}") {
            let _ = (Time::parse(&s), Rate::parse(&s), Size::parse(&s), Percent::parse(&s));
        }
    }
}
