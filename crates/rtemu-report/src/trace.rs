//! A trace's statistics (`rtemu trace stats`): as text, as JSON with what its framed header
//! says, and as a variance-time plot; traces written whole ([`TraceOutput`], [`generate`]) and
//! the summaries of `trace gen` and `trace convert`.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use rtemu_trace::gen::Generator;
use rtemu_trace::stats::TraceStats;
use rtemu_trace::{Action, Format, Header, RecordWriter};

use crate::output::Output;

use crate::plot::{Axis, Chart, Series, Style};
use crate::text::write_indented;

fn ms(ns: f64) -> String {
    format!("{:.3} ms", ns / 1e6)
}

/// The statistics `s` of the trace at `path`, in the `format` form with `header` (framed
/// traces), as text.
pub fn write_stats(
    out: &mut impl Write,
    path: &Path,
    format: Format,
    header: Option<&Header>,
    s: &TraceStats,
) -> io::Result<()> {
    writeln!(out, "{} ({} form)", path.display(), format.name())?;
    if let Some(h) = header {
        match h.flow {
            Some(f) => writeln!(out, "flow        {f}")?,
            None => writeln!(out, "flow        none (the trace names no flow)")?,
        }
        write!(out, "provenance  ")?;
        write_indented(out, &h.provenance, 12)?;
        writeln!(out, "unit        {}", h.unit)?;
    }
    writeln!(
        out,
        "records     {}   pass {}   drop {} ({:.4} %)   dup {} ({:.4} %)",
        s.records,
        s.passes,
        s.drops,
        100.0 * s.drop_fraction,
        s.dups,
        100.0 * s.dup_fraction
    )?;
    if let Some(d) = &s.delay {
        writeln!(
            out,
            "delay       mean {}   std {}   min {}   max {}",
            ms(d.mean_ns),
            ms(d.std_ns),
            ms(d.min_ns as f64),
            ms(d.max_ns as f64)
        )?;
        let p: Vec<String> = d
            .percentiles_ns
            .iter()
            .map(|(p, v)| format!("p{p} {}", ms(*v as f64)))
            .collect();
        writeln!(out, "percentiles {}", p.join("   "))?;
    }
    let ac: Vec<String> = s
        .autocorrelation
        .iter()
        .map(|(lag, r)| format!("lag {lag}: {r:.4}"))
        .collect();
    writeln!(
        out,
        "autocorr.   {}   (first {} delays)",
        ac.join("   "),
        s.series_len
    )?;
    for h in &s.hurst {
        writeln!(
            out,
            "Hurst       {:.3}  {} (scales {}..{}, {} points)",
            h.hurst, h.method, h.fit_min, h.fit_max, h.points
        )?;
    }
    if s.hurst.is_empty() {
        let why = if s.series_len < 128 {
            "too few delays (need 128)"
        } else {
            "the delays are constant"
        };
        writeln!(out, "Hurst       no estimate: {why}")?;
    }
    Ok(())
}

/// The statistics `s` as JSON, with the trace's form and what its framed header says (null
/// for other forms).
pub fn stats_json(
    s: &TraceStats,
    format: Format,
    header: Option<&Header>,
) -> serde_json::Result<serde_json::Value> {
    let mut v = serde_json::to_value(s)?;
    if let serde_json::Value::Object(fields) = &mut v {
        fields.insert("format".into(), format.name().into());
        fields.insert(
            "header".into(),
            header.map_or(serde_json::Value::Null, |h| {
                serde_json::json!({
                    "unit": h.unit.to_string(),
                    "flow": h.flow.map(|f| f.to_string()),
                    "provenance": h.provenance,
                })
            }),
        );
    }
    Ok(v)
}

/// The variance-time plot of `s` (the trace at `file`): the variance of the block means of
/// `m` delays against `m`, on log-log axes, with the aggregated-variance fit (slope `2H − 2`)
/// and, for comparison, the slope −1 of a series without long-range dependence, both through
/// the first point.
pub fn variance_time_chart(file: &Path, s: &TraceStats) -> anyhow::Result<Chart> {
    let fit = s.hurst.iter().find(|h| h.method == "aggregated-variance");
    let (Some(fit), [first, .., last]) = (fit, &s.variance_time[..]) else {
        anyhow::bail!(
            "--plot: {} delays are too few for a variance-time plot (at least 256)",
            s.series_len
        );
    };
    // Variances in ms².
    let ms2 = |v: f64| v / 1e12;
    let line = |slope: f64| {
        [first.0, last.0]
            .iter()
            .map(|&m| {
                (
                    m as f64,
                    ms2(first.1) * (m as f64 / first.0 as f64).powf(slope),
                )
            })
            .collect()
    };
    Ok(Chart {
        title: format!("Variance-time plot: {}", file.display()),
        x: Axis::log("aggregation level m (delays per block)"),
        y: Axis::log("variance of the block means (ms²)"),
        series: vec![
            Series {
                name: "measured".into(),
                points: s
                    .variance_time
                    .iter()
                    .map(|&(m, v)| (m as f64, ms2(v)))
                    .collect(),
                style: Style::Points,
            },
            Series {
                name: format!("aggregated-variance fit, H = {:.3}", fit.hurst),
                points: line(2.0 * fit.hurst - 2.0),
                style: Style::Lines,
            },
            Series {
                name: "H = 0.5 (slope −1)".into(),
                points: line(-1.0),
                style: Style::Lines,
            },
        ],
        diagonal: false,
    })
}
/// A trace being written: whole or not at all, never over one of the command's inputs (see
/// [`Output`]); errors name the file.
#[derive(Debug)]
pub struct TraceOutput {
    writer: RecordWriter<Output>,
    path: PathBuf,
}

impl TraceOutput {
    /// Starts writing `path` in `format` under `header`, refusing when it is one of `inputs`.
    pub fn create(
        path: &Path,
        inputs: &[&Path],
        format: Format,
        header: &Header,
    ) -> anyhow::Result<TraceOutput> {
        Ok(TraceOutput {
            writer: RecordWriter::new(Output::create(path, inputs)?, format, header)?,
            path: path.to_owned(),
        })
    }

    /// Writes one record.
    pub fn write(&mut self, action: Action) -> anyhow::Result<()> {
        let path = &self.path;
        self.writer
            .write(action)
            .with_context(|| format!("writing {}", path.display()))
    }

    /// Finishes the file and puts it in place; returns the records written.
    pub fn commit(self) -> anyhow::Result<u64> {
        let records = self.writer.records_written();
        self.writer
            .finish()
            .with_context(|| format!("writing {}", self.path.display()))?
            .commit()?;
        Ok(records)
    }
}

/// Writes `count` records of `generator` to `path` in `format` under `header`, whole or not
/// at all; returns the records written and what the run came to.
pub fn generate<G: Generator>(
    mut generator: G,
    count: u64,
    path: &Path,
    format: Format,
    header: &Header,
) -> anyhow::Result<(u64, G::Outcome)> {
    let mut out = TraceOutput::create(path, &[], format, header)?;
    for _ in 0..count {
        out.write(generator.next_action())?;
    }
    Ok((out.commit()?, generator.outcome()))
}

/// The `--json` summary of `rtemu trace gen`.
#[derive(Debug, serde::Serialize)]
pub struct GenSummary<'a> {
    /// The generator: fgn, onoff, iid or netem.
    pub kind: &'static str,
    /// Records written.
    pub records: u64,
    /// Where the trace was written.
    pub output: String,
    /// The output's form: raw, framed or text.
    pub format: &'static str,
    /// The seed of the generator's random streams.
    pub seed: u64,
    /// The generator's parameters as it used them (durations in ns).
    pub parameters: serde_json::Value,
    /// What the generator reports about its run (clamped delays, dropped probes, …).
    pub outcome: serde_json::Value,
    /// The command line that regenerates the trace, after the text of `--provenance` if given
    /// (also in a framed output's header).
    pub provenance: &'a str,
    /// The flow pattern of a framed output's header (`--flow`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flow: Option<String>,
}

/// The `--json` summary of `rtemu trace convert`.
#[derive(Debug, serde::Serialize)]
pub struct ConvertSummary {
    /// The input file.
    pub input: String,
    /// The input's form: raw, framed or text for a trace, `series` with --series-pps,
    /// `capture` with --receiver.
    pub input_format: String,
    /// The output file.
    pub output: String,
    /// The output's form: raw, framed or text.
    pub output_format: &'static str,
    /// Time unit of a framed output's header.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// Flow pattern of a framed output's header (`--flow`, or the input's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flow: Option<String>,
    /// Provenance of a framed output's header.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provenance: Option<String>,
    /// Records written.
    pub records: u64,
    /// With --series-pps: the packet rate and the interpolation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub series: Option<serde_json::Value>,
    /// With --receiver: the receiver capture and what matching the two captures found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub captures: Option<serde_json::Value>,
}

impl ConvertSummary {
    /// The summary of `records` written from `input` (in `input_format`) to `output` in form
    /// `to` under `header`; `series` and `captures` are left for the caller.
    pub fn new(
        input: &Path,
        output: &Path,
        input_format: &str,
        to: Format,
        header: &Header,
        records: u64,
    ) -> Self {
        let framed = to == Format::Framed;
        ConvertSummary {
            input: input.display().to_string(),
            input_format: input_format.to_owned(),
            output: output.display().to_string(),
            output_format: to.name(),
            unit: framed.then(|| header.unit.to_string()),
            flow: header.flow.filter(|_| framed).map(|f| f.to_string()),
            provenance: framed.then(|| header.provenance.clone()),
            records,
            series: None,
            captures: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtemu_trace::iid::{Dist, IidTrace};
    use rtemu_trace::RecordReader;

    fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("rtemu-report-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_generated_trace_holds_its_records_and_outcome() {
        let d = dir("gen");
        let path = d.join("c.rplx");
        let header = Header {
            provenance: "test".into(),
            ..Header::default()
        };
        let g = IidTrace::new(Dist::Constant, 5e6, 0.0, 1_000, None, 1).unwrap();
        let (records, outcome) = generate(g, 7, &path, Format::Framed, &header).unwrap();
        let read = RecordReader::open(&path, None).map(|r| {
            let provenance = r.header().map(|h| h.provenance.clone());
            (provenance, r.collect::<Result<Vec<_>, _>>().unwrap())
        });
        std::fs::remove_dir_all(&d).unwrap();
        let (provenance, actions) = read.unwrap();
        assert_eq!((records, outcome.clamped_negative_delays), (7, 0));
        assert_eq!(provenance.as_deref(), Some("test"));
        assert_eq!(
            actions,
            [Action::Pass {
                delay_ns: 5_000_000
            }; 7]
        );
    }

    #[test]
    fn a_trace_is_never_written_over_an_input_nor_left_half_written() {
        let d = dir("out");
        let input = d.join("in.txt");
        std::fs::write(&input, "drop\n").unwrap();
        let over = TraceOutput::create(&input, &[&input], Format::Text, &Header::default());
        let raw = d.join("out.rpl");
        let mut out =
            TraceOutput::create(&raw, &[&input], Format::Raw, &Header::default()).unwrap();
        // A delay finer than the raw form's microsecond cannot be written.
        let fine = out.write(Action::Pass { delay_ns: 1 }).unwrap_err();
        drop(out);
        let left = raw.exists();
        std::fs::remove_dir_all(&d).unwrap();
        assert!(over.unwrap_err().to_string().contains("also an input"));
        assert!(format!("{fine:#}").starts_with(&format!("writing {}", raw.display())));
        assert!(!left, "a failed trace stays behind");
    }
}
