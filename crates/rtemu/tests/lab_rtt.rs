//! `rtemu lab rtt --lab LAB --from A --to B` end to end, as a user runs it: a lab brought up
//! from a topology file with an impaired link, the sweeps (UDP, raw Ethernet or both) run
//! inside one node against echo servers the command starts in the other, and the round trip
//! the link's delay predicts.
//!
//! Needs root. Without it the test prints why and passes, unless `RTEMU_REQUIRE_ROOT=1` (CI)
//! makes it fail. The lab is taken down by a guard even when an assertion fails.

mod common;

use std::os::unix::fs::MetadataExt as _;

use common::{root_or_skip, rtemu, text, Lab};

/// Two nodes joined by a link through rtemu's engine, 5 ms each way.
const DELAYED: &str = r#"
lab = "LAB"
ip = "ipv4"
[nodes.a]
[nodes.b]
[[links]]
name = "ab"
endpoints = ["a", "b"]
ipv4 = "10.77.0.0/30"
netem = "delay 5ms"
"#;

/// Checks one protocol's results of a sweep of `count` probes per size over `DELAYED`'s link.
fn assert_delayed(results: &serde_json::Value, sizes: &[u64], count: u64) {
    let results = results.as_array().expect("results");
    let got: Vec<u64> = results
        .iter()
        .map(|r| r["size"].as_u64().unwrap())
        .collect();
    assert_eq!(got, sizes);
    for r in results {
        assert_eq!(r["lost"], 0, "{r}");
        assert_eq!(r["duplicates"], 0, "{r}");
        assert_eq!(
            r["received"].as_u64().unwrap() + r["reordered"].as_u64().unwrap(),
            count
        );
        // 5 ms there and 5 ms back: never less than 10 ms; the engine's release error and a
        // busy machine add to it, within a generous bound.
        let best = r["rtt_ns"]["min_ns"].as_i64().unwrap();
        assert!(
            (10_000_000..25_000_000).contains(&best),
            "best round trip {best} ns for 2 × 5 ms: {r}"
        );
        // The kernel's stamps see the same delay (veth takes software stamps).
        let kernel = r["kernel_rtt_ns"]["min_ns"]
            .as_i64()
            .expect("kernel stamps");
        assert!(kernel >= 10_000_000 && kernel <= best + 1_000_000, "{r}");
    }
}

/// The command lines of the processes in network namespace `netns` (a name under
/// /run/netns): a namespace file and a process's `ns/net` link share the inode.
fn processes_in(netns: &str) -> Vec<String> {
    let ns = std::fs::metadata(format!("/run/netns/{netns}"))
        .unwrap_or_else(|e| panic!("namespace {netns}: {e}"))
        .ino();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| {
            let dir = entry.ok()?.path();
            let inside = std::fs::metadata(dir.join("ns/net")).ok()?.ino() == ns;
            let cmdline = std::fs::read(dir.join("cmdline")).ok()?;
            inside.then(|| String::from_utf8_lossy(&cmdline).replace('\0', " "))
        })
        .collect()
}

/// Runs `rtemu lab rtt` from node a to node b of `lab`: 20 probes per size after 3 discarded,
/// sizes up to 600 by 292, JSON on stdout and CSV into `csv`, with `extra` arguments.
fn sweep(lab: &Lab, csv: &std::path::Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "lab",
        "rtt",
        "--lab",
        &lab.name,
        "--from",
        "a",
        "--to",
        "b",
        "--count",
        "20",
        "--warmup",
        "3",
        "--max-size",
        "600",
        "--step",
        "292",
        "--timeout",
        "2s",
        "--json",
        "--csv",
        csv.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = rtemu(&args);
    assert!(out.status.success(), "lab rtt failed: {}", text(&out));
    out
}

#[test]
fn lab_rtt_between_two_nodes_sees_the_links_delay_both_ways() {
    if !root_or_skip("lab_rtt_between_two_nodes_sees_the_links_delay_both_ways") {
        return;
    }
    let lab = Lab::up("d", DELAYED);
    let csv = lab.dir.join("rtt.csv");
    let out = sweep(&lab, &csv, &[]);
    // The report says where it ran before the sweep's own JSON.
    assert!(
        text(&out).contains("from node `a` to node `b` at 10.77.0.2:7777"),
        "{}",
        text(&out)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("--json is JSON ({e}): {}", text(&out)));
    assert_eq!(report["protocol"], "udp");
    assert_delayed(&report["results"], &[16, 308, 600], 20);
    let rows = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(rows.lines().count(), 4, "{rows}");
    assert!(
        rows.lines().nth(1).unwrap().starts_with("udp,16,20,"),
        "{rows}"
    );
    // The echo server the command started in node b is gone with the sweep.
    let left = processes_in(&format!("rtemu-{}.b", lab.name));
    assert!(left.is_empty(), "left running in node b: {left:?}");
}

/// `--protocol both`: a UDP sweep, then a raw Ethernet one between the interfaces of the link,
/// each seeing the link's delay, reported side by side and drawn on one chart.
#[test]
fn lab_rtt_both_protocols_see_the_links_delay() {
    if !root_or_skip("lab_rtt_both_protocols_see_the_links_delay") {
        return;
    }
    let lab = Lab::up("b", DELAYED);
    let csv = lab.dir.join("rtt.csv");
    let svg = lab.dir.join("rtt.svg");
    let out = sweep(
        &lab,
        &csv,
        &["--protocol", "both", "--plot", svg.to_str().unwrap()],
    );
    // b's address for UDP; b's interface on the link and its MAC address for raw frames.
    let said = text(&out);
    assert!(
        said.contains("from node `a` to node `b` at 10.77.0.2:7777"),
        "{said}"
    );
    assert!(
        said.contains("raw Ethernet from node `a`'s eth0 to node `b`'s eth0 at 02:"),
        "{said}"
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("--json is JSON ({e}): {said}"));
    assert_eq!(report["udp"]["protocol"], "udp");
    assert_eq!(report["raw"]["protocol"], "raw");
    let mac = rtemu(&[
        "exec",
        "--lab",
        &lab.name,
        "b",
        "--",
        "cat",
        "/sys/class/net/eth0/address",
    ]);
    assert!(mac.status.success(), "{}", text(&mac));
    let mac = String::from_utf8_lossy(&mac.stdout).trim().to_owned();
    let target = report["raw"]["target"].as_str().unwrap();
    assert!(target.contains(&format!("{mac} on eth0")), "{target}");
    // Each protocol's sizes in its own unit: UDP payloads, raw frames.
    assert_delayed(&report["udp"]["results"], &[16, 308, 600], 20);
    assert_delayed(&report["raw"]["results"], &[64, 356], 20);
    let rows = std::fs::read_to_string(&csv).unwrap();
    let protocols: Vec<&str> = rows
        .lines()
        .skip(1)
        .map(|row| row.split(',').next().unwrap())
        .collect();
    assert_eq!(protocols, ["udp", "udp", "udp", "raw", "raw"], "{rows}");
    let chart = std::fs::read_to_string(&svg).unwrap();
    for series in [
        "UDP best",
        "UDP average",
        "UDP worst",
        "raw best",
        "raw worst",
    ] {
        assert!(chart.contains(series), "no `{series}` in the plot");
    }
    // Both echo servers the command started in node b are gone with the sweeps.
    let left = processes_in(&format!("rtemu-{}.b", lab.name));
    assert!(left.is_empty(), "left running in node b: {left:?}");
}
