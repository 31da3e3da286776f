//! The underlay's own round trip between hosts, measured when a part is built, so that what a
//! link between hosts adds to its model's delay is shown beside it (`ls`, `stats`, the final
//! report) rather than hidden in it.
//!
//! The probe is a TCP connection to the peer's agent port: the SYN's answer, a SYN-ACK from the
//! agent or a reset where none listens, comes back after one round trip across the underlay,
//! and it needs neither raw sockets nor anything running on the peer. A first probe resolves
//! the path's neighbours and is not counted; of the others the shortest is kept, since
//! whatever else a probe meets (a busy CPU, a queue) only adds to the underlay's own delay.
//! It runs once, when the part comes up; nothing of the engine's path is touched.

use std::io::ErrorKind;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::topology::Host;

/// Probes per peer after the first; the shortest is kept.
const PROBES: usize = 5;

/// How long one probe waits for an answer; a peer that does not answer in time is left
/// unmeasured (its first timeout ends its probes).
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);

/// The round trip across the underlay from this host to another, as measured at `up`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnderlayRtt {
    /// The other host (its `[hosts]` name).
    pub host: String,
    /// The round trip, ns (the shortest probe's); `None` when the host did not answer.
    pub rtt_ns: Option<u64>,
}

/// Measures the round trip to each of `peers` (the shortest of five TCP connection
/// attempts to its agent port, after a first), from this process's network namespace.
pub fn measure(peers: &[&Host]) -> Vec<UnderlayRtt> {
    peers
        .iter()
        .map(|h| UnderlayRtt {
            host: h.name.clone(),
            rtt_ns: shortest_connect_ns(SocketAddr::new(h.address, h.port)),
        })
        .collect()
}

/// The shortest time a TCP connection attempt to `to` takes to be answered, accepted or
/// refused, over [`PROBES`] attempts after a first.
fn shortest_connect_ns(to: SocketAddr) -> Option<u64> {
    let mut shortest = None;
    for probe in 0..=PROBES {
        let started = Instant::now();
        match TcpStream::connect_timeout(&to, PROBE_TIMEOUT) {
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => {}
            Err(_) => break,
        }
        let ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        if probe > 0 {
            shortest = Some(shortest.map_or(ns, |s: u64| s.min(ns)));
        }
    }
    shortest
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn host(name: &str, to: SocketAddr) -> Host {
        Host {
            name: name.into(),
            address: to.ip(),
            port: to.port(),
        }
    }

    #[test]
    fn a_listening_and_a_refusing_peer_are_both_measured() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let open = host("open", listener.local_addr().unwrap());
        let closed_port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let closed = host("closed", closed_port);
        let rtts = measure(&[&open, &closed]);
        let names: Vec<&str> = rtts.iter().map(|r| r.host.as_str()).collect();
        assert_eq!(names, ["open", "closed"]);
        for r in &rtts {
            let ns = r.rtt_ns.unwrap_or_else(|| panic!("{} unmeasured", r.host));
            assert!(ns < 100_000_000, "{} took {ns} ns over loopback", r.host);
        }
    }
}
