//! Seeded random streams.
//!
//! Every random draw a model makes comes from one [`Stream`]. A link direction owns its own
//! stream, derived from the user's seed and the direction's identity, so adding a link (or a
//! direction, or a flow) never shifts the draws of another one. The generator is
//! xoshiro256++: small state, a few nanoseconds per draw, and a fixed, documented output
//! sequence, which matters because rtemu promises bit-identical runs for the same seed.

use rand::Rng as _;
use rand_xoshiro::rand_core::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

/// The seed used when the user gives none, so that two plain runs agree.
pub const DEFAULT_SEED: u64 = 1;

/// The stream label of one direction of the lab link called `link` (`backwards`: from its
/// second endpoint to its first). Derived from the name, so adding or reordering links in a
/// topology file changes no other link's decisions, and so `rtemu sim --link` can draw from the
/// same streams as the real-time engine. Labels are multiples of 128: a direction's trace
/// models draw from `label + 1 + i`, which stays inside its own range.
pub fn link_label(link: &str, backwards: bool) -> u64 {
    // FNV-1a: stable across runs and Rust versions, unlike the standard library's hasher.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in link.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    (h << 8) | (backwards as u64) << 7
}

/// A seeded random stream: the only source of randomness a model may use.
#[derive(Debug, Clone)]
pub struct Stream(Xoshiro256PlusPlus);

impl Stream {
    /// The stream for one link direction (or any other independent consumer), derived from the
    /// experiment's `seed` and a `label` that names the consumer (for example the link index
    /// times two plus the direction).
    ///
    /// Streams with different labels are independent for practical purposes: the label is mixed
    /// into the seed with SplitMix64 before seeding xoshiro, as its authors recommend.
    pub fn new(seed: u64, label: u64) -> Self {
        let mixed = splitmix64(seed ^ splitmix64(label.wrapping_add(0x5254_454d_5520_5631)));
        Stream(Xoshiro256PlusPlus::seed_from_u64(mixed))
    }

    /// A uniformly distributed 32-bit integer.
    #[inline]
    pub fn next_u32(&mut self) -> u32 {
        (self.0.next_u64() >> 32) as u32
    }

    /// A uniformly distributed 64-bit integer.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// A uniform `f64` in the half-open interval `(0, 1]`, never zero, so that it can be fed to
    /// a logarithm or an inverse CDF without a special case.
    #[inline]
    pub fn open01(&mut self) -> f64 {
        ((self.0.next_u64() >> 11) + 1) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A uniform integer in `0..n` (`n > 0`), without modulo bias (Lemire's method).
    #[inline]
    pub fn below(&mut self, n: u32) -> u32 {
        debug_assert!(n > 0);
        ((self.next_u32() as u64 * n as u64) >> 32) as u32
    }

    /// True with the probability `p`, a threshold from [`Probability`].
    #[inline]
    pub fn chance(&mut self, p: crate::Probability) -> bool {
        p.hit(self.next_u32())
    }

    /// A standard normal variate (ziggurat method).
    #[inline]
    pub fn standard_normal(&mut self) -> f64 {
        use rand::RngExt as _;
        self.0.sample(rand_distr::StandardNormal)
    }
}

/// SplitMix64's finaliser: spreads the bits of a seed so that nearby seeds give unrelated
/// streams.
/// A seeded hash of a flow's 5-tuple: which FQ-CoDel queue a flow lands in depends on the
/// seed, as in Linux (whose hash is perturbed at random), but reproducibly.
pub(crate) fn hash_flow(flow: &crate::FlowKey, seed: u64) -> u64 {
    let addr = |a: std::net::IpAddr| match a {
        std::net::IpAddr::V4(v4) => u128::from(u32::from(v4)),
        std::net::IpAddr::V6(v6) => u128::from(v6),
    };
    let (src, dst) = (addr(flow.src), addr(flow.dst));
    let ports =
        u64::from(flow.src_port) << 24 | u64::from(flow.dst_port) << 8 | u64::from(flow.protocol);
    // Multiply-rotate over the words, one full mix at the end: the queue index needs spread,
    // not cryptographic strength.
    let mut h = splitmix64(seed);
    for w in [
        src as u64,
        (src >> 64) as u64,
        dst as u64,
        (dst >> 64) as u64,
        ports,
    ] {
        h = (h ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
    }
    splitmix64(h)
}

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_labels_differ_per_link_and_way_and_leave_room_for_trace_streams() {
        let ab = link_label("north-east", false);
        let ba = link_label("north-east", true);
        let other = link_label("west-north", false);
        assert_ne!(ab, ba);
        assert_ne!(ab, other);
        for l in [ab, ba, other] {
            assert_eq!(l & 0x7f, 0, "trace streams label + 1 + i stay in range");
        }
        assert_eq!(ab, link_label("north-east", false), "stable");
    }

    /// Flows that differ in one port or one address spread evenly over 1024 queues: 10 240
    /// flows put about 10 in each (Poisson), never 30; and another seed places them otherwise.
    #[test]
    fn flow_hashes_spread_evenly_and_depend_on_the_seed() {
        let flows: Vec<crate::FlowKey> = (0..10_240u32)
            .map(|i| crate::FlowKey {
                src: std::net::Ipv4Addr::from(0x0a00_0000 + i / 64).into(),
                src_port: (i % 64) as u16,
                dst_port: 443,
                protocol: 6,
                ..Default::default()
            })
            .collect();
        let queues = |seed| {
            let mut n = vec![0u32; 1024];
            for f in &flows {
                n[(hash_flow(f, seed) % 1024) as usize] += 1;
            }
            n
        };
        let a = queues(1);
        assert!(*a.iter().max().unwrap() < 30 && a.iter().filter(|n| **n == 0).count() < 5);
        assert_ne!(a, queues(2));
    }

    #[test]
    fn same_seed_and_label_give_the_same_stream() {
        let mut a = Stream::new(7, 3);
        let mut b = Stream::new(7, 3);
        for _ in 0..1000 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
    }

    #[test]
    fn different_labels_give_different_streams() {
        let mut a = Stream::new(7, 0);
        let mut b = Stream::new(7, 1);
        let same = (0..1000).filter(|_| a.next_u64() == b.next_u64()).count();
        assert_eq!(same, 0);
    }

    #[test]
    fn open01_is_never_zero_and_below_respects_bound() {
        let mut s = Stream::new(1, 1);
        for _ in 0..100_000 {
            let u = s.open01();
            assert!(u > 0.0 && u <= 1.0);
            assert!(s.below(10) < 10);
        }
    }
}
