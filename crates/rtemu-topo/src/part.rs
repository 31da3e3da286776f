//! One host's part of a multi-host lab: the nodes it runs, the segments that stay on it, and
//! the segments stitched to other hosts by VXLAN tunnels, each with where its tunnel device
//! lives, its VNI and its MTU.
//!
//! Pure. Everything two hosts must agree on — interface names, addresses, MACs, which side of
//! an impaired link holds the engine — comes from the whole topology, so two hosts building
//! their parts from the same file agree without talking. The one thing the file cannot say is
//! which VNIs are free on every host: those are an input ([`Stitching`]), allocated from the
//! VNIs the hosts already use ([`Stitching::allocate`]) and handed to every host alike.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::naming::{engine_ends, lab_netns, node_netns};
use crate::topology::{Host, SegmentKind, Topology};

/// The UDP port of the tunnels unless told otherwise: IANA's VXLAN port.
pub const VXLAN_PORT: u16 = 4789;

/// The first VNI rtemu hands out: VNIs below are left to whatever else runs VXLAN on a host.
pub const FIRST_VNI: u32 = 1 << 20;

/// The largest VNI (24 bits).
pub const MAX_VNI: u32 = (1 << 24) - 1;

/// What VXLAN adds to each frame on an IPv4 underlay: outer IPv4 (20), UDP (8), VXLAN (8) and
/// the inner Ethernet header (14) the underlay's MTU must also carry.
pub const VXLAN_OVERHEAD_V4: u32 = 50;

/// The same on an IPv6 underlay (outer IPv6 header: 40).
pub const VXLAN_OVERHEAD_V6: u32 = 70;

/// Why a part cannot be planned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PartError {
    /// The topology has no `[hosts]`: there are no parts, only the whole lab.
    #[error("lab `{0}` has no [hosts] table: it runs whole on one machine (`rtemu up`)")]
    NoHosts(String),
    /// The host asked for is not in `[hosts]`.
    #[error("lab `{lab}` has no host `{host}`; its hosts are {hosts}")]
    UnknownHost {
        /// The lab.
        lab: String,
        /// The host asked for.
        host: String,
        /// The hosts it has, comma-separated.
        hosts: String,
    },
    /// A stitched segment has no VNI in the stitching given.
    #[error("segment `{0}` spans hosts but the stitching gives it no VNI")]
    NoVni(String),
    /// A VNI is out of range, or given to two segments.
    #[error("segment `{segment}`: VNI {vni} {why}")]
    BadVni {
        /// The segment.
        segment: String,
        /// Its VNI.
        vni: u32,
        /// What is wrong with it.
        why: String,
    },
    /// Every VNI rtemu hands out is taken.
    #[error("no free VNI left between {FIRST_VNI} and {MAX_VNI} for {0} stitched segments")]
    NoFreeVni(usize),
    /// A stitched segment asks for a larger MTU than a tunnel over the underlay carries.
    #[error("{what} `{segment}` has mtu {asked}, but a VXLAN tunnel over {underlay} (MTU {underlay_mtu}) carries at most {fits} ({overhead} bytes of {family} VXLAN headers): lower the mtu to {fits} or raise {underlay}'s MTU to {needed}", needed = .asked + .overhead)]
    Mtu {
        /// "link" or "LAN".
        what: &'static str,
        /// The segment.
        segment: String,
        /// The MTU the file asks for.
        asked: u32,
        /// The underlay interface.
        underlay: String,
        /// Its MTU.
        underlay_mtu: u32,
        /// What a tunnel over it carries.
        fits: u32,
        /// The tunnel's overhead.
        overhead: u32,
        /// "IPv4" or "IPv6".
        family: &'static str,
    },
}

/// The VNI of every stitched segment of a lab and the UDP port of its tunnels: the input every
/// host's part is built with, the same on each.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stitching {
    /// The tunnels' UDP port.
    pub port: u16,
    /// Segment name → VNI, for every segment with members on several hosts.
    pub vnis: BTreeMap<String, u32>,
}

impl Stitching {
    /// VNIs for every stitched segment of `topo`, the lowest from [`FIRST_VNI`] up that are not
    /// in `in_use` (the union of what every host of the lab already uses, see
    /// [`crate::lab::vnis_in_use`]), in segment order; port [`VXLAN_PORT`].
    pub fn allocate(topo: &Topology, in_use: &BTreeSet<u32>) -> Result<Stitching, PartError> {
        let stitched: Vec<&str> = topo
            .stitched()
            .map(|si| topo.segments[si].name.as_str())
            .collect();
        let mut free = (FIRST_VNI..=MAX_VNI).filter(|v| !in_use.contains(v));
        let mut vnis = BTreeMap::new();
        for name in &stitched {
            let vni = free.next().ok_or(PartError::NoFreeVni(stitched.len()))?;
            vnis.insert((*name).to_owned(), vni);
        }
        Ok(Stitching {
            port: VXLAN_PORT,
            vnis,
        })
    }
}

/// The host's part of a lab.
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    /// The host it runs on.
    pub host: Host,
    /// Its nodes, as indices into [`Topology::nodes`].
    pub nodes: Vec<usize>,
    /// The segments with a member on this host, as indices into [`Topology::segments`], in
    /// order.
    pub segments: Vec<usize>,
    /// The tunnel devices this host makes, one per stitched segment with a member here.
    pub tunnels: Vec<Tunnel>,
}

/// Where a tunnel device lives and what it is in the lab.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TunnelRole {
    /// A node's own interface on a stitched link (`member`: its index in the segment's
    /// members), with the member's name, MAC and addresses: an ideal link, or an impaired one
    /// whose engine runs on the other host.
    Node {
        /// The member.
        member: usize,
    },
    /// One of the engine's two ends (`end`: 0 faces the first member, 1 the second) of an
    /// impaired link whose engine runs here and whose other endpoint is on another host.
    Engine {
        /// Which end.
        end: usize,
    },
    /// A port of the LAN's bridge in the lab namespace, reaching the members on other hosts.
    Bridge,
}

/// One VXLAN device of a part, as the state file records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tunnel {
    /// Its segment, as an index into [`Topology::segments`].
    pub segment: usize,
    /// What it is.
    pub role: TunnelRole,
    /// The namespace it lives in.
    pub netns: String,
    /// Its name there.
    pub ifname: String,
    /// Its VNI.
    pub vni: u32,
    /// The underlay addresses of the other hosts with members on the segment: its only remote
    /// (a link), or one all-zero forwarding entry each (a LAN, replicated at the head end).
    pub remotes: Vec<IpAddr>,
}

/// The name of a LAN's tunnel device in the lab namespace.
pub fn bridge_tunnel(segment: usize) -> String {
    format!("s{segment}vx")
}

/// The MTU of a stitched segment's interfaces over an underlay interface `underlay` of MTU
/// `underlay_mtu` (IPv6 when `ipv6`): what a tunnel carries, or the file's `mtu` when it asks
/// for less; an error naming the segment and the numbers when it asks for more.
pub fn tunnel_mtu(
    topo: &Topology,
    segment: usize,
    underlay: &str,
    underlay_mtu: u32,
    ipv6: bool,
) -> Result<u32, PartError> {
    let seg = &topo.segments[segment];
    let (overhead, family) = if ipv6 {
        (VXLAN_OVERHEAD_V6, "IPv6")
    } else {
        (VXLAN_OVERHEAD_V4, "IPv4")
    };
    let fits = underlay_mtu.saturating_sub(overhead);
    match seg.mtu {
        None => Ok(fits),
        Some(asked) if asked <= fits => Ok(asked),
        Some(asked) => Err(PartError::Mtu {
            what: if seg.kind == SegmentKind::Lan {
                "LAN"
            } else {
                "link"
            },
            segment: seg.name.clone(),
            asked,
            underlay: underlay.to_owned(),
            underlay_mtu,
            fits,
            overhead,
            family,
        }),
    }
}

impl Topology {
    /// The segments whose members are on more than one host, as indices into
    /// [`Topology::segments`]; none in a lab without `[hosts]`.
    pub fn stitched(&self) -> impl Iterator<Item = usize> + '_ {
        self.segments.iter().enumerate().filter_map(|(si, seg)| {
            let hosts: BTreeSet<_> = seg
                .members
                .iter()
                .map(|m| &self.nodes[m.node].host)
                .collect();
            (hosts.len() > 1).then_some(si)
        })
    }

    /// Host `host`'s part of this lab, its tunnels given the VNIs and port of `stitching`.
    pub fn part(&self, host: &str, stitching: &Stitching) -> Result<Part, PartError> {
        if self.hosts.is_empty() {
            return Err(PartError::NoHosts(self.lab.clone()));
        }
        let Some(me) = self.hosts.iter().find(|h| h.name == host) else {
            let hosts: Vec<&str> = self.hosts.iter().map(|h| h.name.as_str()).collect();
            return Err(PartError::UnknownHost {
                lab: self.lab.clone(),
                host: host.to_owned(),
                hosts: hosts.join(", "),
            });
        };
        check_vnis(self, stitching)?;
        let on = |node: usize| self.nodes[node].host.as_deref() == Some(host);
        let address = |name: &str| {
            self.hosts
                .iter()
                .find(|h| h.name == name)
                .expect("nodes are placed on the lab's hosts")
                .address
        };
        let nodes: Vec<usize> = (0..self.nodes.len()).filter(|&n| on(n)).collect();
        let stitched: BTreeSet<usize> = self.stitched().collect();
        let mut segments = Vec::new();
        let mut tunnels = Vec::new();
        for (si, seg) in self.segments.iter().enumerate() {
            let Some(local) = seg.members.iter().position(|m| on(m.node)) else {
                continue;
            };
            segments.push(si);
            if !stitched.contains(&si) {
                continue;
            }
            let vni = stitching.vnis[&seg.name];
            let peers: BTreeSet<&str> = seg
                .members
                .iter()
                .filter(|m| !on(m.node))
                .map(|m| self.nodes[m.node].host.as_deref().expect("placed"))
                .collect();
            let remotes = peers.into_iter().map(address).collect();
            let (role, netns, ifname) = match &seg.kind {
                SegmentKind::Lan => (TunnelRole::Bridge, lab_netns(&self.lab), bridge_tunnel(si)),
                SegmentKind::Link { impairment } => {
                    let engine_here =
                        impairment.is_some() && seg.engine_host.as_deref() == Some(host);
                    if engine_here {
                        let end = 1 - local;
                        (
                            TunnelRole::Engine { end },
                            lab_netns(&self.lab),
                            engine_ends(si)[end].clone(),
                        )
                    } else {
                        let m = &seg.members[local];
                        (
                            TunnelRole::Node { member: local },
                            node_netns(&self.lab, &self.nodes[m.node].name),
                            m.ifname.clone(),
                        )
                    }
                }
                SegmentKind::External { .. } => {
                    unreachable!("an external segment has one member, on one host")
                }
            };
            tunnels.push(Tunnel {
                segment: si,
                role,
                netns,
                ifname,
                vni,
                remotes,
            });
        }
        Ok(Part {
            host: me.clone(),
            nodes,
            segments,
            tunnels,
        })
    }
}

/// Checks that `stitching` gives every stitched segment of `topo` its own VNI in range.
fn check_vnis(topo: &Topology, stitching: &Stitching) -> Result<(), PartError> {
    let mut seen: BTreeMap<u32, &str> = BTreeMap::new();
    for si in topo.stitched() {
        let name = &topo.segments[si].name;
        let vni = *stitching
            .vnis
            .get(name)
            .ok_or_else(|| PartError::NoVni(name.clone()))?;
        let bad = |why: String| PartError::BadVni {
            segment: name.clone(),
            vni,
            why,
        };
        if vni == 0 || vni > MAX_VNI {
            return Err(bad(format!("is out of range: allowed are 1 to {MAX_VNI}")));
        }
        if let Some(other) = seen.insert(vni, name) {
            return Err(bad(format!("is also segment `{other}`'s")));
        }
    }
    Ok(())
}
