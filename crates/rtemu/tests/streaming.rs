//! Every trace kind streams: `rtemu sim` driven by a long delay series or delivery-opportunity
//! trace reads all of it, in memory that does not grow with the trace's length.
//!
//! One test in its own file (its own process): the peak memory of the children is read with
//! `getrusage(RUSAGE_CHILDREN)`, which no other test's child may disturb.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A scratch directory removed when the test ends, pass or fail.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The largest peak resident set of any child waited for so far, in bytes.
fn children_peak_rss() -> u64 {
    // SAFETY: getrusage writes only into the struct it is given, which lives on this stack.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::getrusage(libc::RUSAGE_CHILDREN, &mut u), 0);
        u
    };
    usage.ru_maxrss as u64 * 1024
}

/// Writes `lines` lines, the `i`-th given by `line(i)`.
fn write_lines(path: &Path, lines: u64, line: impl Fn(u64) -> String) {
    let mut w = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for i in 0..lines {
        w.write_all(line(i).as_bytes()).unwrap();
    }
    w.flush().unwrap();
}

/// Runs a simulation at 1000 packets/s for `seconds` over `trace`; returns its summary's trace
/// counters and the children's peak memory after it.
fn sim(trace: &Path, seconds: u64) -> (serde_json::Value, u64) {
    let o = Command::new(env!("CARGO_BIN_EXE_rtemu"))
        .args(["sim", "--traffic"])
        .arg(format!("cbr 1000pps 100B {seconds}s"))
        .arg("--trace")
        .arg(trace)
        .arg("--json")
        .output()
        .expect("rtemu runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    (v["summary"]["trace"].clone(), children_peak_rss())
}

#[test]
fn long_series_and_opportunity_traces_stream_in_constant_memory() {
    let dir = Scratch(std::env::temp_dir().join(format!("rtemu-stream-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    const SHORT: u64 = 2_000;
    // 2 million lines: held in memory they would take 48 MB (series) and 16 MB (opportunities).
    const LONG: u64 = 2_000_000;
    let series = |n: u64| {
        let path = dir.0.join(format!("probe-{n}.series"));
        // One sample per ms, the delay wandering between 5 and 9 ms.
        write_lines(&path, n, |i| format!("{i}ms {}\n", 5 + i % 5));
        path
    };
    let mahimahi = |n: u64| {
        let path = dir.0.join(format!("cell-{n}.down"));
        // One delivery opportunity per ms.
        write_lines(&path, n, |i| format!("{}\n", i + 1));
        path
    };

    let (short_series, short_mm) = (series(SHORT), mahimahi(SHORT));
    let (long_series, long_mm) = (series(LONG), mahimahi(LONG));
    let (t, _) = sim(&short_series, SHORT / 1000);
    assert_eq!(t["records"], SHORT, "{t}");
    let (t, _) = sim(&short_mm, SHORT / 1000);
    assert!(t["records"].as_u64().unwrap() >= SHORT - 1, "{t}");
    let small = children_peak_rss();

    // Every sample of the long series is read (one packet per sample's ms), none substituted.
    let (t, after_series) = sim(&long_series, LONG / 1000);
    assert_eq!(
        (t["records"].as_u64(), t["underruns"].as_u64()),
        (Some(LONG), Some(0)),
        "{t}"
    );
    let (t, after_mm) = sim(&long_mm, LONG / 1000);
    assert!(t["records"].as_u64().unwrap() >= LONG - 1, "{t}");
    assert_eq!(t["underruns"], 0, "{t}");

    // A thousand times the trace, and the peak memory grows by less than a quarter of what
    // holding the long series would take.
    let grown = after_series.max(after_mm).saturating_sub(small);
    assert!(
        grown < 12 << 20,
        "peak memory grew by {grown} bytes, from {small}, with a trace 1000 times longer"
    );
}
