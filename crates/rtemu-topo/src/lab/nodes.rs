//! Each node once its links exist: interfaces up, addresses, routes, neighbours and sysctls,
//! and the hosts file every node shares.

use std::io;
use std::net::IpAddr;

use futures_util::{stream, StreamExt, TryStreamExt};
use ipnet::IpNet;
use rtnetlink::packet_route::neighbour::NeighbourState;
use rtnetlink::{Handle, RouteMessageBuilder};

use crate::naming::{node_netns, ownership_mark};
use crate::routing::NodePlan;
use crate::state::State;
use crate::topology::{Attachment, ExternalMode, Segment, SegmentKind, Topology};

use super::builders::on_builders;
use super::error::{io_err, nl_err, LabError};
use super::links::{link_indices, mark_up};
use super::netns::{block_on, set_sysctls, with_netlink};
use super::shares::Share;

/// Per node, over a connection of its own, once every link exists: interfaces up, addresses,
/// routes, neighbours, and the node's own sysctls (which may name its interfaces).
pub(super) fn set_up_nodes(
    topo: &Topology,
    share: &Share,
    state: &State,
    plans: &[NodePlan],
) -> Result<(), LabError> {
    let mark = ownership_mark(&topo.lab);
    let attachments = topo.attachments_by_node();
    let nodes: Vec<(usize, &str)> = share
        .nodes
        .iter()
        .zip(&state.nodes)
        .map(|(&ni, (_, ns))| (ni, ns.as_str()))
        .collect();
    on_builders(&nodes, |&(ni, ns)| {
        let node = NodeSetUp {
            node: &topo.nodes[ni],
            attachments: &attachments[ni],
            plan: &plans[ni],
            mark: &mark,
        };
        block_on(with_netlink(
            ns,
            |handle| async move { node.run(&handle).await },
        ))??;
        set_sysctls(ns, topo.nodes[ni].sysctls.clone())
    })
    .map(drop)
}

/// What one node gets once its links exist.
struct NodeSetUp<'a> {
    node: &'a crate::topology::Node,
    /// Its attachments with their segments, in file order.
    attachments: &'a [(&'a Segment, &'a Attachment)],
    plan: &'a NodePlan,
    mark: &'a str,
}

impl NodeSetUp<'_> {
    /// Interfaces up, addresses, routes and neighbours, through `handle` (in the node).
    async fn run(&self, handle: &Handle) -> Result<(), LabError> {
        let what = |x: &str| format!("{x} in node `{}`", self.node.name);
        let idx = link_indices(handle)
            .await
            .map_err(nl_err(what("listing interfaces")))?;
        let lo = idx["lo"];
        mark_up(handle, lo, None, None)
            .await
            .map_err(nl_err(what("bringing lo up")))?;
        for net in &self.node.loopback {
            handle
                .address()
                .add(lo, net.addr(), net.prefix_len())
                .execute()
                .await
                .map_err(nl_err(what(&format!("adding {net} to lo"))))?;
        }
        for &(seg, m) in self.attachments {
            // A moved host interface is not rtemu's: it gets no mark.
            let moved = matches!(
                seg.kind,
                SegmentKind::External {
                    mode: ExternalMode::Move,
                    ..
                }
            );
            let i = idx[&m.ifname];
            mark_up(handle, i, (!moved).then_some(self.mark), None)
                .await
                .map_err(nl_err(what(&format!("setting up {}", m.ifname))))?;
            let addrs = [m.ipv4.map(IpNet::V4), m.ipv6.map(IpNet::V6)];
            for net in addrs.into_iter().flatten() {
                handle
                    .address()
                    .add(i, net.addr(), net.prefix_len())
                    .execute()
                    .await
                    .map_err(nl_err(what(&format!("adding {net} to {}", m.ifname))))?;
            }
        }
        // Routes and neighbours are sent [`IN_FLIGHT`] at a time and their answers awaited
        // together: a node of a large lab has dozens (thousands with `static`), and one round
        // trip each would keep the kernel's routing lock waiting on this thread's wake-ups.
        let routes = self.plan.routes.iter().map(|r| {
            let msg = match (r.dest, r.via) {
                (IpNet::V4(d), IpAddr::V4(g)) => RouteMessageBuilder::<std::net::Ipv4Addr>::new()
                    .destination_prefix(d.network(), d.prefix_len())
                    .gateway(g)
                    .output_interface(idx[&r.dev])
                    .build(),
                (IpNet::V6(d), IpAddr::V6(g)) => RouteMessageBuilder::<std::net::Ipv6Addr>::new()
                    .destination_prefix(d.network(), d.prefix_len())
                    .gateway(g)
                    .output_interface(idx[&r.dev])
                    .build(),
                _ => unreachable!("routing plans a gateway of the destination's family"),
            };
            let added = handle.route().add(msg).execute();
            async move {
                added.await.map_err(nl_err(what(&format!(
                    "adding route {} via {}",
                    r.dest, r.via
                ))))
            }
        });
        all_in_flight(routes).await?;
        let neighbours = self.plan.neighbours.iter().map(|n| {
            let added = handle
                .neighbours()
                .add(idx[&n.dev], n.addr)
                .link_local_address(&n.mac.0)
                .state(NeighbourState::Permanent)
                .execute();
            async move {
                added
                    .await
                    .map_err(nl_err(what(&format!("adding neighbour {}", n.addr))))
            }
        });
        all_in_flight(neighbours).await?;
        Ok(())
    }
}

/// How many netlink requests of one node may await their answers at once. The kernel answers
/// each request into the socket's receive buffer as it is sent, and drops answers that do not
/// fit (the socket only learns `ENOBUFS`): a request whose answer was dropped would be awaited
/// for ever. 64 acknowledgements take a few kB of the buffer's 200 kB.
const IN_FLIGHT: usize = 64;

/// Runs `requests`, [`IN_FLIGHT`] at a time; the first error ends it.
async fn all_in_flight(
    requests: impl Iterator<Item = impl std::future::Future<Output = Result<(), LabError>>>,
) -> Result<(), LabError> {
    stream::iter(requests)
        .buffer_unordered(IN_FLIGHT)
        .try_for_each(|()| std::future::ready(Ok(())))
        .await
}

/// `/etc/netns/<ns>/hosts` for the nodes `local` (indices): every node's name with its first
/// addresses, those on other hosts included. One file, hard-linked into every node's
/// directory: a copy per node would write every name once per node, which grows with the
/// square of the lab (2 GB for 10,000 nodes). So the nodes share it, edits too.
pub(super) fn write_hosts(topo: &Topology, local: &[usize]) -> Result<(), LabError> {
    let loopback = |n: &crate::topology::Node, v4: bool| {
        n.loopback
            .iter()
            .find(|a| matches!(a, IpNet::V4(_)) == v4)
            .map(|a| a.addr())
    };
    let mut first: Vec<[Option<IpAddr>; 2]> = topo
        .nodes
        .iter()
        .map(|n| [loopback(n, true), loopback(n, false)])
        .collect();
    for m in topo.segments.iter().flat_map(|s| &s.members) {
        let [v4, v6] = &mut first[m.node];
        *v4 = v4.or(m.ipv4.map(|n| IpAddr::V4(n.addr())));
        *v6 = v6.or(m.ipv6.map(|n| IpAddr::V6(n.addr())));
    }
    let mut hosts = String::from("127.0.0.1\tlocalhost\n::1\tlocalhost\n");
    for (node, addrs) in topo.nodes.iter().zip(&first) {
        for addr in addrs.iter().flatten() {
            hosts.push_str(&format!("{addr}\t{}\n", node.name));
        }
    }
    let mut written: Option<std::path::PathBuf> = None;
    for node in local.iter().map(|&ni| &topo.nodes[ni]) {
        let dir = std::path::Path::new("/etc/netns").join(node_netns(&topo.lab, &node.name));
        let path = dir.join("hosts");
        std::fs::create_dir_all(&dir)
            .and_then(|()| match &written {
                None => rtemu_sys::output::write(&path, hosts.as_bytes()),
                Some(first) => {
                    // A file left by a crash is replaced.
                    match std::fs::remove_file(&path) {
                        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                        _ => {}
                    }
                    std::fs::hard_link(first, &path)
                }
            })
            .map_err(io_err(format!("writing {}", path.display())))?;
        written.get_or_insert(path);
    }
    Ok(())
}
