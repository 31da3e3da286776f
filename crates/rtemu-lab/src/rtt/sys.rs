//! The socket calls std does not offer, for the round-trip benchmark: an `AF_PACKET` socket
//! bound to one interface and its hardware address, `SO_TIMESTAMPING`, and `recvmsg` with the control messages that carry the
//! kernel's stamps. The round-trip benchmark's only `unsafe`, one libc call per block.
//!
//! # References
//! `packet(7)`; `Documentation/networking/timestamping.rst` in the Linux sources (software
//! stamps, `SOF_TIMESTAMPING_OPT_TSONLY`, the error queue); `cmsg(3)`.
#![allow(unsafe_code)]

use std::io;
use std::mem::size_of;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use rtemu_sys::errno::cvt;
use rtemu_sys::packet;

/// An `AF_PACKET`/`SOCK_RAW` socket that sees only frames of `ethertype` on interface
/// `index` (see [`packet::socket`] for why it is bound only after it is made), and that
/// interface's hardware address (empty when it has none). Needs `CAP_NET_RAW` (`EPERM`
/// without it).
pub fn packet_socket(index: u32, ethertype: u16) -> io::Result<(OwnedFd, Vec<u8>)> {
    let fd = packet::socket()?;
    packet::bind(fd.as_fd(), index, ethertype)?;
    // SAFETY: all-zero is a valid sockaddr_ll; getsockname fills it below.
    let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    // packet(7): getsockname on a bound packet socket gives the device's hardware address.
    let mut len = size_of::<libc::sockaddr_ll>() as libc::socklen_t;
    // SAFETY: `addr` is writable storage of `len` bytes; the kernel writes at most that.
    cvt(unsafe {
        libc::getsockname(
            fd.as_raw_fd(),
            (&mut addr as *mut libc::sockaddr_ll).cast(),
            &mut len,
        )
    })?;
    let hw = addr.sll_addr[..usize::from(addr.sll_halen).min(8)].to_vec();
    Ok((fd, hw))
}

/// Asks for software TX and RX stamps; the TX stamp comes back on the error queue without a
/// copy of the packet (`OPT_TSONLY`).
pub fn enable_timestamps(fd: BorrowedFd<'_>) -> io::Result<()> {
    let flags: libc::c_uint = libc::SOF_TIMESTAMPING_SOFTWARE
        | libc::SOF_TIMESTAMPING_TX_SOFTWARE
        | libc::SOF_TIMESTAMPING_RX_SOFTWARE
        | libc::SOF_TIMESTAMPING_OPT_TSONLY;
    packet::set_option(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPING, &flags)
}

/// Makes a blocking receive give up after `ns` (at least 1 µs: 0 would mean never).
pub fn set_recv_timeout(fd: BorrowedFd<'_>, ns: u64) -> io::Result<()> {
    let us = (ns / 1_000).max(1);
    let tv = libc::timeval {
        tv_sec: (us / 1_000_000) as libc::time_t,
        tv_usec: (us % 1_000_000) as libc::suseconds_t,
    };
    packet::set_option(fd, libc::SOL_SOCKET, libc::SO_RCVTIMEO, &tv)
}

/// Sends `buf` whole to the connected (UDP) or bound (packet) peer.
pub fn send(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<()> {
    // SAFETY: `buf` is readable for `buf.len()` bytes for the whole call.
    cvt(unsafe { libc::send(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len(), 0) }).map(drop)
}

/// One received datagram or frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Datagram {
    /// Bytes received (the frame is cut to the buffer when longer).
    pub len: usize,
    /// The kernel's software RX stamp, ns of `CLOCK_REALTIME`, when it gave one.
    pub kernel_ns: Option<i64>,
    /// `sll_pkttype` of a packet socket (`PACKET_HOST`, …); `None` for other sockets.
    pub packet_type: Option<u8>,
}

/// Room for the control messages of one receive: a `scm_timestamping` (three timespecs) and a
/// `sock_extended_err` with its offender address, with headers; u64 for cmsg alignment.
type ControlBuffer = [u64; 32];

/// The first stamp (`ts[0]`, the software one) of an `SCM_TIMESTAMPING` message in `msg`'s
/// control data; `None` when there is none or it is zero (no software stamp).
///
/// # Safety
/// `msg` must be a `msghdr` just filled by `recvmsg`, its control buffer still alive.
unsafe fn software_stamp(msg: &libc::msghdr) -> Option<i64> {
    // SAFETY: the caller guarantees `msg` and its control buffer are valid; the CMSG_* macros
    // stay within `msg_controllen`.
    let mut cmsg = unsafe { libc::CMSG_FIRSTHDR(msg) };
    // SAFETY: CMSG_LEN only computes a length; it touches no memory.
    let stamp_len = unsafe { libc::CMSG_LEN(size_of::<libc::timespec>() as u32) } as usize;
    while !cmsg.is_null() {
        // SAFETY: `cmsg` is non-null and within the control buffer (CMSG_FIRSTHDR/NXTHDR).
        let header = unsafe { &*cmsg };
        if header.cmsg_level == libc::SOL_SOCKET
            && header.cmsg_type == libc::SO_TIMESTAMPING
            && header.cmsg_len as usize >= stamp_len
        {
            // SAFETY: the message holds at least one timespec (checked above); it may be
            // unaligned for timespec, so it is read unaligned.
            let ts: libc::timespec =
                unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast()) };
            let ns = ts.tv_sec as i64 * 1_000_000_000 + ts.tv_nsec as i64;
            return (ns != 0).then_some(ns);
        }
        // SAFETY: as for CMSG_FIRSTHDR: NXTHDR returns null past the end.
        cmsg = unsafe { libc::CMSG_NXTHDR(msg, cmsg) };
    }
    None
}

/// Receives one datagram or frame into `buf` with `flags`, and its stamp and packet type.
fn receive(fd: BorrowedFd<'_>, buf: &mut [u8], flags: libc::c_int) -> io::Result<Datagram> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut control: ControlBuffer = [0; 32];
    // SAFETY: all-zero is a valid sockaddr_storage and msghdr; the pointers are set below.
    let mut from: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = (&mut from as *mut libc::sockaddr_storage).cast();
    msg.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = size_of::<ControlBuffer>();
    // SAFETY: every pointer in `msg` refers to live, writable storage of the given length.
    let len = cvt(unsafe { libc::recvmsg(fd.as_raw_fd(), &mut msg, flags) })? as usize;
    // SAFETY: `msg` was just filled by recvmsg and `control` is alive.
    let kernel_ns = unsafe { software_stamp(&msg) };
    let packet_type = (i32::from(from.ss_family) == libc::AF_PACKET).then(|| {
        // SAFETY: the kernel wrote a sockaddr_ll (family AF_PACKET) into `from`, which is
        // large and aligned enough for one.
        unsafe {
            (*(&from as *const libc::sockaddr_storage).cast::<libc::sockaddr_ll>()).sll_pkttype
        }
    });
    Ok(Datagram {
        len: len.min(buf.len()),
        kernel_ns,
        packet_type,
    })
}

/// Waits (up to the receive timeout) for one datagram or frame.
pub fn recv(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<Datagram> {
    receive(fd, buf, 0)
}

/// The software TX stamp waiting on the error queue, ns of `CLOCK_REALTIME`, without waiting;
/// `None` when the queue is empty.
pub fn tx_stamp(fd: BorrowedFd<'_>) -> io::Result<Option<i64>> {
    // OPT_TSONLY: the message carries no packet, only the stamp and its extended error.
    let mut buf = [0u8; 64];
    match receive(fd, &mut buf, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) {
        Ok(d) => Ok(d.kernel_ns),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
        Err(e) => Err(e),
    }
}
