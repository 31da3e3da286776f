//! Host interfaces handed to nodes: what they carry, read before they move, and given back at
//! `down`.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use futures_util::TryStreamExt;

use crate::external::{self};
use crate::state::Handover;
use crate::sys;

use super::error::{io_err, nl_err, LabError};
use super::links::{host_index, link_indices};
use super::netns::{block_on, connect, set_link, with_own_netlink};

/// `h` with what its interface carries on the host (see [`external`]); an interface the host is
/// reached through is refused unless `uplink` says to move it anyway. An interface that is
/// not there is left for the move to report.
pub(super) fn read_host_side(mut h: Handover, uplink: bool) -> Result<Handover, LabError> {
    let host = h.host.clone();
    let side = with_own_netlink(|handle| async move {
        let mut links = handle.link().get().match_name(host).execute();
        match links.try_next().await {
            Ok(Some(link)) => external::read(&handle, link.header.index)
                .await
                .map(Some)
                .map_err(io::Error::other),
            Ok(None) | Err(_) => Ok(None),
        }
    })
    .map_err(io_err(format!(
        "reading what host interface {} carries",
        h.host
    )))?;
    let Some(side) = side else {
        return Ok(h);
    };
    if let Some(why) = side.reaches_host().filter(|_| !uplink) {
        return Err(LabError::Uplink {
            host: h.host.clone(),
            why,
        });
    }
    h.saved = side;
    Ok(h)
}

/// Moves host interfaces back from their nodes under their original names. One that is not in
/// its node (never moved, or the node is gone) is skipped: the kernel returns a physical
/// interface to the host by itself when its namespace disappears.
pub(super) fn give_back(handovers: &[Handover]) -> Result<(), LabError> {
    if handovers.is_empty() {
        return Ok(());
    }
    // This thread never leaves the host's namespace.
    let host_ns = std::fs::File::open("/proc/self/ns/net")
        .map(OwnedFd::from)
        .map_err(io_err("opening the host's namespace"))?;
    block_on(async {
        for h in handovers {
            if !sys::netns_exists(&h.netns) {
                continue;
            }
            let handle = connect(&h.netns)?;
            let idx = link_indices(&handle)
                .await
                .map_err(nl_err(format!("listing interfaces of {}", h.netns)))?;
            let Some(&index) = idx.get(&h.ifname) else {
                continue;
            };
            let name = h.host.clone();
            set_link(&handle, index, |msg| {
                msg.down().setns_by_fd(host_ns.as_raw_fd()).name(name)
            })
            .await
            .map_err(nl_err(format!(
                "giving {} back to the host as {}",
                h.ifname, h.host
            )))?;
            // As it was: up or down, with its addresses and routes.
            let (conn, host, _) = rtnetlink::new_connection().map_err(io_err("opening netlink"))?;
            tokio::spawn(conn);
            let restored = host_index(&host, &h.host).await?;
            external::restore(&host, restored, &h.saved)
                .await
                .map_err(nl_err(format!("restoring what {} carried", h.host)))?;
        }
        Ok(())
    })?
}
