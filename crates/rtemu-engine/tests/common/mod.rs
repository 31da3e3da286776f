//! Three namespaces joined through the engine, for the root tests and the benchmark:
//!
//! ```text
//! A: na 10.77.0.1 ═veth═ E: ea [engine] eb ═veth═ B: nb 10.77.0.2
//! ```
//!
//! Names carry the process id and a counter, so concurrent tests and runs never collide, and
//! the guard deletes the namespaces (and with them the veths) when dropped, also when an
//! assertion failed. IPv6 is off in all three, so the only frames on the wire are the test's own
//! and ARP. Offloads are off on all four veth ends, as the engine requires.
#![allow(dead_code)] // each test binary uses a different part

use std::net::{Ipv4Addr, UdpSocket};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use rtemu_clock::Instant;
use rtemu_engine::afpacket::{AfPacket, AfPacketConfig};
use rtemu_engine::direction::{DirectionConfig, Resolution};
use rtemu_engine::engine::{self, EngineConfig, EngineHandle, LinkSpec, RtConfig};
use rtemu_engine::io::PacketIo;
use rtemu_engine::xdp::{AfXdp, AfXdpConfig};
use rtemu_engine::{netns, offload};
use rtemu_model::{link::NoTables, netem, LinkModel};

pub const A_ADDR: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
pub const B_ADDR: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);

/// Whether the test may run: root and iproute2's `ip`; panics when root is required
/// (`RTEMU_REQUIRE_ROOT=1`) but either is missing.
pub fn root_or_skip(test: &str) -> bool {
    rtemu_testutil::root_or_skip(
        test,
        "creates network namespaces, AF_PACKET and AF_XDP sockets",
    ) && rtemu_testutil::program_or_skip(test, "ip", "-V", "iproute2")
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("running ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The three namespaces; deleted on drop.
pub struct Lab {
    pub a: String,
    pub b: String,
    pub e: String,
}

impl Lab {
    pub fn new() -> Lab {
        static COUNT: AtomicU32 = AtomicU32::new(0);
        let id = format!(
            "{}-{}",
            std::process::id(),
            COUNT.fetch_add(1, Ordering::Relaxed)
        );
        let lab = Lab {
            a: format!("rtemu-eng{id}-a"),
            b: format!("rtemu-eng{id}-b"),
            e: format!("rtemu-eng{id}-e"),
        };
        for ns in [&lab.a, &lab.b, &lab.e] {
            ip(&["netns", "add", ns]);
            let off = netns::run_in(&netns::named(ns), || {
                ["all", "default"].iter().try_for_each(|conf| {
                    std::fs::write(format!("/proc/sys/net/ipv6/conf/{conf}/disable_ipv6"), "1")
                })
            });
            off.unwrap().unwrap();
        }
        ip(&[
            "-n", &lab.e, "link", "add", "ea", "type", "veth", "peer", "name", "na", "netns",
            &lab.a,
        ]);
        ip(&[
            "-n", &lab.e, "link", "add", "eb", "type", "veth", "peer", "name", "nb", "netns",
            &lab.b,
        ]);
        ip(&["-n", &lab.a, "addr", "add", "10.77.0.1/24", "dev", "na"]);
        ip(&["-n", &lab.b, "addr", "add", "10.77.0.2/24", "dev", "nb"]);
        for (ns, dev) in [
            (&lab.a, "na"),
            (&lab.b, "nb"),
            (&lab.e, "ea"),
            (&lab.e, "eb"),
        ] {
            let name = dev.to_owned();
            netns::run_in(&netns::named(ns), move || offload::disable(&name))
                .unwrap()
                .unwrap();
            ip(&["-n", ns, "link", "set", dev, "up"]);
        }
        lab
    }

    /// Opens the engine's two ends (facing A, facing B) inside the engine namespace.
    pub fn engine_ends(&self, ring: AfPacketConfig) -> (AfPacket, AfPacket) {
        netns::run_in(&netns::named(&self.e), move || {
            (AfPacket::open("ea", &ring), AfPacket::open("eb", &ring))
        })
        .map(|(a, b)| (a.unwrap(), b.unwrap()))
        .unwrap()
    }

    /// Opens the engine's two ends over AF_XDP.
    pub fn engine_ends_xdp(&self, config: AfXdpConfig) -> (AfXdp, AfXdp) {
        netns::run_in(&netns::named(&self.e), move || {
            (AfXdp::open("ea", &config), AfXdp::open("eb", &config))
        })
        .map(|(a, b)| (a.unwrap(), b.unwrap()))
        .unwrap()
    }

    /// Opens interface `dev` in namespace `ns`.
    pub fn open(&self, ns: &str, dev: &str, ring: AfPacketConfig) -> AfPacket {
        let dev = dev.to_owned();
        netns::run_in(&netns::named(ns), move || AfPacket::open(&dev, &ring))
            .unwrap()
            .unwrap()
    }

    /// A send-only socket on interface `dev` in namespace `ns`.
    pub fn open_sender(&self, ns: &str, dev: &str, ring: AfPacketConfig) -> AfPacket {
        let dev = dev.to_owned();
        netns::run_in(&netns::named(ns), move || {
            AfPacket::open_sender(&dev, &ring)
        })
        .unwrap()
        .unwrap()
    }

    /// A UDP socket bound to `addr:port` inside namespace `ns`.
    pub fn udp(&self, ns: &str, addr: Ipv4Addr, port: u16) -> UdpSocket {
        netns::run_in(&netns::named(ns), move || UdpSocket::bind((addr, port)))
            .unwrap()
            .unwrap()
    }

    /// What `ip -d link show` says of interface `dev` in namespace `ns` (an attached XDP
    /// program shows as `prog/xdp`).
    pub fn link_details(&self, ns: &str, dev: &str) -> String {
        let out = Command::new("ip")
            .args(["-n", ns, "-d", "link", "show", "dev", dev])
            .output()
            .expect("running ip");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn path(ns: &str) -> PathBuf {
        netns::named(ns)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for ns in [&self.a, &self.b, &self.e] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

/// A frame with a recognisable body, optionally behind an 802.1Q tag.
pub fn frame(id: u8, tagged: bool) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 0x99, 2, 0, 0, 0, 0, 0x01];
    if tagged {
        f.extend_from_slice(&[0x81, 0x00, 0x20, 0x2a]); // priority 1, VLAN 42
    }
    f.extend_from_slice(&0x88b5u16.to_be_bytes()); // local experimental ethertype
    f.extend((0..60).map(|i| id.wrapping_add(i)));
    f
}

/// Receives on `io` until `want` frames came or a second passed; returns them as sent.
pub fn collect(io: &mut impl PacketIo, want: usize) -> Vec<Vec<u8>> {
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

/// Sends 200 frames from `tx` before `rx` reads any, then reads them: returns what `rx`
/// received and what its drop probe counted, and checks that a second reading of the probe
/// finds nothing (each drop counted once).
pub fn overflow(tx: &mut impl PacketIo, rx: &mut impl PacketIo) -> (u64, u64) {
    let mut probe = rx.drop_probe().expect("the I/O layer counts its drops");
    assert_eq!(probe.take().unwrap(), 0);
    for round in 0..4u8 {
        for i in 0..50 {
            assert!(tx.stage(&frame(round * 50 + i, false)));
        }
        tx.flush().unwrap();
    }
    std::thread::sleep(Duration::from_millis(50));
    let dropped = probe.take().unwrap();
    let received = collect(rx, 200).len() as u64;
    assert_eq!(probe.take().unwrap(), 0, "each drop is counted once");
    (received, dropped)
}

/// Moves the calling thread off `cpu` (onto the others), where there are others.
pub fn keep_off(cpu: usize) {
    rtemu_engine::engine::keep_off(&[cpu]);
}

/// One direction of a test link: the netem model `text`, its stream told apart by `label`.
pub fn direction(text: &str, label: u64) -> DirectionConfig {
    let cfg = netem::parse(text).unwrap();
    DirectionConfig {
        model: Box::new(LinkModel::new(&cfg, &NoTables, 42, label).unwrap()),
        resolution: Resolution::Pass {
            delay_ns: cfg.delay.0,
        },
        pool_frames: 1024,
        slot_size: 1600,
        late_after_ns: 100_000,
    }
}

/// The engine as a lab runs it (the `auto` wait, `SCHED_FIFO` within its budget), without the
/// process-wide set-up a test binary should not make (memory locked, `cpu_dma_latency`).
pub fn config() -> EngineConfig {
    EngineConfig {
        rt: RtConfig {
            lock_memory: false,
            hold_dma_latency: false,
            ..RtConfig::default()
        },
        ..EngineConfig::default()
    }
}

/// Starts the engine on one link `ab` between the I/O ends `a` and `b`, with the netem models
/// `a_to_b` and `b_to_a`.
pub fn start<Io: PacketIo + Send + 'static>(
    a: Io,
    b: Io,
    a_to_b: &str,
    b_to_a: &str,
) -> EngineHandle {
    let link = LinkSpec {
        name: "ab".into(),
        a,
        b,
        a_to_b: direction(a_to_b, 1),
        b_to_a: direction(b_to_a, 2),
        senders: None,
    };
    engine::spawn(config(), vec![link]).unwrap()
}
