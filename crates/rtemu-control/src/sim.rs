//! `rtemu sim` from its flags' values ([`Request`]): the link model (netem text, a model
//! file, or the default), the traces, the frames (a capture, or generated traffic), and the
//! run that writes the delivered frames and every decision, each file whole or not at all.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use rtemu_model::{netem, LinkConfig, Model};
use rtemu_report::output::{refuse_same_outputs, Output};
use rtemu_sim::capture::{CaptureReader, PcapWriter};
use rtemu_sim::engine::{self, Discard};
use rtemu_sim::fatelog::{FateLog, LogFormat};
use rtemu_sim::source::{FrameSource, Progress};
use rtemu_sim::summary::{Report, Summary};
use rtemu_sim::traffic::{TrafficGen, TrafficSpec};
use rtemu_trace::flow::FlowPattern;

use crate::assemble::{build_model, read_model_file, TraceArg, TraceKind, TraceOptions};

/// The model used when none is given: a 10 Mbit/s path with 20 ms of normally distributed
/// delay (5 ms standard deviation) and 1 % random loss.
pub const DEFAULT_MODEL: &str = "delay 20ms 5ms distribution normal loss 1% rate 10mbit";

/// The traffic used when neither a capture nor traffic is given.
pub const DEFAULT_TRAFFIC: &str = "cbr 1000pps 1000B 10s";

/// The link model: `model_file`'s, else the netem text `model`, else [`DEFAULT_MODEL`], but
/// an ideal link under a trace for the whole link (`whole_link_trace`), which decides alone.
fn link_config(
    model: Option<&str>,
    model_file: Option<&Path>,
    whole_link_trace: bool,
) -> anyhow::Result<LinkConfig> {
    if let Some(path) = model_file {
        return read_model_file(path);
    }
    let default = if whole_link_trace { "" } else { DEFAULT_MODEL };
    let text = model.unwrap_or(default);
    netem::parse(text).with_context(|| format!("--model {}", rtemu_sys::terminal::quoted(text)))
}

/// The traces of a link: one per `PATTERN=FILE` of `flow_traces` (the last `=` separates the
/// file), then `trace` for the rest, each of `kind` (`Auto`: its file's).
fn traces(
    flow_traces: &[String],
    trace: Option<&Path>,
    kind: TraceKind,
) -> anyhow::Result<Vec<TraceArg>> {
    let mut out = Vec::new();
    for spec in flow_traces {
        let (pattern, file) = spec.rsplit_once('=').with_context(|| {
            format!(
                "--flow-trace {}: expected PATTERN=FILE",
                rtemu_sys::terminal::quoted(spec)
            )
        })?;
        let pattern: FlowPattern = pattern
            .parse()
            .with_context(|| format!("--flow-trace {}", rtemu_sys::terminal::quoted(spec)))?;
        let path = PathBuf::from(file);
        out.push(TraceArg {
            pattern: Some(pattern),
            kind: kind.of(&path),
            path,
        });
    }
    if let Some(path) = trace {
        out.push(TraceArg {
            pattern: None,
            kind: kind.of(path),
            path: path.to_owned(),
        });
    }
    Ok(out)
}

/// The frames of a run, and how reports name them: the capture at `input`, else `traffic`
/// (default [`DEFAULT_TRAFFIC`]) generated from `seed`.
fn frames(
    input: Option<&Path>,
    traffic: Option<&str>,
    seed: u64,
) -> anyhow::Result<(Box<dyn FrameSource>, String)> {
    if let Some(path) = input {
        return Ok((
            Box::new(CaptureReader::open(path)?),
            path.display().to_string(),
        ));
    }
    let text = traffic.unwrap_or(DEFAULT_TRAFFIC);
    let spec: TrafficSpec = text
        .parse()
        .with_context(|| format!("--traffic {}", rtemu_sys::terminal::quoted(text)))?;
    Ok((
        Box::new(TrafficGen::new(&spec, seed)),
        format!("traffic {text}"),
    ))
}

/// What `rtemu sim` is asked to run, as its flags give it.
pub struct Request<'a> {
    /// The capture to read; without one, `traffic` is generated.
    pub input: Option<&'a Path>,
    /// The traffic to generate (default [`DEFAULT_TRAFFIC`]).
    pub traffic: Option<&'a str>,
    /// The model in netem syntax (see [`link_config`]).
    pub model: Option<&'a str>,
    /// The model as a TOML or JSON file.
    pub model_file: Option<&'a Path>,
    /// Traces for flows, `PATTERN=FILE` each (see [`traces`]).
    pub flow_traces: &'a [String],
    /// The trace for the rest of the link.
    pub trace: Option<&'a Path>,
    /// What the trace files hold.
    pub trace_kind: TraceKind,
    /// How traces are read, and the seed of every decision.
    pub options: TraceOptions,
    /// The lab link whose random streams to draw from, and whether its direction is from
    /// its second endpoint (see [`rtemu_model::rng::link_label`]).
    pub link: Option<(&'a str, bool)>,
    /// Where to write the delivered frames (pcap).
    pub out: Option<&'a Path>,
    /// Where to write every decision (CSV, or JSON lines by the extension).
    pub log: Option<&'a Path>,
}

/// A run of `rtemu sim`, set up: its model, its frames, and its output files begun.
pub struct Run {
    model: Box<dyn Model + Send>,
    source: Box<dyn FrameSource>,
    /// How reports name the frames.
    input: String,
    config: LinkConfig,
    traces: Vec<TraceArg>,
    seed: u64,
    out: Option<(Output, PathBuf)>,
    log: Option<FateLog<BufWriter<Output>>>,
}

impl Run {
    /// Sets `request` up: its model and traces read, its frames opened, and its outputs begun,
    /// neither the same file as the other nor as one of the files the run reads.
    pub fn new(request: &Request<'_>) -> anyhow::Result<Run> {
        let r = request;
        let config = link_config(r.model, r.model_file, r.trace.is_some())?;
        let traces = traces(r.flow_traces, r.trace, r.trace_kind)?;
        let label = r
            .link
            .map_or(0, |(link, back)| rtemu_model::rng::link_label(link, back));
        let built = build_model(&r.options, &config, &traces, label)?;
        let (source, input) = frames(r.input, r.traffic, r.options.seed)?;
        // A flow's trace needs the frames' IP headers: on a link type they are not read from,
        // it would silently apply to nothing.
        let link = source.link_type();
        if built.per_flow && !rtemu_model::wire::classified(link) {
            anyhow::bail!(
                "{input} has link type {link}, whose frames rtemu does not read down to IP: a \
                 trace for one flow would match none of them; capture as Ethernet, raw IP or \
                 Linux cooked (SLL, SLL2), or give the trace for the whole link"
            );
        }
        let model = built.model;
        // Every file this run reads; no output may be one of them, nor the other output.
        let tables = rtemu_sim::tables::FileTables::from_env().files_of(&config);
        let inputs: Vec<&Path> = [r.input, r.model_file]
            .into_iter()
            .flatten()
            .chain(tables.iter().map(PathBuf::as_path))
            .chain(traces.iter().map(|t| t.path.as_path()))
            .collect();
        refuse_same_outputs(&[("--out", r.out), ("--log", r.log)])?;
        let log = match r.log {
            Some(path) => Some(FateLog::new(
                BufWriter::new(Output::create(path, &inputs)?),
                LogFormat::from_path(path),
            )?),
            None => None,
        };
        let out = match r.out {
            Some(path) => Some((Output::create(path, &inputs)?, path.to_owned())),
            None => None,
        };
        Ok(Run {
            model,
            source,
            input,
            config,
            traces,
            seed: r.options.seed,
            out,
            log,
        })
    }

    /// Runs it, telling `progress` how far it is, and puts its outputs in place; returns what
    /// `rtemu sim` reports.
    pub fn run(mut self, progress: &mut dyn FnMut(Progress)) -> anyhow::Result<Report> {
        let (writer, path) = self.out.take().unzip();
        let (summary, written) = run(
            self.source.as_mut(),
            self.model.as_mut(),
            &self.input,
            writer.zip(path.as_deref()),
            self.log.as_mut(),
            progress,
        )?;
        if let Some(out) = written {
            out.commit()?;
        }
        if let Some(log) = self.log {
            log.finish()
                .context("writing the fate log")?
                .into_inner()
                .map_err(|e| e.into_error())?
                .commit()?;
        }
        Ok(Report {
            input: self.input,
            model: self.config.to_string(),
            traces: self.traces.iter().map(TraceArg::to_string).collect(),
            seed: self.seed,
            model_seed: self.config.seed,
            summary,
        })
    }
}

/// Runs the frames of `source` (named `input` in errors) through `model`, writing the
/// delivered ones as a pcap to `out` (with its path, for errors) and every decision to `log`;
/// returns the summary and `out`, written and flushed, for the caller to put in place.
fn run<W: Write, L: Write>(
    source: &mut dyn FrameSource,
    model: &mut dyn Model,
    input: &str,
    out: Option<(W, &Path)>,
    log: Option<&mut FateLog<L>>,
    progress: &mut dyn FnMut(Progress),
) -> anyhow::Result<(Summary, Option<W>)> {
    let Some((out, path)) = out else {
        let summary =
            engine::run(source, model, &mut Discard, log, progress).context(input.to_owned())?;
        return Ok((summary, None));
    };
    let writing = || format!("writing {}", path.display());
    let mut sink = PcapWriter::new(out, source.link_type()).with_context(writing)?;
    let summary = engine::run(source, model, &mut sink, log, progress).context(input.to_owned())?;
    Ok((summary, Some(sink.finish().with_context(writing)?)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtemu_model::LinkModel;
    use rtemu_sim::fatelog::LogFormat;
    use rtemu_sim::tables::FileTables;

    #[test]
    fn the_model_defaults_but_not_under_a_whole_link_trace() {
        let default = link_config(None, None, false).unwrap();
        assert_eq!(default, netem::parse(DEFAULT_MODEL).unwrap());
        assert_eq!(
            link_config(None, None, true).unwrap(),
            LinkConfig::default()
        );
        let given = link_config(Some("delay 5ms"), None, true).unwrap();
        assert_eq!(given.to_string(), "delay 5ms");
        let e = link_config(Some("delay x"), None, false).unwrap_err();
        assert!(
            format!("{e:#}").starts_with("--model \"delay x\": "),
            "{e:#}"
        );
    }

    #[test]
    fn flow_traces_come_first_and_split_at_the_last_equals() {
        let flows = ["proto=udp dport=5000=voice.rpl".to_owned()];
        let t = traces(&flows, Some(Path::new("all.series")), TraceKind::Auto).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].path, Path::new("voice.rpl"));
        assert!(t[0].pattern.is_some() && t[1].pattern.is_none());
        // A series by its name; an action trace that is not there stays `Auto`, for its
        // reader to say why.
        assert_eq!((t[0].kind, t[1].kind), (TraceKind::Auto, TraceKind::Series));
        let e = traces(&["voice.rpl".to_owned()], None, TraceKind::Auto).unwrap_err();
        assert!(e.to_string().ends_with("expected PATTERN=FILE"), "{e}");
    }

    #[test]
    fn a_run_of_generated_traffic_writes_a_pcap_and_a_log() {
        let (mut source, name) = frames(None, Some("cbr 100pps 100B 1s"), 1).unwrap();
        assert_eq!(name, "traffic cbr 100pps 100B 1s");
        let cfg = netem::parse("delay 1ms loss 10%").unwrap();
        let mut model = LinkModel::new(&cfg, &FileTables::from_env(), 1, 0).unwrap();
        let mut log = FateLog::new(Vec::new(), LogFormat::Csv).unwrap();
        let out = Some((Vec::new(), Path::new("out.pcap")));
        let (summary, pcap) = run(
            source.as_mut(),
            &mut model,
            &name,
            out,
            Some(&mut log),
            &mut |_| {},
        )
        .unwrap();
        assert_eq!(summary.packets_in, 100);
        assert!(
            summary.delivered < 100 && summary.delivered > 70,
            "{summary:?}"
        );
        let pcap = pcap.unwrap();
        assert_eq!(pcap[..4], 0xa1b2_3c4du32.to_le_bytes());
        // The header, and one record (16 bytes and the frame) per delivered frame.
        assert_eq!(pcap.len() as u64, 24 + summary.delivered * (16 + 100));
        let log = String::from_utf8(log.finish().unwrap()).unwrap();
        assert_eq!(log.lines().count(), 101, "a header and a line per packet");
    }

    #[test]
    fn a_run_puts_both_files_in_place_and_refuses_one_file_for_both() {
        let dir = std::env::temp_dir().join(format!("rtemu-sim-run-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (out, log) = (dir.join("out.pcap"), dir.join("fates.jsonl"));
        let request = Request {
            input: None,
            traffic: Some("cbr 100pps 100B 1s"),
            model: Some("delay 1ms"),
            model_file: None,
            flow_traces: &[],
            trace: None,
            trace_kind: TraceKind::Auto,
            options: TraceOptions {
                seed: 1,
                underrun: rtemu_trace::UnderrunPolicy::Wait,
                end: rtemu_trace::EndPolicy::Loop,
                interpolation: rtemu_trace::series::Interpolation::Step,
            },
            link: None,
            out: Some(&out),
            log: Some(&log),
        };
        let report = Run::new(&request).and_then(|r| r.run(&mut |_| {}));
        let both = Request {
            log: Some(&out),
            ..request
        };
        let refused = Run::new(&both).map(drop);
        let (pcap, fates) = (std::fs::read(&out), std::fs::read_to_string(&log));
        std::fs::remove_dir_all(&dir).unwrap();
        let report = report.unwrap();
        assert_eq!(
            (report.summary.delivered, report.model.as_str()),
            (100, "delay 1ms")
        );
        assert_eq!(pcap.unwrap().len(), 24 + 100 * (16 + 100));
        assert_eq!(
            fates.unwrap().lines().count(),
            100,
            "a JSON line per packet"
        );
        assert!(refused
            .unwrap_err()
            .to_string()
            .starts_with("--out and --log name one file"));
    }
}
