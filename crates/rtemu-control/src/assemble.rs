//! A link direction's model, assembled from its netem configuration and traces: what
//! `rtemu sim` runs in virtual time and a lab's engine in real time.

use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use rtemu_model::link::LinkError;
use rtemu_model::trace::{untraced_stages, TraceFeed, TraceModel, TraceModelError};
use rtemu_model::{LinkConfig, LinkModel, Model};
use rtemu_sim::tables::{read_small_file, FileTables};
use rtemu_sim::traced::{ActionFeed, OpportunityFeed, PerFlow, SeriesFeed};
use rtemu_trace::flow::{FlowPattern, FlowTable};
use rtemu_trace::format::{Content, Format};
use rtemu_trace::mahimahi::OpportunityStream;
use rtemu_trace::prefetch::{EndPolicy, PrefetchConfig, Prefetcher, UnderrunPolicy};
use rtemu_trace::series::{Interpolation, SeriesStream};
use rtemu_trace::TraceError;

/// What a trace file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceKind {
    /// Decide from the file name, then from the content.
    Auto,
    /// Raw RplTrc words.
    Rpl,
    /// RplTrc words behind a header.
    Rplx,
    /// The text form of an action trace.
    Text,
    /// A delay/loss time series (`time delay [lost]`).
    Series,
    /// A Mahimahi delivery-opportunity trace.
    Mahimahi,
}

impl TraceKind {
    /// The kind of `path`, resolving `Auto` by [`Content::sniff_file`]: the magic, the
    /// extension, then the content (one integer a line: Mahimahi; `time delay [lost]`: a
    /// series; `drop`/`pass`/`dup`: actions; not text: raw words). A file whose content fits
    /// no kind gets the kind its first record line suggests, whose reader then fails naming
    /// the file and the line. `Auto` stays only for what cannot be sniffed (a file that cannot
    /// be read, whose reader then reports why, or a pipe, which reading would consume).
    pub fn of(self, path: &Path) -> TraceKind {
        if self != TraceKind::Auto {
            return self;
        }
        let content = match Content::from_extension(path) {
            Some(c @ (Content::Series | Content::Mahimahi)) => c,
            _ if !path.metadata().is_ok_and(|m| m.is_file()) => return TraceKind::Auto,
            _ => match Content::sniff_file(path) {
                Ok(c) => c,
                Err(e) => match e.guess {
                    Some(c) => c,
                    None => return TraceKind::Auto,
                },
            },
        };
        match content {
            Content::Actions(Format::Raw) => TraceKind::Rpl,
            Content::Actions(Format::Framed) => TraceKind::Rplx,
            Content::Actions(Format::Text) => TraceKind::Text,
            Content::Series => TraceKind::Series,
            Content::Mahimahi => TraceKind::Mahimahi,
        }
    }
}

/// One `--trace` or `--flow-trace`.
#[derive(Debug)]
pub struct TraceArg {
    /// The flow it is for; `None`: the whole link.
    pub pattern: Option<FlowPattern>,
    /// The trace file.
    pub path: PathBuf,
    /// What the file holds, hence how it is read.
    pub kind: TraceKind,
}

/// `FILE`, or `FILE for PATTERN`, as reports name a trace.
impl fmt::Display for TraceArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.pattern {
            Some(p) => write!(f, "{} for {p}", self.path.display()),
            None => write!(f, "{}", self.path.display()),
        }
    }
}

/// How traces are read, and the seed of every stream a link's models draw from.
pub struct TraceOptions {
    /// The seed every stream of the link's models is drawn from.
    pub seed: u64,
    /// What a direction does when its trace has no action ready for a packet.
    pub underrun: UnderrunPolicy,
    /// What happens when a trace ends.
    pub end: EndPolicy,
    /// How a series trace is read between its samples.
    pub interpolation: Interpolation,
}

/// Why a link direction's model could not be built: one of its traces (named), or its netem
/// model. The variant says which value is at fault; the message names it, its source says why.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// A trace could not be opened or read.
    #[error("trace {}", .path.display())]
    Trace {
        /// The trace file.
        path: PathBuf,
        /// Why it could not be read.
        #[source]
        error: TraceError,
    },
    /// A trace's model refuses the rest of the link's configuration.
    #[error("trace {}", .path.display())]
    TraceModel {
        /// The trace file.
        path: PathBuf,
        /// What the configuration asks that the trace cannot take.
        #[source]
        error: TraceModelError,
    },
    /// The netem model could not be made (a distribution table, for instance).
    #[error("the model")]
    Model(#[source] LinkError),
}

/// A link direction's model, and whether it tells flows apart.
pub struct Assembled {
    /// The model.
    pub model: Box<dyn Model + Send>,
    /// Whether some trace is for one flow (given with a pattern, or naming one in its
    /// header): then frames must be read down to their IP header.
    pub per_flow: bool,
}

/// The link's model: the netem model, or trace-driven models (per flow, and for the rest).
/// Every trace streams from its file on a reader thread of its own. `label` sets the link direction's streams apart (see
/// [`rtemu_model::rng`]): each trace draws from `label + 1 + i`.
pub fn build_model(
    opts: &TraceOptions,
    cfg: &LinkConfig,
    traces: &[TraceArg],
    label: u64,
) -> Result<Assembled, BuildError> {
    let mut flows = FlowTable::new();
    let mut default = None;
    for (i, t) in traces.iter().enumerate() {
        let unread = |error| BuildError::Trace {
            path: t.path.clone(),
            error,
        };
        // The flow a framed trace's header names, if any.
        let mut header_flow = None;
        let feed: Box<dyn TraceFeed + Send> = match t.kind {
            TraceKind::Series => Box::new(SeriesFeed::new(
                SeriesStream::open(&t.path, opts.interpolation, opts.underrun).map_err(unread)?,
            )),
            TraceKind::Mahimahi => Box::new(OpportunityFeed::new(
                OpportunityStream::open(&t.path, opts.underrun == UnderrunPolicy::Wait)
                    .map_err(unread)?,
                opts.underrun,
            )),
            kind => {
                let format = match kind {
                    TraceKind::Rpl => Some(Format::Raw),
                    TraceKind::Rplx => Some(Format::Framed),
                    TraceKind::Text => Some(Format::Text),
                    _ => None,
                };
                let config = PrefetchConfig {
                    underrun: opts.underrun,
                    end: opts.end,
                    ..PrefetchConfig::default()
                };
                let mut trace = Prefetcher::open(&t.path, format, config).map_err(unread)?;
                // Records are ready before the first packet: no under-run while the reader's
                // first read is in flight.
                trace.prime().map_err(unread)?;
                header_flow = trace.header().and_then(|h| h.flow);
                Box::new(ActionFeed::new(trace))
            }
        };
        // A pattern given with the trace wins; else a framed trace's own flow makes it a
        // per-flow trace, as if given with --flow-trace.
        let pattern = t.pattern.or(header_flow);
        // Each trace's own stages (rate, corruption) draw from a stream of their own.
        // A per-flow trace takes the link's rate, corruption and order; the rest of the model is
        // for the packets no trace claims. A trace for the whole link must not be contradicted.
        let stages = match pattern {
            Some(_) => untraced_stages(cfg),
            None => cfg.clone(),
        };
        let model =
            TraceModel::new(feed, &stages, opts.seed, label + 1 + i as u64).map_err(|error| {
                BuildError::TraceModel {
                    path: t.path.clone(),
                    error,
                }
            })?;
        match &pattern {
            Some(p) => flows.push(*p, Box::new(model) as Box<dyn Model + Send>),
            None => default = Some(Box::new(model) as Box<dyn Model + Send>),
        }
    }
    let default = match default {
        Some(m) => m,
        None => Box::new(
            LinkModel::new(cfg, &FileTables::from_env(), opts.seed, label)
                .map_err(BuildError::Model)?,
        ),
    };
    let per_flow = !flows.entries().is_empty();
    let model = if per_flow {
        Box::new(PerFlow::new(flows, default))
    } else {
        default
    };
    Ok(Assembled { model, per_flow })
}

/// The names a model file may hold (fields, loss models, distributions, table modes): the
/// only quoted words a model file's error may repeat.
const MODEL_FILE_NAMES: &[&str] = &[
    "delay",
    "jitter",
    "delay_correlation",
    "distribution",
    "tables",
    "ordered",
    "loss",
    "duplicate",
    "corrupt",
    "ber",
    "reorder",
    "gap",
    "rate",
    "limit",
    "limit_bytes",
    "seed",
    "model",
    "random",
    "state",
    "gemodel",
    "probability",
    "correlation",
    "p13",
    "p31",
    "p32",
    "p23",
    "p14",
    "p",
    "r",
    "loss_bad",
    "loss_good",
    "packet_overhead",
    "cell_size",
    "cell_overhead",
    "uniform",
    "normal",
    "pareto",
    "paretonormal",
    "exact",
    "netem",
];

/// `message` with every quoted part (`…` or "…") that is neither one of the model file's own
/// names nor punctuation replaced by `…`: a TOML or JSON error quotes the words it did not expect, and the
/// file may be one the user cannot read (rtemu under sudo).
fn redact_quoted(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(open) = rest.find(['`', '"']) {
        let quote = rest.as_bytes()[open] as char;
        let Some(len) = rest[open + 1..].find(quote) else {
            break;
        };
        let inner = &rest[open + 1..open + 1 + len];
        out.push_str(&rest[..=open]);
        // Punctuation (`=`, `]`) is the grammar's, not the file's.
        let grammar = !inner.is_empty() && inner.bytes().all(|b| b.is_ascii_punctuation());
        out.push_str(if grammar || MODEL_FILE_NAMES.contains(&inner) {
            inner
        } else {
            "…"
        });
        out.push(quote);
        rest = &rest[open + len + 2..];
    }
    out.push_str(rest);
    out
}

/// Reads a `--model-file`: a regular file of at most 1 MiB, TOML or (`.json`) JSON, checked by
/// [`LinkConfig::validate`]. Errors say `FILE:LINE:COLUMN` and what was expected, and repeat no
/// word of the file but the model's own names.
pub fn read_model_file(path: &Path) -> anyhow::Result<LinkConfig> {
    let shown = path.display();
    let text = read_small_file(path).with_context(|| format!("cannot read {shown}"))?;
    let parsed = if path.extension().is_some_and(|e| e == "json") {
        serde_json::from_str(&text).map_err(|e| {
            let message = e.to_string();
            // serde_json ends its message with the position, given here as FILE:LINE:COLUMN.
            let message = message
                .rfind(" at line ")
                .map_or(message.as_str(), |i| &message[..i]);
            (e.line(), e.column(), redact_quoted(message))
        })
    } else {
        toml::from_str(&text).map_err(|e| {
            let at = e.span().map_or(0, |s| s.start);
            let (line, column) = rtemu_topo::error::line_column(&text, at);
            (line, column, redact_quoted(e.message().trim_end()))
        })
    };
    let cfg: LinkConfig = parsed.map_err(|(line, column, message)| {
        anyhow::anyhow!("{shown}:{line}:{column}: not a valid model: {message}")
    })?;
    cfg.validate()
        .with_context(|| format!("{shown}: not a valid model"))?;
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_file_error_repeats_only_the_models_own_names() {
        assert_eq!(
            redact_quoted("unknown field `secret`, expected `delay` or \"=\""),
            "unknown field `…`, expected `delay` or \"=\""
        );
        assert_eq!(redact_quoted("unclosed `quote"), "unclosed `quote");
    }

    #[test]
    fn a_trace_is_named_with_its_flow() {
        let whole = TraceArg {
            pattern: None,
            path: PathBuf::from("d.rpl"),
            kind: TraceKind::Rpl,
        };
        assert_eq!(whole.to_string(), "d.rpl");
        let flow = TraceArg {
            pattern: Some("proto=udp".parse().unwrap()),
            ..whole
        };
        assert!(flow.to_string().starts_with("d.rpl for "), "{flow}");
    }

    #[test]
    fn a_model_file_is_read_and_checked() {
        let dir = std::env::temp_dir().join(format!("rtemu-mf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("m.toml");
        std::fs::write(&good, "delay = \"10ms\"\n").unwrap();
        let bad = dir.join("m.json");
        std::fs::write(&bad, "{\"secret\": 1}").unwrap();
        let read_good = read_model_file(&good);
        let read_bad = read_model_file(&bad);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(read_good.unwrap().to_string(), "delay 10ms");
        let e = format!("{:#}", read_bad.unwrap_err());
        assert!(e.contains("m.json:1:"), "{e}");
        assert!(!e.contains("secret"), "{e}");
    }
}
