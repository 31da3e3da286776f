//! The links and LANs of a share: veth pairs with each end made in its namespace, bridges in
//! the lab namespace, host interfaces handed over.

use std::collections::{BTreeMap, VecDeque};
use std::os::fd::{AsRawFd, OwnedFd};
use std::rc::Rc;

use futures_util::TryStreamExt;
use rtnetlink::packet_route::link::{InfoData, InfoKind, InfoVeth, LinkAttribute, MacVlanMode};
use rtnetlink::{Handle, LinkBridge, LinkMacVlan, LinkMessageBuilder, LinkUnspec, LinkVeth};

use crate::naming::{engine_ends, lab_netns, ownership_mark};
use crate::part::TunnelRole;
use crate::state::State;
use crate::topology::{Attachment, ExternalMode, Mac, SegmentKind, Topology};

use super::error::{io_err, nl_err, LabError};
use super::netns::{connect, open_netns, set_link};
use super::shares::Share;
use super::tunnels::{flood_to, tunnel};

/// One end of a veth pair: its name, namespace, MAC and MTU.
struct End<'a> {
    name: &'a str,
    netns: &'a OwnedFd,
    mac: Option<Mac>,
    mtu: Option<u32>,
}

impl<'a> End<'a> {
    /// A node's end of a segment: the file's interface name and MAC, in the node's namespace.
    fn node(m: &'a Attachment, netns: &'a OwnedFd, mtu: Option<u32>) -> End<'a> {
        End {
            name: &m.ifname,
            netns,
            mac: Some(m.mac),
            mtu,
        }
    }

    /// An end in the lab's namespace (a bridge port or an engine end), named by rtemu.
    fn lab(name: &'a str, netns: &'a OwnedFd, mtu: Option<u32>) -> End<'a> {
        End {
            name,
            netns,
            mac: None,
            mtu,
        }
    }
}

/// Creates a veth pair with each end directly in its namespace, from the host's netlink socket.
///
/// End `a` is up from the start. The kernel queues a link-watch event for each new end, and
/// each time an event of a running veth comes, it walks the whole queue past the events of
/// ends that are down: with both ends down until the nodes are set up, a 10,000-node chain
/// held 20,000 such events, and the walks (under the `rtnl` lock everything else waits for)
/// made `up` grow faster than the lab (kernel CPU 20-22 s, now 14-15 s). End `b` cannot be:
/// the kernel opens it before it knows its peer and refuses (`ENOTCONN`).
async fn veth(host: &Handle, a: End<'_>, b: End<'_>) -> Result<(), rtnetlink::Error> {
    let mut peer = LinkUnspec::new_with_name(b.name).setns_by_fd(b.netns.as_raw_fd());
    if let Some(mac) = b.mac {
        peer = peer.address(mac.0.to_vec());
    }
    if let Some(mtu) = b.mtu {
        peer = peer.mtu(mtu);
    }
    let mut msg = LinkMessageBuilder::<LinkVeth>::new_with_info_kind(InfoKind::Veth)
        .name(a.name.to_owned())
        .setns_by_fd(a.netns.as_raw_fd())
        .up()
        .set_info_data(InfoData::Veth(InfoVeth::Peer(peer.build())));
    if let Some(mac) = a.mac {
        msg = msg.address(mac.0.to_vec());
    }
    if let Some(mtu) = a.mtu {
        msg = msg.mtu(mtu);
    }
    host.link().add(msg.build()).execute().await
}

/// The index of the host interface `name`.
pub(super) async fn host_index(host: &Handle, name: &str) -> Result<u32, LabError> {
    let mut links = host.link().get().match_name(name.to_owned()).execute();
    match links.try_next().await {
        Ok(Some(msg)) => Ok(msg.header.index),
        Ok(None) | Err(_) => Err(LabError::NoHostInterface(name.to_owned())),
    }
}

/// Interface name → index in the namespace `handle` talks to.
pub(super) async fn link_indices(
    handle: &Handle,
) -> Result<BTreeMap<String, u32>, rtnetlink::Error> {
    let mut links = handle.link().get().execute();
    let mut out = BTreeMap::new();
    while let Some(msg) = links.try_next().await? {
        for attr in &msg.attributes {
            if let LinkAttribute::IfName(name) = attr {
                out.insert(name.clone(), msg.header.index);
            }
        }
    }
    Ok(out)
}

/// Brings interface `index` up and marks it as the lab's.
pub(super) async fn mark_up(
    handle: &Handle,
    index: u32,
    mark: Option<&str>,
    controller: Option<u32>,
) -> Result<(), rtnetlink::Error> {
    set_link(handle, index, |mut msg| {
        msg = msg.up();
        if let Some(mark) = mark {
            msg = msg.append_extra_attribute(LinkAttribute::IfAlias(mark.to_owned()));
        }
        if let Some(c) = controller {
            msg = msg.controller(c);
        }
        msg
    })
    .await
}

/// How many node namespaces [`Namespaces`] keeps open: enough that the links of a chain, a
/// star or a grid in file order mostly find their nodes open.
const OPEN_NAMESPACES: usize = 16;

/// Descriptors of the nodes' namespaces, opened when a link needs them and kept for the next
/// few links, the least recently used closed first: at most [`OPEN_NAMESPACES`], plus those
/// the caller still holds, whatever the lab's size.
struct Namespaces<'a> {
    /// Each node's namespace by node index; `None` for nodes of other hosts.
    names: &'a [Option<&'a str>],
    /// The open ones, the most recently used last.
    open: VecDeque<(usize, Rc<OwnedFd>)>,
}

impl<'a> Namespaces<'a> {
    fn new(names: &'a [Option<&'a str>]) -> Namespaces<'a> {
        Namespaces {
            names,
            open: VecDeque::with_capacity(OPEN_NAMESPACES),
        }
    }

    /// Node `node`'s namespace, opened unless it still is.
    fn get(&mut self, node: usize) -> Result<Rc<OwnedFd>, LabError> {
        let fd = match self.open.iter().position(|(n, _)| *n == node) {
            Some(i) => self.open.remove(i).expect("a position in the queue").1,
            None => {
                if self.open.len() == OPEN_NAMESPACES {
                    self.open.pop_front();
                }
                Rc::new(open_netns(self.names[node].expect("a node of the share"))?)
            }
        };
        self.open.push_back((node, Rc::clone(&fd)));
        Ok(fd)
    }
}
/// Makes the links, LANs and tunnels of `share`, then sets up every node: interfaces up,
/// addresses, routes and neighbours.
///
/// Descriptors stay bounded whatever the lab's size: a node's namespace is opened when one of
/// its links is made and closed soon after ([`Namespaces`]), and a node gets a netlink
/// connection only while it is set up ([`super::netns::with_netlink`]). Only the host's
/// connection and the lab namespace's stay open throughout.
pub(super) async fn build_links(
    topo: &Topology,
    share: &Share,
    state: &State,
) -> Result<(), LabError> {
    let lab = &topo.lab;
    let mark = ownership_mark(lab);
    let (conn, host_handle, _) = rtnetlink::new_connection().map_err(io_err("opening netlink"))?;
    tokio::spawn(conn);
    let mut names = vec![None; topo.nodes.len()];
    for (&ni, (_, ns)) in share.nodes.iter().zip(&state.nodes) {
        names[ni] = Some(ns.as_str());
    }
    let lab_ns = state.namespaces.iter().find(|ns| **ns == lab_netns(lab));
    let lab_side = match lab_ns {
        Some(ns) => Some((open_netns(ns)?, connect(ns)?)),
        None => None,
    };
    let mut links = Links {
        topo,
        share,
        host: &host_handle,
        nodes: Namespaces::new(&names),
        lab_side: lab_side.as_ref(),
    };

    // Links, LAN ports and tunnels.
    let mut bridges = Vec::new();
    let mut engine_links = Vec::new();
    for &si in &share.segments {
        match &topo.segments[si].kind {
            SegmentKind::Link { impairment } => {
                if links.link(si, impairment.is_some()).await? {
                    engine_links.push(si);
                }
            }
            SegmentKind::Lan => bridges.push(links.lan(si).await?),
            SegmentKind::External {
                host: name, mode, ..
            } => links.external(si, name, *mode).await?,
        }
    }
    drop(links);

    if let Some((_, handle)) = &lab_side {
        lab_side_up(handle, &mark, share, &engine_links, &bridges).await?;
    }
    Ok(())
}

/// What making a share's segments needs at hand.
struct Links<'a> {
    topo: &'a Topology,
    share: &'a Share,
    /// The host's netlink connection, which makes every pair with its ends in place.
    host: &'a Handle,
    /// The nodes' namespaces, a few kept open.
    nodes: Namespaces<'a>,
    /// The lab namespace and a connection into it, when the share has one.
    lab_side: Option<&'a (OwnedFd, Handle)>,
}

impl Links<'_> {
    /// Makes the VXLAN tunnel of stitched segment `si` in namespace `netns`, with `mac`.
    async fn tunnel(&self, si: usize, netns: &OwnedFd, mac: Option<Mac>) -> Result<(), LabError> {
        let seg = &self.topo.segments[si];
        let t = self.share.tunnel(si).expect("a stitched segment");
        let st = self.share.stitch.as_ref().expect("a part");
        let what = format!(
            "creating the VXLAN tunnel {} (VNI {}) of `{}`",
            t.ifname, t.vni, seg.name
        );
        tunnel(self.host, t, st, netns, mac, seg.mtu)
            .await
            .map_err(nl_err(what))
    }

    /// Makes link `si` (`impaired`: it has an impairment): its nodes joined to the engine's
    /// ends when the engine runs here, a node's tunnel to the engine's host, or one veth pair.
    /// Whether the engine runs here.
    async fn link(&mut self, si: usize, impaired: bool) -> Result<bool, LabError> {
        let (topo, share, host) = (self.topo, self.share, self.host);
        let seg = &topo.segments[si];
        let tunnel_of = share.tunnel(si);
        let names = self.nodes.names;
        let local = |m: &Attachment| names[m.node].is_some();
        let engine_here = impaired && share.runs_engine_of(topo, si);
        if engine_here {
            let (fd, _) = self
                .lab_side
                .expect("a lab with impaired links has a lab namespace");
            for (m, end) in seg.members.iter().zip(engine_ends(si)) {
                if !local(m) {
                    continue;
                }
                let node_fd = self.nodes.get(m.node)?;
                let node = End::node(m, &node_fd, seg.mtu);
                veth(host, node, End::lab(&end, fd, seg.mtu))
                    .await
                    .map_err(nl_err(format!(
                        "joining `{}` to the engine of link `{}`",
                        topo.nodes[m.node].name, seg.name
                    )))?;
            }
            if tunnel_of.is_some() {
                self.tunnel(si, fd, None).await?;
            }
        } else if let Some(t) = tunnel_of {
            let TunnelRole::Node { member } = t.role else {
                unreachable!("a link's tunnel away from its engine is a node's interface")
            };
            let m = &seg.members[member];
            let node_fd = self.nodes.get(m.node)?;
            self.tunnel(si, &node_fd, Some(m.mac)).await?;
        } else {
            let (a, b) = (&seg.members[0], &seg.members[1]);
            let (a_fd, b_fd) = (self.nodes.get(a.node)?, self.nodes.get(b.node)?);
            let ends = (End::node(a, &a_fd, seg.mtu), End::node(b, &b_fd, seg.mtu));
            veth(host, ends.0, ends.1)
                .await
                .map_err(nl_err(format!("creating link `{}`", seg.name)))?;
        }
        Ok(engine_here)
    }

    /// Makes LAN `si`: its bridge in the lab namespace, a port per local member, its tunnel.
    /// The bridge and its ports, to be set up once all exist.
    async fn lan(&mut self, si: usize) -> Result<(String, Vec<String>), LabError> {
        let (topo, host) = (self.topo, self.host);
        let seg = &topo.segments[si];
        let (fd, handle) = self.lab_side.expect("a lab with LANs has a lab namespace");
        let names = self.nodes.names;
        let bridge = format!("br{si}");
        let mut msg = LinkBridge::new(&bridge);
        if let Some(mtu) = seg.mtu {
            msg = msg.mtu(mtu);
        }
        handle
            .link()
            .add(msg.build())
            .execute()
            .await
            .map_err(nl_err(format!("creating the bridge of LAN `{}`", seg.name)))?;
        let mut ports = Vec::new();
        for (mi, m) in seg
            .members
            .iter()
            .enumerate()
            .filter(|(_, m)| names[m.node].is_some())
        {
            let port = format!("s{si}p{mi}");
            let node_fd = self.nodes.get(m.node)?;
            let node = End::node(m, &node_fd, seg.mtu);
            veth(host, node, End::lab(&port, fd, seg.mtu))
                .await
                .map_err(nl_err(format!(
                    "joining `{}` to LAN `{}`",
                    topo.nodes[m.node].name, seg.name
                )))?;
            ports.push(port);
        }
        if let Some(t) = self.share.tunnel(si) {
            self.tunnel(si, fd, None).await?;
            ports.push(t.ifname.clone());
        }
        Ok((bridge, ports))
    }

    /// Hands host interface `name` to the only member of external segment `si`, moved or
    /// through a macvlan interface.
    async fn external(
        &mut self,
        si: usize,
        name: &str,
        mode: ExternalMode,
    ) -> Result<(), LabError> {
        let (topo, host) = (self.topo, self.host);
        let m = &topo.segments[si].members[0];
        let index = host_index(host, name).await?;
        let node_fd = self.nodes.get(m.node)?;
        let request = match mode {
            ExternalMode::Move => {
                let name = m.ifname.clone();
                set_link(host, index, |msg| {
                    msg.setns_by_fd(node_fd.as_raw_fd()).name(name)
                })
                .await
            }
            ExternalMode::Macvlan => {
                let msg = LinkMacVlan::new(&m.ifname, index, MacVlanMode::Bridge)
                    .setns_by_fd(node_fd.as_raw_fd())
                    .address(m.mac.0.to_vec())
                    .build();
                host.link().add(msg).execute().await
            }
        };
        request.map_err(nl_err(format!(
            "handing host interface {name} to node `{}`",
            topo.nodes[m.node].name
        )))
    }
}

/// Once every segment exists, in the lab namespace (`handle`): the engine's ends of
/// `engine_links` up, the `bridges` and their ports up, and each LAN tunnel's flood list.
async fn lab_side_up(
    handle: &Handle,
    mark: &str,
    share: &Share,
    engine_links: &[usize],
    bridges: &[(String, Vec<String>)],
) -> Result<(), LabError> {
    let idx = link_indices(handle)
        .await
        .map_err(nl_err("listing the lab's bridges"))?;
    for end in engine_links.iter().flat_map(|si| engine_ends(*si)) {
        mark_up(handle, idx[&end], Some(mark), None)
            .await
            .map_err(nl_err(format!("setting up {end}")))?;
    }
    for (bridge, ports) in bridges {
        let b = idx[bridge];
        mark_up(handle, b, Some(mark), None)
            .await
            .map_err(nl_err(format!("setting up {bridge}")))?;
        for port in ports {
            mark_up(handle, idx[port], Some(mark), Some(b))
                .await
                .map_err(nl_err(format!("attaching {port} to {bridge}")))?;
        }
    }
    let lan_tunnels = share
        .stitch
        .iter()
        .flat_map(|st| &st.state.tunnels)
        .filter(|t| t.role == TunnelRole::Bridge);
    for t in lan_tunnels {
        for &remote in &t.remotes {
            flood_to(handle, idx[&t.ifname], remote)
                .await
                .map_err(nl_err(format!(
                    "adding {remote} to the flood list of {}",
                    t.ifname
                )))?;
        }
    }
    Ok(())
}
