//! `rtemu demo`: the vimage paper's east/west/north network with its shaped north–east link,
//! real traffic through it, and the engine's own fidelity report; `rtemu demo bufferbloat`:
//! one upload behind each queue discipline, in virtual time, as a table and a figure.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::{Args, Parser, Subcommand};
use rtemu_control::demo::{self, LAB, NETEM};
use rtemu_control::engine::EngineOptions;
use rtemu_sim::bufferbloat;
use rtemu_topo::lab;

use super::topo::bring_up;

/// Run the east/west/north lab with an impaired north–east link and show what it does.
///
/// Brings up the vimage paper's network (tindy1 — west — north ═ east — tpx30) with the
/// north–east link at `rate 128kbit delay 20ms ber 1e-5`, traces the route from tindy1 to
/// tpx30, sweeps ping sizes across it against the round trip the model predicts, prints the
/// engine's counters and release fidelity, and takes the lab down. Needs root; without it,
/// runs the simulator on its built-in traffic and model instead.
#[derive(Debug, Args)]
#[command(
    args_conflicts_with_subcommands = true,
    after_help = "Examples:
  sudo rtemu demo
  sudo rtemu demo --count 20
  rtemu demo bufferbloat --plot bufferbloat.svg"
)]
pub struct DemoArgs {
    /// Pings per size in the round-trip sweep.
    #[arg(long, default_value_t = 5, value_parser = crate::cmd::number_in::<u32>(1..=100))]
    pub count: u32,
    /// Another demo instead of the vimage paper's network.
    #[command(subcommand)]
    pub other: Option<Demo>,
}

/// The demos besides the default one.
#[derive(Debug, Subcommand)]
pub enum Demo {
    /// Bufferbloat and its cures: the same upload behind drop-tail, CoDel, FQ-CoDel, PIE,
    /// DOCSIS-PIE and DualPI2, and a game flow's delay through each.
    ///
    /// An unresponsive 12 Mbit/s upload and a 50 pps game flow cross `rate 10mbit` behind each
    /// queue for 60 s of virtual time, driven as the simulator drives the models (no root, no
    /// network; a seed decides every figure). Prints per queue the game flow's delay
    /// percentiles and loss and the upload's throughput and drops (the rows of `rtemu-bench
    /// aqm`); `--plot` draws the game flow's delay over time, one line per queue.
    #[command(after_help = "Examples:
  rtemu demo bufferbloat
  rtemu demo bufferbloat --plot bufferbloat.svg
  rtemu demo bufferbloat --seed 2 --plot bufferbloat.png")]
    Bufferbloat(BufferbloatArgs),
}

/// `rtemu demo bufferbloat`'s options.
#[derive(Debug, Args)]
pub struct BufferbloatArgs {
    /// The seed of the upload's arrivals and the queues' own draws.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Draw the game flow's delay over time, one line per queue, to this .svg or .png file.
    #[arg(long, value_name = "FILE.svg|FILE.png")]
    plot: Option<PathBuf>,
}

/// The simulator's arguments, parsed from nothing: its defaults.
#[derive(Debug, Parser)]
struct SimDefaults {
    #[command(flatten)]
    sim: super::sim::SimArgs,
}

/// `rtemu demo`.
pub fn run(args: &DemoArgs) -> Result<()> {
    if let Some(Demo::Bufferbloat(args)) = &args.other {
        return run_bufferbloat(args);
    }
    if !rtemu_control::root::is_root() {
        eprintln!(
            "rtemu demo needs root (network namespaces and CAP_NET_ADMIN for the real-time \
             engine); running the simulator on its built-in traffic and model instead.\n"
        );
        return super::sim::run(&SimDefaults::parse_from(["sim"]).sim);
    }
    if lab::resolve_lab(Some(LAB)).is_ok() {
        bail!("lab {LAB} already runs (an earlier demo?): `rtemu down {LAB}` removes it");
    }
    let topo = demo::topology()?;
    println!("rtemu demo: the vimage paper's network, north–east shaped as `{NETEM}`\n");
    println!("  tindy1 ── west ── north ══ east ── tpx30      (══ through rtemu's engine)\n");
    let state = bring_up(
        &topo,
        &format!("{} (demo)", demo::FILE),
        &EngineOptions::default(),
    )?;
    // The engine's view of the same traffic (what it did, and how precisely) is its final
    // report, which `down` prints.
    let shown = demo::show(&state, args.count, &mut std::io::stdout().lock());
    println!();
    let down = rtemu_control::lab::take_down(&state.lab, None, &mut std::io::stdout().lock());
    shown?;
    down.map(drop)
}

/// `rtemu demo bufferbloat`.
fn run_bufferbloat(args: &BufferbloatArgs) -> Result<()> {
    if let Some(path) = &args.plot {
        rtemu_report::plot::Format::of(path)?;
    }
    let runs = bufferbloat::run_all(args.seed)?;
    let rows: Vec<bufferbloat::Summary> = runs.iter().map(bufferbloat::Run::summary).collect();
    let mut out = std::io::stdout().lock();
    write!(out, "rtemu demo bufferbloat: ")?;
    rtemu_report::bufferbloat::write_table(&mut out, args.seed, &rows)?;
    if let Some(path) = &args.plot {
        rtemu_report::bufferbloat::chart(&runs, args.seed).draw(path)?;
    }
    Ok(())
}
