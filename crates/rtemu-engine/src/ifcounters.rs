//! An interface's packet counters as the kernel keeps them, read inside its network namespace:
//! what the benchmarks count arrivals with, and what the API shows for ideal links, which the
//! engine does not carry.
//!
//! They come from `/proc/thread-self/net/dev` read by a thread inside the namespace, which
//! lists that namespace's interfaces. `/sys/class/net/IF/statistics` would not do: sysfs shows
//! the namespace it was mounted in, not the reader's.

use std::io;
use std::path::Path;

use crate::netns::{self, NetnsError};

/// An interface's packet counters, as the kernel keeps them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IfCounters {
    /// Bytes the interface received.
    pub rx_bytes: u64,
    /// Frames the interface received (a veth counts those its peer handed on to this side's
    /// stack, before the stack dropped any).
    pub rx_packets: u64,
    /// Frames dropped on receive.
    pub rx_dropped: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Frames sent.
    pub tx_packets: u64,
    /// Frames dropped on send (a veth: its peer's backlog was full).
    pub tx_dropped: u64,
}

/// Reading an interface's counters failed.
#[derive(Debug, thiserror::Error)]
pub enum CountersError {
    /// The namespace could not be entered.
    #[error(transparent)]
    Netns(#[from] NetnsError),
    /// `/proc/thread-self/net/dev` could not be read.
    #[error("reading /proc/thread-self/net/dev: {0}")]
    Read(#[source] io::Error),
    /// The interface is not listed there.
    #[error("no interface {0} in the namespace (`ip -n NS link` lists them)")]
    NoInterface(String),
}

/// The text of the `net/dev` table of the network namespace at `netns`.
fn net_dev(netns: &Path) -> Result<String, CountersError> {
    netns::run_in(netns, || {
        std::fs::read_to_string("/proc/thread-self/net/dev")
    })?
    .map_err(CountersError::Read)
}

/// The counters of interface `ifname` in the network namespace at `netns`.
pub fn interface_counters(netns: &Path, ifname: &str) -> Result<IfCounters, CountersError> {
    parse_net_dev(&net_dev(netns)?, ifname)
        .ok_or_else(|| CountersError::NoInterface(ifname.to_owned()))
}

/// The counters of each of `ifnames` in the network namespace at `netns`, in their order, read
/// at one instant (one entry into the namespace).
pub fn interfaces_counters(
    netns: &Path,
    ifnames: &[&str],
) -> Result<Vec<IfCounters>, CountersError> {
    let text = net_dev(netns)?;
    ifnames
        .iter()
        .map(|name| {
            parse_net_dev(&text, name).ok_or_else(|| CountersError::NoInterface((*name).into()))
        })
        .collect()
}

/// The counters of `ifname` in the text of `/proc/net/dev`: per interface, `NAME:` then eight
/// receive fields (bytes, packets, errs, drop, fifo, frame, compressed, multicast) and eight
/// transmit fields (bytes, packets, errs, drop, …). `None` when the line is missing or short.
pub fn parse_net_dev(text: &str, ifname: &str) -> Option<IfCounters> {
    let line = text.lines().find_map(|l| {
        let (name, rest) = l.split_once(':')?;
        (name.trim() == ifname).then_some(rest)
    })?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    (fields.len() >= 12).then(|| IfCounters {
        rx_bytes: fields[0],
        rx_packets: fields[1],
        rx_dropped: fields[3],
        tx_bytes: fields[8],
        tx_packets: fields[9],
        tx_dropped: fields[11],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NET_DEV: &str = "\
Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0
  eth0: 1234567   89012    0    7    0     0          0         0   345678    9012    0    3    0     0       0          0
eth10:5 6 0 1 0 0 0 0 7 8 0 2 0 0 0 0
";

    #[test]
    fn net_dev_lines_are_read_by_interface_name() {
        assert_eq!(
            parse_net_dev(NET_DEV, "eth0"),
            Some(IfCounters {
                rx_bytes: 1234567,
                rx_packets: 89012,
                rx_dropped: 7,
                tx_bytes: 345678,
                tx_packets: 9012,
                tx_dropped: 3,
            })
        );
        // No space after the colon (long counters run into the name), and a name that
        // another one starts with.
        assert_eq!(
            parse_net_dev(NET_DEV, "eth10"),
            Some(IfCounters {
                rx_bytes: 5,
                rx_packets: 6,
                rx_dropped: 1,
                tx_bytes: 7,
                tx_packets: 8,
                tx_dropped: 2,
            })
        );
        assert_eq!(parse_net_dev(NET_DEV, "eth1"), None);
    }

    #[test]
    fn a_short_or_garbled_net_dev_line_is_none() {
        assert_eq!(parse_net_dev("  eth0: 1 2 3\n", "eth0"), None);
        assert_eq!(
            parse_net_dev("  eth0: 1 x 3 4 5 6 7 8 9 10 11 12\n", "eth0"),
            None
        );
    }
}
