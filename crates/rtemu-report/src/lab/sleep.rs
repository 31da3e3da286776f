//! `rtemu lab sleep`: sleep accuracy per wait method (the timing paper's Table 1 and
//! Figure 3).

use std::io::{self, Write};
use std::path::Path;

use rtemu_clock::time::format_duration_ns;
use rtemu_lab::env::Header;
use rtemu_lab::late_wakeups::Cause;
use rtemu_lab::sleep::{MethodResult, SleepConfig, SleepSamples};
use rtemu_lab::stats::Histogram;
use rtemu_lab::tracefs::Traced;
use serde::Serialize;

use super::{write_header, Report};
use crate::plot::{Axis, Chart, Series, Style};
use crate::text::{ms, no_samples, us, us_i};

/// Requests shown per method in the figure, as in the paper's Figure 3.
const FIRST_REQUESTS: usize = 100;

/// The sleep test's report: per method, the error statistics of its requests.
#[derive(Debug, Serialize)]
pub struct SleepReport {
    header: Header,
    workload: String,
    count: u64,
    seed: u64,
    time_limit_ns: u64,
    results: Vec<MethodResult>,
    /// Why the late wake-ups came late, when the kernel's trace was recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    trace: Option<Traced>,
    /// The raw samples, for the CSV file, the histogram and the figure.
    #[serde(skip)]
    samples: Vec<SleepSamples>,
}

impl SleepReport {
    /// The report of `samples`, measured by `config` under `header`.
    pub fn new(header: Header, config: &SleepConfig, samples: Vec<SleepSamples>) -> SleepReport {
        SleepReport {
            header,
            workload: config.workload.to_string(),
            count: config.count as u64,
            seed: config.seed,
            time_limit_ns: config.time_limit_ns,
            results: samples
                .iter()
                .map(|s| MethodResult::from_samples(s, config.count))
                .collect(),
            trace: None,
            samples,
        }
    }

    /// The report with the kernel trace's account of the late wake-ups.
    pub fn with_trace(mut self, trace: Option<Traced>) -> SleepReport {
        self.trace = trace;
        self
    }

    /// A cyclictest-style histogram of the error: one row per µs up to `max_us`, one column
    /// per method, then the counts below 0 and above `max_us`.
    pub fn histogram(&self, out: &mut dyn Write, max_us: usize) -> io::Result<()> {
        let histograms: Vec<Histogram> = self
            .samples
            .iter()
            .map(|s| Histogram::per_microsecond(&errors(s), max_us))
            .collect();
        // cyclictest -h layout: comments, then "µs count count …", then the totals.
        write!(out, "# error in µs")?;
        for s in &self.samples {
            write!(out, " {}", s.method)?;
        }
        writeln!(out)?;
        for bucket in 0..max_us {
            write!(out, "{bucket:06}")?;
            for h in &histograms {
                write!(out, " {:06}", h.counts[bucket])?;
            }
            writeln!(out)?;
        }
        for (label, pick) in [
            (
                "# below 0:",
                (|h: &Histogram| h.underflows) as fn(&Histogram) -> u64,
            ),
            ("# overflows:", |h: &Histogram| h.overflows),
        ] {
            write!(out, "{label}")?;
            for h in &histograms {
                write!(out, " {:05}", pick(h))?;
            }
            writeln!(out)?;
        }
        Ok(())
    }
}

/// The kernel trace's account of the late wake-ups.
fn write_trace(out: &mut dyn Write, t: &Traced) -> io::Result<()> {
    let a = &t.attribution;
    let cpus: Vec<String> = t.cpus.iter().map(usize::to_string).collect();
    writeln!(
        out,
        "\nlate wake-ups, from the kernel's trace of CPU {}: {} of {} timed wake-ups more than {} µs late",
        cpus.join(","),
        a.late(),
        a.wakeups,
        a.late_after_ns / 1_000
    )?;
    writeln!(
        out,
        "  {:<58} {:>6} {:>12} {:>12}",
        "cause", "n", "in all", "worst"
    )?;
    for (what, total) in [
        ("timer late, CPU idle: the virtual CPU absent", &a.absent),
        (
            "timer late while a task ran: interrupts off, or absent",
            &a.task,
        ),
        ("timer late in an interrupt handler or softirq", &a.handler),
        (
            "timer in time, then a wait behind a task or handler",
            &a.waited,
        ),
    ] {
        writeln!(
            out,
            "  {what:<58} {:>6} {:>12} {:>12}",
            total.count,
            ms(total.late_ns as f64),
            ms(total.worst_ns as f64)
        )?;
    }
    if let Some(steal) = t.steal_ns {
        writeln!(
            out,
            "  time the hypervisor says it took from these CPUs meanwhile (/proc/stat steal, 10 ms steps): {}",
            ms(steal as f64)
        )?;
    }
    if a.lost_events > 0 {
        writeln!(
            out,
            "  the trace lost {} events (its buffer overflowed): some wake-ups are missing",
            a.lost_events
        )?;
    }
    for w in &a.worst {
        let why = match &w.cause {
            Cause::Absent => "the CPU absent (idle)".to_owned(),
            Cause::Task { task } => format!("{task} ran"),
            Cause::Handler { work } => work.clone(),
            Cause::Waited { work } => format!("waited behind {work}"),
        };
        writeln!(
            out,
            "  {} late on CPU {} (timer interrupt {} late): {why} for {}",
            ms(w.late_ns as f64),
            w.cpu,
            ms(w.interrupt_late_ns as f64),
            ms(w.cause_ns as f64)
        )?;
    }
    Ok(())
}

/// The error `y − x` of each request of `s`.
fn errors(s: &SleepSamples) -> Vec<i64> {
    s.requested
        .iter()
        .zip(&s.actual)
        .map(|(&x, &y)| y as i64 - x as i64)
        .collect()
}

impl Report for SleepReport {
    fn csv(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "method,index,requested_ns,actual_ns,error_ns")?;
        for s in &self.samples {
            for (i, (x, y)) in s.requested.iter().zip(&s.actual).enumerate() {
                writeln!(out, "{},{i},{x},{y},{}", s.method, *y as i64 - *x as i64)?;
            }
        }
        Ok(())
    }

    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        let title = format!(
            "rtemu lab sleep: workload {}, {} requests per method, seed {}",
            self.workload, self.count, self.seed
        );
        write_header(out, &title, &self.header)?;
        writeln!(
            out,
            "{:<14} {:>6} {:>10} {:>12} {:>9} {:>9} │ {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} │ {:>5}",
            "method",
            "n",
            "abs mean",
            "abs var",
            "rel mean",
            "rel var",
            "p50",
            "p90",
            "p99",
            "p99.9",
            "p99.99",
            "max",
            "cpu"
        )?;
        writeln!(
            out,
            "{:<14} {:>6} {:>10} {:>12} {:>9} {:>9} │ {:>62} │",
            "", "", "µs", "µs²", "", "", "error y − x in µs"
        )?;
        for r in &self.results {
            if r.completed == 0 {
                writeln!(
                    out,
                    "{:<14} {:>6}   no samples (cut by --time-limit)",
                    r.method, 0
                )?;
                continue;
            }
            let d = &r.error_ns;
            writeln!(
                out,
                "{:<14} {:>6} {:>10} {:>12.1} {:>9.4} {:>9.4} │ {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} │ {:>4.0}%{}",
                r.method,
                r.completed,
                us(r.errors.abs_mean_ns),
                r.errors.abs_var_ns2 / 1e6,
                r.errors.rel_mean,
                r.errors.rel_var,
                us_i(d.p50_ns),
                us_i(d.p90_ns),
                us_i(d.p99_ns),
                us_i(d.p99_9_ns),
                us_i(d.p99_99_ns),
                us_i(d.max_ns),
                r.cpu_share() * 100.0,
                if r.truncated { "  (cut by --time-limit)" } else { "" },
            )?;
        }
        if let Some(trace) = &self.trace {
            write_trace(out, trace)?;
        }
        Ok(())
    }

    /// Requested vs actual sleep of the first requests of each method (Figure 3).
    fn draw(&self, path: &Path) -> anyhow::Result<()> {
        let series = self
            .samples
            .iter()
            .map(|s| {
                let points = s.requested.iter().zip(&s.actual).take(FIRST_REQUESTS);
                let points = points.map(|(&x, &y)| (x as f64 / 1e3, y as f64 / 1e3));
                Series {
                    name: s.method.to_string(),
                    points: points.collect(),
                    style: Style::Points,
                }
            })
            .collect();
        Chart {
            title: "requested vs actual sleep, first 100 requests per method".into(),
            x: Axis::linear("requested, µs"),
            y: Axis::linear("actual, µs"),
            series,
            diagonal: true,
            legend_above: false,
        }
        .draw(path)
    }

    fn complete(&self) -> anyhow::Result<()> {
        let empty: Vec<String> = self
            .results
            .iter()
            .filter(|r| r.completed == 0)
            .map(|r| r.method.clone())
            .collect();
        no_samples(
            &empty,
            &format!(
                "completed no request within --time-limit {}",
                format_duration_ns(self.time_limit_ns)
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtemu_clock::WaitStrategy;
    use rtemu_lab::env::RtSetup;
    use rtemu_lab::sleep::Workload;

    /// A report of one method that completed `actual.len()` of 3 requests of 1 and 2 µs.
    fn report(actual: Vec<u64>) -> SleepReport {
        let config = SleepConfig {
            methods: vec![WaitStrategy::Spin],
            workload: Workload::Micro,
            count: 3,
            seed: 1,
            time_limit_ns: 1_000_000_000,
        };
        let samples = SleepSamples {
            method: WaitStrategy::Spin,
            requested: vec![1_000, 2_000][..actual.len()].to_vec(),
            actual,
            cpu_ns: 10,
            wall_ns: 20,
        };
        SleepReport::new(
            Header::probe(&RtSetup::default(), 0),
            &config,
            vec![samples],
        )
    }

    fn text(write: impl FnOnce(&mut Vec<u8>) -> io::Result<()>) -> String {
        let mut out = Vec::new();
        write(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn every_form_of_the_sleep_report_shows_the_samples() {
        let r = report(vec![1_500, 2_500]);
        assert_eq!(
            text(|out| r.csv(out)),
            "method,index,requested_ns,actual_ns,error_ns\nspin,0,1000,1500,500\nspin,1,2000,2500,500\n"
        );
        // Both errors fall in the first µs bucket; none below 0 or over.
        let histogram = text(|out| r.histogram(out, 2));
        assert_eq!(
            histogram,
            "# error in µs spin\n000000 000002\n000001 000000\n# below 0: 00000\n# overflows: 00000\n"
        );
        let table = text(|out| r.text(out));
        assert!(
            table.starts_with("rtemu lab sleep: workload micro, 3 requests per method, seed 1\n")
        );
        assert!(table.contains("(cut by --time-limit)"), "{table}");
        // The JSON has the results, not the raw samples.
        let json: serde_json::Value = serde_json::to_value(&r).unwrap();
        let keys: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.as_str())
            .collect();
        assert_eq!(
            keys,
            [
                "count",
                "header",
                "results",
                "seed",
                "time_limit_ns",
                "workload"
            ]
        );
        assert_eq!(json["results"][0]["completed"], 2);
        assert!(r.complete().is_ok());
    }

    #[test]
    fn a_method_with_no_sample_fails_the_run_after_its_report() {
        let r = report(vec![]);
        assert!(text(|out| r.text(out)).contains("spin                0   no samples"));
        let e = r.complete().unwrap_err().to_string();
        assert_eq!(
            e,
            "no samples: spin completed no request within --time-limit 1s"
        );
    }
}
