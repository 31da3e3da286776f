//! `rtemu serve` as a client drives it: a lab with an impaired link brought up from TOML sent
//! in the request, a command run in a node, the link changed, cut, joined and scheduled while
//! it carries traffic, stats as a snapshot and as Server-Sent Events, a capture as pcapng, a
//! dead engine told as 503, the lab's view naming its engine's release threads, and `down`
//! returning the engine's report and leaving nothing.
//!
//! Needs root. Without it the test prints why and passes, unless `RTEMU_REQUIRE_ROOT=1` (CI)
//! makes it fail. The server and the lab are removed by guards even when an assertion fails.

// Labs come up through the API; of the shared helpers this uses only these.
#[allow(dead_code)]
mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{root_or_skip, rtemu};
use rtemu_api::body::{DownReply, StatsReply};
use rtemu_api::client::{request, Reply, Target};
use rtemu_testutil::lab_namespaces;
use serde_json::{json, Value};

/// `rtemu serve` on a socket and token file in a private directory; stopped with SIGTERM at
/// drop.
struct Serve {
    child: Child,
    dir: PathBuf,
}

impl Serve {
    fn start(tag: &str) -> Serve {
        Serve::start_with(tag, &[], Stdio::inherit())
    }

    /// [`Serve::start`] with `extra` arguments (`{dir}` standing for its directory) and
    /// its stderr to `stderr`.
    fn start_with(tag: &str, extra: &[&str], stderr: Stdio) -> Serve {
        let dir = std::env::temp_dir().join(format!("rtemu-serve-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
            .create(&dir)
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_rtemu"))
            .args(["serve", "--socket"])
            .arg(dir.join("api.sock"))
            .args(["--listen", "127.0.0.1:0", "--token-file"])
            .arg(dir.join("api.token"))
            .args(
                extra
                    .iter()
                    .map(|a| a.replace("{dir}", &dir.display().to_string())),
            )
            .stdin(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("rtemu serve runs");
        let serve = Serve { child, dir };
        let started = Instant::now();
        while std::os::unix::net::UnixStream::connect(serve.socket()).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "rtemu serve did not listen within 10 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        serve
    }

    fn socket(&self) -> PathBuf {
        self.dir.join("api.sock")
    }

    /// Sends SIGTERM and waits (at most 10 s) for the server to exit; whether it exited well.
    fn terminate(&mut self) -> bool {
        // SAFETY: kill(2) on the server's own pid; it is not reaped yet, so the pid is its.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        false
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.terminate();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Takes the lab down at drop, however the test ends.
struct LabGuard(String);

impl Drop for LabGuard {
    fn drop(&mut self) {
        let _ = rtemu(&["down", &self.0]);
    }
}

const WAIT: Duration = Duration::from_secs(30);

/// A lab directory planted in the state root with a state file that is not JSON; removed at
/// drop.
struct Planted {
    lab: String,
    dir: PathBuf,
}

impl Planted {
    fn new(lab: &str) -> Planted {
        let dir = Path::new(rtemu_topo::state::STATE_ROOT).join(lab);
        std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
            .create(&dir)
            .unwrap();
        let planted = Planted {
            lab: lab.to_owned(),
            dir,
        };
        std::fs::write(planted.dir.join("state.json"), "{").unwrap();
        planted
    }
}

impl Drop for Planted {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn call(t: &Target, method: &str, path: &str, body: Option<Value>) -> Reply {
    let body = body.map(|b| b.to_string());
    request(
        t,
        method,
        path,
        &[],
        body.as_deref().map(str::as_bytes),
        WAIT,
    )
    .unwrap()
}

fn ok(reply: Reply) -> Reply {
    assert!(
        (200..300).contains(&reply.status),
        "{}: {}",
        reply.status,
        reply.text()
    );
    reply
}

/// The minimum round trip of `ping -c COUNT` from `node` to `to`, ms; `None` when none came back.
fn ping_min_ms(t: &Target, lab: &str, node: &str, to: &str, count: u32) -> Option<f64> {
    let argv = json!([
        "ping",
        "-q",
        "-c",
        count.to_string(),
        "-i",
        "0.2",
        "-W",
        "1",
        to
    ]);
    let out: Value = ok(call(
        t,
        "POST",
        &format!("/v1/labs/{lab}/nodes/{node}/exec"),
        Some(json!({ "argv": argv, "timeout": 20 })),
    ))
    .json()
    .unwrap();
    let stdout = out["stdout"].as_str().unwrap();
    // "rtt min/avg/max/mdev = 10.1/10.2/10.4/0.1 ms"
    let line = stdout.lines().find(|l| l.contains("min/avg/max"))?;
    line.split('=')
        .nth(1)?
        .trim()
        .split('/')
        .next()?
        .parse()
        .ok()
}

/// What `rtemu serve --tls-dir` with `extra` arguments printed, its stderr not a terminal
/// (checked to hold the fingerprint of the certificate it made), and the token it drew.
fn serve_tls_printing(tag: &str, extra: &[&str]) -> (String, String) {
    let mut args = vec!["--tls-dir", "{dir}/tls"];
    args.extend_from_slice(extra);
    let mut serve = Serve::start_with(tag, &args, Stdio::piped());
    // The socket listens a moment before the token and the certificate are written.
    let started = Instant::now();
    while !serve.dir.join("tls/agent.crt").exists() || !serve.dir.join("api.token").exists() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no token or certificate"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Then it says where it listens and catches SIGTERM.
    std::thread::sleep(Duration::from_millis(500));
    let token = std::fs::read_to_string(serve.dir.join("api.token")).unwrap();
    let token = token.trim().to_owned();
    let cert = rtemu_serve::tls::Source::Files {
        cert: serve.dir.join("tls/agent.crt"),
        key: serve.dir.join("tls/agent.key"),
    };
    let any: std::net::SocketAddr = "127.0.0.1:0".parse().unwrap();
    let fingerprint = rtemu_serve::tls::AgentCert::load(&cert, any)
        .unwrap()
        .fingerprint();
    assert!(serve.terminate());
    let mut err = String::new();
    std::io::Read::read_to_string(&mut serve.child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(
        err.contains(&format!(
            "TLS certificate SHA-256 fingerprint {fingerprint}"
        )),
        "{err}"
    );
    (err, token)
}

#[test]
fn the_drawn_token_is_printed_only_on_purpose_when_stderr_is_not_a_terminal() {
    if !root_or_skip("the_drawn_token_is_printed_only_on_purpose") {
        return;
    }
    let (err, token) = serve_tls_printing("quiet", &[]);
    assert!(!err.contains(&token), "the token went to a log: {err}");
    assert!(err.contains("(--print-url prints it)"), "{err}");
    let (err, token) = serve_tls_printing("loud", &["--print-url"]);
    assert!(
        err.contains("rtemu serve: web view at https://127.0.0.1:"),
        "{err}"
    );
    assert!(err.contains(&format!("#token={token}")), "{err}");
}

/// `GET /v1/labs/{lab}` with `If-None-Match: "<held>"`.
fn get_unless(t: &Target, lab: &str, held: &str) -> Reply {
    let tag = format!("\"{held}\"");
    let headers = [("If-None-Match", tag.as_str())];
    request(t, "GET", &format!("/v1/labs/{lab}"), &headers, None, WAIT).unwrap()
}

/// The lab list's entry of lab `lab`.
fn listed(t: &Target, lab: &str) -> Value {
    let labs: Vec<Value> = ok(call(t, "GET", "/v1/labs", None)).json().unwrap();
    labs.into_iter()
        .find(|l| l["name"] == lab)
        .unwrap_or_else(|| panic!("lab {lab} is not listed"))
}

/// The lab the topology `topo` (TOML) makes, brought up through the API, as `POST` answers.
fn up_inline(t: &Target, topo: &str) -> Value {
    ok(call(
        t,
        "POST",
        "/v1/labs",
        Some(json!({ "topology": topo })),
    ))
    .json()
    .unwrap()
}

/// The stats of lab `lab`'s engine.
fn engine_stats(t: &Target, lab: &str) -> rtemu_control::message::Stats {
    let path = format!("/v1/labs/{lab}/stats");
    match ok(call(t, "GET", &path, None)).json().unwrap() {
        StatsReply::Engine(stats) => stats,
        _ => panic!("a lab with an impaired link has an engine"),
    }
}

#[test]
fn the_lab_list_counts_and_a_lab_is_sent_again_only_when_it_changed() {
    if !root_or_skip("the_lab_list_counts_and_a_lab_is_sent_again_only_when_it_changed") {
        return;
    }
    let lab = format!("sr{}", std::process::id() % 100_000);
    let _guard = LabGuard(lab.clone());
    let serve = Serve::start("revision");
    let t = Target::Unix(serve.socket());
    let topo = format!(
        "lab = \"{lab}\"\n[nodes.a]\n[nodes.b]\n[nodes.c]\n\
         [[links]]\nname = \"ab\"\nendpoints = [\"a\", \"b\"]\nnetem = \"delay 1ms\"\n\
         [[lans]]\nname = \"office\"\nmembers = [\"b\", \"c\"]\n"
    );
    let up: Value = up_inline(&t, &topo);

    // The list counts what the lab has, and lists none of it.
    let entry = listed(&t, &lab);
    let counts = ["nodes", "links", "lans", "externals", "detached"].map(|k| &entry[k]);
    assert_eq!(
        counts,
        [&json!(3), &json!(1), &json!(1), &json!(0), &json!(0)]
    );
    assert_eq!(entry["status"], "up");
    let revision = entry["revision"].as_str().unwrap().to_owned();
    assert_eq!(revision.len(), 32, "{revision}");
    assert_eq!(up["revision"], revision.as_str());

    // Whole, with its revision as its ETag; asked again at that revision, a 304 and no body.
    let whole = ok(call(&t, "GET", &format!("/v1/labs/{lab}"), None));
    assert_eq!(
        whole.header("etag"),
        Some(format!("\"{revision}\"").as_str())
    );
    let body: Value = whole.json().unwrap();
    assert_eq!(body["revision"], revision.as_str());
    assert_eq!(body["nodes"].as_array().map(Vec::len), Some(3));
    let held = get_unless(&t, &lab, &revision);
    assert_eq!(held.status, 304, "{}", held.text());
    assert!(held.body.is_empty());
    assert_eq!(held.header("etag"), whole.header("etag"));
    assert_eq!(get_unless(&t, &lab, "0123").status, 200);

    // A link's new model is not the lab's: the lab's view (the topology's models) is the
    // same, the stats say what runs.
    let set = format!("/v1/labs/{lab}/links/ab/set");
    ok(call(&t, "POST", &set, Some(json!({"netem": "delay 7ms"}))));
    assert_eq!(listed(&t, &lab)["revision"], revision.as_str());
    assert_eq!(get_unless(&t, &lab, &revision).status, 304);
    let stats: Value = ok(call(&t, "GET", &format!("/v1/labs/{lab}/stats"), None))
        .json()
        .unwrap();
    assert_eq!(stats["directions"][0]["netem"], "delay 7ms", "{stats}");

    // A process started in it changes the lab: a new revision, and the lab sent whole.
    let detach = rtemu(&["exec", "--lab", &lab, "--detach", "a", "--", "sleep", "60"]);
    assert!(detach.status.success(), "{detach:?}");
    let entry = listed(&t, &lab);
    assert_eq!(entry["detached"], 1);
    let detached = entry["revision"].as_str().unwrap().to_owned();
    assert_ne!(detached, revision);
    let fresh = get_unless(&t, &lab, &revision);
    assert_eq!(fresh.status, 200);
    let body: Value = fresh.json().unwrap();
    assert_eq!(body["detached"][0]["command"], json!(["sleep", "60"]));
    assert_eq!(body["revision"], detached.as_str());

    // Brought up again in its place: a new revision, though its topology is the same.
    ok(call(
        &t,
        "POST",
        "/v1/labs",
        Some(json!({ "topology": &topo, "replace": true })),
    ));
    let replaced = listed(&t, &lab)["revision"].as_str().unwrap().to_owned();
    assert!(replaced != revision && replaced != detached, "{replaced}");
    assert_eq!(get_unless(&t, &lab, &detached).status, 200);
    assert_eq!(get_unless(&t, &lab, &replaced).status, 304);
}

/// The links each release thread of engine `engine` (a lab view's `engines` entry) serves, by
/// thread, each thread's class checked to be one.
fn served(engine: &Value) -> Vec<Vec<String>> {
    let threads = engine["threads"].as_array().expect("threads");
    assert!(!threads.is_empty(), "{engine}");
    threads
        .iter()
        .enumerate()
        .map(|(i, t)| {
            assert_eq!(t["index"], i, "{engine}");
            let policy = t["policy"].as_str().unwrap_or_default();
            assert!(policy.starts_with("SCHED_"), "{engine}");
            serde_json::from_value(t["links"].clone()).unwrap()
        })
        .collect()
}

#[test]
fn a_lab_on_one_machine_shows_its_engine_s_threads_and_the_links_each_serves() {
    if !root_or_skip("a_lab_on_one_machine_shows_its_engine_s_threads_and_the_links_each_serves") {
        return;
    }
    let lab = format!("se{}", std::process::id() % 100_000);
    let _guard = LabGuard(lab.clone());
    let serve = Serve::start("engines");
    let t = Target::Unix(serve.socket());
    let topo = format!(
        "lab = \"{lab}\"\n[nodes.a]\n[nodes.b]\n[nodes.c]\n\
         [[links]]\nname = \"ab\"\nendpoints = [\"a\", \"b\"]\nnetem = \"delay 1ms\"\n\
         [[links]]\nname = \"bc\"\nendpoints = [\"b\", \"c\"]\nnetem = \"delay 2ms\"\n\
         [[links]]\nname = \"ca\"\nendpoints = [\"c\", \"a\"]\n"
    );
    let up: Value = up_inline(&t, &topo);
    let path = format!("/v1/labs/{lab}");
    let view: Value = ok(call(&t, "GET", &path, None)).json().unwrap();
    let stats = engine_stats(&t, &lab);
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    for shown in [&up, &view] {
        // One engine, this machine's, the one the stats come from.
        let engines = shown["engines"].as_array().expect("engines");
        assert_eq!(engines.len(), 1, "{shown}");
        let engine = &engines[0];
        assert_eq!(engine["host"], host.trim(), "{engine}");
        assert_eq!(engine["pid"], stats.pid, "{engine}");
        assert_eq!(engine["io"], stats.io.as_str(), "{engine}");
        // Each impaired link served by exactly one thread (the ideal one by none), as the
        // stats say it.
        let by_thread = served(engine);
        let mut links: Vec<&str> = by_thread.iter().flatten().map(String::as_str).collect();
        links.sort_unstable();
        assert_eq!(links, ["ab", "bc"], "{engine}");
        let said: Vec<Vec<String>> = stats.threads.iter().map(|t| t.links.clone()).collect();
        assert_eq!(by_thread, said, "{engine}");
    }
    // The engine's readings are not the lab's: its revision holds while they move.
    let revision = view["revision"].as_str().unwrap();
    assert_eq!(listed(&t, &lab)["revision"], revision);
    assert_eq!(get_unless(&t, &lab, revision).status, 304);

    // `rtemu ls` says the same: each thread with the links it serves, and in JSON the engine
    // as the API gives it.
    let ls = rtemu(&["ls", &lab]);
    let text = String::from_utf8_lossy(&ls.stdout);
    assert!(ls.status.success(), "{text}");
    let threads: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("  release thread "))
        .collect();
    assert_eq!(threads.len(), stats.threads.len(), "{text}");
    for (line, t) in threads.iter().zip(&stats.threads) {
        assert!(
            line.ends_with(&format!(": {}", t.links.join(", "))),
            "{text}"
        );
    }
    let ls = rtemu(&["ls", &lab, "--json"]);
    assert!(ls.status.success(), "{ls:?}");
    let listed: Value = serde_json::from_slice(&ls.stdout).unwrap();
    let engine = &listed[0]["engines"][0];
    assert_eq!(
        (&engine["host"], &engine["pid"]),
        (&view["engines"][0]["host"], &json!(stats.pid))
    );
    assert_eq!(served(engine), served(&view["engines"][0]));

    // An engine that does not answer: the view still answers, degraded, with no engine.
    // SAFETY: kill(2) on the pid the engine reported as its own.
    assert_eq!(unsafe { libc::kill(stats.pid as i32, libc::SIGKILL) }, 0);
    std::thread::sleep(Duration::from_millis(300));
    let view: Value = ok(call(&t, "GET", &path, None)).json().unwrap();
    assert_eq!(view["status"], "degraded");
    assert!(view.get("engines").is_none(), "{view}");
    let ls = rtemu(&["ls", &lab, "--json"]);
    let listed: Value = serde_json::from_slice(&ls.stdout).unwrap();
    assert!(listed[0].get("engines").is_none(), "{listed}");
    let down: DownReply = ok(call(&t, "DELETE", &path, None)).json().unwrap();
    assert!(down.removed);
    assert!(
        lab_namespaces(&lab).is_empty(),
        "{:?}",
        lab_namespaces(&lab)
    );
}

#[test]
fn an_impaired_lab_through_the_api() {
    if !root_or_skip("an_impaired_lab_through_the_api") {
        return;
    }
    let lab = format!("sv{}", std::process::id() % 100_000);
    let _guard = LabGuard(lab.clone());
    let mut serve = Serve::start("impaired");
    let t = Target::Unix(serve.socket());
    let topo = format!(
        "lab = \"{lab}\"\nneighbours = \"static\"\n[nodes.client]\n[nodes.server]\n\
         [[links]]\nname = \"uplink\"\nendpoints = [\"client\", \"server\"]\nnetem = \"delay 5ms\"\n"
    );

    let up: Value = up_inline(&t, &topo);
    assert_eq!(up["status"], "up", "{up}");
    assert_eq!(up["links"][0]["impaired"], true);
    assert_eq!(up["links"][0]["a_to_b"], "delay 5ms");

    // The configured delay, then a changed one, in both directions.
    let rtt = ping_min_ms(&t, &lab, "client", "server", 3).expect("pings come back");
    assert!(
        (10.0..40.0).contains(&rtt),
        "round trip {rtt} ms over 2 × 5 ms"
    );
    let set = format!("/v1/labs/{lab}/links/uplink/set");
    let acked: Value = ok(call(
        &t,
        "POST",
        &set,
        Some(json!({"netem": "delay 30ms", "dir": "both"})),
    ))
    .json()
    .unwrap();
    assert_eq!(acked, json!({"ok": true}));
    let rtt = ping_min_ms(&t, &lab, "client", "server", 2).expect("pings come back");
    assert!(
        (60.0..120.0).contains(&rtt),
        "round trip {rtt} ms over 2 × 30 ms"
    );
    let e = call(&t, "POST", &set, Some(json!({"netem": "delay 5 parsecs"})));
    assert_eq!(e.status, 400, "{}", e.text());
    // A model naming a table that cannot be read: the engine refuses it, a 400 naming it.
    let table = "/nonexistent/rtemu-serve-test.dist";
    let bad = json!({"netem": format!("delay 5ms 1ms distribution {table}")});
    let e = call(&t, "POST", &set, Some(bad));
    assert_eq!(e.status, 400, "{}", e.text());
    assert!(e.text().contains(table), "{}", e.text());

    // Cut, nothing passes; joined again, pings pass.
    ok(call(
        &t,
        "POST",
        &format!("/v1/labs/{lab}/links/uplink/down"),
        None,
    ));
    assert_eq!(ping_min_ms(&t, &lab, "client", "server", 2), None);
    ok(call(
        &t,
        "POST",
        &format!("/v1/labs/{lab}/links/uplink/up"),
        None,
    ));
    assert!(ping_min_ms(&t, &lab, "client", "server", 2).is_some());

    // A schedule: 1 ms of delay from 300 ms after the request.
    let schedule = json!({"changes": [{"at": "300ms", "netem": "delay 1ms", "dir": "both"}]});
    ok(call(
        &t,
        "POST",
        &format!("/v1/labs/{lab}/links/uplink/schedule"),
        Some(schedule),
    ));
    std::thread::sleep(Duration::from_millis(800));
    let rtt = ping_min_ms(&t, &lab, "client", "server", 2).expect("pings come back");
    assert!(
        rtt < 20.0,
        "round trip {rtt} ms after the scheduled 1 ms delay"
    );
    let e = call(
        &t,
        "POST",
        &format!("/v1/labs/{lab}/links/uplink/schedule"),
        Some(json!({"changes": [{"at": "soon", "netem": "delay 1ms"}]})),
    );
    assert_eq!(e.status, 400, "{}", e.text());
    // The most changes a schedule holds go to the engine as one request: queued in seconds
    // (one request each took minutes), all of them far in the future.
    let many: Vec<Value> = (0..rtemu_serve::ctl::MAX_CHANGES)
        .map(
            |i| json!({"at": format!("{}s", 3600 + i), "netem": format!("delay {}ms", 1 + i % 50)}),
        )
        .collect();
    let started = Instant::now();
    ok(call(
        &t,
        "POST",
        &format!("/v1/labs/{lab}/links/uplink/schedule"),
        Some(json!({ "changes": many })),
    ));
    let took = started.elapsed();
    assert!(took < Duration::from_secs(20), "{took:?} for one batch");
    // One bad change (a table that cannot be read) fails the whole batch, with a 400 naming it.
    let bad = json!({"changes": [
        {"at": "3600s", "netem": "delay 2ms"},
        {"at": "3601s", "netem": format!("delay 5ms 1ms distribution {table}")},
    ]});
    let e = call(
        &t,
        "POST",
        &format!("/v1/labs/{lab}/links/uplink/schedule"),
        Some(bad),
    );
    assert_eq!(e.status, 400, "{}", e.text());
    assert!(e.text().contains("change 2 of the batch"), "{}", e.text());

    // A lab directory with a corrupt state is one entry of the list, which lists the others
    // all the same; `rtemu ls` lists the others, names it and fails.
    {
        let planted = Planted::new(&format!("sb{}", std::process::id() % 100_000));
        let labs: Vec<Value> = ok(call(&t, "GET", "/v1/labs", None)).json().unwrap();
        let entry = |name: &str| labs.iter().find(|l| l["name"] == name).cloned();
        assert_eq!(entry(&lab).expect("the lab is listed")["status"], "up");
        let bad = entry(&planted.lab).expect("the unreadable one is listed");
        assert_eq!(bad["status"], "unreadable", "{bad}");
        assert!(
            bad["error"].as_str().unwrap().contains("state.json"),
            "{bad}"
        );
        let ls = rtemu(&["ls"]);
        let (out, err) = (
            String::from_utf8_lossy(&ls.stdout),
            String::from_utf8_lossy(&ls.stderr),
        );
        assert!(!ls.status.success() && out.contains(&lab), "{out}{err}");
        assert!(
            err.contains(&format!("warning: lab `{}` is not listed", planted.lab)),
            "{err}"
        );
    }

    // Stats, typed: both directions of the link, with what the pings sent.
    let stats = engine_stats(&t, &lab);
    assert_eq!(stats.lab.as_str(), lab);
    let dirs: Vec<(&str, &str, &str)> = stats
        .directions
        .iter()
        .map(|d| (d.dir.as_str(), d.from.as_str(), d.to.as_str()))
        .collect();
    assert_eq!(
        dirs,
        [("a-b", "client", "server"), ("b-a", "server", "client")]
    );
    assert!(
        stats
            .directions
            .iter()
            .all(|d| d.received >= 9 && d.conserved),
        "{stats:?}"
    );

    // Server-Sent Events: three snapshots, then the stream ends.
    let r = ok(call(
        &t,
        "GET",
        &format!("/v1/labs/{lab}/stats/stream?interval=0.1&count=3"),
        None,
    ));
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    let text = r.text();
    assert_eq!(text.matches("event: stats\n").count(), 3, "{text}");
    for data in text.lines().filter_map(|l| l.strip_prefix("data: ")) {
        let s: StatsReply = serde_json::from_str(data).unwrap();
        assert!(matches!(s, StatsReply::Engine(ref s) if s.directions.len() == 2));
    }

    // A capture of the link while pings cross it.
    let capture = {
        let t = t.clone();
        let path = format!("/v1/labs/{lab}/capture?target=uplink&count=4&duration=20");
        std::thread::spawn(move || request(&t, "GET", &path, &[], None, WAIT).unwrap())
    };
    std::thread::sleep(Duration::from_millis(500));
    ping_min_ms(&t, &lab, "client", "server", 3);
    let r = ok(capture.join().unwrap());
    assert_eq!(r.header("content-type"), Some("application/x-pcapng"));
    assert_eq!(
        &r.body[..4],
        &[0x0a, 0x0d, 0x0d, 0x0a],
        "a section header block"
    );
    assert_eq!(rtemu_topo::pcapng::read(&r.body).unwrap().packets.len(), 4);

    // Down: the engine's final report, typed, and nothing left.
    let down: DownReply = ok(call(&t, "DELETE", &format!("/v1/labs/{lab}"), None))
        .json()
        .unwrap();
    assert!(down.removed);
    let report = down.report.expect("the engine reported");
    assert_eq!(report.directions().len(), 2, "{report:?}");
    assert!(report.directions()[0].delivered > 0);
    assert!(
        lab_namespaces(&lab).is_empty(),
        "{:?}",
        lab_namespaces(&lab)
    );

    // Up again (replacing nothing), then a dead engine: 503, and the lab shows degraded.
    let again = json!({ "topology": topo, "replace": true });
    ok(call(&t, "POST", "/v1/labs", Some(again.clone())));
    ok(call(&t, "POST", "/v1/labs", Some(again)));
    let stats = engine_stats(&t, &lab);
    // SAFETY: kill(2) on the pid the engine reported as its own.
    assert_eq!(unsafe { libc::kill(stats.pid as i32, libc::SIGKILL) }, 0);
    std::thread::sleep(Duration::from_millis(300));
    let r = call(&t, "GET", &format!("/v1/labs/{lab}/stats"), None);
    assert_eq!(r.status, 503, "{}", r.text());
    let view: Value = ok(call(&t, "GET", &format!("/v1/labs/{lab}"), None))
        .json()
        .unwrap();
    assert_eq!(view["status"], "degraded");
    let down: DownReply = ok(call(&t, "DELETE", &format!("/v1/labs/{lab}"), None))
        .json()
        .unwrap();
    assert!(down.removed && down.report.is_none(), "{down:?}");
    assert!(
        lab_namespaces(&lab).is_empty(),
        "{:?}",
        lab_namespaces(&lab)
    );

    // SIGTERM: the server exits well and removes its socket and token file.
    let token = serve.dir.join("api.token");
    assert!(token.exists());
    assert!(
        serve.terminate(),
        "rtemu serve did not exit cleanly at SIGTERM"
    );
    assert!(!Path::new(&serve.socket()).exists(), "the socket is left");
    assert!(!token.exists(), "the token file is left");
}
