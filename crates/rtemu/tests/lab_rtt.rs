//! `rtemu lab rtt --lab LAB --from A --to B` end to end, as a user runs it: a lab brought up
//! from a topology file with an impaired link, the sweep run inside one node against an echo
//! server the command starts in the other, and the round trip the link's delay predicts.
//!
//! Needs root. Without it the test prints why and passes, unless `RTEMU_REQUIRE_ROOT=1` (CI)
//! makes it fail. The lab is taken down by a guard even when an assertion fails.

mod common;

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

#[test]
fn lab_rtt_between_two_nodes_sees_the_links_delay_both_ways() {
    if !root_or_skip("lab_rtt_between_two_nodes_sees_the_links_delay_both_ways") {
        return;
    }
    let lab = Lab::up("d", DELAYED);
    let csv = lab.dir.join("rtt.csv");
    let out = rtemu(&[
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
    ]);
    assert!(out.status.success(), "lab rtt failed: {}", text(&out));
    // The report says where it ran before the sweep's own JSON.
    assert!(
        text(&out).contains("from node `a` to node `b` at 10.77.0.2:7777"),
        "{}",
        text(&out)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("--json is JSON ({e}): {}", text(&out)));
    assert_eq!(report["protocol"], "udp");
    let results = report["results"].as_array().unwrap();
    let sizes: Vec<u64> = results
        .iter()
        .map(|r| r["size"].as_u64().unwrap())
        .collect();
    assert_eq!(sizes, [16, 308, 600]);
    for r in results {
        assert_eq!(r["lost"], 0, "{r}");
        assert_eq!(r["duplicates"], 0, "{r}");
        assert_eq!(
            r["received"].as_u64().unwrap() + r["reordered"].as_u64().unwrap(),
            20
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
    let rows = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(rows.lines().count(), 4, "{rows}");
    assert!(
        rows.lines().nth(1).unwrap().starts_with("udp,16,20,"),
        "{rows}"
    );
    // The echo server the command started in node b is gone with the sweep.
    let echo = rtemu(&["exec", "--lab", &lab.name, "b", "--", "ss", "-Hulpn"]);
    assert!(echo.status.success(), "{}", text(&echo));
    assert!(
        !String::from_utf8_lossy(&echo.stdout).contains("7777"),
        "echo left running: {}",
        text(&echo)
    );
}
