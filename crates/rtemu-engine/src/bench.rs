//! The pieces of a throughput benchmark on veth, shared by `rtemu-bench engine` and
//! `examples/engine_bench.rs`: a cheap generator, a cheap sink and a bare relay.
//!
//! On a small machine the traffic generator competes with what it measures, so it must cost
//! as little as possible: [`flood`] hands one prebuilt frame to a transmit ring (an
//! [`crate::afpacket::AfPacket`] with `PACKET_QDISC_BYPASS`: one `sendto` per batch, no socket
//! buffer, no qdisc) as fast as the ring takes it, for a bounded time. The sink costs nothing
//! either: [`udp_frame`] addresses frames to [`FOREIGN_MAC`], which no interface has, so the
//! receiving kernel drops them as soon as it sees the address, and the frames that arrived are
//! read from the receiving interface's counters
//! ([`crate::ifcounters::interface_counters`]), not from a socket.
//! [`relay`] is the limit of an I/O layer: each received frame staged at once on the other
//! interface, with no model, no pool and no timing queue.
//!
//! Non-goals: pacing (the flood offers all it can), IPv6, and any check of what arrived beyond
//! counting it.

use std::io;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};

use rtemu_clock::time::thread_cpu_time_ns;
use rtemu_clock::Instant;
use rtemu_model::wire::Udp4;

use crate::io::PacketIo;

/// A locally administered unicast address that no interface of a lab has: a kernel receiving a
/// frame for it drops it before its IP layer does any work.
pub const FOREIGN_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x99];

/// Frames one flush of [`flood`] and one turn of [`relay`] carry at most.
pub const BATCH: usize = 64;

/// The frame check sequence, counted on the wire but never handed to packet sockets.
const FCS: usize = 4;

/// The smallest Ethernet frame on the wire, FCS included.
pub const MIN_WIRE: usize = 64;

/// The largest frame [`udp_frame`] builds: the IPv4 total length is 16 bits.
pub const MAX_WIRE: usize = Udp4::MAX_FRAME + FCS;

/// A frame length [`udp_frame`] cannot build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a frame of {0} bytes on the wire cannot be built: give {MIN_WIRE} to {MAX_WIRE} (the FCS included)")]
pub struct FrameLengthError(pub usize);

/// The addresses of a generated UDP-in-IPv4 frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpFrame {
    /// Destination MAC: [`FOREIGN_MAC`] for a sink on the same link, or the next router's.
    pub dst_mac: [u8; 6],
    /// Source MAC: the sending interface's, so a router that looks at it sees a neighbour.
    pub src_mac: [u8; 6],
    /// Source address: the sender's, so a router's reverse-path check passes.
    pub src: Ipv4Addr,
    /// Destination address: where a router forwards the frame to.
    pub dst: Ipv4Addr,
    /// UDP source and destination port.
    pub port: u16,
}

/// Builds `spec` as a frame of `wire` bytes on the wire (FCS included, so the buffer is 4 bytes
/// shorter), with a valid IPv4 header checksum (a router drops frames without one), TTL 64, and
/// a UDP checksum of 0 (none, as IPv4 allows).
pub fn udp_frame(spec: &UdpFrame, wire: usize) -> Result<Vec<u8>, FrameLengthError> {
    if !(MIN_WIRE..=MAX_WIRE).contains(&wire) {
        return Err(FrameLengthError(wire));
    }
    let headers = Udp4 {
        dst_mac: spec.dst_mac,
        src_mac: spec.src_mac,
        src: spec.src,
        dst: spec.dst,
        src_port: spec.port,
        dst_port: spec.port,
        ttl: 64,
        dont_fragment: false,
    };
    headers
        .frame(wire - FCS)
        .map_err(|_| FrameLengthError(wire))
}

/// What a [`flood`] or a [`relay`] did, and what it cost its thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Work {
    /// Frames received (a relay's; 0 for a flood).
    pub received: u64,
    /// Frames handed to the kernel.
    pub sent: u64,
    /// Wall time, ns.
    pub elapsed_ns: u64,
    /// The thread's CPU time over it, ns (softirq work the kernel ran in the thread's context
    /// included, as the kernel charges it).
    pub cpu_ns: u64,
}

impl Work {
    /// Frames sent per second.
    pub fn sent_per_s(&self) -> f64 {
        self.sent as f64 * 1e9 / self.elapsed_ns.max(1) as f64
    }

    /// The thread's CPU time over the wall time, in % of one core.
    pub fn cpu_percent(&self) -> f64 {
        self.cpu_ns as f64 * 100.0 / self.elapsed_ns.max(1) as f64
    }
}

/// Sends `frame` through `tx` as fast as it takes it, in flushes of up to [`BATCH`] frames,
/// for `duration_ns`; the calling thread does the work, so pin it first. Fails at once when
/// `frame` does not fit `tx`'s slots, or when a flush fails.
pub fn flood<P: PacketIo>(tx: &mut P, frame: &[u8], duration_ns: u64) -> io::Result<Work> {
    if frame.len() > tx.max_frame() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "a {}-byte frame does not fit the {}-byte transmit slots",
                frame.len(),
                tx.max_frame()
            ),
        ));
    }
    let cpu0 = thread_cpu_time_ns();
    let t0 = Instant::now();
    let end = t0 + duration_ns;
    let mut sent = 0u64;
    while Instant::now() < end {
        for _ in 0..BATCH {
            if !tx.stage(frame) {
                break;
            }
            sent += 1;
        }
        flush_past_drops(tx)?;
    }
    Ok(Work {
        received: 0,
        sent,
        elapsed_ns: Instant::now().nanos_since(t0),
        cpu_ns: thread_cpu_time_ns() - cpu0,
    })
}

/// Stages every frame `from` receives on `to` at once and flushes after each batch, until
/// `stop` is set (one more turn after that, so frames already received leave); spins, never
/// sleeps. A frame that finds every transmit slot busy is lost: `received − sent`.
pub fn relay<A: PacketIo, B: PacketIo>(
    from: &mut A,
    to: &mut B,
    stop: &AtomicBool,
) -> io::Result<Work> {
    let cpu0 = thread_cpu_time_ns();
    let t0 = Instant::now();
    let (mut received, mut sent) = (0u64, 0u64);
    loop {
        let stopping = stop.load(Ordering::Relaxed);
        let n = from.recv_batch(BATCH, |f| sent += to.stage(f.data) as u64);
        if n > 0 {
            flush_past_drops(to)?;
            received += n as u64;
        }
        if stopping {
            break;
        }
    }
    Ok(Work {
        received,
        sent,
        elapsed_ns: Instant::now().nanos_since(t0),
        cpu_ns: thread_cpu_time_ns() - cpu0,
    })
}

/// Flushes `io`; a frame the kernel dropped on the way (`ENOBUFS`: a veth whose peer's queue
/// is full, as when an XDP program on the peer falls behind) is a lost frame, counted by the
/// interfaces, not a failure of the benchmark, and the frames behind it go at the next flush.
fn flush_past_drops<P: PacketIo>(io: &mut P) -> io::Result<()> {
    match io.flush() {
        Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::mem::MemIo;

    fn spec() -> UdpFrame {
        UdpFrame {
            dst_mac: FOREIGN_MAC,
            src_mac: [2, 0x72, 0x74, 0, 0, 1],
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::new(198, 18, 0, 99),
            port: 9000,
        }
    }

    #[test]
    fn a_frame_has_the_asked_length_and_addresses() {
        for wire in [64, 1400, 1518] {
            let f = udp_frame(&spec(), wire).unwrap();
            assert_eq!(f.len(), wire - 4);
            assert_eq!(&f[0..6], &FOREIGN_MAC);
            assert_eq!(&f[6..12], &[2, 0x72, 0x74, 0, 0, 1]);
            assert_eq!(&f[12..14], &[0x08, 0x00]);
            assert_eq!(u16::from_be_bytes([f[16], f[17]]) as usize, wire - 4 - 14);
            assert_eq!(&f[26..30], &[10, 0, 0, 1]);
            assert_eq!(&f[30..34], &[198, 18, 0, 99]);
            assert_eq!(u16::from_be_bytes([f[36], f[37]]), 9000);
            assert_eq!(u16::from_be_bytes([f[38], f[39]]) as usize, wire - 4 - 34);
        }
    }

    #[test]
    fn the_ipv4_header_checksum_verifies() {
        let f = udp_frame(&spec(), 64).unwrap();
        // Summed with its checksum in place, a valid header gives all ones, which the
        // complement makes 0.
        assert_eq!(rtemu_model::wire::internet_checksum(&f[14..34]), 0);
        assert_ne!(&f[24..26], &[0, 0]);
    }

    #[test]
    fn lengths_out_of_range_are_refused() {
        assert_eq!(udp_frame(&spec(), 63), Err(FrameLengthError(63)));
        assert_eq!(udp_frame(&spec(), 0), Err(FrameLengthError(0)));
        assert_eq!(
            udp_frame(&spec(), MAX_WIRE + 1),
            Err(FrameLengthError(MAX_WIRE + 1))
        );
        assert!(udp_frame(&spec(), MAX_WIRE).is_ok());
    }

    #[test]
    fn a_flood_sends_what_it_counts_and_stops_in_time() {
        let frame = udp_frame(&spec(), 64).unwrap();
        let mut tx = MemIo::new(BATCH);
        let t0 = std::time::Instant::now();
        let work = flood(&mut tx, &frame, 5_000_000).unwrap();
        assert!(t0.elapsed() < std::time::Duration::from_secs(1));
        assert!(work.sent > 0);
        assert_eq!(work.sent as usize, tx.sent.len());
        assert!(tx.sent.iter().all(|f| *f == frame));
        assert!(work.elapsed_ns >= 5_000_000);
    }

    #[test]
    fn a_flood_refuses_a_frame_its_slots_cannot_hold() {
        let mut tx = MemIo::new(BATCH);
        let big = vec![0u8; tx.max_frame() + 1];
        let e = flood(&mut tx, &big, 1_000_000).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(tx.sent.is_empty());
    }

    /// Sends nothing: every flush finds the peer's queue full.
    struct Full(MemIo);

    impl PacketIo for Full {
        fn recv_batch<F: FnMut(crate::io::Frame<'_>)>(&mut self, max: usize, f: F) -> usize {
            self.0.recv_batch(max, f)
        }
        fn stage(&mut self, frame: &[u8]) -> bool {
            self.0.stage(frame)
        }
        fn flush(&mut self) -> io::Result<()> {
            self.0.staged.clear();
            Err(io::Error::from_raw_os_error(libc::ENOBUFS))
        }
        fn max_frame(&self) -> usize {
            self.0.max_frame()
        }
        fn poll_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
            None
        }
    }

    #[test]
    fn a_full_peer_queue_loses_frames_but_does_not_end_the_flood() {
        let frame = udp_frame(&spec(), 64).unwrap();
        let work = flood(&mut Full(MemIo::new(BATCH)), &frame, 2_000_000).unwrap();
        assert!(work.sent > 0);
        assert!(work.elapsed_ns >= 2_000_000);
    }

    #[test]
    fn a_stopped_relay_still_forwards_what_it_received() {
        let mut from = MemIo::new(0);
        for i in 0..5u8 {
            from.inbox.push_back(vec![i; 60]);
        }
        let mut to = MemIo::new(BATCH);
        let work = relay(&mut from, &mut to, &AtomicBool::new(true)).unwrap();
        assert_eq!((work.received, work.sent), (5, 5));
        assert_eq!(to.sent, (0..5u8).map(|i| vec![i; 60]).collect::<Vec<_>>());
    }

    #[test]
    fn a_relay_counts_frames_that_found_no_slot() {
        let mut from = MemIo::new(0);
        for _ in 0..5 {
            from.inbox.push_back(vec![0; 60]);
        }
        let mut to = MemIo::new(3);
        let work = relay(&mut from, &mut to, &AtomicBool::new(true)).unwrap();
        assert_eq!((work.received, work.sent), (5, 3));
    }
}
