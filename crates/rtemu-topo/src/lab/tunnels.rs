//! A part's VXLAN tunnels to the other hosts, and the flood lists of its LANs.

use std::net::IpAddr;
use std::os::fd::{AsRawFd, OwnedFd};

use rtnetlink::{Handle, LinkVxlan};

use crate::part::{Tunnel, TunnelRole};
use crate::topology::Mac;

use super::shares::Stitch;

/// Creates tunnel `t` of a part directly in its namespace `netns` from the host's netlink
/// socket, so its UDP socket is the host's: it starts at `stitch`'s underlay and address, and
/// is a node's interface (with `mac`), an engine end or a bridge port, with MTU `mtu`.
pub(super) async fn tunnel(
    host: &Handle,
    t: &Tunnel,
    stitch: &Stitch,
    netns: &OwnedFd,
    mac: Option<Mac>,
    mtu: Option<u32>,
) -> Result<(), rtnetlink::Error> {
    let mut msg = LinkVxlan::new(&t.ifname, t.vni)
        .dev(stitch.underlay)
        .port(stitch.port);
    msg = match stitch.local {
        IpAddr::V4(a) => msg.local(a),
        IpAddr::V6(a) => msg.local6(a),
    };
    if t.role != TunnelRole::Bridge {
        // A link has one far end: every frame goes there, and there is nothing to learn.
        msg = match t.remotes[0] {
            IpAddr::V4(a) => msg.remote(a),
            IpAddr::V6(a) => msg.remote6(a),
        }
        .learning(false);
    }
    let mut msg = msg.setns_by_fd(netns.as_raw_fd());
    if let Some(mac) = mac {
        msg = msg.address(mac.0.to_vec());
    }
    if let Some(mtu) = mtu {
        msg = msg.mtu(mtu);
    }
    host.link().add(msg.build()).execute().await
}

/// Adds an all-zero forwarding entry to `remote` on the LAN tunnel `index` (in the namespace
/// `handle` talks to): broadcasts, multicasts and unknown destinations are copied to every
/// host with members (head-end replication), with no multicast needed on the underlay.
pub(super) async fn flood_to(
    handle: &Handle,
    index: u32,
    remote: IpAddr,
) -> Result<(), rtnetlink::Error> {
    use rtnetlink::packet_core::{
        NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_APPEND, NLM_F_CREATE, NLM_F_REQUEST,
    };
    use rtnetlink::packet_route::neighbour::{
        NeighbourAddress, NeighbourAttribute, NeighbourFlags,
    };
    let mut req = handle.neighbours().add_bridge(index, &[0; 6]);
    let msg = req.message_mut();
    msg.header.flags = NeighbourFlags::Own;
    msg.attributes
        .push(NeighbourAttribute::Destination(match remote {
            IpAddr::V4(a) => NeighbourAddress::Inet(a),
            IpAddr::V6(a) => NeighbourAddress::Inet6(a),
        }));
    // Appended, not created exclusively: one all-zero entry per remote host.
    let mut nl = NetlinkMessage::from(rtnetlink::packet_route::RouteNetlinkMessage::NewNeighbour(
        msg.clone(),
    ));
    nl.header.flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_APPEND;
    let mut replies = handle.clone().request(nl)?;
    while let Some(reply) = futures_util::StreamExt::next(&mut replies).await {
        if let NetlinkPayload::Error(e) = reply.payload {
            return Err(rtnetlink::Error::NetlinkError(e));
        }
    }
    Ok(())
}
