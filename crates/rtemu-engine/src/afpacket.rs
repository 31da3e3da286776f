//! [`PacketIo`] over an `AF_PACKET` socket with `TPACKET_V2` receive and transmit rings.
//!
//! `TPACKET_V2`, not V3: V3 hands frames over in blocks that are retired by a timer, which adds
//! milliseconds of latency at low rates. Sends use the transmit ring with
//! `PACKET_QDISC_BYPASS`, so a flush is one `sendto` that hands every staged frame straight to
//! the veth driver. Frames this socket sends are not received back (`PACKET_IGNORE_OUTGOING`).
//!
//! A frame's arrival time is the receive stamp the kernel writes into its ring header (on
//! `CLOCK_REALTIME`, with no socket option needed), converted by an [`RxClock`].

use std::io;

use std::os::fd::{BorrowedFd, OwnedFd};

use rtemu_sys::packet::if_index;

use crate::io::{DropProbe, Frame, PacketIo, RxClock, VlanTag};
use crate::sys::{self, PacketSocket, RingShape};

/// Ring sizes of an [`AfPacket`] socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AfPacketConfig {
    /// Bytes per ring frame: a power of two from 2048 (a 1500-byte MTU) to 65536.
    pub frame_size: u32,
    /// Frames in the receive ring: a burst this long is absorbed while the engine is busy.
    pub rx_frames: u32,
    /// Frames in the transmit ring: the most frames one flush can carry.
    pub tx_frames: u32,
    /// Send with `PACKET_QDISC_BYPASS` (straight to the driver, no qdisc).
    pub qdisc_bypass: bool,
}

impl Default for AfPacketConfig {
    fn default() -> Self {
        AfPacketConfig {
            frame_size: 2048,
            rx_frames: 4096,
            tx_frames: 512,
            qdisc_bypass: true,
        }
    }
}

/// Bytes per ring block: the kernel allocates blocks as page-order allocations, so a block is a
/// power-of-two number of pages; 128 KiB keeps that order small while holding several frames.
const BLOCK_SIZE: u32 = 1 << 17;

/// An [`AfPacketConfig`] the kernel would refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AfPacketConfigError {
    /// The frame size is not a power of two in range.
    #[error("frame size {0} is invalid: give a power of two from 2048 to 65536")]
    FrameSize(u32),
    /// A ring would not fill whole blocks.
    #[error(
        "{ring} ring of {frames} frames is invalid: give a positive multiple of {per_block} \
         (the frames of one {BLOCK_SIZE}-byte block)"
    )]
    Frames {
        /// `receive` or `transmit`.
        ring: &'static str,
        /// The requested frame count.
        frames: u32,
        /// Frames per block.
        per_block: u32,
    },
}

/// Opening an [`AfPacket`] socket failed.
#[derive(Debug, thiserror::Error)]
pub enum AfPacketError {
    /// The ring sizes are invalid.
    #[error(transparent)]
    Config(#[from] AfPacketConfigError),
    /// The interface does not exist in the namespace.
    #[error("interface {name}: {source}")]
    Interface {
        /// The interface name.
        name: String,
        /// Why it could not be found.
        source: io::Error,
    },
    /// The socket or its rings could not be set up.
    #[error(
        "AF_PACKET socket on {name}: {source} (needs CAP_NET_RAW, and Linux 4.20 or later \
         for PACKET_IGNORE_OUTGOING)"
    )]
    Socket {
        /// The interface name.
        name: String,
        /// The operating system's error.
        source: io::Error,
    },
}

impl AfPacketConfig {
    /// Frames of this size in one ring block: ring sizes are multiples of it.
    pub fn frames_per_block(&self) -> u32 {
        BLOCK_SIZE / self.frame_size.max(1)
    }

    fn shapes(&self) -> Result<(RingShape, RingShape), AfPacketConfigError> {
        if !self.frame_size.is_power_of_two() || !(2048..=65536).contains(&self.frame_size) {
            return Err(AfPacketConfigError::FrameSize(self.frame_size));
        }
        let per_block = BLOCK_SIZE / self.frame_size;
        let shape = |ring, frames: u32| {
            if frames == 0 || frames % per_block != 0 {
                return Err(AfPacketConfigError::Frames {
                    ring,
                    frames,
                    per_block,
                });
            }
            Ok(RingShape {
                frame_size: self.frame_size,
                frame_nr: frames,
                block_size: BLOCK_SIZE,
            })
        };
        Ok((
            shape("receive", self.rx_frames)?,
            shape("transmit", self.tx_frames)?,
        ))
    }
}

/// Packet I/O on one interface through `TPACKET_V2` rings.
#[derive(Debug)]
pub struct AfPacket {
    socket: PacketSocket,
    rx_next: u32,
    tx_next: u32,
    staged: u32,
    rejected: u64,
    clock: RxClock,
}

impl AfPacket {
    /// Opens the rings on interface `name` in the calling thread's network namespace (see
    /// [`crate::netns::run_in`] to open one in another namespace).
    pub fn open(name: &str, config: &AfPacketConfig) -> Result<AfPacket, AfPacketError> {
        AfPacket::open_as(name, config, true)
    }

    /// A send-only socket on interface `name`: its transmit ring as `config` says, a receive
    /// ring of one block, bound to no protocol so it receives nothing. With it, another thread
    /// than the one receiving on `name` can send there
    /// ([`crate::engine::LinkSpec::senders`]).
    pub fn open_sender(name: &str, config: &AfPacketConfig) -> Result<AfPacket, AfPacketError> {
        let config = AfPacketConfig {
            rx_frames: BLOCK_SIZE / config.frame_size,
            ..*config
        };
        AfPacket::open_as(name, &config, false)
    }

    fn open_as(
        name: &str,
        config: &AfPacketConfig,
        receive: bool,
    ) -> Result<AfPacket, AfPacketError> {
        let (rx, tx) = config.shapes()?;
        let index = if_index(name).map_err(|source| AfPacketError::Interface {
            name: name.to_owned(),
            source,
        })?;
        let socket =
            PacketSocket::open(index, rx, tx, config.qdisc_bypass, receive).map_err(|source| {
                AfPacketError::Socket {
                    name: name.to_owned(),
                    source,
                }
            })?;
        Ok(AfPacket {
            socket,
            rx_next: 0,
            tx_next: 0,
            staged: 0,
            rejected: 0,
            clock: RxClock::new(),
        })
    }

    /// Frames the kernel refused to send (`TP_STATUS_WRONG_FORMAT`, e.g. longer than the MTU),
    /// noticed when their slot came round again.
    pub fn rejected(&self) -> u64 {
        self.rejected
    }
}

impl PacketIo for AfPacket {
    fn recv_batch<F: FnMut(Frame<'_>)>(&mut self, max: usize, mut on_frame: F) -> usize {
        // Count the ready frames, then read the clock once: every frame counted was in the ring
        // (stamped) before that read, so the read bounds every stamp of the batch from above.
        let frames = self.socket.rx_frames();
        let mut ready = 0;
        while ready < max && self.socket.rx_ready((self.rx_next + ready as u32) % frames) {
            ready += 1;
        }
        if ready == 0 {
            return 0;
        }
        let seen_ns = self.clock.read();
        let mut n = 0;
        while n < ready {
            let slot = self.rx_next;
            // Always there: only this socket hands slots back to the kernel.
            let Some(rx) = self.socket.rx_peek(slot) else {
                break;
            };
            let tpid = if rx.status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
                rx.vlan_tpid
            } else {
                0x8100
            };
            let vlan = (rx.status & libc::TP_STATUS_VLAN_VALID != 0).then_some(VlanTag {
                tpid,
                tci: rx.vlan_tci,
            });
            on_frame(Frame {
                data: rx.data,
                vlan,
                // tp_len counts the frame without the tag the device took off.
                wire_len: rx.wire_len + if vlan.is_some() { 4 } else { 0 },
                arrival_ns: self.clock.arrival(rx.stamp_ns, seen_ns),
                seen_ns,
            });
            n += 1;
            self.socket.rx_release(slot);
            self.rx_next = (slot + 1) % frames;
        }
        n
    }

    fn stage(&mut self, frame: &[u8]) -> bool {
        let slot = self.tx_next;
        let Some((data, rejected)) = self.socket.tx_slot(slot) else {
            return false;
        };
        let Some(dst) = data.get_mut(..frame.len()) else {
            return false;
        };
        dst.copy_from_slice(frame);
        self.rejected += rejected as u64;
        self.socket.tx_commit(slot, frame.len());
        self.tx_next = (slot + 1) % self.socket.tx_frames();
        self.staged += 1;
        true
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.staged == 0 {
            return Ok(());
        }
        self.staged = 0;
        self.socket.tx_kick()
    }

    fn max_frame(&self) -> usize {
        self.socket.tx_capacity()
    }

    fn poll_fd(&self) -> Option<BorrowedFd<'_>> {
        // Readable while the frame before the ring's head is the user's: a frame waits.
        Some(self.socket.as_fd())
    }

    fn drop_probe(&self) -> Option<Box<dyn DropProbe>> {
        // Without a second descriptor the drops stay uncounted, which the report shows as 0.
        let fd = self.socket.try_clone_fd().ok()?;
        Some(Box::new(RingDrops(fd)))
    }
}

/// Reads `PACKET_STATISTICS` of an [`AfPacket`] socket through its own descriptor.
#[derive(Debug)]
struct RingDrops(OwnedFd);

impl DropProbe for RingDrops {
    fn take(&mut self) -> io::Result<u64> {
        sys::packet_drops(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_sizes_are_checked_before_any_syscall() {
        let ok = AfPacketConfig::default();
        assert!(ok.shapes().is_ok());
        let bad = AfPacketConfig {
            frame_size: 3000,
            ..ok
        };
        assert_eq!(bad.shapes(), Err(AfPacketConfigError::FrameSize(3000)));
        let bad = AfPacketConfig {
            tx_frames: 100,
            ..ok
        };
        let err = bad.shapes().unwrap_err();
        assert_eq!(
            err,
            AfPacketConfigError::Frames {
                ring: "transmit",
                frames: 100,
                per_block: 64
            }
        );
        assert!(err.to_string().contains("multiple of 64"));
    }

    #[test]
    fn a_missing_interface_is_named_in_the_error() {
        let err = AfPacket::open("rtemu-nonexist", &AfPacketConfig::default()).unwrap_err();
        assert!(
            matches!(&err, AfPacketError::Interface { name, .. } if name == "rtemu-nonexist"),
            "{err}"
        );
    }
}
