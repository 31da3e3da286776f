//! The burst-absorption scenario's table ([`rtemu_sim::burst`]), for `rtemu-bench aqm`.

use std::io::{self, Write};

use rtemu_sim::bufferbloat::LINK;
use rtemu_sim::burst::{
    Summary, BACKGROUND_SHARE, BURST_EVERY_NS, BURST_FRAMES, FRAME_BYTES, SECONDS,
};

use crate::text;

/// Writes the scenario in one line, then a Markdown table of `rows`: per queue the bursts'
/// losses and times through the link, and the background's drops.
pub fn write_table(out: &mut impl Write, seed: u64, rows: &[Summary]) -> io::Result<()> {
    let caption = format!(
        "burst absorption (RFC 7928 §6): every {} s a burst of {BURST_FRAMES} × {FRAME_BYTES} \
         bytes at 1 Gbit/s onto {LINK} carrying {:.0} % of its rate of unresponsive background \
         (Poisson), {SECONDS} s simulated (seed {seed})",
        BURST_EVERY_NS / 1_000_000_000,
        BACKGROUND_SHARE * 100.0
    );
    let headings = [
        "queue",
        "bursts",
        "burst frames lost",
        "bursts hit",
        "burst through p50 (ms)",
        "max (ms)",
        "background dropped",
    ];
    let rows = rows.iter().map(|r| {
        vec![
            r.queue.to_string(),
            r.bursts.to_string(),
            format!("{:.1} %", r.burst_lost_percent),
            format!("{:.0} %", r.bursts_hit_percent),
            format!("{:.1}", r.burst_time_p50_ms),
            format!("{:.1}", r.burst_time_max_ms),
            format!("{:.1} %", r.background_dropped_percent),
        ]
    });
    text::write_table(out, &caption, &headings, rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table's format, to the character, against `tests/golden/burst.md`.
    #[test]
    fn the_table_reads_as_the_golden_file() {
        let row = |queue, lost: f64, p50| Summary {
            queue,
            model: String::new(),
            bursts: 58,
            burst_lost_percent: lost,
            bursts_hit_percent: lost * 3.0,
            burst_time_p50_ms: p50,
            burst_time_max_ms: p50 * 1.75,
            background_dropped_percent: lost / 2.0,
        };
        let mut out = Vec::new();
        let rows = [
            row("drop-tail, 500 ms", 0.0, 412.34),
            row("PIE", 31.26, 18.05),
        ];
        write_table(&mut out, 7, &rows).unwrap();
        crate::assert_golden("burst.md", &out);
    }
}
