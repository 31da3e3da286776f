//! Frames on the wire: zero-copy views of Ethernet and IP headers, the Internet checksum, and
//! the UDP-in-IPv4 frames the generators and benchmarks send.
//!
//! Only what rtemu needs is read (addresses, ports, protocol, address resolution). Frames that
//! are not IP, or that are cut short, give `None` or the default key rather than an error: a
//! capture or a link may carry anything, and a malformed frame is still a frame to impair.
//! Nothing here allocates except [`Udp4::frame`].

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::{Ecn, FlowKey};

/// pcap link types (`LINKTYPE_*`) the header views understand ([`classified`] says which).
pub mod link_type {
    /// BSD loopback: a 4-byte address family in the capturing host's byte order.
    pub const NULL: u32 = 0;
    /// Ethernet II, optionally behind 802.1Q/802.1ad tags.
    pub const ETHERNET: u32 = 1;
    /// Raw IPv4 or IPv6, no link-layer header.
    pub const RAW: u32 = 101;
    /// OpenBSD loopback: a 4-byte address family in network byte order.
    pub const LOOP: u32 = 108;
    /// Linux "cooked" capture, version 1.
    pub const LINUX_SLL: u32 = 113;
    /// Raw IPv4, no link-layer header.
    pub const IPV4: u32 = 228;
    /// Raw IPv6, no link-layer header.
    pub const IPV6: u32 = 229;
    /// Linux "cooked" capture, version 2 (`tcpdump -i any` since libpcap 1.10).
    pub const LINUX_SLL2: u32 = 276;
}

/// Whether frames of link type `link` are read down to their IP header (so flows can be told
/// apart); others are impaired as frames, every one with the default flow key.
pub fn classified(link: u32) -> bool {
    use link_type::*;
    matches!(
        link,
        NULL | ETHERNET | RAW | LOOP | LINUX_SLL | IPV4 | IPV6 | LINUX_SLL2
    )
}

/// EtherTypes.
pub mod ethertype {
    /// IPv4.
    pub const IPV4: u16 = 0x0800;
    /// IPv6.
    pub const IPV6: u16 = 0x86dd;
    /// ARP.
    pub const ARP: u16 = 0x0806;
    /// VLAN tags: 802.1Q, 802.1ad (QinQ) and the older QinQ value.
    pub const VLAN: [u16; 3] = [0x8100, 0x88a8, 0x9100];
    /// IEEE 802 local experimental EtherType 1: free for experiments, never a real protocol.
    pub const LOCAL_EXPERIMENTAL: u16 = 0x88b5;
}

/// Bytes of an untagged Ethernet header: two addresses and the EtherType.
pub const ETHERNET_HEADER: usize = 14;
/// Bytes of an IPv4 header without options.
pub const IPV4_HEADER: usize = 20;
/// Bytes of an IPv6 header, extension headers not counted.
pub const IPV6_HEADER: usize = 40;
/// Bytes of a UDP header.
pub const UDP_HEADER: usize = 8;
/// Ethernet, IPv4 and UDP headers together: the smallest [`Udp4`] frame.
pub const UDP4_HEADERS: usize = ETHERNET_HEADER + IPV4_HEADER + UDP_HEADER;

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// The EtherType of an Ethernet frame past up to two VLAN tags (802.1Q, QinQ), and where it
/// stands.
fn inner_ethertype(frame: &[u8]) -> Option<(u16, usize)> {
    let mut at = 12;
    let mut ethertype = be16(frame, at)?;
    for _ in 0..2 {
        if !ethertype::VLAN.contains(&ethertype) {
            break;
        }
        at += 4;
        ethertype = be16(frame, at)?;
    }
    Some((ethertype, at))
}

/// Where the IPv4 or IPv6 packet inside `frame` (link type `link`) starts, if it holds one.
fn ip_offset(link: u32, frame: &[u8]) -> Option<usize> {
    let (ethertype, at) = match link {
        link_type::ETHERNET => {
            let (ethertype, at) = inner_ethertype(frame)?;
            (ethertype, at + 2)
        }
        link_type::LINUX_SLL => (be16(frame, 14)?, 16),
        link_type::LINUX_SLL2 => (be16(frame, 0)?, 20),
        link_type::RAW | link_type::IPV4 | link_type::IPV6 => return Some(0),
        // The address family says whether IP follows; the version nibble of the packet then
        // says which, so the family's numbering (it differs between systems for IPv6) and the
        // byte order of NULL's need not be known.
        link_type::NULL | link_type::LOOP => {
            let family: [u8; 4] = frame.get(..4)?.try_into().ok()?;
            let is_ip = [2u32, 10, 24, 28, 30]
                .iter()
                .any(|&f| family == f.to_be_bytes() || family == f.to_le_bytes());
            return is_ip.then_some(4);
        }
        _ => return None,
    };
    (matches!(ethertype, ethertype::IPV4 | ethertype::IPV6) && at <= frame.len()).then_some(at)
}

/// The IPv4 or IPv6 packet inside `frame`, captured with link type `link`, if it holds one.
/// Ethernet frames may carry up to two VLAN tags (802.1Q, QinQ).
pub fn ip_packet(link: u32, frame: &[u8]) -> Option<&[u8]> {
    frame.get(ip_offset(link, frame)?..)
}

/// The ECN field of the IP header in `frame` (link type `link`); [`Ecn::NotEct`] when it holds
/// no IPv4 or IPv6 header.
pub fn ecn(link: u32, frame: &[u8]) -> Ecn {
    let Some(ip) = ip_packet(link, frame) else {
        return Ecn::NotEct;
    };
    match (ip.first().map(|b| b >> 4), ip.get(1)) {
        (Some(4), Some(tos)) if ip.len() >= IPV4_HEADER => Ecn::from_bits(*tos),
        // The traffic class straddles bytes 0 and 1; its two low bits are bits 4–5 of byte 1.
        (Some(6), Some(b)) if ip.len() >= IPV6_HEADER => Ecn::from_bits(b >> 4),
        _ => Ecn::NotEct,
    }
}

/// Marks the IP packet in `frame` (link type `link`) "congestion experienced", as a queue does
/// instead of dropping it (RFC 3168, section 5): an ECT(0) or ECT(1) packet becomes CE, with the
/// IPv4 header checksum updated incrementally (RFC 1624, equation 3), so the rest of the header
/// is neither read nor trusted. Returns whether the packet is now CE: true for ECT and CE
/// packets, false (and nothing changed) for Not-ECT packets and frames that hold no IP header.
pub fn mark_ce(link: u32, frame: &mut [u8]) -> bool {
    let Some(at) = ip_offset(link, frame) else {
        return false;
    };
    let ip = &mut frame[at..];
    match ip.first().map(|b| b >> 4) {
        Some(4) if ip.len() >= IPV4_HEADER => {
            let old = u16::from_be_bytes([ip[0], ip[1]]);
            match Ecn::from_bits(ip[1]) {
                Ecn::NotEct => return false,
                Ecn::Ce => return true,
                Ecn::Ect0 | Ecn::Ect1 => ip[1] |= Ecn::Ce.bits(),
            }
            let new = u16::from_be_bytes([ip[0], ip[1]]);
            let check = u16::from_be_bytes([ip[10], ip[11]]);
            // HC' = ~(~HC + ~m + m'), in one's-complement arithmetic.
            let sum = u32::from(!check) + u32::from(!old) + u32::from(new);
            ip[10..12].copy_from_slice(&(!fold(sum)).to_be_bytes());
            true
        }
        Some(6) if ip.len() >= IPV6_HEADER => match Ecn::from_bits(ip[1] >> 4) {
            Ecn::NotEct => false,
            _ => {
                // No checksum covers the IPv6 header.
                ip[1] |= Ecn::Ce.bits() << 4;
                true
            }
        },
        _ => false,
    }
}

/// The flow key of `frame`, captured with link type `link`; the default key when it holds no
/// readable IP header.
pub fn flow_key(link: u32, frame: &[u8]) -> FlowKey {
    ip_packet(link, frame).and_then(ip_flow).unwrap_or_default()
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

/// Whether `frame` (Ethernet) is ARP or IPv6 neighbour discovery (ICMPv6 133–137).
pub fn is_address_resolution(frame: &[u8]) -> bool {
    if matches!(inner_ethertype(frame), Some((ethertype::ARP, _))) {
        return true;
    }
    match ip_packet(link_type::ETHERNET, frame) {
        Some(ip) if ip.first().map(|b| b >> 4) == Some(6) => {
            ip.get(6) == Some(&58) && matches!(ip.get(40), Some(133..=137))
        }
        _ => false,
    }
}

/// The sum of `bytes` as big-endian 16-bit words, an odd last byte padded with zero: the
/// first step of the Internet checksum (RFC 1071). Sums of pieces add up before [`fold`].
pub fn sum_words(bytes: &[u8]) -> u32 {
    bytes
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)])))
        .sum()
}

/// Folds the carries of a one's-complement sum into 16 bits.
pub fn fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// The Internet checksum (RFC 1071) of `bytes`, e.g. an IPv4 header whose checksum field is
/// zero. Over bytes that hold a valid checksum it gives 0.
pub fn internet_checksum(bytes: &[u8]) -> u16 {
    !fold(sum_words(bytes))
}

/// The UDP checksum over IPv4 of `segment` (UDP header and payload, its checksum field zero)
/// from `src` to `dst`. A sum of 0 is sent as `0xffff`: 0 means "no checksum" in UDP over IPv4.
pub fn udp4_checksum(src: Ipv4Addr, dst: Ipv4Addr, segment: &[u8]) -> u16 {
    udp4_checksum_of_sum(src, dst, segment.len(), sum_words(segment))
}

/// [`udp4_checksum`] of a segment of `len` bytes whose words sum to `segment_sum`: for a
/// generator that knows the rest of its payload is zeros and sums only the start.
pub fn udp4_checksum_of_sum(src: Ipv4Addr, dst: Ipv4Addr, len: usize, segment_sum: u32) -> u16 {
    // The pseudo-header: addresses, protocol, UDP length.
    let pseudo = sum_words(&src.octets()) + sum_words(&dst.octets()) + 17 + len as u32;
    match !fold(pseudo + segment_sum) {
        0 => 0xffff,
        s => s,
    }
}

/// A UDP-in-IPv4 frame's headers: what [`Udp4::write`] puts before the payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Udp4 {
    /// Destination MAC.
    pub dst_mac: [u8; 6],
    /// Source MAC.
    pub src_mac: [u8; 6],
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// UDP source port.
    pub src_port: u16,
    /// UDP destination port.
    pub dst_port: u16,
    /// IPv4 time to live.
    pub ttl: u8,
    /// Whether the IPv4 "don't fragment" flag is set.
    pub dont_fragment: bool,
}

/// A frame length a [`Udp4`] frame cannot have: shorter than its headers, or an IPv4 total
/// length beyond 16 bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a UDP/IPv4 frame of {0} bytes cannot be built: give {min} to {max} bytes (no FCS)", min = UDP4_HEADERS, max = Udp4::MAX_FRAME)]
pub struct Udp4LengthError(pub usize);

impl Udp4 {
    /// The longest frame: the IPv4 total length is 16 bits.
    pub const MAX_FRAME: usize = ETHERNET_HEADER + 65_535;

    /// Writes the headers at the start of `frame`, with lengths for the whole of `frame` (the
    /// FCS excluded), IPv4 identification 0, a valid IPv4 header checksum and a UDP checksum of
    /// 0 (none, as IPv4 allows). The payload is left as it is.
    pub fn write(&self, frame: &mut [u8]) -> Result<(), Udp4LengthError> {
        if !(UDP4_HEADERS..=Self::MAX_FRAME).contains(&frame.len()) {
            return Err(Udp4LengthError(frame.len()));
        }
        let ip_len = (frame.len() - ETHERNET_HEADER) as u16;
        frame[0..6].copy_from_slice(&self.dst_mac);
        frame[6..12].copy_from_slice(&self.src_mac);
        frame[12..14].copy_from_slice(&ethertype::IPV4.to_be_bytes());
        let ip = &mut frame[ETHERNET_HEADER..ETHERNET_HEADER + IPV4_HEADER];
        ip.fill(0);
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
        if self.dont_fragment {
            ip[6] = 0x40;
        }
        ip[8] = self.ttl;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&self.src.octets());
        ip[16..20].copy_from_slice(&self.dst.octets());
        let sum = internet_checksum(ip);
        ip[10..12].copy_from_slice(&sum.to_be_bytes());
        let udp = &mut frame[ETHERNET_HEADER + IPV4_HEADER..UDP4_HEADERS];
        udp[0..2].copy_from_slice(&self.src_port.to_be_bytes());
        udp[2..4].copy_from_slice(&self.dst_port.to_be_bytes());
        udp[4..6].copy_from_slice(&(ip_len - IPV4_HEADER as u16).to_be_bytes());
        udp[6..8].fill(0);
        Ok(())
    }

    /// A frame of `len` bytes (the FCS excluded) with these headers and a zero payload.
    pub fn frame(&self, len: usize) -> Result<Vec<u8>, Udp4LengthError> {
        if !(UDP4_HEADERS..=Self::MAX_FRAME).contains(&len) {
            return Err(Udp4LengthError(len));
        }
        let mut f = vec![0u8; len];
        self.write(&mut f)?;
        Ok(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn spec() -> Udp4 {
        Udp4 {
            dst_mac: [2, 0, 0, 0, 0, 2],
            src_mac: [2, 0, 0, 0, 0, 1],
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::new(10, 0, 0, 2),
            src_port: 5000,
            dst_port: 53,
            ttl: 64,
            dont_fragment: false,
        }
    }

    #[test]
    fn reads_an_ipv4_udp_five_tuple_also_behind_a_vlan_tag() {
        let f = spec().frame(60).unwrap();
        let k = flow_key(link_type::ETHERNET, &f);
        assert_eq!(k.src, IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)));
        assert_eq!(k.dst, IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)));
        assert_eq!((k.src_port, k.dst_port, k.protocol), (5000, 53, 17));
        let mut tagged = f[..12].to_vec();
        tagged.extend_from_slice(&[0x81, 0x00, 0x00, 0x07]);
        tagged.extend_from_slice(&f[12..]);
        assert_eq!(flow_key(link_type::ETHERNET, &tagged), k);
        assert_eq!(flow_key(link_type::RAW, &f[14..]), k);
        let mut sll = vec![0u8; 16];
        sll[14..16].copy_from_slice(&ethertype::IPV4.to_be_bytes());
        sll.extend_from_slice(&f[14..]);
        assert_eq!(flow_key(link_type::LINUX_SLL, &sll), k);
    }

    #[test]
    fn every_classified_link_type_reads_the_same_flow() {
        let f = spec().frame(60).unwrap();
        let ip = &f[14..];
        let k = flow_key(link_type::ETHERNET, &f);
        let with = |header: &[u8]| [header, ip].concat();
        let mut sll2 = vec![0u8; 20];
        sll2[..2].copy_from_slice(&ethertype::IPV4.to_be_bytes());
        let cases = [
            (link_type::IPV4, ip.to_vec()),
            (link_type::LINUX_SLL2, with(&sll2)),
            (link_type::NULL, with(&2u32.to_le_bytes())),
            (link_type::NULL, with(&2u32.to_be_bytes())),
            (link_type::LOOP, with(&2u32.to_be_bytes())),
        ];
        for (link, frame) in cases {
            assert!(classified(link));
            assert_eq!(flow_key(link, &frame), k, "link type {link}");
        }
        // Not IP behind the loopback header: the default key.
        assert_eq!(
            flow_key(link_type::NULL, &with(&7u32.to_le_bytes())),
            FlowKey::default()
        );
        // A link type not read at all (802.11).
        assert!(!classified(105));
        assert_eq!(flow_key(105, &f), FlowKey::default());
    }

    #[test]
    fn short_or_foreign_frames_get_the_default_key() {
        let f = spec().frame(60).unwrap();
        for cut in 0..34 {
            assert_eq!(
                flow_key(link_type::ETHERNET, &f[..cut]),
                FlowKey::default(),
                "cut at {cut}"
            );
        }
        let mut arp = f.clone();
        arp[12..14].copy_from_slice(&ethertype::ARP.to_be_bytes());
        assert_eq!(flow_key(link_type::ETHERNET, &arp), FlowKey::default());
        assert_eq!(flow_key(999, &f), FlowKey::default());
    }

    #[test]
    fn later_fragments_have_no_ports() {
        let mut f = spec().frame(60).unwrap();
        f[14 + 6..14 + 8].copy_from_slice(&100u16.to_be_bytes());
        let k = flow_key(link_type::ETHERNET, &f);
        assert_eq!((k.src_port, k.dst_port, k.protocol), (0, 0, 17));
    }

    #[test]
    fn recognises_arp_and_neighbour_discovery_only() {
        let mut arp = vec![0u8; 42];
        arp[12..14].copy_from_slice(&ethertype::ARP.to_be_bytes());
        assert!(is_address_resolution(&arp));
        let mut tagged = arp[..12].to_vec();
        tagged.extend_from_slice(&[0x81, 0x00, 0, 5]);
        tagged.extend_from_slice(&arp[12..]);
        assert!(is_address_resolution(&tagged));
        let mut ns = vec![0u8; 14 + 40 + 24];
        ns[12..14].copy_from_slice(&ethertype::IPV6.to_be_bytes());
        ns[14] = 0x60;
        ns[14 + 6] = 58;
        ns[14 + 40] = 135;
        assert!(is_address_resolution(&ns));
        ns[14 + 40] = 128; // echo request
        assert!(!is_address_resolution(&ns));
        assert!(!is_address_resolution(&spec().frame(60).unwrap()));
        assert!(!is_address_resolution(&[0u8; 5]));
    }

    #[test]
    fn the_checksum_matches_a_known_header() {
        // Wikipedia's IPv4 header checksum example, whose checksum is 0xb861.
        let header = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(internet_checksum(&header), 0xb861);
        // An odd length pads with a zero byte.
        assert_eq!(sum_words(&[0x12, 0x34, 0x56]), 0x1234 + 0x5600);
    }

    #[test]
    fn frames_have_the_asked_length_and_fields() {
        let mut s = spec();
        s.dont_fragment = true;
        let f = s.frame(100).unwrap();
        assert_eq!(f.len(), 100);
        assert_eq!(&f[12..14], &[0x08, 0x00]);
        assert_eq!(f[14 + 6], 0x40);
        assert_eq!(f[14 + 8], 64);
        assert_eq!(u16::from_be_bytes([f[16], f[17]]), 86);
        assert_eq!(u16::from_be_bytes([f[38], f[39]]), 66);
        assert_eq!(&f[40..42], &[0, 0], "no UDP checksum");
        assert_eq!(s.frame(41), Err(Udp4LengthError(41)));
        assert_eq!(
            s.frame(Udp4::MAX_FRAME + 1),
            Err(Udp4LengthError(Udp4::MAX_FRAME + 1))
        );
        assert!(s.frame(Udp4::MAX_FRAME).is_ok());
    }

    #[test]
    fn reads_the_ecn_field_of_ipv4_and_ipv6() {
        let mut f = spec().frame(60).unwrap();
        assert_eq!(ecn(link_type::ETHERNET, &f), Ecn::NotEct);
        for e in [Ecn::Ect1, Ecn::Ect0, Ecn::Ce] {
            f[15] = 0xb8 | e.bits(); // DSCP EF beside the ECN bits
            assert_eq!(ecn(link_type::ETHERNET, &f), e);
            assert_eq!(ecn(link_type::RAW, &f[14..]), e);
        }
        let mut v6 = vec![0u8; 14 + 40];
        v6[12..14].copy_from_slice(&ethertype::IPV6.to_be_bytes());
        // Version 6, traffic class 0xb9 (DSCP EF, ECT(1)), flow label 0.
        v6[14] = 0x6b;
        v6[15] = 0x90;
        assert_eq!(ecn(link_type::ETHERNET, &v6), Ecn::Ect1);
        let mut arp = f.clone();
        arp[12..14].copy_from_slice(&ethertype::ARP.to_be_bytes());
        assert_eq!(ecn(link_type::ETHERNET, &arp), Ecn::NotEct);
        assert_eq!(ecn(link_type::ETHERNET, &f[..20]), Ecn::NotEct);
    }

    #[test]
    fn marking_ce_sets_only_the_ecn_bits_and_keeps_the_checksum_valid() {
        // Wikipedia's header (checksum 0xb861 with TOS 0), with TOS 0x02: ECT(0). Its checksum
        // over the new TOS is 0xb85f; after marking (TOS 0x03) it must be 0xb85e.
        let mut header = [
            0x45, 0x02, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x5f, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(internet_checksum(&header), 0);
        assert!(mark_ce(link_type::RAW, &mut header));
        assert_eq!((header[1], &header[10..12]), (0x03, &[0xb8, 0x5e][..]));
        assert_eq!(internet_checksum(&header), 0);
        // Marking again changes nothing: it is CE already.
        let before = header;
        assert!(mark_ce(link_type::RAW, &mut header));
        assert_eq!(header, before);
        // A Not-ECT packet is never marked, and a frame without IP is left alone.
        let mut f = spec().frame(60).unwrap();
        let before = f.clone();
        assert!(!mark_ce(link_type::ETHERNET, &mut f));
        assert_eq!(f, before);
        let mut arp = vec![0u8; 42];
        arp[12..14].copy_from_slice(&ethertype::ARP.to_be_bytes());
        arp[15] = 0x02;
        assert!(!mark_ce(link_type::ETHERNET, &mut arp));
        assert_eq!(arp[15], 0x02);
        // IPv6: the traffic class's low bits, no checksum.
        let mut v6 = vec![0u8; 40];
        v6[0] = 0x6b;
        v6[1] = 0xa5; // traffic class 0xba: ECT(0); flow label bits 0x5….
        assert!(mark_ce(link_type::RAW, &mut v6));
        assert_eq!((v6[0], v6[1]), (0x6b, 0xb5));
        assert_eq!(ecn(link_type::RAW, &v6), Ecn::Ce);
    }

    proptest! {
        /// Every built header verifies: summed with its checksum in place, a valid header gives
        /// all ones, whose complement is 0; likewise a UDP segment with its pseudo-header.
        #[test]
        fn built_checksums_verify(
            len in UDP4_HEADERS..2000,
            src in any::<u32>(),
            dst in any::<u32>(),
            ttl in any::<u8>(),
            payload in any::<u8>(),
        ) {
            let s = Udp4 { src: src.into(), dst: dst.into(), ttl, ..spec() };
            let mut f = s.frame(len).unwrap();
            prop_assert_eq!(internet_checksum(&f[14..34]), 0);
            f[UDP4_HEADERS..].fill(payload);
            let sum = udp4_checksum(s.src, s.dst, &f[34..]);
            prop_assert_ne!(sum, 0);
            f[40..42].copy_from_slice(&sum.to_be_bytes());
            let pseudo = sum_words(&f[26..34]) + 17 + (len - 34) as u32;
            prop_assert!(matches!(!fold(pseudo + sum_words(&f[34..])), 0 | 0xffff));
        }

        /// Marking a valid IPv4 header of any content keeps it valid: the incrementally updated
        /// checksum equals one computed afresh, and only the ECN bits changed (to CE, if they
        /// said ECT).
        #[test]
        fn marking_keeps_every_ipv4_header_valid(
            mut header in proptest::collection::vec(any::<u8>(), IPV4_HEADER..IPV4_HEADER + 1),
        ) {
            header[0] = 0x45;
            header[10..12].fill(0);
            let sum = internet_checksum(&header);
            header[10..12].copy_from_slice(&sum.to_be_bytes());
            let before = header.clone();
            let marked = mark_ce(link_type::RAW, &mut header);
            prop_assert_eq!(marked, Ecn::from_bits(before[1]).is_capable());
            prop_assert_eq!(internet_checksum(&header), 0);
            let expected_tos = if marked { before[1] | 3 } else { before[1] };
            prop_assert_eq!(header[1], expected_tos);
            let mut fresh = header.clone();
            fresh[10..12].fill(0);
            let recomputed = internet_checksum(&fresh);
            // One's complement has two zeros; a recomputed 0x0000 may show as 0xffff.
            let got = u16::from_be_bytes([header[10], header[11]]);
            prop_assert!(got == recomputed || (got ^ recomputed) == 0xffff && got.min(recomputed) == 0);
            prop_assert_eq!(&header[..1], &before[..1]);
            prop_assert_eq!(&header[2..10], &before[2..10]);
            prop_assert_eq!(&header[12..], &before[12..]);
        }

        /// Any bytes, of any length, are read and marked without a panic.
        #[test]
        fn any_frame_is_read_and_marked_without_panic(
            mut frame in proptest::collection::vec(any::<u8>(), 0..80),
            link in prop_oneof![Just(link_type::ETHERNET), Just(link_type::RAW), Just(link_type::LINUX_SLL), Just(7u32)],
        ) {
            let e = ecn(link, &frame);
            let marked = mark_ce(link, &mut frame);
            prop_assert!(!marked || e.is_capable());
            if marked {
                prop_assert_eq!(ecn(link, &frame), Ecn::Ce);
            }
        }
    }
}
