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

/// The ECN field of an IP header (RFC 3168, section 5): the two low bits of the IPv4 TOS byte
/// or of the IPv6 traffic class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Ecn {
    /// `00`: the sender does not take part in ECN (also every frame that is not IP).
    #[default]
    NotEct,
    /// `01`: ECN-capable transport, codepoint 1; L4S traffic (RFC 9331).
    Ect1,
    /// `10`: ECN-capable transport, codepoint 0; classic ECN (RFC 3168).
    Ect0,
    /// `11`: congestion experienced: a queue on the way marked it.
    Ce,
}

impl Ecn {
    /// The codepoint of the two low bits of `bits`.
    pub const fn from_bits(bits: u8) -> Ecn {
        match bits & 3 {
            0 => Ecn::NotEct,
            1 => Ecn::Ect1,
            2 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }

    /// The two bits.
    pub const fn bits(self) -> u8 {
        self as u8
    }

    /// Whether a queue may mark the packet instead of dropping it: ECT(0), ECT(1), or CE (a
    /// packet already marked was ECN-capable, and stays CE; RFC 3168, section 5).
    pub const fn is_capable(self) -> bool {
        !matches!(self, Ecn::NotEct)
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
    /// Its IP header's ECN field ([`Ecn::NotEct`] for frames that are not IP).
    pub ecn: Ecn,
}
