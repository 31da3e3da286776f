//! `rtemu trace gen`: synthetic traces.

use std::path::PathBuf;

use anyhow::Context as _;
use rtemu_model::units::parse_duration_ns;
use rtemu_report::trace::{generate, GenRequest};
use rtemu_sim::record::ModelRecords;
use rtemu_trace::duration::format_duration;
use rtemu_trace::fgn::{Fgn, FgnDelays, DEFAULT_BLOCK};
use rtemu_trace::gen::Generator;
use rtemu_trace::iid::{Dist, GilbertElliott, IidTrace};
use rtemu_trace::onoff::{OnOffConfig, OnOffDelays};
use rtemu_trace::Format;
use serde_json::json;

use super::HeaderArgs;

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  rtemu trace gen fgn --hurst 0.8 --mean 5ms --std 1ms --count 1000000 --seed 7 -o fgn.rpl
  rtemu trace gen onoff --sources 50 --alpha 1.4 --count 1000000 -o onoff.rplx
  rtemu trace gen iid --dist pareto --mean 5ms --std 2ms --count 100000 -o iid.rpl --json
  rtemu trace gen fgn --count 100000 --flow 'dst=10.0.0.0/8 proto=udp' --provenance 'lab path A' -o a.rplx")]
pub(super) struct GenArgs {
    #[command(subcommand)]
    kind: GenKind,
}

#[derive(Debug, clap::Subcommand)]
enum GenKind {
    /// Fractional Gaussian noise delays (exact, Davies–Harte), every record a pass.
    Fgn(FgnArgs),
    /// Queueing delay behind superposed heavy-tailed ON/OFF sources (H = (3 − α)/2).
    Onoff(OnOffArgs),
    /// i.i.d. delays from a distribution, optionally with Gilbert–Elliott loss (baselines).
    Iid(IidArgs),
    /// The fates a netem-style model gives packets at a steady rate, recorded as actions: any
    /// of the model's distributions (paretonormal, `.dist` tables), correlations, losses and
    /// duplicates, in a form that replays without the model.
    Netem(NetemGenArgs),
}

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  rtemu trace gen netem --model \"delay 20ms 5ms distribution paretonormal\" --count 100000 -o pn.rpl
  rtemu trace gen netem --model \"delay 10ms 2ms 25% loss 1% 25% duplicate 0.5%\" --pps 10000 --count 100000 -o m.rplx --json")]
struct NetemGenArgs {
    /// The model, in netem's syntax (`distribution NAME` finds `.dist` tables as `rtemu sim`
    /// does). Delays are rounded to the microsecond; corruption is not recorded (an action
    /// trace has no field for it).
    #[arg(long)]
    model: String,
    /// Packets per second offered to the model (matters for `rate` and time-based stages).
    #[arg(long, default_value_t = 1000)]
    pps: u64,
    /// Bytes per packet offered to the model.
    #[arg(long, default_value_t = 1000)]
    size: u32,
    #[command(flatten)]
    out: OutputArgs,
}

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  rtemu trace gen iid --dist pareto --mean 5ms --std 2ms --count 100000 -o iid.rpl
  rtemu trace gen iid --dist constant --mean 10ms --ge-p 0.01 --ge-r 0.3 --count 100000 -o ge.rplx --json
  rtemu trace gen iid --dist normal --mean 20ms --std 4ms --count 1000 --seed 3 -o iid.txt")]
struct IidArgs {
    /// Distribution: constant, uniform, normal, exponential, pareto.
    #[arg(long, default_value = "normal")]
    dist: Dist,
    /// Mean delay.
    #[arg(long, default_value = "5ms")]
    mean: String,
    /// Standard deviation of the delay.
    #[arg(long, default_value = "1ms")]
    std: String,
    /// Gilbert–Elliott: probability per packet of going from Good to Bad (enables loss).
    #[arg(long)]
    ge_p: Option<f64>,
    /// Gilbert–Elliott: probability per packet of going from Bad to Good.
    #[arg(long, default_value_t = 1.0, requires = "ge_p")]
    ge_r: f64,
    /// Gilbert–Elliott: loss probability in Good.
    #[arg(long, default_value_t = 0.0, requires = "ge_p")]
    ge_loss_good: f64,
    /// Gilbert–Elliott: loss probability in Bad.
    #[arg(long, default_value_t = 1.0, requires = "ge_p")]
    ge_loss_bad: f64,
    #[command(flatten)]
    out: OutputArgs,
}

/// Options every generator shares.
#[derive(Debug, clap::Args)]
struct OutputArgs {
    /// Records to generate.
    #[arg(long, default_value_t = 1_000_000)]
    count: u64,
    /// Seed; the same seed gives the same trace.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output file.
    #[arg(short = 'o', long)]
    output: PathBuf,
    /// Output form (raw, framed, text); default from the extension.
    #[arg(long)]
    format: Option<Format>,
    /// Print a JSON summary on stdout (records written, output, generator, parameters, seed)
    /// instead of the one-line note on stderr.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    header: HeaderArgs,
}

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  rtemu trace gen fgn --hurst 0.8 --mean 5ms --std 1ms --count 1000000 --seed 7 -o fgn.rpl
  rtemu trace gen fgn --hurst 0.9 --mean 20ms --std 5ms --count 100000 -o fgn.rplx --json
  rtemu trace gen fgn --count 1000 --format text -o fgn.dat")]
struct FgnArgs {
    /// Hurst parameter, in (0, 1).
    #[arg(long, default_value_t = 0.8)]
    hurst: f64,
    /// Mean delay (e.g. 5ms).
    #[arg(long, default_value = "5ms")]
    mean: String,
    /// Standard deviation of the delay (e.g. 1ms).
    #[arg(long, default_value = "1ms")]
    std: String,
    /// Samples per exact block (a power of two); correlation is exact within a block.
    #[arg(long, default_value_t = DEFAULT_BLOCK)]
    block: usize,
    #[command(flatten)]
    out: OutputArgs,
}

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  rtemu trace gen onoff --sources 50 --alpha 1.4 --count 1000000 -o onoff.rplx
  rtemu trace gen onoff --sources 100 --link-rate 60e6 --buffer 200000 --interval 100us --count 100000 -o onoff.rpl --json")]
struct OnOffArgs {
    /// Number of ON/OFF sources.
    #[arg(long, default_value_t = 50)]
    sources: u32,
    /// Pareto shape of the ON and OFF periods, in (1, 2).
    #[arg(long, default_value_t = 1.4)]
    alpha: f64,
    /// Mean ON period.
    #[arg(long, default_value = "50ms")]
    mean_on: String,
    /// Mean OFF period.
    #[arg(long, default_value = "50ms")]
    mean_off: String,
    /// Each source's rate while ON, bit/s.
    #[arg(long, default_value_t = 1e6)]
    source_rate: f64,
    /// The bottleneck's rate, bit/s.
    #[arg(long, default_value_t = 30e6)]
    link_rate: f64,
    /// Queue capacity, bytes.
    #[arg(long, default_value_t = 1e6)]
    buffer: f64,
    /// Size of the packet whose fate each record gives, bytes.
    #[arg(long, default_value_t = 1500.0)]
    probe: f64,
    /// Time between records.
    #[arg(long, default_value = "1ms")]
    interval: String,
    /// Delay added to every delivered packet.
    #[arg(long, default_value = "10ms")]
    base: String,
    #[command(flatten)]
    out: OutputArgs,
}

pub(super) fn run(args: &GenArgs) -> anyhow::Result<()> {
    match &args.kind {
        GenKind::Fgn(a) => fgn(a),
        GenKind::Onoff(a) => onoff(a),
        GenKind::Iid(a) => iid(a),
        GenKind::Netem(a) => netem(a),
    }
}

fn duration(flag: &str, value: &str) -> anyhow::Result<u64> {
    parse_duration_ns(value, None).map_err(|e| anyhow::anyhow!("--{flag}: {e}"))
}

/// A generator's run: `kind` writes `provenance` and its records, then reports its
/// `parameters` and what the run came to, as JSON or as a note on stderr.
struct Generated<'a> {
    kind: &'static str,
    /// The files the generator reads.
    inputs: Vec<std::path::PathBuf>,
    /// The seed the generator draws from: --seed, unless a model names its own.
    seed: u64,
    provenance: String,
    parameters: serde_json::Value,
    out: &'a OutputArgs,
}

impl Generated<'_> {
    /// Writes the output's records from `generator`, then prints what was written.
    fn write(self, generator: impl Generator) -> anyhow::Result<()> {
        let out = self.out;
        let inputs: Vec<&std::path::Path> = self.inputs.iter().map(|p| p.as_path()).collect();
        let request = GenRequest {
            kind: self.kind,
            parameters: self.parameters,
            command: self.provenance,
            count: out.count,
            seed: self.seed,
            output: &out.output,
            inputs: &inputs,
            format: out.format,
            flow: out.header.flow,
            provenance: out.header.provenance.as_deref(),
        };
        let summary = generate(generator, request)?;
        if out.json {
            return rtemu_report::text::print_json(&summary);
        }
        eprintln!("rtemu: {summary}");
        Ok(())
    }
}

fn fgn(a: &FgnArgs) -> anyhow::Result<()> {
    let mean = duration("mean", &a.mean)?;
    let std = duration("std", &a.std)?;
    // A trace that fits in one block is exact throughout.
    let whole = a
        .out
        .count
        .max(2)
        .checked_next_power_of_two()
        .unwrap_or(u64::MAX);
    let block = a.block.min(usize::try_from(whole).unwrap_or(usize::MAX));
    let fgn = Fgn::new(a.hurst, block, a.out.seed).context("--hurst/--block")?;
    let delays = FgnDelays::new(fgn, mean as f64, std as f64, 1_000)?;
    Generated {
        kind: "fgn",
        inputs: Vec::new(),
        seed: a.out.seed,
        provenance: format!(
            "rtemu trace gen fgn --hurst {} --mean {} --std {} --count {} --seed {} --block {block}",
            a.hurst,
            format_duration(mean),
            format_duration(std),
            a.out.count,
            a.out.seed
        ),
        parameters: json!({ "hurst": a.hurst, "mean_ns": mean, "std_ns": std, "block": block }),
        out: &a.out,
    }
    .write(delays)
}

fn onoff(a: &OnOffArgs) -> anyhow::Result<()> {
    let cfg = OnOffConfig {
        sources: a.sources,
        alpha: a.alpha,
        mean_on_ns: duration("mean-on", &a.mean_on)? as f64,
        mean_off_ns: duration("mean-off", &a.mean_off)? as f64,
        source_rate_bps: a.source_rate,
        link_rate_bps: a.link_rate,
        buffer_bytes: a.buffer,
        probe_bytes: a.probe,
        interval_ns: duration("interval", &a.interval)?,
        base_delay_ns: duration("base", &a.base)?,
        resolution_ns: 1_000,
    };
    let g = OnOffDelays::new(cfg, a.out.seed)?;
    Generated {
        kind: "onoff",
        inputs: Vec::new(),
        seed: a.out.seed,
        provenance: format!(
            "rtemu trace gen onoff --sources {} --alpha {} --mean-on {} --mean-off {} --source-rate {} --link-rate {} --buffer {} --probe {} --interval {} --base {} --count {} --seed {}",
            a.sources, a.alpha, a.mean_on, a.mean_off, a.source_rate, a.link_rate, a.buffer,
            a.probe, a.interval, a.base, a.out.count, a.out.seed
        ),
        parameters: serde_json::to_value(cfg)?,
        out: &a.out,
    }
    .write(g)
}

fn iid(a: &IidArgs) -> anyhow::Result<()> {
    let mean = duration("mean", &a.mean)?;
    let std = duration("std", &a.std)?;
    let loss = a
        .ge_p
        .map(|p| GilbertElliott::new(p, a.ge_r, a.ge_loss_good, a.ge_loss_bad))
        .transpose()?;
    let g = IidTrace::new(a.dist, mean as f64, std as f64, 1_000, loss, a.out.seed)?;
    let ge = match a.ge_p {
        Some(p) => format!(
            " --ge-p {p} --ge-r {} --ge-loss-good {} --ge-loss-bad {}",
            a.ge_r, a.ge_loss_good, a.ge_loss_bad
        ),
        None => String::new(),
    };
    let gilbert_elliott = a.ge_p.map(
        |p| json!({ "p": p, "r": a.ge_r, "loss_good": a.ge_loss_good, "loss_bad": a.ge_loss_bad }),
    );
    Generated {
        kind: "iid",
        inputs: Vec::new(),
        seed: a.out.seed,
        provenance: format!(
            "rtemu trace gen iid --dist {:?} --mean {} --std {}{ge} --count {} --seed {}",
            a.dist, a.mean, a.std, a.out.count, a.out.seed
        )
        .to_lowercase(),
        parameters: json!({
            "dist": format!("{:?}", a.dist).to_lowercase(),
            "mean_ns": mean,
            "std_ns": std,
            "gilbert_elliott": gilbert_elliott,
        }),
        out: &a.out,
    }
    .write(g)
}

fn netem(a: &NetemGenArgs) -> anyhow::Result<()> {
    use rtemu_model::{netem, LinkModel};
    anyhow::ensure!(a.pps > 0, "--pps must be at least 1");
    let cfg = netem::parse(&a.model)
        .with_context(|| format!("--model {}", rtemu_sys::terminal::quoted(&a.model)))?;
    anyhow::ensure!(
        !cfg.has_discipline() && cfg.slot.is_none(),
        "--model {}: a queue discipline or `slot` decides when a packet leaves, after later \
         packets arrived, which a trace of one record per packet at its arrival cannot hold; \
         record its decisions with `rtemu sim --log` instead",
        rtemu_sys::terminal::quoted(&a.model)
    );
    let tables = rtemu_sim::tables::FileTables::from_env();
    let model = LinkModel::new(&cfg, &tables, a.out.seed, 0).context("the model")?;
    let records = ModelRecords::new(model, a.size, 1_000_000_000 / a.pps, a.out.count);
    Generated {
        kind: "netem",
        inputs: tables.files_of(&cfg),
        // `seed N` in the model decides over --seed (LinkModel::new).
        seed: cfg.seed.unwrap_or(a.out.seed),
        provenance: format!(
            "rtemu trace gen netem --model {:?} --pps {} --size {} --count {} --seed {}",
            a.model, a.pps, a.size, a.out.count, a.out.seed
        ),
        parameters: json!({ "model": a.model, "pps": a.pps, "size": a.size }),
        out: &a.out,
    }
    .write(records)
}
