//! The `AF_PACKET` I/O layer on real veths: frames cross unchanged (a VLAN tag the device
//! took off is put back), and frames lost to a full receive ring are counted.
//!
//! Needs root; skips with the reason otherwise, unless `RTEMU_REQUIRE_ROOT=1`.

mod common;

use common::{collect, frame, overflow, root_or_skip, Lab};
use rtemu_engine::afpacket::AfPacketConfig;
use rtemu_engine::io::PacketIo;

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
    // 64 frames fit the receive ring, the other 136 are dropped by the kernel.
    assert_eq!(overflow(&mut tx, &mut rx), (64, 136));
}
