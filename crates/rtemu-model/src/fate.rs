//! What a model decides for a packet: dropped, or delivered one or more times.

use crate::packet::Nanos;
use crate::rng::Stream;

/// Why a packet was dropped. Every drop has exactly one reason, so that the per-reason
/// counters add up to the total.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum DropReason {
    /// The loss model (random, 4-state Markov or Gilbert–Elliott) dropped it.
    Loss,
    /// The rate queue was full (packet or byte limit), or `slot` held `limit` copies: drop-tail.
    QueueFull,
    /// A trace said to drop it.
    Trace,
    /// The trace reader had no record ready and the under-run policy is `drop`.
    TraceUnderrun,
    /// A queue discipline (CoDel, PIE, DualPI2) dropped it to signal congestion, though its
    /// queue had room.
    Aqm,
}

impl DropReason {
    /// Every reason, in the order reports list them.
    pub const ALL: [DropReason; 5] = [
        DropReason::Loss,
        DropReason::QueueFull,
        DropReason::Trace,
        DropReason::TraceUnderrun,
        DropReason::Aqm,
    ];

    /// The name used in logs, reports and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::Loss => "loss",
            DropReason::QueueFull => "queue-full",
            DropReason::Trace => "trace",
            DropReason::TraceUnderrun => "trace-underrun",
            DropReason::Aqm => "aqm",
        }
    }
}

impl std::fmt::Display for DropReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Bit errors to apply to one delivered copy of a frame.
///
/// A model only sees metadata, so it describes the errors and the engine applies them with
/// [`Corruption::apply`]. Bit-error-rate flips are described by a seed drawn from the link's
/// stream, so the description is small and fixed-size however many bits flip, and the flipped
/// positions are still fully determined by the experiment's seed.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Corruption {
    /// netem's `corrupt`: one bit, as an index from the first bit of the frame (bit 0 is the
    /// most significant bit of byte 0).
    pub single_bit: Option<u32>,
    /// `ber`: independent flips at a bit error rate.
    pub ber: Option<BerFlips>,
}

impl Corruption {
    /// No bit flipped.
    pub const NONE: Corruption = Corruption {
        single_bit: None,
        ber: None,
    };

    /// Whether any bit is flipped.
    pub fn is_corrupted(&self) -> bool {
        self.single_bit.is_some() || self.ber.is_some()
    }

    /// Every flipped bit position, in increasing order for the bit-error-rate part, preceded by
    /// the single netem-style flip if there is one.
    pub fn bits(&self) -> impl Iterator<Item = u32> + '_ {
        self.single_bit
            .into_iter()
            .chain(self.ber.iter().flat_map(|b| b.positions()))
    }

    /// Flips the described bits in `frame`. Positions beyond the frame (a frame shorter than
    /// the length the model was told) are ignored.
    pub fn apply(&self, frame: &mut [u8]) {
        for bit in self.bits() {
            if let Some(byte) = frame.get_mut((bit / 8) as usize) {
                *byte ^= 0x80 >> (bit % 8);
            }
        }
    }
}

/// Independent bit flips at a bit error rate over a frame of `len_bits` bits.
///
/// The gaps between flips are geometric; drawing them directly costs one draw per flip instead
/// of one per bit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BerFlips {
    /// The first flipped bit (always `< len_bits`).
    pub first: u32,
    /// Number of bits in the frame.
    pub len_bits: u32,
    /// Seed of the stream that draws the following gaps.
    pub seed: u64,
    /// `ln(1 - ber)`, negative.
    pub ln_1m_ber: f64,
}

impl BerFlips {
    /// Draws the bit errors of a `len_bits`-bit frame, or `None` when no bit flips (the common
    /// case, decided with a single draw). `ln_1m_ber` is `ln(1 − ber)`.
    pub fn draw(stream: &mut Stream, len_bits: u32, ln_1m_ber: f64) -> Option<BerFlips> {
        let first = geometric_gap(stream.open01(), ln_1m_ber);
        if first >= len_bits as u64 {
            return None;
        }
        Some(BerFlips {
            first: first as u32,
            len_bits,
            seed: stream.next_u64(),
            ln_1m_ber,
        })
    }

    /// The flipped bit positions, increasing.
    pub fn positions(&self) -> impl Iterator<Item = u32> {
        let mut stream = Stream::new(self.seed, 0);
        let (len, ln) = (self.len_bits as u64, self.ln_1m_ber);
        let mut next = Some(self.first as u64);
        std::iter::from_fn(move || {
            let bit = next?;
            let following = bit + 1 + geometric_gap(stream.open01(), ln);
            next = (following < len).then_some(following);
            Some(bit as u32)
        })
    }
}

/// Number of failures before the first success of a Bernoulli(p) sequence, from one uniform
/// `u` in (0, 1] and `ln(1 − p)`.
fn geometric_gap(u: f64, ln_1m_p: f64) -> u64 {
    if ln_1m_p == f64::NEG_INFINITY {
        return 0;
    }
    let g = (u.ln() / ln_1m_p).floor();
    if g >= u64::MAX as f64 {
        u64::MAX
    } else {
        g as u64
    }
}

/// One delivered copy of a packet.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Delivery {
    /// When the copy leaves the link, absolute. Never before the packet's arrival.
    pub at_ns: Nanos,
    /// Bits to flip in this copy.
    pub corruption: Corruption,
    /// 0 for the original, 1.. for duplicates.
    pub copy: u8,
    /// Whether the reorder stage sent this copy ahead of the delayed packets.
    pub reordered: bool,
    /// Whether a queue (or netem's `ecn` loss) marked this ECN-capable copy "congestion
    /// experienced" instead of dropping it: the engine rewrites its ECN field to CE
    /// ([`crate::wire::mark_ce`]) before it applies the corruption.
    pub marked: bool,
}

/// The most copies one packet can turn into (the original and its duplicates). netem makes at
/// most one duplicate; traces may cascade a few.
pub const MAX_COPIES: usize = 8;

/// The delivered copies of one packet, in a fixed-size array so that deciding a fate never
/// allocates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Deliveries {
    len: u8,
    items: [Delivery; MAX_COPIES],
}

impl Deliveries {
    const EMPTY_ITEM: Delivery = Delivery {
        at_ns: 0,
        corruption: Corruption::NONE,
        copy: 0,
        reordered: false,
        marked: false,
    };

    /// No copies yet.
    pub const fn new() -> Self {
        Deliveries {
            len: 0,
            items: [Self::EMPTY_ITEM; MAX_COPIES],
        }
    }

    /// Adds a copy; returns false (and adds nothing) when [`MAX_COPIES`] are already held.
    pub fn push(&mut self, d: Delivery) -> bool {
        if (self.len as usize) < MAX_COPIES {
            self.items[self.len as usize] = d;
            self.len += 1;
            true
        } else {
            false
        }
    }

    /// The copies.
    pub fn as_slice(&self) -> &[Delivery] {
        &self.items[..self.len as usize]
    }

    /// Number of copies.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether there is no copy.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Default for Deliveries {
    fn default() -> Self {
        Self::new()
    }
}

/// What happens to a packet.
///
/// A packet whose original is lost may still have a delivered duplicate (each copy passes the
/// loss stage on its own, as in netem, where the duplicate re-enters the qdisc); then the fate
/// is `Delivered` with that copy only, and the lost copies are listed in `lost`.
///
/// A link with a queue discipline decides a copy's fate when the copy leaves the queue, not
/// when it arrives: such a copy is *held* ([`Fate::held`]), and the model gives its fate later
/// as a [`crate::Departure`] (see [`crate::Model::depart`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fate {
    /// The copies that leave the link.
    pub delivered: Deliveries,
    /// Why each copy that does not leave the link was dropped (the first `lost_len` entries).
    lost: [Option<DropReason>; MAX_COPIES],
    /// The copies the model's queue holds, one bit per copy number.
    held: u8,
}

impl Fate {
    /// A fate with nothing delivered and nothing dropped yet.
    pub const fn new() -> Self {
        Fate {
            delivered: Deliveries::new(),
            lost: [None; MAX_COPIES],
            held: 0,
        }
    }

    /// A packet dropped whole for `reason`.
    pub fn dropped(reason: DropReason) -> Self {
        let mut f = Fate::new();
        f.record_drop(reason);
        f
    }

    /// Records that one copy was dropped for `reason`.
    pub fn record_drop(&mut self, reason: DropReason) {
        if let Some(slot) = self.lost.iter_mut().find(|s| s.is_none()) {
            *slot = Some(reason);
        }
    }

    /// Records that the model's queue holds copy `copy`, to decide its fate when it leaves.
    pub fn hold(&mut self, copy: u8) {
        self.held |= 1 << (copy as usize % MAX_COPIES);
    }

    /// The copy numbers the model's queue holds.
    pub fn held(&self) -> impl Iterator<Item = u8> + '_ {
        (0..MAX_COPIES as u8).filter(|c| self.held & (1 << c) != 0)
    }

    /// Every copy decided or held: delivered, dropped and held.
    pub fn copies(&self) -> usize {
        self.delivered.len() + self.drops().count() + self.held.count_ones() as usize
    }

    /// Why copies were dropped, one entry per dropped copy.
    pub fn drops(&self) -> impl Iterator<Item = DropReason> + '_ {
        self.lost.iter().map_while(|r| *r)
    }

    /// The reason the packet is gone, if no copy at all is delivered or held.
    pub fn drop_reason(&self) -> Option<DropReason> {
        if self.delivered.is_empty() && self.held == 0 {
            self.drops().next()
        } else {
            None
        }
    }
}

impl Default for Fate {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ber_positions_are_increasing_within_the_frame_and_reproducible() {
        let mut s = Stream::new(3, 0);
        let ln = (1.0f64 - 0.01).ln();
        let mut seen = 0;
        for _ in 0..1000 {
            if let Some(b) = BerFlips::draw(&mut s, 8000, ln) {
                let v: Vec<u32> = b.positions().collect();
                assert!(v.windows(2).all(|w| w[0] < w[1]));
                assert!(v.iter().all(|&x| x < 8000));
                assert_eq!(v, b.positions().collect::<Vec<_>>());
                seen += v.len();
            }
        }
        // 1000 frames × 8000 bits × 1% = 80 000 flips expected; sd ≈ sqrt(80 000) ≈ 283.
        assert!((seen as f64 - 80_000.0).abs() < 6.0 * 283.0, "{seen}");
    }

    #[test]
    fn apply_flips_exactly_the_listed_bits() {
        let c = Corruption {
            single_bit: Some(9),
            ber: None,
        };
        let mut frame = [0u8; 4];
        c.apply(&mut frame);
        assert_eq!(frame, [0, 0x40, 0, 0]);
        c.apply(&mut frame);
        assert_eq!(frame, [0; 4]);
    }

    #[test]
    fn deliveries_are_bounded() {
        let mut d = Deliveries::new();
        for i in 0..MAX_COPIES {
            assert!(d.push(Delivery {
                copy: i as u8,
                ..Deliveries::EMPTY_ITEM
            }));
        }
        assert!(!d.push(Deliveries::EMPTY_ITEM));
        assert_eq!(d.len(), MAX_COPIES);
    }
}
