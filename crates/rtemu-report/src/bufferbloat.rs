//! The bufferbloat scenario's table and figure ([`rtemu_sim::bufferbloat`]), shared by
//! `rtemu-bench aqm` and `rtemu demo bufferbloat`.

use std::io::{self, Write};

use rtemu_sim::bufferbloat::{
    Run, Summary, GAME_BYTES, LINK, MEASURED_FROM_NS, SECONDS, UPLOAD_BYTES, UPLOAD_PPS,
};

use crate::plot::{Axis, Chart, Series, Style};
use crate::text;

/// Writes the scenario in one line, then a Markdown table of `rows`: per queue the game
/// flow's delay percentiles and loss, the upload's throughput and drops.
pub fn write_table(out: &mut impl Write, seed: u64, rows: &[Summary]) -> io::Result<()> {
    let caption = format!(
        "an unresponsive upload of {:.0} Mbit/s ({UPLOAD_BYTES}-byte frames, Poisson) and a game \
         flow of 50 pps × {GAME_BYTES} bytes through {LINK}, {SECONDS} s simulated, measured \
         from {} s (seed {seed})",
        UPLOAD_PPS * f64::from(UPLOAD_BYTES) * 8.0 / 1e6,
        MEASURED_FROM_NS / 1_000_000_000
    );
    let headings = [
        "queue",
        "game delay p50 (ms)",
        "p99 (ms)",
        "max (ms)",
        "game lost",
        "upload (Mbit/s)",
        "upload dropped",
    ];
    let rows = rows.iter().map(|r| {
        vec![
            r.queue.to_string(),
            format!("{:.1}", r.game_p50_ms),
            format!("{:.1}", r.game_p99_ms),
            format!("{:.1}", r.game_max_ms),
            format!("{:.1} %", r.game_lost_percent),
            format!("{:.2}", r.upload_mbit_s),
            format!("{:.1} %", r.upload_dropped_percent),
        ]
    });
    text::write_table(out, &caption, &headings, rows)
}

/// The game flow's delay over the whole run, one line per queue, in the runs' order.
///
/// The delay axis is logarithmic: the queues' delays span three orders of magnitude (FQ-CoDel
/// keeps the game near 1 ms, drop-tail near 500 ms), and on a linear axis every cure would be
/// one flat line on the floor; a log axis shows each queue's level and how much it wanders,
/// equal ratios as equal distances, which is what a reader compares. One panel rather than
/// two keeps every queue against the same scale. Lost game frames have no point: their share
/// is the table's "game lost".
pub fn chart(runs: &[Run], seed: u64) -> Chart {
    Chart {
        title: format!(
            "A game flow's delay behind a {:.0} Mbit/s upload on {LINK} (seed {seed})",
            UPLOAD_PPS * f64::from(UPLOAD_BYTES) * 8.0 / 1e6
        ),
        x: Axis::linear("time (s)"),
        y: Axis::log("game frame's delay through the link (ms)"),
        series: runs
            .iter()
            .map(|r| Series {
                name: r.queue.name.to_owned(),
                points: r.game_delays().collect(),
                style: Style::Trace,
            })
            .collect(),
        diagonal: false,
        // The legend over the drop-tail lines would hide their filling.
        legend_above: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table's format, to the character, against `tests/golden/bufferbloat.md`
    /// (`RTEMU_BLESS=1` rewrites it; review the diff).
    #[test]
    fn the_table_reads_as_the_golden_file() {
        let row = |queue, p50, lost| Summary {
            queue,
            model: String::new(),
            game_p50_ms: p50,
            game_p99_ms: p50 * 1.25,
            game_max_ms: p50 * 1.5,
            game_lost_percent: lost,
            upload_mbit_s: 9.9949,
            upload_dropped_percent: 16.66,
        };
        let mut out = Vec::new();
        write_table(
            &mut out,
            7,
            &[
                row("drop-tail, 500 ms", 498.04, 16.7),
                row("FQ-CoDel", 0.95, 0.0),
            ],
        )
        .unwrap();
        crate::assert_golden("bufferbloat.md", &out);
    }

    /// One series per queue, named for it, whose points are exactly the run's game delays,
    /// and the figure drawn from it has one line and one legend entry per queue.
    #[test]
    fn the_chart_has_each_queues_delays_and_draws_a_line_for_each() {
        let runs: Vec<Run> = rtemu_sim::bufferbloat::QUEUES[..3]
            .iter()
            .map(|&q| rtemu_sim::bufferbloat::run(q, 4).unwrap())
            .collect();
        let c = chart(&runs, 4);
        assert_eq!(c.series.len(), 3);
        for (s, r) in c.series.iter().zip(&runs) {
            assert_eq!(s.name, r.queue.name);
            assert_eq!(s.points, r.game_delays().collect::<Vec<_>>());
            assert!(s.points.len() > 2_500, "{}: {}", s.name, s.points.len());
        }
        let dir = std::env::temp_dir().join(format!("rtemu-bloat-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bloat.svg");
        c.draw(&path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        // Each series is one polyline of its points, and one short one in the legend.
        let lines: Vec<usize> = svg
            .split("<polyline")
            .skip(1)
            .map(|l| l.split("points=\"").nth(1).unwrap().split(' ').count())
            .collect();
        let long: Vec<usize> = lines.iter().copied().filter(|&n| n > 100).collect();
        assert_eq!(long.len(), 3, "{lines:?}");
        for (n, s) in long.iter().zip(&c.series) {
            assert!(*n >= s.points.len(), "{n} points drawn for {}", s.name);
        }
        for r in &runs {
            assert!(
                svg.contains(&format!("{}\n</text>", r.queue.name)),
                "{}",
                r.queue.name
            );
        }
    }
}
