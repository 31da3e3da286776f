//! The varying-capacity scenario's table ([`rtemu_sim::capacity`]), for `rtemu-bench aqm`.

use std::io::{self, Write};

use rtemu_sim::capacity::{Summary, BASE_RTT_NS, FLOWS, HIGH, LOW, PHASES, PHASE_NS, TRANSIENT_NS};

use crate::text;

/// Writes the scenario in one line, then a Markdown table of `rows`: per queue each phase's
/// delay and utilisation, the low phases' drops, and the settling time after a drop.
pub fn write_table(out: &mut impl Write, seed: u64, rows: &[Summary]) -> io::Result<()> {
    let caption = format!(
        "varying capacity (RFC 7928 §8.2.5): {FLOWS} Reno-like flows ({} ms base RTT) through \
         a rate alternating {HIGH} / {LOW} every {} s, {} s simulated, measured from {} s; \
         \"settled\" leaves out each phase's first {} s (seed {seed})",
        BASE_RTT_NS / 1_000_000,
        PHASE_NS / 1_000_000_000,
        PHASES * PHASE_NS / 1_000_000_000,
        PHASE_NS / 1_000_000_000,
        TRANSIENT_NS / 1_000_000_000,
    );
    let headings = [
        "queue",
        "high: delay p50 (ms)",
        "p99",
        "use",
        "low: delay p50 (ms)",
        "p99",
        "settled p99",
        "use",
        "dropped",
        "settling after a drop",
    ];
    let rows = rows.iter().map(|r| {
        let settling = match (r.target_ms, r.settling_ms) {
            (None, _) => "no target".to_string(),
            (Some(t), None) => format!("never under {t:.0} ms"),
            (Some(t), Some(s)) => format!("{s:.0} ms (to {t:.0} ms)"),
        };
        vec![
            r.queue.to_string(),
            format!("{:.1}", r.high.delay_p50_ms),
            format!("{:.1}", r.high.delay_p99_ms),
            format!("{:.1} %", r.high.utilisation_percent),
            format!("{:.1}", r.low.delay_p50_ms),
            format!("{:.1}", r.low.delay_p99_ms),
            format!("{:.1}", r.low.settled_p99_ms),
            format!("{:.1} %", r.low.utilisation_percent),
            format!("{:.1} %", r.low.dropped_percent),
            settling,
        ]
    });
    text::write_table(out, &caption, &headings, rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtemu_sim::capacity::Phase;

    /// The table's format, to the character, against `tests/golden/capacity.md`: a queue
    /// without a target, one that never settles under it, and one that does.
    #[test]
    fn the_table_reads_as_the_golden_file() {
        let phase = |rate_mbit_s, delay: f64| Phase {
            rate_mbit_s,
            delay_p50_ms: delay,
            delay_p99_ms: delay * 1.5,
            settled_p99_ms: delay * 1.25,
            utilisation_percent: 97.46,
            dropped_percent: 2.05,
        };
        let row = |queue, target_ms, settling_ms| Summary {
            queue,
            model: String::new(),
            high: phase(100.0, 3.12),
            low: phase(10.0, 251.2),
            target_ms,
            settling_ms,
        };
        let rows = [
            row("drop-tail, 500 ms", None, None),
            row("CoDel", Some(5.0), None),
            row("FQ-CoDel", Some(5.0), Some(1234.5)),
        ];
        let mut out = Vec::new();
        write_table(&mut out, 3, &rows).unwrap();
        crate::assert_golden("capacity.md", &out);
    }
}
