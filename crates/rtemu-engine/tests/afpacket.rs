//! The `AF_PACKET` I/O layer on real veths: frames cross unchanged (a VLAN tag the device
//! took off is put back), and frames lost to a full receive ring are counted.
//!
//! Needs root; skips with the reason otherwise, unless `RTEMU_REQUIRE_ROOT=1`.

mod common;

use std::time::Duration;

use common::{root_or_skip, Lab};
use rtemu_clock::Instant;
use rtemu_engine::afpacket::AfPacketConfig;
use rtemu_engine::io::PacketIo;

/// A frame with a recognisable body, optionally behind an 802.1Q tag.
fn frame(id: u8, tagged: bool) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 0x99, 2, 0, 0, 0, 0, 0x01];
    if tagged {
        f.extend_from_slice(&[0x81, 0x00, 0x20, 0x2a]); // priority 1, VLAN 42
    }
    f.extend_from_slice(&0x88b5u16.to_be_bytes()); // local experimental ethertype
    f.extend((0..60).map(|i| id.wrapping_add(i)));
    f
}

/// Receives on `io` until `want` frames came or a second passed; returns them as sent.
fn collect(io: &mut impl PacketIo, want: usize) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let end = Instant::now() + 1_000_000_000;
    while got.len() < want && Instant::now() < end {
        let n = io.recv_batch(64, |f| {
            let mut buf = vec![0u8; f.len()];
            assert_eq!(f.copy_to(&mut buf), Some(f.len()));
            assert!(!f.is_truncated());
            got.push(buf);
        });
        if n == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    got
}

#[test]
fn frames_cross_unchanged_with_their_vlan_tag() {
    if !root_or_skip("frames_cross_unchanged_with_their_vlan_tag") {
        return;
    }
    let lab = Lab::new();
    let ring = AfPacketConfig::default();
    let mut tx = lab.open(&lab.a, "na", ring);
    let (mut rx, _) = lab.engine_ends(ring);
    let sent = vec![frame(1, false), frame(2, true), frame(3, false)];
    for f in &sent {
        assert!(tx.stage(f));
    }
    tx.flush().unwrap();
    assert_eq!(collect(&mut rx, sent.len()), sent);
}

#[test]
fn a_full_receive_ring_is_counted_by_the_drop_probe() {
    if !root_or_skip("a_full_receive_ring_is_counted_by_the_drop_probe") {
        return;
    }
    let lab = Lab::new();
    // The smallest rings: one block of 64 frames.
    let small = AfPacketConfig {
        rx_frames: 64,
        tx_frames: 64,
        ..AfPacketConfig::default()
    };
    let mut tx = lab.open(&lab.a, "na", small);
    let (mut rx, _) = lab.engine_ends(small);
    let mut probe = rx.drop_probe().expect("AF_PACKET can count its drops");
    assert_eq!(probe.take().unwrap(), 0);
    for round in 0..4u8 {
        for i in 0..50 {
            assert!(tx.stage(&frame(round * 50 + i, false)));
        }
        tx.flush().unwrap();
    }
    // Nothing was read yet: 64 frames fit, the other 136 were dropped by the kernel.
    std::thread::sleep(Duration::from_millis(50));
    let dropped = probe.take().unwrap();
    let received = collect(&mut rx, 200).len() as u64;
    assert_eq!((received, dropped), (64, 136));
    assert_eq!(probe.take().unwrap(), 0, "the counts reset when read");
}
