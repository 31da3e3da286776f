//! One module per subcommand.

pub mod demo;
pub mod engine;
pub mod lab;
pub mod link;
pub mod serve;
pub mod sim;
pub mod topo;
pub mod trace;

use std::fmt::Display;
use std::ops::{Bound, RangeBounds};

/// A parser of a whole number in `range` for a flag: a value outside it, a negative one
/// included, is refused with the range (clap's own parsers for unsigned types call `-5` "an
/// invalid digit").
pub fn number_in<T>(
    range: impl RangeBounds<T> + Clone + Send + Sync + 'static,
) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static
where
    T: TryFrom<i128> + Copy + PartialOrd + Display + Send + Sync + 'static,
{
    move |text: &str| {
        let bound = |b: Bound<&T>| match b {
            Bound::Included(v) | Bound::Excluded(v) => v.to_string(),
            Bound::Unbounded => String::new(),
        };
        let shown = match range.end_bound() {
            Bound::Unbounded => format!("{} or more", bound(range.start_bound())),
            end => format!("{}..={}", bound(range.start_bound()), bound(end)),
        };
        let n: i128 = text
            .trim()
            .parse()
            .map_err(|_| format!("{text:?} is not a whole number (allowed: {shown})"))?;
        T::try_from(n)
            .ok()
            .filter(|v| range.contains(v))
            .ok_or_else(|| format!("{n} is out of range (allowed: {shown})"))
    }
}

#[cfg(test)]
mod tests {
    use super::number_in;

    #[test]
    fn numbers_out_of_range_negative_ones_too_name_the_range() {
        let count = number_in(1..=10_000_000u64);
        assert_eq!(count("5"), Ok(5));
        assert_eq!(
            count("-5").unwrap_err(),
            "-5 is out of range (allowed: 1..=10000000)"
        );
        assert_eq!(
            count("0").unwrap_err(),
            "0 is out of range (allowed: 1..=10000000)"
        );
        assert!(count("x").unwrap_err().contains("is not a whole number"));
        let any = number_in(1u64..);
        assert_eq!(
            any("-1").unwrap_err(),
            "-1 is out of range (allowed: 1 or more)"
        );
        assert_eq!(
            number_in(1..=99u8)("100").unwrap_err(),
            "100 is out of range (allowed: 1..=99)"
        );
    }
}
