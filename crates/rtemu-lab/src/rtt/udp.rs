//! The UDP variant: probes are the payload of datagrams on a connected socket.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsFd;

use super::{io_err, sys, Echo, Endpoint, Recv, RttError, Transport};

/// The client's side: one connected socket, with kernel stamps where the kernel gives them.
pub(super) struct UdpClient {
    socket: UdpSocket,
    target: SocketAddr,
    stamps: Result<(), String>,
}

impl UdpClient {
    pub(super) fn connect(target: SocketAddr) -> Result<UdpClient, RttError> {
        let bind: SocketAddr = if target.is_ipv4() {
            (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let socket = UdpSocket::bind(bind).map_err(io_err("binding the client socket"))?;
        socket
            .connect(target)
            .map_err(io_err(format!("connecting to {target}")))?;
        let stamps = sys::enable_timestamps(socket.as_fd()).map_err(|e| e.to_string());
        Ok(UdpClient {
            socket,
            target,
            stamps,
        })
    }
}

impl Transport for UdpClient {
    fn header_len(&self) -> usize {
        0
    }

    fn write_header(&self, _frame: &mut [u8]) {}

    fn stamps(&self) -> Result<(), String> {
        self.stamps.clone()
    }

    fn send(&mut self, frame: &[u8]) -> Result<(), RttError> {
        sys::send(self.socket.as_fd(), frame).map_err(io_err(format!("sending to {}", self.target)))
    }

    fn recv(&mut self, buf: &mut [u8], timeout_ns: u64) -> Result<Recv, RttError> {
        sys::set_recv_timeout(self.socket.as_fd(), timeout_ns)
            .map_err(io_err("setting the reply timeout"))?;
        match sys::recv(self.socket.as_fd(), buf) {
            Ok(d) => Ok(Recv::Frame {
                len: d.len,
                kernel_ns: d.kernel_ns,
            }),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                Ok(Recv::TimedOut)
            }
            // A probe that could not be delivered (ICMP port unreachable) shows as lost.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Ok(Recv::Other),
            Err(e) => Err(io_err("receiving a reply")(e)),
        }
    }

    fn tx_stamp(&mut self) -> Result<Option<i64>, RttError> {
        sys::tx_stamp(self.socket.as_fd()).map_err(io_err("reading the kernel's send stamp"))
    }
}

/// Binds `addr` and echoes every datagram back to its sender (see [`Echo`]).
pub(super) fn echo(addr: SocketAddr, max_ns: u64) -> Result<Echo, RttError> {
    let socket =
        UdpSocket::bind(addr).map_err(io_err(format!("binding the echo server to {addr}")))?;
    let addr = socket
        .local_addr()
        .map_err(io_err("reading the echo address"))?;
    socket
        .set_read_timeout(Some(super::ECHO_WAKE_UP))
        .map_err(io_err("setting the echo timeout"))?;
    let mut buf = vec![0u8; 65_536];
    Echo::spawn(Endpoint::Udp(addr), max_ns, move || {
        match socket.recv_from(&mut buf) {
            Ok((n, from)) => socket.send_to(&buf[..n], from).map(|_| true),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::ConnectionRefused
                ) =>
            {
                Ok(false)
            }
            Err(e) => Err(e),
        }
    })
}
