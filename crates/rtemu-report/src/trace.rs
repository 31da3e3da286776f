//! A trace's statistics (`rtemu trace stats`): as text, as JSON with what its framed header
//! says, and as a variance-time plot; traces written whole ([`TraceOutput`]), generated
//! ([`generate`]) and converted ([`convert`]), with the summaries of `trace gen` and
//! `trace convert`.

use std::fmt;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use rtemu_sim::capture::CaptureReader;
use rtemu_sim::capture_pair::{actions_from_captures, PairStats};
use rtemu_sim::source::FrameSource;
use rtemu_trace::bench::{BenchPass, BenchPlan};
use rtemu_trace::flow::FlowPattern;
use rtemu_trace::format::Content;
use rtemu_trace::gen::Generator;
use rtemu_trace::series::{actions_at_rate, Interpolation, SeriesStream};
use rtemu_trace::stats::{StatsBuilder, TraceStats};
use rtemu_trace::{mahimahi, series};
use rtemu_trace::{Action, Format, Header, RecordReader, RecordWriter, TimeUnit, UnderrunPolicy};

use crate::output::Output;

use crate::plot::{Axis, Chart, Series, Style};
use crate::text::{ms, print_summary, write_indented};

/// The statistics `s` of the trace at `path`, in the `format` form with `header` (framed
/// traces), as text.
pub fn write_stats(
    out: &mut impl Write,
    path: &Path,
    format: Format,
    header: Option<&Header>,
    s: &TraceStats,
) -> io::Result<()> {
    let shown = path.display().to_string();
    let shown = rtemu_sys::terminal::printable(&shown);
    writeln!(out, "{shown} ({} form)", format.name())?;
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
        legend_above: false,
    })
}
/// What a trace file holds, as `trace stats` is told.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Per-packet actions, in this form or as detected.
    Actions(Option<Format>),
    /// A delay/loss time series.
    Series,
    /// Mahimahi delivery opportunities.
    Mahimahi,
}

/// `rtemu trace stats`: the statistics of the trace at `file`, of `kind` or the kind its name
/// or content shows, as text or `json` (an action trace's on `out`, the others' on stdout),
/// with an action trace's variance-time plot drawn to `plot` (checked before anything is
/// read).
pub fn stats(
    out: &mut impl Write,
    file: &Path,
    kind: Option<Kind>,
    (max_series, plot, json): (usize, Option<&Path>, bool),
) -> anyhow::Result<()> {
    let kind = match kind {
        Some(kind) => kind,
        None => match Content::sniff_file(file)? {
            Content::Actions(_) => Kind::Actions(None),
            Content::Series => Kind::Series,
            Content::Mahimahi => Kind::Mahimahi,
        },
    };
    if let Some(path) = plot {
        let name = match kind {
            Kind::Actions(_) => None,
            Kind::Series => Some("series"),
            Kind::Mahimahi => Some("mahimahi"),
        };
        if let Some(name) = name {
            anyhow::bail!(
                "--plot draws the delays of an action trace; {} is a {name} trace",
                file.display()
            );
        }
        crate::plot::Format::of(path)?;
        crate::output::refuse_inputs(path, &[file])?;
    }
    let format = match kind {
        Kind::Mahimahi => return print_summary(json, &mahimahi::Summary::read(file)?),
        Kind::Series => return print_summary(json, &series::Summary::read(file)?),
        Kind::Actions(format) => format,
    };
    let mut r = RecordReader::open(file, format)?;
    let mut b = StatsBuilder::new(max_series);
    r.for_each_record(|x| {
        b.add(x);
        anyhow::Ok(())
    })?;
    let s = b.finish();
    if s.records == 0 {
        anyhow::bail!("{}: the trace holds no records", file.display());
    }
    if let Some(path) = plot {
        variance_time_chart(file, &s)?.draw(path)?;
    }
    if json {
        crate::text::json(out, &stats_json(&s, r.format(), r.header())?)
    } else {
        Ok(write_stats(out, file, r.format(), r.header(), &s)?)
    }
}

/// `rtemu trace bench`'s text: the file of `bytes` and how `plan` read it, then each pass.
pub fn write_bench(
    out: &mut impl Write,
    file: &Path,
    bytes: u64,
    plan: &BenchPlan,
    passes: &[BenchPass],
) -> io::Result<()> {
    let c = &plan.config;
    let pace = plan
        .pace
        .map_or("unlimited".to_owned(), |r| format!("{r} records/s"));
    writeln!(
        out,
        "{}: {bytes} bytes; prefetch blocks of {} records x {}; under-run policy {}; pace {pace}",
        file.display(),
        c.block_records,
        c.blocks,
        c.underrun,
    )?;
    if plan.cold {
        writeln!(
            out,
            "cold pass: file dropped from the page cache first (fsync + posix_fadvise DONTNEED)"
        )?;
    }
    for p in passes {
        writeln!(
            out,
            "{:<6} {:>12} records in {:>8.3} s: {:>8.1} M records/s, {:>7.1} MB/s, {} under-runs",
            p.pass,
            p.records,
            p.seconds,
            p.records_per_second / 1e6,
            p.megabytes_per_second,
            p.underruns
        )?;
    }
    Ok(())
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

    /// Finishes the file and puts it in place; returns the records written. A trace of no
    /// records is refused and not written (the file that stood there stays): an empty
    /// output is not a success.
    pub fn commit(self) -> anyhow::Result<u64> {
        let records = self.writer.records_written();
        if records == 0 {
            anyhow::bail!(
                "no records to write: {} is left as it was (a trace needs at least one)",
                self.path.display()
            );
        }
        self.writer
            .finish()
            .with_context(|| format!("writing {}", self.path.display()))?
            .commit()?;
        Ok(records)
    }
}

/// A generated trace, as `rtemu trace gen` is asked for it.
#[derive(Debug)]
pub struct GenRequest<'a> {
    /// The generator: fgn, onoff, iid or netem.
    pub kind: &'static str,
    /// Its parameters as it uses them (durations in ns).
    pub parameters: serde_json::Value,
    /// The command line that makes the same trace again: its provenance.
    pub command: String,
    /// Records to write.
    pub count: u64,
    /// The seed of the generator's random streams.
    pub seed: u64,
    /// Where to write it.
    pub output: &'a Path,
    /// The files the generator reads (a model's table), which the output must not be.
    pub inputs: &'a [&'a Path],
    /// Its form; by default the one its extension names.
    pub format: Option<Format>,
    /// The flow a framed output's header names.
    pub flow: Option<FlowPattern>,
    /// Text put before the command line in a framed output's provenance.
    pub provenance: Option<&'a str>,
}

/// Writes the records of `generator` as `request` asks (see [`Header::annotate`] for its
/// flow and provenance), whole or not at all, and sums up what was written.
pub fn generate<G: Generator>(
    mut generator: G,
    request: GenRequest<'_>,
) -> anyhow::Result<GenSummary> {
    let r = request;
    let format = Format::for_output(r.output, r.format)?;
    let mut header = Header {
        unit: TimeUnit::Us,
        flow: None,
        provenance: r.command,
    };
    header.annotate(r.flow, r.provenance, format, r.output)?;
    let mut out = TraceOutput::create(r.output, r.inputs, format, &header)?;
    for _ in 0..r.count {
        out.write(generator.next_action())?;
    }
    let records = out.commit()?;
    let outcome = generator.outcome();
    Ok(GenSummary {
        kind: r.kind,
        records,
        output: r.output.display().to_string(),
        format: format.name(),
        seed: r.seed,
        parameters: r.parameters,
        outcome: serde_json::to_value(&outcome)?,
        provenance: header.provenance,
        flow: header.flow.map(|f| f.to_string()),
        note: outcome.to_string(),
    })
}

/// The `--json` summary of `rtemu trace gen`; as words, the note it prints without.
#[derive(Debug, serde::Serialize)]
pub struct GenSummary {
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
    pub provenance: String,
    /// The flow pattern of a framed output's header (`--flow`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flow: Option<String>,
    /// The outcome in words.
    #[serde(skip)]
    pub note: String,
}

/// The note on what was written (after `rtemu: `).
impl fmt::Display for GenSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (n, out, note) = (self.records, &self.output, &self.note);
        write!(f, "wrote {n} records to {out} ({note})")
    }
}

/// The `--json` summary of `rtemu trace convert`; as words, the note it prints without.
#[derive(Debug, serde::Serialize)]
pub struct ConvertSummary {
    /// The input file.
    pub input: String,
    /// The input's form: raw, framed or text for a trace, `series` for a delay series,
    /// `capture` for two captures.
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
    /// From a delay series: the packet rate and the interpolation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub series: Option<SeriesSummary>,
    /// From two captures: the receiver capture and what matching the two found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub captures: Option<CapturesSummary>,
}

/// How a delay series became packets' fates.
#[derive(Debug, serde::Serialize)]
pub struct SeriesSummary {
    /// The interpolation between samples: step or linear.
    pub interpolation: String,
    /// The rate of the packets whose fates were written.
    pub packets_per_second: u64,
}

/// The receiver capture of a conversion from two captures, and what matching them found.
#[derive(Debug)]
pub struct CapturesSummary {
    /// The capture where the packets arrived.
    pub receiver: String,
    /// What matching the two captures found.
    pub stats: PairStats,
}

/// One object: the receiver beside the figures, every key in order like the rest.
impl serde::Serialize for CapturesSummary {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut value = serde_json::to_value(self.stats).map_err(serde::ser::Error::custom)?;
        value["receiver"] = self.receiver.clone().into();
        value.serialize(serializer)
    }
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

/// The note on what was written (after `rtemu: `).
impl fmt::Display for ConvertSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (n, out, form) = (self.records, &self.output, self.output_format);
        match (&self.series, &self.captures) {
            (_, Some(c)) => write!(f, "{}; wrote {out} ({form} form)", c.stats),
            (Some(_), None) => write!(f, "wrote {n} records to {out} ({form} form)"),
            (None, None) => write!(f, "converted {n} records to {out} ({form} form)"),
        }
    }
}

/// What [`convert`] reads.
#[derive(Clone, Copy, Debug)]
pub enum Source<'a> {
    /// An action trace, in this form or as detected.
    Trace(Option<Format>),
    /// A delay/loss time series, for packets at a rate (per second) with an interpolation
    /// between samples.
    Series(u64, Interpolation),
    /// A capture taken where packets were sent, with the capture of the same packets where
    /// they arrived.
    Captures {
        /// The capture where they arrived.
        receiver: &'a Path,
    },
}

/// Converts `input`, read as `source` says, to the action trace at `output` in form `to`,
/// written whole. Its header's unit is `unit`, else the input's, else µs; its provenance says
/// where the records came from (an input trace's own, when it has one); `annotate` adds what
/// the user asked the header to say, and `lost_flow` is told of a flow the input's header
/// names that the output's form cannot keep.
pub fn convert(
    input: &Path,
    source: Source<'_>,
    (output, to): (&Path, Format),
    unit: Option<TimeUnit>,
    annotate: impl FnOnce(&mut Header) -> anyhow::Result<()>,
    lost_flow: impl FnOnce(FlowPattern),
) -> anyhow::Result<ConvertSummary> {
    let header = |provenance| Header {
        unit: unit.unwrap_or(TimeUnit::Us),
        flow: None,
        provenance,
    };
    match source {
        Source::Trace(from) => {
            let mut r = RecordReader::open(input, from)?;
            let mut h = r.header().cloned().unwrap_or_default();
            h.unit = unit.unwrap_or(h.unit);
            if h.provenance.is_empty() {
                h.provenance = format!("converted from {}", input.display());
            }
            if let Some(flow) = h.flow.filter(|_| to != Format::Framed) {
                lost_flow(flow);
            }
            annotate(&mut h)?;
            let mut w = TraceOutput::create(output, &[input], to, &h)?;
            r.for_each_record(|x| w.write(x))?;
            let n = w.commit()?;
            Ok(ConvertSummary::new(
                input,
                output,
                r.format().name(),
                to,
                &h,
                n,
            ))
        }
        Source::Series(pps, interpolation) => {
            // Waiting for the reader: every record is the series's, none a substitute.
            let series = SeriesStream::open(input, interpolation, UnderrunPolicy::Wait)?;
            let mut h = header(format!(
                "delay series {} at {pps} packets/s, {interpolation:?} interpolation",
                input.display()
            ));
            annotate(&mut h)?;
            let mut w = TraceOutput::create(output, &[input], to, &h)?;
            for x in actions_at_rate(series, pps, to.resolution_ns(h.unit)) {
                w.write(x?)?;
            }
            let n = w.commit()?;
            let mut summary = ConvertSummary::new(input, output, "series", to, &h, n);
            summary.series = Some(SeriesSummary {
                interpolation: format!("{interpolation:?}").to_lowercase(),
                packets_per_second: pps,
            });
            Ok(summary)
        }
        Source::Captures { receiver } => {
            let mut h = header(format!(
                "sender capture {}, receiver capture {}",
                input.display(),
                receiver.display()
            ));
            annotate(&mut h)?;
            let resolution = to.resolution_ns(h.unit);
            let mut w = TraceOutput::create(output, &[input, receiver], to, &h)?;
            let mut written = Ok(());
            let mut received = CaptureReader::open(receiver)
                .with_context(|| format!("receiver capture {}", receiver.display()))?;
            let stats = actions_from_captures(
                || Ok(Box::new(CaptureReader::open(input)?) as Box<dyn FrameSource>),
                &mut received,
                |action| {
                    if written.is_ok() {
                        written = w.write(action.rounded(resolution));
                    }
                },
            )?;
            written?;
            let n = w.commit()?;
            let mut summary = ConvertSummary::new(input, output, "capture", to, &h, n);
            let receiver = receiver.display().to_string();
            summary.captures = Some(CapturesSummary { receiver, stats });
            Ok(summary)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtemu_trace::iid::{Dist, IidTrace};
    use rtemu_trace::RecordReader;

    /// A request for `count` records at `output`, its header saying `provenance`.
    fn request<'a>(output: &'a Path, count: u64, flow: Option<FlowPattern>) -> GenRequest<'a> {
        GenRequest {
            kind: "iid",
            parameters: serde_json::Value::Null,
            command: "test".into(),
            count,
            seed: 1,
            output,
            inputs: &[],
            format: None,
            flow,
            provenance: None,
        }
    }

    fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("rtemu-report-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_generated_trace_holds_its_records_and_outcome() {
        let d = dir("gen");
        let path = d.join("c.rplx");
        let g = IidTrace::new(Dist::Constant, 5e6, 0.0, 1_000, None, 1).unwrap();
        let summary = generate(g, request(&path, 7, None)).unwrap();
        let read = RecordReader::open(&path, None).map(|r| {
            let provenance = r.header().map(|h| h.provenance.clone());
            (provenance, r.collect::<Result<Vec<_>, _>>().unwrap())
        });
        std::fs::remove_dir_all(&d).unwrap();
        let (provenance, actions) = read.unwrap();
        assert_eq!(summary.records, 7);
        assert_eq!(summary.outcome["clamped_negative_delays"], 0);
        assert_eq!(
            summary.to_string(),
            format!(
                "wrote 7 records to {} (0 negative delays clamped to 0)",
                path.display()
            )
        );
        assert_eq!(provenance.as_deref(), Some("test"));
        assert_eq!(
            actions,
            [Action::Pass {
                delay_ns: 5_000_000
            }; 7]
        );
    }

    #[test]
    fn an_empty_trace_is_an_error_and_leaves_what_stood_there() {
        let d = dir("empty");
        let path = d.join("e.rpl");
        std::fs::write(&path, "old").unwrap();
        let g = IidTrace::new(Dist::Constant, 5e6, 0.0, 1_000, None, 1).unwrap();
        let e = generate(g, request(&path, 0, None)).unwrap_err();
        let kept = std::fs::read_to_string(&path);
        let names = std::fs::read_dir(&d).unwrap().count();
        std::fs::remove_dir_all(&d).unwrap();
        assert!(e.to_string().starts_with("no records to write"), "{e}");
        assert_eq!((kept.unwrap().as_str(), names), ("old", 1));
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

    #[test]
    fn a_conversion_keeps_what_the_form_can_hold_and_says_what_it_wrote() {
        let d = dir("convert");
        let (framed, text) = (d.join("in.rplx"), d.join("out.txt"));
        let flow = Some("proto=udp".parse().unwrap());
        let g = IidTrace::new(Dist::Constant, 5e6, 0.0, 1_000, None, 1).unwrap();
        generate(g, request(&framed, 3, flow)).unwrap();
        let mut lost = None;
        let to_text = convert(
            &framed,
            Source::Trace(None),
            (&text, Format::Text),
            None,
            |_| Ok(()),
            |flow| lost = Some(flow),
        );
        let series = d.join("path.series");
        std::fs::write(&series, "0 10 0\n1 20 1\n").unwrap();
        let from_series = convert(
            &series,
            Source::Series(2, Interpolation::Step),
            (&d.join("s.rpl"), Format::Raw),
            None,
            |_| Ok(()),
            |_| panic!("a series has no flow"),
        );
        std::fs::remove_dir_all(&d).unwrap();
        let to_text = to_text.unwrap();
        assert_eq!(lost, flow);
        assert_eq!(
            (to_text.input_format.as_str(), to_text.records),
            ("framed", 3)
        );
        assert_eq!(
            to_text.to_string(),
            format!("converted 3 records to {} (text form)", text.display())
        );
        let from_series = from_series.unwrap();
        // Packets at 0 s (10 ms) and 0.5 s (10 ms, step) and 1 s (lost).
        assert_eq!(from_series.records, 3);
        let json = serde_json::to_value(&from_series).unwrap();
        assert_eq!(
            json["series"],
            serde_json::json!({ "interpolation": "step", "packets_per_second": 2 })
        );
        assert!(from_series.to_string().starts_with("wrote 3 records to "));
    }

    #[test]
    fn stats_read_the_kind_from_the_file_and_plot_only_actions() {
        let d = dir("stats");
        let (trace, series, empty) = (d.join("t.rpl"), d.join("p.series"), d.join("e.rpl"));
        let g = IidTrace::new(Dist::Constant, 5e6, 0.0, 1_000, None, 1).unwrap();
        generate(g, request(&trace, 4, None)).unwrap();
        std::fs::write(&series, "0 10 0\n1 20 1\n").unwrap();
        std::fs::write(&empty, "").unwrap();
        let mut text = Vec::new();
        let read = stats(&mut text, &trace, None, (100, None, false));
        let svg = d.join("p.svg");
        let plot_series = stats(&mut Vec::new(), &series, None, (100, Some(&svg), false));
        let as_raw = Some(Kind::Actions(Some(Format::Raw)));
        let nothing = stats(&mut Vec::new(), &empty, as_raw, (100, None, false));
        std::fs::remove_dir_all(&d).unwrap();
        read.unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(
            text.starts_with(&format!(
                "{} (raw form)\nrecords     4   pass 4",
                trace.display()
            )),
            "{text}"
        );
        let e = plot_series.unwrap_err().to_string();
        assert!(e.ends_with("is a series trace"), "{e}");
        assert!(nothing
            .unwrap_err()
            .to_string()
            .ends_with("the trace holds no records"));
    }

    #[test]
    fn a_bench_says_how_it_read_then_each_pass() {
        let plan = BenchPlan {
            config: rtemu_trace::PrefetchConfig {
                block_records: 64,
                blocks: 4,
                ..rtemu_trace::PrefetchConfig::default()
            },
            cold: true,
            warm_passes: 0,
            pace: Some(1000),
            limit: None,
        };
        let pass = BenchPass {
            pass: "cold".into(),
            records: 10,
            underruns: 1,
            seconds: 0.5,
            records_per_second: 20.0,
            megabytes_per_second: 0.0,
        };
        let mut out = Vec::new();
        write_bench(&mut out, Path::new("t.rpl"), 40, &plan, &[pass]).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("t.rpl: 40 bytes; prefetch blocks of 64 records x 4;"));
        assert!(lines[0].ends_with("; pace 1000 records/s"), "{}", lines[0]);
        assert!(lines[1].starts_with("cold pass: file dropped"));
        assert!(
            lines[2].starts_with("cold             10 records in    0.500 s:"),
            "{}",
            lines[2]
        );
        assert!(lines[2].ends_with(", 1 under-runs"));
    }
}
