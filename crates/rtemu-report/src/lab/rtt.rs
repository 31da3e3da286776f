//! `rtemu lab rtt`: round trips per size, UDP and/or raw Ethernet, as the application and
//! as the kernel's timestamps see them (the real-time UDP paper's benchmark).

use std::io::{self, Write};
use std::path::Path;

use rtemu_clock::time::format_duration_ns;
use rtemu_lab::env::Header;
use rtemu_lab::rtt::plan::Probes;
use rtemu_lab::rtt::{Endpoint, RttConfig, SizeResult, Sweep};
use serde::{Serialize, Serializer};

use super::{write_header, Report};
use crate::plot::{Axis, Chart, Series, Style};
use crate::text::{no_samples, us, us_i};

/// One protocol's sweep: what was asked and what came back.
#[derive(Debug)]
struct RttRun {
    /// What was asked.
    config: RttConfig,
    /// What came back.
    sweep: Sweep,
}

/// The round-trip report: one table per protocol. As JSON, one protocol's report is an
/// object; several are one object with each under its protocol's name (`udp`, `raw`), in
/// the order they ran.
#[derive(Debug)]
pub struct RttReport {
    header: Header,
    runs: Vec<RttRun>,
    /// One-way times (half the round trip).
    half_rtt: bool,
    /// Whether the UDP echo was started on loopback for the run.
    local_echo: bool,
    /// Probes per size.
    count: u64,
    /// Discarded probes before each size.
    warmup: u64,
    /// How long each probe waited for its reply.
    timeout_ns: u64,
}

impl RttReport {
    /// The report of the sweeps `configs` of `probes`, which came back as `sweeps`, measured
    /// under `header`; `half_rtt` halves every time into a one-way one; `local_echo` says the
    /// UDP echo ran on loopback for the run.
    pub fn new(
        header: Header,
        (configs, sweeps): (Vec<RttConfig>, Vec<Sweep>),
        half_rtt: bool,
        local_echo: bool,
        probes: &Probes,
    ) -> RttReport {
        let runs = configs.into_iter().zip(sweeps);
        let mut runs: Vec<RttRun> = runs
            .map(|(config, sweep)| RttRun { config, sweep })
            .collect();
        if half_rtt {
            for run in &mut runs {
                run.sweep.results.iter_mut().for_each(SizeResult::halve);
            }
        }
        RttReport {
            header,
            runs,
            half_rtt,
            local_echo,
            count: probes.count,
            warmup: probes.warmup,
            timeout_ns: probes.timeout_ns,
        }
    }
}

/// One protocol's JSON report.
#[derive(Serialize)]
struct ProtocolReport<'a> {
    header: &'a Header,
    protocol: &'a str,
    target: String,
    half_rtt: bool,
    /// Why the kernel's columns are empty, when they are.
    kernel_timestamps: Option<&'a str>,
    results: &'a [SizeResult],
}

impl<'a> ProtocolReport<'a> {
    fn of(report: &'a RttReport, run: &'a RttRun) -> ProtocolReport<'a> {
        ProtocolReport {
            header: &report.header,
            protocol: run.config.target.protocol(),
            target: run.config.target.to_string(),
            half_rtt: report.half_rtt,
            kernel_timestamps: run.sweep.kernel_notice.as_deref(),
            results: &run.sweep.results,
        }
    }
}

impl Serialize for RttReport {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // One protocol keeps its report's own shape; both nest theirs by protocol.
        match self.runs.as_slice() {
            [run] => ProtocolReport::of(self, run).serialize(serializer),
            runs => serializer.collect_map(
                runs.iter()
                    .map(|run| (run.config.target.protocol(), ProtocolReport::of(self, run))),
            ),
        }
    }
}

impl Report for RttReport {
    /// One row per protocol and size, the protocol first.
    fn csv(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(
            out,
            "protocol,size,sent,received,lost,duplicates,reordered,best_ns,mean_ns,worst_ns,\
             p50_ns,p99_ns,p99_9_ns,kernel_stamped,kernel_best_ns,kernel_mean_ns,\
             kernel_worst_ns,kernel_p50_ns,kernel_p99_ns,kernel_p99_9_ns"
        )?;
        for run in &self.runs {
            let protocol = run.config.target.protocol();
            for r in &run.sweep.results {
                let d = &r.rtt_ns;
                // Empty kernel fields when the kernel gave no stamps.
                let kernel = match (&r.kernel_rtt_ns, r.kernel_mean_ns) {
                    (Some(k), Some(mean)) => format!(
                        "{},{},{mean:.0},{},{},{},{}",
                        k.n, k.min_ns, k.max_ns, k.p50_ns, k.p99_ns, k.p99_9_ns
                    ),
                    _ => "0,,,,,,".to_owned(),
                };
                // Empty figures, not zeros, for a size with no reply.
                let app = if d.n == 0 {
                    ",,,,,".to_owned()
                } else {
                    format!(
                        "{},{:.0},{},{},{},{}",
                        d.min_ns, r.mean_ns, d.max_ns, d.p50_ns, d.p99_ns, d.p99_9_ns
                    )
                };
                writeln!(
                    out,
                    "{protocol},{},{},{},{},{},{},{app},{kernel}",
                    r.size, r.sent, r.received, r.lost, r.duplicates, r.reordered,
                )?;
            }
        }
        Ok(())
    }

    /// The header once, then a table per protocol (titled by its target when there are two).
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        let runs = &self.runs;
        let targets: Vec<String> = runs
            .iter()
            .map(|run| match (&run.config.target, self.local_echo) {
                (Endpoint::Udp(_), true) => format!("{} (local echo)", run.config.target),
                (target, _) => target.to_string(),
            })
            .collect();
        let title = format!(
            "rtemu lab rtt: {}, {} probes per size after {} discarded, {}",
            targets.join(", then "),
            self.count,
            self.warmup,
            if self.half_rtt {
                "one-way (half the round trip)"
            } else {
                "round trip"
            }
        );
        write_header(out, &title, &self.header)?;
        for (run, target) in runs.iter().zip(&targets) {
            if runs.len() > 1 {
                let what = run.config.target.size_limits().what;
                writeln!(out, "{target}: size = {what}\n")?;
            }
            write_table(out, &run.sweep)?;
            if runs.len() > 1 {
                writeln!(out)?;
            }
        }
        Ok(())
    }

    /// Best, average and worst round trip vs size (the UDP paper's figures): for one
    /// protocol against its own size (UDP payload or Ethernet frame) with the kernel's
    /// average where it stamped the probes; for both against the Ethernet frame that carries
    /// the probe, so that the two compare size for size.
    fn draw(&self, path: &Path) -> anyhow::Result<()> {
        let chart = match self.runs.as_slice() {
            [run] => one_protocol(run),
            runs => protocols_compared(runs),
        };
        chart.draw(path)
    }

    fn complete(&self) -> anyhow::Result<()> {
        let unanswered: Vec<String> = self
            .runs
            .iter()
            .flat_map(|run| {
                let protocol = run.config.target.protocol();
                run.sweep
                    .results
                    .iter()
                    .filter(|r| r.received == 0)
                    .map(move |r| format!("{protocol} size {}", r.size))
            })
            .collect();
        no_samples(
            &unanswered,
            &format!(
                "got no reply within --timeout {}",
                format_duration_ns(self.timeout_ns)
            ),
        )
    }
}

/// One sweep's table: the counts, the application's figures and the kernel's.
fn write_table(out: &mut dyn Write, sweep: &Sweep) -> io::Result<()> {
    if let Some(notice) = &sweep.kernel_notice {
        writeln!(out, "notice      {notice}\n")?;
    }
    writeln!(
        out,
        "{:>6} {:>6} {:>6} {:>5} {:>5} {:>5} │ {:>9} {:>9} {:>9} │ {:>9} {:>9} {:>9} │ {:>9} {:>9} {:>9} │ {:>9}",
        "size",
        "sent",
        "recv",
        "lost",
        "dup",
        "reord",
        "best",
        "average",
        "worst",
        "p50",
        "p99",
        "p99.9",
        "best",
        "average",
        "worst",
        "own"
    )?;
    writeln!(
        out,
        "{:>6} {:>31} │ {:>63} │ {:>29} │ {:>9}",
        "bytes", "", "application, µs", "kernel stamps, µs", "app−kern"
    )?;
    for r in &sweep.results {
        if r.received == 0 {
            writeln!(
                out,
                "{:>6} {:>6} {:>6} {:>5} {:>5} {:>5} │ no replies, no samples",
                r.size, r.sent, r.received, r.lost, r.duplicates, r.reordered
            )?;
            continue;
        }
        let d = &r.rtt_ns;
        let (k_best, k_mean, k_worst, own) = match (&r.kernel_rtt_ns, r.kernel_mean_ns) {
            (Some(k), Some(mean)) => (
                us_i(k.min_ns),
                us(mean),
                us_i(k.max_ns),
                us(r.mean_ns - mean),
            ),
            _ => Default::default(),
        };
        writeln!(
            out,
            "{:>6} {:>6} {:>6} {:>5} {:>5} {:>5} │ {:>9} {:>9} {:>9} │ {:>9} {:>9} {:>9} │ {:>9} {:>9} {:>9} │ {:>9}",
            r.size,
            r.sent,
            r.received,
            r.lost,
            r.duplicates,
            r.reordered,
            us_i(d.min_ns),
            us(r.mean_ns),
            us_i(d.max_ns),
            us_i(d.p50_ns),
            us_i(d.p99_ns),
            us_i(d.p99_9_ns),
            k_best,
            k_mean,
            k_worst,
            own,
        )?;
    }
    Ok(())
}

/// A curve over the sizes that got replies: `x` and `y` of each, `y` in ns.
fn curve(
    name: String,
    results: &[SizeResult],
    x: &dyn Fn(&SizeResult) -> f64,
    y: &dyn Fn(&SizeResult) -> Option<f64>,
) -> Series {
    Series {
        name,
        points: results
            .iter()
            .filter(|r| r.received > 0)
            .filter_map(|r| Some((x(r), y(r)? / 1e3)))
            .collect(),
        style: Style::Lines,
    }
}

/// The paper's three curves, each named `PREFIXbest` and so on.
fn three_curves(
    prefix: &str,
    results: &[SizeResult],
    x: &dyn Fn(&SizeResult) -> f64,
) -> Vec<Series> {
    vec![
        curve(format!("{prefix}best"), results, x, &|r| {
            Some(r.rtt_ns.min_ns as f64)
        }),
        curve(format!("{prefix}average"), results, x, &|r| Some(r.mean_ns)),
        curve(format!("{prefix}worst"), results, x, &|r| {
            Some(r.rtt_ns.max_ns as f64)
        }),
    ]
}

/// Log: the worst case is often orders of magnitude above the best.
fn rtt_axis() -> Axis {
    Axis::log("round trip, µs")
}

fn one_protocol(run: &RttRun) -> Chart {
    let results = &run.sweep.results;
    let size = |r: &SizeResult| r.size as f64;
    let mut series = three_curves("", results, &size);
    series.push(curve("kernel average".into(), results, &size, &|r| {
        r.kernel_mean_ns
    }));
    series.retain(|s| !s.points.is_empty());
    let (title, size) = match run.config.target {
        Endpoint::Raw { .. } => ("raw Ethernet round trip vs frame size", "frame, bytes"),
        Endpoint::Udp(_) => ("UDP round trip vs payload size", "payload, bytes"),
    };
    Chart {
        title: title.into(),
        x: Axis::linear(size),
        y: rtt_axis(),
        series,
        diagonal: false,
        legend_above: false,
    }
}

fn protocols_compared(runs: &[RttRun]) -> Chart {
    let mut series = Vec::new();
    let mut overheads = Vec::new();
    for run in runs {
        let target = &run.config.target;
        let frame = |r: &SizeResult| target.frame_len(r.size) as f64;
        let name = match target {
            Endpoint::Udp(_) => "UDP",
            Endpoint::Raw { .. } => "raw",
        };
        series.extend(three_curves(
            &format!("{name} "),
            &run.sweep.results,
            &frame,
        ));
        if let Endpoint::Udp(_) = target {
            overheads.push(format!("UDP: payload + {}", target.frame_overhead()));
        }
    }
    series.retain(|s| !s.points.is_empty());
    overheads.push("at least 60".into());
    Chart {
        title: "UDP and raw Ethernet round trip vs frame size".into(),
        x: Axis::linear(format!(
            "Ethernet frame without FCS, bytes ({})",
            overheads.join(", ")
        )),
        y: rtt_axis(),
        series,
        diagonal: false,
        legend_above: false,
    }
}
