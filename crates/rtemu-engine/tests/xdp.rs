//! The AF_XDP I/O layer on real veths: frames cross unchanged (a VLAN tag stays inline), frames
//! lost to a full receive ring are counted, the engine relays and delays UDP over it, and the
//! XDP program leaves the interface when its owner drops or its process is killed.
//!
//! Needs root; skips with the reason otherwise, unless `RTEMU_REQUIRE_ROOT=1`. Each test's
//! namespaces (and with them the veths) are deleted by a guard, also when an assertion fails.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{collect, frame, overflow, root_or_skip, start, Lab, A_ADDR, B_ADDR};
use rtemu_clock::Instant;
use rtemu_engine::afpacket::AfPacketConfig;
use rtemu_engine::io::PacketIo;
use rtemu_engine::netns;
use rtemu_engine::xdp::{AfXdp, AfXdpConfig, AttachMode};
use rtemu_model::direction::Way;

#[test]
fn frames_cross_unchanged_with_their_vlan_tag_inline() {
    if !root_or_skip("frames_cross_unchanged_with_their_vlan_tag_inline") {
        return;
    }
    let lab = Lab::new();
    let mut tx = lab.open(&lab.a, "na", AfPacketConfig::default());
    let (mut rx, mut back) = lab.engine_ends_xdp(AfXdpConfig::default());
    assert_eq!(
        rx.attach_mode(),
        &AttachMode::Native,
        "veth runs XDP natively"
    );
    let sent = vec![frame(1, false), frame(2, true), frame(3, false)];
    for f in &sent {
        assert!(tx.stage(f));
    }
    tx.flush().unwrap();
    assert_eq!(collect(&mut rx, sent.len()), sent);

    // And out again: AF_XDP sends them to B's end unchanged.
    let mut b = lab.open(&lab.b, "nb", AfPacketConfig::default());
    for f in &sent {
        assert!(back.stage(f));
    }
    back.flush().unwrap();
    assert_eq!(collect(&mut b, sent.len()), sent);
}

/// A frame's arrival is when the kernel handed it to the XDP program, not when the engine read
/// it: one that waited 30 ms in the ring says so, and frames stamped one after another keep
/// their order. Each chunk's stamp is cleared for its next frame.
#[test]
fn frames_carry_the_kernels_arrival_time_however_long_they_wait() {
    if !root_or_skip("frames_carry_the_kernels_arrival_time_however_long_they_wait") {
        return;
    }
    let lab = Lab::new();
    let mut tx = lab.open(&lab.a, "na", AfPacketConfig::default());
    let (mut rx, _) = lab.engine_ends_xdp(AfXdpConfig::default());
    assert!(rx.stamps(), "this kernel takes the stamping program");
    // Twice as many frames as the fill ring holds chunks of: every chunk is used twice.
    for round in 0..2 {
        let before = Instant::now().as_nanos();
        for i in 0..4096u32 {
            assert!(tx.stage(&frame((i % 251) as u8, false)));
            if i % 256 == 255 {
                tx.flush().unwrap();
            }
        }
        tx.flush().unwrap();
        let sent = Instant::now().as_nanos();
        std::thread::sleep(Duration::from_millis(30));
        let mut arrivals = Vec::new();
        let end = Instant::now() + 2_000_000_000;
        while arrivals.len() < 4096 && Instant::now() < end {
            rx.recv_batch(64, |f| arrivals.push((f.arrival_ns, f.seen_ns)));
        }
        assert_eq!(arrivals.len(), 4096, "round {round}");
        for (i, &(arrival, seen)) in arrivals.iter().enumerate() {
            assert!(
                (before..=sent).contains(&arrival),
                "round {round}, frame {i}: arrived {arrival}, sent within {before}..={sent}"
            );
            assert!(
                seen - arrival >= 25_000_000,
                "frame {i}: waited 30 ms, lag {}",
                seen - arrival
            );
        }
        assert!(arrivals.windows(2).all(|w| w[0].0 <= w[1].0), "in order");
    }
}

#[test]
fn a_full_receive_ring_is_counted_by_the_drop_probe() {
    if !root_or_skip("a_full_receive_ring_is_counted_by_the_drop_probe") {
        return;
    }
    let lab = Lab::new();
    let mut tx = lab.open(&lab.a, "na", AfPacketConfig::default());
    let (mut rx, _) = lab.engine_ends_xdp(AfXdpConfig {
        rx_frames: 64,
        tx_frames: 64,
        ..AfXdpConfig::default()
    });
    // 64 frames fit the receive ring, the other 136 are dropped by the kernel.
    assert_eq!(overflow(&mut tx, &mut rx), (64, 136));
}

#[test]
fn more_frames_than_one_kick_sends_leave_in_one_flush() {
    if !root_or_skip("more_frames_than_one_kick_sends_leave_in_one_flush") {
        return;
    }
    let lab = Lab::new();
    let mut rx = lab.open(&lab.a, "na", AfPacketConfig::default());
    let (mut tx, _) = lab.engine_ends_xdp(AfXdpConfig::default());
    // Copy mode sends 32 frames per kick.
    let sent: Vec<Vec<u8>> = (0..200).map(|i| frame(i, false)).collect();
    for f in &sent {
        assert!(tx.stage(f));
    }
    tx.flush().unwrap();
    assert_eq!(collect(&mut rx, sent.len()), sent);
}

#[test]
fn the_engine_delays_udp_over_af_xdp() {
    if !root_or_skip("the_engine_delays_udp_over_af_xdp") {
        return;
    }
    let lab = Lab::new();
    let (a, b) = lab.engine_ends_xdp(AfXdpConfig::default());
    let engine = start(a, b, "delay 10ms", "delay 0ms");
    let a = lab.udp(&lab.a, A_ADDR, 7000);
    let b = lab.udp(&lab.b, B_ADDR, 7000);
    b.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    a.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut buf = [0u8; 64];
    for i in 0..8u8 {
        let sent = Instant::now();
        a.send_to(&[i; 40], (B_ADDR, 7000)).unwrap();
        let (n, _) = b.recv_from(&mut buf).unwrap();
        let one_way = Instant::now().nanos_since(sent);
        assert_eq!(&buf[..n], &[i; 40]);
        assert!(one_way >= 10_000_000, "{one_way} ns");
        b.send_to(&[i; 40], (A_ADDR, 7000)).unwrap();
        let (n, _) = a.recv_from(&mut buf).unwrap();
        assert_eq!(n, 40);
    }
    let report = engine.stop().unwrap();
    let ab = report
        .directions
        .iter()
        .find(|d| d.way == Way::AToB)
        .unwrap();
    assert!(ab.counters.conserved());
    // Eight datagrams and the ARP exchange.
    assert!(ab.counters.delivered >= 8, "{:?}", ab.counters);
    assert_eq!(ab.kernel_drops, Some(0));
}

/// Not a test of its own: the process that [`the_program_leaves_the_interface_when_its_process_is_killed`]
/// starts and kills. It opens AF_XDP on `ea` in the namespace `RTEMU_XDP_CHILD_NS` names, says
/// `ready`, and waits to be killed (at most 30 s).
#[test]
#[ignore = "run by the_program_leaves_the_interface_when_its_process_is_killed"]
fn child_holding_af_xdp() {
    let Some(ns) = std::env::var_os("RTEMU_XDP_CHILD_NS") else {
        return;
    };
    let ns = netns::named(&ns.to_string_lossy());
    let io = netns::run_in(&ns, || AfXdp::open("ea", &AfXdpConfig::default()))
        .unwrap()
        .unwrap();
    println!("ready");
    std::thread::sleep(Duration::from_secs(30));
    drop(io);
}

#[test]
fn the_program_leaves_the_interface_when_its_process_is_killed() {
    if !root_or_skip("the_program_leaves_the_interface_when_its_process_is_killed") {
        return;
    }
    let lab = Lab::new();
    // Dropped: the program goes with its owner.
    let ends = lab.engine_ends_xdp(AfXdpConfig::default());
    assert!(lab.link_details(&lab.e, "ea").contains("prog/xdp"));
    drop(ends);
    assert!(!lab.link_details(&lab.e, "ea").contains("prog/xdp"));

    // Killed: the kernel closes the link's descriptor, which detaches the program.
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "child_holding_af_xdp",
            "--nocapture",
        ])
        .env("RTEMU_XDP_CHILD_NS", &lab.e)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let ready = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok)
        .any(|l| l == "ready");
    let attached = lab.link_details(&lab.e, "ea");
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(ready, "the child set AF_XDP up");
    assert!(attached.contains("prog/xdp"), "{attached}");
    let after = lab.link_details(&lab.e, "ea");
    assert!(!after.contains("prog/xdp"), "{after}");
}
