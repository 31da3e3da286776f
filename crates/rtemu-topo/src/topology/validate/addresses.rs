//! Subnets and addresses: the file's own checked and claimed, interfaces named, pool subnets
//! allocated, and every member given its addresses.

use std::collections::BTreeSet;
use std::ops::Range;

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use toml::Spanned;

use super::{Draft, Families, Validator};
use crate::error::SpecError;
use crate::spec::FileSpec;
use crate::topology::{
    Attachment, Mac, Node, Segment, SegmentKind, DEFAULT_POOL_V4, DEFAULT_POOL_V6,
};

impl Validator<'_> {
    /// Records `net` as in use, or says what it overlaps.
    pub(super) fn claim(
        &mut self,
        net: IpNet,
        what: String,
        span: &Range<usize>,
    ) -> Result<(), SpecError> {
        if let Some(other) = self.used.overlap(net) {
            return Err(self.err(
                span.clone(),
                format!(
                    "{what} overlaps {} (line {}): subnets and addresses must not overlap",
                    other.what, other.line
                ),
            ));
        }
        let line = self.line(span);
        self.used.insert(net, what, line);
        Ok(())
    }

    pub(super) fn subnet4(
        &mut self,
        text: Option<&Spanned<String>>,
        segment: &str,
    ) -> Result<Option<Ipv4Net>, SpecError> {
        let Some(text) = text else { return Ok(None) };
        let net: Ipv4Net = text.get_ref().parse().map_err(|_| {
            self.err(
                text.span(),
                format!(
                    "invalid IPv4 subnet `{}`: write a prefix like \"10.1.2.0/24\"",
                    text.get_ref()
                ),
            )
        })?;
        if net.prefix_len() > 30 {
            return Err(self.err(
                text.span(),
                format!("IPv4 subnet {net} is too small: allowed prefix lengths are 0 to 30"),
            ));
        }
        if net.trunc() != net {
            return Err(self.err(
                text.span(),
                format!(
                    "IPv4 subnet `{net}` has host bits set: did you mean \"{}\"?",
                    net.trunc()
                ),
            ));
        }
        self.claim(
            IpNet::V4(net),
            format!("subnet {net} of `{segment}`"),
            &text.span(),
        )?;
        Ok(Some(net))
    }

    pub(super) fn subnet6(
        &mut self,
        text: Option<&Spanned<String>>,
        segment: &str,
    ) -> Result<Option<Ipv6Net>, SpecError> {
        let Some(text) = text else { return Ok(None) };
        let net: Ipv6Net = text.get_ref().parse().map_err(|_| {
            self.err(
                text.span(),
                format!(
                    "invalid IPv6 subnet `{}`: write a prefix like \"fd00:1::/64\"",
                    text.get_ref()
                ),
            )
        })?;
        if net.prefix_len() > 126 {
            return Err(self.err(
                text.span(),
                format!("IPv6 subnet {net} is too small: allowed prefix lengths are 0 to 126"),
            ));
        }
        if net.trunc() != net {
            return Err(self.err(
                text.span(),
                format!(
                    "IPv6 subnet `{net}` has host bits set: did you mean \"{}\"?",
                    net.trunc()
                ),
            ));
        }
        self.claim(
            IpNet::V6(net),
            format!("subnet {net} of `{segment}`"),
            &text.span(),
        )?;
        Ok(Some(net))
    }

    /// Names interfaces, allocates pool subnets and gives every member its addresses.
    pub(super) fn finish(
        &mut self,
        drafts: Vec<Draft>,
        spec: &FileSpec,
        families: Families,
        nodes: &[Node],
    ) -> Result<Vec<Segment>, SpecError> {
        // Explicit interface names first, so automatic ones (`eth0`, `eth1`, …) avoid them.
        let mut taken: Vec<BTreeSet<String>> = vec![BTreeSet::new(); nodes.len()];
        for d in &drafts {
            for m in &d.members {
                if let Some(name) = &m.ifname {
                    if !taken[m.node].insert(name.clone()) {
                        return Err(self.err(m.span.clone(), format!("duplicate interface `{name}` on node `{}`: each interface of a node needs its own name", nodes[m.node].name)));
                    }
                }
            }
        }
        let mut next_auto = vec![0usize; nodes.len()];
        let pool = spec.pool.as_ref();
        let (pool4, len4) = self.pool4(pool)?;
        let (pool6, len6) = self.pool6(pool)?;
        let mut segments = Vec::with_capacity(drafts.len());
        let mut interface_index = 0u32;
        for d in drafts {
            let v4 = |n| match n {
                IpNet::V4(n) => Some(n),
                IpNet::V6(_) => None,
            };
            let v6 = |n| match n {
                IpNet::V6(n) => Some(n),
                IpNet::V4(_) => None,
            };
            let ipv4 =
                self.subnet_or_pool(d.ipv4, families.v4, (IpNet::V4(pool4), len4), &d, v4)?;
            let ipv6 =
                self.subnet_or_pool(d.ipv6, families.v6, (IpNet::V6(pool6), len6), &d, v6)?;
            if let (Some(mtu), Some(_)) = (d.mtu, ipv6) {
                if mtu < 1280 {
                    return Err(self.err(d.mtu_span.clone().unwrap_or(d.span.clone()), format!("MTU {mtu} of `{}` is too small for IPv6: allowed are 1280 to 65535 on a segment with IPv6", d.name)));
                }
            }
            let mut members = Vec::with_capacity(d.members.len());
            for (i, m) in d.members.iter().enumerate() {
                let ifname = match &m.ifname {
                    Some(n) => n.clone(),
                    None => loop {
                        let candidate = format!("eth{}", next_auto[m.node]);
                        next_auto[m.node] += 1;
                        if taken[m.node].insert(candidate.clone()) {
                            break candidate;
                        }
                    },
                };
                let host = i as u128 + 1;
                members.push(Attachment {
                    node: m.node,
                    ifname,
                    ipv4: m.ipv4.or(ipv4.map(|n| {
                        let a = u32::from(n.network()) + host as u32;
                        Ipv4Net::new(a.into(), n.prefix_len()).expect("prefix length was checked")
                    })),
                    ipv6: m.ipv6.or(ipv6.map(|n| {
                        let a = u128::from(n.network()) + host;
                        Ipv6Net::new(a.into(), n.prefix_len()).expect("prefix length was checked")
                    })),
                    mac: Mac::for_interface(interface_index),
                });
                interface_index += 1;
            }
            let external = matches!(d.kind, SegmentKind::External { .. });
            if let Some(n) = ipv4.filter(|_| !external) {
                // Network and broadcast addresses are not for members.
                let hosts = (1u64 << (32 - n.prefix_len())) - 2;
                if (members.len() as u64) > hosts {
                    return Err(self.err(d.span.clone(), format!("IPv4 subnet {n} of `{}` holds {hosts} hosts but it has {} members: use a shorter prefix", d.name, members.len())));
                }
            }
            if let Some(n) = ipv6.filter(|_| !external) {
                let bits = 128 - u32::from(n.prefix_len());
                if bits < 64 && (members.len() as u128) >= (1u128 << bits) - 1 {
                    return Err(self.err(d.span.clone(), format!("IPv6 subnet {n} of `{}` is too small for its {} members: use a shorter prefix", d.name, members.len())));
                }
            }
            segments.push(Segment {
                name: d.name,
                kind: d.kind,
                mtu: d.mtu,
                ipv4,
                ipv6,
                members,
                engine_host: None,
            });
        }
        Ok(segments)
    }

    /// A segment's subnet of one family: its own, else (when the lab uses the family and the
    /// segment is not external) the first free one of `pool`, of the pool's prefix length.
    fn subnet_or_pool<N>(
        &mut self,
        own: Option<N>,
        family_used: bool,
        (pool, len): (IpNet, u8),
        d: &Draft,
        of_family: fn(IpNet) -> Option<N>,
    ) -> Result<Option<N>, SpecError> {
        if own.is_some() || !family_used || matches!(d.kind, SegmentKind::External { .. }) {
            return Ok(own);
        }
        let net = self.allocate(pool, len, d)?;
        Ok(Some(
            of_family(net).expect("a pool yields subnets of its own family"),
        ))
    }

    pub(super) fn pool4(
        &self,
        pool: Option<&crate::spec::PoolSpec>,
    ) -> Result<(Ipv4Net, u8), SpecError> {
        let net = match pool.and_then(|p| p.ipv4.as_ref()) {
            None => DEFAULT_POOL_V4.parse().expect("the default pool is valid"),
            Some(t) => t.get_ref().parse::<Ipv4Net>().ok().filter(|n| n.trunc() == *n).ok_or_else(|| {
                self.err(t.span(), format!("invalid IPv4 pool `{}`: write a prefix like \"10.0.0.0/8\" without host bits", t.get_ref()))
            })?,
        };
        let len = self.pool_len(
            pool.and_then(|p| p.ipv4_prefix.as_ref()),
            net.prefix_len(),
            30,
            24,
        )?;
        Ok((net, len))
    }

    pub(super) fn pool6(
        &self,
        pool: Option<&crate::spec::PoolSpec>,
    ) -> Result<(Ipv6Net, u8), SpecError> {
        let net = match pool.and_then(|p| p.ipv6.as_ref()) {
            None => DEFAULT_POOL_V6.parse().expect("the default pool is valid"),
            Some(t) => t.get_ref().parse::<Ipv6Net>().ok().filter(|n| n.trunc() == *n).ok_or_else(|| {
                self.err(t.span(), format!("invalid IPv6 pool `{}`: write a prefix like \"fd00:1::/48\" without host bits", t.get_ref()))
            })?,
        };
        let len = self.pool_len(
            pool.and_then(|p| p.ipv6_prefix.as_ref()),
            net.prefix_len(),
            126,
            64,
        )?;
        Ok((net, len))
    }

    pub(super) fn pool_len(
        &self,
        len: Option<&Spanned<i64>>,
        pool_len: u8,
        max: u8,
        default: u8,
    ) -> Result<u8, SpecError> {
        match len {
            None => Ok(default.max(pool_len)),
            Some(l) => match u8::try_from(*l.get_ref()) {
                Ok(v) if v >= pool_len && v <= max => Ok(v),
                _ => Err(self.err(l.span(), format!("segment prefix length {} is out of range: allowed are {pool_len} (the pool's) to {max}", l.get_ref()))),
            },
        }
    }

    /// The first subnet of length `len` in `pool` that overlaps nothing in use.
    ///
    /// Candidates are tried in order from where the last allocation of the family stopped:
    /// explicit subnets are all claimed before any allocation, so a candidate passed over once
    /// stays unusable, and allocation stays linear in the number of segments (each claim in
    /// the way stepped over whole, each overlap found in logarithmic time).
    pub(super) fn allocate(&mut self, pool: IpNet, len: u8, d: &Draft) -> Result<IpNet, SpecError> {
        let cursor = usize::from(matches!(pool, IpNet::V6(_)));
        if let Some((i, candidate)) = self.used.first_free(pool, len, self.cursor[cursor]) {
            self.cursor[cursor] = i + 1;
            let what = format!("subnet {candidate} of `{}` (from the pool)", d.name);
            self.claim(candidate, what, &d.span)?;
            return Ok(candidate);
        }
        Err(self.err(d.span.clone(), format!("the address pool {pool} has no free /{len} left for `{}`: set a larger `[pool]` prefix", d.name)))
    }
}
