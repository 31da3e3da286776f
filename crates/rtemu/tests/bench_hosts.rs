//! `rtemu-bench topo --hosts`, small: two agents, labs of 10 nodes, a short link part. The
//! tables must have a row per shape and per path with positive figures, the stitched links
//! must be counted, and nothing of the cluster may be left. Root; the range checks without.

// The benchmark brings its own labs up and down; of the shared helpers it uses only these.
#[allow(dead_code)]
mod common;

use common::{root_or_skip, rtemu_bench, text};

/// The cells of the Markdown table rows of `out` whose first cell is `first`.
fn rows<'a>(out: &'a str, first: &str) -> Vec<Vec<&'a str>> {
    out.lines()
        .filter_map(|l| l.strip_prefix("| ")?.strip_suffix(" |"))
        .map(|l| l.split(" | ").collect::<Vec<_>>())
        .filter(|cells| cells[0] == first)
        .collect()
}

fn positive(cell: &str, shown: &str) -> f64 {
    let x: f64 = cell
        .parse()
        .unwrap_or_else(|_| panic!("`{cell}` is not a number:\n{shown}"));
    assert!(x > 0.0, "`{cell}` is not positive:\n{shown}");
    x
}

#[test]
fn the_cluster_bench_measures_every_shape_and_path_and_leaves_nothing() {
    if !root_or_skip("bench_hosts") {
        return;
    }
    let args = [
        "topo",
        "--hosts",
        "2",
        "--nodes",
        "10",
        "--pings",
        "20",
        "--seconds",
        "1",
    ];
    let out = rtemu_bench(&args);
    let shown = text(&out);
    assert!(out.status.success(), "the benchmark failed:\n{shown}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    for shape in ["chain", "star", "grid", "random"] {
        let r = rows(&stdout, shape);
        assert_eq!(r.len(), 1, "{shape}:\n{shown}");
        let r = &r[0];
        assert_eq!(r.len(), 10, "{shown}");
        assert_eq!(r[1], "10", "{shown}");
        let (links, stitched): (usize, usize) = (r[2].parse().unwrap(), r[3].parse().unwrap());
        // Ten nodes over two hosts: some link crosses, not every one.
        assert!(stitched >= 1 && stitched < links, "{shape}:\n{shown}");
        for cell in &r[4..] {
            positive(cell, &shown);
        }
    }
    // A chain placed in two blocks of five crosses once.
    assert_eq!(rows(&stdout, "chain")[0][3], "1", "{shown}");
    for path in ["local link", "stitched link", "underlay"] {
        let r = rows(&stdout, path);
        assert_eq!(r.len(), 1, "{path}:\n{shown}");
        let (p50, p99) = (positive(r[0][2], &shown), positive(r[0][3], &shown));
        assert!(p50 <= p99, "{shown}");
        positive(r[0][4], &shown);
        positive(r[0][5], &shown);
    }
    assert!(stdout.contains("The stitch adds"), "{shown}");
    let netns = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .unwrap();
    let netns = String::from_utf8_lossy(&netns.stdout);
    assert!(!netns.contains("rtmhb"), "hosts left:\n{netns}");
}

#[test]
fn the_cluster_bench_refuses_hosts_and_nodes_out_of_range() {
    for (flag, value, message) in [
        ("--hosts", "1", "--hosts 1: give 2 to 8 hosts"),
        ("--hosts", "9", "--hosts 9: give 2 to 8 hosts"),
        ("--nodes", "1", "--nodes 1: give 2 to 9999 nodes"),
    ] {
        let out = rtemu_bench(&["topo", flag, value]);
        assert!(!out.status.success());
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(e.contains(message), "{flag} {value}: {e}");
    }
}
