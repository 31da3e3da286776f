//! What a model sees of a packet: metadata only, never the bytes.

use std::net::{IpAddr, Ipv4Addr};

/// Nanoseconds on the engine's clock (virtual in the simulator, `CLOCK_MONOTONIC` in the
/// real-time engine). Absolute times and durations share the unit.
pub type Nanos = u64;

/// The 5-tuple that identifies a flow, for per-flow models and traces.
///
/// Frames that are not IP (ARP, for instance) carry the default key: unspecified addresses,
/// port 0, protocol 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlowKey {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Source port (0 when the protocol has none).
    pub src_port: u16,
    /// Destination port (0 when the protocol has none).
    pub dst_port: u16,
    /// IP protocol number (6 TCP, 17 UDP, …).
    pub protocol: u8,
}

impl Default for FlowKey {
    fn default() -> Self {
        FlowKey {
            src: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            dst: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            src_port: 0,
            dst_port: 0,
            protocol: 0,
        }
    }
}

/// A packet as a model sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketMeta {
    /// Length of the Ethernet frame as captured, header included, FCS and preamble not — what
    /// netem sees on a veth.
    pub len: u32,
    /// The flow the packet belongs to.
    pub flow: FlowKey,
    /// When the packet reached the link.
    pub arrival_ns: Nanos,
    /// Position of the packet in the link direction's input, from 0.
    pub seq: u64,
}
