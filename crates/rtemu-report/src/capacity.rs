//! The varying-capacity scenario's table ([`rtemu_sim::capacity`]), for `rtemu-bench aqm`.

use std::io::{self, Write};

use rtemu_sim::capacity::{Summary, BASE_RTT_NS, FLOWS, HIGH, LOW, PHASES, PHASE_NS, TRANSIENT_NS};

/// Writes the scenario in one line, then a Markdown table of `rows`: per queue each phase's
/// delay and utilisation, the low phases' drops, and the settling time after a drop.
pub fn write_table(out: &mut impl Write, seed: u64, rows: &[Summary]) -> io::Result<()> {
    writeln!(
        out,
        "varying capacity (RFC 7928 §8.2.5): {FLOWS} Reno-like flows ({} ms base RTT) through \
         a rate alternating {HIGH} / {LOW} every {} s, {} s simulated, measured from {} s; \
         \"settled\" leaves out each phase's first {} s (seed {seed})",
        BASE_RTT_NS / 1_000_000,
        PHASE_NS / 1_000_000_000,
        PHASES * PHASE_NS / 1_000_000_000,
        PHASE_NS / 1_000_000_000,
        TRANSIENT_NS / 1_000_000_000,
    )?;
    writeln!(
        out,
        "| queue | high: delay p50 (ms) | p99 | use | low: delay p50 (ms) | p99 | settled p99 | \
         use | dropped | settling after a drop |"
    )?;
    writeln!(
        out,
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    )?;
    for r in rows {
        let settling = match (r.target_ms, r.settling_ms) {
            (None, _) => "no target".to_string(),
            (Some(t), None) => format!("never under {t:.0} ms"),
            (Some(t), Some(s)) => format!("{s:.0} ms (to {t:.0} ms)"),
        };
        writeln!(
            out,
            "| {} | {:.1} | {:.1} | {:.1} % | {:.1} | {:.1} | {:.1} | {:.1} % | {:.1} % | {} |",
            r.queue,
            r.high.delay_p50_ms,
            r.high.delay_p99_ms,
            r.high.utilisation_percent,
            r.low.delay_p50_ms,
            r.low.delay_p99_ms,
            r.low.settled_p99_ms,
            r.low.utilisation_percent,
            r.low.dropped_percent,
            settling
        )?;
    }
    Ok(())
}
