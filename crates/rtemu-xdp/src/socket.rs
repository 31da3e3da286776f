//! The AF_XDP socket: created, given its UMEM and ring sizes, its rings mapped, bound to one
//! queue of one interface in copy mode; then the system calls of the packet path (the kicks)
//! and its statistics.
//!
//! The set-up order is the kernel's (`Documentation/networking/af_xdp.rst`) and libxdp's
//! (`xsk_umem__create`, `xsk_socket__create`): register the UMEM, size the four rings, read
//! their offsets, map them, then bind. Binding uses `XDP_COPY`, since veth has no zero-copy
//! driver support, and `XDP_USE_NEED_WAKEUP`, so the kernel says through each ring's flags
//! whether a system call is needed at all (for the receive side in copy mode it never is).
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use rtemu_sys::errno::cvt;

use crate::error::{Step, XdpError};
use crate::ring::{CompletionRing, FillRing, RingSpec, RxRing, TxRing};
use crate::sys;
use crate::umem::Umem;

/// Entries in each ring: powers of two.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingSizes {
    /// Fill ring: at least as many entries as chunks given to the kernel to receive into.
    pub fill: u32,
    /// Completion ring: at least as many entries as chunks in flight on the transmit side.
    pub completion: u32,
    /// Receive ring.
    pub rx: u32,
    /// Transmit ring.
    pub tx: u32,
}

impl RingSizes {
    fn check(self) -> Result<RingSizes, XdpError> {
        for (name, n) in [
            ("fill", self.fill),
            ("completion", self.completion),
            ("receive", self.rx),
            ("transmit", self.tx),
        ] {
            if !n.is_power_of_two() || n > 1 << 20 {
                return Err(XdpError::Config(format!(
                    "{name} ring of {n} entries is invalid: give a power of two up to {}",
                    1 << 20
                )));
            }
        }
        Ok(self)
    }
}

/// The four rings of a socket, each used from one thread at a time.
#[derive(Debug)]
pub struct Rings {
    /// Chunks for the kernel to receive into.
    pub fill: FillRing,
    /// Chunks the kernel has sent.
    pub completion: CompletionRing,
    /// Received frames.
    pub rx: RxRing,
    /// Frames to send.
    pub tx: TxRing,
}

/// What the kernel counts for a socket (`XDP_STATISTICS`), since it was created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Statistics {
    /// Frames dropped for a reason other than a full receive ring (a frame larger than a
    /// chunk, no chunk in the fill ring).
    pub rx_dropped: u64,
    /// Frames dropped because the receive ring was full.
    pub rx_ring_full: u64,
    /// Times the kernel found the fill ring empty (each also a dropped frame).
    pub fill_ring_empty: u64,
    /// Transmit descriptors the kernel refused (bad offset or length).
    pub tx_invalid: u64,
}

/// An AF_XDP socket bound to one queue of one interface.
#[derive(Debug)]
pub struct Socket {
    fd: OwnedFd,
}

impl Socket {
    /// Opens a socket on queue `queue` of interface `ifindex` (in the calling thread's network
    /// namespace) over `umem`, with rings of `sizes`. Needs `CAP_NET_RAW`; Linux 5.4 or later.
    ///
    /// The fill ring starts empty: push chunks into it, or no frame is received.
    pub fn open(
        ifindex: u32,
        queue: u32,
        umem: &Umem,
        sizes: RingSizes,
    ) -> Result<(Socket, Rings), XdpError> {
        let sizes = sizes.check()?;
        // SAFETY: plain socket(2) call; the result is checked before use.
        let raw =
            cvt(unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) })
                .map_err(XdpError::at(Step::OpenSocket))?;
        // SAFETY: `raw` is a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let set = |step, name, value: &u32| {
            sys::set_xdp_option(fd.as_fd(), name, value).map_err(XdpError::at(step))
        };
        sys::set_xdp_option(fd.as_fd(), libc::XDP_UMEM_REG, &umem.registration())
            .map_err(XdpError::at(Step::RegisterUmem))?;
        set(
            Step::SizeRing("fill"),
            libc::XDP_UMEM_FILL_RING,
            &sizes.fill,
        )?;
        set(
            Step::SizeRing("completion"),
            libc::XDP_UMEM_COMPLETION_RING,
            &sizes.completion,
        )?;
        set(Step::SizeRing("receive"), libc::XDP_RX_RING, &sizes.rx)?;
        set(Step::SizeRing("transmit"), libc::XDP_TX_RING, &sizes.tx)?;
        let (offsets, len) =
            sys::get_xdp_option::<libc::xdp_mmap_offsets>(fd.as_fd(), libc::XDP_MMAP_OFFSETS)
                .map_err(XdpError::at(Step::RingOffsets))?;
        if len != std::mem::size_of::<libc::xdp_mmap_offsets>() {
            return Err(XdpError::Unsupported {
                step: Step::RingOffsets,
                what: "ring offsets without the flags word",
            });
        }
        let spec = RingSpec {
            fd: fd.as_fd(),
            offsets: &offsets,
            geometry: umem.geometry(),
        };
        let rings = Rings {
            fill: FillRing::map(&spec, sizes.fill)?,
            completion: CompletionRing::map(&spec, sizes.completion)?,
            rx: RxRing::map(&spec, sizes.rx)?,
            tx: TxRing::map(&spec, sizes.tx)?,
        };
        let addr = libc::sockaddr_xdp {
            sxdp_family: libc::AF_XDP as u16,
            sxdp_flags: libc::XDP_COPY | libc::XDP_USE_NEED_WAKEUP,
            sxdp_ifindex: ifindex,
            sxdp_queue_id: queue,
            sxdp_shared_umem_fd: 0,
        };
        // SAFETY: `addr` is a valid sockaddr_xdp of the length passed.
        cvt(unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_xdp).cast(),
                std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
            )
        })
        .map_err(XdpError::at(Step::Bind))?;
        Ok((Socket { fd }, rings))
    }

    /// Asks the kernel to send what the transmit ring holds, without blocking. In copy mode
    /// each call sends a bounded batch (32 frames in Linux 6.x) and fails with `WouldBlock`
    /// when frames remain or the device is busy: call again.
    pub fn kick_tx(&self) -> io::Result<()> {
        // SAFETY: a zero-length send with no buffer and no address is AF_XDP's transmit kick
        // (`xsk_sendmsg`); no memory is passed.
        let ret = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        if ret < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Wakes the kernel to take chunks from the fill ring (when [`FillRing::needs_wakeup`]).
    pub fn wake_rx(&self) -> io::Result<()> {
        // SAFETY: a zero-length receive with no buffer and no address is AF_XDP's fill-ring
        // wakeup (`xsk_recvmsg`); no memory is passed.
        let ret = unsafe {
            libc::recvfrom(
                self.fd.as_raw_fd(),
                std::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        match ret {
            r if r >= 0 => Ok(()),
            _ => match io::Error::last_os_error() {
                e if e.kind() == io::ErrorKind::WouldBlock => Ok(()),
                e => Err(e),
            },
        }
    }

    /// A second descriptor of the socket, for reading its statistics from another thread.
    pub fn try_clone_fd(&self) -> io::Result<OwnedFd> {
        self.fd.try_clone()
    }
}

impl AsFd for Socket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// The counters of the AF_XDP socket behind `fd` (`XDP_STATISTICS`; they are not reset by
/// reading). Fields the kernel does not report (before Linux 5.9) are 0.
pub fn statistics(fd: BorrowedFd<'_>) -> io::Result<Statistics> {
    let (s, _) = sys::get_xdp_option::<libc::xdp_statistics>(fd, libc::XDP_STATISTICS)?;
    Ok(Statistics {
        rx_dropped: s.rx_dropped,
        rx_ring_full: s.rx_ring_full,
        fill_ring_empty: s.rx_fill_ring_empty_descs,
        tx_invalid: s.tx_invalid_descs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_sizes_must_be_powers_of_two() {
        let ok = RingSizes {
            fill: 2048,
            completion: 2048,
            rx: 2048,
            tx: 1024,
        };
        assert!(ok.check().is_ok());
        let err = RingSizes { tx: 1000, ..ok }.check().unwrap_err();
        assert!(err.to_string().contains("transmit ring of 1000"), "{err}");
        assert!(RingSizes { fill: 0, ..ok }.check().is_err());
    }
}
