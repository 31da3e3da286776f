//! What of a topology one `up` builds: the whole lab, or one host's part with its tunnels and
//! the underlay interface they start at.

use std::io;
use std::net::IpAddr;

use futures_util::TryStreamExt;
use rtnetlink::packet_route::address::AddressAttribute;
use rtnetlink::packet_route::link::LinkAttribute;

use crate::part::Tunnel;
use crate::state::PartState;
use crate::topology::{Host, Topology};

use super::error::{io_err, LabError};
use super::netns::with_own_netlink;

/// What of a topology one `up` builds: every node and segment, or one host's part.
pub(super) struct Share {
    /// Nodes, as indices into the topology's.
    pub(super) nodes: Vec<usize>,
    /// Segments with a member among them, as indices into the topology's.
    pub(super) segments: Vec<usize>,
    /// A part's tunnels and where they start.
    pub(super) stitch: Option<Stitch>,
}

impl Share {
    /// Whether this share holds the engine of impaired link `si` (see [`State::runs_engine_of`]).
    pub(super) fn runs_engine_of(&self, topo: &Topology, si: usize) -> bool {
        self.stitch
            .as_ref()
            .is_none_or(|st| topo.segments[si].engine_host.as_deref() == Some(&st.state.host))
    }

    /// The tunnel of segment `si`, when it is stitched.
    pub(super) fn tunnel(&self, si: usize) -> Option<&Tunnel> {
        self.stitch
            .as_ref()
            .and_then(|st| st.state.tunnels.iter().find(|t| t.segment == si))
    }
}

/// How a part's tunnels are made.
pub(super) struct Stitch {
    /// The underlay interface's index in this process's namespace.
    pub(super) underlay: u32,
    /// This host's address on it.
    pub(super) local: IpAddr,
    /// The tunnels' UDP port.
    pub(super) port: u16,
    /// What the state file records.
    pub(super) state: PartState,
}

/// The interface that carries a host's tunnels: the one holding its address.
pub(super) struct Underlay {
    pub(super) index: u32,
    pub(super) name: String,
    pub(super) mtu: u32,
}

/// The interface of this process's namespace that holds `host`'s address.
pub(super) fn find_underlay(host: &Host) -> Result<Underlay, LabError> {
    let address = host.address;
    let found = with_own_netlink(|handle| async move {
        let mut addrs = handle.address().get().execute();
        let mut index = None;
        while let Some(msg) = addrs.try_next().await.map_err(io::Error::other)? {
            let ours = msg.attributes.iter().any(|a| {
                matches!(a, AddressAttribute::Address(a) | AddressAttribute::Local(a) if *a == address)
            });
            if ours {
                index = Some(msg.header.index);
            }
        }
        let Some(index) = index else {
            return Ok(None);
        };
        let mut links = handle.link().get().match_index(index).execute();
        let link = links.try_next().await.map_err(io::Error::other)?;
        let (mut name, mut mtu) = (String::new(), 1500);
        for a in link.into_iter().flat_map(|m| m.attributes) {
            match a {
                LinkAttribute::IfName(n) => name = n,
                LinkAttribute::Mtu(m) => mtu = m,
                _ => {}
            }
        }
        Ok(Some(Underlay { index, name, mtu }))
    })
    .map_err(io_err("looking for the underlay interface"))?;
    found.ok_or_else(|| LabError::NotThisHost {
        host: host.name.clone(),
        address,
    })
}
