//! `rtemu demo`: the vimage paper's east/west/north network with its shaped north–east link,
//! real traffic through it, and the engine's own fidelity report.

use std::process::Output;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser};
use rtemu_topo::lab;
use rtemu_topo::state::State;
use rtemu_topo::topology::{Impairment, Netem, SegmentKind};
use rtemu_topo::Topology;

use super::topo::{bring_up, take_down};
use rtemu_control::engine::EngineOptions;

/// The example network, built into the binary so the demo runs from anywhere.
const EWN: &str = include_str!("../../../../examples/east-west-north.toml");

/// The demo lab's name.
const LAB: &str = "rtemu-demo";

/// The paper's north–east shaping (its ng_dummy link): a slow line with bit errors.
pub const DEMO_NETEM: &str = "rate 128kbit delay 20ms ber 1e-5";

/// Ping payload sizes of the round-trip sweep, bytes.
const SIZES: [u32; 4] = [56, 256, 512, 1024];

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
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub count: u32,
}

/// The simulator's arguments, parsed from nothing: its defaults.
#[derive(Debug, Parser)]
struct SimDefaults {
    #[command(flatten)]
    sim: super::sim::SimArgs,
}

/// The demo topology: the example with the north–east link impaired.
fn topology() -> Result<Topology> {
    let mut topo = Topology::parse("examples/east-west-north.toml", EWN)?;
    topo.lab = LAB.to_owned();
    let link = topo
        .segments
        .iter_mut()
        .find(|s| s.name == "north-east")
        .context("the example has no north-east link")?;
    link.kind = SegmentKind::Link {
        impairment: Some(Impairment {
            netem: Some(Netem::parse(DEMO_NETEM).context("the demo's netem parameters")?),
            ..Impairment::default()
        }),
    };
    Ok(topo)
}

/// Runs `argv` in `node` and returns its output.
fn run_in(state: &State, node: &str, argv: &[&str]) -> Result<Output> {
    let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
    lab::node_command(state, node, &argv)?
        .output()
        .with_context(|| format!("running {} in {node} (is it installed?)", argv[0]))
}

/// The round trip the model predicts for an IPv4 ping of `payload` bytes: both ways, the base
/// delay plus the frame's serialisation at the link rate (Ethernet 14 + IPv4 20 + ICMP 8).
fn predicted_rtt_ms(payload: u32) -> f64 {
    let frame_bits = (payload + 42) as f64 * 8.0;
    2.0 * (20.0 + frame_bits / 128_000.0 * 1e3)
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
    let topo = topology()?;
    println!("rtemu demo: the vimage paper's network, north–east shaped as `{DEMO_NETEM}`\n");
    println!("  tindy1 ── west ── north ══ east ── tpx30      (══ through rtemu's engine)\n");
    let state = bring_up(
        &topo,
        "examples/east-west-north.toml (demo)",
        &EngineOptions::default(),
    )?;
    let shown = show(&state, args.count);
    println!();
    let down = take_down(&state.lab, None);
    shown?;
    down.map(drop)
}

/// The traffic and the reports, between `up` and `down`.
fn show(state: &State, count: u32) -> Result<()> {
    println!("\n$ traceroute -n tpx30   (from tindy1)");
    let trace = run_in(
        state,
        "tindy1",
        &["traceroute", "-n", "-q", "3", "-w", "2", "tpx30"],
    )?;
    print!("{}", String::from_utf8_lossy(&trace.stdout));
    println!(
        "\nround trips tindy1 → tpx30 across north–east ({count} pings per size; the model \
         predicts 2 × (20 ms + frame / 128 kbit/s)):"
    );
    println!(
        "{:>9} {:>8} {:>12} {:>12} {:>10}",
        "payload", "frame", "predicted", "measured", "received"
    );
    for size in SIZES {
        let out = run_in(
            state,
            "tindy1",
            &[
                "ping",
                "-4",
                "-n",
                "-q",
                "-c",
                &count.to_string(),
                "-i",
                "0.3",
                "-W",
                "3",
                "-s",
                &size.to_string(),
                "tpx30",
            ],
        )?;
        let text = String::from_utf8_lossy(&out.stdout);
        let received = text
            .lines()
            .find(|l| l.contains("received"))
            .and_then(|l| l.split(", ").nth(1))
            .unwrap_or("0 received")
            .to_owned();
        let min = text
            .lines()
            .find(|l| l.contains("min/avg/max"))
            .and_then(|l| l.split('=').nth(1))
            .and_then(|v| v.trim().split('/').next())
            .map_or("-".to_owned(), |v| format!("{v} ms"));
        println!(
            "{:>7} B {:>6} B {:>9.1} ms {:>12} {:>10}",
            size,
            size + 42,
            predicted_rtt_ms(size),
            min,
            received
        );
    }
    println!(
        "(measured: the fastest round trip; queueing behind earlier frames adds to the others, \
         and ber 1e-5 corrupts about one 1000-byte frame in 12, which the receiver drops)\n"
    );
    // The engine's view of the same traffic (what it did, and how precisely) is its final
    // report, which `down` prints.
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_demo_topology_impairs_only_north_east() {
        let topo = topology().unwrap();
        let impaired: Vec<_> = topo.impaired_links().map(|(s, _)| s.name.clone()).collect();
        assert_eq!(impaired, ["north-east"]);
        assert_eq!(topo.lab, LAB);
        rtemu_model::netem::parse(DEMO_NETEM).unwrap();
    }

    #[test]
    fn predicted_round_trips_add_serialisation_both_ways() {
        // 98-byte frame: 6.125 ms at 128 kbit/s, each way.
        assert!((predicted_rtt_ms(56) - 52.25).abs() < 1e-9);
        assert!(predicted_rtt_ms(1024) > 2.0 * (20.0 + 66.0));
    }
}
