//! The engine on real veths: a delay that UDP datagrams really take, and a loss that really
//! drops them, with every frame accounted for.
//!
//! Needs root (namespaces, AF_PACKET). Without it the tests print why and pass, unless
//! `RTEMU_REQUIRE_ROOT=1` (CI) makes them fail. Each test builds its own namespaces, removed
//! by a guard even when an assertion fails; traffic stays inside them. Timing bounds are
//! generous: precision belongs in the benchmark (`examples/engine_bench.rs`).

mod common;

use std::time::Duration;

use rtemu_engine::io::PacketIo;

use common::{config, direction, root_or_skip, start, Lab, A_ADDR, B_ADDR};
use rtemu_clock::Instant;
use rtemu_engine::afpacket::AfPacketConfig;
use rtemu_engine::direction::DirectionConfig;
use rtemu_engine::engine::{self, LinkSpec};
use rtemu_engine::DropKind;
use rtemu_model::direction::Way;

const DELAY_NS: u64 = 10_000_000;

/// The engine over `AF_PACKET` on the lab's engine ends.
fn start_afpacket(lab: &Lab, a_to_b: &str, b_to_a: &str) -> engine::EngineHandle {
    let (a, b) = lab.engine_ends(AfPacketConfig::default());
    start(a, b, a_to_b, b_to_a)
}

#[test]
fn udp_datagrams_take_the_configured_delay_one_way_only() {
    if !root_or_skip("udp_datagrams_take_the_configured_delay_one_way_only") {
        return;
    }
    let lab = Lab::new();
    let engine = start_afpacket(&lab, "delay 10ms", "delay 0ms");
    let a = lab.udp(&lab.a, A_ADDR, 7000);
    let b = lab.udp(&lab.b, B_ADDR, 7000);
    b.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    a.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut buf = [0u8; 64];
    let mut forward = Vec::new();
    for i in 0..8u8 {
        let payload = [i; 40];
        let sent = Instant::now();
        a.send_to(&payload, (B_ADDR, 7000)).unwrap();
        let (n, from) = b.recv_from(&mut buf).expect("datagram A→B arrived");
        forward.push(Instant::now().nanos_since(sent));
        assert_eq!((&buf[..n], from), (&payload[..], (A_ADDR, 7000).into()));
        // The way back has no delay.
        let sent = Instant::now();
        b.send_to(&payload, (A_ADDR, 7000)).unwrap();
        a.recv_from(&mut buf).expect("datagram B→A arrived");
        let back = Instant::now().nanos_since(sent);
        assert!(
            back < DELAY_NS,
            "B→A took {back} ns on an undelayed direction"
        );
    }
    for (i, ns) in forward.iter().enumerate() {
        assert!(
            *ns >= DELAY_NS,
            "datagram {i} took {ns} ns, less than 10 ms"
        );
        // Generous: a loaded CI machine may be late, but not by a second.
        assert!(*ns < 1_000_000_000, "datagram {i} took {ns} ns");
    }
    let report = engine.stop().unwrap();
    let ab = report
        .directions
        .iter()
        .find(|d| d.way == Way::AToB)
        .unwrap();
    let c = ab.counters;
    assert!(c.conserved(), "{c:?}");
    assert_eq!(c.dropped_total(), 0, "{c:?}");
    // The 8 datagrams, plus ARP that passed with the base delay.
    assert_eq!(c.delivered, 8 + c.resolution_passed, "{c:?}");
    assert_eq!(ab.fidelity.count, c.delivered);
    assert_eq!(ab.kernel_drops, Some(0), "no frame lost before the engine");
    rtemu_testutil::say(&format!(
        "A→B {c:?}\nrelease error: p50 {} ns, p99 {} ns, max {} ns; notices: {:?}",
        ab.fidelity.released.p50_ns,
        ab.fidelity.released.p99_ns,
        ab.fidelity.released.max_ns,
        report.notices
    ));
}

#[test]
fn loss_100_percent_drops_every_datagram_and_counts_it() {
    if !root_or_skip("loss_100_percent_drops_every_datagram_and_counts_it") {
        return;
    }
    let lab = Lab::new();
    let engine = start_afpacket(&lab, "loss 100%", "delay 0ms");
    let a = lab.udp(&lab.a, A_ADDR, 7001);
    let b = lab.udp(&lab.b, B_ADDR, 7001);
    for i in 0..20u8 {
        a.send_to(&[i; 40], (B_ADDR, 7001)).unwrap();
    }
    b.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut buf = [0u8; 64];
    let got = b.recv_from(&mut buf);
    assert!(got.is_err(), "a datagram crossed a 100% loss link: {got:?}");
    let report = engine.stop().unwrap();
    let ab = report
        .directions
        .iter()
        .find(|d| d.way == Way::AToB)
        .unwrap();
    let c = ab.counters;
    assert!(c.conserved(), "{c:?}");
    assert_eq!(c.dropped(DropKind::Loss), 20, "{c:?}");
    // Only ARP got through, with the base delay, so the datagrams were sent and then lost.
    assert_eq!(c.delivered, c.resolution_passed, "{c:?}");
    assert_eq!(c.received, 20 + c.resolution_passed, "{c:?}");
}

/// A link split over two threads: each direction received on its own end and sent through
/// the other end's send-only socket, in a thread of its own, each with its own delay.
#[test]
fn a_link_split_over_two_threads_carries_each_way_with_its_own_delay() {
    if !root_or_skip("a_link_split_over_two_threads_carries_each_way_with_its_own_delay") {
        return;
    }
    let lab = Lab::new();
    let ring = AfPacketConfig::default();
    let (a, b) = lab.engine_ends(ring);
    let senders = (
        lab.open_sender(&lab.e, "ea", ring),
        lab.open_sender(&lab.e, "eb", ring),
    );
    let link = LinkSpec {
        name: "ab".into(),
        a,
        b,
        a_to_b: direction("delay 10ms", 1),
        b_to_a: direction("delay 3ms", 2),
        senders: Some(senders),
    };
    let engine = engine::spawn(
        engine::EngineConfig {
            threads: 2,
            ..config()
        },
        vec![link],
    )
    .unwrap();
    let threads = engine.threads();
    let served: Vec<&[String]> = threads.iter().map(|t| t.links.as_slice()).collect();
    assert_eq!(served, [["ab (a-b)"], ["ab (b-a)"]]);
    // Each way in turn, 300 datagrams at 2 kpps timed by the kernel's receive stamps (a busy
    // machine wakes this test's threads milliseconds late; the stamps are not).
    for (from, from_addr, to, to_addr, delay_ns) in [
        (&lab.a, A_ADDR, &lab.b, B_ADDR, 10_000_000i64),
        (&lab.b, B_ADDR, &lab.a, A_ADDR, 3_000_000),
    ] {
        // Ports the kernel picks: a fixed one was once refused as in use (CI, a busy machine).
        let tx = lab.udp(from, from_addr, 0);
        let rx = lab.udp(to, to_addr, 0);
        rtemu_testutil::probe::prepare_receiver(&rx).unwrap();
        let dest = rx.local_addr().unwrap();
        // Resolve the neighbour before measuring.
        tx.send_to(b"arp", dest).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let receiver = {
            let done = std::sync::Arc::clone(&done);
            std::thread::spawn(move || rtemu_testutil::probe::receive(&[rx], 0, &done))
        };
        let sent = rtemu_testutil::probe::send(&[tx], &[dest], 2_000, 0.15);
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        let p = receiver.join().unwrap();
        assert_eq!(
            p.errors_ns.len() as u64,
            sent,
            "every datagram came through"
        );
        // Never before its delay; at the median, within a millisecond of it.
        assert!(
            p.percentile(0.0001) >= delay_ns,
            "{} ns",
            p.percentile(0.0001)
        );
        let median = p.percentile(0.5);
        assert!(
            (delay_ns..delay_ns + 1_000_000).contains(&median),
            "delay {delay_ns} ns, median {median} ns"
        );
    }
    let report = engine.stop().unwrap();
    for d in &report.directions {
        assert!(d.counters.conserved(), "{d:?}");
        assert!(d.counters.delivered >= 300, "{d:?}");
    }
    assert_ne!(report.directions[0].thread, report.directions[1].thread);
}

/// A send-only socket sends like any other and receives nothing, whatever arrives.
#[test]
fn a_send_only_socket_sends_and_receives_nothing() {
    if !root_or_skip("a_send_only_socket_sends_and_receives_nothing") {
        return;
    }
    let lab = Lab::new();
    let ring = AfPacketConfig::default();
    let mut sender = lab.open_sender(&lab.a, "na", ring);
    let (mut ea, _) = lab.engine_ends(ring);
    let frames: Vec<Vec<u8>> = (0..5).map(|i| common::frame(i, false)).collect();
    for f in &frames {
        assert!(sender.stage(f));
    }
    sender.flush().unwrap();
    assert_eq!(common::collect(&mut ea, frames.len()), frames);
    // Frames towards na reach A's kernel; the send-only socket on na sees none of them.
    let mut back = lab.open(&lab.e, "ea", ring);
    for f in &frames {
        assert!(back.stage(f));
    }
    back.flush().unwrap();
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(sender.recv_batch(64, |_| {}), 0);
}

/// Overload: more frames than buffers. Every frame the generator sent is accounted for, by the
/// kernel (a full receive ring) or by the engine (delivered, dropped by name, in flight).
#[test]
fn every_frame_is_accounted_for_under_overload() {
    if !root_or_skip("every_frame_is_accounted_for_under_overload") {
        return;
    }
    let lab = Lab::new();
    let (a, b) = lab.engine_ends(AfPacketConfig::default());
    let small_pool = |text| DirectionConfig {
        pool_frames: 32,
        ..direction(text, 1)
    };
    let link = LinkSpec {
        name: "ab".into(),
        a,
        b,
        a_to_b: small_pool("delay 50ms"),
        b_to_a: small_pool("delay 0ms"),
        senders: None,
    };
    let engine = engine::spawn(config(), vec![link]).unwrap();
    let mut tx = lab.open(&lab.a, "na", AfPacketConfig::default());
    // To a MAC address nobody has, so B's kernel answers nothing.
    let mut frame = vec![2, 0, 0, 0, 0, 0x99, 2, 0, 0, 0, 0, 0x01, 0x88, 0xb5];
    frame.resize(64, 0xa5);
    let mut sent = 0u64;
    for _ in 0..20 {
        // Small bursts, so the veth backlog (1000 frames) never overflows uncounted.
        for _ in 0..50 {
            sent += tx.stage(&frame) as u64;
        }
        tx.flush().unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    std::thread::sleep(Duration::from_millis(100));
    let report = engine.stop().unwrap();
    let ab = report
        .directions
        .iter()
        .find(|d| d.way == Way::AToB)
        .unwrap();
    let c = ab.counters;
    assert_eq!(sent, 1000);
    assert!(c.conserved(), "{c:?}");
    assert_eq!(c.received + ab.kernel_drops.unwrap(), sent, "{c:?} {ab:?}");
    // 32 buffers for 50 ms of frames: most of the 1000 find none.
    assert!(c.dropped(DropKind::PoolExhausted) > 500, "{c:?}");
    assert_eq!(
        c.delivered + c.in_flight,
        c.received - c.dropped_total(),
        "{c:?}"
    );
}
