//! The timing lab's reports: for each experiment of `rtemu-lab`, its results as a table in
//! µs after the run's [header](write_header), as JSON (times in integer ns), as CSV (raw
//! samples or one row per result) and as a figure.
//!
//! Each report is a [`Report`]; [`write_files`] writes its CSV file and figure, [`print`] its
//! table or JSON on stdout.

mod deadline;
mod doctor;
mod latency;
mod linerate;
mod rtt;
mod sleep;

use std::io::{self, Write};
use std::path::Path;

use rtemu_clock::time::format_duration_ns;
use rtemu_lab::env::Header;
use serde::Serialize;

pub use deadline::DeadlineReport;
pub use doctor::DoctorReport;
pub use latency::LatencyReport;
pub use linerate::LinerateReport;
pub use rtt::RttReport;
pub use sleep::SleepReport;

use crate::output;
use crate::text;

/// One experiment's results, in every form the lab writes them. Serialized, it is the JSON
/// report.
pub trait Report: Serialize {
    /// The `--csv` file.
    fn csv(&self, out: &mut dyn Write) -> io::Result<()>;

    /// The text report: the header, then the tables.
    fn text(&self, out: &mut dyn Write) -> io::Result<()>;

    /// Draws the `--plot` figure to `path`, SVG or PNG by its extension.
    fn draw(&self, path: &Path) -> anyhow::Result<()> {
        anyhow::bail!("--plot {}: this report has no figure", path.display())
    }

    /// Fails when some series measured nothing, naming them (after the report is printed).
    fn complete(&self) -> anyhow::Result<()> {
        Ok(())
    }
}

/// Writes `report`'s CSV file and figure, each when a path is given.
pub fn write_files(
    report: &impl Report,
    csv: Option<&Path>,
    plot: Option<&Path>,
) -> anyhow::Result<()> {
    if let Some(path) = csv {
        output::write_with(path, |out| report.csv(out))?;
    }
    if let Some(path) = plot {
        report.draw(path)?;
    }
    Ok(())
}

/// Prints `report` on stdout, as JSON or as text, then fails if it measured nothing.
pub fn print(report: &impl Report, json: bool) -> anyhow::Result<()> {
    let mut out = io::stdout().lock();
    if json {
        text::json(&mut out, report)?;
    } else {
        report.text(&mut out)?;
    }
    report.complete()
}

/// [`write_files`], then [`print`].
pub fn emit(
    report: &impl Report,
    json: bool,
    csv: Option<&Path>,
    plot: Option<&Path>,
) -> anyhow::Result<()> {
    write_files(report, csv, plot)?;
    print(report, json)
}

/// The lines above every table: the title, then the kernel, clock, scheduling and machine
/// the run measured on, and any notice.
pub fn write_header(out: &mut dyn Write, title: &str, h: &Header) -> io::Result<()> {
    writeln!(out, "{title}")?;
    writeln!(
        out,
        "kernel      {} {} (preemption: {})",
        h.kernel_release, h.kernel_version, h.preemption
    )?;
    let slack = h.timer_slack_ns.map_or("unknown".to_owned(), |ns| {
        format_duration_ns(ns).to_string()
    });
    writeln!(
        out,
        "clock       clocksource {}, timer slack {slack}, one clock read {} ns median, {} ns p99, {} ns max",
        h.clocksource, h.clock_read_ns.p50_ns, h.clock_read_ns.p99_ns, h.clock_read_ns.max_ns
    )?;
    let runtime = match h.rt_runtime_us {
        Some(-1) => "unlimited".to_owned(),
        Some(us) => format!("{us} µs/s"),
        None => "unknown".to_owned(),
    };
    writeln!(
        out,
        "scheduling  {} on CPUs {} ({} online), mlockall {}, cpu_dma_latency {}, RT runtime {runtime}",
        h.policy,
        h.affinity,
        h.cpus,
        if h.mlockall { "yes" } else { "no" },
        if h.dma_latency_held { "held at 0" } else { "not held" },
    )?;
    let load = match h.load_threads {
        0 => "none".to_owned(),
        n => format!("{n} busy threads"),
    };
    writeln!(
        out,
        "machine     virtualisation {}, load {load}",
        h.virtualization.as_deref().unwrap_or("none detected")
    )?;
    for notice in &h.notices {
        writeln!(out, "notice      {notice}")?;
    }
    writeln!(out)
}

/// The `skipped` lines closing a table.
fn write_skipped(out: &mut dyn Write, skipped: &[String]) -> io::Result<()> {
    for line in skipped {
        writeln!(out, "skipped     {line}")?;
    }
    Ok(())
}
