//! Durations in trace text: written with [`format_duration`]; read with rtemu's one duration
//! parser, [`rtemu_model::units::parse_duration_ns`].

/// Writes `ns` with the largest unit up to ms in which it is a whole number (`1500us`, `2ms`,
/// `7ns`), so that [`rtemu_model::units::parse_duration_ns`] gives back exactly `ns`. Unlike
/// [`rtemu_model::units::format_duration_ns`] it never writes seconds: trace files and reports
/// keep the unit they have always been written in.
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
    use rtemu_model::units::parse_duration_ns;

    proptest! {
        #[test]
        fn format_parses_back(ns in any::<u64>()) {
            prop_assert_eq!(parse_duration_ns(&format_duration(ns), None), Ok(ns));
        }
    }
}
