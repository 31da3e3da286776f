//! `rtemu lab deadline`: real time vs real fast, the RTOS paper's tire benchmark (Figures
//! 9–12 for a sweep).

use std::io::{self, Write};
use std::path::Path;

use rtemu_clock::time::format_duration_ns;
use rtemu_lab::deadline::{DeadlineResult, Mode};
use rtemu_lab::env::Header;
use serde::Serialize;

use super::{write_header, write_skipped, Report};
use crate::plot::{Cell, HeatMap};
use crate::text::us_i;

/// The tire benchmark's report: one result per run.
#[derive(Debug, Serialize)]
pub struct DeadlineReport {
    header: Header,
    results: Vec<DeadlineResult>,
    skipped: Vec<String>,
    /// Steps per run.
    #[serde(skip)]
    steps: u64,
    /// Release rate of real-time steps, Hz.
    #[serde(skip)]
    rate_hz: u64,
}

impl DeadlineReport {
    /// The report of `results`, runs of `steps` steps released at `rate_hz` in real time,
    /// measured under `header`; `skipped` says what did not run and why.
    pub fn new(
        header: Header,
        results: Vec<DeadlineResult>,
        skipped: Vec<String>,
        steps: u64,
        rate_hz: u64,
    ) -> DeadlineReport {
        DeadlineReport {
            header,
            results,
            skipped,
            steps,
            rate_hz,
        }
    }
}

impl Report for DeadlineReport {
    fn csv(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "nodes,threads,policy,mode,steps,missed,longest_miss_run,release_p99_ns,compute_p50_ns,compute_max_ns,response_p50_ns,response_p99_ns,response_max_ns,total_ns")?;
        for r in &self.results {
            let mode = match r.mode {
                Mode::RealTime { .. } => "real-time",
                Mode::RealFast => "real-fast",
            };
            let (missed, run) = r.misses.map_or((0, 0), |m| (m.missed, m.longest_run));
            writeln!(
                out,
                "{},{},{},{mode},{},{missed},{run},{},{},{},{},{},{},{}",
                r.nodes,
                r.threads,
                r.policy,
                r.steps,
                r.release_latency_ns.p99_ns,
                r.compute_ns.p50_ns,
                r.compute_ns.max_ns,
                r.response_ns.p50_ns,
                r.response_ns.p99_ns,
                r.response_ns.max_ns,
                r.total_ns
            )?;
        }
        Ok(())
    }

    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        let title = format!(
            "rtemu lab deadline: tire model, {} steps, real-time period {} ({} Hz)",
            self.steps,
            format_duration_ns(1_000_000_000 / self.rate_hz),
            self.rate_hz
        );
        write_header(out, &title, &self.header)?;
        writeln!(
            out,
            "{:>7} {:>7} {:<13} {:<9} │ {:>7} {:>7} {:>7} │ {:>9} {:>9} {:>9} {:>9} │ {:>8} {:>9} {:>8}",
            "nodes", "threads", "policy", "mode", "missed", "%", "run", "rel p99", "comp p50", "resp p99",
            "resp max", "total s", "steps/s", "× RT"
        )?;
        writeln!(
            out,
            "{:>7} {:>7} {:<13} {:<9} │ {:>23} │ {:>39} │",
            "", "", "", "", "deadlines", "µs"
        )?;
        for r in &self.results {
            let (mode, missed, pct, run) = match r.misses {
                Some(m) => (
                    "real-time",
                    m.missed.to_string(),
                    format!("{:.1}", 100.0 * m.missed as f64 / r.steps as f64),
                    m.longest_run.to_string(),
                ),
                None => ("real-fast", "-".into(), "-".into(), "-".into()),
            };
            writeln!(
                out,
                "{:>7} {:>7} {:<13} {:<9} │ {:>7} {:>7} {:>7} │ {:>9} {:>9} {:>9} {:>9} │ {:>8.2} {:>9.0} {:>8.1}",
                r.nodes,
                r.threads,
                r.policy,
                mode,
                missed,
                pct,
                run,
                match r.misses {
                    Some(_) => us_i(r.release_latency_ns.p99_ns),
                    None => "-".to_owned(),
                },
                us_i(r.compute_ns.p50_ns),
                us_i(r.response_ns.p99_ns),
                us_i(r.response_ns.max_ns),
                r.total_ns as f64 / 1e9,
                r.steps_per_s,
                r.times_real_time,
            )?;
        }
        write_skipped(out, &self.skipped)
    }

    /// A heat map of missed deadlines: model sizes × (threads, policy), the RTOS paper's
    /// Figures 11–12. Real-time results only.
    fn draw(&self, path: &Path) -> anyhow::Result<()> {
        let timed: Vec<&DeadlineResult> =
            self.results.iter().filter(|r| r.misses.is_some()).collect();
        let mut rows: Vec<usize> = timed.iter().map(|r| r.nodes).collect();
        rows.sort_unstable();
        rows.dedup();
        let mut columns: Vec<(usize, String)> = timed
            .iter()
            .map(|r| (r.threads, r.policy.clone()))
            .collect();
        columns.sort();
        columns.dedup();
        if rows.is_empty() {
            anyhow::bail!("--plot: no real-time results to draw");
        }
        let cells = timed
            .iter()
            .map(|r| {
                let missed = r.misses.map_or(0, |m| m.missed);
                let share = missed as f64 / r.steps.max(1) as f64;
                Cell {
                    column: columns
                        .iter()
                        .position(|c| c.0 == r.threads && c.1 == r.policy)
                        .unwrap_or_default(),
                    row: rows.iter().position(|&n| n == r.nodes).unwrap_or_default(),
                    heat: share,
                    label: format!("{:.1}", 100.0 * share),
                }
            })
            .collect();
        HeatMap {
            title: "missed deadlines (% of steps)".into(),
            columns: columns
                .iter()
                .map(|(t, p)| format!("{t} thr {p}"))
                .collect(),
            rows: rows.iter().map(|n| format!("{n} nodes")).collect(),
            cells,
        }
        .draw(path)
    }
}
