//! A link direction's model, assembled from its netem configuration and traces: what
//! `rtemu sim` runs in virtual time and a lab's engine in real time.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use rtemu_model::trace::{untraced_stages, TraceFeed, TraceModel};
use rtemu_model::{LinkConfig, LinkModel, Model};
use rtemu_sim::tables::FileTables;
use rtemu_sim::traced::{ActionFeed, OpportunityFeed, PerFlow, SeriesFeed};
use rtemu_trace::flow::{FlowPattern, FlowTable};
use rtemu_trace::format::{Content, Format};
use rtemu_trace::mahimahi::OpportunityStream;
use rtemu_trace::prefetch::{EndPolicy, PrefetchConfig, Prefetcher, UnderrunPolicy};
use rtemu_trace::series::{Interpolation, SeriesStream};

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
pub struct TraceArg {
    /// The flow it is for; `None`: the whole link.
    pub pattern: Option<FlowPattern>,
    pub path: PathBuf,
    pub kind: TraceKind,
}

/// How traces are read, and the seed of every stream a link's models draw from.
pub struct TraceOptions {
    pub seed: u64,
    pub underrun: UnderrunPolicy,
    pub end: EndPolicy,
    pub interpolation: Interpolation,
}

/// The context of an error from opening or reading a trace: which file. A caller tells such an
/// error from the model's own by downcasting to it.
#[derive(Debug)]
pub struct TraceContext(PathBuf);

impl std::fmt::Display for TraceContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "trace {}", self.0.display())
    }
}

/// The link's model: the netem model, or trace-driven models (per flow, and for the rest).
/// Every trace streams from its file on a reader thread of its own. `label` sets the link direction's streams apart (see
/// [`rtemu_model::rng`]): each trace draws from `label + 1 + i`.
pub fn build_model(
    opts: &TraceOptions,
    cfg: &LinkConfig,
    traces: &[TraceArg],
    label: u64,
) -> anyhow::Result<Box<dyn Model + Send>> {
    let mut flows = FlowTable::new();
    let mut default = None;
    for (i, t) in traces.iter().enumerate() {
        let what = || TraceContext(t.path.clone());
        // The flow a framed trace's header names, if any.
        let mut header_flow = None;
        let feed: Box<dyn TraceFeed + Send> = match t.kind {
            TraceKind::Series => Box::new(SeriesFeed::new(
                SeriesStream::open(&t.path, opts.interpolation, opts.underrun)
                    .with_context(what)?,
            )),
            TraceKind::Mahimahi => Box::new(OpportunityFeed::new(
                OpportunityStream::open(&t.path, opts.underrun == UnderrunPolicy::Wait)
                    .with_context(what)?,
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
                let mut trace = Prefetcher::open(&t.path, format, config).with_context(what)?;
                // Records are ready before the first packet: no under-run while the reader's
                // first read is in flight.
                trace.prime().with_context(what)?;
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
            TraceModel::new(feed, &stages, opts.seed, label + 1 + i as u64).with_context(what)?;
        match &pattern {
            Some(p) => flows.push(*p, Box::new(model) as Box<dyn Model + Send>),
            None => default = Some(Box::new(model) as Box<dyn Model + Send>),
        }
    }
    let default = match default {
        Some(m) => m,
        None => Box::new(
            LinkModel::new(cfg, &FileTables::from_env(), opts.seed, label).context("the model")?,
        ),
    };
    Ok(if flows.entries().is_empty() {
        default
    } else {
        Box::new(PerFlow::new(flows, default))
    })
}
