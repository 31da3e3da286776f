//! `rtemu lab latency`: task-switch, preemption and IPC latencies per scheduling class, and
//! the priority-inversion test (the RTOS paper's Table 1).

use std::io::{self, Write};

use rtemu_clock::time::format_duration_ns;
use rtemu_lab::env::Header;
use rtemu_lab::latency::{Class, InversionLock, InversionResult, LatencyConfig, LatencyRow};
use serde::Serialize;

use super::{write_header, write_skipped, Report};
use crate::text::{no_samples, us, us_i};

/// The latency tests' report.
#[derive(Debug, Serialize)]
pub struct LatencyReport {
    header: Header,
    cpu: usize,
    iterations: u64,
    period_ns: u64,
    results: Vec<LatencyRow>,
    priority_inversion: Vec<InversionResult>,
    skipped: Vec<String>,
    /// How long the priority-inversion test let an inversion last.
    #[serde(skip)]
    watchdog_ns: u64,
    /// The bound on each test.
    #[serde(skip)]
    time_limit_ns: u64,
}

impl LatencyReport {
    /// The report of `rows` and the priority-inversion runs `inversion` (their watchdog
    /// `watchdog_ns`), measured by `config` under `header`; `skipped` says what did not run
    /// and why.
    pub fn new(
        header: Header,
        config: &LatencyConfig,
        rows: Vec<LatencyRow>,
        inversion: Vec<InversionResult>,
        watchdog_ns: u64,
        skipped: Vec<String>,
    ) -> LatencyReport {
        LatencyReport {
            header,
            cpu: config.cpu,
            iterations: config.iterations as u64,
            period_ns: config.period_ns,
            results: rows,
            priority_inversion: inversion,
            skipped,
            watchdog_ns,
            time_limit_ns: config.time_limit_ns,
        }
    }
}

/// A scheduling class as the report names it.
fn class_name(class: Class) -> &'static str {
    match class {
        Class::Other => "SCHED_OTHER",
        Class::Fifo => "SCHED_FIFO",
    }
}

impl Report for LatencyReport {
    /// One row per test and class, and per priority-inversion run.
    fn csv(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(
            out,
            "test,class,n,min_ns,mean_ns,p50_ns,p90_ns,p99_ns,p99_9_ns,max_ns,watchdog_fired"
        )?;
        for r in &self.results {
            let d = &r.latency_ns;
            writeln!(
                out,
                "{},{},{},{},{:.0},{},{},{},{},{},",
                r.test,
                class_name(r.class),
                d.n,
                d.min_ns,
                r.mean_ns,
                d.p50_ns,
                d.p90_ns,
                d.p99_ns,
                d.p99_9_ns,
                d.max_ns
            )?;
        }
        // One run each: the high thread's wait is every column's value.
        for r in &self.priority_inversion {
            let w = r.high_wait_ns;
            writeln!(
                out,
                "priority-inversion:{},SCHED_FIFO,1,{w},{w},{w},{w},{w},{w},{w},{}",
                r.lock.name().replace(' ', "-"),
                r.watchdog_fired
            )?;
        }
        Ok(())
    }

    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        let cpu = self.cpu;
        let title = format!(
            "rtemu lab latency: threads pinned to CPU {cpu}, {} samples per test, preemption period {}",
            self.iterations,
            format_duration_ns(self.period_ns)
        );
        write_header(out, &title, &self.header)?;
        writeln!(
            out,
            "{:<12} {:<12} {:>7} │ {:>9} {:>9} {:>9} {:>9} {:>9} {:>10}",
            "test", "class", "n", "min", "avg", "p50", "p99", "p99.9", "max"
        )?;
        writeln!(
            out,
            "{:<12} {:<12} {:>7} │ {:>61}",
            "", "", "", "latency in µs"
        )?;
        for r in &self.results {
            let d = &r.latency_ns;
            let class = class_name(r.class);
            if d.n == 0 {
                writeln!(out, "{:<12} {:<12} {:>7} │ no samples", r.test, class, 0)?;
                continue;
            }
            writeln!(
                out,
                "{:<12} {:<12} {:>7} │ {:>9} {:>9} {:>9} {:>9} {:>9} {:>10}",
                r.test,
                class,
                d.n,
                us_i(d.min_ns),
                us(r.mean_ns),
                us_i(d.p50_ns),
                us_i(d.p99_ns),
                us_i(d.p99_9_ns),
                us_i(d.max_ns),
            )?;
        }
        if !self.priority_inversion.is_empty() {
            writeln!(
                out,
                "\npriority inversion (SCHED_FIFO 10/20/30 on CPU {cpu}, critical section 2 ms, watchdog {}):",
                format_duration_ns(self.watchdog_ns)
            )?;
            for r in &self.priority_inversion {
                let protocol = r.lock.name();
                let verdict = match (r.watchdog_fired, r.lock) {
                    (true, InversionLock::Spin) => {
                        "INVERSION: the spinning waiter kept the lock holder off the CPU until the \
                         watchdog ended it"
                    }
                    (true, _) => {
                        "INVERSION: the medium thread starved the lock holder until the watchdog \
                         ended it"
                    }
                    (false, InversionLock::Inherit) => {
                        "no inversion: the holder was boosted and released the lock"
                    }
                    (false, _) => "no inversion: the holder released the lock in time",
                };
                writeln!(
                    out,
                    "  {protocol:<21} high thread waited {:>10} µs   {verdict}",
                    us(r.high_wait_ns as f64)
                )?;
            }
        }
        write_skipped(out, &self.skipped)
    }

    fn complete(&self) -> anyhow::Result<()> {
        let empty: Vec<String> = self
            .results
            .iter()
            .filter(|r| r.latency_ns.n == 0)
            .map(|r| format!("{} {:?}", r.test, r.class))
            .collect();
        no_samples(
            &empty,
            &format!(
                "took no sample within --time-limit {}",
                format_duration_ns(self.time_limit_ns)
            ),
        )
    }
}
