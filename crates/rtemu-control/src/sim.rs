//! `rtemu sim` from its flags' values: the link model (netem text, a model file, or the
//! default), the traces, the frames (a capture, or generated traffic), and the run that
//! writes the delivered frames. The files the run writes are the caller's to create and to
//! put in place.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use rtemu_model::{netem, LinkConfig, Model};
use rtemu_sim::capture::{CaptureReader, PcapWriter};
use rtemu_sim::engine::{self, Discard};
use rtemu_sim::fatelog::FateLog;
use rtemu_sim::source::{FrameSource, Progress};
use rtemu_sim::summary::Summary;
use rtemu_sim::traffic::{TrafficGen, TrafficSpec};
use rtemu_trace::flow::FlowPattern;

use crate::assemble::{read_model_file, TraceArg, TraceKind};

/// The model used when none is given: a 10 Mbit/s path with 20 ms of normally distributed
/// delay (5 ms standard deviation) and 1 % random loss.
pub const DEFAULT_MODEL: &str = "delay 20ms 5ms distribution normal loss 1% rate 10mbit";

/// The traffic used when neither a capture nor traffic is given.
pub const DEFAULT_TRAFFIC: &str = "cbr 1000pps 1000B 10s";

/// The link model: `model_file`'s, else the netem text `model`, else [`DEFAULT_MODEL`], but
/// an ideal link under a trace for the whole link (`whole_link_trace`), which decides alone.
pub fn link_config(
    model: Option<&str>,
    model_file: Option<&Path>,
    whole_link_trace: bool,
) -> anyhow::Result<LinkConfig> {
    if let Some(path) = model_file {
        return read_model_file(path);
    }
    let default = if whole_link_trace { "" } else { DEFAULT_MODEL };
    let text = model.unwrap_or(default);
    netem::parse(text).with_context(|| format!("--model {text:?}"))
}

/// The traces of a link: one per `PATTERN=FILE` of `flow_traces` (the last `=` separates the
/// file), then `trace` for the rest, each of `kind` (`Auto`: its file's).
pub fn traces(
    flow_traces: &[String],
    trace: Option<&Path>,
    kind: TraceKind,
) -> anyhow::Result<Vec<TraceArg>> {
    let mut out = Vec::new();
    for spec in flow_traces {
        let (pattern, file) = spec
            .rsplit_once('=')
            .with_context(|| format!("--flow-trace {spec:?}: expected PATTERN=FILE"))?;
        let pattern: FlowPattern = pattern
            .parse()
            .with_context(|| format!("--flow-trace {spec:?}"))?;
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
pub fn frames(
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
        .with_context(|| format!("--traffic {text:?}"))?;
    Ok((
        Box::new(TrafficGen::new(&spec, seed)),
        format!("traffic {text}"),
    ))
}

/// Runs the frames of `source` (named `input` in errors) through `model`, writing the
/// delivered ones as a pcap to `out` (with its path, for errors) and every decision to `log`;
/// returns the summary and `out`, written and flushed, for the caller to put in place.
pub fn run<W: Write, L: Write>(
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
}
