//! The soak benchmark, short: `rtemu-bench engine --part soak` for 12 s must pass its own
//! checks (every snapshot balanced, B's receiver and interface counted what the engine
//! delivered, the engine's memory flat) and report them in its JSON summary. Root.

// The soak brings its own lab up and down; of the shared helpers it uses only these.
#[allow(dead_code)]
mod common;

use common::{root_or_skip, rtemu_bench, text};
use serde_json::Value;

#[test]
fn a_short_soak_balances_at_every_snapshot_and_the_receiver_counts_what_was_delivered() {
    if !root_or_skip("soak") {
        return;
    }
    let out = rtemu_bench(&["engine", "--part", "soak", "--minutes", "0.2"]);
    let shown = text(&out);
    assert!(out.status.success(), "the soak failed:\n{shown}");
    let summary: Value = String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.starts_with('{'))
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no JSON summary:\n{shown}"));
    let n = |k: &str| {
        summary[k]
            .as_u64()
            .unwrap_or_else(|| panic!("no {k}:\n{shown}"))
    };
    assert_eq!(summary["ok"], true, "{shown}");
    // A snapshot every 2 s over 12 s, and one after the drain.
    assert!(n("snapshots") >= 5, "{shown}");
    assert_eq!(n("snapshots_balanced"), n("snapshots"), "{shown}");
    // B's receiver got every datagram but those its socket buffer had no room for.
    assert_eq!(
        n("received_by_b") + n("socket_drops_at_b"),
        n("delivered"),
        "{shown}"
    );
    assert_eq!(n("at_b_interface"), n("delivered"), "{shown}");
    // Twice the rate offered: about half of what arrived was dropped by the full queue.
    assert!(n("queue_full") * 4 > n("received"), "{shown}");
    let rss = &summary["rss_kib"];
    let kib = |k: &str| rss[k].as_u64().unwrap();
    assert!(kib("max") <= kib("first") + kib("bound_growth"), "{shown}");
}
