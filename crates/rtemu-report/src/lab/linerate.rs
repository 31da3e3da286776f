//! `rtemu lab linerate`: requested vs achieved line rate per wait method and pacer (the
//! timing paper's Figure 1).

use std::io::{self, Write};
use std::path::Path;

use rtemu_clock::time::format_duration_ns;
use rtemu_lab::env::Header;
use rtemu_lab::linerate::PointResult;
use serde::Serialize;

use super::{write_header, Report};
use crate::plot::{Axis, Chart, Series, Style};
use crate::text::us_i;

/// The line-rate sweep's report: one result per rate, method and pacer.
#[derive(Debug, Serialize)]
pub struct LinerateReport {
    header: Header,
    packet_size: u32,
    time_per_point_ns: u64,
    results: Vec<PointResult>,
}

impl LinerateReport {
    /// The report of `results`, packets of `packet_size` bytes for about `time_per_point_ns`
    /// each, measured under `header`.
    pub fn new(
        header: Header,
        packet_size: u32,
        time_per_point_ns: u64,
        results: Vec<PointResult>,
    ) -> LinerateReport {
        LinerateReport {
            header,
            packet_size,
            time_per_point_ns,
            results,
        }
    }
}

impl Report for LinerateReport {
    fn csv(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(
            out,
            "method,pacer,requested_bps,achieved_bps,ratio,packets,interval_ns,late_p50_ns,late_p99_ns,late_max_ns,cpu_ns"
        )?;
        for r in &self.results {
            let l = &r.lateness_ns;
            writeln!(
                out,
                "{},{},{},{:.0},{:.6},{},{},{},{},{},{}",
                r.method,
                r.pacer,
                r.requested_bps,
                r.achieved_bps,
                r.ratio,
                r.packets,
                r.interval_ns,
                l.p50_ns,
                l.p99_ns,
                l.max_ns,
                r.cpu_ns
            )?;
        }
        Ok(())
    }

    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        let title = format!(
            "rtemu lab linerate: {}-byte packets, about {} per point",
            self.packet_size,
            format_duration_ns(self.time_per_point_ns)
        );
        write_header(out, &title, &self.header)?;
        writeln!(
            out,
            "{:<14} {:<9} {:>12} {:>14} {:>8} {:>8} │ {:>10} {:>10} {:>10}",
            "method",
            "pacer",
            "requested",
            "achieved",
            "ratio",
            "packets",
            "late p50",
            "late p99",
            "late max"
        )?;
        writeln!(
            out,
            "{:<14} {:<9} {:>12} {:>14} {:>8} {:>8} │ {:>32}",
            "", "", "bit/s", "bit/s", "", "", "vs start + k·interval, µs"
        )?;
        for r in &self.results {
            let l = &r.lateness_ns;
            writeln!(
                out,
                "{:<14} {:<9} {:>12} {:>14.0} {:>8.4} {:>8} │ {:>10} {:>10} {:>10}",
                r.method,
                r.pacer,
                r.requested_bps,
                r.achieved_bps,
                r.ratio,
                r.packets,
                us_i(l.p50_ns),
                us_i(l.p99_ns),
                us_i(l.max_ns),
            )?;
        }
        Ok(())
    }

    /// Requested vs achieved line rate per method and pacer (Figure 1).
    fn draw(&self, path: &Path) -> anyhow::Result<()> {
        let mut series: Vec<Series> = Vec::new();
        for r in &self.results {
            let name = format!("{} {}", r.method, r.pacer);
            let point = (r.requested_bps as f64, r.achieved_bps);
            match series.iter_mut().find(|s| s.name == name) {
                Some(s) => s.points.push(point),
                None => series.push(Series {
                    name,
                    points: vec![point],
                    style: Style::Points,
                }),
            }
        }
        Chart {
            title: "requested vs achieved line rate".into(),
            x: Axis::log("requested, bit/s"),
            y: Axis::log("achieved, bit/s"),
            series,
            diagonal: true,
            legend_above: false,
        }
        .draw(path)
    }
}
