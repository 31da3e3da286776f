//! The built-in traffic generator: constant bit rate, Poisson and on/off streams of UDP
//! frames in virtual time, so the simulator needs no input file.
//!
//! A [`TrafficSpec`] is read from one line (see its doc, or [`TRAFFIC_HELP`]); a
//! [`TrafficGen`] turns it into frames through [`FrameSource`]. Every frame is a valid
//! Ethernet II / IPv4 / UDP datagram from 10.0.0.1:49152 to 10.0.0.2:9 (the discard port),
//! MAC 02:00:00:00:00:01 to 02:00:00:00:00:02, with correct IPv4 header and UDP checksums.
//! Its payload starts with the frame's sequence number (0, 1, 2, …) as a big-endian `u64`
//! when the payload has room for it (frames of 50 bytes or more) and is zero after it; the
//! IPv4 identification field carries the sequence number's low 16 bits in every frame.
//!
//! Virtual time starts at 0 ns ([`EPOCH_NS`]): a run of duration `d` generates the arrivals
//! in `[0, d)`. The same spec and seed always give the same frames at the same times.

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use rtemu_model::units::{parse_duration_ns, Rate, Time};
use rtemu_model::wire::{internet_checksum, sum_words, udp4_checksum_of_sum, Udp4};
use rtemu_model::Stream;

use crate::source::{Frame, FrameSource, Progress, ProgressUnit, SourceError, LINKTYPE_ETHERNET};

/// The virtual time of the start of generation, in nanoseconds.
pub const EPOCH_NS: u64 = 0;

/// The smallest frame: Ethernet (14), IPv4 (20) and UDP (8) headers with an empty payload.
pub const MIN_FRAME: u16 = 42;

/// The label of the generator's random stream (see [`Stream::new`]): ASCII "traffic", far
/// from the small labels links use, so adding traffic never shifts a link's draws.
pub const STREAM_LABEL: u64 = 0x0074_7261_6666_6963;

/// The grammar of a traffic spec, written for `--help`.
pub const TRAFFIC_HELP: &str = "\
Traffic spec: PATTERN RATE SIZES DURATION [on TIME off TIME [exp]]
  PATTERN   cbr      evenly spaced frames
            poisson  exponential inter-arrival times (a Poisson process, seeded)
            onoff    evenly spaced frames during on periods, none during off periods,
                     the spacing carried across periods, so the average load is
                     RATE × on/(on + off) however short the periods;
                     needs `on TIME off TIME`; with `exp` the periods are exponential
                     with those means, otherwise fixed
  RATE      packets per second (10000pps, 1.5kpps, 1mpps; up to 1000000000pps) or a
            bit rate as in tc (10mbit, 1gbit; 125kbps is bytes per second), counting
            whole frames without FCS; for onoff it is the rate during on periods
  SIZES     frame sizes in bytes (1000B or 1000b), Ethernet header included, FCS
            excluded, 42B to 65535B: one (1000B) or a list used in turn (64B,576B,1500B),
            each optionally repeated (64B:7,576B:4,1500B:1 sends 7, then 4, then 1)
  DURATION  virtual time to generate (10s, 500ms); time starts at 0
Examples: cbr 10000pps 1000B 10s | poisson 10mbit 64B,1500B 30s |
          onoff 10000pps 1000B 10s on 100ms off 400ms exp";

/// How fast frames are sent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TrafficRate {
    /// Frames per second.
    Packets(f64),
    /// Bits per second of whole frames (without FCS).
    Bits(u64),
}

/// When frames are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    /// Evenly spaced: at a packet rate every `1/rate`; at a bit rate each frame follows the
    /// previous one after its own transmission time, so the line runs exactly at the rate.
    Cbr,
    /// A Poisson process: exponential gaps with mean `1/rate` (at a bit rate, the rate divided
    /// by the mean frame size).
    Poisson,
    /// Constant-rate bursts during on periods, silence during off periods; the run starts
    /// with an on period at time 0. The frames are spaced on a clock that runs only while
    /// on: a frame not due by the end of an on period is sent in a later one, so the average
    /// load is the rate × on/(on + off) whatever the periods' lengths.
    OnOff {
        /// The length (or mean length) of an on period in ns.
        on_ns: u64,
        /// The length (or mean length) of an off period in ns.
        off_ns: u64,
        /// Whether period lengths are exponential with those means rather than fixed.
        exponential: bool,
    },
}

/// A parsed traffic spec: `PATTERN RATE SIZES DURATION [on TIME off TIME [exp]]`.
///
/// ```text
/// cbr 10000pps 1000B 10s
/// poisson 10mbit 64B,576B,1500B 30s
/// onoff 10000pps 64B:7,576B:4,1500B:1 10s on 100ms off 400ms exp
/// ```
///
/// The full grammar is [`TRAFFIC_HELP`].
#[derive(Debug, Clone, PartialEq)]
pub struct TrafficSpec {
    /// When frames are sent.
    pub pattern: Pattern,
    /// How fast.
    pub rate: TrafficRate,
    /// Frame sizes in bytes with their repeat counts, used in turn.
    pub sizes: Vec<(u16, u32)>,
    /// How much virtual time to generate, in ns.
    pub duration_ns: u64,
}

/// Why a traffic spec was rejected; each names the word at fault and what is valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TrafficSpecError {
    /// The spec ends before a required word.
    #[error("missing {what} (e.g. {example}); expected PATTERN RATE SIZES DURATION, e.g. `cbr 10000pps 1000B 10s`")]
    Missing {
        /// The word expected.
        what: &'static str,
        /// An example of it.
        example: &'static str,
    },
    /// The first word is not a pattern.
    #[error(
        "unknown pattern {}: expected cbr, poisson or onoff",
        rtemu_sys::terminal::quoted(word)
    )]
    Pattern {
        /// The word.
        word: String,
    },
    /// A word is not a valid value for its place.
    #[error("{what} {}: {valid}", rtemu_sys::terminal::quoted(word))]
    Invalid {
        /// What the word should be.
        what: &'static str,
        /// The word.
        word: String,
        /// What is valid.
        valid: &'static str,
    },
    /// A word that has no place in the spec.
    #[error("unexpected {}: {valid}", rtemu_sys::terminal::quoted(word))]
    Unexpected {
        /// The word.
        word: String,
        /// What may come here.
        valid: &'static str,
    },
}

const RATE_VALID: &str = "expected a packet rate from 1pps to 1000000000pps (10000pps, 1.5kpps, 1mpps) or a bit rate from 1bit to 1000tbit (10mbit, 1gbit)";
const SIZE_VALID: &str = "expected frame sizes from 42B to 65535B (Ethernet + IPv4 + UDP headers take 42), each optionally repeated 1 to 1000 times: 1000B or 64B:7,576B:4,1500B:1 (at most 64 sizes)";
const TIME_VALID: &str =
    "expected a time above 0 with its unit (ns, us, ms, s or m), e.g. 10s, 1.5ms, 250us";

fn invalid(what: &'static str, word: &str, valid: &'static str) -> TrafficSpecError {
    TrafficSpecError::Invalid {
        what,
        word: word.to_string(),
        valid,
    }
}

fn parse_rate(word: &str) -> Result<TrafficRate, TrafficSpecError> {
    let lower = word.to_ascii_lowercase();
    if let Some(number) = lower.strip_suffix("pps") {
        let (number, scale) = match number
            .strip_suffix('k')
            .or_else(|| number.strip_suffix('m'))
        {
            Some(n) => (n, if number.ends_with('k') { 1e3 } else { 1e6 }),
            None => (number, 1.0),
        };
        let pps = number
            .parse::<f64>()
            .map(|n| n * scale)
            .ok()
            .filter(|p| (1.0..=1e9).contains(p));
        return pps
            .map(TrafficRate::Packets)
            .ok_or_else(|| invalid("rate", word, RATE_VALID));
    }
    // A bare number would be bits per second to tc; here a unit must say which is meant.
    if !word.bytes().any(|b| b.is_ascii_alphabetic()) {
        return Err(invalid("rate", word, RATE_VALID));
    }
    Rate::parse(word)
        .map(|r| TrafficRate::Bits(r.0))
        .map_err(|_| invalid("rate", word, RATE_VALID))
}

fn parse_sizes(word: &str) -> Result<Vec<(u16, u32)>, TrafficSpecError> {
    let bad = || invalid("frame sizes", word, SIZE_VALID);
    let mut sizes = Vec::new();
    for item in word.split(',') {
        let (size, weight) = match item.split_once(':') {
            Some((s, w)) => (
                s,
                w.parse::<u32>()
                    .ok()
                    .filter(|w| (1..=1000).contains(w))
                    .ok_or_else(bad)?,
            ),
            None => (item, 1),
        };
        let size = size
            .strip_suffix(['B', 'b'])
            .and_then(|n| n.parse::<u16>().ok())
            .filter(|&n| n >= MIN_FRAME);
        sizes.push((size.ok_or_else(bad)?, weight));
    }
    if sizes.len() > 64 {
        return Err(bad());
    }
    Ok(sizes)
}

fn parse_time(what: &'static str, word: &str) -> Result<u64, TrafficSpecError> {
    // tc reads a bare number as microseconds; a traffic spec insists on a unit. At most
    // `Time`'s range, so that time arithmetic has room.
    parse_duration_ns(word, None)
        .ok()
        .filter(|&t| t > 0 && t <= u64::MAX / 2)
        .ok_or_else(|| invalid(what, word, TIME_VALID))
}

impl FromStr for TrafficSpec {
    type Err = TrafficSpecError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut words = s.split_whitespace();
        let mut next = |what, example| {
            words
                .next()
                .ok_or(TrafficSpecError::Missing { what, example })
        };
        let pattern = next("a pattern", "cbr, poisson or onoff")?;
        let rate = parse_rate(next("a rate", "10000pps or 10mbit")?)?;
        let sizes = parse_sizes(next("frame sizes", "1000B or 64B,1500B")?)?;
        let duration_ns = parse_time("duration", next("a duration", "10s")?)?;
        let pattern = match pattern {
            "cbr" => Pattern::Cbr,
            "poisson" => Pattern::Poisson,
            "onoff" => {
                let mut period = |name: &'static str, example| -> Result<u64, TrafficSpecError> {
                    let word = next(name, example)?;
                    if word != name {
                        return Err(TrafficSpecError::Unexpected {
                            word: word.to_string(),
                            valid: "onoff needs `on TIME off TIME` after the duration, e.g. `on 100ms off 400ms`",
                        });
                    }
                    parse_time(name, next(name, example)?)
                };
                let on_ns = period("on", "on 100ms")?;
                let off_ns = period("off", "off 400ms")?;
                let exponential = match next("", "").ok() {
                    None => false,
                    Some("exp") => true,
                    Some(word) => {
                        return Err(TrafficSpecError::Unexpected {
                            word: word.to_string(),
                            valid: "only `exp` may follow the off period",
                        })
                    }
                };
                Pattern::OnOff {
                    on_ns,
                    off_ns,
                    exponential,
                }
            }
            _ => {
                return Err(TrafficSpecError::Pattern {
                    word: pattern.to_string(),
                })
            }
        };
        if let Some(word) = words.next() {
            return Err(TrafficSpecError::Unexpected {
                word: word.to_string(),
                valid: "the spec ends after the duration (onoff: after `on TIME off TIME [exp]`)",
            });
        }
        Ok(TrafficSpec {
            pattern,
            rate,
            sizes,
            duration_ns,
        })
    }
}

impl fmt::Display for TrafficSpec {
    /// The spec in the form [`TrafficSpec::from_str`] reads.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pattern = match self.pattern {
            Pattern::Cbr => "cbr",
            Pattern::Poisson => "poisson",
            Pattern::OnOff { .. } => "onoff",
        };
        match self.rate {
            TrafficRate::Packets(pps) => write!(f, "{pattern} {pps}pps ")?,
            TrafficRate::Bits(bits) => write!(f, "{pattern} {} ", Rate(bits))?,
        }
        for (i, (size, weight)) in self.sizes.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            match weight {
                1 => write!(f, "{sep}{size}B")?,
                w => write!(f, "{sep}{size}B:{w}")?,
            }
        }
        write!(f, " {}", Time(self.duration_ns))?;
        if let Pattern::OnOff {
            on_ns,
            off_ns,
            exponential,
        } = self.pattern
        {
            write!(
                f,
                " on {} off {}{}",
                Time(on_ns),
                Time(off_ns),
                if exponential { " exp" } else { "" }
            )?;
        }
        Ok(())
    }
}

/// Byte offsets of the frame's fields.
/// Every generated frame's source and destination address.
const SRC: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const DST: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

mod field {
    pub const IP: usize = 14;
    pub const IP_LEN: usize = IP + 2;
    pub const IP_ID: usize = IP + 4;
    pub const IP_CHECKSUM: usize = IP + 10;
    pub const UDP: usize = IP + 20;
    pub const UDP_LEN: usize = UDP + 4;
    pub const UDP_CHECKSUM: usize = UDP + 6;
    pub const PAYLOAD: usize = UDP + 8;
    /// The end of the sequence number, the last byte that is ever non-zero.
    pub const SEQ_END: usize = PAYLOAD + 8;
}

/// The generator: a [`FrameSource`] of the frames a [`TrafficSpec`] describes.
#[derive(Debug, Clone)]
pub struct TrafficGen {
    pattern: Pattern,
    /// Rate units (packets or bits) per second.
    units_per_s: f64,
    per_bit: bool,
    /// The size of each frame in one turn of the list, weights expanded.
    cycle: Vec<u16>,
    cursor: usize,
    duration_ns: u64,
    rng: Stream,
    seq: u64,
    /// Rate units sent since the start (CBR and on/off).
    units: u64,
    /// Where the current run of evenly spaced frames started (on/off: the current on period).
    start_ns: u64,
    /// The end of the current on period.
    on_end_ns: u64,
    /// On/off: the on time of the periods before the current one. Frames are spaced on a
    /// clock that runs only while on, so that the load offered is the rate × on/(on + off)
    /// whatever the periods' lengths, even when a period is shorter than the frame gap.
    on_before_ns: u64,
    /// The next Poisson arrival, in ns.
    poisson_ns: f64,
    /// The time of the last frame, for progress.
    now_ns: u64,
    /// One buffer for every frame; only the headers and the sequence number ever change.
    buf: Vec<u8>,
    done: bool,
}

impl TrafficGen {
    /// A generator of `spec`'s frames; `seed` drives the Poisson arrivals and exponential
    /// on/off periods (through the stream labelled [`STREAM_LABEL`]).
    pub fn new(spec: &TrafficSpec, seed: u64) -> Self {
        let cycle: Vec<u16> = spec
            .sizes
            .iter()
            .flat_map(|&(size, weight)| std::iter::repeat_n(size, weight as usize))
            .collect();
        let (units_per_s, per_bit) = match spec.rate {
            TrafficRate::Packets(pps) => (pps, false),
            TrafficRate::Bits(bits) => (bits as f64, true),
        };
        let mut gen = TrafficGen {
            pattern: spec.pattern,
            units_per_s,
            per_bit,
            cycle,
            cursor: 0,
            duration_ns: spec.duration_ns,
            rng: Stream::new(seed, STREAM_LABEL),
            seq: 0,
            units: 0,
            start_ns: EPOCH_NS,
            on_end_ns: EPOCH_NS,
            on_before_ns: 0,
            poisson_ns: EPOCH_NS as f64,
            now_ns: EPOCH_NS,
            buf: vec![0; usize::from(u16::MAX)],
            done: false,
        };
        gen.write_constant_headers();
        match gen.pattern {
            Pattern::Poisson => gen.poisson_ns += gen.poisson_gap_ns(),
            Pattern::OnOff {
                on_ns, exponential, ..
            } => gen.on_end_ns = EPOCH_NS + gen.period(on_ns, exponential),
            Pattern::Cbr => {}
        }
        gen
    }

    /// The mean Poisson gap in ns: the inverse of the packet rate.
    fn poisson_mean_ns(&self) -> f64 {
        let pps = if self.per_bit {
            let mean_bits = self.cycle.iter().map(|&s| f64::from(s) * 8.0).sum::<f64>()
                / self.cycle.len() as f64;
            self.units_per_s / mean_bits
        } else {
            self.units_per_s
        };
        1e9 / pps
    }

    fn poisson_gap_ns(&mut self) -> f64 {
        -self.rng.open01().ln() * self.poisson_mean_ns()
    }

    /// An on or off period: `mean_ns` itself, or an exponential draw with that mean (at
    /// least 1 ns, so time always advances).
    fn period(&mut self, mean_ns: u64, exponential: bool) -> u64 {
        if !exponential {
            return mean_ns;
        }
        ((-self.rng.open01().ln() * mean_ns as f64).round() as u64).max(1)
    }

    /// The offset from `start_ns` after `units` rate units, rounded to the nearest ns; exact
    /// in integers when the rate is whole, so spacing never drifts.
    fn offset_ns(&self, units: u64) -> u64 {
        let rate = self.units_per_s;
        if rate.fract() == 0.0 {
            let rate = rate as u128;
            let scaled = u128::from(units) * 1_000_000_000;
            u64::try_from((scaled + rate / 2) / rate).unwrap_or(u64::MAX)
        } else {
            (units as f64 * 1e9 / rate).round() as u64
        }
    }

    /// The arrival time of the next frame, or `None` past the duration.
    fn next_arrival(&mut self) -> Option<u64> {
        let ts = match self.pattern {
            Pattern::Cbr => self.start_ns.saturating_add(self.offset_ns(self.units)),
            Pattern::Poisson => {
                let ts = self.poisson_ns as u64;
                if ts < self.duration_ns {
                    self.poisson_ns += self.poisson_gap_ns();
                }
                ts
            }
            Pattern::OnOff {
                on_ns,
                off_ns,
                exponential,
            } => {
                // The next frame is due once the on periods have added up to its offset.
                let due = self.offset_ns(self.units);
                let end = EPOCH_NS.saturating_add(self.duration_ns);
                loop {
                    let into = due.saturating_sub(self.on_before_ns);
                    let len = self.on_end_ns - self.start_ns;
                    if into < len || self.start_ns >= end {
                        break self.start_ns.saturating_add(into);
                    }
                    // Fixed periods are skipped by arithmetic, so a frame due many periods
                    // ahead costs one step; exponential ones are drawn one by one (each at
                    // least 1 ns, so at most the run's duration of them).
                    if exponential {
                        self.on_before_ns += len;
                        self.start_ns = self.on_end_ns.saturating_add(self.period(off_ns, true));
                        self.on_end_ns = self.start_ns.saturating_add(self.period(on_ns, true));
                    } else {
                        let skip = into / on_ns;
                        self.on_before_ns += skip * on_ns;
                        self.start_ns = self
                            .start_ns
                            .saturating_add(skip.saturating_mul(on_ns.saturating_add(off_ns)));
                        self.on_end_ns = self.start_ns.saturating_add(on_ns);
                    }
                }
            }
        };
        (ts < EPOCH_NS.saturating_add(self.duration_ns)).then_some(ts)
    }

    /// The fields every frame shares.
    fn write_constant_headers(&mut self) {
        let headers = Udp4 {
            dst_mac: [0x02, 0, 0, 0, 0, 0x02],
            src_mac: [0x02, 0, 0, 0, 0, 0x01],
            src: SRC,
            dst: DST,
            src_port: 49152,
            dst_port: 9,
            ttl: 64,
            dont_fragment: true,
        };
        headers
            .write(&mut self.buf)
            .expect("the buffer holds the largest frame, headers included");
    }

    /// Writes the fields that differ between frames of `size` bytes with sequence number
    /// `seq`. The payload after the sequence number is all zeros, so the UDP checksum only
    /// needs the bytes up to [`field::SEQ_END`].
    fn write_frame(&mut self, size: u16, seq: u64) {
        let size = usize::from(size);
        let b = &mut self.buf;
        b[field::IP_LEN..field::IP_LEN + 2]
            .copy_from_slice(&((size - field::IP) as u16).to_be_bytes());
        b[field::IP_ID..field::IP_ID + 2].copy_from_slice(&(seq as u16).to_be_bytes());
        b[field::IP_CHECKSUM..field::IP_CHECKSUM + 2].fill(0);
        let ip_sum = internet_checksum(&b[field::IP..field::UDP]);
        b[field::IP_CHECKSUM..field::IP_CHECKSUM + 2].copy_from_slice(&ip_sum.to_be_bytes());

        let udp_len = size - field::UDP;
        b[field::UDP_LEN..field::UDP_LEN + 2].copy_from_slice(&(udp_len as u16).to_be_bytes());
        b[field::PAYLOAD..field::SEQ_END].fill(0);
        if size >= field::SEQ_END {
            b[field::PAYLOAD..field::SEQ_END].copy_from_slice(&seq.to_be_bytes());
        }
        b[field::UDP_CHECKSUM..field::UDP_CHECKSUM + 2].fill(0);
        let segment = sum_words(&b[field::UDP..field::SEQ_END]);
        let udp_sum = udp4_checksum_of_sum(SRC, DST, udp_len, segment);
        b[field::UDP_CHECKSUM..field::UDP_CHECKSUM + 2].copy_from_slice(&udp_sum.to_be_bytes());
    }
}

impl FrameSource for TrafficGen {
    fn link_type(&self) -> u32 {
        LINKTYPE_ETHERNET
    }

    fn next_frame(&mut self) -> Result<Option<Frame<'_>>, SourceError> {
        if self.done {
            return Ok(None);
        }
        let Some(ts_ns) = self.next_arrival() else {
            self.done = true;
            self.now_ns = EPOCH_NS.saturating_add(self.duration_ns);
            return Ok(None);
        };
        let size = self.cycle[self.cursor];
        self.cursor = (self.cursor + 1) % self.cycle.len();
        self.units += if self.per_bit { u64::from(size) * 8 } else { 1 };
        let seq = self.seq;
        self.seq += 1;
        self.now_ns = ts_ns;
        self.write_frame(size, seq);
        Ok(Some(Frame {
            ts_ns,
            data: &self.buf[..usize::from(size)],
            orig_len: u32::from(size),
        }))
    }

    fn progress(&self) -> Progress {
        Progress {
            done: self.now_ns - EPOCH_NS,
            total: Some(self.duration_ns),
            unit: ProgressUnit::VirtualNanos,
        }
    }
}
