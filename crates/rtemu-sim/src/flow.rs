//! The flow key of a captured frame: a zero-copy look at its Ethernet and IP headers.
//!
//! Only what a model needs is read (addresses, ports, protocol). Frames that are not IP, or
//! that are cut short, get the default key rather than an error: a capture may hold anything,
//! and a malformed frame is still a frame to impair.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use rtemu_model::FlowKey;

/// pcap link types this module understands besides Ethernet.
pub mod link_type {
    pub use crate::source::LINKTYPE_ETHERNET as ETHERNET;
    /// Raw IPv4 or IPv6, no link-layer header.
    pub const RAW: u32 = 101;
    /// Linux "cooked" capture, version 1.
    pub const LINUX_SLL: u32 = 113;
}

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const ETHERTYPE_VLAN: [u16; 3] = [0x8100, 0x88a8, 0x9100];

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// The flow key of `frame`, captured with link type `link`.
pub fn flow_key(link: u32, frame: &[u8]) -> FlowKey {
    ip_packet(link, frame).and_then(ip_flow).unwrap_or_default()
}

/// The IPv4 or IPv6 packet inside `frame`, captured with link type `link`, if it holds one.
pub fn ip_packet(link: u32, frame: &[u8]) -> Option<&[u8]> {
    match link {
        link_type::ETHERNET => ethernet_payload(frame),
        link_type::LINUX_SLL => be16(frame, 14).and_then(|t| ip_of(t, frame.get(16..)?)),
        link_type::RAW => Some(frame),
        _ => None,
    }
}

fn ip_of(ethertype: u16, payload: &[u8]) -> Option<&[u8]> {
    matches!(ethertype, ETHERTYPE_IPV4 | ETHERTYPE_IPV6).then_some(payload)
}

fn ethernet_payload(frame: &[u8]) -> Option<&[u8]> {
    let mut at = 12;
    let mut ethertype = be16(frame, at)?;
    // Skip up to two VLAN tags (802.1Q, QinQ).
    for _ in 0..2 {
        if !ETHERTYPE_VLAN.contains(&ethertype) {
            break;
        }
        at += 4;
        ethertype = be16(frame, at)?;
    }
    ip_of(ethertype, frame.get(at + 2..)?)
}

fn ip_flow(ip: &[u8]) -> Option<FlowKey> {
    let version = ip.first()? >> 4;
    let (src, dst, protocol, l4) = match version {
        4 => {
            let ihl = (ip[0] & 0x0f) as usize * 4;
            let src: [u8; 4] = ip.get(12..16)?.try_into().ok()?;
            let dst: [u8; 4] = ip.get(16..20)?.try_into().ok()?;
            // Only the first fragment carries the transport header.
            let first_fragment = be16(ip, 6)? & 0x1fff == 0;
            let l4 = if first_fragment { ip.get(ihl..) } else { None };
            (
                IpAddr::V4(Ipv4Addr::from(src)),
                IpAddr::V4(Ipv4Addr::from(dst)),
                *ip.get(9)?,
                l4,
            )
        }
        6 => {
            let src: [u8; 16] = ip.get(8..24)?.try_into().ok()?;
            let dst: [u8; 16] = ip.get(24..40)?.try_into().ok()?;
            (
                IpAddr::V6(Ipv6Addr::from(src)),
                IpAddr::V6(Ipv6Addr::from(dst)),
                *ip.get(6)?,
                ip.get(40..),
            )
        }
        _ => return None,
    };
    // TCP, UDP, SCTP and UDP-Lite start with the two ports.
    let (src_port, dst_port) = match (protocol, l4) {
        (6 | 17 | 132 | 136, Some(l4)) => (be16(l4, 0).unwrap_or(0), be16(l4, 2).unwrap_or(0)),
        _ => (0, 0),
    };
    Some(FlowKey {
        src,
        dst,
        src_port,
        dst_port,
        protocol,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn udp4() -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 8];
        f[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        f[14] = 0x45;
        f[14 + 9] = 17;
        f[14 + 12..14 + 16].copy_from_slice(&[10, 0, 0, 1]);
        f[14 + 16..14 + 20].copy_from_slice(&[10, 0, 0, 2]);
        f[34..36].copy_from_slice(&5000u16.to_be_bytes());
        f[36..38].copy_from_slice(&53u16.to_be_bytes());
        f
    }

    #[test]
    fn reads_an_ipv4_udp_five_tuple_also_behind_a_vlan_tag() {
        let f = udp4();
        let k = flow_key(link_type::ETHERNET, &f);
        assert_eq!(k.src, IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)));
        assert_eq!((k.src_port, k.dst_port, k.protocol), (5000, 53, 17));
        let mut tagged = f[..12].to_vec();
        tagged.extend_from_slice(&[0x81, 0x00, 0x00, 0x07]);
        tagged.extend_from_slice(&f[12..]);
        assert_eq!(flow_key(link_type::ETHERNET, &tagged), k);
        assert_eq!(flow_key(link_type::RAW, &f[14..]), k);
    }

    #[test]
    fn short_or_foreign_frames_get_the_default_key() {
        let f = udp4();
        for cut in 0..34 {
            assert_eq!(
                flow_key(link_type::ETHERNET, &f[..cut]),
                FlowKey::default(),
                "cut at {cut}"
            );
        }
        let mut arp = f.clone();
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        assert_eq!(flow_key(link_type::ETHERNET, &arp), FlowKey::default());
    }
}
