//! `rtemu demo`: the vimage paper's east/west/north network with its north–east link shaped
//! through the engine, the traffic the demo sends across it, and the round trips the model
//! predicts for that traffic.

use std::fmt;
use std::io::Write;
use std::process::Output;

use anyhow::{Context as _, Result};
use rtemu_topo::lab;
use rtemu_topo::state::State;
use rtemu_topo::topology::{Impairment, Netem, SegmentKind};
use rtemu_topo::Topology;

/// The example network, built into the library so the demo runs from anywhere.
const EWN: &str = include_str!("../../../examples/east-west-north.toml");

/// The file the example network is named by in messages.
pub const FILE: &str = "examples/east-west-north.toml";

/// The demo lab's name.
pub const LAB: &str = "rtemu-demo";

/// The paper's north–east shaping (its ng_dummy link): a slow line with bit errors.
pub const NETEM: &str = "rate 128kbit delay 20ms ber 1e-5";

/// Ping payload sizes of the round-trip sweep, bytes.
const SIZES: [u32; 4] = [56, 256, 512, 1024];

/// IPv4 ping overhead on the wire: Ethernet 14 + IPv4 20 + ICMP 8 bytes.
const PING_OVERHEAD: u32 = 42;

/// The demo topology: the example, named [`LAB`], with the north–east link impaired by
/// [`NETEM`].
pub fn topology() -> Result<Topology> {
    let mut topo = Topology::parse(FILE, EWN)?;
    topo.lab = LAB.to_owned();
    let link = topo
        .segments
        .iter_mut()
        .find(|s| s.name == "north-east")
        .context("the example has no north-east link")?;
    link.kind = SegmentKind::Link {
        impairment: Some(Impairment {
            netem: Some(Netem::parse(NETEM).context("the demo's netem parameters")?),
            ..Impairment::default()
        }),
    };
    Ok(topo)
}

/// The round trip the model predicts for an IPv4 ping of `payload` bytes: both ways, the base
/// delay plus the frame's serialisation at the link rate.
pub fn predicted_rtt_ms(payload: u32) -> f64 {
    let frame_bits = f64::from(payload + PING_OVERHEAD) * 8.0;
    2.0 * (20.0 + frame_bits / 128_000.0 * 1e3)
}

/// Runs `argv` in `node` of lab `state` and returns its output.
fn run_in(state: &State, node: &str, argv: &[&str]) -> Result<Output> {
    let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
    lab::node_command(state, node, &argv)?
        .output()
        .with_context(|| format!("running {} in {node} (is it installed?)", argv[0]))
}

/// The route from tindy1 to tpx30, as `traceroute -n` prints it.
fn traceroute(state: &State) -> Result<String> {
    let argv = ["traceroute", "-n", "-q", "3", "-w", "2", "tpx30"];
    let out = run_in(state, "tindy1", &argv)?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// One size of the round-trip sweep: what the model predicts and what ping measured.
#[derive(Clone, Debug, PartialEq)]
struct PingRow {
    /// The ping payload, bytes.
    payload: u32,
    /// The predicted round trip, ms.
    predicted_ms: f64,
    /// The fastest round trip, as ping gives it (`12.345 ms`), or `-` without a reply.
    measured: String,
    /// Ping's count of replies (`5 received`).
    received: String,
}

impl PingRow {
    /// The row of `payload` from ping's summary `text`.
    fn parse(payload: u32, text: &str) -> PingRow {
        let received = text
            .lines()
            .find(|l| l.contains("received"))
            .and_then(|l| l.split(", ").nth(1))
            .unwrap_or("0 received")
            .to_owned();
        let measured = text
            .lines()
            .find(|l| l.contains("min/avg/max"))
            .and_then(|l| l.split('=').nth(1))
            .and_then(|v| v.trim().split('/').next())
            .map_or("-".to_owned(), |v| format!("{v} ms"));
        PingRow {
            payload,
            predicted_ms: predicted_rtt_ms(payload),
            measured,
            received,
        }
    }

    /// The heading of [`PingRow`]'s lines.
    const HEADING: &str = "  payload    frame    predicted     measured   received";
}

/// The row's line under [`PingRow::HEADING`].
impl fmt::Display for PingRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:>7} B {:>6} B {:>9.1} ms {:>12} {:>10}",
            self.payload,
            self.payload + PING_OVERHEAD,
            self.predicted_ms,
            self.measured,
            self.received
        )
    }
}

/// Pings tpx30 from tindy1 `count` times with `payload` bytes, across the shaped link.
fn ping(state: &State, payload: u32, count: u32) -> Result<PingRow> {
    let (count, size) = (count.to_string(), payload.to_string());
    let argv = [
        "ping", "-4", "-n", "-q", "-c", &count, "-i", "0.3", "-W", "3", "-s", &size, "tpx30",
    ];
    let out = run_in(state, "tindy1", &argv)?;
    Ok(PingRow::parse(
        payload,
        &String::from_utf8_lossy(&out.stdout),
    ))
}

/// The demo's traffic and what it shows, written to `out` as it comes: the route from tindy1
/// to tpx30, then a row per ping size of the round trips measured across the shaped link
/// against those the model predicts (`count` pings per size).
pub fn show(state: &State, count: u32, out: &mut impl Write) -> Result<()> {
    writeln!(out, "\n$ traceroute -n tpx30   (from tindy1)")?;
    write!(out, "{}", traceroute(state)?)?;
    writeln!(
        out,
        "\nround trips tindy1 → tpx30 across north–east ({count} pings per size; the model \
         predicts 2 × (20 ms + frame / 128 kbit/s)):"
    )?;
    writeln!(out, "{}", PingRow::HEADING)?;
    for size in SIZES {
        writeln!(out, "{}", ping(state, size, count)?)?;
    }
    writeln!(
        out,
        "(measured: the fastest round trip; queueing behind earlier frames adds to the others, \
         and ber 1e-5 corrupts about one 1000-byte frame in 12, which the receiver drops)\n"
    )?;
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
    }

    #[test]
    fn predicted_round_trips_add_serialisation_both_ways() {
        // 98-byte frame: 6.125 ms at 128 kbit/s, each way.
        assert!((predicted_rtt_ms(56) - 52.25).abs() < 1e-9);
        assert!(predicted_rtt_ms(1024) > 2.0 * (20.0 + 66.0));
    }

    #[test]
    fn a_row_reads_pings_summary_or_says_nothing_came_back() {
        let text = "--- tpx30 ping statistics ---\n\
                    5 packets transmitted, 4 received, 20% packet loss, time 1204ms\n\
                    rtt min/avg/max/mdev = 52.311/53.020/54.112/0.700 ms\n";
        let row = PingRow::parse(56, text);
        assert_eq!(
            (row.measured.as_str(), row.received.as_str()),
            ("52.311 ms", "4 received")
        );
        assert_eq!(
            row.to_string(),
            "     56 B     98 B      52.2 ms    52.311 ms 4 received"
        );
        let none = PingRow::parse(1024, "");
        assert_eq!(
            (none.measured.as_str(), none.received.as_str()),
            ("-", "0 received")
        );
        assert_eq!(
            PingRow::HEADING,
            format!(
                "{:>9} {:>8} {:>12} {:>12} {:>10}",
                "payload", "frame", "predicted", "measured", "received"
            )
        );
    }
}
