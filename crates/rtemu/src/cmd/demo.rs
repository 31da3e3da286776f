//! `rtemu demo`: the vimage paper's east/west/north network with its shaped north–east link,
//! real traffic through it, and the engine's own fidelity report.

use anyhow::{bail, Result};
use clap::{Args, Parser};
use rtemu_control::demo::{self, LAB, NETEM};
use rtemu_control::engine::EngineOptions;
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
#[command(after_help = "Examples:
  sudo rtemu demo
  sudo rtemu demo --count 20")]
pub struct DemoArgs {
    /// Pings per size in the round-trip sweep.
    #[arg(long, default_value_t = 5, value_parser = crate::cmd::number_in::<u32>(1..=100))]
    pub count: u32,
}

/// The simulator's arguments, parsed from nothing: its defaults.
#[derive(Debug, Parser)]
struct SimDefaults {
    #[command(flatten)]
    sim: super::sim::SimArgs,
}

/// `rtemu demo`.
pub fn run(args: &DemoArgs) -> Result<()> {
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
