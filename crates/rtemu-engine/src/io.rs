//! Packet I/O behind one small interface: receive a batch, stage frames, send them as a batch.
//!
//! The engine never sees a socket: it sees a [`PacketIo`] bound to one interface, so that
//! `AF_PACKET` rings ([`crate::afpacket`]) and AF_XDP ([`crate::xdp`]) can be compared and the
//! faster chosen by measurement (`docs/benchmarks.md`: on veth they relay the same packets/s
//! and `AF_PACKET` has slightly less latency, so a lab's engine uses it unless told
//! otherwise). An implementation must not allocate in
//! [`PacketIo::recv_batch`], [`PacketIo::stage`] or [`PacketIo::flush`]: they run on the
//! packet path.

use std::io;

/// The 802.1Q tag a device took off a frame (and the engine must put back, since frames pass
/// the engine unchanged).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VlanTag {
    /// Tag protocol identifier (0x8100, 0x88a8).
    pub tpid: u16,
    /// Tag control information (priority, DEI, VLAN id).
    pub tci: u16,
}

/// A received frame, borrowed from the I/O layer for the duration of the callback.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    /// The frame from its Ethernet header, without a tag the device took off.
    pub data: &'a [u8],
    /// The tag the device took off, if any.
    pub vlan: Option<VlanTag>,
    /// The frame's length on the wire, tag included; more than [`Frame::len`] when the I/O
    /// layer cut it.
    pub wire_len: u32,
}

impl Frame<'_> {
    /// The frame's length with its tag restored.
    pub fn len(&self) -> usize {
        self.data.len() + if self.vlan.is_some() { 4 } else { 0 }
    }

    /// Whether the frame has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the I/O layer received less than the whole frame.
    pub fn is_truncated(&self) -> bool {
        (self.len() as u64) < self.wire_len as u64
    }

    /// Writes the frame as it was on the wire (tag restored after the two MAC addresses) into
    /// `dst`; returns its length, or `None` if it does not fit.
    pub fn copy_to(&self, dst: &mut [u8]) -> Option<usize> {
        let len = self.len();
        let dst = dst.get_mut(..len)?;
        match self.vlan {
            Some(tag) if self.data.len() >= 12 => {
                dst[..12].copy_from_slice(&self.data[..12]);
                dst[12..14].copy_from_slice(&tag.tpid.to_be_bytes());
                dst[14..16].copy_from_slice(&tag.tci.to_be_bytes());
                dst[16..].copy_from_slice(&self.data[12..]);
            }
            Some(_) => return None,
            None => dst.copy_from_slice(self.data),
        }
        Some(len)
    }
}

/// One interface's packet I/O.
pub trait PacketIo {
    /// Calls `on_frame` for each frame received since the last call, at most `max`, without
    /// blocking; returns how many.
    fn recv_batch<F: FnMut(Frame<'_>)>(&mut self, max: usize, on_frame: F) -> usize;

    /// Copies `frame` into the next transmit slot; `false` (and nothing staged) when every slot
    /// is busy. Staged frames leave at the next [`PacketIo::flush`], in staging order.
    fn stage(&mut self, frame: &[u8]) -> bool;

    /// Sends every staged frame; returns when the kernel has taken them.
    fn flush(&mut self) -> io::Result<()>;

    /// The largest frame [`PacketIo::stage`] accepts.
    fn max_frame(&self) -> usize;

    /// A probe that counts frames the kernel dropped before this I/O layer received them,
    /// read by a thread other than the packet path; `None` where the layer cannot tell.
    fn drop_probe(&self) -> Option<Box<dyn DropProbe>> {
        None
    }
}

/// Counts frames lost before the engine saw them (a full receive ring), off the packet path.
pub trait DropProbe: Send {
    /// Frames dropped since the last call.
    fn take(&mut self) -> io::Result<u64>;
}

#[cfg(test)]
pub(crate) mod mem {
    //! An in-memory [`PacketIo`] for unit tests: frames are pushed in, sent frames collected.

    use super::*;
    use std::collections::VecDeque;

    #[derive(Debug, Default)]
    pub struct MemIo {
        pub inbox: VecDeque<Vec<u8>>,
        pub staged: Vec<Vec<u8>>,
        pub sent: Vec<Vec<u8>>,
        /// Transmit slots; `stage` fails once this many frames are staged and not flushed.
        pub slots: usize,
    }

    impl MemIo {
        pub fn new(slots: usize) -> Self {
            MemIo {
                slots,
                ..MemIo::default()
            }
        }
    }

    impl PacketIo for MemIo {
        fn recv_batch<F: FnMut(Frame<'_>)>(&mut self, max: usize, mut on_frame: F) -> usize {
            let mut n = 0;
            while n < max {
                let Some(f) = self.inbox.pop_front() else {
                    break;
                };
                on_frame(Frame {
                    data: &f,
                    vlan: None,
                    wire_len: f.len() as u32,
                });
                n += 1;
            }
            n
        }

        fn stage(&mut self, frame: &[u8]) -> bool {
            if self.staged.len() >= self.slots {
                return false;
            }
            self.staged.push(frame.to_vec());
            true
        }

        fn flush(&mut self) -> io::Result<()> {
            self.sent.append(&mut self.staged);
            Ok(())
        }

        fn max_frame(&self) -> usize {
            2048
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stripped_tag_goes_back_after_the_mac_addresses() {
        let data: Vec<u8> = (0u8..20).collect();
        let f = Frame {
            data: &data,
            vlan: Some(VlanTag {
                tpid: 0x8100,
                tci: 0x0007,
            }),
            wire_len: 24,
        };
        let mut out = [0xa5u8; 32];
        assert_eq!(f.copy_to(&mut out), Some(24));
        assert_eq!(&out[..12], &data[..12]);
        assert_eq!(&out[12..16], &[0x81, 0x00, 0x00, 0x07]);
        assert_eq!(&out[16..24], &data[12..]);
        assert_eq!(out[24], 0xa5, "nothing written past the frame");
        assert!(!f.is_truncated());
        assert_eq!(f.copy_to(&mut out[..23]), None);
    }

    #[test]
    fn an_untagged_frame_is_copied_as_is_and_cut_frames_say_so() {
        let data = [1u8, 2, 3];
        let f = Frame {
            data: &data,
            vlan: None,
            wire_len: 9,
        };
        let mut out = [0u8; 3];
        assert_eq!(f.copy_to(&mut out), Some(3));
        assert_eq!(out, data);
        assert!(f.is_truncated());
    }
}
