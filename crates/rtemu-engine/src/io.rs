//! Packet I/O behind one small interface: receive a batch, stage frames, send them as a batch.
//!
//! The engine never sees a socket: it sees a [`PacketIo`] bound to one interface, so that
//! `AF_PACKET` rings ([`crate::afpacket`]) and AF_XDP ([`crate::xdp`]) can be compared and the
//! faster chosen by measurement (`docs/benchmarks.md`: on veth they relay the same packets/s
//! and `AF_PACKET` has slightly less latency, so a lab's engine uses it unless told
//! otherwise). An implementation must not allocate in
//! [`PacketIo::recv_batch`], [`PacketIo::stage`] or [`PacketIo::flush`]: they run on the
//! packet path.
//!
//! Every received frame carries its arrival time, from which the engine schedules its release:
//! the kernel's receive stamp where the I/O layer has one (`AF_PACKET`), converted to
//! `CLOCK_MONOTONIC` by an [`RxClock`], otherwise a clock read taken *after* the receive
//! (AF_XDP in copy mode on veth has no stamp). Never a read taken before the receive: a thread
//! preempted between that read and the receive would give frames that arrived later an earlier
//! time, and release them early.

use std::io;
use std::os::fd::BorrowedFd;

use rtemu_clock::time::realtime_ns;
use rtemu_clock::Instant;

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
    /// When the frame arrived, ns on `CLOCK_MONOTONIC`: the kernel's receive stamp where the
    /// I/O layer has one, else [`Frame::seen_ns`]; never later than [`Frame::seen_ns`].
    pub arrival_ns: u64,
    /// A clock read (`CLOCK_MONOTONIC`) the I/O layer took after the frame was in its receive
    /// ring; `seen_ns - arrival_ns` is how long the frame waited for the engine.
    pub seen_ns: u64,
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

/// How long a forward step of the system time waits before an [`RxClock`] converts with it:
/// frames the kernel stamped before the step may still be in the ring (or its backlog), and
/// converting their stamps with the new offset would make them early by the step.
const STEP_GRACE_NS: u64 = 1_000_000_000;

/// Turns the kernel's receive stamps (`CLOCK_REALTIME`, which `TPACKET_V2` frame headers carry)
/// into arrival times on the engine's `CLOCK_MONOTONIC`, never earlier than the frame arrived.
///
/// Both clocks are kept by the same kernel timekeeper and advance at the same rate (NTP slews
/// them alike); they differ by an offset that changes only when the system time is set. Three
/// reads `mono₁, real, mono₂` bound that offset between `real − mono₂` and `real − mono₁`; the
/// clock keeps the intersection of the bounds of every reading and converts with its lower end,
/// so a converted stamp is late by at most the interval's width (tens of ns) and never early.
/// When a reading no longer intersects, the time was set: backwards (a smaller offset) is taken
/// at once, since it only makes stamps later; forwards only after [`STEP_GRACE_NS`], so stamps
/// taken before the step are not made early (stamps taken after it convert late meanwhile, and
/// are held at the read after the receive). Reading costs three vDSO clock reads, no system
/// call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxClock {
    /// Lower bound of `real − mono`, ns: the one conversions use.
    lo: i64,
    /// Upper bound of `real − mono`, ns.
    hi: i64,
    /// A forward step not yet taken: its bounds, and the monotonic time it was first seen.
    pending: Option<(i64, i64, u64)>,
}

impl RxClock {
    /// A clock with the offset read now (a few readings, to narrow it).
    pub fn new() -> RxClock {
        let (m1, r, m2) = read_clocks();
        let mut clock = RxClock::from_reading(m1, r, m2);
        for _ in 0..8 {
            clock.read();
        }
        clock
    }

    fn from_reading(m1: u64, r: u64, m2: u64) -> RxClock {
        let (lo, hi) = bounds(m1, r, m2);
        RxClock {
            lo,
            hi,
            pending: None,
        }
    }

    /// Reads the clocks (call it after frames were found in the ring, before converting their
    /// stamps): refines the offset and returns the `CLOCK_MONOTONIC` read, the frames'
    /// [`Frame::seen_ns`].
    pub fn read(&mut self) -> u64 {
        let (m1, r, m2) = read_clocks();
        self.observe(m1, r, m2);
        m2
    }

    /// Takes one reading `mono₁ ≤ real's instant ≤ mono₂` into the offset's bounds.
    fn observe(&mut self, m1: u64, r: u64, m2: u64) {
        let (l, u) = bounds(m1, r, m2);
        if u < self.lo {
            *self = RxClock::from_reading(m1, r, m2);
        } else if l <= self.hi {
            self.lo = self.lo.max(l);
            self.hi = self.hi.min(u);
            self.pending = None;
        } else {
            let (pl, pu, since) = match self.pending {
                Some((pl, pu, since)) if l <= pu && u >= pl => (pl.max(l), pu.min(u), since),
                _ => (l, u, m2),
            };
            if m2.saturating_sub(since) >= STEP_GRACE_NS {
                *self = RxClock {
                    lo: pl,
                    hi: pu,
                    pending: None,
                };
            } else {
                self.pending = Some((pl, pu, since));
            }
        }
    }

    /// The arrival time (`CLOCK_MONOTONIC`) of a frame the kernel stamped `stamp_real_ns`
    /// (`CLOCK_REALTIME`) and the I/O layer saw at `seen_ns`: never later than `seen_ns`.
    pub fn arrival(&self, stamp_real_ns: u64, seen_ns: u64) -> u64 {
        let mono = (stamp_real_ns as i64).saturating_sub(self.lo).max(0) as u64;
        mono.min(seen_ns)
    }
}

impl Default for RxClock {
    fn default() -> Self {
        RxClock::new()
    }
}

/// `CLOCK_MONOTONIC`, `CLOCK_REALTIME`, `CLOCK_MONOTONIC`, read in that order.
fn read_clocks() -> (u64, u64, u64) {
    let m1 = Instant::now().as_nanos();
    let r = realtime_ns();
    (m1, r, Instant::now().as_nanos())
}

/// The bounds of `real − mono` one reading gives.
fn bounds(m1: u64, r: u64, m2: u64) -> (i64, i64) {
    (r as i64 - m2 as i64, r as i64 - m1 as i64)
}

/// One interface's packet I/O.
pub trait PacketIo {
    /// Calls `on_frame` for each frame received since the last call, at most `max`, without
    /// blocking; returns how many. Each frame carries its arrival time (see the module doc).
    fn recv_batch<F: FnMut(Frame<'_>)>(&mut self, max: usize, on_frame: F) -> usize;

    /// Copies `frame` into the next transmit slot; `false` (and nothing staged) when every slot
    /// is busy. Staged frames leave at the next [`PacketIo::flush`], in staging order.
    fn stage(&mut self, frame: &[u8]) -> bool;

    /// Sends every staged frame; returns when the kernel has taken them.
    fn flush(&mut self) -> io::Result<()>;

    /// The largest frame [`PacketIo::stage`] accepts.
    fn max_frame(&self) -> usize;

    /// A descriptor that is readable while frames wait to be received, for the release thread
    /// to sleep on; `None` where the layer has none (the thread then polls it).
    fn poll_fd(&self) -> Option<BorrowedFd<'_>>;

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
                    arrival_ns: 0,
                    seen_ns: 0,
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

        fn poll_fd(&self) -> Option<BorrowedFd<'_>> {
            None
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
            arrival_ns: 0,
            seen_ns: 0,
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

    /// A clock whose offset (real − mono) is `offset` and whose readings take `gap` ns.
    fn reading(mono: u64, offset: i64, gap: u64) -> (u64, u64, u64) {
        (
            mono,
            (mono as i64 + gap as i64 / 2 + offset) as u64,
            mono + gap,
        )
    }

    const OFFSET: i64 = 1_700_000_000_000_000_000;

    #[test]
    fn stamps_convert_late_by_at_most_the_reading_gap_and_never_early() {
        let (m1, r, m2) = reading(1_000_000, OFFSET, 80);
        let mut clock = RxClock::from_reading(m1, r, m2);
        // A frame that arrived at mono 900 000 (real 900 000 + offset), seen at 1 000 080.
        let arrived = 900_000u64;
        let got = clock.arrival((arrived as i64 + OFFSET) as u64, m2);
        assert!(got >= arrived && got - arrived <= 80, "{got}");
        // Narrower readings narrow the bounds: a 10 ns reading leaves at most 10 ns.
        for k in 0..20 {
            let (m1, r, m2) = reading(2_000_000 + k * 1_000, OFFSET, 10 + (k % 3) * 40);
            clock.observe(m1, r, m2);
        }
        let got = clock.arrival((arrived as i64 + OFFSET) as u64, 3_000_000);
        assert!(got >= arrived && got - arrived <= 10, "{got}");
        // Never later than the read after the receive, however odd the stamp.
        assert_eq!(clock.arrival(u64::MAX / 2, 3_000_000), 3_000_000);
        assert_eq!(clock.arrival(0, 3_000_000), 0);
    }

    #[test]
    fn a_time_set_backwards_is_taken_at_once() {
        let (m1, r, m2) = reading(1_000_000, OFFSET, 50);
        let mut clock = RxClock::from_reading(m1, r, m2);
        let back = OFFSET - 5_000_000_000;
        let (m1, r, m2) = reading(2_000_000, back, 50);
        clock.observe(m1, r, m2);
        // A frame stamped after the step converts exactly (within the gap).
        let got = clock.arrival((1_500_000 + back) as u64, m2);
        assert!((1_500_000..=1_500_050).contains(&got), "{got}");
        // One stamped before it converts late (held at the seen time), not early.
        let got = clock.arrival((1_500_000 + OFFSET) as u64, m2);
        assert_eq!(got, m2);
    }

    #[test]
    fn a_time_set_forwards_waits_out_the_grace_so_older_stamps_are_not_early() {
        let (m1, r, m2) = reading(1_000_000, OFFSET, 50);
        let mut clock = RxClock::from_reading(m1, r, m2);
        let ahead = OFFSET + 3_000_000_000;
        let stepped_at = 2_000_000u64;
        let (m1, r, m2) = reading(stepped_at, ahead, 50);
        clock.observe(m1, r, m2);
        // Stamped before the step, still in the ring: converted with the old offset.
        let got = clock.arrival((1_900_000 + OFFSET) as u64, m2);
        assert!((1_900_000..=1_900_050).contains(&got), "{got}");
        // Stamped after it: late (the seen time), never early.
        let got = clock.arrival((2_000_010 + ahead) as u64, m2);
        assert_eq!(got, m2);
        // After the grace the new offset is taken.
        let later = stepped_at + STEP_GRACE_NS + 100;
        let (m1, r, m2) = reading(later, ahead, 50);
        clock.observe(m1, r, m2);
        let got = clock.arrival(((later - 1_000) as i64 + ahead) as u64, m2);
        assert!((later - 1_000..=later - 950).contains(&got), "{got}");
    }

    proptest::proptest! {
        /// Without a step, whatever the readings' gaps, a converted stamp is never earlier than
        /// the arrival and late by at most the first reading's gap.
        #[test]
        fn conversion_is_never_early(
            gaps in proptest::collection::vec(1u64..5_000, 1..20),
            ahead in 0u64..1_000_000,
        ) {
            let mut clock: Option<RxClock> = None;
            let mut mono = 10_000_000u64;
            for gap in &gaps {
                let (m1, r, m2) = reading(mono, OFFSET, *gap);
                match clock.as_mut() {
                    None => clock = Some(RxClock::from_reading(m1, r, m2)),
                    Some(c) => c.observe(m1, r, m2),
                }
                mono += 1_000_000;
            }
            let clock = clock.unwrap();
            let arrived = mono - ahead;
            let got = clock.arrival((arrived as i64 + OFFSET) as u64, mono);
            proptest::prop_assert!(got >= arrived);
            proptest::prop_assert!(got - arrived <= gaps[0], "{} late", got - arrived);
        }
    }

    #[test]
    fn the_live_clock_converts_a_fresh_realtime_read_to_about_now() {
        let mut clock = RxClock::new();
        let real = realtime_ns();
        let seen = clock.read();
        let after = Instant::now().as_nanos();
        let got = clock.arrival(real, seen);
        assert!(got <= seen && seen <= after);
        // Generous: a preempted test thread may sit between the two reads.
        assert!(seen - got < 50_000_000, "{} ns", seen - got);
    }

    #[test]
    fn an_untagged_frame_is_copied_as_is_and_cut_frames_say_so() {
        let data = [1u8, 2, 3];
        let f = Frame {
            data: &data,
            vlan: None,
            wire_len: 9,
            arrival_ns: 0,
            seen_ns: 0,
        };
        let mut out = [0u8; 3];
        assert_eq!(f.copy_to(&mut out), Some(3));
        assert_eq!(out, data);
        assert!(f.is_truncated());
    }
}
