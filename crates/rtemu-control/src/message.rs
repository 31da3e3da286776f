//! The engine's replies on its control socket, typed: what the engine sends, the CLI prints
//! and a server passes on. Requests are [`rtemu_engine::control::Request`].
//!
//! The fields of every struct are declared in alphabetical order: serde writes them in
//! declaration order, and the replies were first written as `serde_json` maps, whose keys are
//! sorted, so `stats --json` and `fidelity.json` keep their layout.

use std::collections::BTreeMap;
use std::io::{self, Write};

use rtemu_topo::state::LabName;
use serde::{Deserialize, Serialize};

/// The answer to a request that changes something (`ping`, `set`, `down`, `up`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Ack {
    /// Always `true`: a failure is an [`ErrorReply`].
    pub ok: bool,
}

impl Ack {
    /// The acknowledgement.
    pub const OK: Ack = Ack { ok: true };
}

/// The answer to a request that failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorReply {
    /// Why, with its causes.
    pub error: String,
    /// Whose failure it is (an engine that does not say: `internal`).
    #[serde(default)]
    pub kind: ErrorKind,
}

/// Whose failure a refused request is: the request's, or the engine's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum ErrorKind {
    /// The request's: it does not parse, names a link the engine lacks, or a model that does
    /// not build (a netem text out of range, a table or trace that cannot be read).
    Request,
    /// A change of the same direction is still on its way to the release loop: the same
    /// request may succeed a moment later.
    Busy,
    /// The engine's own: its schedule or release threads have ended, or anything it does not
    /// class.
    #[default]
    Internal,
}

/// The answer to `stats`: counters and fidelity of every impaired link's directions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Stats {
    /// Each direction of each impaired link, in the topology's order.
    pub directions: Vec<Direction>,
    /// The packet I/O the engine runs on (`af-packet` or `af-xdp`).
    pub io: String,
    /// The lab.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub lab: LabName,
    /// When the counters were read, ns on the engine's `CLOCK_MONOTONIC`: rates between two
    /// snapshots divide by this difference, not by when each reached the reader.
    pub monotonic_ns: u64,
    /// The engine process's id.
    pub pid: u32,
    /// CPU time the engine process used so far (all threads), ns; `None` if unreadable.
    pub process_cpu_ns: Option<u64>,
    /// The engine's release threads: which links each serves, and how it runs.
    #[serde(default)]
    pub threads: Vec<EngineThread>,
}

/// One release thread of an engine: the links it serves, where and how it runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EngineThread {
    /// The CPU it is pinned to; `None`: not pinned.
    pub cpu: Option<usize>,
    /// CPU time it used so far, ns; `None` where the kernel does not tell.
    pub cpu_ns: Option<u64>,
    /// Its index, which [`Direction::thread`] names.
    pub index: usize,
    /// The links it serves.
    pub links: Vec<String>,
    /// How long before a release it stops sleeping and spins, ns.
    pub margin_ns: u64,
    /// The longest stall, ns.
    pub max_stall_ns: u64,
    /// Its scheduling class now (`SCHED_FIFO:40`, or `SCHED_OTHER` when real time was refused
    /// or while it has stepped down for the rest of a window).
    pub policy: String,
    /// The `SCHED_FIFO` priority asked for; `None`: real time was turned off.
    pub priority: Option<u8>,
    /// Times it was away more than 1 ms with work: a loop turn, a wake-up past its release or
    /// a frame's wait for it (a throttle, a preemption or the hypervisor taking the CPU shows
    /// here).
    pub stalls: u64,
    /// 10 ms windows in which it spent its real-time share (9 ms) and stepped down to
    /// `SCHED_OTHER` for the rest: zero unless saturated.
    pub stepped_down: u64,
    /// Its timer slack, ns.
    pub timer_slack_ns: Option<u64>,
}

impl From<&rtemu_engine::ThreadReport> for EngineThread {
    fn from(t: &rtemu_engine::ThreadReport) -> EngineThread {
        EngineThread {
            cpu: t.cpu,
            cpu_ns: t.cpu_ns,
            index: t.index,
            links: t.links.clone(),
            margin_ns: t.margin_ns,
            max_stall_ns: t.max_stall_ns,
            policy: t.policy.to_string(),
            priority: t.priority,
            stalls: t.stalls,
            stepped_down: t.stepped_down,
            timer_slack_ns: t.timer_slack_ns,
        }
    }
}

impl std::fmt::Display for EngineThread {
    /// `thread 0 on CPU 1, SCHED_FIFO:40, spin margin 12.0 µs: a-b, c-d`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "release thread {}", self.index)?;
        match self.cpu {
            Some(cpu) => write!(f, " on CPU {cpu}")?,
            None => write!(f, " (not pinned)")?,
        }
        write!(f, ", {}", self.policy)?;
        if self
            .priority
            .is_some_and(|p| format!("SCHED_FIFO:{p}") != self.policy)
        {
            write!(f, " (asked SCHED_FIFO:{})", self.priority.unwrap_or(0))?;
        }
        if self.margin_ns > 0 {
            write!(f, ", spin margin {} µs", us(self.margin_ns))?;
        }
        if self.stepped_down > 0 {
            write!(f, ", stepped down in {} windows", self.stepped_down)?;
        }
        if self.stalls > 0 {
            write!(
                f,
                ", {} stalls (longest {} µs)",
                self.stalls,
                us(self.max_stall_ns)
            )?;
        }
        // A line, not a page: a thread may carry thousands of links (`--json` lists them all).
        const SHOWN: usize = 8;
        write!(
            f,
            ": {}",
            self.links[..self.links.len().min(SHOWN)].join(", ")
        )?;
        if self.links.len() > SHOWN {
            write!(f, " and {} more", self.links.len() - SHOWN)?;
        }
        Ok(())
    }
}

/// One direction of an impaired link: what the engine did with its frames.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Direction {
    /// Frame buffers the direction has; `None` if unknown.
    pub buffers: Option<usize>,
    /// Whether the counters account for every copy.
    pub conserved: bool,
    /// Copies queued with bits the model flipped (`corrupt`, `ber`).
    pub corrupted: u64,
    /// Whether the direction is cut (`link down`): it carries nothing until `link up`.
    pub cut: bool,
    /// Copies delivered.
    pub delivered: u64,
    /// Bytes delivered.
    pub delivered_bytes: u64,
    /// `a-b` or `b-a`.
    pub dir: String,
    /// Copies dropped, by reason (every reason, zeros included).
    pub dropped: BTreeMap<String, u64>,
    /// Extra copies made by duplication.
    pub duplicates: u64,
    /// The release fidelity.
    pub fidelity: Fidelity,
    /// The node frames come from.
    pub from: String,
    /// Copies waiting for their release.
    pub in_flight: u64,
    /// Frames the kernel dropped before the engine read them; `None` where the I/O cannot tell.
    pub kernel_drops: Option<u64>,
    /// The link.
    pub link: String,
    /// Copies queued with their ECN field set to CE instead of being dropped (by an AQM, or
    /// netem's `ecn` loss).
    pub marked: u64,
    /// The netem parameters of the model this direction runs now (over its trace, if the link
    /// has one): the topology's, or those of the last `set` or scheduled change it was handed;
    /// `None` when a trace alone decides.
    pub netem: Option<String>,
    /// Frames received.
    pub received: u64,
    /// Bytes received.
    pub received_bytes: u64,
    /// Frames passed without a model decision by the resolution rule.
    pub resolution_passed: u64,
    /// The release thread that serves it (an [`EngineThread::index`]); `None` from an engine
    /// older than release threads.
    #[serde(default)]
    pub thread: Option<usize>,
    /// The node frames go to.
    pub to: String,
    /// Records a trace did not have ready (the frames passed undelayed).
    pub trace_underruns: u64,
    /// Sends the interface refused for a while (retried).
    pub tx_busy: u64,
    /// For a link between hosts: the underlay it crosses besides its model (absent on one
    /// machine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub underlay: Option<Underlay>,
}

/// The underlay a link between hosts crosses: its frames take the underlay's own delay on top
/// of the model's, so its round trip, measured when the part came up, is shown beside the link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Underlay {
    /// This part's host.
    pub host: String,
    /// The host at the link's other end.
    pub peer: String,
    /// The round trip between them across the underlay, ns (the median of a few TCP
    /// connection attempts to the peer's agent port); `None` when the peer did not answer.
    pub rtt_ns: Option<u64>,
}

impl Underlay {
    /// What segment `segment` of the part `state` crosses; `None` on one machine and for a
    /// segment held by this host alone.
    pub fn of(state: &rtemu_topo::state::State, segment: usize) -> Option<Underlay> {
        let host = &state.part.as_ref()?.host;
        let u = state.underlay_of(segment)?;
        Some(Underlay {
            host: host.clone(),
            peer: u.host.clone(),
            rtt_ns: u.rtt_ns,
        })
    }
}

/// `underlay h1↔h2 RTT 2.040 ms`, or why there is no figure.
impl std::fmt::Display for Underlay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "underlay {}↔{} RTT ", self.host, self.peer)?;
        match self.rtt_ns {
            Some(ns) => write!(f, "{:.3} ms", ns as f64 / 1e6),
            None => write!(f, "unknown ({} did not answer at up)", self.peer),
        }
    }
}

impl Direction {
    /// The copies dropped for any reason.
    pub fn dropped_total(&self) -> u64 {
        self.dropped.values().sum()
    }
}

/// How precisely one direction released its copies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Fidelity {
    /// Arrival lag: how long frames waited between the kernel's receive stamp and the engine.
    pub arrival_lag: Percentiles,
    /// Copies measured.
    pub count: u64,
    /// Copies whose send started before their intended time (always 0).
    pub early: u64,
    /// Copies released later than `late_after_ns`.
    pub late: u64,
    /// The late threshold, ns.
    pub late_after_ns: u64,
    /// Records lost because the fidelity ring was full.
    pub lost: u64,
    /// Release error: when the send returned − the intended time.
    pub released: Percentiles,
    /// The release error's distribution, coarsely.
    pub released_histogram: Histogram,
    /// Start error: when the send started − the intended time.
    pub started: Percentiles,
}

/// Percentiles of an error, ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Percentiles {
    /// Largest.
    pub max_ns: u64,
    /// Median.
    pub p50_ns: u64,
    /// 99.9th percentile (before `p99_ns`: keys sort by byte).
    pub p999_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
}

/// A coarse histogram of an error: counts between fixed, log-spaced edges.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Histogram {
    /// Copies per bucket, one more than `edges_ns`: `counts[0]` below `edges_ns[0]`,
    /// `counts[i]` from `edges_ns[i - 1]` up to (not including) `edges_ns[i]`, the last at or
    /// above the last edge. They sum to the fidelity's `count`.
    pub counts: Vec<u64>,
    /// The buckets' edges, ns, increasing (1-2-5 steps from 1 µs to 100 ms).
    pub edges_ns: Vec<u64>,
}

impl Histogram {
    /// The release-error histogram of an engine's summary.
    fn released(f: &rtemu_engine::fidelity::Summary) -> Histogram {
        Histogram {
            counts: f.released_buckets.to_vec(),
            edges_ns: rtemu_engine::fidelity::BUCKET_EDGES_NS.to_vec(),
        }
    }
}

impl From<rtemu_engine::fidelity::Percentiles> for Percentiles {
    fn from(p: rtemu_engine::fidelity::Percentiles) -> Percentiles {
        Percentiles {
            max_ns: p.max_ns,
            p50_ns: p.p50_ns,
            p999_ns: p.p999_ns,
            p99_ns: p.p99_ns,
        }
    }
}

impl From<&rtemu_engine::fidelity::Summary> for Fidelity {
    fn from(f: &rtemu_engine::fidelity::Summary) -> Fidelity {
        Fidelity {
            arrival_lag: f.arrival_lag.into(),
            count: f.count,
            early: f.early,
            late: f.late,
            late_after_ns: f.late_after_ns,
            lost: f.lost,
            released: f.released.into(),
            released_histogram: Histogram::released(f),
            started: f.started.into(),
        }
    }
}

/// The engine's last word (the answer to `stop`, and `fidelity.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(untagged)]
pub enum FinalReport {
    /// The engine stopped cleanly.
    Done(Done),
    /// The engine failed while stopping (its release thread ended with an error).
    Failed {
        /// Why.
        error: String,
        /// The lab.
        #[cfg_attr(feature = "openapi", schema(value_type = String))]
        lab: LabName,
    },
}

/// What a cleanly stopped engine did over its run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Done {
    /// CPU time the release threads used, ns.
    pub cpu_ns: u64,
    /// Each direction of each impaired link.
    pub directions: Vec<Direction>,
    /// The lab.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub lab: LabName,
    /// Each set-up step that was skipped, and why.
    pub notices: Vec<String>,
    /// The release threads, as they ended.
    #[serde(default)]
    pub threads: Vec<EngineThread>,
    /// Wall time the release loops ran, ns.
    pub wall_ns: u64,
}

impl FinalReport {
    /// The directions (none when the engine failed).
    pub fn directions(&self) -> &[Direction] {
        match self {
            FinalReport::Done(d) => &d.directions,
            FinalReport::Failed { .. } => &[],
        }
    }
}

/// `value` as indented JSON, as `stats --json` and `fidelity.json` show it.
pub fn pretty<T: Serialize>(value: &T) -> String {
    serde_json::to_string_pretty(value).expect("replies serialise")
}

/// Nanoseconds as microseconds with one decimal.
fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1e3)
}

/// Writes `report` to `path` as JSON, whole or not at all (`rtemu down --fidelity`).
pub fn save_final_report(report: &FinalReport, path: &std::path::Path) -> anyhow::Result<()> {
    rtemu_report::output::write(path, &[], format!("{}\n", pretty(report)).as_bytes())
}

/// Writes lab `lab`'s final `report` to `out` ([`write_final_report`]) and, when `fidelity`
/// names a file, saves it there ([`save_final_report`]). The saving's outcome is given back
/// rather than returned: whether the lab went down (everywhere) is said first, and a file that
/// could not be written must not hide it.
pub fn give_final_report(
    out: &mut impl Write,
    lab: &str,
    report: &FinalReport,
    fidelity: Option<&std::path::Path>,
) -> io::Result<anyhow::Result<()>> {
    write_final_report(out, lab, report)?;
    Ok(fidelity.map_or(Ok(()), |path| save_final_report(report, path)))
}

/// Writes lab `lab`'s final report as `rtemu down` shows it: a line saying whose it is, its
/// counters, then its release fidelity.
pub fn write_final_report(out: &mut impl Write, lab: &str, report: &FinalReport) -> io::Result<()> {
    writeln!(out, "engine of lab {lab}: final report")?;
    write_table(out, report.directions(), false)?;
    write_table(out, report.directions(), true)?;
    if let FinalReport::Done(done) = report {
        for t in &done.threads {
            writeln!(out, "{t}")?;
        }
    }
    Ok(())
}

/// Writes the directions of a stats or final report as a table: with `fidelity`, the
/// release-error percentiles and a legend; without, the counters (what `rtemu stats`, `down`
/// and `demo` print).
pub fn write_table(out: &mut impl Write, ds: &[Direction], fidelity: bool) -> io::Result<()> {
    if fidelity {
        writeln!(
            out,
            "{:<16} {:<20} {:>8} {:>9} {:>9} {:>9} {:>9} {:>6} {:>6} {:>10} {:>9} {:>9}",
            "link",
            "direction",
            "copies",
            "p50 µs",
            "p99 µs",
            "p99.9 µs",
            "max µs",
            "late",
            "early",
            "woke p50",
            "lag p99",
            "lag max"
        )?;
    } else {
        writeln!(
            out,
            "{:<16} {:<20} {:>9} {:>9} {:>6} {:>7} {:>7}  dropped",
            "link", "direction", "received", "delivered", "dups", "queued", "kernel"
        )?;
    }
    for d in ds {
        let way = format!("{} → {}", d.from, d.to);
        let link = &d.link;
        if fidelity {
            let f = &d.fidelity;
            let r = &f.released;
            writeln!(
                out,
                "{link:<16} {way:<20} {:>8} {:>9} {:>9} {:>9} {:>9} {:>6} {:>6} {:>10} {:>9} {:>9}",
                f.count,
                us(r.p50_ns),
                us(r.p99_ns),
                us(r.p999_ns),
                us(r.max_ns),
                f.late,
                f.early,
                us(f.started.p50_ns),
                us(f.arrival_lag.p99_ns),
                us(f.arrival_lag.max_ns),
            )?;
        } else {
            let mut drops: Vec<String> = d
                .dropped
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(|(k, n)| format!("{k} {n}"))
                .collect();
            if d.marked > 0 {
                drops.push(format!("(marked CE {}: delivered)", d.marked));
            }
            if d.trace_underruns > 0 {
                drops.push(format!(
                    "(trace under-runs {}: passed undelayed)",
                    d.trace_underruns
                ));
            }
            writeln!(
                out,
                "{link:<16} {way:<20} {:>9} {:>9} {:>6} {:>7} {:>7}  {}",
                d.received,
                d.delivered,
                d.duplicates,
                d.in_flight,
                d.kernel_drops
                    .map_or_else(|| "-".to_owned(), |n| n.to_string()),
                if drops.is_empty() {
                    "none".to_owned()
                } else {
                    drops.join(", ")
                }
            )?;
        }
    }
    if !fidelity {
        let mut shown = Vec::new();
        for d in ds {
            if let Some(u) = d.underlay.as_ref().filter(|_| !shown.contains(&&d.link)) {
                shown.push(&d.link);
                writeln!(
                    out,
                    "link {} crosses hosts: {u}, outside the model (its delay adds to it)",
                    d.link
                )?;
            }
        }
    }
    if fidelity {
        let late = ds
            .first()
            .map(|d| us(d.fidelity.late_after_ns))
            .unwrap_or_default();
        writeln!(
            out,
            "release error: when the send returned − the intended time (kernel arrival stamp + \
             model delay, µs); late: over {late} µs; early: sends started before the intended \
             time (always 0); woke: when the send started; lag: how long frames waited between \
             the kernel's receive stamp and the engine (µs)"
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn percentiles(base: u64) -> Percentiles {
        Percentiles {
            max_ns: base + 3,
            p50_ns: base,
            p999_ns: base + 2,
            p99_ns: base + 1,
        }
    }

    fn direction() -> Direction {
        Direction {
            buffers: Some(4096),
            conserved: true,
            corrupted: 2,
            cut: false,
            delivered: 9,
            delivered_bytes: 900,
            dir: "a-b".into(),
            dropped: [("loss".to_owned(), 1), ("queue".to_owned(), 0)].into(),
            duplicates: 0,
            fidelity: Fidelity {
                arrival_lag: percentiles(10),
                count: 9,
                early: 0,
                late: 1,
                late_after_ns: 100_000,
                lost: 0,
                released: percentiles(20),
                released_histogram: Histogram {
                    counts: vec![0, 8, 1],
                    edges_ns: vec![1_000, 2_000],
                },
                started: percentiles(30),
            },
            from: "a".into(),
            in_flight: 0,
            kernel_drops: None,
            link: "l".into(),
            marked: 0,
            netem: Some("delay 1ms".into()),
            received: 10,
            received_bytes: 1000,
            resolution_passed: 0,
            thread: Some(0),
            to: "b".into(),
            trace_underruns: 0,
            tx_busy: 0,
            underlay: None,
        }
    }

    fn thread() -> EngineThread {
        EngineThread {
            cpu: Some(1),
            cpu_ns: Some(9),
            index: 0,
            links: vec!["l".into()],
            margin_ns: 12_500,
            max_stall_ns: 1_500_000,
            policy: "SCHED_FIFO:40".into(),
            priority: Some(40),
            stalls: 1,
            stepped_down: 2,
            timer_slack_ns: Some(0),
        }
    }

    #[test]
    fn a_thread_says_what_it_asked_for_when_it_did_not_get_it() {
        let mut t = thread();
        t.policy = "SCHED_OTHER".into();
        t.cpu = None;
        t.stepped_down = 0;
        t.stalls = 0;
        assert_eq!(
            t.to_string(),
            "release thread 0 (not pinned), SCHED_OTHER (asked SCHED_FIFO:40), spin margin \
             12.5 µs: l"
        );
        t.priority = None;
        t.margin_ns = 0;
        assert_eq!(
            t.to_string(),
            "release thread 0 (not pinned), SCHED_OTHER: l"
        );
    }

    #[test]
    fn a_thread_of_many_links_names_eight_and_counts_the_rest() {
        let mut t = thread();
        t.links = (0..200).map(|i| format!("a{i}-b{i}")).collect();
        let line = t.to_string();
        assert!(
            line.ends_with(": a0-b0, a1-b1, a2-b2, a3-b3, a4-b4, a5-b5, a6-b6, a7-b7 and 192 more"),
            "{line}"
        );
        t.links.truncate(8);
        assert!(t.to_string().ends_with("a6-b6, a7-b7"), "{t}");
    }

    /// Serialises through a map too: the typed form must lay out as the map-built JSON did.
    fn same_as_map<T: Serialize>(value: &T) {
        let typed = serde_json::to_string_pretty(value).unwrap();
        let map = serde_json::to_string_pretty(&serde_json::to_value(value).unwrap()).unwrap();
        assert_eq!(typed, map);
    }

    #[test]
    fn replies_keep_the_sorted_layout_and_read_back() {
        let stats = Stats {
            directions: vec![direction()],
            io: "af-packet".into(),
            lab: LabName::new("t1").unwrap(),
            monotonic_ns: 11,
            pid: 7,
            process_cpu_ns: Some(5),
            threads: vec![thread()],
        };
        same_as_map(&stats);
        let text = pretty(&stats);
        assert_eq!(serde_json::from_str::<Stats>(&text).unwrap(), stats);
        assert_eq!(stats.directions[0].dropped_total(), 1);

        let done = FinalReport::Done(Done {
            cpu_ns: 1,
            directions: vec![direction()],
            lab: LabName::new("t1").unwrap(),
            notices: vec!["n".into()],
            threads: vec![thread()],
            wall_ns: 2,
        });
        same_as_map(&done);
        assert_eq!(
            serde_json::from_str::<FinalReport>(&pretty(&done)).unwrap(),
            done
        );

        let failed = FinalReport::Failed {
            error: "boom".into(),
            lab: LabName::new("t1").unwrap(),
        };
        assert_eq!(
            pretty(&failed),
            "{\n  \"error\": \"boom\",\n  \"lab\": \"t1\"\n}"
        );
        assert_eq!(
            serde_json::from_str::<FinalReport>(&pretty(&failed)).unwrap(),
            failed
        );
        assert!(failed.directions().is_empty());
        assert_eq!(serde_json::to_string(&Ack::OK).unwrap(), r#"{"ok":true}"#);
    }

    #[test]
    fn the_histogram_carries_the_engines_buckets_and_their_edges() {
        let mut h = rtemu_engine::fidelity::ErrorHistogram::new(100_000);
        for error_ns in [500, 1_500, 1_500, 40_000_000] {
            h.record(rtemu_engine::fidelity::Record {
                intended_ns: 0,
                started_ns: 0,
                actual_ns: error_ns,
                arrival_lag_ns: 0,
            });
        }
        let f = Fidelity::from(&h.summary(0));
        let hist = &f.released_histogram;
        assert_eq!(hist.edges_ns, rtemu_engine::fidelity::BUCKET_EDGES_NS);
        assert_eq!(hist.counts.len(), hist.edges_ns.len() + 1);
        assert_eq!(hist.counts.iter().sum::<u64>(), f.count);
        assert_eq!((hist.counts[0], hist.counts[1], hist.counts[14]), (1, 2, 1));
    }

    #[test]
    fn the_table_shows_nonzero_drops_and_the_fidelity_legend() {
        let mut d = direction();
        d.trace_underruns = 2;
        let mut out = Vec::new();
        write_table(&mut out, &[d.clone()], false).unwrap();
        let text = String::from_utf8(out).unwrap();
        let row = text.lines().nth(1).unwrap();
        assert!(row.starts_with("l                a → b"), "{row}");
        assert!(
            row.ends_with("  loss 1, (trace under-runs 2: passed undelayed)"),
            "{row}"
        );
        let mut out = Vec::new();
        write_table(&mut out, &[d], true).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains(" 0.0 "), "{text}");
        assert!(text.contains("late: over 100.0 µs"), "{text}");
    }

    #[test]
    fn a_link_between_hosts_shows_its_underlay_once_under_the_counters() {
        let mut ab = direction();
        ab.underlay = Some(Underlay {
            host: "h1".into(),
            peer: "h2".into(),
            rtt_ns: Some(2_040_400),
        });
        let mut ba = ab.clone();
        ba.dir = "b-a".into();
        let mut out = Vec::new();
        write_table(&mut out, &[ab.clone(), ba], false).unwrap();
        let text = String::from_utf8(out).unwrap();
        let line = "link l crosses hosts: underlay h1↔h2 RTT 2.040 ms, outside the model \
                    (its delay adds to it)\n";
        assert_eq!(text.matches(line).count(), 1, "{text}");
        let mut out = Vec::new();
        write_table(&mut out, &[ab.clone()], true).unwrap();
        assert!(!String::from_utf8(out).unwrap().contains("underlay"));
        ab.underlay.as_mut().unwrap().rtt_ns = None;
        assert_eq!(
            ab.underlay.unwrap().to_string(),
            "underlay h1↔h2 RTT unknown (h2 did not answer at up)"
        );
    }

    #[test]
    fn a_final_report_says_whose_it_is_then_both_tables() {
        let done = FinalReport::Done(Done {
            cpu_ns: 1,
            directions: vec![direction()],
            lab: LabName::new("t1").unwrap(),
            notices: Vec::new(),
            threads: vec![thread()],
            wall_ns: 2,
        });
        let mut out = Vec::new();
        write_final_report(&mut out, "t1", &done).unwrap();
        let mut tables = Vec::new();
        write_table(&mut tables, done.directions(), false).unwrap();
        write_table(&mut tables, done.directions(), true).unwrap();
        let mut expected = b"engine of lab t1: final report\n".to_vec();
        expected.extend(tables);
        expected.extend(
            b"release thread 0 on CPU 1, SCHED_FIFO:40, spin margin 12.5 \xc2\xb5s, stepped \
              down in 2 windows, 1 stalls (longest 1500.0 \xc2\xb5s): l\n",
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            String::from_utf8(expected).unwrap()
        );
    }

    #[test]
    fn a_final_report_is_shown_even_when_its_file_cannot_be_saved() {
        let failed = FinalReport::Failed {
            error: "boom".into(),
            lab: LabName::new("t1").unwrap(),
        };
        let dir = std::env::temp_dir().join(format!("rtemu-give-report-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let saved_to = dir.join("report.json");
        let mut out = Vec::new();
        let saved = give_final_report(&mut out, "t1", &failed, Some(&saved_to)).unwrap();
        let text = std::fs::read_to_string(&saved_to);
        let mut shown = Vec::new();
        let unsaved = give_final_report(&mut shown, "t1", &failed, Some(&dir.join("no/r.json")));
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(saved.is_ok());
        assert_eq!(text.unwrap(), format!("{}\n", pretty(&failed)));
        // Shown, and the saving's failure handed back for the caller to give after the rest.
        let unsaved = unsaved.unwrap();
        assert!(unsaved.is_err());
        assert_eq!(shown, out);
        assert!(String::from_utf8(out)
            .unwrap()
            .starts_with("engine of lab t1: final report\n"));
        // Without a file, nothing to save.
        assert!(give_final_report(&mut Vec::new(), "t1", &failed, None)
            .unwrap()
            .is_ok());
    }
}
