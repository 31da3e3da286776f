//! No input hangs `rtemu`, exhausts the machine, or gets a verdict from nothing: each bad value
//! is refused with its valid range, and a run that measured nothing says so and fails.

use std::process::{Command, Output};

fn rtemu(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rtemu"))
        .args(args)
        .output()
        .expect("rtemu runs")
}

/// Standard output then standard error, for assertion messages.
fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A scratch directory removed when the test ends, pass or fail.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("rtemu-bounds-{name}-{}", std::process::id()));
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
