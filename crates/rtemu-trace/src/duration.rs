//! Durations written as text: a decimal number and a unit (`1234us`, `1.5ms`, `2s`), converted
//! to nanoseconds exactly or refused.

/// The units accepted, with their length in ns. `µs` and `us` are the same unit.
const UNITS: [(&str, u64); 5] = [
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
];

/// Parses a non-negative duration such as `1234us` or `0.5ms` to ns. Without a unit the number
/// is taken in `default_unit_ns` if given, and is an error otherwise. A value that is not a whole
/// number of ns, or exceeds `u64::MAX` ns, is an error. Errors describe the fault without
/// quoting `s`: it may come from a file the user may not read (a trace under sudo).
pub fn parse_duration_ns(s: &str, default_unit_ns: Option<u64>) -> Result<u64, String> {
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let scale = if unit.is_empty() {
        default_unit_ns
            .ok_or_else(|| "a duration needs a unit (ns, us, ms or s; e.g. 1234us)".to_owned())?
    } else {
        UNITS
            .iter()
            .find(|(u, _)| *u == unit)
            .map(|&(_, n)| n)
            .ok_or_else(|| "a duration has an unknown unit (units: ns, us, ms, s)".to_owned())?
    };
    let (int, frac) = match number.split_once('.') {
        Some((i, f)) => (i, f),
        None => (number, ""),
    };
    if int.is_empty() && frac.is_empty() || frac.contains('.') {
        return Err("expected a duration: a number followed by a unit (e.g. 1234us)".to_owned());
    }
    let overflow = || format!("a duration is too long (at most {} ns)", u64::MAX);
    let int_ns = if int.is_empty() {
        0
    } else {
        int.parse::<u64>()
            .map_err(|_| overflow())?
            .checked_mul(scale)
            .ok_or_else(overflow)?
    };
    // The fraction: digits d1 d2 … of a unit of `scale` ns must come to a whole ns.
    let mut frac_ns: u64 = 0;
    let mut place = scale;
    for d in frac.bytes() {
        let digit = u64::from(d - b'0');
        if place % 10 != 0 {
            if digit != 0 {
                return Err("a duration is finer than 1 ns".to_owned());
            }
            continue;
        }
        place /= 10;
        frac_ns += digit * place;
    }
    int_ns.checked_add(frac_ns).ok_or_else(overflow)
}

/// Writes `ns` with the largest unit in which it is a whole number (`1500us`, `2ms`, `7ns`), so
/// that [`parse_duration_ns`] gives back exactly `ns`.
pub fn format_duration(ns: u64) -> String {
    if ns == 0 {
        "0us".to_owned()
    } else if ns % 1_000_000 == 0 {
        format!("{}ms", ns / 1_000_000)
    } else if ns % 1_000 == 0 {
        format!("{}us", ns / 1_000)
    } else {
        format!("{ns}ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_exactly() {
        assert_eq!(parse_duration_ns("1234us", None), Ok(1_234_000));
        assert_eq!(parse_duration_ns("1.5ms", None), Ok(1_500_000));
        assert_eq!(parse_duration_ns(".25s", None), Ok(250_000_000));
        assert_eq!(parse_duration_ns("7µs", None), Ok(7_000));
        assert_eq!(parse_duration_ns("3", Some(1_000_000)), Ok(3_000_000));
        assert_eq!(
            parse_duration_ns("1.0010ns", None),
            Err("a duration is finer than 1 ns".into())
        );
        assert!(parse_duration_ns("1.5", None)
            .unwrap_err()
            .contains("needs a unit"));
        assert!(parse_duration_ns("5min", None)
            .unwrap_err()
            .contains("unknown unit"));
        assert!(parse_duration_ns("1.2.3ms", None).is_err());
        assert!(parse_duration_ns("ms", None).is_err());
        assert!(parse_duration_ns("99999999999999999999s", None)
            .unwrap_err()
            .contains("too long"));
    }

    proptest! {
        #[test]
        fn format_parses_back(ns in any::<u64>()) {
            prop_assert_eq!(parse_duration_ns(&format_duration(ns), None), Ok(ns));
        }
    }
}
