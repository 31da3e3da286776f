//! `AF_PACKET` socket set-up (`packet(7)`): the socket, its binding to one interface, the
//! interface's index, and setting socket options. What is done with the socket afterwards (the
//! engine's mapped rings, the round-trip benchmark's stamped receives) stays with its user.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use crate::errno::cvt;

/// The index of interface `name` in the calling thread's network namespace; `ENODEV` when
/// there is none (also for a name holding a NUL byte, which no interface has).
pub fn if_index(name: &str) -> io::Result<u32> {
    let c = CString::new(name).map_err(|_| io::Error::from_raw_os_error(libc::ENODEV))?;
    // SAFETY: `c` is a NUL-terminated string that lives across the call.
    match unsafe { libc::if_nametoindex(c.as_ptr()) } {
        0 => Err(io::Error::last_os_error()),
        index => Ok(index),
    }
}

/// A new `AF_PACKET`/`SOCK_RAW` socket (close-on-exec) in the calling thread's namespace, made
/// for protocol 0 so that it receives nothing: made for a protocol, it would take that
/// protocol's frames from every interface until [`bind`] narrows it to one. Needs
/// `CAP_NET_RAW` (`EPERM` without it).
pub fn socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2) with constant arguments; the result is checked before use.
    let raw =
        cvt(unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: `raw` is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// Binds the packet socket `fd` to interface `ifindex` for frames of `protocol`, an EtherType
/// in host byte order (`ETH_P_ALL` for every frame). From then on it receives those frames of
/// that interface only.
pub fn bind(fd: BorrowedFd<'_>, ifindex: u32, protocol: u16) -> io::Result<()> {
    // SAFETY: all-zero is a valid sockaddr_ll; the fields that matter are set below.
    let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    addr.sll_family = libc::AF_PACKET as u16;
    addr.sll_protocol = protocol.to_be();
    addr.sll_ifindex = ifindex as i32;
    // SAFETY: `addr` is a valid sockaddr_ll of the length passed for the whole call.
    cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_ll).cast(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// `setsockopt(fd, level, name, value)` with `value`'s size: for any socket, packet set-up
/// being the main user (`PACKET_VERSION`, ring requests, `SO_TIMESTAMPING`, …).
pub fn set_option<T>(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    value: &T,
) -> io::Result<()> {
    // SAFETY: `value` points to a live `T` of the size passed; the kernel only reads it.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (value as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    })
    .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn the_loopback_has_an_index_and_a_made_up_name_has_none() {
        assert!(if_index("lo").unwrap() > 0);
        let err = if_index("rtemu-nx0").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENODEV));
        let err = if_index("l\0o").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENODEV));
    }

    #[test]
    fn a_bound_socket_reports_its_interface_and_options_take() {
        if !rtemu_testutil::root_or_skip("packet socket", "opens an AF_PACKET socket") {
            return;
        }
        let lo = if_index("lo").unwrap();
        let fd = socket().unwrap();
        bind(fd.as_fd(), lo, libc::ETH_P_ALL as u16).unwrap();
        // SAFETY: all-zero is a valid sockaddr_ll, written by getsockname below.
        let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        let mut len = size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        // SAFETY: `addr` is writable storage of `len` bytes.
        let ret = unsafe {
            libc::getsockname(
                fd.as_raw_fd(),
                (&mut addr as *mut libc::sockaddr_ll).cast(),
                &mut len,
            )
        };
        cvt(ret).unwrap();
        assert_eq!(addr.sll_ifindex, lo as i32);
        assert_eq!(u16::from_be(addr.sll_protocol), libc::ETH_P_ALL as u16);

        let version = libc::tpacket_versions::TPACKET_V2 as libc::c_int;
        set_option(fd.as_fd(), libc::SOL_PACKET, libc::PACKET_VERSION, &version).unwrap();
        let mut got: libc::c_int = -1;
        let mut len = size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `got` is writable storage of `len` bytes.
        let ret = unsafe {
            libc::getsockopt(
                fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_VERSION,
                (&mut got as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        cvt(ret).unwrap();
        assert_eq!(got, version);
    }

    #[test]
    fn an_unknown_option_is_refused_with_its_errno() {
        // A UDP socket needs no privilege; option level SOL_PACKET does not apply to it.
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let err =
            set_option(udp.as_fd(), libc::SOL_PACKET, libc::PACKET_VERSION, &2i32).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOPROTOOPT), "{err}");
    }
}
