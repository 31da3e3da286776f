//! `rtemu capture`: packets of several node interfaces into one pcapng file, every packet
//! stamped by the kernel from the same clock, so traces from different nodes compare directly
//! (the vimage paper's isochronous timing).
//!
//! One `AF_PACKET` socket per node, opened inside the node's namespace, sees every frame sent
//! or received on the node's interfaces; frames of interfaces not asked for are skipped. The
//! kernel stamps each frame (`SO_TIMESTAMPNS`, `CLOCK_REALTIME`, shared by all namespaces).

use std::collections::BTreeMap;
use std::io::{IoSliceMut, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{
    recvmsg, setsockopt, socket, sockopt, AddressFamily, ControlMessageOwned, LinkAddr, MsgFlags,
    SockFlag, SockProtocol, SockType,
};

use crate::lab::{io_err, LabError};
use crate::pcapng::{Direction, PcapngWriter};

/// `sll_pkttype` of a frame the interface sent (`<linux/if_packet.h>`).
const PACKET_OUTGOING: u8 = 4;
use crate::state::State;
use crate::sys;

/// When a capture stops (whichever comes first).
pub struct Limits<'a> {
    /// After this long.
    pub duration: Option<Duration>,
    /// After this many packets.
    pub count: Option<u64>,
    /// When this becomes true (set from a signal handler, for instance).
    pub stop: &'a AtomicBool,
}

/// One node's packet socket and the interfaces wanted from it.
struct Tap {
    fd: OwnedFd,
    /// ifindex → interface number in the pcapng file.
    wanted: BTreeMap<u32, u32>,
}

/// The interfaces of `targets`, or every interface of every node when empty, checked against
/// the lab (of one host's part: its own nodes' interfaces). A target is `node:if`, or a link's name, which stands for both its ends: for an
/// impaired link, the frames each node sent into the engine (outbound) and those the engine
/// released to it (inbound), stamped by the kernel on one clock.
pub fn resolve_targets(
    state: &State,
    targets: &[String],
) -> Result<Vec<(String, String)>, LabError> {
    let topo = &state.topology;
    // One host's part of a multi-host lab holds some of the nodes only.
    let here = |m: &&crate::topology::Attachment| {
        let name = &topo.nodes[m.node].name;
        state.nodes.iter().any(|(n, _)| n == name)
    };
    let all: Vec<(String, String)> = topo
        .segments
        .iter()
        .flat_map(|s| &s.members)
        .filter(here)
        .map(|m| (topo.nodes[m.node].name.clone(), m.ifname.clone()))
        .collect();
    if targets.is_empty() {
        return Ok(all);
    }
    let mut out = Vec::new();
    for t in targets {
        if let Some(seg) = topo
            .segments
            .iter()
            .find(|s| &s.name == t && matches!(s.kind, crate::topology::SegmentKind::Link { .. }))
        {
            out.extend(
                seg.members
                    .iter()
                    .filter(here)
                    .map(|m| (topo.nodes[m.node].name.clone(), m.ifname.clone())),
            );
            continue;
        }
        let (node, ifname) = t
            .split_once(':')
            .ok_or_else(|| LabError::BadTarget(t.clone()))?;
        let pair = (node.to_owned(), ifname.to_owned());
        if !all.contains(&pair) {
            return Err(LabError::BadTarget(t.clone()));
        }
        out.push(pair);
    }
    Ok(out)
}

/// Captures the interfaces `targets` (`(node, ifname)`) of the lab in `state` into `out` until
/// a limit is reached; returns the number of packets written.
pub fn capture<W: Write>(
    state: &State,
    targets: &[(String, String)],
    out: W,
    limits: &Limits<'_>,
) -> Result<u64, LabError> {
    let names: Vec<String> = targets.iter().map(|(n, i)| format!("{n}:{i}")).collect();
    let mut by_node: BTreeMap<&str, Vec<(String, u32)>> = BTreeMap::new();
    for (id, (node, ifname)) in targets.iter().enumerate() {
        by_node
            .entry(node)
            .or_default()
            .push((ifname.clone(), id as u32));
    }
    let mut taps = Vec::new();
    for (node, ifs) in by_node {
        let ns = state
            .nodes
            .iter()
            .find(|(n, _)| n == node)
            .map(|(_, ns)| ns.clone())
            .ok_or_else(|| LabError::BadTarget(node.to_owned()))?;
        let tap = sys::in_netns(&ns, move || {
            let fd = socket(
                AddressFamily::Packet,
                SockType::Raw,
                SockFlag::SOCK_CLOEXEC,
                SockProtocol::EthAll,
            )?;
            setsockopt(&fd, sockopt::ReceiveTimestampns, &true)?;
            let mut wanted = BTreeMap::new();
            for (ifname, id) in ifs {
                wanted.insert(nix::net::if_::if_nametoindex(ifname.as_str())?, id);
            }
            Ok(Tap { fd, wanted })
        })
        .map_err(io_err(format!("opening a packet socket in node `{node}`")))?;
        taps.push(tap);
    }

    let mut writer = PcapngWriter::new(std::io::BufWriter::new(out), &names)
        .map_err(io_err("writing the capture"))?;
    let started = Instant::now();
    let mut written = 0u64;
    // Large enough for any frame on these interfaces (MTU at most 65535 plus headers).
    let mut buf = vec![0u8; 1 << 17];
    let mut cmsg = nix::cmsg_space!(nix::sys::time::TimeSpec);
    'outer: loop {
        if limits.stop.load(Ordering::Relaxed) || limits.count.is_some_and(|c| written >= c) {
            break;
        }
        let remaining = match limits.duration {
            Some(d) => match d.checked_sub(started.elapsed()) {
                Some(r) => r,
                None => break,
            },
            None => Duration::from_millis(200),
        };
        // Wake at least every 200 ms to notice `stop`.
        let wait = remaining.min(Duration::from_millis(200)).as_millis() as u16;
        let mut fds: Vec<PollFd> = taps
            .iter()
            .map(|t| PollFd::new(t.fd.as_fd(), PollFlags::POLLIN))
            .collect();
        match poll(&mut fds, PollTimeout::from(wait)) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => return Err(io_err("waiting for packets")(e.into())),
        }
        let ready: Vec<bool> = fds
            .iter()
            .map(|f| f.revents().is_some_and(|r| r.contains(PollFlags::POLLIN)))
            .collect();
        for (tap, ready) in taps.iter().zip(ready) {
            if !ready {
                continue;
            }
            loop {
                let mut iov = [IoSliceMut::new(&mut buf)];
                let msg = match recvmsg::<LinkAddr>(
                    std::os::fd::AsRawFd::as_raw_fd(&tap.fd),
                    &mut iov,
                    Some(&mut cmsg),
                    MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_TRUNC,
                ) {
                    Ok(m) => m,
                    Err(Errno::EAGAIN) => break,
                    Err(e) => return Err(io_err("receiving packets")(e.into())),
                };
                let len = msg.bytes;
                let Some((id, direction)) = msg.address.and_then(|a| {
                    let id = tap.wanted.get(&(a.ifindex() as u32)).copied()?;
                    let d = if a.pkttype() == PACKET_OUTGOING {
                        Direction::Outbound
                    } else {
                        Direction::Inbound
                    };
                    Some((id, d))
                }) else {
                    continue;
                };
                let mut ts_ns = 0u64;
                for c in msg
                    .cmsgs()
                    .map_err(|e| io_err("reading timestamps")(e.into()))?
                {
                    if let ControlMessageOwned::ScmTimestampns(t) = c {
                        ts_ns = t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64;
                    }
                }
                let captured = len.min(buf.len());
                writer
                    .packet(id, ts_ns, &buf[..captured], len as u32, Some(direction))
                    .map_err(io_err("writing the capture"))?;
                written += 1;
                if limits.count.is_some_and(|c| written >= c) {
                    break 'outer;
                }
            }
        }
        // What was captured goes out each round (at least every 200 ms): a reader of the
        // stream (an API client) sees the packets, and whole blocks, as they come.
        writer.flush().map_err(io_err("writing the capture"))?;
    }
    writer.finish().map_err(io_err("writing the capture"))?;
    Ok(written)
}
