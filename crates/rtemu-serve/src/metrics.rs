//! `GET /metrics`: what the server's labs and their engines do, as Prometheus metrics
//! (docs/metrics.md).
//!
//! [`gather`] reads every lab this host runs, as `GET /v1/labs` and
//! `GET /v1/labs/{lab}/stats` read it; [`encode`] turns what it read into the families of
//! [`FAMILIES`], written in the text format by [`exposition`]. Nothing is kept between scrapes:
//! every counter is the engine's own, since the engine started (a new engine starts them
//! over, which `rate()` allows for).
//!
//! Series carry `lab`, and in one host's part of a multi-host lab `host`; a link direction's
//! carry `link` and `direction` (`a-b`, `b-a`), a release thread's `thread` (its index).

pub mod exposition;

use std::collections::BTreeMap;

use rtemu_api::body::{LabStatus, LabSummary, StatsReply};
use rtemu_control::message::{Direction, EngineThread, Stats};
use rtemu_topo::state::State;

use crate::ctl;
use crate::error::ApiError;
use exposition::{Family, Kind, Labels, Sample, Value};

/// What one scrape read of one lab.
#[derive(Debug, Clone, PartialEq)]
pub struct LabScrape {
    /// The lab, as `GET /v1/labs` lists it: counts, not the whole view, which at 10,000
    /// nodes would be megabytes built on every scrape.
    pub lab: LabSummary,
    /// How many of its links are impaired.
    pub impaired_links: usize,
    /// In a multi-host lab, the host whose part this is.
    pub host: Option<String>,
    /// Whether the lab has an engine (impaired links).
    pub has_engine: bool,
    /// Its engine's stats; `None` without an engine, or when it did not answer.
    pub stats: Option<Stats>,
}

/// Reads every lab of this host and its engine's stats. Blocks (the engine's control socket).
pub fn gather() -> Result<Vec<LabScrape>, ApiError> {
    let mut labs = Vec::new();
    // A directory whose state cannot be read has no metrics (`GET /v1/labs` says why).
    for state in State::load_all()?.0 {
        let stats = ctl::stats(&state);
        labs.push(LabScrape {
            lab: ctl::summary(&state, None),
            impaired_links: state.topology.impaired_links().count(),
            host: state.part.as_ref().map(|p| p.host.clone()),
            has_engine: state.topology.impaired_links().next().is_some(),
            stats: match stats {
                Ok(StatsReply::Engine(s)) => Some(s),
                // No engine, or one that does not answer: the lab's status says which. (A
                // lab's state here is this host's part at most: never a lab across hosts.)
                Ok(StatsReply::NoEngine(_) | StatsReply::Hosts(_)) | Err(_) => None,
            },
        });
    }
    Ok(labs)
}

macro_rules! families {
    ($($id:ident: $name:literal, $kind:ident, $help:literal;)*) => {
        $(const $id: Family = Family { name: $name, kind: Kind::$kind, help: $help };)*
        /// Every family `GET /metrics` may write, in the order written.
        pub const FAMILIES: &[Family] = &[$($id),*];
    };
}

families! {
    LABS: "rtemu_labs", Gauge, "Labs this server runs (on this host).";
    LAB_STATUS: "rtemu_lab_status", Gauge,
        "1 for the lab's status (up; incomplete: its up did not finish; degraded: its engine \
         does not answer), 0 for the others.";
    LAB_NODES: "rtemu_lab_nodes", Gauge, "Nodes of the lab on this host.";
    LAB_LINKS: "rtemu_lab_links", Gauge,
        "Point-to-point links of the lab: impaired (the engine carries them) or ideal.";
    LAB_LANS: "rtemu_lab_lans", Gauge, "LANs of the lab.";
    ENGINE_UP: "rtemu_engine_up", Gauge,
        "1 when the lab's engine answered this scrape, 0 when it did not (labs without \
         impaired links have no engine).";
    ENGINE_INFO: "rtemu_engine_info", Gauge,
        "The lab's engine: its process id and packet I/O (af-packet or af-xdp); always 1.";
    ENGINE_CPU: "rtemu_engine_cpu_seconds_total", Counter,
        "CPU time the engine process used, all threads.";
    THREAD_INFO: "rtemu_engine_thread_info", Gauge,
        "A release thread: the CPU it is pinned to and the SCHED_FIFO priority asked for \
         (absent: not pinned, real time off); always 1.";
    THREAD_REALTIME: "rtemu_engine_thread_realtime", Gauge,
        "1 while the release thread runs SCHED_FIFO; 0 when real time was refused or turned \
         off, or while it has stepped down for the rest of a window.";
    THREAD_CPU: "rtemu_engine_thread_cpu_seconds_total", Counter,
        "CPU time the release thread used.";
    THREAD_STEPPED_DOWN: "rtemu_engine_thread_stepped_down_windows_total", Counter,
        "10 ms windows in which the release thread spent its real-time share and stepped down \
         to SCHED_OTHER for the rest (zero unless saturated).";
    THREAD_STALLS: "rtemu_engine_thread_stalls_total", Counter,
        "Times the release thread was away more than 1 ms with work.";
    THREAD_MAX_STALL: "rtemu_engine_thread_max_stall_seconds", Gauge,
        "The release thread's longest stall.";
    THREAD_MARGIN: "rtemu_engine_thread_spin_margin_seconds", Gauge,
        "How long before a release the release thread stops sleeping and spins.";
    THREAD_SLACK: "rtemu_engine_thread_timer_slack_seconds", Gauge,
        "The release thread's timer slack.";
    LINK_INFO: "rtemu_link_info", Gauge,
        "A link direction: the node frames come from and go to, and the release thread \
         serving it; always 1.";
    LINK_CUT: "rtemu_link_cut", Gauge, "1 while the direction is cut (link down).";
    LINK_RECEIVED: "rtemu_link_received_frames_total", Counter,
        "Frames the engine received into the direction.";
    LINK_RECEIVED_BYTES: "rtemu_link_received_bytes_total", Counter,
        "Bytes of the frames received (Ethernet header included).";
    LINK_DELIVERED: "rtemu_link_delivered_frames_total", Counter,
        "Copies delivered (duplicates included).";
    LINK_DELIVERED_BYTES: "rtemu_link_delivered_bytes_total", Counter,
        "Bytes of the copies delivered (Ethernet header included).";
    LINK_DROPPED: "rtemu_link_dropped_frames_total", Counter, "Copies dropped, by reason.";
    LINK_DUPLICATED: "rtemu_link_duplicated_frames_total", Counter,
        "Extra copies made by duplication.";
    LINK_CORRUPTED: "rtemu_link_corrupted_frames_total", Counter,
        "Copies queued with bits the model flipped (corrupt, ber).";
    LINK_MARKED: "rtemu_link_marked_frames_total", Counter,
        "Copies queued with their ECN field set to CE instead of being dropped (by an AQM, or \
         netem's ecn loss).";
    LINK_KERNEL_DROPS: "rtemu_link_kernel_dropped_frames_total", Counter,
        "Frames the kernel dropped before the engine read them (where the I/O tells).";
    LINK_RESOLUTION_PASSED: "rtemu_link_resolution_passed_frames_total", Counter,
        "Frames passed without a model decision by the resolution rule.";
    LINK_TRACE_UNDERRUNS: "rtemu_link_trace_underruns_total", Counter,
        "Trace records that were not ready (the frames passed undelayed).";
    LINK_TX_BUSY: "rtemu_link_tx_busy_total", Counter,
        "Sends the interface refused for a while (retried).";
    LINK_IN_FLIGHT: "rtemu_link_in_flight_frames", Gauge,
        "Copies waiting for their release (the direction's queue and delay line).";
    LINK_BUFFERS: "rtemu_link_frame_buffers", Gauge, "Frame buffers the direction has.";
    LINK_CONSERVED: "rtemu_link_conserved", Gauge,
        "1 when the direction's counters account for every copy.";
    LINK_RELEASE_ERROR: "rtemu_link_release_error_seconds", Histogram,
        "Release error: when the send of a copy returned minus its intended time. A bucket \
         counts errors below its bound; there is no _sum (the engine keeps buckets, not a \
         sum).";
    LINK_RELEASE_ERROR_MAX: "rtemu_link_release_error_max_seconds", Gauge,
        "The largest release error since the engine started.";
    LINK_LATE: "rtemu_link_late_frames_total", Counter,
        "Copies released later than the engine's late threshold.";
    LINK_EARLY: "rtemu_link_early_frames_total", Counter,
        "Copies whose send started before their intended time (always 0 unless the engine is \
         wrong).";
    LINK_FIDELITY_LOST: "rtemu_link_fidelity_lost_records_total", Counter,
        "Fidelity records lost because the ring was full (not in the histogram).";
}

/// The text `GET /metrics` answers for `labs`.
pub fn encode(labs: &[LabScrape]) -> String {
    let mut sheet = Sheet::default();
    sheet.add(&LABS, Vec::new(), Value::Int(labs.len() as u64));
    for lab in labs {
        add_lab(&mut sheet, lab);
    }
    exposition::encode(&sheet.families())
}

/// Samples by family, in any order; written in [`FAMILIES`]' order.
#[derive(Default)]
struct Sheet(BTreeMap<&'static str, Vec<Sample>>);

impl Sheet {
    fn add(&mut self, family: &Family, labels: Labels, value: Value) {
        self.push(family, Sample::Value(labels, value));
    }

    fn push(&mut self, family: &Family, sample: Sample) {
        debug_assert!(
            FAMILIES.contains(family),
            "{} is not in FAMILIES",
            family.name
        );
        self.0.entry(family.name).or_default().push(sample);
    }

    fn families(mut self) -> Vec<(Family, Vec<Sample>)> {
        FAMILIES
            .iter()
            .map(|f| (*f, self.0.remove(f.name).unwrap_or_default()))
            .collect()
    }
}

/// `base` and `more`.
fn with(base: &Labels, more: &[(&'static str, &str)]) -> Labels {
    let mut labels = base.clone();
    labels.extend(more.iter().map(|&(k, v)| (k, v.to_owned())));
    labels
}

fn add_lab(sheet: &mut Sheet, scrape: &LabScrape) {
    let lab = &scrape.lab;
    let mut base: Labels = vec![("lab", lab.name.clone())];
    if let Some(host) = &scrape.host {
        base.push(("host", host.clone()));
    }
    for (status, name) in [
        (LabStatus::Up, "up"),
        (LabStatus::Incomplete, "incomplete"),
        (LabStatus::Degraded, "degraded"),
    ] {
        let labels = with(&base, &[("status", name)]);
        sheet.add(&LAB_STATUS, labels, Value::flag(lab.status == status));
    }
    sheet.add(&LAB_NODES, base.clone(), Value::Int(lab.nodes as u64));
    let impaired = scrape.impaired_links as u64;
    for (kind, n) in [("true", impaired), ("false", lab.links as u64 - impaired)] {
        let labels = with(&base, &[("impaired", kind)]);
        sheet.add(&LAB_LINKS, labels, Value::Int(n));
    }
    sheet.add(&LAB_LANS, base.clone(), Value::Int(lab.lans as u64));
    if scrape.has_engine {
        let up = Value::flag(scrape.stats.is_some());
        sheet.add(&ENGINE_UP, base.clone(), up);
    }
    if let Some(stats) = &scrape.stats {
        add_engine(sheet, &base, stats);
    }
}

fn add_engine(sheet: &mut Sheet, base: &Labels, stats: &Stats) {
    let pid = stats.pid.to_string();
    let info = with(base, &[("pid", &pid), ("io", &stats.io)]);
    sheet.add(&ENGINE_INFO, info, Value::Int(1));
    if let Some(ns) = stats.process_cpu_ns {
        sheet.add(&ENGINE_CPU, base.clone(), Value::seconds(ns));
    }
    for t in &stats.threads {
        add_thread(sheet, base, t);
    }
    for d in &stats.directions {
        add_direction(sheet, base, d);
    }
}

fn add_thread(sheet: &mut Sheet, base: &Labels, t: &EngineThread) {
    let index = t.index.to_string();
    let labels = with(base, &[("thread", &index)]);
    let mut info = labels.clone();
    info.extend(t.cpu.map(|c| ("cpu", c.to_string())));
    info.extend(t.priority.map(|p| ("priority", p.to_string())));
    sheet.add(&THREAD_INFO, info, Value::Int(1));
    let realtime = t.policy.starts_with("SCHED_FIFO");
    sheet.add(&THREAD_REALTIME, labels.clone(), Value::flag(realtime));
    if let Some(ns) = t.cpu_ns {
        sheet.add(&THREAD_CPU, labels.clone(), Value::seconds(ns));
    }
    let stepped = Value::Int(t.stepped_down);
    sheet.add(&THREAD_STEPPED_DOWN, labels.clone(), stepped);
    sheet.add(&THREAD_STALLS, labels.clone(), Value::Int(t.stalls));
    let max_stall = Value::seconds(t.max_stall_ns);
    sheet.add(&THREAD_MAX_STALL, labels.clone(), max_stall);
    let margin = Value::seconds(t.margin_ns);
    sheet.add(&THREAD_MARGIN, labels.clone(), margin);
    if let Some(ns) = t.timer_slack_ns {
        sheet.add(&THREAD_SLACK, labels, Value::seconds(ns));
    }
}

fn add_direction(sheet: &mut Sheet, base: &Labels, d: &Direction) {
    let labels = with(base, &[("link", &d.link), ("direction", &d.dir)]);
    let mut info = with(&labels, &[("from", &d.from), ("to", &d.to)]);
    info.extend(d.thread.map(|t| ("thread", t.to_string())));
    sheet.add(&LINK_INFO, info, Value::Int(1));
    let counters = [
        (&LINK_CUT, Value::flag(d.cut)),
        (&LINK_RECEIVED, Value::Int(d.received)),
        (&LINK_RECEIVED_BYTES, Value::Int(d.received_bytes)),
        (&LINK_DELIVERED, Value::Int(d.delivered)),
        (&LINK_DELIVERED_BYTES, Value::Int(d.delivered_bytes)),
    ];
    for (family, value) in counters {
        sheet.add(family, labels.clone(), value);
    }
    for (reason, n) in &d.dropped {
        let labels = with(&labels, &[("reason", reason)]);
        sheet.add(&LINK_DROPPED, labels, Value::Int(*n));
    }
    let f = &d.fidelity;
    let rest = [
        (&LINK_DUPLICATED, Some(d.duplicates)),
        (&LINK_CORRUPTED, Some(d.corrupted)),
        (&LINK_MARKED, Some(d.marked)),
        (&LINK_KERNEL_DROPS, d.kernel_drops),
        (&LINK_RESOLUTION_PASSED, Some(d.resolution_passed)),
        (&LINK_TRACE_UNDERRUNS, Some(d.trace_underruns)),
        (&LINK_TX_BUSY, Some(d.tx_busy)),
        (&LINK_IN_FLIGHT, Some(d.in_flight)),
        (&LINK_BUFFERS, d.buffers.map(|b| b as u64)),
        (&LINK_CONSERVED, Some(u64::from(d.conserved))),
    ];
    for (family, value) in rest {
        if let Some(n) = value {
            sheet.add(family, labels.clone(), Value::Int(n));
        }
    }
    let h = &f.released_histogram;
    // The engine's buckets: one below each edge, and one at or above the last.
    let buckets = h
        .edges_ns
        .iter()
        .zip(&h.counts)
        .map(|(&edge, &n)| (edge as f64 / 1e9, n))
        .collect();
    let above = h.counts.get(h.edges_ns.len()).copied().unwrap_or(0);
    sheet.push(
        &LINK_RELEASE_ERROR,
        Sample::Histogram(labels.clone(), buckets, above),
    );
    let max = Value::seconds(f.released.max_ns);
    sheet.add(&LINK_RELEASE_ERROR_MAX, labels.clone(), max);
    sheet.add(&LINK_LATE, labels.clone(), Value::Int(f.late));
    sheet.add(&LINK_EARLY, labels.clone(), Value::Int(f.early));
    sheet.add(&LINK_FIDELITY_LOST, labels, Value::Int(f.lost));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A lab as the list shows it, with `nodes` nodes, one LAN and `links` links of which
    /// `impaired` are impaired.
    fn lab(name: &str, status: &str, nodes: usize, links: usize, impaired: usize) -> LabScrape {
        let lab = serde_json::from_value(json!({
            "name": name, "file": "lab.toml", "status": status, "nodes": nodes,
            "links": links, "lans": 1, "externals": 0, "detached": 0, "revision": "r1",
        }))
        .unwrap();
        LabScrape {
            lab,
            impaired_links: impaired,
            host: None,
            has_engine: impaired > 0,
            stats: None,
        }
    }

    /// An engine's stats: one thread, one direction, every optional field present.
    fn stats(lab: &str) -> Stats {
        let mut counts = vec![0u64; 17];
        counts[0] = 1; // below 1 µs
        counts[5] = 7; // 20 to 50 µs
        counts[9] = 2; // 0.5 to 1 ms
        counts[16] = 1; // 100 ms and more
        serde_json::from_value(json!({
            "directions": [{
                "buffers": 4096, "conserved": true, "corrupted": 3, "cut": false,
                "delivered": 11, "delivered_bytes": 15862, "dir": "a-b",
                "dropped": {"loss": 2, "queue-full": 0}, "duplicates": 1,
                "fidelity": {
                    "arrival_lag": {"max_ns": 9000, "p50_ns": 800, "p999_ns": 9000, "p99_ns": 9000},
                    "count": 11, "early": 0, "late": 3, "late_after_ns": 100000, "lost": 4,
                    "released": {"max_ns": 150000000, "p50_ns": 30000, "p999_ns": 150000000,
                                 "p99_ns": 150000000},
                    "released_histogram": {
                        "counts": counts,
                        "edges_ns": rtemu_engine::fidelity::BUCKET_EDGES_NS,
                    },
                    "started": {"max_ns": 0, "p50_ns": 0, "p999_ns": 0, "p99_ns": 0},
                },
                "from": "n0", "in_flight": 5, "kernel_drops": 6, "link": "wan", "marked": 10,
                "netem": "delay 5ms loss 1%", "received": 12, "received_bytes": 17304,
                "resolution_passed": 7, "thread": 0, "to": "n1", "trace_underruns": 8,
                "tx_busy": 9,
            }],
            "io": "af-packet", "lab": lab, "monotonic_ns": 1, "pid": 4242,
            "process_cpu_ns": 1_500_000_000,
            "threads": [{
                "cpu": 1, "cpu_ns": 1_250_000_000, "index": 0, "links": ["wan"],
                "margin_ns": 12000, "max_stall_ns": 2_500_000, "policy": "SCHED_FIFO:40",
                "priority": 40, "stalls": 2, "stepped_down": 3, "timer_slack_ns": 1,
            }],
        }))
        .unwrap()
    }

    /// A multi-host lab's part whose engine answers, a lab whose engine does not, and a lab
    /// without impaired links.
    fn scrapes() -> Vec<LabScrape> {
        vec![
            LabScrape {
                host: Some("h1".into()),
                stats: Some(stats("wide")),
                ..lab("wide", "up", 2, 2, 1)
            },
            lab("broken", "degraded", 2, 1, 1),
            lab("plain", "up", 3, 1, 0),
        ]
    }

    /// The metrics of [`scrapes`] read exactly as `tests/golden/metrics.txt`; `RTEMU_BLESS=1`
    /// rewrites it (review the diff).
    #[test]
    fn metrics_match_the_golden_file() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/metrics.txt");
        let text = encode(&scrapes());
        if std::env::var_os("RTEMU_BLESS").is_some() {
            std::fs::write(&path, &text).unwrap();
        }
        let want = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (RTEMU_BLESS=1 writes it)", path.display()));
        assert!(
            text == want,
            "the metrics differ from {}:\n{text}",
            path.display()
        );
    }

    #[test]
    fn the_golden_sample_writes_every_family_and_each_family_follows_the_conventions() {
        let text = encode(&scrapes());
        for f in FAMILIES {
            assert!(exposition::valid_metric_name(f.name), "{}", f.name);
            assert!(f.name.starts_with("rtemu_"), "{}", f.name);
            // Counters, and only counters, end in `_total`.
            assert_eq!(
                f.kind == Kind::Counter,
                f.name.ends_with("_total"),
                "{}",
                f.name
            );
            assert!(
                text.contains(&format!("\n# TYPE {} ", f.name)),
                "{} is not in the sample",
                f.name
            );
        }
        let names: std::collections::BTreeSet<_> = FAMILIES.iter().map(|f| f.name).collect();
        assert_eq!(names.len(), FAMILIES.len(), "a family is listed twice");
    }

    #[test]
    fn a_histogram_is_cumulative_and_its_count_is_the_engine_s_count() {
        let text = encode(&scrapes());
        let value = |prefix: &str| -> u64 {
            let line = text
                .lines()
                .find(|l| l.starts_with(prefix))
                .unwrap_or_else(|| panic!("no line {prefix}"));
            line.rsplit(' ').next().unwrap().parse().unwrap()
        };
        let series = "lab=\"wide\",host=\"h1\",link=\"wan\",direction=\"a-b\"";
        let bucket = |le: &str| {
            value(&format!(
                "rtemu_link_release_error_seconds_bucket{{{series},le=\"{le}\"}}"
            ))
        };
        assert_eq!(bucket("0.000001"), 1);
        assert_eq!(bucket("0.00002"), 1);
        assert_eq!(bucket("0.00005"), 8);
        assert_eq!(bucket("0.001"), 10);
        assert_eq!(bucket("0.1"), 10);
        assert_eq!(bucket("+Inf"), 11);
        assert_eq!(
            value(&format!(
                "rtemu_link_release_error_seconds_count{{{series}}}"
            )),
            11
        );
        let sum = text.lines().filter(|l| !l.starts_with('#')).find(|l| {
            l.split(['{', ' '])
                .next()
                .is_some_and(|n| n.ends_with("_sum"))
        });
        assert_eq!(sum, None, "the engine keeps no sum: none may be invented");
    }

    #[test]
    fn a_silent_engine_is_down_and_a_lab_without_one_has_no_engine_series() {
        let text = encode(&scrapes());
        assert!(text.contains("\nrtemu_engine_up{lab=\"broken\"} 0\n"));
        assert!(text.contains("\nrtemu_engine_up{lab=\"wide\",host=\"h1\"} 1\n"));
        assert!(text.contains("\nrtemu_lab_status{lab=\"broken\",status=\"degraded\"} 1\n"));
        assert!(text.contains("\nrtemu_lab_status{lab=\"broken\",status=\"up\"} 0\n"));
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let engine = line.starts_with("rtemu_engine") || line.starts_with("rtemu_link");
            assert!(!(engine && line.contains("lab=\"plain\"")), "{line}");
            let link = line.starts_with("rtemu_link") || line.starts_with("rtemu_engine_thread");
            assert!(!(link && line.contains("lab=\"broken\"")), "{line}");
        }
        assert!(text.starts_with("# HELP rtemu_labs "));
        assert!(text.contains("\nrtemu_labs 3\n"));
    }
}
