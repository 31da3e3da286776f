//! rtemu's fuzz targets: one function `fn(&[u8])` per parser that reads what a user (or a
//! hostile file) hands rtemu.
//!
//! Each target is defined here once. cargo-fuzz runs it from `fuzz/fuzz_targets/<name>.rs`
//! (nightly, see `fuzz/README.md`); on stable, `crates/rtemu/tests/fuzz_corpus.rs` includes
//! this file and runs every file of `fuzz/corpus/<name>/` (and deterministic mutations of it)
//! through the target, so CI keeps the corpus passing. A target panics when a property fails:
//!
//! * every parser: no panic, no hang, whatever the bytes;
//! * every error that can name a position names one inside the input (a line and column on a
//!   line that exists, a byte offset before the end);
//! * where the parsed value has a printed form, it parses back to the same value (netem, flow
//!   patterns, control requests, action traces written out as text);
//! * readers that take a buffer size give the same records and the same error with a buffer
//!   of 1 byte, 7 bytes or 64 KiB;
//! * what `rtemu serve` reads from a peer (HTTP requests, their bodies and queries, an agent's
//!   part requests) is answered with a 4xx and a short error, never a 5xx, never the input
//!   echoed whole, and without the token nothing but the page's files.
#![forbid(unsafe_code)]

use std::io::Cursor;
use std::path::Path;

use rtemu_engine::control::{self, Request};
use rtemu_model::link::NoTables;
use rtemu_model::{netem, FlowKey, LinkModel, Model, PacketMeta};
use rtemu_sim::capture::{CaptureError, CaptureReader, MAX_FRAME_LEN};
use rtemu_topo::topology::SegmentKind;
use rtemu_topo::Topology;
use rtemu_trace::format::Content;
use rtemu_trace::series::{self, Interpolation};
use rtemu_trace::{
    flow::FiveTuple, mahimahi, Action, ErrorKind, FlowPattern, Format, RecordReader, TraceError,
};

/// A fuzz target: takes any bytes, panics when a property fails.
pub type Target = fn(&[u8]);

/// Every target by name: the name of its cargo-fuzz binary and of its corpus directory.
pub const TARGETS: &[(&str, Target)] = &[
    ("netem", netem),
    ("capture", capture),
    ("action_trace", action_trace),
    ("series", series),
    ("mahimahi", mahimahi),
    ("flow_pattern", flow_pattern),
    ("topology", topology),
    ("control", control),
    ("http", http),
    ("api", api),
    ("part", part),
];

/// Packets a parsed netem model decides in [`netem`]: enough to pass every stage's state.
const MODEL_PACKETS: u64 = 64;

/// The netem parser: a parsed configuration prints to text that parses back to it; the model
/// built from it never delivers a copy before the packet arrived; an error's column lies in
/// the input.
pub fn netem(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let cfg = match netem::parse(&text) {
        Ok(cfg) => cfg,
        Err(e) => {
            assert_column(e.column as u64, &text, &e.to_string());
            return;
        }
    };
    let printed = cfg.to_string();
    let again = netem::parse(&printed)
        .unwrap_or_else(|e| panic!("{text:?} printed as {printed:?} does not parse back: {e}"));
    // Exactly, derived values included (`loss gemodel 0.1%` derives r = 1 − p =
    // 0.9990000000000001, which must print as itself: corpus/netem/gemodel-derived-r).
    assert_eq!(
        again, cfg,
        "{text:?} printed as {printed:?} parses back to another model"
    );
    // Tables by name would read files; the built-in distributions are what is fuzzed here.
    let Ok(mut model) = LinkModel::new(&cfg, &NoTables, 1, 1) else {
        return;
    };
    let departures = |model: &mut LinkModel, now: u64| {
        while let Some(dep) = model.depart_by(now) {
            if let rtemu_model::Outcome::Delivered(d) = dep.outcome {
                assert!(
                    d.at_ns >= dep.arrival_ns,
                    "{text:?}: packet {} delivered early",
                    dep.seq
                );
            }
        }
    };
    for seq in 0..MODEL_PACKETS {
        let pkt = PacketMeta {
            len: 64 + (seq as u32 * 97) % 1450,
            flow: FlowKey::default(),
            arrival_ns: seq * 100_000,
            seq,
            ecn: rtemu_model::Ecn::from_bits(seq as u8),
        };
        departures(&mut model, pkt.arrival_ns);
        let fate = model.decide(&pkt);
        for d in fate.delivered.as_slice() {
            assert!(
                d.at_ns >= pkt.arrival_ns,
                "{text:?}: packet {seq} arriving at {} ns delivered early at {} ns",
                pkt.arrival_ns,
                d.at_ns
            );
        }
    }
    departures(&mut model, u64::MAX);
}

/// What a capture reader gave: the frames (time, bytes, original length, offset after it) and
/// how it ended.
type CaptureRun = (Vec<(u64, Vec<u8>, u32, u64)>, Option<String>);

fn read_capture(data: &[u8], capacity: usize) -> CaptureRun {
    let mut frames = Vec::new();
    let mut reader = match CaptureReader::with_capacity(data, capacity) {
        Ok(r) => r,
        Err(e) => {
            assert_capture_error(&e, data);
            return (frames, Some(e.to_string()));
        }
    };
    // A reader opened without `Options::interfaceless` always has one.
    let link = reader.link_type().unwrap_or_default();
    let mut last = reader.offset();
    loop {
        match reader.next_frame() {
            Ok(Some(f)) => {
                assert!(f.data.len() as u64 <= u64::from(MAX_FRAME_LEN));
                assert!(f.orig_len as usize >= f.data.len());
                // Looked at as the simulator does, to find the flow it belongs to.
                let _ = rtemu_model::wire::flow_key(link, f.data);
                let frame = (f.ts_ns, f.data.to_vec(), f.orig_len);
                let offset = reader.offset();
                assert!(offset > last, "a frame consumed no input at byte {last}");
                assert!(offset <= data.len() as u64);
                last = offset;
                frames.push((frame.0, frame.1, frame.2, offset));
            }
            Ok(None) => return (frames, None),
            Err(e) => {
                assert_capture_error(&e, data);
                return (frames, Some(e.to_string()));
            }
        }
    }
}

fn assert_capture_error(e: &CaptureError, data: &[u8]) {
    let offset = e
        .offset()
        .unwrap_or_else(|| panic!("a capture error without an offset: {e}"));
    assert!(
        offset <= data.len() as u64,
        "error at byte {offset} of {} bytes: {e}",
        data.len()
    );
}

/// The pcap and pcapng reader: frames are bounded and each consumes input; errors name a byte
/// offset inside the input; the same frames and error whatever the reader's buffer size.
pub fn capture(data: &[u8]) {
    let whole = read_capture(data, 1 << 16);
    for capacity in [1, 7] {
        assert_eq!(
            read_capture(data, capacity),
            whole,
            "reading with a {capacity}-byte buffer differs"
        );
    }
}

/// Checks that `e` names a position inside `data`.
fn assert_trace_error(e: &TraceError, data: &[u8]) {
    match e.kind() {
        ErrorKind::ReservedAction { offset, .. } => {
            assert!(*offset + 4 <= data.len() as u64, "{e}");
        }
        ErrorKind::TruncatedWord { offset, len, .. } => {
            assert_eq!(*offset + *len as u64, data.len() as u64, "{e}");
        }
        ErrorKind::Syntax { line, column, .. } => assert_line_column(*line, *column, data, e),
        // Header errors name the field and its byte in the fixed header, or the part the file
        // ends in; an empty trace has no position to name.
        ErrorKind::Header(_) | ErrorKind::Empty => {}
        _ => panic!("a reader of bytes in memory failed without a position: {e}"),
    }
}

fn assert_line_column(line: u64, column: u64, data: &[u8], e: &dyn std::fmt::Display) {
    let lines: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
    assert!(
        line >= 1 && line as usize <= lines.len(),
        "line {line} of {}: {e}",
        lines.len()
    );
    assert_column(
        column,
        &String::from_utf8_lossy(lines[line as usize - 1]),
        e,
    );
}

fn assert_column(column: u64, line: &str, e: &dyn std::fmt::Display) {
    let chars = line.chars().count() as u64;
    assert!(
        column >= 1 && column <= chars + 1,
        "column {column} of a {chars}-character line: {e}"
    );
}

/// All records of an action trace in `format`, read `buffer` bytes at a time.
fn read_actions(data: &[u8], format: Format, buffer: usize) -> (Vec<Action>, Option<String>) {
    let mut out = Vec::new();
    let mut reader = match RecordReader::new(data, format, buffer) {
        Ok(r) => r,
        Err(e) => {
            assert_trace_error(&e, data);
            return (out, Some(e.to_string()));
        }
    };
    loop {
        match reader.read_block(&mut out, 64) {
            Ok(0) => return (out, None),
            Ok(_) => {}
            Err(e) => {
                assert_trace_error(&e, data);
                return (out, Some(e.to_string()));
            }
        }
    }
}

/// The action-trace readers (raw `.rpl`, framed `.rplx`, text) and the sniffer that tells trace
/// kinds apart: positioned errors, the same result for every buffer size, and records that
/// write out as text and read back the same.
pub fn action_trace(data: &[u8]) {
    let _ = Format::detect(Path::new("fuzz"), data);
    let _ = Content::sniff(Path::new("fuzz"), data, true);
    for format in [Format::Raw, Format::Framed, Format::Text] {
        let whole = read_actions(data, format, 1 << 16);
        for buffer in [1, 7] {
            assert_eq!(
                read_actions(data, format, buffer),
                whole,
                "{format:?} with a {buffer}-byte buffer differs"
            );
        }
        let mut text = Vec::new();
        for &a in &whole.0 {
            rtemu_trace::text::write_action(&mut text, a).expect("writing to memory");
        }
        let (again, err) = read_actions(&text, Format::Text, 1 << 16);
        assert_eq!(
            err, None,
            "{format:?} records written as text do not read back"
        );
        assert_eq!(
            again, whole.0,
            "{format:?} records written as text read back else"
        );
    }
}

/// The delay/loss series reader: positioned errors, times that never go back, and lookups at
/// any time between samples that never panic.
pub fn series(data: &[u8]) {
    let samples = match series::read_all(Cursor::new(data)) {
        Ok(s) => s,
        Err(e) => {
            assert_trace_error(&e, data);
            return;
        }
    };
    for (i, &s) in samples.iter().enumerate() {
        let next = samples.get(i + 1).copied();
        if let Some(n) = next {
            assert!(n.time_ns >= s.time_ns, "sample {} goes back in time", i + 1);
        }
        let end = next.map_or(s.time_ns.saturating_add(1), |n| n.time_ns);
        for t in [s.time_ns, s.time_ns / 2 + end / 2, end] {
            for how in [Interpolation::Step, Interpolation::Linear] {
                let _ = series::interpolate(s, next, t, how);
            }
        }
    }
}

/// The Mahimahi delivery-opportunity reader: positioned errors, times that never go back and
/// a positive period.
pub fn mahimahi(data: &[u8]) {
    match mahimahi::read_all(Cursor::new(data)) {
        Ok(times) => {
            assert!(times.windows(2).all(|w| w[0] <= w[1]), "times go back");
            assert!(times.last().is_some_and(|&t| t > 0), "no positive period");
        }
        Err(e) => assert_trace_error(&e, data),
    }
}

/// Flow patterns (`--flow-trace`, framed trace headers): the printed form parses back to the
/// same pattern; an error's column lies in the input.
pub fn flow_pattern(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    match text.parse::<FlowPattern>() {
        Ok(p) => {
            let printed = p.to_string();
            assert_eq!(
                printed.parse::<FlowPattern>().ok(),
                Some(p),
                "{text:?} printed as {printed:?} does not parse back the same"
            );
            let any = FiveTuple {
                src: std::net::Ipv4Addr::LOCALHOST.into(),
                dst: std::net::Ipv6Addr::LOCALHOST.into(),
                sport: 0,
                dport: 65_535,
                proto: 17,
            };
            let _ = p.matches(&any);
        }
        Err(e) => assert_column(e.column as u64, &text, &e),
    }
}

/// The topology loader: an error's line and column lie in the input; a valid topology's links
/// name nodes that exist, and each netem text it holds reads as the configuration beside it.
pub fn topology(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    match Topology::parse("fuzz.toml", &text) {
        Ok(t) => {
            for seg in &t.segments {
                for m in &seg.members {
                    assert!(m.node < t.nodes.len(), "segment {} names no node", seg.name);
                }
                if let SegmentKind::Link {
                    impairment: Some(imp),
                } = &seg.kind
                {
                    for backwards in [false, true] {
                        if let Some(n) = imp.netem_for(backwards) {
                            let text = n.text();
                            let cfg = netem::parse(text).unwrap_or_else(|e| {
                                panic!("link {} holds netem {text:?} that fails: {e}", seg.name)
                            });
                            assert_eq!(&cfg, n.config(), "link {} netem {text:?}", seg.name);
                        }
                    }
                }
            }
        }
        Err(e) => assert_line_column(e.line as u64, e.column as u64, text.as_bytes(), &e),
    }
}

/// The engine's control socket: a request line is bounded and cut at its line end, and a
/// request prints to a line that parses back to it. (Which link and model a request names is
/// checked by the engine process in the `rtemu` binary, against its lab.)
pub fn control(data: &[u8]) {
    let Ok(text) = control::read_request(data) else {
        return;
    };
    let lines = text.lines().count();
    assert!(
        lines <= 1 + control::MAX_BATCH,
        "a request of {lines} lines"
    );
    for line in text.split_inclusive('\n') {
        assert!(
            line.len() as u64 <= control::MAX_REQUEST,
            "a request line of {} bytes",
            line.len()
        );
    }
    if let Ok(req) = text.trim_end().parse::<Request>() {
        let printed = req.to_string();
        // Only a batch is more than one line: its header and one line per change.
        match &req {
            Request::Batch(changes) => assert_eq!(printed.lines().count(), 1 + changes.len()),
            _ => assert!(!printed.contains('\n')),
        }
        assert_eq!(
            printed.parse::<Request>().ok(),
            Some(req),
            "{text:?} printed as {printed:?} does not parse back the same"
        );
    }
}

/// The longest error message a request may get, however long the request: values are quoted
/// short (`rtemu_sys::terminal::quoted`), never echoed whole.
const MAX_ERROR: usize = 1024;

/// How long one fuzz input's connection may take: hyper reads what is there and ends at its
/// end, so anything near this is a hang.
const HANG: std::time::Duration = std::time::Duration::from_secs(5);

/// What the server answers any request that fails: a 4xx (never a 5xx: the peer's bytes
/// cannot break the server) with a short message.
fn assert_api_error(e: &rtemu_serve::error::ApiError, input: &[u8]) {
    assert!(
        e.status.is_client_error(),
        "{} for {} input bytes: {}",
        e.status,
        input.len(),
        e.message
    );
    assert!(
        !e.message.is_empty() && e.message.len() <= MAX_ERROR,
        "a {}-byte error for {} input bytes: {:?}",
        e.message.len(),
        input.len(),
        e.message
            .get(..MAX_ERROR.min(e.message.len()))
            .unwrap_or("")
    );
}

/// A server's TCP routes with a token of its own, which no input can hold, on a runtime; the
/// sender keeps the server from stopping.
struct HttpServer {
    runtime: tokio::runtime::Runtime,
    router: axum::Router,
    _running: tokio::sync::watch::Sender<bool>,
}

thread_local! {
    static HTTP: HttpServer = {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let (running, stopped) = tokio::sync::watch::channel(false);
        let token = rtemu_serve::listen::new_token().expect("a token");
        let router = rtemu_serve::tcp_router(rtemu_serve::routes::App::new(stopped), &token);
        HttpServer { runtime, router, _running: running }
    };
}

/// The bytes a TCP connection of `rtemu serve` answers `data` with (the peer then closes its
/// side), served as the server serves them: hyper's HTTP/1.1 with the server's settings, the
/// token check, the routes.
fn serve_http(data: &[u8]) -> Vec<u8> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    HTTP.with(|server| {
        server.runtime.block_on(async {
            let (client, io) = tokio::io::duplex(1 << 16);
            let connection = rtemu_serve::connections::http(io, server.router.clone());
            let (mut from, mut to) = tokio::io::split(client);
            // The server may close before it read everything: that ends the writing.
            let write = async move {
                let _ = to.write_all(data).await;
                let _ = to.shutdown().await;
            };
            let read = async move {
                let mut out = Vec::new();
                let _ = from.read_to_end(&mut out).await;
                out
            };
            let all = async { tokio::join!(connection, write, read).2 };
            tokio::time::timeout(HANG, all)
                .await
                .unwrap_or_else(|_| panic!("the connection did not end within {HANG:?}"))
        })
    })
}

/// The requests `rtemu serve` reads on TCP, as bytes on the wire (one connection, any number
/// of requests), served by the server's own hyper settings, token check and routes with a
/// token the input cannot hold: every answer is a well-formed HTTP response; none is a
/// 5xx; every 2xx is one of the page's files (with their content security policy), so no
/// request reaches the API without the token; every error body is short and, when JSON,
/// `{"error": TEXT}`.
pub fn http(data: &[u8]) {
    let out = serve_http(data);
    let mut rest = &out[..];
    while !rest.is_empty() {
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut response = httparse::Response::new(&mut headers);
        let head = match response.parse(rest) {
            Ok(httparse::Status::Complete(n)) => n,
            other => panic!(
                "not an HTTP response ({other:?}): {:?}",
                String::from_utf8_lossy(&rest[..rest.len().min(200)])
            ),
        };
        let status = response.code.expect("a complete head has a status");
        // HTTP/1.0 is answered in 1.0.
        assert!(response.version.is_some(), "an answer without a version");
        let header = |name: &str| {
            response
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case(name))
                .map(|h| String::from_utf8_lossy(h.value).into_owned())
        };
        assert!(status < 500, "{status} for {} input bytes", data.len());
        let content_type = header("content-type").unwrap_or_default();
        if (200..300).contains(&status) {
            assert_eq!(
                header("content-security-policy").as_deref(),
                Some(rtemu_serve::web::CSP),
                "a {status} ({content_type}) that is not one of the page's files"
            );
        }
        rest = &rest[head..];
        // A HEAD request's answer has a length but no body: the next answer, or the end,
        // follows at once.
        let bodiless = rest.is_empty() || rest.starts_with(b"HTTP/1.");
        let length = match header("content-length") {
            Some(_) if bodiless => 0,
            Some(n) => n.parse::<usize>().expect("a length"),
            None => {
                assert!(
                    header("transfer-encoding").is_none(),
                    "a streamed answer ({status})"
                );
                rest.len()
            }
        };
        assert!(
            length <= rest.len(),
            "an answer cut short: {length} bytes announced"
        );
        let body = &rest[..length];
        rest = &rest[length..];
        if status >= 400 {
            assert!(
                body.len() <= MAX_ERROR,
                "a {}-byte {status} for {} input bytes",
                body.len(),
                data.len()
            );
            if content_type.starts_with("application/json") && !bodiless {
                let error: rtemu_api::body::ErrorBody = serde_json::from_slice(body)
                    .unwrap_or_else(|e| panic!("a {status} whose body is not an error ({e})"));
                assert!(!error.error.is_empty());
            }
        }
    }
}

/// The bodies and queries of the API's requests, read and checked as the handlers do before
/// they touch a lab: the first byte picks the request (set, schedule, exec, up, a stats
/// stream's query, a capture's, a logs request's), the rest is its JSON body or query string.
/// Whatever is refused is refused with a 4xx and a short message.
pub fn api(data: &[u8]) {
    use rtemu_api::body::{ExecRequest, ScheduleRequest, SetRequest, UpRequest};
    use rtemu_serve::routes::{json_body, logs_query, query_pairs, stream_query};
    use rtemu_serve::{capture, ctl, exec};
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let query = || query_pairs(Some(String::from_utf8_lossy(rest).into_owned()));
    let result = match which % 7 {
        0 => json_body::<SetRequest>(rest)
            .and_then(|r| ctl::parse_netem("netem", &r.netem).map(drop)),
        1 => json_body::<ScheduleRequest>(rest).and_then(|r| {
            let steps = ctl::schedule_steps(&r)?;
            assert_eq!(steps.len(), r.changes.len(), "a change lost");
            Ok(())
        }),
        2 => json_body::<ExecRequest>(rest).and_then(|r| {
            let timeout = exec::check(&r)?;
            assert!(!timeout.is_zero() && !r.argv.is_empty());
            Ok(())
        }),
        3 => json_body::<UpRequest>(rest).and_then(|r| {
            let (topo, name) = ctl::check_up(&r)?;
            assert!(
                r.topology.is_some() != r.file.is_some(),
                "an up request with {} of topology and file accepted",
                if r.topology.is_some() {
                    "both"
                } else {
                    "neither"
                }
            );
            assert_eq!(
                topo.lab,
                name.to_string(),
                "the lab runs under another name"
            );
            if let Some(asked) = &r.name {
                assert_eq!(
                    &topo.lab, asked,
                    "the lab runs under another name than asked"
                );
            }
            Ok(())
        }),
        4 => stream_query(&query()).map(|(interval, _)| {
            assert!(
                (rtemu_serve::routes::MIN_INTERVAL..=rtemu_serve::routes::MAX_INTERVAL)
                    .contains(&interval)
            );
        }),
        5 => capture::parse(&query()).map(|r| {
            assert!(
                r.count.is_some() || r.duration.is_some(),
                "a capture without an end"
            );
        }),
        _ => logs_query(&query()).map(drop),
    };
    if let Err(e) = result {
        assert_api_error(&e, rest);
    }
}

/// An agent's part request (`POST /v1/parts`), read and checked as the agent does before it
/// makes anything ([`rtemu_serve::ctl::check_part`]: the topology, with the models and traces
/// it names, the lab name, the host, the VNIs): refused with a 4xx and a short message, or a
/// topology in which the request's host is one of the file's hosts.
pub fn part(data: &[u8]) {
    use rtemu_api::body::PartRequest;
    let req = match rtemu_serve::routes::json_body::<PartRequest>(data) {
        Ok(req) => req,
        Err(e) => return assert_api_error(&e, data),
    };
    match rtemu_serve::ctl::check_part(&req) {
        Ok(topo) => {
            assert!(
                topo.hosts.iter().any(|h| h.name == req.host),
                "a part for host {:?}, not among the file's",
                req.host
            );
            if let Some(name) = &req.name {
                assert_eq!(&topo.lab, name, "the part runs under another name");
            }
        }
        Err(e) => assert_api_error(&e, data),
    }
}
