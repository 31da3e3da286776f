//! [`PacketIo`] over an AF_XDP socket ([`rtemu_xdp`]), in copy mode (veth has no zero-copy).
//!
//! Each interface gets its own UMEM, split once: `rx_frames` chunks circulate between the fill
//! ring, the kernel and the receive ring; `tx_frames` chunks between a free list, the transmit
//! ring and the completion ring. Every ring has a slot for every chunk that can be in it, so
//! no push fails for want of room, and the free list never grows past its first capacity: no
//! allocation on the packet path. An XDP program on the interface redirects every frame of its
//! queue 0 to the socket (frames on other queues go up the stack, unseen: rtemu's veths have
//! one), through a bpf link that detaches when this value drops or the process ends, also by
//! `SIGKILL`.
//!
//! Each frame's arrival is the kernel's: the XDP program writes `CLOCK_MONOTONIC` (8 bytes,
//! `bpf_ktime_get_ns`) into the metadata area right before the frame when the driver hands it
//! over, and the kernel copies it into the chunk with the frame, so the time a frame waited in
//! the ring is in the fidelity record as its arrival lag and its release is counted from when
//! it really arrived. The stamp is cleared before the chunk returns to the fill ring; a frame
//! without one (a kernel that refused the stamping program) arrives at a clock read after the
//! receive, as before.
//!
//! The frame arrives as it was on the wire: native XDP on veth runs before the stack would
//! take a VLAN tag off, so [`Frame::vlan`] is always `None` and a tag stays inline, where the
//! engine forwards it unchanged. A frame larger than a chunk less the kernel's 256 bytes of
//! headroom is dropped by the kernel (counted by the [`DropProbe`]); [`AfXdpConfig::for_mtu`]
//! picks chunks large enough for an MTU.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rtemu_clock::Instant;
use rtemu_sys::packet::if_index;
use rtemu_xdp::program::Redirect;
use rtemu_xdp::socket::{self, RingSizes, Rings, Socket};
use rtemu_xdp::umem::{Chunk, Geometry, Umem};
use rtemu_xdp::XdpError;

use crate::io::{DropProbe, Frame, PacketIo};

pub use rtemu_xdp::program::AttachMode;

/// Bytes the kernel keeps in front of a received frame in its chunk (`XDP_PACKET_HEADROOM`).
pub const RX_HEADROOM: u32 = 256;

/// Bytes of the arrival stamp the XDP program writes before a frame.
const STAMP: usize = rtemu_xdp::insn::STAMP_BYTES as usize;

/// The most transmit kicks one flush makes: each sends up to 32 frames in copy mode, so this
/// covers a full transmit ring of the default size twice over before giving up.
const MAX_KICKS: u32 = 64;

/// Ring and UMEM sizes of an [`AfXdp`] socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AfXdpConfig {
    /// Bytes per UMEM chunk: 2048 (frames up to 1792 bytes) or 4096 (up to 3840).
    pub frame_size: u32,
    /// Chunks for receiving, and the size of the fill and receive rings: a power of two.
    pub rx_frames: u32,
    /// Chunks for sending, and the size of the transmit and completion rings: a power of two;
    /// the most frames in flight towards the interface.
    pub tx_frames: u32,
}

impl Default for AfXdpConfig {
    fn default() -> Self {
        AfXdpConfig {
            frame_size: 2048,
            rx_frames: 4096,
            tx_frames: 1024,
        }
    }
}

impl AfXdpConfig {
    /// The default sizes with chunks large enough for frames of `mtu` (plus Ethernet header
    /// and a VLAN tag) behind the kernel's headroom; `None` when no chunk size is (the MTU is
    /// over 3822 bytes; AF_XDP would need multi-buffer frames).
    pub fn for_mtu(mtu: u32) -> Option<AfXdpConfig> {
        let need = mtu.checked_add(18 + RX_HEADROOM)?;
        let frame_size = [2048, 4096].into_iter().find(|s| need <= *s)?;
        Some(AfXdpConfig {
            frame_size,
            ..AfXdpConfig::default()
        })
    }
}

/// Opening an [`AfXdp`] socket failed.
#[derive(Debug, thiserror::Error)]
pub enum AfXdpError {
    /// The interface does not exist in the namespace.
    #[error("interface {name}: {source}")]
    Interface {
        /// The interface name.
        name: String,
        /// Why it could not be found.
        source: io::Error,
    },
    /// A step of the AF_XDP set-up failed.
    #[error("AF_XDP on {name}: {source}")]
    Xdp {
        /// The interface name.
        name: String,
        /// Which step, and why.
        source: XdpError,
    },
}

/// Packet I/O on one interface through an AF_XDP socket.
#[derive(Debug)]
pub struct AfXdp {
    // Field order is drop order: the program leaves the interface first, so no frame is
    // redirected to a socket that is going away.
    redirect: Redirect,
    socket: Socket,
    rings: Rings,
    umem: Umem,
    /// Transmit chunks user space owns; capacity `tx_frames`, which it never exceeds.
    free: Vec<Chunk>,
    staged: u32,
    /// Whether the XDP program writes each frame's arrival time right before it.
    stamps: bool,
}

impl AfXdp {
    /// Sets AF_XDP up on interface `name` in the calling thread's network namespace (see
    /// [`crate::netns::run_in`] for another one): UMEM, socket, rings, and the XDP program.
    /// Needs `CAP_NET_RAW`, `CAP_BPF` and `CAP_NET_ADMIN`, and Linux 5.9 or later.
    pub fn open(name: &str, config: &AfXdpConfig) -> Result<AfXdp, AfXdpError> {
        let xdp = |source| AfXdpError::Xdp {
            name: name.to_owned(),
            source,
        };
        let ifindex = if_index(name).map_err(|source| AfXdpError::Interface {
            name: name.to_owned(),
            source,
        })?;
        let frames = config
            .rx_frames
            .checked_add(config.tx_frames)
            .ok_or_else(|| xdp(XdpError::Config("too many frames".into())))?;
        let (umem, mut chunks) = Umem::new(Geometry {
            frame_size: config.frame_size,
            frames,
        })
        .map_err(xdp)?;
        let sizes = RingSizes {
            fill: config.rx_frames,
            completion: config.tx_frames,
            rx: config.rx_frames,
            tx: config.tx_frames,
        };
        let (socket, mut rings) = Socket::open(ifindex, 0, &umem, sizes).map_err(xdp)?;
        let free = chunks.split_off(config.rx_frames as usize);
        for chunk in chunks {
            // The fill ring has `rx_frames` slots, one per chunk pushed here.
            let _ = rings.fill.push(chunk);
        }
        rings.fill.submit();
        let redirect = Redirect::attach(ifindex, 0, &socket).map_err(xdp)?;
        let stamps = redirect.stamps();
        Ok(AfXdp {
            redirect,
            socket,
            rings,
            umem,
            free,
            staged: 0,
            stamps,
        })
    }

    /// Whether the XDP program runs in the driver or, where the driver refused, generically.
    pub fn attach_mode(&self) -> &AttachMode {
        self.redirect.mode()
    }

    /// Whether received frames carry the kernel's arrival time (the XDP program's stamp);
    /// without it their arrival is a clock read after the receive.
    pub fn stamps(&self) -> bool {
        self.stamps
    }

    /// Takes the chunks the kernel has finished sending back into the free list.
    fn reap(&mut self) {
        let mut any = false;
        while let Some(chunk) = self.rings.completion.pop() {
            self.free.push(chunk);
            any = true;
        }
        if any {
            self.rings.completion.release();
        }
    }
}

impl PacketIo for AfXdp {
    fn recv_batch<F: FnMut(Frame<'_>)>(&mut self, max: usize, mut on_frame: F) -> usize {
        let mut n = 0;
        while n < max {
            let Some(rx) = self.rings.rx.pop() else {
                break;
            };
            // A clock read taken after the frame was in the ring, never before (see
            // `crate::io`): the arrival when the program left no stamp.
            let seen_ns = Instant::now().as_nanos();
            let arrival_ns = match rx.offset.checked_sub(STAMP) {
                Some(at) if self.stamps => {
                    let stamp = self.umem.bytes(&rx.chunk, at, STAMP);
                    let ns = u64::from_ne_bytes(stamp.try_into().unwrap_or([0; STAMP]));
                    // Cleared before the chunk goes back to the kernel (below): 0 is "no
                    // stamp", and a stamp is never later than the read after it.
                    if ns == 0 {
                        seen_ns
                    } else {
                        ns.min(seen_ns)
                    }
                }
                _ => seen_ns,
            };
            let data = self.umem.bytes(&rx.chunk, rx.offset, rx.len);
            on_frame(Frame {
                data,
                vlan: None,
                wire_len: rx.len as u32,
                arrival_ns,
                seen_ns,
            });
            if self.stamps {
                if let Some(at) = rx.offset.checked_sub(STAMP) {
                    // So a frame the program could not stamp is not taken for this one's time.
                    self.umem.bytes_mut(&rx.chunk)[at..at + STAMP].fill(0);
                }
            }
            // Cannot fail: the fill ring has a slot for every receive chunk.
            let _ = self.rings.fill.push(rx.chunk);
            n += 1;
        }
        if n > 0 {
            self.rings.rx.release();
            self.rings.fill.submit();
            if self.rings.fill.needs_wakeup() {
                // A failed wakeup leaves the chunks in the ring; the next batch tries again.
                let _ = self.socket.wake_rx();
            }
        }
        n
    }

    fn stage(&mut self, frame: &[u8]) -> bool {
        if frame.len() > self.umem.geometry().frame_size as usize {
            return false;
        }
        if self.free.is_empty() {
            self.reap();
        }
        let Some(chunk) = self.free.pop() else {
            return false;
        };
        self.umem.bytes_mut(&chunk)[..frame.len()].copy_from_slice(frame);
        match self.rings.tx.push(chunk, frame.len() as u32) {
            Ok(()) => {
                self.staged += 1;
                true
            }
            Err(chunk) => {
                self.free.push(chunk);
                false
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.staged > 0 {
            self.staged = 0;
            self.rings.tx.submit();
            let mut kicks = 0;
            while self.rings.tx.outstanding() > 0 && self.rings.tx.needs_wakeup() {
                match self.socket.kick_tx() {
                    Ok(()) => {}
                    // A batch's worth sent and more left, or the device busy for a moment.
                    Err(e)
                        if matches!(
                            e.raw_os_error(),
                            Some(libc::EAGAIN | libc::EBUSY | libc::ENOBUFS)
                        ) => {}
                    Err(e) => return Err(e),
                }
                kicks += 1;
                if kicks == MAX_KICKS {
                    break;
                }
            }
        }
        self.reap();
        Ok(())
    }

    fn max_frame(&self) -> usize {
        self.umem.geometry().frame_size as usize
    }

    fn poll_fd(&self) -> Option<BorrowedFd<'_>> {
        // Readable while the receive ring holds a frame.
        Some(self.socket.as_fd())
    }

    fn drop_probe(&self) -> Option<Box<dyn DropProbe>> {
        // Without a second descriptor the drops stay uncounted, which the report shows as 0.
        let fd = self.socket.try_clone_fd().ok()?;
        Some(Box::new(XdpDrops { fd, seen: 0 }))
    }
}

/// Reads `XDP_STATISTICS` of an [`AfXdp`] socket through its own descriptor.
#[derive(Debug)]
struct XdpDrops {
    fd: OwnedFd,
    /// Drops counted by earlier calls (the kernel's counts only grow).
    seen: u64,
}

impl DropProbe for XdpDrops {
    fn take(&mut self) -> io::Result<u64> {
        let s = socket::statistics(self.fd.as_fd())?;
        // An empty fill ring is also counted in `rx_dropped`: not added twice.
        let total = s.rx_dropped + s.rx_ring_full;
        let new = total.saturating_sub(self.seen);
        self.seen = total;
        Ok(new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_fit_the_mtu_behind_the_headroom() {
        assert_eq!(AfXdpConfig::for_mtu(1500).unwrap().frame_size, 2048);
        assert_eq!(AfXdpConfig::for_mtu(1774).unwrap().frame_size, 2048);
        assert_eq!(AfXdpConfig::for_mtu(1775).unwrap().frame_size, 4096);
        assert_eq!(AfXdpConfig::for_mtu(9000), None);
    }

    #[test]
    fn a_missing_interface_is_named_in_the_error() {
        let err = AfXdp::open("rtemu-nonexist", &AfXdpConfig::default()).unwrap_err();
        assert!(
            matches!(&err, AfXdpError::Interface { name, .. } if name == "rtemu-nonexist"),
            "{err}"
        );
    }
}
