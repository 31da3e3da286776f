//! `rtemu sim`: run a link model in virtual time over a capture or generated traffic.

use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::PathBuf;

use anyhow::Context as _;
use indicatif::{ProgressBar, ProgressStyle};
use rtemu_model::{netem, rng::DEFAULT_SEED, LinkConfig, LinkModel};
use rtemu_sim::capture::{CaptureReader, PcapWriter};
use rtemu_sim::engine::{self, Discard, FrameSink};
use rtemu_sim::fatelog::{FateLog, LogFormat};
use rtemu_sim::source::{FrameSource, Progress, ProgressUnit};
use rtemu_sim::tables::FileTables;
use rtemu_sim::traffic::{TrafficGen, TrafficSpec, TRAFFIC_HELP};
use serde::Serialize;

/// The model used when `--model` is not given: a 10 Mbit/s path with 20 ms of normally
/// distributed delay (5 ms standard deviation) and 1 % random loss.
pub const DEFAULT_MODEL: &str = "delay 20ms 5ms distribution normal loss 1% rate 10mbit";
/// The traffic used when neither an input file nor `--traffic` is given.
pub const DEFAULT_TRAFFIC: &str = "cbr 1000pps 1000B 10s";

/// Run a link model in virtual time, as fast as the CPU allows.
///
/// Reads frames from a pcap/pcapng file (arrival = capture timestamp) or from the built-in
/// traffic generator, decides each frame's fate with the model, and writes the delivered frames
/// (duplicates included, corrupted bits flipped) to a pcap stamped with their delivery times.
/// The same seed gives byte-identical outputs.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  rtemu sim
      the built-in traffic and model, printing the report
  rtemu sim in.pcap --model \"delay 20ms 5ms loss 1%\" --seed 7 --out out.pcap --log fates.csv
  rtemu sim --traffic \"cbr 10000pps 1000B 10s\" --model \"rate 10mbit limit 100\" --json
  rtemu sim --traffic \"poisson 10000pps 64B,1500B 10s\" --model-file link.toml --out out.pcap

Model syntax (netem's): delay TIME [JITTER [CORR]] distribution uniform|normal|pareto|paretonormal|TABLE
  loss [random] P [CORR] | loss state P13 [P31 [P32 [P23 [P14]]]] | loss gemodel P [R [1-H [1-K]]]
  duplicate P [CORR]  corrupt P [CORR]  ber RATE  reorder P [CORR] [gap N]
  rate RATE [OVERHEAD [CELLSIZE [CELLOVERHEAD]]]  limit PACKETS  limit-bytes SIZE  ordered  tables exact|netem
Jitter is uniform unless a distribution is named (netem's default). rtemu's distributions have their
real tails; `tables netem` uses iproute2's tables, clipped as netem's are. `limit` bounds only the
rate queue: a delay alone never drops.")]
pub struct SimArgs {
    /// Input capture (pcap or pcapng). Without it, --traffic generates the input.
    pub input: Option<PathBuf>,

    /// Generated traffic: `cbr|poisson|onoff RATE SIZES DURATION [on TIME off TIME [exp]]`
    /// (--help shows the grammar). Default when no input is given: "cbr 1000pps 1000B 10s".
    #[arg(long, conflicts_with = "input", long_help = TRAFFIC_HELP)]
    pub traffic: Option<String>,

    /// The link model in netem syntax. Default: "delay 20ms 5ms distribution normal loss 1% rate 10mbit".
    #[arg(long, short = 'm', conflicts_with = "model_file")]
    pub model: Option<String>,

    /// The link model as a TOML or JSON file (the structured form of the netem fields).
    #[arg(long)]
    pub model_file: Option<PathBuf>,

    /// Seed of every random decision. The same seed gives the same output.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    pub seed: u64,

    /// Write delivered frames to this pcap (nanosecond timestamps).
    #[arg(long, short = 'o')]
    pub out: Option<PathBuf>,

    /// Write every decision to this file: CSV, or JSON lines if it ends in .jsonl/.json.
    #[arg(long)]
    pub log: Option<PathBuf>,

    /// Print the summary as JSON instead of a table.
    #[arg(long)]
    pub json: bool,

    /// Never show a progress bar.
    #[arg(long)]
    pub no_progress: bool,
}

#[derive(Serialize)]
struct Report<'a> {
    input: String,
    model: String,
    seed: u64,
    summary: &'a rtemu_sim::summary::Summary,
}

/// Reads the model from `--model`, `--model-file` or the default.
fn link_config(args: &SimArgs) -> anyhow::Result<LinkConfig> {
    if let Some(path) = &args.model_file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let is_json = path.extension().is_some_and(|e| e == "json");
        return if is_json {
            serde_json::from_str(&text)
                .with_context(|| format!("{}: not a valid model", path.display()))
        } else {
            toml::from_str(&text).with_context(|| format!("{}: not a valid model", path.display()))
        };
    }
    let text = args.model.as_deref().unwrap_or(DEFAULT_MODEL);
    netem::parse(text).with_context(|| format!("--model {text:?}"))
}

struct PcapSink<W: Write>(PcapWriter<W>);

impl<W: Write> FrameSink for PcapSink<W> {
    fn deliver(&mut self, ts_ns: u64, data: &[u8], orig_len: u32) -> std::io::Result<()> {
        self.0
            .write_packet(ts_ns, data, orig_len)
            .map_err(std::io::Error::other)
    }
}

fn progress_bar(enabled: bool) -> Option<ProgressBar> {
    if !enabled || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {wide_bar} {percent:>3}% {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    Some(bar)
}

/// Runs `rtemu sim`.
pub fn run(args: &SimArgs) -> anyhow::Result<()> {
    let cfg = link_config(args)?;
    let mut model =
        LinkModel::new(&cfg, &FileTables::from_env(), args.seed, 0).context("the model")?;

    let (mut source, input): (Box<dyn FrameSource>, String) = match &args.input {
        Some(path) => (
            Box::new(CaptureReader::open(path)?),
            path.display().to_string(),
        ),
        None => {
            let text = args.traffic.as_deref().unwrap_or(DEFAULT_TRAFFIC);
            let spec: TrafficSpec = text
                .parse()
                .with_context(|| format!("--traffic {text:?}"))?;
            (
                Box::new(TrafficGen::new(&spec, args.seed)),
                format!("traffic {text}"),
            )
        }
    };

    let mut log = match &args.log {
        Some(path) => {
            let file =
                File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
            Some(FateLog::new(
                BufWriter::new(file),
                LogFormat::from_path(path),
            )?)
        }
        None => None,
    };

    let bar = progress_bar(!args.no_progress && !args.json);
    let mut on_progress = |p: Progress| {
        if let Some(bar) = &bar {
            if let Some(total) = p.total {
                bar.set_length(total);
            }
            bar.set_position(p.done);
            if p.unit == ProgressUnit::VirtualNanos {
                bar.set_message(format!("{:.1} s virtual", p.done as f64 / 1e9));
            }
        }
    };

    let summary = match &args.out {
        Some(path) => {
            let file =
                File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
            // The writer buffers by itself.
            let writer = PcapWriter::new(file, source.link_type())
                .with_context(|| format!("writing {}", path.display()))?;
            let mut sink = PcapSink(writer);
            let summary = engine::run(
                source.as_mut(),
                &mut model,
                &mut sink,
                log.as_mut(),
                &mut on_progress,
            )
            .with_context(|| input.clone())?;
            sink.0
                .finish()
                .with_context(|| format!("writing {}", path.display()))?;
            summary
        }
        None => engine::run(
            source.as_mut(),
            &mut model,
            &mut Discard,
            log.as_mut(),
            &mut on_progress,
        )
        .with_context(|| input.clone())?,
    };
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    if let Some(log) = log {
        log.finish().context("writing the fate log")?;
    }

    let mut out = std::io::stdout().lock();
    if args.json {
        let report = Report {
            input,
            model: cfg.to_string(),
            seed: args.seed,
            summary: &summary,
        };
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else {
        writeln!(out, "rtemu sim: {input}")?;
        writeln!(out, "model: {}  (seed {})", cfg, args.seed)?;
        write!(out, "{summary}")?;
    }
    Ok(())
}
