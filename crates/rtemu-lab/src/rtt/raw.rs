//! The raw Ethernet variant: probes are the payload of Ethernet frames with the IEEE local
//! experimental EtherType, sent and received on an `AF_PACKET`/`SOCK_RAW` socket bound to one
//! interface with plain `send` and `recvmsg`. Not `TPACKET_V3`: its block batching holds frames
//! back for milliseconds, which is what this benchmark measures.
//!
//! A frame is `destination (6) | source (6) | EtherType (2) | probe`; the echo swaps the two
//! addresses and sends it back. Frames are at least 60 bytes (the Ethernet minimum without the
//! frame check sequence), so no driver pads them and the probe's size field stays exact.

use std::fmt;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::str::FromStr;

use super::{io_err, sys, Echo, Endpoint, Recv, RttError, Transport};

/// The IEEE 802 local experimental EtherType 1 (IEEE Std 802, clause 9.2.2): free for
/// experiments, never carried by a real protocol.
pub const ETHERTYPE: u16 = 0x88B5;

/// Bytes of the Ethernet header (no VLAN tag): two addresses and the EtherType.
pub(super) const HEADER: usize = 14;

/// An Ethernet (MAC) address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Mac(pub [u8; 6]);

/// A MAC address that does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "bad MAC address `{0}`: give six hexadecimal bytes separated by colons, like 02:00:5e:10:00:01"
)]
pub struct MacError(String);

impl FromStr for Mac {
    type Err = MacError;

    fn from_str(text: &str) -> Result<Mac, MacError> {
        let bad = || MacError(text.to_owned());
        let mut mac = [0u8; 6];
        let mut parts = text.split([':', '-']);
        for byte in &mut mac {
            let part = parts.next().ok_or_else(bad)?;
            if part.is_empty() || part.len() > 2 {
                return Err(bad());
            }
            *byte = u8::from_str_radix(part, 16).map_err(|_| bad())?;
        }
        match parts.next() {
            Some(_) => Err(bad()),
            None => Ok(Mac(mac)),
        }
    }
}

impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

impl Mac {
    /// Whether frames to this address reach one station (the group bit is clear).
    pub fn is_unicast(&self) -> bool {
        self.0[0] & 1 == 0
    }
}

/// A packet socket for [`ETHERTYPE`] on `interface` and the interface's address, with the
/// errors a user can fix said plainly.
fn open(interface: &str) -> Result<(OwnedFd, Mac), RttError> {
    let index = rtemu_sys::packet::if_index(interface).map_err(|e| match e.raw_os_error() {
        Some(libc::ENODEV) | Some(libc::ENXIO) => RttError::NoInterface(interface.to_owned()),
        _ => io_err(format!("looking up interface `{interface}`"))(e),
    })?;
    let (fd, hw) = sys::packet_socket(index, ETHERTYPE).map_err(|e| match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => RttError::NotPermitted,
        _ => io_err(format!("opening a packet socket on `{interface}`"))(e),
    })?;
    let mac = <[u8; 6]>::try_from(hw.as_slice())
        .map_err(|_| RttError::NotEthernet(interface.to_owned()))?;
    Ok((fd, Mac(mac)))
}

/// The client's side: a packet socket on one interface, sending to one peer.
pub(super) struct RawClient {
    socket: OwnedFd,
    interface: String,
    local: Mac,
    peer: Mac,
    stamps: Result<(), String>,
}

impl RawClient {
    pub(super) fn open(interface: &str, peer: Mac) -> Result<RawClient, RttError> {
        if !peer.is_unicast() {
            return Err(RttError::PeerNotUnicast(peer));
        }
        let (socket, local) = open(interface)?;
        let stamps = sys::enable_timestamps(socket.as_fd()).map_err(|e| e.to_string());
        Ok(RawClient {
            socket,
            interface: interface.to_owned(),
            local,
            peer,
            stamps,
        })
    }
}

impl Transport for RawClient {
    fn header_len(&self) -> usize {
        HEADER
    }

    fn write_header(&self, frame: &mut [u8]) {
        frame[..6].copy_from_slice(&self.peer.0);
        frame[6..12].copy_from_slice(&self.local.0);
        frame[12..HEADER].copy_from_slice(&ETHERTYPE.to_be_bytes());
    }

    fn stamps(&self) -> Result<(), String> {
        self.stamps.clone()
    }

    fn send(&mut self, frame: &[u8]) -> Result<(), RttError> {
        sys::send(self.socket.as_fd(), frame).map_err(|e| {
            let hint = if e.raw_os_error() == Some(libc::EMSGSIZE) {
                " (longer than the interface's MTU allows: lower --max-size)"
            } else {
                ""
            };
            RttError::Io {
                what: format!(
                    "sending a {}-byte frame on `{}`{hint}",
                    frame.len(),
                    self.interface
                ),
                source: e,
            }
        })
    }

    fn recv(&mut self, buf: &mut [u8], timeout_ns: u64) -> Result<Recv, RttError> {
        sys::set_recv_timeout(self.socket.as_fd(), timeout_ns)
            .map_err(io_err("setting the reply timeout"))?;
        match sys::recv(self.socket.as_fd(), buf) {
            Ok(d) => {
                // Only frames addressed to this station, from the peer: not copies of other
                // stations' traffic seen in promiscuous mode, nor this host's own frames.
                let from_peer = buf.get(6..12) == Some(&self.peer.0[..]);
                if d.packet_type == Some(libc::PACKET_HOST) && from_peer && d.len >= HEADER {
                    Ok(Recv::Frame {
                        len: d.len,
                        kernel_ns: d.kernel_ns,
                    })
                } else {
                    Ok(Recv::Other)
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                Ok(Recv::TimedOut)
            }
            Err(e) => Err(io_err(format!("receiving on `{}`", self.interface))(e)),
        }
    }

    fn tx_stamp(&mut self) -> Result<Option<i64>, RttError> {
        sys::tx_stamp(self.socket.as_fd()).map_err(io_err("reading the kernel's send stamp"))
    }
}

/// Echoes every [`ETHERTYPE`] frame addressed to `interface` back to its sender, the addresses
/// swapped (see [`Echo`]).
pub(super) fn echo(interface: &str, max_ns: u64) -> Result<Echo, RttError> {
    let (socket, mac) = open(interface)?;
    sys::set_recv_timeout(socket.as_fd(), super::ECHO_WAKE_UP.as_nanos() as u64)
        .map_err(io_err("setting the echo timeout"))?;
    let mut buf = vec![0u8; 65_536];
    let local = Endpoint::Raw {
        interface: interface.to_owned(),
        mac,
    };
    Echo::spawn(local, max_ns, move || {
        let d = match sys::recv(socket.as_fd(), &mut buf) {
            Ok(d) => d,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Ok(false)
            }
            Err(e) => return Err(e),
        };
        if d.packet_type != Some(libc::PACKET_HOST) || d.len < HEADER {
            return Ok(false);
        }
        let frame = &mut buf[..d.len];
        let (destination, rest) = frame.split_at_mut(6);
        destination.swap_with_slice(&mut rest[..6]);
        sys::send(socket.as_fd(), frame).map(|()| true)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_parse_and_print() {
        let mac: Mac = "02:00:5E:10:0a:1".parse().unwrap();
        assert_eq!(mac, Mac([2, 0, 0x5e, 0x10, 0x0a, 1]));
        assert_eq!(mac.to_string(), "02:00:5e:10:0a:01");
        assert_eq!("02-00-5e-10-0a-01".parse::<Mac>().unwrap(), mac);
        assert!(mac.is_unicast());
        assert!(!"ff:ff:ff:ff:ff:ff".parse::<Mac>().unwrap().is_unicast());
        for bad in [
            "",
            "02:00:5e:10:0a",
            "02:00:5e:10:0a:01:02",
            "02:00:5e:10:0a:0g",
            "020:0:5e:10:0a:01",
            "02::5e:10:0a:01",
        ] {
            let err = bad.parse::<Mac>().unwrap_err().to_string();
            assert!(
                err.contains(&format!("`{bad}`")) && err.contains("six"),
                "{err}"
            );
        }
    }
}
