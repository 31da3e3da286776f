//! Flow patterns: which packets a per-flow trace applies to (the paper's multi-field
//! classifier).
//!
//! # Syntax
//!
//! Whitespace-separated `key=value` fields, each at most once, in any order:
//!
//! | key | value | example |
//! | --- | --- | --- |
//! | `src`, `dst` | IPv4 or IPv6 address, optional `/prefix` | `src=10.1.0.0/16`, `dst=2001:db8::1` |
//! | `sport`, `dport` | port or inclusive range `lo-hi` | `dport=443`, `sport=1024-65535` |
//! | `proto` | `tcp`, `udp`, `icmp`, `icmpv6`, `sctp` or a number 0–255 | `proto=udp` |
//!
//! A missing field, or the value `*`, is a wildcard; `*` alone (or an empty pattern) matches
//! every packet. Host bits below the prefix are ignored (`10.1.2.3/16` is `10.1.0.0/16`). An
//! IPv4 network never matches an IPv6 address and vice versa (IPv4-mapped IPv6 addresses are
//! not translated). Ports are compared as given in the 5-tuple; for protocols without ports the
//! caller passes 0.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// A packet's 5-tuple, as the classifier sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FiveTuple {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Source port (0 for protocols without ports).
    pub sport: u16,
    /// Destination port (0 for protocols without ports).
    pub dport: u16,
    /// IP protocol number (6 TCP, 17 UDP, …).
    pub proto: u8,
}

/// An address with a prefix length; host bits are zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpNet {
    addr: IpAddr,
    prefix: u8,
}

impl IpNet {
    /// The network of `addr` with `prefix` leading bits, or `None` if the prefix is longer than
    /// the address (32 for IPv4, 128 for IPv6).
    pub fn new(addr: IpAddr, prefix: u8) -> Option<IpNet> {
        let addr = match addr {
            IpAddr::V4(a) if prefix <= 32 => IpAddr::V4((u32::from(a) & mask32(prefix)).into()),
            IpAddr::V6(a) if prefix <= 128 => IpAddr::V6((u128::from(a) & mask128(prefix)).into()),
            _ => return None,
        };
        Some(IpNet { addr, prefix })
    }

    /// The network address.
    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    /// The prefix length.
    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// True if `ip` lies in this network.
    #[inline]
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(a)) => {
                u32::from(a) & mask32(self.prefix) == u32::from(net)
            }
            (IpAddr::V6(net), IpAddr::V6(a)) => {
                u128::from(a) & mask128(self.prefix) == u128::from(net)
            }
            _ => false,
        }
    }

    fn full_prefix(&self) -> u8 {
        if self.addr.is_ipv4() {
            32
        } else {
            128
        }
    }
}

fn mask32(prefix: u8) -> u32 {
    u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0)
}

fn mask128(prefix: u8) -> u128 {
    u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0)
}

impl fmt::Display for IpNet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.prefix == self.full_prefix() {
            write!(f, "{}", self.addr)
        } else {
            write!(f, "{}/{}", self.addr, self.prefix)
        }
    }
}

/// An inclusive port range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PortRange {
    lo: u16,
    hi: u16,
}

impl PortRange {
    /// The ports `lo..=hi`, or `None` if `lo > hi`.
    pub fn new(lo: u16, hi: u16) -> Option<PortRange> {
        (lo <= hi).then_some(PortRange { lo, hi })
    }

    /// True if `port` is in the range.
    #[inline]
    pub fn contains(&self, port: u16) -> bool {
        (self.lo..=self.hi).contains(&port)
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.lo == self.hi {
            write!(f, "{}", self.lo)
        } else {
            write!(f, "{}-{}", self.lo, self.hi)
        }
    }
}

/// A flow pattern: each field `None` is a wildcard. See the [module docs](self) for the syntax.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FlowPattern {
    /// Source network.
    pub src: Option<IpNet>,
    /// Destination network.
    pub dst: Option<IpNet>,
    /// Source ports.
    pub sport: Option<PortRange>,
    /// Destination ports.
    pub dport: Option<PortRange>,
    /// IP protocol number.
    pub proto: Option<u8>,
}

impl FlowPattern {
    /// The pattern that matches every packet.
    pub const ANY: FlowPattern = FlowPattern {
        src: None,
        dst: None,
        sport: None,
        dport: None,
        proto: None,
    };

    /// True if the packet with this 5-tuple belongs to the flow.
    #[inline]
    pub fn matches(&self, t: &FiveTuple) -> bool {
        self.proto.is_none_or(|p| p == t.proto)
            && self.sport.is_none_or(|r| r.contains(t.sport))
            && self.dport.is_none_or(|r| r.contains(t.dport))
            && self.src.is_none_or(|n| n.contains(t.src))
            && self.dst.is_none_or(|n| n.contains(t.dst))
    }
}

/// Several flow patterns, each bound to something (a trace, a model), tried in order: the
/// paper's multi-field classifier. A packet matching none gets `None` (the link's default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowTable<T> {
    entries: Vec<(FlowPattern, T)>,
}

impl<T> Default for FlowTable<T> {
    fn default() -> Self {
        FlowTable {
            entries: Vec::new(),
        }
    }
}

impl<T> FlowTable<T> {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a pattern; earlier patterns win.
    pub fn push(&mut self, pattern: FlowPattern, value: T) {
        self.entries.push((pattern, value));
    }

    /// The index and value of the first pattern the packet matches.
    #[inline]
    pub fn classify(&self, t: &FiveTuple) -> Option<(usize, &T)> {
        self.entries
            .iter()
            .enumerate()
            .find(|(_, (p, _))| p.matches(t))
            .map(|(i, (_, v))| (i, v))
    }

    /// As [`FlowTable::classify`], for a value to be changed (a trace cursor to advance).
    #[inline]
    pub fn classify_mut(&mut self, t: &FiveTuple) -> Option<(usize, &mut T)> {
        self.entries
            .iter_mut()
            .enumerate()
            .find(|(_, (p, _))| p.matches(t))
            .map(|(i, (_, v))| (i, v))
    }

    /// The entries, in order.
    pub fn entries(&self) -> &[(FlowPattern, T)] {
        &self.entries
    }

    /// The values, in order, to be changed.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.entries.iter_mut().map(|(_, v)| v)
    }
}

/// A flow pattern that cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("column {column}: {message}")]
pub struct FlowParseError {
    /// Column (in characters, from 1) where the bad field starts.
    pub column: usize,
    /// What is wrong and what is valid.
    pub message: String,
}

const PROTOCOLS: [(&str, u8); 5] = [
    ("icmp", 1),
    ("tcp", 6),
    ("udp", 17),
    ("icmpv6", 58),
    ("sctp", 132),
];

impl FromStr for FlowPattern {
    type Err = FlowParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut p = FlowPattern::ANY;
        let mut seen = [false; 5];
        let trimmed = s.trim();
        if trimmed == "*" {
            return Ok(p);
        }
        for (byte_start, field) in fields(s) {
            let column = s[..byte_start].chars().count() + 1;
            let err = |message: String| FlowParseError { column, message };
            let Some((key, value)) = field.split_once('=') else {
                return Err(err(
                    "expected key=value (keys: src, dst, sport, dport, proto)".to_owned(),
                ));
            };
            let slot = match key {
                "src" => 0,
                "dst" => 1,
                "sport" => 2,
                "dport" => 3,
                "proto" => 4,
                _ => {
                    return Err(err(format!(
                        "unknown key {key:?} (keys: src, dst, sport, dport, proto)"
                    )))
                }
            };
            if std::mem::replace(&mut seen[slot], true) {
                return Err(err(format!("{key} is given twice")));
            }
            if value == "*" {
                continue;
            }
            match slot {
                0 | 1 => {
                    let net = parse_net(value).map_err(err)?;
                    if slot == 0 {
                        p.src = Some(net);
                    } else {
                        p.dst = Some(net);
                    }
                }
                2 | 3 => {
                    let r = parse_ports(value).map_err(err)?;
                    if slot == 2 {
                        p.sport = Some(r);
                    } else {
                        p.dport = Some(r);
                    }
                }
                _ => p.proto = Some(parse_proto(value).map_err(err)?),
            }
        }
        Ok(p)
    }
}

/// Splits on whitespace, keeping each field's byte offset.
fn fields(s: &str) -> impl Iterator<Item = (usize, &str)> {
    s.split(char::is_whitespace)
        .filter(|f| !f.is_empty())
        .map(move |f| (f.as_ptr() as usize - s.as_ptr() as usize, f))
}

fn parse_net(v: &str) -> Result<IpNet, String> {
    let (addr, prefix) = match v.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (v, None),
    };
    let addr: IpAddr = addr
        .parse()
        .map_err(|_| format!("{addr:?} is not an IPv4 or IPv6 address"))?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let prefix = match prefix {
        None => max,
        Some(p) => p
            .parse::<u8>()
            .ok()
            .filter(|&p| p <= max)
            .ok_or_else(|| format!("prefix {p:?} is not a number in 0..={max}"))?,
    };
    Ok(IpNet::new(addr, prefix).expect("prefix checked above"))
}

fn parse_ports(v: &str) -> Result<PortRange, String> {
    let port = |s: &str| {
        s.parse::<u16>()
            .map_err(|_| format!("{s:?} is not a port number in 0..=65535"))
    };
    let (lo, hi) = match v.split_once('-') {
        Some((lo, hi)) => (port(lo)?, port(hi)?),
        None => {
            let p = port(v)?;
            (p, p)
        }
    };
    PortRange::new(lo, hi).ok_or_else(|| format!("port range {v:?} is empty: {lo} > {hi}"))
}

fn parse_proto(v: &str) -> Result<u8, String> {
    if let Some(&(_, n)) = PROTOCOLS
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(v))
    {
        return Ok(n);
    }
    v.parse::<u8>().map_err(|_| {
        format!("{v:?} is not a protocol (tcp, udp, icmp, icmpv6, sctp or a number 0..=255)")
    })
}

impl fmt::Display for FlowPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut sep = "";
        let mut field = |f: &mut fmt::Formatter<'_>, key: &str, v: &dyn fmt::Display| {
            let r = write!(f, "{sep}{key}={v}");
            sep = " ";
            r
        };
        if let Some(n) = &self.src {
            field(f, "src", n)?;
        }
        if let Some(n) = &self.dst {
            field(f, "dst", n)?;
        }
        if let Some(r) = &self.sport {
            field(f, "sport", r)?;
        }
        if let Some(r) = &self.dport {
            field(f, "dport", r)?;
        }
        if let Some(p) = self.proto {
            match PROTOCOLS.iter().find(|&&(_, n)| n == p) {
                Some((name, _)) => field(f, "proto", name)?,
                None => field(f, "proto", &p)?,
            }
        }
        if sep.is_empty() {
            f.write_str("*")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn tuple(src: &str, dst: &str, sport: u16, dport: u16, proto: u8) -> FiveTuple {
        FiveTuple {
            src: src.parse().unwrap(),
            dst: dst.parse().unwrap(),
            sport,
            dport,
            proto,
        }
    }

    #[test]
    fn patterns_match_their_flows_only() {
        let p: FlowPattern = "src=10.1.2.3/16 dport=1000-2000 proto=udp".parse().unwrap();
        assert!(p.matches(&tuple("10.1.200.9", "192.0.2.1", 5, 1000, 17)));
        assert!(p.matches(&tuple("10.1.0.0", "::1", 5, 2000, 17)));
        assert!(!p.matches(&tuple("10.2.0.1", "192.0.2.1", 5, 1500, 17)));
        assert!(!p.matches(&tuple("10.1.0.1", "192.0.2.1", 5, 2001, 17)));
        assert!(!p.matches(&tuple("10.1.0.1", "192.0.2.1", 5, 1500, 6)));
        // An IPv4 network does not match IPv6 addresses.
        assert!(!p.matches(&tuple("::ffff:10.1.0.1", "::1", 5, 1500, 17)));
        let v6: FlowPattern = "dst=2001:db8::/32 sport=443".parse().unwrap();
        assert!(v6.matches(&tuple("::1", "2001:db8:ffff::7", 443, 9, 6)));
        assert!(!v6.matches(&tuple("::1", "2001:db9::7", 443, 9, 6)));
        assert!("*"
            .parse::<FlowPattern>()
            .unwrap()
            .matches(&tuple("1.2.3.4", "::", 0, 0, 0)));
        assert_eq!("".parse::<FlowPattern>().unwrap(), FlowPattern::ANY);
        assert_eq!(
            "src=* proto=*".parse::<FlowPattern>().unwrap(),
            FlowPattern::ANY
        );
    }

    #[test]
    fn the_first_matching_pattern_wins_and_others_get_none() {
        let mut t = FlowTable::new();
        t.push("dport=443 proto=tcp".parse().unwrap(), "web");
        t.push("dst=10.0.0.0/8".parse().unwrap(), "lan");
        assert_eq!(
            t.classify(&tuple("1.1.1.1", "10.0.0.1", 9, 443, 6)),
            Some((0, &"web"))
        );
        assert_eq!(
            t.classify(&tuple("1.1.1.1", "10.0.0.1", 9, 443, 17)),
            Some((1, &"lan"))
        );
        assert_eq!(t.classify(&tuple("1.1.1.1", "11.0.0.1", 9, 80, 6)), None);
        if let Some((_, v)) = t.classify_mut(&tuple("1.1.1.1", "10.9.9.9", 9, 80, 6)) {
            *v = "changed";
        }
        assert_eq!(t.entries()[1].1, "changed");
    }

    #[test]
    fn zero_prefix_matches_the_whole_family() {
        let p: FlowPattern = "src=0.0.0.0/0".parse().unwrap();
        assert!(p.matches(&tuple("255.255.255.255", "::", 0, 0, 0)));
        assert!(!p.matches(&tuple("::", "::", 0, 0, 0)));
    }

    #[test]
    fn bad_patterns_say_where_and_what() {
        let e = "src=10.0.0.0/8  dport=70000"
            .parse::<FlowPattern>()
            .unwrap_err();
        assert_eq!(e.column, 17);
        assert!(e.message.contains("0..=65535"), "{e}");
        let e = "proto=udp proto=tcp".parse::<FlowPattern>().unwrap_err();
        assert_eq!((e.column, e.message.as_str()), (11, "proto is given twice"));
        let e = "dst=10.0.0.1/33".parse::<FlowPattern>().unwrap_err();
        assert!(e.message.contains("0..=32"), "{e}");
        let e = "sport=9-3".parse::<FlowPattern>().unwrap_err();
        assert!(e.message.contains("empty"), "{e}");
        let e = "port=80".parse::<FlowPattern>().unwrap_err();
        assert!(e.message.contains("unknown key"), "{e}");
        let e = "tcp".parse::<FlowPattern>().unwrap_err();
        assert!(e.message.contains("key=value"), "{e}");
    }

    fn net() -> impl Strategy<Value = IpNet> {
        prop_oneof![
            (any::<u32>(), 0u8..=32)
                .prop_map(|(a, p)| IpNet::new(Ipv4Addr::from(a).into(), p).unwrap()),
            (any::<u128>(), 0u8..=128)
                .prop_map(|(a, p)| IpNet::new(Ipv6Addr::from(a).into(), p).unwrap()),
        ]
    }

    fn ports() -> impl Strategy<Value = PortRange> {
        (any::<u16>(), any::<u16>()).prop_map(|(a, b)| PortRange::new(a.min(b), a.max(b)).unwrap())
    }

    fn pattern() -> impl Strategy<Value = FlowPattern> {
        (
            proptest::option::of(net()),
            proptest::option::of(net()),
            proptest::option::of(ports()),
            proptest::option::of(ports()),
            proptest::option::of(any::<u8>()),
        )
            .prop_map(|(src, dst, sport, dport, proto)| FlowPattern {
                src,
                dst,
                sport,
                dport,
                proto,
            })
    }

    proptest! {
        #[test]
        fn display_parses_back(p in pattern()) {
            prop_assert_eq!(p.to_string().parse::<FlowPattern>(), Ok(p));
        }

        #[test]
        fn a_network_contains_exactly_its_prefix(a in any::<u32>(), b in any::<u32>(), prefix in 0u8..=32) {
            let net = IpNet::new(Ipv4Addr::from(a).into(), prefix).unwrap();
            let shared = (a ^ b).leading_zeros() >= u32::from(prefix);
            prop_assert_eq!(net.contains(Ipv4Addr::from(b).into()), shared);
        }
    }
}
