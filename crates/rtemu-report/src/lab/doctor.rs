//! `rtemu lab doctor`: what timing this machine can promise, and what to change.

use std::io::{self, Write};

use rtemu_clock::time::format_duration_ns;
use rtemu_lab::doctor::Facts;
use rtemu_lab::env::Header;
use rtemu_lab::sleep::MethodResult;
use serde::Serialize;

use super::{write_header, Report};
use crate::text::us_i;

/// The doctor's verdict: the machine's facts, a sleep test and advice.
#[derive(Debug, Serialize)]
pub struct DoctorReport {
    header: Header,
    facts: Facts,
    sleep_test: MethodResult,
    /// The same test with one busy loop per CPU beside it.
    sleep_test_loaded: MethodResult,
    advice: Vec<String>,
    /// Length of each sleep test.
    #[serde(skip)]
    duration_ns: u64,
}

impl DoctorReport {
    /// The verdict on `facts`, `sleep_test` and `sleep_test_loaded` (each ran for
    /// `duration_ns`), with `advice`.
    pub fn new(
        header: Header,
        facts: Facts,
        sleep_test: MethodResult,
        sleep_test_loaded: MethodResult,
        advice: Vec<String>,
        duration_ns: u64,
    ) -> DoctorReport {
        DoctorReport {
            header,
            facts,
            sleep_test,
            sleep_test_loaded,
            advice,
            duration_ns,
        }
    }
}

impl Report for DoctorReport {
    /// The facts and the sleep test's figures as one row.
    fn csv(&self, out: &mut dyn Write) -> io::Result<()> {
        let (facts, test) = (&self.facts, &self.sleep_test);
        writeln!(
            out,
            "preemption,clocksource,hz,timer_slack_ns,rt_runtime_us,isolated_cpus,virtualization,\
             fifo_permitted,mlock_permitted,dma_latency_permitted,method,completed,min_ns,p50_ns,p90_ns,p99_ns,\
             p99_9_ns,max_ns,loaded_completed,loaded_p50_ns,loaded_p99_ns,loaded_max_ns"
        )?;
        let l = &self.sleep_test_loaded.error_ns;
        let text = |v: Option<String>| v.unwrap_or_default().replace(',', ";");
        let d = &test.error_ns;
        writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            facts.preemption.replace(',', ";"),
            text(facts.clocksource.clone()),
            text(facts.hz.map(|hz| hz.to_string())),
            text(facts.timer_slack_ns.map(|ns| ns.to_string())),
            text(facts.rt_runtime_us.map(|us| us.to_string())),
            text(facts.isolated_cpus.clone()),
            text(facts.virtualization.clone()),
            facts.fifo_permitted,
            facts.mlock_permitted,
            facts.dma_latency_permitted,
            test.method,
            test.completed,
            d.min_ns,
            d.p50_ns,
            d.p90_ns,
            d.p99_ns,
            d.p99_9_ns,
            d.max_ns,
            self.sleep_test_loaded.completed,
            l.p50_ns,
            l.p99_ns,
            l.max_ns
        )
    }

    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        let (facts, test) = (&self.facts, &self.sleep_test);
        let yes = |b: bool| if b { "yes" } else { "no" };
        let or_unknown = |v: Option<String>| v.unwrap_or_else(|| "unknown".to_owned());
        write_header(
            out,
            &format!(
                "rtemu lab doctor: a {} sleep test idle and one with every CPU busy, then the \
                 verdict",
                format_duration_ns(self.duration_ns)
            ),
            &self.header,
        )?;
        writeln!(out, "preemption     {}", facts.preemption)?;
        writeln!(
            out,
            "clocksource    {}",
            or_unknown(facts.clocksource.clone())
        )?;
        writeln!(
            out,
            "HZ             {}",
            or_unknown(facts.hz.map(|hz| hz.to_string()))
        )?;
        writeln!(
            out,
            "timer slack    {}",
            or_unknown(
                facts
                    .timer_slack_ns
                    .map(|ns| format_duration_ns(ns).to_string())
            )
        )?;
        writeln!(
            out,
            "RT throttling  {}",
            match facts.rt_runtime_us {
                Some(-1) => "off".to_owned(),
                Some(us) => format!("{us} µs per second"),
                None => "unknown".to_owned(),
            }
        )?;
        writeln!(
            out,
            "isolated CPUs  {}",
            match facts.isolated_cpus.as_deref() {
                Some("") | None => "none",
                Some(list) => list,
            }
        )?;
        writeln!(
            out,
            "virtualised    {}",
            facts.virtualization.as_deref().unwrap_or("no")
        )?;
        writeln!(
            out,
            "SCHED_FIFO     {}    mlockall {}    cpu_dma_latency {}",
            yes(facts.fifo_permitted),
            yes(facts.mlock_permitted),
            yes(facts.dma_latency_permitted)
        )?;
        let d = &test.error_ns;
        let l = &self.sleep_test_loaded.error_ns;
        let class = match (facts.fifo_permitted, facts.dma_latency_permitted) {
            (true, true) => " under SCHED_FIFO, timer slack 1ns, cpu_dma_latency 0",
            (true, false) => " under SCHED_FIFO, timer slack 1ns",
            (false, true) => " under SCHED_OTHER, cpu_dma_latency 0",
            (false, false) => " under SCHED_OTHER",
        };
        for (name, t) in [("idle", test), ("CPUs busy", &self.sleep_test_loaded)] {
            let e = &t.error_ns;
            writeln!(
                out,
                "{}sleep test     {name}: {} requests with {}{class}: late by {} µs median, {} µs \
                 p99, {} µs max",
                if name == "idle" { "\n" } else { "" },
                t.completed,
                t.method,
                us_i(e.p50_ns),
                us_i(e.p99_ns),
                us_i(e.max_ns),
            )?;
        }
        writeln!(
            out,
            "verdict        rtemu can release packets within {} µs of their time in 99 % of cases \
             ({} µs with every CPU busy) and within {} µs in every case measured ({} µs busy)",
            us_i(d.p99_ns),
            us_i(l.p99_ns),
            us_i(d.max_ns),
            us_i(l.max_ns)
        )?;
        if !self.advice.is_empty() {
            writeln!(out, "\nto do better:")?;
            for line in &self.advice {
                writeln!(out, "  - {line}")?;
            }
        }
        Ok(())
    }
}
