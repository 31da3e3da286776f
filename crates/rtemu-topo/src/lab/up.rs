//! Bringing a lab, or one host's part of it, up: the state file first, then everything it
//! names.

use std::collections::BTreeSet;
use std::io;

use crate::cgroup;
use crate::cpuset::{one_hierarchy, Cpusets};
use crate::external::HostSide;
use crate::naming::{lab_netns, node_netns, ownership_mark};
use crate::part::Stitching;
use crate::routing::{plan, NodePlan};
use crate::state::{lab_dir, Handover, LabName, PartState, ProgramsCpuset, State, StateError};
use crate::sys;
use crate::topology::{ExternalMode, Host, SegmentKind, Topology};

use super::builders::on_builders;
use super::down::down;
use super::error::{io_err, LabError};
use super::exec::start_commands;
use super::handover::read_host_side;
use super::links::build_links;
use super::netns::{block_on, find_netns, mark_this_netns, write_sysctls, Found};
use super::nodes::{set_up_nodes, write_hosts};
use super::shares::{find_underlay, Share, Stitch};

/// Brings `topo` up. On error, everything made so far is removed again.
pub fn up(topo: &Topology, file: &str) -> Result<State, LabError> {
    up_with(topo, file, None)
}

/// Brings `topo` up as [`up`] does, the processes started in its nodes kept on the CPUs
/// `programs` when given (a cpuset of the lab's, [`crate::cpuset`]).
pub fn up_with(topo: &Topology, file: &str, programs: Option<&[usize]>) -> Result<State, LabError> {
    if !topo.hosts.is_empty() {
        let hosts: Vec<&str> = topo.hosts.iter().map(|h| h.name.as_str()).collect();
        return Err(LabError::MultiHost {
            lab: topo.lab.clone(),
            hosts: hosts.join(", "),
        });
    }
    let all = Share {
        nodes: (0..topo.nodes.len()).collect(),
        segments: (0..topo.segments.len()).collect(),
        stitch: None,
    };
    build_share(topo, file, &all, programs)
}

/// Brings up host `host`'s part of the multi-host lab `topo` ([`Topology::part`]): its nodes,
/// its segments, and a VXLAN tunnel per segment that reaches other hosts, with the VNIs and
/// UDP port of `stitching` (the same on every host). Run on that host: the tunnels start at
/// the interface that holds its `[hosts]` address, and their sockets stay in the namespace
/// this process runs in. The stitched segments' MTU follows [`crate::part::tunnel_mtu`].
/// The processes started in its nodes are kept on the CPUs `programs` when given, as by
/// [`up_with`]. On error, everything made so far is removed again.
pub fn up_part(
    topo: &Topology,
    file: &str,
    host: &str,
    stitching: &Stitching,
    programs: Option<&[usize]>,
) -> Result<State, LabError> {
    let part = topo.part(host, stitching)?;
    let underlay = find_underlay(&part.host)?;
    let mut topo = topo.clone();
    for t in &part.tunnels {
        let ipv6 = part.host.address.is_ipv6();
        topo.segments[t.segment].mtu = Some(crate::part::tunnel_mtu(
            &topo,
            t.segment,
            &underlay.name,
            underlay.mtu,
            ipv6,
        )?);
    }
    let peers: Vec<&Host> = topo
        .hosts
        .iter()
        .filter(|h| part.tunnels.iter().any(|t| t.remotes.contains(&h.address)))
        .collect();
    let underlay_rtts = crate::underlay::measure(&peers);
    let share = Share {
        nodes: part.nodes.clone(),
        segments: part.segments.clone(),
        stitch: Some(Stitch {
            underlay: underlay.index,
            local: part.host.address,
            port: stitching.port,
            state: PartState {
                host: part.host.name.clone(),
                stitching: stitching.clone(),
                tunnels: part.tunnels,
                underlay: underlay_rtts,
            },
        }),
    };
    build_share(&topo, file, &share, programs)
}

/// The VNIs the labs on this host use (their parts' tunnels): a new lab's must differ, since
/// the kernel keeps one VXLAN device per VNI and port. A lab whose state cannot be read is
/// skipped; the kernel still refuses a VNI in use.
pub fn vnis_in_use() -> Result<BTreeSet<u32>, LabError> {
    let mut used = BTreeSet::new();
    for lab in State::labs()? {
        if let Ok(Some(state)) = State::load(&lab) {
            used.extend(
                state
                    .part
                    .iter()
                    .flat_map(|p| p.tunnels.iter().map(|t| t.vni)),
            );
        }
    }
    Ok(used)
}

/// Brings up `share` of `topo`, with `cpu` limits where the file asks and its programs on
/// the CPUs `programs` when given. On error, everything made so far is removed again.
fn build_share(
    topo: &Topology,
    file: &str,
    share: &Share,
    programs: Option<&[usize]>,
) -> Result<State, LabError> {
    let limited: Vec<&crate::topology::Node> = share
        .nodes
        .iter()
        .map(|&n| &topo.nodes[n])
        // A container's limit is its runtime's (`--cpus`).
        .filter(|n| n.cpu.is_some() && n.container.is_none())
        .collect();
    let cpu = match limited.first() {
        None => None,
        Some(node) => {
            Some(cgroup::Controller::find().ok_or_else(|| LabError::CpuLimit(node.name.clone()))?)
        }
    };
    let cpusets = match programs {
        None => None,
        Some(_) => Some(Cpusets::find().ok_or(LabError::NoCpuset)?),
    };
    let lab = LabName::new(&topo.lab)?;
    if lab_dir(&lab).exists() {
        return Err(LabError::Exists(topo.lab.clone()));
    }
    let segments = || share.segments.iter().map(|&si| &topo.segments[si]);
    // The lab namespace holds LAN bridges and the ends of the engine's links.
    let has_lans = segments().any(|s| s.kind == SegmentKind::Lan)
        || share
            .segments
            .iter()
            .any(|&si| topo.segments[si].impairment().is_some() && share.runs_engine_of(topo, si));
    let nodes: Vec<(String, String)> = share
        .nodes
        .iter()
        .map(|&n| {
            let name = &topo.nodes[n].name;
            (name.clone(), node_netns(&topo.lab, name))
        })
        .collect();
    let mut namespaces: Vec<String> = nodes.iter().map(|(_, ns)| ns.clone()).collect();
    if has_lans {
        namespaces.push(lab_netns(&topo.lab));
    }
    let handovers = segments()
        .filter_map(|seg| match &seg.kind {
            SegmentKind::External {
                host,
                mode: ExternalMode::Move,
                uplink,
            } => Some((
                Handover {
                    host: host.clone(),
                    netns: node_netns(&topo.lab, &topo.nodes[seg.members[0].node].name),
                    ifname: seg.members[0].ifname.clone(),
                    saved: HostSide::default(),
                },
                *uplink,
            )),
            _ => None,
        })
        .map(|(h, uplink)| read_host_side(h, uplink))
        .collect::<Result<Vec<_>, _>>()?;
    // A namespace of the lab's names that no state file records is someone else's: `up` would
    // fail on it, and the clean-up after that failure would remove it.
    if let Some(ns) = namespaces.iter().find(|ns| sys::netns_exists(ns)) {
        let other = match find_netns(ns) {
            Ok(Found::Marked(Some(mark))) => mark.strip_prefix("rtemu:").map(str::to_owned),
            _ => None,
        };
        return Err(match other {
            Some(other) => LabError::OtherLabsNamespace {
                ns: ns.clone(),
                other,
            },
            None => LabError::ForeignNamespace(ns.clone()),
        });
    }
    // Every image is on this host before anything is made: a missing one fails here.
    if let Some(rt) = crate::launch::runtime_for(topo, &share.nodes)? {
        crate::launch::resolve_images(topo, &share.nodes, &rt)?;
    }
    let mut state = State {
        lab: lab.clone(),
        file: file.to_owned(),
        namespaces,
        nodes,
        handovers,
        cgroups: cpu
            .iter()
            .flat_map(|c| {
                limited
                    .iter()
                    .map(|n| (n.name.clone(), c.dir(&node_netns(&topo.lab, &n.name))))
            })
            .collect(),
        programs: cpusets
            .iter()
            .zip(programs)
            .map(|(c, cpus)| ProgramsCpuset {
                cgroup: c.dir(&lab, share.stitch.as_ref().map(|s| s.state.host.as_str())),
                cpus: cpus.to_vec(),
            })
            .next(),
        complete: false,
        topology: topo.clone(),
        part: share.stitch.as_ref().map(|s| s.state.clone()),
    };
    // Recorded before anything exists, so `down` can reap whatever the next steps make.
    if let Err(e) = state.create() {
        return Err(match e {
            StateError::Io { source, .. } if source.kind() == io::ErrorKind::AlreadyExists => {
                LabError::Exists(topo.lab.clone())
            }
            e => e.into(),
        });
    }
    match build(topo, share, &state, cpu.as_ref(), cpusets.as_ref()) {
        Ok(()) => {
            state.complete = true;
            state.save()?;
            Ok(state)
        }
        Err(e) => {
            // Best effort: the original error is the one worth reporting.
            let _ = down(&topo.lab);
            Err(e)
        }
    }
}

/// Everything after the state file: namespaces, sysctls, links, tunnels, addresses, routes,
/// neighbours, hosts files and start-up commands of `share`.
fn build(
    topo: &Topology,
    share: &Share,
    state: &State,
    cpu: Option<&cgroup::Controller>,
    cpusets: Option<&Cpusets>,
) -> Result<(), LabError> {
    // Routes and neighbours come from the whole lab, so every host plans the same.
    let plans = plan(topo);
    // Each namespace is marked and given its first sysctls from inside, before it is named.
    let mut first: Vec<(&str, Vec<(String, String)>)> = share
        .nodes
        .iter()
        .zip(&state.nodes)
        .map(|(&ni, (_, ns))| (ns.as_str(), node_sysctls(&plans[ni])))
        .collect();
    let lab_ns = lab_netns(&topo.lab);
    if state.namespaces.contains(&lab_ns) {
        // Bridges and their ports carry the nodes' frames and must add none of their own:
        // without IPv6 they send no duplicate address probes or MLD reports into the LANs.
        let off =
            ["all", "default"].map(|c| (format!("net.ipv6.conf.{c}.disable_ipv6"), "1".to_owned()));
        first.push((&lab_ns, off.into()));
    }
    on_builders(&first, |(ns, sysctls)| {
        let (mark, sysctls) = (ownership_mark(&state.lab), sysctls.clone());
        sys::create_netns(ns, move || {
            mark_this_netns(mark)?;
            write_sysctls(&sysctls)
        })
        .map_err(io_err(format!("creating namespace {ns}")))
    })?;
    let programs = cpusets.zip(state.programs.as_ref());
    if let Some((c, p)) = programs {
        let host = state.part.as_ref().map(|p| p.host.as_str());
        c.create(&state.lab, host, &p.cpus)?;
    }
    if let Some(c) = cpu {
        for (node, dir) in &state.cgroups {
            let cores = topo.nodes[topo.node_index(node).expect("a node of the lab")]
                .cpu
                .expect("only limited nodes have cgroups");
            c.create(dir, cores).map_err(io_err(format!(
                "making the CPU-limit cgroup {}",
                dir.display()
            )))?;
            // One cgroup per process on cgroup v2: the node's carries the cpuset's CPUs too.
            if let Some((sets, p)) = programs.filter(|(_, p)| one_hierarchy(&p.cgroup, dir)) {
                sets.restrict(dir, &p.cpus).map_err(io_err(format!(
                    "keeping {} off the engine's CPUs",
                    dir.display()
                )))?;
            }
        }
    }
    block_on(build_links(topo, share, state))??;
    set_up_nodes(topo, share, state, &plans)?;
    write_hosts(topo, &share.nodes)?;
    start_commands(topo, &share.nodes, state)
}

/// The sysctls a node's namespace gets when it is made.
fn node_sysctls(plan: &NodePlan) -> Vec<(String, String)> {
    // Addresses are usable at once: nothing else is on these segments, so duplicate address
    // detection only delays the first packets.
    let mut sysctls = ["all", "default"]
        .map(|c| (format!("net.ipv6.conf.{c}.accept_dad"), "0".to_owned()))
        .to_vec();
    if plan.forwarding {
        sysctls.push(("net.ipv4.ip_forward".into(), "1".into()));
        sysctls.push(("net.ipv6.conf.all.forwarding".into(), "1".into()));
    }
    sysctls
}
