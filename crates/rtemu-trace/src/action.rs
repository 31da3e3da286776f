//! Per-packet actions, the 32-bit RplTrc word that encodes one, and the assembly of a packet's
//! whole fate (original plus cascade of copies) from consecutive actions.
//!
//! # The word
//!
//! ```text
//!  31 30 29                                                    0
//! +-----+-------------------------------------------------------+
//! | act |                 delay (30 bits, in the time unit)     |
//! +-----+-------------------------------------------------------+
//! act: 00 drop, 01 pass (normal), 10 duplicate, 11 reserved
//! ```
//!
//! Words are stored big-endian (network order). A `dup` word gives the delay of the original;
//! the next word gives the fate of the copy, which may itself be a `dup` (a triplicate, and so
//! on) or a `drop` (the copy is lost).

use std::fmt;

/// The largest value the 30-bit delay field holds.
pub const MAX_DELAY_UNITS: u32 = (1 << 30) - 1;

/// The unit of the 30-bit delay field.
///
/// Raw `.rpl` files always use microseconds, as the original RplTrc tool does; the
/// self-describing form names its unit in the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize)]
pub enum TimeUnit {
    /// Nanoseconds: resolution 1 ns, largest delay about 1.07 s.
    Ns,
    /// Microseconds: resolution 1 µs, largest delay about 17.9 min. The RplTrc unit.
    #[default]
    Us,
    /// Milliseconds: resolution 1 ms, largest delay about 12.4 days.
    Ms,
}

impl TimeUnit {
    /// Nanoseconds in one unit.
    #[inline]
    pub const fn ns(self) -> u64 {
        match self {
            TimeUnit::Ns => 1,
            TimeUnit::Us => 1_000,
            TimeUnit::Ms => 1_000_000,
        }
    }

    /// The code stored in the self-describing header.
    pub const fn code(self) -> u8 {
        match self {
            TimeUnit::Ns => 0,
            TimeUnit::Us => 1,
            TimeUnit::Ms => 2,
        }
    }

    /// The unit for a header code, if it is one.
    pub const fn from_code(code: u8) -> Option<TimeUnit> {
        match code {
            0 => Some(TimeUnit::Ns),
            1 => Some(TimeUnit::Us),
            2 => Some(TimeUnit::Ms),
            _ => None,
        }
    }

    /// The unit's symbol as the text form writes it.
    pub const fn symbol(self) -> &'static str {
        match self {
            TimeUnit::Ns => "ns",
            TimeUnit::Us => "us",
            TimeUnit::Ms => "ms",
        }
    }
}

/// A time unit that is none of `ns`, `us` (or `µs`) and `ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("valid units are ns, us, ms")]
pub struct UnknownUnit;

impl std::str::FromStr for TimeUnit {
    type Err = UnknownUnit;

    fn from_str(s: &str) -> Result<TimeUnit, UnknownUnit> {
        match s {
            "ns" => Ok(TimeUnit::Ns),
            "us" | "µs" => Ok(TimeUnit::Us),
            "ms" => Ok(TimeUnit::Ms),
            _ => Err(UnknownUnit),
        }
    }
}

impl fmt::Display for TimeUnit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.symbol())
    }
}

/// What a trace says about one packet (or one copy of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// The packet is lost.
    Drop,
    /// The packet is delivered after `delay_ns`.
    Pass {
        /// Added delay in nanoseconds.
        delay_ns: u64,
    },
    /// The packet is delivered after `delay_ns` and a copy follows: the next action is the
    /// copy's fate.
    Dup {
        /// Added delay of this instance in nanoseconds.
        delay_ns: u64,
    },
}

impl Action {
    /// The action's delay, or `None` for a drop.
    #[inline]
    pub const fn delay_ns(self) -> Option<u64> {
        match self {
            Action::Drop => None,
            Action::Pass { delay_ns } | Action::Dup { delay_ns } => Some(delay_ns),
        }
    }

    /// The action with its delay rounded to the nearest multiple of `resolution_ns`.
    pub fn rounded(self, resolution_ns: u64) -> Action {
        let round = |d: u64| (d + resolution_ns / 2) / resolution_ns * resolution_ns;
        match self {
            Action::Drop => Action::Drop,
            Action::Pass { delay_ns } => Action::Pass {
                delay_ns: round(delay_ns),
            },
            Action::Dup { delay_ns } => Action::Dup {
                delay_ns: round(delay_ns),
            },
        }
    }
}

/// Why an action cannot be written as a 32-bit word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// The delay exceeds the 30-bit field.
    #[error("delay {delay_ns} ns exceeds the largest delay of a word in {unit} ({max_ns} ns); use a coarser time unit")]
    DelayOverflow {
        /// The delay that does not fit.
        delay_ns: u64,
        /// The unit of the field.
        unit: TimeUnit,
        /// The largest delay the field holds, in ns.
        max_ns: u64,
    },
    /// The delay is not a whole number of units, so the word would lose precision.
    #[error("delay {delay_ns} ns is not a whole number of {unit}; use a finer time unit (the self-describing form can hold ns)")]
    NotWholeUnit {
        /// The delay that would be rounded.
        delay_ns: u64,
        /// The unit of the field.
        unit: TimeUnit,
    },
}

/// The reserved action code `11` was found in a word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReservedAction;

const ACT_SHIFT: u32 = 30;
const ACT_DROP: u32 = 0b00;
const ACT_PASS: u32 = 0b01;
const ACT_DUP: u32 = 0b10;

/// Decodes one word (already in host order).
#[inline]
pub fn decode_word(word: u32, unit: TimeUnit) -> Result<Action, ReservedAction> {
    let delay_ns = u64::from(word & MAX_DELAY_UNITS) * unit.ns();
    match word >> ACT_SHIFT {
        ACT_DROP => Ok(Action::Drop),
        ACT_PASS => Ok(Action::Pass { delay_ns }),
        ACT_DUP => Ok(Action::Dup { delay_ns }),
        _ => Err(ReservedAction),
    }
}

/// Encodes one action as a word (host order), exactly: a delay that is not a whole number of
/// `unit` or does not fit the 30-bit field is an error, never rounded. A drop's delay field is
/// written as zero.
pub fn encode_word(action: Action, unit: TimeUnit) -> Result<u32, EncodeError> {
    let (code, delay_ns) = match action {
        Action::Drop => return Ok(ACT_DROP << ACT_SHIFT),
        Action::Pass { delay_ns } => (ACT_PASS, delay_ns),
        Action::Dup { delay_ns } => (ACT_DUP, delay_ns),
    };
    if delay_ns % unit.ns() != 0 {
        return Err(EncodeError::NotWholeUnit { delay_ns, unit });
    }
    let units = delay_ns / unit.ns();
    if units > u64::from(MAX_DELAY_UNITS) {
        return Err(EncodeError::DelayOverflow {
            delay_ns,
            unit,
            max_ns: u64::from(MAX_DELAY_UNITS) * unit.ns(),
        });
    }
    Ok((code << ACT_SHIFT) | units as u32)
}

/// The most deliveries one packet may have (the original and its copies); a longer cascade of
/// `dup` records is cut here and its excess counted, so a corrupt trace cannot make the
/// emulator send unbounded copies of one packet.
pub const MAX_DELIVERIES: usize = 16;

/// The most records one packet's fate may take (its own and its copies'). A longer cascade of
/// `dup` records is cut here and marked ([`Fate::cut`]): whatever the trace (every record a
/// `dup`, looping), one packet never holds the packet path for more than this many records.
pub const MAX_FATE_RECORDS: u32 = 4 * MAX_DELIVERIES as u32;

/// A packet's whole fate: the delays of each delivered instance, in trace order (original
/// first). Empty means the packet is dropped. Fixed capacity, `Copy`, no allocation.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Fate {
    delays_ns: [u64; MAX_DELIVERIES],
    len: u8,
    /// Records consumed for this fate (the original's plus one per copy).
    records: u32,
    /// Whether the cascade was cut at [`MAX_FATE_RECORDS`] while it still went on.
    cut: bool,
}

impl Fate {
    /// The fate of a packet that is dropped outright.
    pub const DROPPED: Fate = Fate {
        delays_ns: [0; MAX_DELIVERIES],
        len: 0,
        records: 1,
        cut: false,
    };

    /// A single delivery after `delay_ns`.
    pub const fn pass(delay_ns: u64) -> Fate {
        let mut delays_ns = [0; MAX_DELIVERIES];
        delays_ns[0] = delay_ns;
        Fate {
            delays_ns,
            len: 1,
            records: 1,
            cut: false,
        }
    }

    /// The delays of the delivered instances, original first (empty when dropped).
    #[inline]
    pub fn deliveries(&self) -> &[u64] {
        &self.delays_ns[..usize::from(self.len)]
    }

    /// True when no instance of the packet is delivered.
    #[inline]
    pub fn is_dropped(&self) -> bool {
        self.len == 0
    }

    /// How many trace records made up this fate.
    #[inline]
    pub fn records(&self) -> u32 {
        self.records
    }

    /// True when the fate's cascade of `dup` records went on past [`MAX_FATE_RECORDS`] and was
    /// cut there: the next record read starts the next packet's fate.
    #[inline]
    pub fn cut(&self) -> bool {
        self.cut
    }
}

impl fmt::Debug for Fate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fate")
            .field("deliveries", &self.deliveries())
            .field("records", &self.records)
            .field("cut", &self.cut)
            .finish()
    }
}

/// Assembles a [`Fate`] from consecutive actions: the first action is the original's; while the
/// last one read is a `dup`, the next one is a copy's.
///
/// `next` supplies actions; when it returns `None` in the middle of a cascade, the pending
/// copy is taken as not existing (a `dup` as the very last record delivers only its own
/// instance). Returns `None` only when `next` yields nothing for the original. Copies beyond
/// [`MAX_DELIVERIES`] are read (so the trace stays aligned) but not delivered; a cascade still
/// going after [`MAX_FATE_RECORDS`] records is cut there ([`Fate::cut`]), so this calls `next`
/// at most that many times.
pub fn assemble_fate(mut next: impl FnMut() -> Option<Action>) -> Option<Fate> {
    let mut fate = Fate {
        delays_ns: [0; MAX_DELIVERIES],
        len: 0,
        records: 0,
        cut: false,
    };
    let mut action = next()?;
    loop {
        fate.records += 1;
        match action {
            Action::Drop => return Some(fate),
            Action::Pass { delay_ns } => {
                fate.push(delay_ns);
                return Some(fate);
            }
            Action::Dup { delay_ns } => {
                fate.push(delay_ns);
                if fate.records == MAX_FATE_RECORDS {
                    fate.cut = true;
                    return Some(fate);
                }
                match next() {
                    Some(a) => action = a,
                    None => return Some(fate),
                }
            }
        }
    }
}

impl Fate {
    #[inline]
    fn push(&mut self, delay_ns: u64) {
        if usize::from(self.len) < MAX_DELIVERIES {
            self.delays_ns[usize::from(self.len)] = delay_ns;
            self.len += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn units_read_as_their_symbols() {
        for unit in [TimeUnit::Ns, TimeUnit::Us, TimeUnit::Ms] {
            assert_eq!(unit.symbol().parse(), Ok(unit));
        }
        assert_eq!("µs".parse(), Ok(TimeUnit::Us));
        assert_eq!("s".parse::<TimeUnit>(), Err(UnknownUnit));
    }

    #[test]
    fn rounding_goes_to_the_nearest_multiple_and_keeps_the_kind() {
        assert_eq!(
            Action::Pass { delay_ns: 1_499 }.rounded(1_000),
            Action::Pass { delay_ns: 1_000 }
        );
        assert_eq!(
            Action::Dup { delay_ns: 1_500 }.rounded(1_000),
            Action::Dup { delay_ns: 2_000 }
        );
        assert_eq!(Action::Drop.rounded(1_000), Action::Drop);
        assert_eq!(
            Action::Pass { delay_ns: 7 }.rounded(1),
            Action::Pass { delay_ns: 7 }
        );
    }

    #[test]
    fn words_decode_as_documented() {
        assert_eq!(decode_word(0x0000_0000, TimeUnit::Us), Ok(Action::Drop));
        assert_eq!(
            decode_word(0x4000_04d2, TimeUnit::Us),
            Ok(Action::Pass {
                delay_ns: 1_234_000
            })
        );
        assert_eq!(
            decode_word(0x8000_0064, TimeUnit::Ns),
            Ok(Action::Dup { delay_ns: 100 })
        );
        assert_eq!(decode_word(0xc000_0000, TimeUnit::Us), Err(ReservedAction));
        // A drop word may carry a delay field; it is ignored.
        assert_eq!(decode_word(0x0000_0777, TimeUnit::Us), Ok(Action::Drop));
    }

    #[test]
    fn encoding_refuses_to_lose_precision() {
        assert_eq!(
            encode_word(Action::Pass { delay_ns: 1_500 }, TimeUnit::Us),
            Err(EncodeError::NotWholeUnit {
                delay_ns: 1_500,
                unit: TimeUnit::Us
            })
        );
        let max = u64::from(MAX_DELAY_UNITS) * 1_000;
        assert_eq!(
            encode_word(Action::Dup { delay_ns: max }, TimeUnit::Us),
            Ok(0xbfff_ffff)
        );
        assert!(matches!(
            encode_word(
                Action::Dup {
                    delay_ns: max + 1_000
                },
                TimeUnit::Us
            ),
            Err(EncodeError::DelayOverflow { .. })
        ));
    }

    #[test]
    fn fates_follow_cascades() {
        let actions = [
            Action::Dup { delay_ns: 5 },
            Action::Dup { delay_ns: 6 },
            Action::Pass { delay_ns: 7 },
            Action::Drop,
            Action::Dup { delay_ns: 1 },
            Action::Drop,
            Action::Dup { delay_ns: 9 },
        ];
        let mut it = actions.into_iter();
        let mut fates = Vec::new();
        while let Some(f) = assemble_fate(|| it.next()) {
            fates.push((f.deliveries().to_vec(), f.records()));
        }
        assert_eq!(
            fates,
            vec![(vec![5, 6, 7], 3), (vec![], 1), (vec![1], 2), (vec![9], 1)]
        );
    }

    #[test]
    fn over_long_cascades_stay_aligned_but_are_capped() {
        let mut actions = vec![Action::Dup { delay_ns: 1 }; 20];
        actions.push(Action::Pass { delay_ns: 2 });
        actions.push(Action::Drop);
        let mut it = actions.into_iter();
        let first = assemble_fate(|| it.next()).unwrap();
        assert_eq!(first.deliveries().len(), MAX_DELIVERIES);
        assert_eq!(first.records(), 21);
        assert!(!first.cut());
        assert!(assemble_fate(|| it.next()).unwrap().is_dropped());
    }

    #[test]
    fn an_endless_cascade_is_cut_at_the_record_bound() {
        // A looping trace of nothing but `dup` records never ends a packet by itself.
        let mut calls = 0u32;
        let fate = assemble_fate(|| {
            calls += 1;
            Some(Action::Dup { delay_ns: 3 })
        })
        .unwrap();
        assert_eq!(calls, MAX_FATE_RECORDS);
        assert_eq!(fate.records(), MAX_FATE_RECORDS);
        assert!(fate.cut());
        assert_eq!(fate.deliveries(), &[3; MAX_DELIVERIES]);
        // One record short of the bound, a cascade that ends is not cut.
        let mut actions = vec![Action::Dup { delay_ns: 1 }; MAX_FATE_RECORDS as usize - 1];
        actions.push(Action::Pass { delay_ns: 2 });
        let mut it = actions.into_iter();
        let fate = assemble_fate(|| it.next()).unwrap();
        assert_eq!(fate.records(), MAX_FATE_RECORDS);
        assert!(!fate.cut());
    }

    fn unit() -> impl Strategy<Value = TimeUnit> {
        prop_oneof![Just(TimeUnit::Ns), Just(TimeUnit::Us), Just(TimeUnit::Ms)]
    }

    proptest! {
        #[test]
        fn word_round_trips(word in any::<u32>(), unit in unit()) {
            match decode_word(word, unit) {
                Err(ReservedAction) => prop_assert_eq!(word >> 30, 3),
                Ok(Action::Drop) => prop_assert_eq!(encode_word(Action::Drop, unit), Ok(0)),
                Ok(a) => prop_assert_eq!(encode_word(a, unit), Ok(word)),
            }
        }
    }
}
