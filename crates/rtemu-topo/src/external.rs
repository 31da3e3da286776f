//! A host interface moved into a node (`[[externals]]`, mode `move`): what it carried on the
//! host, read before it moves, so that `up` refuses the interface the host is reached through
//! (unless the file says `uplink = true`) and `down` gives it back as it was: up or down, with
//! its addresses and its routes.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use futures_util::TryStreamExt;
use ipnet::IpNet;
use rtnetlink::packet_route::address::{AddressAttribute, AddressScope};
use rtnetlink::packet_route::link::LinkFlags;
use rtnetlink::packet_route::route::{
    RouteAddress, RouteAttribute, RouteHeader, RouteMessage, RouteProtocol,
};
use rtnetlink::{Handle, LinkUnspec, RouteMessageBuilder};
use serde::{Deserialize, Serialize};

/// What a host interface carried before it moved into a node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostSide {
    /// Whether it was up.
    #[serde(default)]
    pub up: bool,
    /// Its addresses with their prefix lengths (not link-local ones: the kernel makes those
    /// again).
    #[serde(default)]
    pub addresses: Vec<IpNet>,
    /// The routes of the main table through it that its addresses do not make by themselves.
    #[serde(default)]
    pub routes: Vec<HostRoute>,
}

/// A route of the host's main table through a handed-over interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostRoute {
    /// Where it leads (`0.0.0.0/0`: the default route).
    pub destination: IpNet,
    /// Its gateway, if any.
    pub gateway: Option<IpAddr>,
    /// Its metric, if any.
    pub metric: Option<u32>,
}

impl HostSide {
    /// Why the host may be reached through this interface, if it may: it carries a default
    /// route or an address of global scope. Moving it into a node cuts the host off.
    pub fn reaches_host(&self) -> Option<String> {
        if let Some(r) = self.routes.iter().find(|r| r.destination.prefix_len() == 0) {
            return Some(match r.gateway {
                Some(g) => format!("the host's default route (via {g})"),
                None => "the host's default route".to_owned(),
            });
        }
        self.addresses
            .first()
            .map(|a| format!("the host's address {a}"))
    }
}

/// Reads what interface `index` carries in the namespace `handle` talks to.
pub async fn read(handle: &Handle, index: u32) -> Result<HostSide, rtnetlink::Error> {
    let mut side = HostSide::default();
    let mut links = handle.link().get().match_index(index).execute();
    if let Some(link) = links.try_next().await? {
        side.up = link.header.flags.contains(LinkFlags::Up);
    }
    let mut addrs = handle
        .address()
        .get()
        .set_link_index_filter(index)
        .execute();
    while let Some(msg) = addrs.try_next().await? {
        if msg.header.index != index || msg.header.scope == AddressScope::Link {
            continue;
        }
        // IFA_LOCAL is an IPv4 interface's own address (IFA_ADDRESS its peer's on a
        // point-to-point link); IPv6 gives IFA_ADDRESS only.
        let local = msg.attributes.iter().find_map(|a| match a {
            AddressAttribute::Local(a) => Some(*a),
            _ => None,
        });
        let address = local.or_else(|| {
            msg.attributes.iter().find_map(|a| match a {
                AddressAttribute::Address(a) => Some(*a),
                _ => None,
            })
        });
        if let Some(net) = address.and_then(|a| IpNet::new(a, msg.header.prefix_len).ok()) {
            side.addresses.push(net);
        }
    }
    for family in [
        RouteMessageBuilder::<Ipv4Addr>::new().build(),
        RouteMessageBuilder::<Ipv6Addr>::new().build(),
    ] {
        let mut routes = handle.route().get(family).execute();
        while let Some(msg) = routes.try_next().await? {
            if let Some(route) = route_through(&msg, index) {
                side.routes.push(route);
            }
        }
    }
    Ok(side)
}

/// `msg` as a route to restore, when it is one of the main table through interface `index`
/// that an address does not make by itself (the kernel's own routes come back with the
/// addresses).
fn route_through(msg: &RouteMessage, index: u32) -> Option<HostRoute> {
    let table = msg
        .attributes
        .iter()
        .find_map(|a| match a {
            RouteAttribute::Table(t) => Some(*t),
            _ => None,
        })
        .unwrap_or(u32::from(msg.header.table));
    let oif = msg.attributes.contains(&RouteAttribute::Oif(index));
    if table != u32::from(RouteHeader::RT_TABLE_MAIN)
        || !oif
        || msg.header.protocol == RouteProtocol::Kernel
    {
        return None;
    }
    let ip = |a: &RouteAddress| match a {
        RouteAddress::Inet(a) => Some(IpAddr::V4(*a)),
        RouteAddress::Inet6(a) => Some(IpAddr::V6(*a)),
        _ => None,
    };
    let mut destination = None;
    let (mut gateway, mut metric) = (None, None);
    for a in &msg.attributes {
        match a {
            RouteAttribute::Destination(d) => destination = ip(d),
            RouteAttribute::Gateway(g) => gateway = ip(g),
            RouteAttribute::Priority(p) => metric = Some(*p),
            _ => {}
        }
    }
    let unspecified = match msg.header.address_family {
        rtnetlink::packet_route::AddressFamily::Inet6 => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        _ => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
    };
    let destination = IpNet::new(
        destination.unwrap_or(unspecified),
        msg.header.destination_prefix_length,
    )
    .ok()?;
    // IPv6 multicast and link-local routes come back by themselves with the interface.
    if let IpNet::V6(d) = destination {
        if d.addr().is_multicast() || d.addr().is_unicast_link_local() {
            return None;
        }
    }
    Some(HostRoute {
        destination,
        gateway,
        metric,
    })
}

/// Gives interface `index` (back on the host, under its own name) what `side` says it
/// carried: its state, then its addresses, then its routes. Ones that are there already are
/// left as they are.
pub async fn restore(handle: &Handle, index: u32, side: &HostSide) -> Result<(), rtnetlink::Error> {
    if side.up {
        let msg = LinkUnspec::new_with_index(index).up().build();
        handle.link().set(msg).execute().await?;
    }
    for net in &side.addresses {
        let added = handle
            .address()
            .add(index, net.addr(), net.prefix_len())
            .execute()
            .await;
        ignore_exists(added)?;
    }
    for r in &side.routes {
        let d = r.destination;
        let built = RouteMessageBuilder::<IpAddr>::new()
            .destination_prefix(d.addr(), d.prefix_len())
            .and_then(|b| match r.gateway {
                Some(g) => b.gateway(g),
                None => Ok(b),
            });
        // What `read` recorded always builds; anything else is not a route to give back.
        let Ok(built) = built else {
            continue;
        };
        let mut msg = built.output_interface(index).build();
        if let Some(m) = r.metric {
            msg.attributes.push(RouteAttribute::Priority(m));
        }
        ignore_exists(handle.route().add(msg).execute().await)?;
    }
    Ok(())
}

/// Success also when what was to be added is there already (EEXIST).
fn ignore_exists(r: Result<(), rtnetlink::Error>) -> Result<(), rtnetlink::Error> {
    match r {
        Err(rtnetlink::Error::NetlinkError(e))
            if e.code.is_some_and(|c| c.get() == -libc::EEXIST) =>
        {
            Ok(())
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(destination: &str, gateway: Option<&str>) -> HostRoute {
        HostRoute {
            destination: destination.parse().unwrap(),
            gateway: gateway.map(|g| g.parse().unwrap()),
            metric: None,
        }
    }

    #[test]
    fn the_host_is_reached_through_a_default_route_or_a_global_address() {
        let mut side = HostSide::default();
        assert_eq!(side.reaches_host(), None);
        side.routes.push(route("198.51.100.0/24", None));
        assert_eq!(side.reaches_host(), None);
        side.addresses.push("192.0.2.7/24".parse().unwrap());
        assert_eq!(
            side.reaches_host().as_deref(),
            Some("the host's address 192.0.2.7/24")
        );
        side.routes.push(route("::/0", Some("fe80::1")));
        assert_eq!(
            side.reaches_host().as_deref(),
            Some("the host's default route (via fe80::1)")
        );
    }

    #[test]
    fn a_state_file_from_before_reads_as_nothing_to_restore() {
        let side: HostSide = serde_json::from_str("{}").unwrap();
        assert_eq!(side, HostSide::default());
    }
}
