//! The address space a topology claims: every subnet and address in use, what uses it and on
//! which line, so that an overlap is found (and named) in logarithmic time, and a file of
//! 100,000 nodes validates in linear time, not quadratic.
//!
//! Claims never overlap one another (an overlapping one is refused), so they are disjoint
//! ranges kept by their first address: a new range overlaps a claim only if it overlaps the
//! last claim that starts at or before the new range's end.

use std::collections::BTreeMap;

use ipnet::IpNet;

/// One claimed subnet or address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// Its last address.
    end: u128,
    /// What claims it (`subnet 10.0.0.0/30 of `a-b``).
    pub what: String,
    /// The line of the file that claims it.
    pub line: usize,
}

/// The claims of one file, IPv4 and IPv6 apart.
#[derive(Debug, Default)]
pub struct Claims {
    /// By first address: IPv4, then IPv6.
    by_start: [BTreeMap<u128, Claim>; 2],
}

/// `net`'s family (0: IPv4, 1: IPv6) and its first and last addresses.
fn range(net: IpNet) -> (usize, u128, u128) {
    match net {
        IpNet::V4(n) => (
            0,
            u32::from(n.network()).into(),
            u32::from(n.broadcast()).into(),
        ),
        IpNet::V6(n) => (1, n.network().into(), n.broadcast().into()),
    }
}

impl Claims {
    /// The claim `net` overlaps, if any.
    pub fn overlap(&self, net: IpNet) -> Option<&Claim> {
        let (family, start, end) = range(net);
        self.by_start[family]
            .range(..=end)
            .next_back()
            .map(|(_, c)| c)
            .filter(|c| c.end >= start)
    }

    /// The first subnet of length `len` in `pool` that overlaps no claim, counting from the
    /// `from`-th, with its index; claims in the way are stepped over whole, so a large one
    /// costs one step, not one per subnet it covers.
    pub fn first_free(&self, pool: IpNet, len: u8, from: u128) -> Option<(u128, IpNet)> {
        let (_, start, _) = range(pool);
        let bits: u32 = if matches!(pool, IpNet::V4(_)) {
            32
        } else {
            128
        };
        let size = 1u128.checked_shl(bits.checked_sub(u32::from(len))?);
        let mut i = from;
        loop {
            let candidate = nth_subnet(pool, len, i)?;
            match self.overlap(candidate) {
                None => return Some((i, candidate)),
                // The claim ends at or after the candidate's start, so at or after the pool's.
                Some(c) => i = ((c.end - start) / size?).checked_add(1)?.max(i + 1),
            }
        }
    }

    /// Records `net` for `what` on `line`; the caller has checked it overlaps nothing.
    pub fn insert(&mut self, net: IpNet, what: String, line: usize) {
        let (family, start, end) = range(net);
        debug_assert!(self.overlap(net).is_none(), "{net} overlaps a claim");
        self.by_start[family].insert(start, Claim { end, what, line });
    }
}

/// The `index`-th subnet of length `len` in `pool` (counting from 0), without walking the ones
/// before it; `None` past the pool's end.
pub fn nth_subnet(pool: IpNet, len: u8, index: u128) -> Option<IpNet> {
    let (family, start, end) = range(pool);
    let bits: u32 = if family == 0 { 32 } else { 128 };
    let shift = bits.checked_sub(u32::from(len))?;
    // A subnet as large as IPv6 itself (::/0) has no size that fits: it is the only one.
    let first = match index {
        0 => start,
        _ => start.checked_add(index.checked_mul(1u128.checked_shl(shift)?)?)?,
    };
    if first > end || len < pool.prefix_len() || u32::from(len) > bits {
        return None;
    }
    let net = match pool {
        IpNet::V4(_) => IpNet::new(std::net::Ipv4Addr::from(first as u32).into(), len),
        IpNet::V6(_) => IpNet::new(std::net::Ipv6Addr::from(first).into(), len),
    };
    net.ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    #[test]
    fn an_overlap_names_the_claim_it_meets() {
        let mut c = Claims::default();
        c.insert(net("10.0.0.0/24"), "lan".into(), 3);
        c.insert(net("10.0.2.0/30"), "link".into(), 7);
        c.insert(net("fd00::/64"), "v6".into(), 9);
        assert_eq!(c.overlap(net("10.0.0.5/32")).unwrap().what, "lan");
        assert!([3, 7].contains(&c.overlap(net("10.0.0.0/8")).unwrap().line));
        assert_eq!(c.overlap(net("10.0.2.3/32")).unwrap().what, "link");
        assert!(c.overlap(net("10.0.1.0/24")).is_none());
        assert!(c.overlap(net("10.0.2.4/30")).is_none());
        // The families never meet.
        assert!(c.overlap(net("::/0")).is_some_and(|x| x.what == "v6"));
        assert!(c.overlap(net("0.0.0.0/0")).is_some_and(|x| x.what != "v6"));
    }

    #[test]
    fn a_free_subnet_is_found_past_a_large_claim_at_once() {
        let mut c = Claims::default();
        c.insert(net("fd00:7274::/33"), "big".into(), 1);
        let pool = net("fd00:7274::/32");
        // 2^31 /64s lie under the claim: stepped over in one go.
        let (i, free) = c.first_free(pool, 64, 0).unwrap();
        assert_eq!((i, free), (1 << 31, net("fd00:7274:8000::/64")));
        c.insert(free, "next".into(), 2);
        assert_eq!(
            c.first_free(pool, 64, i).unwrap().1,
            net("fd00:7274:8000:1::/64")
        );
        c.insert(net("10.0.0.0/30"), "a".into(), 1);
        assert_eq!(
            c.first_free(net("10.0.0.0/29"), 30, 0).unwrap().1,
            net("10.0.0.4/30")
        );
        c.insert(net("10.0.0.4/30"), "b".into(), 1);
        assert_eq!(c.first_free(net("10.0.0.0/29"), 30, 0), None);
    }

    #[test]
    fn the_nth_subnet_is_the_pools_own() {
        let pool = net("10.0.0.0/16");
        assert_eq!(nth_subnet(pool, 24, 0), Some(net("10.0.0.0/24")));
        assert_eq!(nth_subnet(pool, 24, 255), Some(net("10.0.255.0/24")));
        assert_eq!(nth_subnet(pool, 24, 256), None);
        assert_eq!(nth_subnet(pool, 8, 0), None);
        let v6 = net("fd00:7274::/32");
        assert_eq!(nth_subnet(v6, 64, 1), Some(net("fd00:7274:0:1::/64")));
        assert_eq!(nth_subnet(net("::/0"), 0, 0), Some(net("::/0")));
        assert_eq!(nth_subnet(net("::/0"), 0, 1), None);
    }

    proptest! {
        /// Against the plain definition (one contains the other's first address), over
        /// random /24s to /32s in one /16.
        #[test]
        fn overlap_is_containment(nets in proptest::collection::vec((0u32..65536, 24u8..=32), 1..60)) {
            let mut c = Claims::default();
            let mut kept: Vec<IpNet> = Vec::new();
            for (host, len) in nets {
                let n = IpNet::new(std::net::Ipv4Addr::from(0x0a00_0000 | host).into(), len).unwrap().trunc();
                let plain = kept.iter().any(|k| k.contains(&n.network()) || n.contains(&k.network()));
                prop_assert_eq!(c.overlap(n).is_some(), plain);
                if !plain {
                    c.insert(n, n.to_string(), 1);
                    kept.push(n);
                }
            }
        }

        #[test]
        fn nth_subnet_matches_the_walk(len in 24u8..=30, index in 0u128..300) {
            let pool = net("10.1.0.0/22");
            let walked = pool.subnets(len).unwrap().nth(index as usize);
            prop_assert_eq!(nth_subnet(pool, len, index), walked);
        }
    }
}
