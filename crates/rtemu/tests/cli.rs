//! The `rtemu` binary as a user runs it: exit codes, reports, outputs and error messages.

use std::path::PathBuf;
use std::process::{Command, Output};

fn rtemu(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rtemu"))
        .args(args)
        .output()
        .expect("rtemu runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Standard output then standard error, for assertion messages.
fn text(o: &Output) -> String {
    format!("{}{}", stdout(o), stderr(o))
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A scratch directory removed when the test ends, pass or fail.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("rtemu-cli-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn path(&self, file: &str) -> String {
        self.0.join(file).to_str().unwrap().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn plain_sim_prints_the_report_of_the_built_in_defaults() {
    let o = rtemu(&["sim"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("cbr 1000pps 1000B 10s"), "{out}");
    assert!(out.contains("delay 20ms 5ms distribution normal"), "{out}");
    let line = |key: &str| -> u64 {
        out.lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(key.split_whitespace().count()))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {key} in {out}"))
    };
    assert_eq!(line("packets in"), 10_000);
    assert_eq!(line("delivered") + line("dropped"), 10_000);
}

#[test]
fn json_report_is_valid_and_accounts_for_every_copy() {
    let o = rtemu(&[
        "sim",
        "--traffic",
        "poisson 20000pps 200B 1s",
        "--model",
        "loss 2% duplicate 1% rate 20mbit limit 20",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let s = &v["summary"];
    let dropped: u64 = s["dropped"]
        .as_object()
        .unwrap()
        .values()
        .map(|x| x.as_u64().unwrap())
        .sum();
    assert_eq!(
        s["packets_in"].as_u64().unwrap() + s["duplicated"].as_u64().unwrap(),
        s["delivered"].as_u64().unwrap() + dropped
    );
    assert!(s["dropped"]["queue-full"].as_u64().unwrap() > 0);
    assert!(s["delay"]["percentiles_ns"]["p99"].as_u64().is_some());
}

#[test]
fn same_seed_same_bytes_other_seed_other_bytes_and_a_capture_reads_back() {
    let dir = Scratch::new("seed");
    let run = |seed: &str, out: &str, log: &str| {
        let o = rtemu(&[
            "sim",
            "--traffic",
            "cbr 5000pps 300B 2s",
            "--model",
            "delay 5ms 2ms loss 3% corrupt 1%",
            "--seed",
            seed,
            "--out",
            out,
            "--log",
            log,
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
    };
    let (a, b, c) = (dir.path("a.pcap"), dir.path("b.pcap"), dir.path("c.pcap"));
    run("9", &a, &dir.path("a.csv"));
    run("9", &b, &dir.path("b.jsonl"));
    run("10", &c, &dir.path("c.csv"));
    let read = |p: &str| std::fs::read(p).unwrap();
    assert_eq!(read(&a), read(&b));
    assert_ne!(read(&a), read(&c));
    // The JSON-lines log says the same as the CSV one.
    let csv_lines = std::fs::read_to_string(dir.path("a.csv"))
        .unwrap()
        .lines()
        .count();
    let json = std::fs::read_to_string(dir.path("b.jsonl")).unwrap();
    assert_eq!(json.lines().count() + 1, csv_lines);
    for line in json.lines() {
        serde_json::from_str::<serde_json::Value>(line).unwrap();
    }
    // The output is itself a valid input.
    let o = rtemu(&["sim", &a, "--model", "delay 1ms", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["summary"]["dropped"]["loss"], 0);
    assert!(v["summary"]["packets_in"].as_u64().unwrap() > 9000);
}

#[test]
fn bad_input_gets_a_clear_error_and_a_non_zero_exit() {
    let dir = Scratch::new("bad");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["sim".into(), "--model".into(), "loss 120%".into()],
            "loss 120% (column 6): must be between 0% and 100%",
        ),
        (
            vec![
                "sim".into(),
                "--model".into(),
                "delay 1ms distribution nosuch".into(),
            ],
            "no table nosuch.dist",
        ),
        (
            vec![
                "sim".into(),
                "--traffic".into(),
                "cbr 10000 1000B 10s".into(),
            ],
            "10000",
        ),
        (vec!["sim".into(), dir.path("missing.pcap")], "missing.pcap"),
    ];
    for (args, expect) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = rtemu(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = stderr(&o);
        assert!(
            err.starts_with("rtemu: error: ") && err.contains(expect),
            "{args:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    // A truncated capture: the error names the file and the byte offset.
    let full = dir.path("full.pcap");
    assert!(rtemu(&[
        "sim",
        "--traffic",
        "cbr 100pps 500B 1s",
        "--model",
        "delay 1ms",
        "--out",
        &full
    ])
    .status
    .success());
    let bytes = std::fs::read(&full).unwrap();
    let cut = dir.path("cut.pcap");
    std::fs::write(&cut, &bytes[..bytes.len() - 100]).unwrap();
    let o = rtemu(&["sim", &cut]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.contains("cut.pcap") && err.contains("at byte"), "{err}");
}

#[test]
fn help_shows_worked_examples_and_version_prints() {
    let o = rtemu(&["sim", "--help"]);
    assert!(o.status.success());
    assert!(stdout(&o).contains("Examples:") && stdout(&o).contains("rtemu sim in.pcap"));
    let o = rtemu(&["--version"]);
    assert!(stdout(&o).starts_with("rtemu "), "{}", stdout(&o));
}

#[test]
fn an_action_trace_decides_each_packet_exactly() {
    let dir = Scratch::new("trace");
    let trace = dir.path("t.txt");
    // Packet 0 after 1 ms, packet 1 dropped, packet 2 twice (100 µs and 300 µs), then it loops.
    std::fs::write(
        &trace,
        "# test trace\npass 1000us\ndrop\ndup 100us\npass 300us\n",
    )
    .unwrap();
    let log = dir.path("fates.csv");
    let o = rtemu(&[
        "sim",
        "--traffic",
        "cbr 1000pps 100B 6ms",
        "--trace",
        &trace,
        "--log",
        &log,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let lines: Vec<Vec<String>> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect();
    let delay = |l: &Vec<String>| l[4].parse::<u64>().unwrap() - l[1].parse::<u64>().unwrap();
    // seq, copy, fate, delay: two rounds of the three-packet trace.
    let got: Vec<(String, String, String, Option<u64>)> = lines
        .iter()
        .map(|l| {
            (
                l[0].clone(),
                l[2].clone(),
                l[3].clone(),
                (l[3] == "delivered").then(|| delay(l)),
            )
        })
        .collect();
    let expect = |seq: u64| {
        let s = seq.to_string();
        match seq % 3 {
            0 => vec![(s, "0".into(), "delivered".into(), Some(1_000_000))],
            1 => vec![(s, "0".into(), "dropped".into(), None)],
            _ => vec![
                (s.clone(), "0".into(), "delivered".into(), Some(100_000)),
                (s, "1".into(), "delivered".into(), Some(300_000)),
            ],
        }
    };
    let want: Vec<_> = (0..6).flat_map(expect).collect();
    assert_eq!(got, want);
    assert!(lines
        .iter()
        .filter(|l| l[3] == "dropped")
        .all(|l| l[5] == "trace"));
}

#[test]
fn a_generated_long_range_dependent_trace_drives_the_link_and_can_stop_it() {
    let dir = Scratch::new("lrd");
    let trace = dir.path("lrd.rpl");
    let o = rtemu(&[
        "trace", "gen", "fgn", "--hurst", "0.8", "--mean", "5ms", "--std", "1ms", "--count",
        "20000", "--seed", "7", "-o", &trace,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let run = || {
        rtemu(&[
            "sim",
            "--traffic",
            "cbr 10000pps 100B 10s",
            "--trace",
            &trace,
            "--model",
            "rate 1gbit",
            "--end",
            "stop",
            "--json",
        ])
    };
    let o = run();
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let s = &v["summary"];
    // The trace has 20 000 records: the 100 000-packet input stops after them.
    assert_eq!(s["packets_in"], 20_000);
    assert_eq!(s["stopped_early"], true);
    // Delays are the trace's (plus 0.8 µs of serialization): mean within the trace's own
    // spread of its configured 5 ms (long-range dependence makes sample means wander).
    let mean = s["delay"]["mean_ns"].as_u64().unwrap() as f64;
    assert!((mean - 5e6).abs() < 1e6, "mean delay {mean}");
    assert_eq!(
        run().stdout,
        o.stdout,
        "a trace-driven run is deterministic"
    );
}

#[test]
fn a_delivery_opportunity_trace_caps_throughput_at_its_mean_rate() {
    let dir = Scratch::new("mahimahi");
    let trace = dir.path("link.down");
    // One opportunity every millisecond: 1504 bytes/ms = 12.032 Mbit/s.
    std::fs::write(
        &trace,
        (1..=100).map(|ms| format!("{ms}\n")).collect::<String>(),
    )
    .unwrap();
    let o = rtemu(&[
        "sim",
        "--traffic",
        "cbr 3000pps 1000B 5s",
        "--trace",
        &trace,
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let tput = v["summary"]["throughput_bps"].as_f64().unwrap();
    // Offered 24 Mbit/s for 5 s into an unbounded queue: delivered at the trace's rate.
    assert!((tput - 12.032e6).abs() < 0.01 * 12.032e6, "{tput}");
}

#[test]
fn a_flow_trace_takes_its_flow_and_the_model_takes_the_rest() {
    let dir = Scratch::new("flow");
    let trace = dir.path("seven.txt");
    std::fs::write(&trace, "pass 7000us\n").unwrap();
    // The generator's frames are UDP to port 9.
    let mean_delay = |pattern: &str| {
        let spec = format!("{pattern}={trace}");
        let o = rtemu(&[
            "sim",
            "--traffic",
            "cbr 1000pps 100B 1s",
            "--flow-trace",
            &spec,
            "--model",
            "delay 1ms",
            "--json",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v["summary"]["delay"]["mean_ns"].as_u64().unwrap()
    };
    assert_eq!(mean_delay("proto=udp dport=9"), 7_000_000);
    assert_eq!(mean_delay("proto=tcp"), 1_000_000);
    assert_eq!(mean_delay("dport=10-20"), 1_000_000);
    let o = rtemu(&["sim", "--flow-trace", "proto=udpp=x.rpl"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--flow-trace"), "{}", stderr(&o));
}

#[test]
fn a_path_recorded_as_two_captures_replays_exactly() {
    let dir = Scratch::new("record");
    let (sent, received, trace, replayed) = (
        dir.path("sent.pcap"),
        dir.path("recv.pcap"),
        dir.path("path.txt"),
        dir.path("replay.pcap"),
    );
    // The "real path": a model with jitter, loss and duplicates, seen by two captures.
    let ok = |args: &[&str]| {
        let o = rtemu(args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        o
    };
    ok(&[
        "sim",
        "--traffic",
        "poisson 5000pps 200B 2s",
        "--model",
        "delay 1ms",
        "--out",
        &sent,
    ]);
    ok(&[
        "sim",
        &sent,
        "--model",
        "delay 10ms 3ms loss 2% duplicate 1%",
        "--seed",
        "5",
        "--out",
        &received,
    ]);
    let o = ok(&["trace", "convert", &sent, &trace, "--receiver", &received]);
    assert!(stderr(&o).contains("dropped"), "{}", stderr(&o));
    // Replaying the trace (text form: ns exact) over the sender capture gives the receiver's.
    ok(&["sim", &sent, "--trace", &trace, "--out", &replayed]);
    assert_eq!(
        std::fs::read(&replayed).unwrap(),
        std::fs::read(&received).unwrap()
    );
}

/// The subcommands `rtemu PATH… --help` lists (without `help`), read from its "Commands:"
/// section, so a subcommand added later is checked too.
fn subcommands(path: &[&str]) -> Vec<String> {
    let mut args = path.to_vec();
    args.push("--help");
    let o = rtemu(&args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    stdout(&o)
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        // An entry starts at column 2; deeper lines continue the one above.
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|name| name != "help")
        .collect()
}

#[test]
fn every_subcommand_help_shows_worked_examples() {
    // Each command with subcommands, and each of its subcommands, recursively.
    let top = stdout(&rtemu(&["--help"]));
    assert!(top.contains("Examples:\n  sudo rtemu demo"), "{top}");
    let mut todo: Vec<Vec<String>> = subcommands(&[]).into_iter().map(|c| vec![c]).collect();
    assert!(todo.len() >= 14, "the top-level commands: {todo:?}");
    let mut checked = Vec::new();
    while let Some(path) = todo.pop() {
        let path_ref: Vec<&str> = path.iter().map(String::as_str).collect();
        for sub in subcommands(&path_ref) {
            let mut child = path.clone();
            child.push(sub);
            todo.push(child);
        }
        let mut args = path_ref.clone();
        args.push("--help");
        let o = rtemu(&args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        let out = stdout(&o);
        let examples = out
            .split_once("Examples:\n")
            .unwrap_or_else(|| panic!("`rtemu {}` has no Examples: {out}", path.join(" ")))
            .1;
        // The examples show the command itself, with its full path.
        let command = format!("rtemu {}", path.join(" "));
        assert!(
            examples.contains(&format!("{command} ")) || examples.contains(&format!("{command}\n")),
            "`{command} --help` shows no example of itself: {examples}"
        );
        checked.push(path.join(" "));
    }
    // The walk found the nested subcommands.
    for expect in [
        "trace gen fgn",
        "trace gen onoff",
        "trace stats",
        "lab sleep",
        "lab doctor",
        "up",
        "link set",
        "demo",
        "demo bufferbloat",
    ] {
        assert!(
            checked.iter().any(|c| c == expect),
            "{expect} not in {checked:?}"
        );
    }
}

#[test]
fn trace_gen_and_convert_print_a_json_summary_on_request() {
    let dir = Scratch::new("gen-json");
    let (rpl, txt) = (dir.path("fgn.rpl"), dir.path("fgn.txt"));
    let o = rtemu(&[
        "trace", "gen", "fgn", "--hurst", "0.75", "--mean", "5ms", "--std", "1ms", "--count",
        "1234", "--seed", "9", "-o", &rpl, "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).is_empty(),
        "--json leaves stderr quiet: {}",
        stderr(&o)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["records"], 1234);
    assert_eq!(v["kind"], "fgn");
    assert_eq!(v["format"], "raw");
    assert_eq!(v["seed"], 9);
    assert_eq!(v["output"], rpl.as_str());
    assert_eq!(v["parameters"]["hurst"], 0.75);
    assert_eq!(v["parameters"]["mean_ns"], 5_000_000);
    assert_eq!(std::fs::metadata(&rpl).unwrap().len(), 1234 * 4);
    // Without --json, the note on stderr and nothing on stdout.
    let o = rtemu(&[
        "trace",
        "gen",
        "onoff",
        "--count",
        "300",
        "-o",
        &dir.path("o.rplx"),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(o.stdout.is_empty());
    assert!(stderr(&o).contains("wrote 300 records"), "{}", stderr(&o));
    let o = rtemu(&["trace", "convert", &rpl, &txt, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["records"], 1234);
    assert_eq!(
        (&v["input_format"], &v["output_format"]),
        (&"raw".into(), &"text".into())
    );
}

#[test]
fn trace_stats_reads_the_kind_from_the_content_and_names_a_line_that_fits_none() {
    let dir = Scratch::new("sniff");
    let mm = dir.path("mm");
    std::fs::write(&mm, (1..=100).map(|i| format!("{i}\n")).collect::<String>()).unwrap();
    let o = rtemu(&["trace", "stats", &mm, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(j["opportunities"], 100, "read as a Mahimahi trace: {j}");
    let series = dir.path("p.txt");
    std::fs::write(&series, "0 10\n1 12\n").unwrap();
    let o = rtemu(&["trace", "stats", &series]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("delay max ms"),
        "read as a series: {}",
        stdout(&o)
    );
    let junk = dir.path("junk");
    std::fs::write(&junk, "0 10\nhello world\n").unwrap();
    let o = rtemu(&["trace", "stats", &junk]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("line 2, column 1"), "{}", stderr(&o));
}

#[test]
fn trace_stats_draws_the_variance_time_plot_with_the_fit_it_reports() {
    let dir = Scratch::new("vtplot");
    let trace = dir.path("fgn.rpl");
    let gen = rtemu(&[
        "trace", "gen", "fgn", "--hurst", "0.8", "--mean", "5ms", "--std", "1ms", "--count",
        "65536", "--seed", "3", "-o", &trace,
    ]);
    assert!(gen.status.success(), "{}", stderr(&gen));
    let svg = dir.path("vt.svg");
    let o = rtemu(&["trace", "stats", &trace, "--json", "--plot", &svg]);
    assert!(o.status.success(), "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let h = j["hurst"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["method"] == "aggregated-variance")
        .unwrap()["hurst"]
        .as_f64()
        .unwrap();
    // The JSON holds the points the plot draws: 4 up to n/64, variance falling with m.
    let points = j["variance_time"].as_array().unwrap();
    assert_eq!(points[0][0], 4);
    assert_eq!(points[points.len() - 1][0], 65536 / 64);
    let var = |p: &serde_json::Value| p[1].as_f64().unwrap();
    assert!(var(&points[0]) > var(&points[points.len() - 1]));
    let drawn = std::fs::read_to_string(&svg).unwrap();
    assert!(drawn.starts_with("<svg"), "{drawn}");
    assert!(drawn.contains("Variance-time plot"), "no title");
    assert!(
        drawn.contains(&format!("H = {h:.3}")),
        "the legend gives the estimate {h:.3}"
    );
    // The kind and the extension are checked before anything is read.
    let mm = dir.path("link.down");
    std::fs::write(&mm, "1\n2\n").unwrap();
    let o = rtemu(&["trace", "stats", &mm, "--plot", &svg]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("mahimahi trace"), "{}", stderr(&o));
    let o = rtemu(&["trace", "stats", &trace, "--plot", &dir.path("vt.pdf")]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains(".svg or .png"), "{}", stderr(&o));
}

/// `rtemu demo bufferbloat` runs without root: a row per queue with the figures the
/// scenario gives for the seed, the same for the same seed, and a figure with a line per
/// queue; a bad `--plot` name fails before anything runs.
#[test]
fn demo_bufferbloat_tabulates_and_plots_each_queue() {
    let dir = Scratch::new("bufferbloat");
    let svg = dir.path("bloat.svg");
    let o = rtemu(&["demo", "bufferbloat", "--seed", "3", "--plot", &svg]);
    assert!(o.status.success(), "{}", text(&o));
    let out = stdout(&o);
    assert!(out.starts_with("rtemu demo bufferbloat: "), "{out}");
    assert!(out.contains("(seed 3)"), "{out}");
    let rows: Vec<Vec<&str>> = out
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| queue") && !l.starts_with("| ---"))
        .map(|l| l.split(" | ").collect())
        .collect();
    let names: Vec<&str> = rows.iter().map(|r| r[0].trim_start_matches("| ")).collect();
    assert_eq!(
        names,
        [
            "drop-tail, 500 ms",
            "drop-tail, 1000 packets",
            "CoDel",
            "FQ-CoDel",
            "PIE",
            "DOCSIS-PIE",
            "DualPI2"
        ]
    );
    let p99 = |name: &str| -> f64 {
        rows[names.iter().position(|n| *n == name).unwrap()][2]
            .parse()
            .unwrap()
    };
    // Bufferbloat and its cure.
    assert!(p99("drop-tail, 500 ms") > 450.0, "{out}");
    assert!(p99("FQ-CoDel") < 2.5, "{out}");
    let drawn = std::fs::read_to_string(&svg).unwrap();
    assert!(drawn.starts_with("<svg"), "{drawn}");
    for name in &names {
        assert!(
            drawn.contains(&format!("{name}\n</text>")),
            "no legend entry {name}"
        );
    }
    // One long line per queue (the others are the axes' and the legend's).
    let long = drawn
        .split("<polyline")
        .skip(1)
        .filter(|l| l.split("points=\"").nth(1).unwrap().split(' ').count() > 1000)
        .count();
    assert_eq!(long, names.len());
    let again = rtemu(&["demo", "bufferbloat", "--seed", "3"]);
    assert_eq!(stdout(&again), out);
    let o = rtemu(&["demo", "bufferbloat", "--plot", &dir.path("bloat.pdf")]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains(".svg or .png"), "{}", stderr(&o));
    assert!(o.stdout.is_empty());
    // The default demo keeps its options; they belong to it alone.
    let o = rtemu(&["demo", "--count", "3", "bufferbloat"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

#[test]
fn a_framed_trace_with_a_flow_in_its_header_drives_only_that_flow() {
    let dir = Scratch::new("header-flow");
    for (dport, delayed) in [("9", true), ("5004", false)] {
        let trace = dir.path(&format!("t{dport}.rplx"));
        let pattern = format!("proto=udp dport={dport}");
        let gen = rtemu(&[
            "trace", "gen", "fgn", "--hurst", "0.8", "--mean", "20ms", "--std", "1ms", "--count",
            "100", "--seed", "3", "--flow", &pattern, "-o", &trace,
        ]);
        assert!(gen.status.success(), "{}", stderr(&gen));
        // The generator's datagrams go to UDP port 9.
        let o = rtemu(&[
            "sim",
            "--traffic",
            "cbr 100pps 100B 1s",
            "--trace",
            &trace,
            "--json",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let j: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        let mean = j["summary"]["delay"]["mean_ns"].as_f64().unwrap();
        if delayed {
            assert!(
                (15e6..25e6).contains(&mean),
                "dport 9 took the trace: {mean} ns"
            );
        } else {
            assert_eq!(mean, 0.0, "a trace for dport 5004 delayed dport 9");
        }
    }
}

#[test]
fn trace_gen_netem_records_the_models_delays_losses_and_duplicates() {
    let dir = Scratch::new("gen-netem");
    let out = dir.path("pn.rpl");
    let gen = rtemu(&[
        "trace",
        "gen",
        "netem",
        "--model",
        "delay 20ms 5ms distribution paretonormal loss 10% duplicate 5%",
        "--count",
        "20000",
        "-o",
        &out,
        "--json",
    ]);
    assert!(gen.status.success(), "{}", stderr(&gen));
    let g: serde_json::Value = serde_json::from_str(&stdout(&gen)).unwrap();
    assert_eq!(g["records"], 20000);
    let o = rtemu(&["trace", "stats", &out, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    // The model's marginals come back from the trace: a paretonormal delay of mean 20 ms,
    // 10 % of packets lost, about 5 % duplicated.
    let mean = s["delay"]["mean_ns"].as_f64().unwrap();
    assert!((19e6..21e6).contains(&mean), "mean delay {mean} ns");
    let drops = s["drops"].as_f64().unwrap() / g["outcome"]["packets"].as_f64().unwrap();
    assert!((0.08..0.12).contains(&drops), "drop fraction {drops}");
    assert_eq!(s["drops"], g["outcome"]["dropped"]);
    assert_eq!(s["dups"], g["outcome"]["duplicated"]);
    assert!(s["dups"].as_u64().unwrap() > 500, "{s}");
}

/// Every command that takes a lab name refuses one that could leave the state directory
/// (`..`, `/`, the empty name, paths) before it does anything, with the rule in the message
/// and a non-zero exit.
#[test]
fn lab_names_that_could_become_other_paths_are_refused_everywhere() {
    let commands: [&[&str]; 9] = [
        &["down"],
        &["ls"],
        &["stats"],
        &["link", "set", "--lab"],
        &["capture", "-w", "/dev/null", "--lab"],
        &["exec", "n0", "--lab"],
        &["shell", "n0", "--lab"],
        &["graph"],
        &["up", "examples/shaped-path.toml", "--name"],
    ];
    for bad in ["..", "/", "", "../etc", "/tmp/x", "Shaped"] {
        for command in commands {
            let mut args = command.to_vec();
            args.push(bad);
            // Commands whose positional arguments follow the lab.
            match command[0] {
                "link" => args.extend(["uplink", "delay", "1ms"]),
                "exec" => args.extend(["--", "true"]),
                _ => {}
            }
            let out = rtemu(&args);
            let err = stderr(&out);
            assert!(!out.status.success(), "{args:?} succeeded");
            assert!(
                err.contains("invalid lab name")
                    || err.contains("neither a topology file nor a lab name"),
                "{args:?}: {err}"
            );
        }
    }
}

/// No command writes over one of its own inputs, whatever name the output is given, and the
/// input is left whole.
#[test]
fn a_run_that_delivers_nothing_says_its_output_holds_none() {
    let dir = Scratch::new("emptyout");
    let out = dir.path("out.pcap");
    for (model, empty) in [("loss 100%", true), ("delay 1ms", false)] {
        let run = rtemu(&[
            "sim",
            "--traffic",
            "cbr 100pps 100B 1s",
            "--model",
            model,
            "--out",
            &out,
        ]);
        assert!(run.status.success(), "{}", stderr(&run));
        let warned = stderr(&run).contains(&format!(
            "warning: no frame was delivered: {out} holds none"
        ));
        assert_eq!(warned, empty, "{model}: {}", stderr(&run));
        // The file is written either way: a pcap header, and frames only when delivered.
        let len = std::fs::metadata(&out).unwrap().len();
        assert_eq!(len == 24, empty, "{model}: {len} bytes");
    }
}

#[test]
fn an_output_that_is_the_commands_own_input_is_refused() {
    let dir = Scratch::new("selfout");
    let pcap = dir.path("in.pcap");
    let trace = dir.path("t.rpl");
    let topo = dir.path("t.toml");
    let made = rtemu(&["sim", "--traffic", "cbr 100pps 100B 1s", "--out", &pcap]);
    assert!(made.status.success(), "{}", stderr(&made));
    let made = rtemu(&[
        "trace", "gen", "fgn", "--hurst", "0.7", "--mean", "5ms", "--std", "1ms", "--count", "100",
        "-o", &trace,
    ]);
    assert!(made.status.success(), "{}", stderr(&made));
    std::fs::write(
        &topo,
        "lab = \"x\"\n[nodes.a]\n[nodes.b]\n[[links]]\nendpoints = [\"a\", \"b\"]\n",
    )
    .unwrap();
    std::os::unix::fs::symlink(&pcap, dir.path("alias.pcap")).unwrap();
    let before: Vec<Vec<u8>> = [&pcap, &trace, &topo]
        .iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    let alias = dir.path("alias.pcap");
    let svg = dir.path("t.svg");
    std::fs::copy(&trace, &svg).unwrap();
    let cases: [Vec<&str>; 6] = [
        vec!["sim", &pcap, "--out", &pcap],
        vec!["sim", &pcap, "--out", &alias],
        vec!["sim", &pcap, "--log", &pcap],
        vec!["trace", "convert", &trace, &trace],
        vec!["trace", "stats", &svg, "--format", "raw", "--plot", &svg],
        vec!["graph", &topo, "-o", &topo],
    ];
    for args in cases {
        let out = rtemu(&args);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(
            stderr(&out).contains("also an input"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    let out = rtemu(&[
        "sim",
        &pcap,
        "--out",
        &dir.path("o.pcap"),
        "--log",
        &dir.path("o.pcap"),
    ]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("name one file"), "{}", stderr(&out));
    let after: Vec<Vec<u8>> = [&pcap, &trace, &topo]
        .iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    assert!(before == after, "an input changed");
    // Nothing but the inputs (and the link) is left: no temporary files.
    let mut names: Vec<String> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["alias.pcap", "in.pcap", "t.rpl", "t.svg", "t.toml"]);
}

/// Every writer, given a path in a shared directory (sticky, world-writable, as /tmp) where
/// another user planted a link, or a device: refused before anything is written, the link's
/// target untouched. `/dev/null` is still an output.
#[test]
fn outputs_cannot_be_aimed_at_a_device_or_through_another_users_link() {
    let dir = Scratch::new("aimed");
    let topo = dir.path("t.toml");
    std::fs::write(&topo, one_link_topology("")).unwrap();
    let trace = dir.path("t.rpl");
    let made = rtemu(&["trace", "gen", "iid", "--count", "1000", "-o", &trace]);
    assert!(made.status.success(), "{}", stderr(&made));
    // Each writer with its output last, and a name of the kind it writes.
    let writers: [(Vec<&str>, &str); 6] = [
        (
            vec!["sim", "--traffic", "cbr 10pps 100B 1s", "--out"],
            "o.pcap",
        ),
        (
            vec!["sim", "--traffic", "cbr 10pps 100B 1s", "--log"],
            "o.csv",
        ),
        (vec!["trace", "gen", "iid", "--count", "10", "-o"], "o.rpl"),
        (vec!["trace", "convert", &trace], "o.rplt"),
        (vec!["trace", "stats", &trace, "--plot"], "o.svg"),
        (vec!["graph", &topo, "-o"], "o.dot"),
    ];
    let run = |args: &[&str], out: &str| rtemu(&[args, &[out]].concat());
    // A character device that is not /dev/null; a block device when the machine has one.
    let mut devices = vec!["/dev/zero".to_owned()];
    if let Some(block) = std::fs::read_dir("/dev")
        .unwrap()
        .flatten()
        .find(|e| std::os::unix::fs::FileTypeExt::is_block_device(&e.file_type().unwrap()))
    {
        devices.push(block.path().display().to_string());
    }
    for device in &devices {
        // By its own name, and through a link of this user's (followed, to a device).
        let o = run(&writers[0].0, device);
        assert!(
            stderr(&o).contains("writes its outputs only to"),
            "{device}: {}",
            stderr(&o)
        );
        for (w, name) in &writers {
            let link = dir.path(name);
            std::os::unix::fs::symlink(device, &link).unwrap();
            let o = run(w, &link);
            std::fs::remove_file(&link).unwrap();
            assert!(!o.status.success(), "{w:?} {device} succeeded");
            assert!(
                stderr(&o).contains("writes its outputs only to"),
                "{w:?} {device}: {}",
                stderr(&o)
            );
        }
    }
    let o = run(&writers[0].0, "/dev/null");
    assert!(o.status.success(), "{}", stderr(&o));
    if !rtemu_testutil::root_or_skip(
        "outputs through another user's link",
        "makes a link owned by nobody",
    ) {
        return;
    }
    let shared = dir.0.join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(
        &shared,
        std::os::unix::fs::PermissionsExt::from_mode(0o1777),
    )
    .unwrap();
    let victim = dir.path("victim");
    std::fs::write(&victim, "precious").unwrap();
    for (w, name) in &writers {
        let planted = shared.join(name);
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        std::os::unix::fs::lchown(&planted, Some(65534), Some(65534)).unwrap();
        let o = run(w, planted.to_str().unwrap());
        assert!(!o.status.success(), "{w:?} followed the planted link");
        assert!(
            stderr(&o).contains("that user 65534 made"),
            "{w:?}: {}",
            stderr(&o)
        );
        assert_eq!(
            std::fs::read_to_string(&victim).unwrap(),
            "precious",
            "{w:?}"
        );
        assert_eq!(
            std::fs::read_dir(&shared).unwrap().count(),
            1,
            "{w:?} left a file"
        );
        std::fs::remove_file(&planted).unwrap();
    }
}

/// The files an input names (a topology's traces and tables, a model's table) are inputs too,
/// and two outputs of one command are never one file.
#[test]
fn files_named_inside_inputs_and_other_outputs_are_never_overwritten() {
    let dir = Scratch::new("named");
    let table = dir.path("t.dist");
    std::fs::write(&table, "# a table\n-100 0 100\n").unwrap();
    let trace = dir.path("t.rplt");
    std::fs::write(&trace, "pass 1ms\ndrop\n").unwrap();
    let topo = dir.path("t.toml");
    std::fs::write(
        &topo,
        format!(
            "lab = \"x\"\n[nodes.a]\n[nodes.b]\n[nodes.c]\n[[links]]\nendpoints = [\"a\", \"b\"]\n\
             trace = \"t.rplt\"\n[[links]]\nendpoints = [\"b\", \"c\"]\n\
             netem = \"delay 10ms 1ms distribution {table}\"\n"
        ),
    )
    .unwrap();
    let model = format!("delay 10ms 1ms distribution {table}");
    let model_file = dir.path("m.toml");
    std::fs::write(
        &model_file,
        format!("delay = \"10ms\"\njitter = \"1ms\"\ndistribution = \"{table}\"\n"),
    )
    .unwrap();
    let before = (
        std::fs::read(&table).unwrap(),
        std::fs::read(&trace).unwrap(),
    );
    let flow_trace = format!("proto=udp={trace}");
    let cases: [Vec<&str>; 6] = [
        vec!["graph", &topo, "-o", &trace],
        vec!["graph", &topo, "-o", &table],
        vec!["sim", "--model", &model, "--out", &table],
        vec!["sim", "--model-file", &model_file, "--log", &table],
        vec![
            "trace", "gen", "netem", "--model", &model, "--count", "10", "--format", "text", "-o",
            &table,
        ],
        vec!["sim", "--flow-trace", &flow_trace, "--log", &trace],
    ];
    for args in cases {
        let o = rtemu(&args);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(
            stderr(&o).contains("also an input"),
            "{args:?}: {}",
            stderr(&o)
        );
    }
    assert_eq!(
        before,
        (
            std::fs::read(&table).unwrap(),
            std::fs::read(&trace).unwrap()
        )
    );
    // Two outputs of one command, refused before anything is measured or written.
    let csv = dir.path("x.svg");
    for args in [
        vec![
            "lab",
            "sleep",
            "--count",
            "1",
            "--csv",
            &csv,
            "--histogram",
            &csv,
        ],
        vec![
            "lab", "sleep", "--count", "1", "--csv", &csv, "--plot", &csv,
        ],
    ] {
        let o = rtemu(&args);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(
            stderr(&o).contains("name one file"),
            "{args:?}: {}",
            stderr(&o)
        );
    }
    let mut names: Vec<String> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["m.toml", "t.dist", "t.rplt", "t.toml"]);
}

/// A long `trace gen` ended by SIGINT or SIGTERM leaves neither its output nor a temporary.
#[test]
fn a_killed_writer_leaves_no_temporary_file() {
    let dir = Scratch::new("killed");
    for signal in [libc::SIGINT, libc::SIGTERM] {
        let out = dir.path("big.rpl");
        let mut child = Command::new(env!("CARGO_BIN_EXE_rtemu"))
            .args(["trace", "gen", "iid", "--count", "4000000000", "-o", &out])
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Until the temporary exists and has grown.
        let start = std::time::Instant::now();
        let grown = || {
            std::fs::read_dir(&dir.0)
                .unwrap()
                .flatten()
                .any(|e| e.metadata().is_ok_and(|m| m.len() > 100_000))
        };
        while !grown() {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(30),
                "no temporary grew"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        // SAFETY: kill sends a signal to the child this test started.
        assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
        let status = child.wait().unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(signal)
        );
        let left: Vec<_> = std::fs::read_dir(&dir.0)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(left.is_empty(), "signal {signal} left {left:?}");
    }
}

/// A run that fails part way leaves the file that stood at its output as it was.
#[test]
fn a_failed_run_leaves_the_old_output_whole() {
    let dir = Scratch::new("failout");
    let out_path = dir.path("out.rpl");
    std::fs::write(&out_path, "precious").unwrap();
    // The input is not a trace: conversion fails after the output is opened.
    let bad = dir.path("bad.rpl");
    std::fs::write(&bad, [0x40u8, 0, 0, 1, 0xc0]).unwrap();
    let out = rtemu(&["trace", "convert", &bad, &out_path]);
    assert!(!out.status.success());
    assert_eq!(std::fs::read_to_string(&out_path).unwrap(), "precious");
    assert_eq!(std::fs::read_dir(&dir.0).unwrap().count(), 2);
}

/// A two-node topology whose only link carries `impairment` (TOML lines), at line 5 on.
fn one_link_topology(impairment: &str) -> String {
    format!("lab = \"chk\"\n[nodes.a]\n[nodes.b]\n[[links]]\nendpoints = [\"a\", \"b\"]\n{impairment}\n")
}

#[test]
fn graph_file_builds_every_link_model_and_points_at_the_value_at_fault() {
    let dir = Scratch::new("graph-check");
    std::fs::write(dir.path("ok.rplt"), "pass 1000us\npass 2ms\ndrop\n").unwrap();
    let cases = [
        // A loss state whose p31 and p32 add up to more than 100 %: at its `loss` word.
        (
            "netem = \"delay 1ms loss state 60% 50% 60%\"",
            ":6:20: netem: loss (column 11): p31 and p32 add up to 110%, more than 100%",
        ),
        // A table that does not exist: at the `distribution` word.
        (
            "netem = \"delay 10ms 1ms distribution nosuch\"",
            ":6:25: netem: the model: distribution nosuch: no table nosuch.dist in",
        ),
        // A trace that does not exist: at the trace's value.
        ("trace = \"missing.rpl\"", ":6:10: trace: trace "),
        // Only the b-a direction names the missing table.
        (
            "netem_ab = \"delay 1ms\"\nnetem_ba = \"delay 1ms 1ms distribution nosuch\"",
            ":7:27: netem: the model: distribution nosuch",
        ),
        // A scheduled change that cannot be built: at that change's netem.
        (
            "netem = \"delay 1ms\"\nschedule = [{ at = \"1s\", netem = \"delay 2ms 1ms tables netem distribution ./nope.dist\" }]",
            ":7:62: netem: the model: distribution ./nope.dist: cannot read ./nope.dist",
        ),
    ];
    for (impairment, want) in cases {
        let file = dir.path("lab.toml");
        std::fs::write(&file, one_link_topology(impairment)).unwrap();
        let o = rtemu(&["graph", &file]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{impairment}: {err}");
        assert!(
            err.starts_with(&format!("rtemu: error: {file}")) && err.contains(want),
            "{impairment}: want {want:?}, got {err}"
        );
        assert!(stdout(&o).is_empty(), "{impairment}: nothing drawn");
    }
    // The missing trace's error says which file and why.
    std::fs::write(
        dir.path("lab.toml"),
        one_link_topology("trace = \"missing.rpl\""),
    )
    .unwrap();
    let err = stderr(&rtemu(&["graph", &dir.path("lab.toml")]));
    assert!(
        err.contains(&dir.path("missing.rpl")) && err.contains("No such file"),
        "{err}"
    );
    // Links whose models build draw as before.
    let file = dir.path("good.toml");
    std::fs::write(
        &file,
        one_link_topology("trace = \"ok.rplt\"\nnetem = \"rate 1mbit\""),
    )
    .unwrap();
    let o = rtemu(&["graph", &file]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with("graph") || stdout(&o).contains("digraph"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn a_model_file_is_held_to_the_netem_rules_and_never_echoed() {
    let dir = Scratch::new("model-file");
    let run = |file: &str| {
        rtemu(&[
            "sim",
            "--traffic",
            "cbr 10pps 100B 1s",
            "--model-file",
            file,
        ])
    };
    let cases = [
        (
            "ber.toml",
            "ber = 2\n",
            "ber.toml: not a valid model: ber 2e0: must be between 0 (exclusive) and 1 (exclusive)",
        ),
        (
            "limit.toml",
            "limit = 0\n",
            "limit 0: must be a whole number of packets from 1 to 4294967295, or a time such as 500ms",
        ),
        (
            "reorder.toml",
            "reorder = { probability = 0.1 }\n",
            "reorder: reordering needs a delay",
        ),
        // Files that are not models at all: where, and what was expected; not one word of them.
        (
            "shadow",
            "root:s3cretword:19000:0:99999:7:::\n",
            "shadow:1:35: not a valid model: key with no value, expected `=`",
        ),
        (
            "keys.toml",
            "delay = \"1ms\"\ns3cretword = 1\n",
            "keys.toml:2:1: not a valid model: unknown field `…`, expected one of `delay`",
        ),
        (
            "value.toml",
            "delay = \"s3cretword\"\n",
            "value.toml:1:9: not a valid model: \"…\": expected a time",
        ),
        (
            "value.json",
            "{\"delay\": \"s3cretword\"}",
            "value.json:1:22: not a valid model: \"…\": expected a time",
        ),
    ];
    for (name, text, want) in cases {
        let file = dir.path(name);
        std::fs::write(&file, text).unwrap();
        let o = run(&file);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{name}: {err}");
        assert!(err.contains(want), "{name}: want {want:?}, got {err}");
        assert!(
            !err.contains("s3cretword") && !err.contains("root"),
            "{name}: {err}"
        );
    }
    // A FIFO with no writer is refused at once, not waited on.
    let fifo = dir.path("model.fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let started = std::time::Instant::now();
    let o = run(&fifo);
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("not a regular file"), "{}", stderr(&o));
    // A netem distribution naming a file that is no table: its content never shows either.
    let secret = dir.path("secret.dist");
    std::fs::write(&secret, "s3cretword 1 2\n").unwrap();
    let o = rtemu(&[
        "sim",
        "--traffic",
        "cbr 10pps 100B 1s",
        "--model",
        &format!("delay 1ms 1ms distribution {secret}"),
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("secret.dist:1:1: expected a decimal integer"),
        "{err}"
    );
    assert!(!err.contains("s3cretword"), "{err}");
}

/// Runs rtemu with `args`, failing the test if it has not ended within 5 s (it waits on
/// something it should have refused at once).
fn rtemu_within_5s(args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rtemu"))
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > std::time::Duration::from_secs(5) {
            let _ = child.kill();
            panic!("rtemu {args:?} still waits after 5 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

/// A topology "file" that is a FIFO is refused at once, not waited on.
#[test]
fn a_fifo_named_as_the_topology_is_refused_at_once() {
    let dir = Scratch::new("fifo");
    let fifo = dir.path("topo.toml");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let out = rtemu_within_5s(&["up", &fifo]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("not a regular file"),
        "{}",
        stderr(&out)
    );
}

/// A file that is not what the command reads (a password file given as a trace or a
/// capture, under sudo) fails with where and what was expected, never with its content.
#[test]
fn errors_on_files_of_the_wrong_kind_never_show_their_content() {
    let dir = Scratch::new("secret");
    let secret = dir.path("shadow");
    std::fs::write(
        &secret,
        "root:$6$s3cretword:19000:0:99999:7:::\npass s3cretword2\ndrop s3cretword3\n",
    )
    .unwrap();
    let series = dir.path("s.series");
    std::fs::write(&series, "0 10ms\n1 s3cretword4\n").unwrap();
    let out_rpl = dir.path("o.rpl");
    let cases: [Vec<&str>; 6] = [
        vec!["sim", "--trace", &secret],
        vec!["sim", &secret],
        vec!["trace", "stats", &secret],
        vec!["trace", "cat", &secret],
        vec!["trace", "convert", &secret, &out_rpl],
        vec!["sim", "--trace", &series],
    ];
    for args in cases {
        let out = rtemu(&args);
        let err = stderr(&out);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(!err.contains("s3cret"), "{args:?} shows the file: {err}");
        assert!(
            err.contains("line") || err.contains("pcap"),
            "{args:?}: {err}"
        );
    }
}

// No input hangs `rtemu`, exhausts the machine, or gets a verdict from nothing: each bad value
// is refused with its valid range, and a run that measured nothing says so and fails.

#[test]
fn sim_refuses_a_looping_trace_of_only_dups_and_runs_it_when_it_stops() {
    let dir = Scratch::new("dups");
    let trace = dir.path("dups.txt");
    std::fs::write(&trace, "dup 1ms\ndup 2ms\n").unwrap();
    let traffic = "cbr 1000pps 100B 10ms";
    let o = rtemu(&["sim", "--traffic", traffic, "--trace", &trace]);
    assert!(!o.status.success(), "{}", text(&o));
    let msg = text(&o);
    assert!(
        msg.contains("dups.txt") && msg.contains("all 2 records are `dup`"),
        "{msg}"
    );
    // Under `stop` the trace's end ends the cascade: one packet, two copies, then the run stops.
    let o = rtemu(&[
        "sim",
        "--traffic",
        traffic,
        "--trace",
        &trace,
        "--end",
        "stop",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["summary"]["trace"]["records"], 2, "{v}");
}

/// Runs `rtemu ARGS…`, which must fail, and returns what it printed.
fn refused(args: &[&str]) -> String {
    let o = rtemu(args);
    assert!(!o.status.success(), "{args:?} succeeded: {}", text(&o));
    text(&o)
}

#[test]
fn lab_durations_of_zero_or_absurd_are_refused_with_their_range() {
    // `--period 0s` looped for ever; `--duration 0s` and `--time-limit 0s` gave a 0.0 µs
    // verdict from no samples.
    let cases: [(&[&str], &str); 7] = [
        (&["lab", "latency", "--period", "0s"], "give 10us to 1s"),
        (
            &["lab", "latency", "--time-limit", "0s"],
            "give 1ms to 3600s",
        ),
        (&["lab", "doctor", "--duration", "0s"], "give 50ms to 600s"),
        (&["lab", "doctor", "--duration", "11m"], "give 50ms to 600s"),
        (&["lab", "sleep", "--time-limit", "0s"], "give 1ms to 3600s"),
        (&["lab", "linerate", "--time", "0s"], "give 1ms to 60s"),
        (&["lab", "echo", "--duration", "0s"], "give 1ms to 86400s"),
    ];
    for (args, range) in cases {
        let msg = refused(args);
        assert!(
            msg.contains("is out of range") && msg.contains(range),
            "{args:?}: {msg}"
        );
    }
}

#[test]
fn a_load_beyond_the_machine_is_refused_with_its_range() {
    let cpus = std::thread::available_parallelism().unwrap().get();
    let msg = refused(&["lab", "sleep", "--count", "1", "--load", "100000"]);
    assert!(
        msg.contains("--load") && msg.contains(&format!("give 1 to {}", cpus * 8)),
        "{msg}"
    );
    assert!(!msg.contains("panicked"), "{msg}");
}

#[test]
fn a_linerate_sweep_that_would_take_an_hour_is_refused_up_front() {
    let start = std::time::Instant::now();
    let msg = refused(&[
        "lab",
        "linerate",
        "--rates",
        "1",
        "--methods",
        "sleep",
        "--pacers",
        "absolute",
    ]);
    // 5 packets of 100 B at 1 bit/s: 4000 s.
    assert!(msg.contains("would take at least 4000s"), "{msg}");
    assert!(start.elapsed() < std::time::Duration::from_secs(30));
}

#[test]
fn trace_bench_refuses_a_pace_of_zero_a_huge_ring_and_an_endless_paced_run() {
    let dir = Scratch::new("bench");
    let trace = dir.path("t.rpl");
    // 100 000 pass records of 1 µs.
    let word = 0x4000_0001u32.to_be_bytes();
    std::fs::write(&trace, word.repeat(100_000)).unwrap();
    let msg = refused(&["trace", "bench", &trace, "--pace", "0"]);
    assert!(msg.contains("1..=1000000000"), "{msg}");
    let msg = refused(&["trace", "bench", &trace, "--block-records", "1000000000000"]);
    assert!(msg.contains("1..=4194304"), "{msg}");
    let msg = refused(&[
        "trace",
        "bench",
        &trace,
        "--blocks",
        "256",
        "--block-records",
        "4194304",
    ]);
    assert!(msg.contains("at most 16777216"), "{msg}");
    // 300 000 records at 1 record/s: over three days.
    let msg = refused(&["trace", "bench", &trace, "--pace", "1"]);
    assert!(msg.contains("would take up to 300000 s"), "{msg}");
    // Bounded by --limit it runs, and says what it read.
    let o = rtemu(&[
        "trace",
        "bench",
        &trace,
        "--pace",
        "1000",
        "--limit",
        "10",
        "--warm-passes",
        "0",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v[0]["records"], 10, "{v}");
}

#[test]
fn an_rtt_sweep_with_no_reply_says_no_samples_and_fails() {
    // An echo that never answers: every probe is lost.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = silent.local_addr().unwrap().to_string();
    let dir = Scratch::new("rtt");
    let csv = dir.path("rtt.csv");
    let args = [
        "lab",
        "rtt",
        "--to",
        &to,
        "--count",
        "3",
        "--warmup",
        "0",
        "--timeout",
        "5ms",
        "--min-size",
        "16",
        "--max-size",
        "16",
        "--csv",
        &csv,
    ];
    let msg = refused(&args);
    assert!(msg.contains("no replies, no samples"), "{msg}");
    assert!(
        msg.contains("no samples: udp size 16 got no reply within --timeout 5ms"),
        "{msg}"
    );
    let row = std::fs::read_to_string(&csv).unwrap();
    let row = row.lines().nth(1).unwrap().to_owned();
    assert!(row.starts_with("udp,16,3,0,3,0,0,,,,,,"), "{row}");
}

#[test]
fn a_sim_that_delivers_nothing_reports_no_delay_samples() {
    let o = rtemu(&[
        "sim",
        "--traffic",
        "cbr 1000pps 100B 10ms",
        "--model",
        "loss 100%",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let out = text(&o);
    assert!(out.contains("no copy delivered, no samples"), "{out}");
    assert!(!out.contains("p99"), "{out}");
}

/// A solver thread the system will not start (here: no address space left for its stack)
/// fails `lab deadline` with the reason, instead of a panic or threads waiting forever.
#[test]
fn a_thread_that_cannot_start_is_an_error_not_a_panic_or_a_hang() {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rtemu"));
    cmd.args([
        "lab",
        "deadline",
        "--mode",
        "fast",
        "--threads",
        "1000",
        "--quadrant-nodes",
        "250",
        "--steps",
        "10",
        "--no-mlock",
        "--no-dma-latency",
    ]);
    // SAFETY: between fork and exec only setrlimit, which is async-signal-safe, runs.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            let limit = libc::rlimit {
                rlim_cur: 400 << 20,
                rlim_max: 400 << 20,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let start = std::time::Instant::now();
    let out = cmd.output().unwrap();
    assert!(start.elapsed() < std::time::Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        stderr(&out).contains("starting solver thread") && !stderr(&out).contains("panicked"),
        "{}",
        stderr(&out)
    );
}

/// What comes from outside reaches the terminal shown, never obeyed (no raw escape sequence),
/// and a huge input is not echoed whole.
#[test]
fn control_characters_are_escaped_and_huge_inputs_are_not_echoed_whole() {
    let dir = Scratch::new("controls");
    let esc = "\u{1b}]0;pwned\u{7}\u{1b}[2J";
    // A trace whose provenance holds escape sequences.
    let trace = dir.path("t.rplx");
    let made = rtemu(&[
        "trace",
        "gen",
        "iid",
        "--count",
        "300",
        "--provenance",
        esc,
        "-o",
        &trace,
    ]);
    assert!(made.status.success(), "{}", stderr(&made));
    for args in [
        vec!["trace", "stats", trace.as_str()],
        vec!["trace", "cat", trace.as_str()],
        vec!["sim", "--model", &format!("delay 1ms {esc}")],
        vec!["graph", esc],
    ] {
        let out = rtemu(&args);
        let all = [out.stdout.as_slice(), out.stderr.as_slice()].concat();
        assert!(!all.contains(&0x1b), "{args:?}: {}", text(&out));
        assert!(!all.contains(&0x07), "{args:?}: {}", text(&out));
    }
    let stats = stdout(&rtemu(&["trace", "stats", &trace]));
    assert!(stats.contains("\\u{1b}]0;pwned\\u{7}"), "{stats}");
    // 100 KB of model: refused, in a message of at most a few hundred bytes.
    let huge = format!("delay {}", "9".repeat(100_000));
    for args in [
        vec!["sim", "--model", huge.as_str()],
        vec!["sim", "--traffic", huge.as_str()],
        vec![
            "trace",
            "gen",
            "netem",
            "--model",
            huge.as_str(),
            "-o",
            "x.rpl",
        ],
        vec!["graph", huge.as_str()],
    ] {
        let out = rtemu(&args);
        assert!(!out.status.success());
        assert!(
            out.stderr.len() < 600,
            "{:?}: {} bytes",
            &args[..2],
            out.stderr.len()
        );
        assert!(stderr(&out).contains("(100006 bytes)"), "{}", stderr(&out));
    }
}

/// A pcap (microseconds) of link type `link`: `count` UDP packets to port 5000 behind `header`.
fn pcap_of(link: u32, header: &[u8], count: u32) -> Vec<u8> {
    let mut out = 0xa1b2_c3d4u32.to_le_bytes().to_vec();
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    for v in [0u32, 0, 65535, link] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    // IPv4 (20 bytes, UDP) then UDP (8 bytes) from 10.0.0.1:4000 to 10.0.0.2:5000.
    let mut ip = vec![
        0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ];
    ip.extend_from_slice(&[0x0f, 0xa0, 0x13, 0x88, 0, 8, 0, 0]);
    let frame = [header, &ip].concat();
    for i in 0..count {
        for v in [i, 0, frame.len() as u32, frame.len() as u32] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&frame);
    }
    out
}

/// A flow's trace applies on every link type rtemu reads down to IP (here `tcpdump -i any`'s
/// SLL2), and is refused, not silently ignored, on one it does not (802.11).
#[test]
fn flow_traces_match_on_cooked_captures_and_are_refused_on_unread_link_types() {
    let dir = Scratch::new("linktypes");
    let drop = dir.path("drop.rplt");
    std::fs::write(&drop, "drop\n").unwrap();
    let mut sll2 = vec![0u8; 20];
    sll2[..2].copy_from_slice(&0x0800u16.to_be_bytes());
    let cooked = dir.path("any.pcap");
    std::fs::write(&cooked, pcap_of(276, &sll2, 10)).unwrap();
    let run = |pattern: &str, input: &str| {
        rtemu(&[
            "sim",
            input,
            "--flow-trace",
            &format!("{pattern}={drop}"),
            "--model",
            "delay 1ms",
            "--json",
        ])
    };
    let delivered = |o: &Output| -> u64 {
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v["summary"]["delivered"].as_u64().unwrap()
    };
    let o = run("proto=udp dport=5000", &cooked);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(delivered(&o), 0, "the flow's trace dropped every packet");
    let o = run("proto=udp dport=6000", &cooked);
    assert_eq!(delivered(&o), 10, "another flow's trace touched none");
    let wifi = dir.path("wifi.pcap");
    std::fs::write(&wifi, pcap_of(105, &[0u8; 24], 10)).unwrap();
    let o = run("proto=udp", &wifi);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("has link type 105"), "{}", stderr(&o));
}

/// A model that names its own seed draws from it: the report says that seed, and the run is
/// the one that seed gives with --seed.
#[test]
fn the_seed_a_report_names_is_the_one_the_model_drew_from() {
    let dir = Scratch::new("seeds");
    let sim = |model: &str, seed: &str| {
        let o = rtemu(&[
            "sim",
            "--traffic",
            "cbr 1000pps 100B 2s",
            "--model",
            model,
            "--seed",
            seed,
            "--json",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()
    };
    let own = sim("loss 30% seed 5", "7");
    let flag = sim("loss 30%", "5");
    assert_eq!(
        (own["seed"].as_u64(), own["model_seed"].as_u64()),
        (Some(7), Some(5))
    );
    assert!(flag.get("model_seed").is_none());
    assert_eq!(own["summary"]["dropped"], flag["summary"]["dropped"]);
    let text = stdout(&rtemu(&[
        "sim",
        "--traffic",
        "cbr 10pps 100B 1s",
        "--model",
        "loss 1% seed 5",
        "--seed",
        "7",
    ]));
    assert!(
        text.contains("(seed 5; traffic and traces seed 7)"),
        "{text}"
    );

    let (a, b) = (dir.path("a.rplt"), dir.path("b.rplt"));
    let gen = |model: &str, seed: &str, out: &str| {
        let o = rtemu(&[
            "trace", "gen", "netem", "--model", model, "--count", "200", "--seed", seed, "-o", out,
            "--json",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()
    };
    assert_eq!(gen("loss 50% seed 5", "7", &a)["seed"], 5);
    gen("loss 50%", "5", &b);
    let records = |p: &str| {
        std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(records(&a), records(&b));
}

/// A trace or capture that is a FIFO no one writes to is read as empty at once, not waited
/// on; a device is refused.
#[test]
fn trace_readers_neither_wait_on_a_fifo_nor_read_a_device() {
    let dir = Scratch::new("trace-fifo");
    let fifo = dir.path("t.rplt");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let runs: [&[&str]; 3] = [
        &["trace", "stats", &fifo],
        &["trace", "cat", &fifo],
        &["sim", &fifo],
    ];
    for args in runs {
        let out = rtemu_within_5s(args);
        assert!(!out.status.success(), "{args:?}: {}", stderr(&out));
    }
    let o = rtemu(&["trace", "stats", "/dev/zero"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("not a regular file or pipe"),
        "{}",
        stderr(&o)
    );
}

/// A negative number is a value out of range, not an unknown flag.
#[test]
fn negative_numbers_are_refused_with_the_range() {
    for (args, want) in [
        (
            &["lab", "sleep", "--count", "-5"][..],
            "-5 is out of range (allowed: 1..=10000000)",
        ),
        (
            &["trace", "gen", "fgn", "--hurst", "-0.5", "-o", "/dev/null"][..],
            "Hurst parameter -0.5 is outside (0, 1)",
        ),
    ] {
        let o = rtemu(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{args:?}: {}", stderr(&o));
        assert!(
            !stderr(&o).contains("unexpected argument"),
            "{}",
            stderr(&o)
        );
    }
}

#[test]
fn the_benchmarks_are_a_binary_of_their_own() {
    // The user's binary does not carry them...
    let o = rtemu(&["bench", "sim"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        stderr(&o).contains("unrecognized subcommand 'bench'"),
        "{}",
        stderr(&o)
    );
    // ... the one beside it does, and refuses a bad benchmark as rtemu refuses a bad command.
    let bench = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_rtemu-bench"))
            .args(args)
            .output()
            .expect("rtemu-bench runs")
    };
    // A negative value is out of range, as for `rtemu`, not an unknown flag.
    let o = bench(&["engine", "--minutes", "-1"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        stderr(&o).contains("--minutes -1: give the soak's length from 0.05 (3 s) to 1440"),
        "{}",
        stderr(&o)
    );
    let help = bench(&["--help"]);
    assert!(help.status.success(), "{}", text(&help));
    for what in ["sim", "engine", "topo", "precision", "aqm"] {
        assert!(stdout(&help).contains(what), "{what}: {}", stdout(&help));
    }
    assert!(
        stdout(&help).contains("rtemu-bench sim"),
        "{}",
        stdout(&help)
    );
    let o = bench(&["simulate"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        stderr(&o).contains("invalid value 'simulate'"),
        "{}",
        stderr(&o)
    );
}

/// Removes a tracing instance a test made, pass or fail.
struct Instance(PathBuf);

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// `lab sleep --trace` records its CPU in a tracing instance of its own, finds every timed
/// wake-up of its thread in it, gives each late one a cause that agrees with the test's own
/// errors, and leaves no instance behind: neither its own nor one a killed run left; another
/// tool's is never touched.
#[test]
fn lab_sleep_trace_says_why_each_late_wake_up_came_late() {
    if !rtemu_testutil::root_or_skip("lab sleep --trace", "records the kernel's trace events") {
        return;
    }
    let Some(instances) = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .iter()
        .map(|root| std::path::Path::new(root).join("instances"))
        .find(|p| p.is_dir())
    else {
        // No tracing here: the command says so and how to mount it.
        let o = rtemu(&[
            "lab",
            "sleep",
            "--methods",
            "sleep",
            "--count",
            "1",
            "--trace",
        ]);
        assert!(!o.status.success());
        assert!(stderr(&o).contains("mount -t tracefs"), "{}", stderr(&o));
        return;
    };
    // A run killed before it removed its instance (its process gone), and another tool's.
    let mut dead = Command::new("true").spawn().unwrap();
    let dead_pid = dead.id();
    dead.wait().unwrap();
    let abandoned = Instance(instances.join(format!("rtemu-lab-{dead_pid}")));
    let foreign = Instance(instances.join(format!("rtemu-test-other-{}", std::process::id())));
    std::fs::create_dir(&abandoned.0).unwrap();
    std::fs::create_dir(&foreign.0).unwrap();

    let dir = Scratch::new("trace");
    let csv = dir.path("sleep.csv");
    let count = 3000u64;
    let o = rtemu(&[
        "lab",
        "sleep",
        "--methods",
        "sleep",
        "--workload",
        "fixed:300us",
        "--count",
        "3000",
        "--fifo",
        "40",
        "--cpu",
        "0",
        "--trace",
        "--json",
        "--csv",
        &csv,
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let trace = &report["trace"];
    assert_eq!(trace["cpus"], serde_json::json!([0]), "{trace}");
    assert_eq!(trace["late_after_ns"], 100_000);
    // Every wake-up of the test's thread is found (the last may have no event after it).
    let wakeups = trace["wakeups"].as_u64().unwrap();
    assert!(
        (count - 3..=count).contains(&wakeups),
        "{wakeups} of {count}"
    );
    let causes = ["absent", "task", "handler", "waited"];
    let late: u64 = causes
        .iter()
        .map(|c| trace[c]["count"].as_u64().unwrap())
        .sum();
    let worst = trace["worst"].as_array().unwrap();
    assert_eq!(worst.len() as u64, late.min(10), "{trace}");
    for w in worst {
        let late_ns = w["late_ns"].as_u64().unwrap();
        assert!(late_ns > 100_000, "{w}");
        assert!(w["cause_ns"].as_u64().unwrap() <= late_ns, "{w}");
        assert!(causes.contains(&w["cause"].as_str().unwrap()), "{w}");
    }
    // The test's own errors (which also hold the return to user space) agree: whatever it
    // saw at least 1 ms late, the trace counts late; what the trace counts late, it saw at
    // least 50 µs late.
    let errors: Vec<i64> = std::fs::read_to_string(&csv)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| l.rsplit(',').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(errors.len() as u64, count);
    let seen = |ns: i64| errors.iter().filter(|&&e| e > ns).count() as u64;
    assert!(
        seen(1_000_000) <= late && late <= seen(50_000),
        "trace: {late} late; the test: {} over 1 ms, {} over 50 µs",
        seen(1_000_000),
        seen(50_000)
    );
    let text_report = rtemu(&[
        "lab",
        "sleep",
        "--methods",
        "sleep",
        "--count",
        "200",
        "--trace",
    ]);
    assert!(text_report.status.success(), "{}", text(&text_report));
    assert!(
        stdout(&text_report).contains("late wake-ups, from the kernel's trace of CPU"),
        "{}",
        stdout(&text_report)
    );

    let left: Vec<String> = std::fs::read_dir(&instances)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("rtemu-lab-"))
        .collect();
    assert!(left.is_empty(), "instances left behind: {left:?}");
    assert!(!abandoned.0.exists(), "the abandoned instance was kept");
    assert!(foreign.0.is_dir(), "another tool's instance was removed");
}
