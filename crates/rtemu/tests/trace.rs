//! `rtemu trace` end to end, as a user runs it: generated traces are reproducible and
//! convert losslessly, framed headers carry a flow and provenance through every command,
//! and bad input is an error naming the file and place.

use std::path::{Path, PathBuf};
use std::process::Command;

use rtemu_trace::{Action, Header, RecordReader};

/// Runs `rtemu trace ARGS…`: its stdout when it succeeds, else its stderr.
fn trace(args: &[&str]) -> Result<String, String> {
    let o = Command::new(env!("CARGO_BIN_EXE_rtemu"))
        .arg("trace")
        .args(args)
        .output()
        .expect("rtemu runs");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    if o.status.success() {
        Ok(text(&o.stdout))
    } else {
        Err(text(&o.stderr))
    }
}

/// A scratch directory removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("rtemu-trace-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn path(&self, file: &str) -> String {
        self.0.join(file).to_str().unwrap().to_owned()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn records(path: &str) -> Vec<Action> {
    let mut r = RecordReader::open(Path::new(path), None).unwrap();
    let mut out = Vec::new();
    while r.read_block(&mut out, 1 << 16).unwrap() > 0 {}
    out
}

fn header_of(path: &str) -> Header {
    RecordReader::open(Path::new(path), None)
        .unwrap()
        .header()
        .cloned()
        .unwrap()
}

#[test]
fn generated_traces_are_reproducible_and_convert_losslessly() {
    let d = Scratch::new("gen");
    let (a, b, c) = (d.path("a.rpl"), d.path("b.rpl"), d.path("c.rpl"));
    let gen = |out: &str, seed: &str| {
        trace(&[
            "gen", "fgn", "--hurst", "0.7", "--mean", "5ms", "--std", "1ms", "--count", "5000",
            "--seed", seed, "-o", out,
        ])
    };
    gen(&a, "7").unwrap();
    gen(&b, "7").unwrap();
    gen(&c, "8").unwrap();
    let bytes = std::fs::read(&a).unwrap();
    assert_eq!(bytes.len(), 5000 * 4);
    assert_eq!(bytes, std::fs::read(&b).unwrap());
    assert_ne!(bytes, std::fs::read(&c).unwrap());
    let (txt, rplx, back) = (d.path("a.txt"), d.path("a.rplx"), d.path("back.rpl"));
    trace(&["convert", &a, &txt]).unwrap();
    trace(&["convert", &txt, &rplx, "--unit", "ns"]).unwrap();
    trace(&["convert", &rplx, &back]).unwrap();
    assert_eq!(records(&txt), records(&a));
    assert_eq!(records(&rplx), records(&a));
    assert_eq!(std::fs::read(&back).unwrap(), bytes);
    let onoff = d.path("o.rplx");
    trace(&["gen", "onoff", "--count", "3000", "-o", &onoff]).unwrap();
    assert_eq!(records(&onoff).len(), 3000);
    let iid = d.path("i.txt");
    trace(&[
        "gen", "iid", "--dist", "constant", "--mean", "2ms", "--ge-p", "1", "--ge-r", "0",
        "--count", "3", "-o", &iid,
    ])
    .unwrap();
    // Good to Bad at once and never back, all lost in Bad.
    assert_eq!(records(&iid), vec![Action::Drop; 3]);
    // A model's fates, its counts in the JSON summary.
    let netem = d.path("n.rpl");
    let json = trace(&[
        "gen",
        "netem",
        "--model",
        "delay 3ms loss 100%",
        "--count",
        "4",
        "-o",
        &netem,
        "--json",
    ])
    .unwrap();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        (v["kind"].as_str(), v["records"].as_u64()),
        (Some("netem"), Some(4))
    );
    assert_eq!(v["outcome"]["dropped"], 4);
    assert_eq!(records(&netem), vec![Action::Drop; 4]);
}

#[test]
fn other_kinds_load_and_bad_ones_say_where() {
    let d = Scratch::new("kinds");
    let mm = d.path("trace.down");
    // A Mahimahi trace exactly as its tools write them.
    std::fs::write(&mm, "1\n1\n2\n4\n").unwrap();
    let out = trace(&["stats", "--kind", "mahimahi", &mm]).unwrap();
    assert!(
        out.contains("\nopportunities                  4\n"),
        "{out}"
    );
    std::fs::write(&mm, "1\n3\n2\n").unwrap();
    let e = trace(&["stats", "--kind", "mahimahi", &mm]).unwrap_err();
    assert!(e.contains("trace.down: line 3, column 1"), "{e}");
    let series = d.path("probe.txt");
    std::fs::write(&series, "0 10\n1 12 1\n0.5 11\n").unwrap();
    let e = trace(&["stats", "--kind", "series", &series]).unwrap_err();
    assert!(
        e.contains("probe.txt: line 3, column 1") && e.contains("backwards"),
        "{e}"
    );
}

#[test]
fn bad_inputs_are_errors_naming_the_file() {
    let d = Scratch::new("bad");
    let bad = d.path("bad.rpl");
    std::fs::write(&bad, [0x40, 0, 0, 1, 0xc0]).unwrap();
    let e = trace(&["stats", &bad]).unwrap_err();
    assert!(e.contains("bad.rpl: 1 stray byte(s) at byte 4"), "{e}");
    let empty = d.path("empty.rpl");
    std::fs::write(&empty, []).unwrap();
    let e = trace(&["stats", &empty]).unwrap_err();
    assert!(e.contains("holds no records"), "{e}");
    let e = trace(&["gen", "fgn", "--hurst", "1.5", "-o", &d.path("x.rpl")]).unwrap_err();
    assert!(e.contains("outside (0, 1)"), "{e}");
    let e = trace(&["convert", &bad, &d.path("x.dat")]).unwrap_err();
    assert!(e.contains("--format"), "{e}");
}

#[test]
fn a_flow_and_provenance_go_into_the_framed_header_and_come_back_out() {
    let d = Scratch::new("flow");
    let a = d.path("a.rplx");
    trace(&[
        "gen",
        "fgn",
        "--count",
        "300",
        "--seed",
        "3",
        "--flow",
        "dst=10.1.2.3/16  proto=UDP",
        "--provenance",
        "lab path A",
        "-o",
        &a,
    ])
    .unwrap();
    let flow = "dst=10.1.0.0/16 proto=udp";
    let h = header_of(&a);
    assert_eq!(h.flow, Some(flow.parse().unwrap()));
    assert!(
        h.provenance
            .starts_with("lab path A; rtemu trace gen fgn --hurst 0.8"),
        "{}",
        h.provenance
    );
    // `stats` shows them, as text and as JSON.
    let text = trace(&["stats", &a]).unwrap();
    assert!(text.contains(&format!("\nflow        {flow}\n")), "{text}");
    assert!(
        text.contains("\nprovenance  lab path A; rtemu trace gen fgn"),
        "{text}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&trace(&["stats", &a, "--json"]).unwrap()).unwrap();
    assert_eq!(v["records"], 300);
    assert_eq!(v["format"], "framed");
    assert_eq!(v["header"]["flow"], flow);
    assert_eq!(v["header"]["unit"], "us");
    assert_eq!(v["header"]["provenance"], h.provenance.as_str());
    // `cat` shows them as comments, so its output is still a text trace of the records.
    let cat = trace(&["cat", &a]).unwrap();
    assert!(
        cat.starts_with(&format!(
            "# flow: {flow}\n# provenance: {}\n# unit: us\npass ",
            h.provenance
        )),
        "{cat}"
    );
    let txt = d.path("a.txt");
    std::fs::write(&txt, &cat).unwrap();
    assert_eq!(records(&txt), records(&a));
    // `convert` keeps the input's flow, or sets a new one, and puts provenance first.
    let (b, c) = (d.path("b.rplx"), d.path("c.rplx"));
    trace(&["convert", &a, &b, "--unit", "ns"]).unwrap();
    assert_eq!(header_of(&b).flow, h.flow);
    assert_eq!(header_of(&b).provenance, h.provenance);
    trace(&[
        "convert",
        &b,
        &c,
        "--flow",
        "sport=5000-5999",
        "--provenance",
        "copy",
    ])
    .unwrap();
    let hc = header_of(&c);
    assert_eq!(hc.flow, Some("sport=5000-5999".parse().unwrap()));
    assert_eq!(hc.provenance, format!("copy; {}", h.provenance));
    assert_eq!(records(&c), records(&a));
    // A series converted to a framed trace takes a flow too.
    let series = d.path("probe.series");
    std::fs::write(&series, "0 10\n1 12\n").unwrap();
    let s = d.path("s.rplx");
    trace(&[
        "convert",
        &series,
        &s,
        "--series-pps",
        "10",
        "--flow",
        "proto=tcp",
    ])
    .unwrap();
    assert_eq!(header_of(&s).flow, Some("proto=tcp".parse().unwrap()));
    // Raw and text forms have no header: asking for one is an error, and nothing is written.
    let raw = d.path("x.rpl");
    let e = trace(&[
        "gen",
        "iid",
        "--count",
        "5",
        "--flow",
        "proto=udp",
        "-o",
        &raw,
    ])
    .unwrap_err();
    assert!(
        e.contains("--flow can only be stored in the header of the framed form")
            && e.contains("raw form"),
        "{e}"
    );
    assert!(!Path::new(&raw).exists());
    let e = trace(&["convert", &a, &d.path("y.txt"), "--provenance", "p"]).unwrap_err();
    assert!(e.contains("--provenance can only"), "{e}");
    // A bad pattern is refused with the column of the bad field.
    let e = trace(&["gen", "fgn", "--flow", "proto=udp port=1", "-o", &a]).unwrap_err();
    assert!(e.contains("column 11"), "{e}");
    // Other forms show no header.
    let plain = d.path("plain.rpl");
    trace(&["convert", &a, &plain]).unwrap();
    assert!(!trace(&["stats", &plain]).unwrap().contains("\nflow "));
    assert!(!trace(&["cat", &plain]).unwrap().starts_with('#'));
}
