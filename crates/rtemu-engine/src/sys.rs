//! Thin wrappers over the kernel interfaces the engine needs: the only place with `unsafe`.
//!
//! * [`PacketSocket`]: an `AF_PACKET` socket with a `TPACKET_V2` receive ring and transmit ring
//!   in one shared mapping (`Documentation/networking/packet_mmap.rst` in the kernel tree);
//! * [`set_ethtool_flag`]: the legacy `SIOCETHTOOL` "set" commands that switch one offload;
//! * [`wait_readable`]: `poll(2)` on one descriptor, where the control thread sleeps.
//!
//! Each wrapper turns the C convention (negative return and `errno`) into `io::Result` through
//! [`cvt`]. Ring frames are shared with the kernel: a frame belongs to user space only while its
//! `tp_status` word says so, and every access to the frame's bytes is gated on an acquire load of
//! that word; handing a frame back is a release store.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};

use rtemu_sys::errno::cvt;
use rtemu_sys::packet;

/// Where the frame's bytes start in a transmit-ring frame: `TPACKET2_HDRLEN - sizeof(sockaddr_ll)`,
/// i.e. the header rounded up to `TPACKET_ALIGNMENT` (what `tpacket_parse_header` uses when
/// `PACKET_TX_HAS_OFF` is not set).
pub const TX_DATA_OFFSET: usize = libc::TPACKET2_HDRLEN - std::mem::size_of::<libc::sockaddr_ll>();

/// The shape of one ring: `frame_nr` frames of `frame_size` bytes in blocks of `block_size`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingShape {
    /// Bytes per frame (a multiple of 16, header included).
    pub frame_size: u32,
    /// Frames in the ring.
    pub frame_nr: u32,
    /// Bytes per block (a multiple of the page size holding whole frames).
    pub block_size: u32,
}

impl RingShape {
    fn request(self) -> libc::tpacket_req {
        libc::tpacket_req {
            tp_block_size: self.block_size,
            tp_block_nr: self.frame_nr / (self.block_size / self.frame_size),
            tp_frame_size: self.frame_size,
            tp_frame_nr: self.frame_nr,
        }
    }

    fn bytes(self) -> usize {
        self.frame_size as usize * self.frame_nr as usize
    }
}

/// A received frame, borrowed from the receive ring until [`PacketSocket::rx_release`].
#[derive(Debug)]
pub struct RxFrame<'a> {
    /// The frame from its Ethernet header, as much as fitted in the ring frame.
    pub data: &'a [u8],
    /// The frame's length on the wire (larger than `data.len()` when it was cut).
    pub wire_len: u32,
    /// `tp_status` (`TP_STATUS_VLAN_VALID`, `TP_STATUS_CSUMNOTREADY`, …).
    pub status: u32,
    /// The VLAN tag the device took off, valid with `TP_STATUS_VLAN_VALID`.
    pub vlan_tci: u16,
    /// The tag's protocol, valid with `TP_STATUS_VLAN_TPID_VALID`.
    pub vlan_tpid: u16,
    /// The kernel's receive stamp, ns on `CLOCK_REALTIME` (`tp_sec`, `tp_nsec`): the software
    /// stamp the frame got when the device received it where one was taken, else the time
    /// the kernel wrote it into the ring. `TPACKET_V2` always fills it.
    pub stamp_ns: u64,
}

/// An `AF_PACKET` socket bound to one interface, with mapped `TPACKET_V2` receive and transmit
/// rings.
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
    base: *mut u8,
    len: usize,
    rx: RingShape,
    tx: RingShape,
}

// SAFETY: the mapping is owned by the socket and unmapped only in `Drop`; moving the owner to
// another thread moves all access with it (the engine uses one socket from one thread at a time).
unsafe impl Send for PacketSocket {}

impl PacketSocket {
    /// Opens a socket on interface `ifindex` of the calling thread's namespace, maps its rings,
    /// and binds it. Needs `CAP_NET_RAW`.
    ///
    /// The socket is created for no protocol and bound to `ETH_P_ALL` only once its rings exist,
    /// so no frame of another interface lands in the ring before the bind; without `receive`
    /// it stays bound to no protocol and receives nothing (a send-only socket). Frames the
    /// socket sends itself are not received (`PACKET_IGNORE_OUTGOING`). With `qdisc_bypass`,
    /// sends go straight to the driver (`PACKET_QDISC_BYPASS`).
    pub fn open(
        ifindex: u32,
        rx: RingShape,
        tx: RingShape,
        qdisc_bypass: bool,
        receive: bool,
    ) -> io::Result<Self> {
        let fd = packet::socket()?;
        let version = libc::tpacket_versions::TPACKET_V2 as libc::c_int;
        let on: libc::c_int = 1;
        let level = libc::SOL_PACKET;
        packet::set_option(fd.as_fd(), level, libc::PACKET_VERSION, &version)?;
        packet::set_option(fd.as_fd(), level, libc::PACKET_RX_RING, &rx.request())?;
        packet::set_option(fd.as_fd(), level, libc::PACKET_TX_RING, &tx.request())?;
        if qdisc_bypass {
            packet::set_option(fd.as_fd(), level, libc::PACKET_QDISC_BYPASS, &on)?;
        }
        packet::set_option(fd.as_fd(), level, libc::PACKET_IGNORE_OUTGOING, &on)?;
        let len = rx.bytes() + tx.bytes();
        // SAFETY: a fresh shared mapping of the socket's rings, of exactly the size the kernel
        // allocated for them (receive ring first, then transmit ring); the result is checked.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let socket = PacketSocket {
            fd,
            base: base.cast(),
            len,
            rx,
            tx,
        };
        let protocol = if receive { libc::ETH_P_ALL as u16 } else { 0 };
        packet::bind(socket.fd.as_fd(), ifindex, protocol)?;
        Ok(socket)
    }

    /// The socket's descriptor, to sleep on until a frame arrives.
    pub fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// A second descriptor of the socket, for reading its statistics from another thread.
    pub fn try_clone_fd(&self) -> io::Result<OwnedFd> {
        self.fd.try_clone()
    }

    /// Frames in the receive ring.
    pub fn rx_frames(&self) -> u32 {
        self.rx.frame_nr
    }

    /// Frames in the transmit ring.
    pub fn tx_frames(&self) -> u32 {
        self.tx.frame_nr
    }

    /// The largest frame a transmit-ring frame holds.
    pub fn tx_capacity(&self) -> usize {
        self.tx.frame_size as usize - TX_DATA_OFFSET
    }

    fn frame_ptr(&self, tx: bool, index: u32) -> *mut u8 {
        let (offset, shape) = if tx {
            (self.rx.bytes(), self.tx)
        } else {
            (0, self.rx)
        };
        assert!(index < shape.frame_nr, "ring frame {index} out of range");
        // SAFETY: `index < frame_nr`, so the offset stays inside the mapping of `len` bytes.
        unsafe {
            self.base
                .add(offset + index as usize * shape.frame_size as usize)
        }
    }

    fn status(&self, tx: bool, index: u32) -> &AtomicU32 {
        // SAFETY: every frame starts with the 4-byte-aligned `tp_status` word (frames are
        // 16-byte aligned in a page-aligned mapping), which the kernel and this process access
        // only atomically; the reference lives no longer than `self`, which owns the mapping.
        unsafe { AtomicU32::from_ptr(self.frame_ptr(tx, index).cast()) }
    }

    /// Whether the kernel has handed receive-ring slot `index` to user space (its stamp and
    /// contents are written then).
    pub fn rx_ready(&self, index: u32) -> bool {
        self.status(false, index).load(Ordering::Acquire) & libc::TP_STATUS_USER != 0
    }

    /// The frame at receive-ring slot `index`, if the kernel has handed it to user space.
    pub fn rx_peek(&self, index: u32) -> Option<RxFrame<'_>> {
        let status = self.status(false, index).load(Ordering::Acquire);
        if status & libc::TP_STATUS_USER == 0 {
            return None;
        }
        let ptr = self.frame_ptr(false, index);
        // SAFETY: the status says user space owns the frame, so the kernel does not write it
        // until `rx_release`; the header is at the frame's start and properly aligned.
        let hdr: libc::tpacket2_hdr = unsafe { std::ptr::read(ptr.cast()) };
        let start = hdr.tp_mac as usize;
        let end = (start + hdr.tp_snaplen as usize).min(self.rx.frame_size as usize);
        let start = start.min(end);
        // SAFETY: `start..end` lies within this frame (clamped to `frame_size`), which user space
        // owns until `rx_release`; that takes `&mut self`, so this shared borrow has ended
        // before the frame goes back to the kernel.
        let data = unsafe { std::slice::from_raw_parts(ptr.add(start), end - start) };
        Some(RxFrame {
            data,
            wire_len: hdr.tp_len,
            status,
            vlan_tci: hdr.tp_vlan_tci,
            vlan_tpid: hdr.tp_vlan_tpid,
            stamp_ns: hdr.tp_sec as u64 * 1_000_000_000 + hdr.tp_nsec as u64,
        })
    }

    /// Hands receive-ring slot `index` back to the kernel.
    pub fn rx_release(&mut self, index: u32) {
        self.status(false, index)
            .store(libc::TP_STATUS_KERNEL, Ordering::Release);
    }

    /// The data area of transmit-ring slot `index` if the slot is free, and whether the kernel
    /// rejected the frame previously held there (`TP_STATUS_WRONG_FORMAT`).
    pub fn tx_slot(&mut self, index: u32) -> Option<(&mut [u8], bool)> {
        let status = self.status(true, index).load(Ordering::Acquire);
        let rejected = status & libc::TP_STATUS_WRONG_FORMAT != 0;
        if status != libc::TP_STATUS_AVAILABLE && !rejected {
            return None;
        }
        let ptr = self.frame_ptr(true, index);
        let cap = self.tx_capacity();
        // SAFETY: the slot is available (or was rejected), so the kernel does not read or write
        // it until `tx_commit`; the range lies within the frame; `&mut self` makes the slice the
        // only reference to it.
        let data = unsafe { std::slice::from_raw_parts_mut(ptr.add(TX_DATA_OFFSET), cap) };
        Some((data, rejected))
    }

    /// Marks transmit-ring slot `index` as holding a `len`-byte frame to send.
    pub fn tx_commit(&mut self, index: u32, len: usize) {
        assert!(len <= self.tx_capacity(), "frame longer than a ring frame");
        let ptr = self.frame_ptr(true, index);
        // SAFETY: the caller got the slot from `tx_slot`, so user space owns it; `tp_len` is an
        // aligned u32 field of the header at the frame's start.
        unsafe {
            let hdr: *mut libc::tpacket2_hdr = ptr.cast();
            std::ptr::addr_of_mut!((*hdr).tp_len).write(len as u32);
            std::ptr::addr_of_mut!((*hdr).tp_snaplen).write(len as u32);
        }
        self.status(true, index)
            .store(libc::TP_STATUS_SEND_REQUEST, Ordering::Release);
    }

    /// Asks the kernel to send every committed transmit-ring frame, without blocking.
    pub fn tx_kick(&self) -> io::Result<()> {
        // SAFETY: a zero-length send with no buffer and no address is the documented way to
        // flush a TX ring; no memory is passed.
        let sent = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        if sent < 0 {
            let e = io::Error::last_os_error();
            // Nothing committed, or the device queue is busy for a moment: not an error.
            if e.kind() != io::ErrorKind::WouldBlock {
                return Err(e);
            }
        }
        Ok(())
    }
}

impl Drop for PacketSocket {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are exactly the mapping made in `open`, unmapped only here; every
        // borrow of ring memory borrows `self` and so has ended.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// Frames the kernel dropped for the packet socket `fd` since the last call, because its receive
/// ring was full (`PACKET_STATISTICS`, which resets the counts it returns).
pub fn packet_drops(fd: &OwnedFd) -> io::Result<u64> {
    let mut stats = libc::tpacket_stats {
        tp_packets: 0,
        tp_drops: 0,
    };
    let mut len = std::mem::size_of::<libc::tpacket_stats>() as libc::socklen_t;
    // SAFETY: `stats` and `len` are live and writable, and `len` holds `stats`' size.
    cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            (&mut stats as *mut libc::tpacket_stats).cast(),
            &mut len,
        )
    })?;
    Ok(stats.tp_drops as u64)
}

/// Legacy ethtool "set" commands, one offload each (`include/uapi/linux/ethtool.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum EthtoolFlag {
    /// `ETHTOOL_STXCSUM`: transmit checksum offload.
    TxChecksum = 0x17,
    /// `ETHTOOL_SSG`: scatter-gather (TSO depends on it).
    ScatterGather = 0x19,
    /// `ETHTOOL_STSO`: TCP segmentation offload.
    Tso = 0x1f,
    /// `ETHTOOL_SGSO`: generic segmentation offload.
    Gso = 0x24,
    /// `ETHTOOL_SGRO`: generic receive offload.
    Gro = 0x2c,
}

#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

/// Sets one offload of interface `name` (in the calling thread's namespace) on or off with the
/// `SIOCETHTOOL` ioctl. Needs `CAP_NET_ADMIN`.
pub fn set_ethtool_flag(name: &str, flag: EthtoolFlag, on: bool) -> io::Result<()> {
    if name.len() >= libc::IFNAMSIZ {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    // SAFETY: plain socket(2) call; the descriptor is checked and owned at once.
    let raw =
        cvt(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: `raw` is a fresh descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let mut value = EthtoolValue {
        cmd: flag as u32,
        data: on as u32,
    };
    // SAFETY: an all-zero ifreq is valid (empty name, null data pointer).
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    req.ifr_ifru.ifru_data = (&mut value as *mut EthtoolValue).cast();
    // SAFETY: `req` names the interface (NUL-terminated: the name is shorter than IFNAMSIZ) and
    // points at `value`, a live ethtool_value the kernel reads; both outlive the call.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCETHTOOL as _, &mut req) }).map(drop)
}

/// Sleeps until `fd` has input (a listener: a client connected) or `timeout_ms` passed; a
/// signal ends the sleep early too (not an error: the caller looks at what it waits for again).
pub fn wait_readable(fd: std::os::fd::BorrowedFd<'_>, timeout_ms: i32) -> io::Result<()> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: `pfd` is one valid pollfd for the call's duration, and nfds is 1.
    match cvt(unsafe { libc::poll(&mut pfd, 1, timeout_ms) }) {
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(()),
        other => other.map(drop),
    }
}
