//! Bufferbloat and its cure in a lab, as a user meets them: one bulk TCP upload (iperf3) and a
//! 50 pps UDP "game" flow share a 10 Mbit/s link. Behind a 500 ms drop-tail buffer the game's
//! packets wait behind the upload's standing queue; FQ-CoDel gives the game its own queue and
//! keeps the upload's short; with ECN in the nodes' TCP and `ecn` on the queue, the upload is
//! slowed by CE marks and loses nothing to the queue.
//!
//! The game flow is the shared one-way probe (`rtemu_testutil::probe`): each datagram carries
//! its send time, and the receiving node's kernel stamps its arrival on the same host clock.
//!
//! Needs root and iperf3 (install.sh). Without root the test prints why and passes, unless
//! `RTEMU_REQUIRE_ROOT=1` (CI) makes it fail. Its cases run one after another in one test, so
//! no other lab of this binary shares the CPUs with the delay being measured; each lab is
//! removed by a guard even when an assertion fails.

mod common;

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{direction, root_or_skip, text, Lab};
use rtemu_engine::netns;
use rtemu_testutil::probe::{self, Probe};

/// The link's own delay each way: the game flow's base one-way delay.
const BASE_NS: i64 = 5_000_000;

/// Two nodes joined by a 10 Mbit/s link whose queue is `QUEUE`; `SYSCTLS` for both nodes.
const UPLINK: &str = r#"
lab = "LAB"
ip = "ipv4"
[nodes.a]
sysctls = SYSCTLS
[nodes.b]
sysctls = SYSCTLS
[[links]]
name = "ab"
endpoints = ["a", "b"]
ipv4 = "10.78.0.0/30"
netem = "delay 5ms rate 10mbit QUEUE"
"#;

/// The probe's port in both nodes.
const PORT: u16 = 7300;

/// What one case measured: the game flow's one-way delays beyond the base, and the engine's
/// counters of the upload's direction (a → b).
struct Case {
    game: Probe,
    sent: u64,
    upload: serde_json::Value,
}

/// A UDP socket bound to `addr` in node `node` of `lab`.
fn socket_in(lab: &Lab, node: &str, addr: Ipv4Addr) -> UdpSocket {
    let ns = netns::named(&format!("rtemu-{}.{node}", lab.name));
    netns::run_in(&ns, move || UdpSocket::bind((addr, PORT)))
        .expect("entering the node")
        .unwrap_or_else(|e| panic!("binding {addr}:{PORT} in {node}: {e}"))
}

/// Brings up the link with `queue`, runs an 8 s iperf3 upload a → b, and after 4 s of it sends
/// the game flow a → b for 3.5 s. Cubic leaves slow start early (HyStart) and then grows its
/// window for seconds: by 4 s the drop-tail queue holds about 300 ms and is still growing.
fn run(tag: &str, queue: &str, ecn: bool) -> Case {
    let sysctls = if ecn {
        r#"{ "net.ipv4.tcp_ecn" = 1 }"#
    } else {
        "{}"
    };
    let lab = Lab::up(
        tag,
        &UPLINK.replace("QUEUE", queue).replace("SYSCTLS", sysctls),
    );
    let (a, b) = (Ipv4Addr::new(10, 78, 0, 1), Ipv4Addr::new(10, 78, 0, 2));
    let tx = socket_in(&lab, "a", a);
    let rx = socket_in(&lab, "b", b);
    probe::prepare_receiver(&rx).unwrap();
    let to = SocketAddr::from((b, PORT));
    let server = lab.exec("b", &["iperf3", "-s", "-D", "-1", "--idle-timeout", "30"]);
    assert!(server.status.success(), "iperf3 -s: {}", text(&server));
    std::thread::sleep(Duration::from_millis(300));
    let done = Arc::new(AtomicBool::new(false));
    let (sent, game, upload) = std::thread::scope(|s| {
        // Cubic, the loss-based default of most hosts: one that paces to the bottleneck (BBR,
        // this machine's default) keeps no standing queue to measure.
        let client =
            s.spawn(|| lab.exec("a", &["iperf3", "-c", "b", "-t", "8", "-C", "cubic", "-J"]));
        let receiver = {
            let done = Arc::clone(&done);
            s.spawn(move || probe::receive(&[rx], BASE_NS, &done))
        };
        std::thread::sleep(Duration::from_millis(4000));
        let sent = probe::send(&[tx], &[to], 50, 3.5);
        done.store(true, Ordering::Relaxed);
        let client = client.join().unwrap();
        assert!(client.status.success(), "iperf3 -c: {}", text(&client));
        (sent, receiver.join().unwrap(), client)
    });
    let json: serde_json::Value = serde_json::from_slice(&upload.stdout).unwrap();
    let bps = json["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap();
    // The upload kept the link busy (goodput under the 10 Mbit/s wire rate, generous below).
    assert!(
        (5.0e6..10.0e6).contains(&bps),
        "{tag}: upload at {bps} bit/s"
    );
    let stats = lab.stats();
    let upload = direction(&stats, "a").clone();
    let ms = |p| game.percentile(p) as f64 / 1e6;
    rtemu_testutil::say(&format!(
        "{queue}: game flow {} of {sent} received, beyond the base p50 {:.1} ms, p99 {:.1} ms; \
         upload {:.2} Mbit/s, {} marked, dropped {}",
        game.errors_ns.len(),
        ms(0.5),
        ms(0.99),
        bps / 1e6,
        upload["marked"],
        upload["dropped"]
    ));
    Case { game, sent, upload }
}

#[test]
fn a_bloated_buffer_delays_the_game_and_fq_codel_with_ecn_cures_it() {
    if !root_or_skip("a_bloated_buffer_delays_the_game_and_fq_codel_with_ecn_cures_it")
        || !rtemu_testutil::program_or_skip("aqm_lab", "iperf3", "--version", "iperf3")
    {
        return;
    }
    let ms = |ns: i64| ns as f64 / 1e6;

    // 500 ms of drop-tail buffer at 10 Mbit/s: the upload's standing queue is the game's delay.
    let bloated = run("q", "limit 500ms", false);
    let p99 = bloated.game.percentile(0.99);
    assert!(
        p99 >= 300_000_000,
        "drop-tail: game p99 {} ms beyond the base",
        ms(p99)
    );
    // Most game packets get through, so the percentile describes the flow.
    assert!(
        bloated.game.errors_ns.len() as u64 * 2 > bloated.sent,
        "drop-tail: {} of {} game packets arrived",
        bloated.game.errors_ns.len(),
        bloated.sent
    );

    // FQ-CoDel: the sparse game flow is served first, the upload's queue is held near 5 ms.
    let cured = run("f", "fq_codel", false);
    let p99 = cured.game.percentile(0.99);
    assert!(
        p99 <= 10_000_000,
        "fq_codel: game p99 {} ms beyond the base",
        ms(p99)
    );
    assert!(cured.game.errors_ns.len() as u64 * 10 >= cured.sent * 9);
    // CoDel, not overflow, slowed the upload: without ECN it drops.
    assert!(
        cured.upload["dropped"]["aqm"].as_u64().unwrap() > 0,
        "{}",
        cured.upload
    );
    assert_eq!(cured.upload["marked"], 0, "{}", cured.upload);

    // With ECN the upload's data frames are ECN-capable: CoDel marks them instead, and the
    // queue drops nothing in that direction (the game flow is not ECN-capable but never
    // reaches a drop either).
    let marked = run("e", "fq_codel ecn", true);
    let up = &marked.upload;
    assert!(up["marked"].as_u64().unwrap() > 0, "fq_codel ecn: {up}");
    assert_eq!(up["dropped"]["aqm"], 0, "fq_codel ecn: {up}");
    assert_eq!(up["dropped"]["queue-full"], 0, "fq_codel ecn: {up}");
    assert_eq!(up["conserved"], true, "{up}");
    let p99 = marked.game.percentile(0.99);
    assert!(
        p99 <= 10_000_000,
        "fq_codel ecn: game p99 {} ms beyond the base",
        ms(p99)
    );
}
