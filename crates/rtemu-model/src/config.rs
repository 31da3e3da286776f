//! A link direction's whole configuration, in one structured, serde-friendly type.
//!
//! The netem-syntax parser ([`crate::netem`]) produces a [`LinkConfig`], and its `Display`
//! writes one back in netem syntax, so a configuration can be pasted from `tc`, stored as
//! TOML/JSON, and printed again. Field names in TOML/JSON are the netem keywords.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::aqm::codel::CodelConfig;
use crate::aqm::dualpi2::DualPi2Config;
use crate::aqm::fq_codel::FqCodelConfig;
use crate::aqm::pie::PieConfig;
use crate::chance::ChanceConfig;
use crate::dist::MAX_DELAY_NS;
use crate::loss::{Loss, LossConfig};
use crate::rate::{RateConfig, DEFAULT_LIMIT};
use crate::slot::SlotConfig;
use crate::units::{Percent, Rate, Size, Time};

/// The packet and cell overheads `rate` accepts, in bytes (netem's).
pub const OVERHEAD_RANGE: std::ops::RangeInclusive<i64> = -65535..=65535;
/// The cell sizes `rate` accepts, in bytes (0: no cells).
pub const CELL_SIZE_RANGE: std::ops::RangeInclusive<i64> = 0..=65535;
/// The fastest link rate, in bits per second (1000 Tbit/s).
pub const MAX_RATE: u64 = 1_000_000_000_000_000;
/// The largest byte limit of the rate queue (1024 TiB), the most [`Size`] reads.
pub const MAX_LIMIT_BYTES: u64 = 1 << 50;
/// What `limit` accepts, as errors say it.
pub const LIMIT_RANGE: &str =
    "a whole number of packets from 1 to 4294967295, or a time such as 500ms";

/// A [`LinkConfig`] whose values cannot work together or are out of range, whichever parser
/// (netem syntax, TOML, JSON) or program made it.
///
/// It names the netem keyword, and which value after it is wrong, so the netem parser can
/// point at the word; its `Display` is `KEYWORD VALUE: what is allowed`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    /// The netem keyword (and TOML/JSON field) at fault, e.g. `limit`.
    pub keyword: &'static str,
    /// Which value after the keyword is wrong, counting from 1 (after `loss state`,
    /// `loss gemodel` or `loss random`, counting after that word); 0 for the keyword as a
    /// whole.
    pub arg: usize,
    /// The offending value as netem would write it; empty when the keyword as a whole is at
    /// fault.
    pub value: String,
    /// What is wrong and what is allowed, with units.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.value.is_empty() {
            write!(f, "{}: {}", self.keyword, self.message)
        } else {
            write!(f, "{} {}: {}", self.keyword, self.value, self.message)
        }
    }
}

fn fault(
    keyword: &'static str,
    arg: usize,
    value: impl fmt::Display,
    message: impl Into<String>,
) -> ConfigError {
    ConfigError {
        keyword,
        arg,
        value: value.to_string(),
        message: message.into(),
    }
}

const PERCENT_RANGE: &str = "must be between 0% and 100%";
const CORRELATION_RANGE: &str = "correlation must be at least 0% and below 100%";

fn check_percent(keyword: &'static str, arg: usize, p: Percent) -> Result<(), ConfigError> {
    if (0.0..=1.0).contains(&p.0) {
        Ok(())
    } else {
        Err(fault(keyword, arg, p, PERCENT_RANGE))
    }
}

fn check_correlation(keyword: &'static str, arg: usize, c: Percent) -> Result<(), ConfigError> {
    if (0.0..1.0).contains(&c.0) {
        Ok(())
    } else {
        Err(fault(keyword, arg, c, CORRELATION_RANGE))
    }
}

fn check_chance(keyword: &'static str, c: &ChanceConfig) -> Result<(), ConfigError> {
    check_percent(keyword, 1, c.probability)?;
    check_correlation(keyword, 2, c.correlation)
}

/// The shape of the delay jitter.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DistName {
    /// Uniform in `[delay − jitter, delay + jitter]`, netem's default.
    #[default]
    Uniform,
    /// Normal with standard deviation `jitter`.
    Normal,
    /// Pareto (shape 3), standardised to standard deviation `jitter`.
    Pareto,
    /// netem's Pareto–normal mixture, standardised to standard deviation `jitter`.
    Paretonormal,
    /// A table in iproute2's `.dist` format, by name (looked up where iproute2 keeps its
    /// tables) or by path.
    #[serde(untagged)]
    Table(String),
}

impl DistName {
    /// Reads a distribution name as netem's `distribution` keyword takes it.
    pub fn parse(s: &str) -> DistName {
        match s {
            "uniform" => DistName::Uniform,
            "normal" => DistName::Normal,
            "pareto" => DistName::Pareto,
            "paretonormal" => DistName::Paretonormal,
            other => DistName::Table(other.to_string()),
        }
    }

    /// The name as written after `distribution`.
    pub fn as_str(&self) -> &str {
        match self {
            DistName::Uniform => "uniform",
            DistName::Normal => "normal",
            DistName::Pareto => "pareto",
            DistName::Paretonormal => "paretonormal",
            DistName::Table(name) => name,
        }
    }
}

/// Where the built-in distributions come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TableMode {
    /// rtemu's own: exact inverse CDFs with their real tails.
    #[default]
    Exact,
    /// iproute2's `.dist` tables, as netem uses them: quantised and clipped near ±4σ. For
    /// users who need netem's exact behaviour.
    Netem,
}

/// A link direction's impairments. Every field is optional; the default is an ideal link.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LinkConfig {
    /// Base one-way delay.
    pub delay: Time,
    /// Jitter: the half-width for `uniform`, the standard deviation otherwise.
    pub jitter: Time,
    /// Lag-1 autocorrelation of successive delays, in `[0, 1)`.
    pub delay_correlation: Percent,
    /// Shape of the jitter.
    pub distribution: DistName,
    /// rtemu's exact distributions or netem's tables.
    pub tables: TableMode,
    /// Keep packets in order: a packet never leaves before the one that arrived before it
    /// (jitter then delays followers instead of reordering them). Off by default, as in netem.
    pub ordered: bool,
    /// Loss model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss: Option<LossConfig>,
    /// netem's `ecn`: the loss model marks ECN-capable packets "congestion experienced"
    /// instead of dropping them (RFC 3168); Not-ECT packets are still dropped.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub ecn: bool,
    /// Duplication: one extra copy, which passes loss, corruption, rate and delay on its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duplicate: Option<ChanceConfig>,
    /// Single-bit corruption, netem's `corrupt`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub corrupt: Option<ChanceConfig>,
    /// Bit error rate: every bit of the frame flips independently with this probability.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ber: Option<f64>,
    /// Reordering: the chosen packets skip the delay.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reorder: Option<ChanceConfig>,
    /// With `reorder`: only every `gap`-th packet may be reordered (netem's gap; 0 = no gap
    /// condition, which netem's tc turns into 1).
    pub gap: u32,
    /// Serialization at a link rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<RateConfig>,
    /// Packet limit of the rate queue (only with `rate`; a delay alone never drops), and of
    /// the copies `slot` holds until they are ready.
    pub limit: u32,
    /// Byte limit of the rate queue.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit_bytes: Option<Size>,
    /// Time limit of the rate queue (`limit 500ms`): the bytes the link sends in that time at
    /// its rate. The netem line's `limit TIME` without a `limit PACKETS` also lifts the packet
    /// limit (to [`u32::MAX`]), so the time alone bounds the queue.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit_time: Option<Time>,
    /// CoDel (RFC 8289) managing the rate queue instead of drop-tail.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub codel: Option<CodelConfig>,
    /// FQ-CoDel (RFC 8290) managing the rate queue instead of drop-tail.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fq_codel: Option<FqCodelConfig>,
    /// PIE (RFC 8033) or DOCSIS-PIE (RFC 8034) managing the rate queue instead of drop-tail.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pie: Option<PieConfig>,
    /// DualPI2 (RFC 9332), the L4S dual queue, managing the rate queue instead of drop-tail.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dualpi2: Option<DualPi2Config>,
    /// netem's `slot`: copies leave only at slot starts, with per-slot budgets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slot: Option<SlotConfig>,
    /// A seed for this link alone, overriding the experiment's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            delay: Time(0),
            jitter: Time(0),
            delay_correlation: Percent(0.0),
            distribution: DistName::Uniform,
            tables: TableMode::Exact,
            ordered: false,
            loss: None,
            ecn: false,
            duplicate: None,
            corrupt: None,
            ber: None,
            reorder: None,
            gap: 0,
            rate: None,
            limit: DEFAULT_LIMIT,
            limit_bytes: None,
            limit_time: None,
            codel: None,
            fq_codel: None,
            pie: None,
            dualpi2: None,
            slot: None,
            seed: None,
        }
    }
}

impl LinkConfig {
    /// The table the delay is drawn from, if any: one named with `distribution` (a name or a
    /// path), or with `tables netem` netem's own table of a built-in distribution. Its file
    /// is an input of whatever reads this configuration.
    pub fn table_name(&self) -> Option<&str> {
        self.table_of(&self.distribution)
    }

    /// The table `slot distribution` draws its gaps from, if any (as for the delay).
    pub fn slot_table_name(&self) -> Option<&str> {
        self.slot
            .as_ref()?
            .distribution
            .as_ref()
            .and_then(|d| self.table_of(d))
    }

    /// Every table this configuration reads: each file is an input of whatever reads it.
    pub fn table_names(&self) -> impl Iterator<Item = &str> {
        self.table_name().into_iter().chain(self.slot_table_name())
    }

    fn table_of<'a>(&self, name: &'a DistName) -> Option<&'a str> {
        match (name, self.tables) {
            (DistName::Uniform, _) => None,
            (DistName::Table(name), _) => Some(name),
            (name, TableMode::Netem) => Some(name.as_str()),
            (_, TableMode::Exact) => None,
        }
    }

    /// Checks every value and every rule between values, for a configuration from any
    /// source: the netem parser calls it, `--model-file` readers must, and
    /// [`crate::LinkModel::new`] does. A configuration that passes prints (`Display`) as a
    /// netem line that reads back to the same configuration.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (arg, t) in [(1, self.delay), (2, self.jitter)] {
            if t.0 > MAX_DELAY_NS {
                return Err(fault(
                    "delay",
                    arg,
                    t,
                    format!(
                        "{} must be at most 2^53 ns (about 104 days)",
                        ["delay", "jitter"][arg - 1]
                    ),
                ));
            }
        }
        check_correlation("delay", 3, self.delay_correlation)?;
        if let DistName::Table(name) = &self.distribution {
            let builtin = matches!(
                DistName::parse(name),
                DistName::Uniform | DistName::Normal | DistName::Pareto | DistName::Paretonormal
            );
            if name.is_empty() || name.contains(char::is_whitespace) || builtin {
                return Err(fault(
                    "distribution",
                    1,
                    format!("{name:?}"),
                    "a table is named by one word without spaces (a name or a path to a .dist \
                     file) other than uniform, normal, pareto and paretonormal",
                ));
            }
        }
        match &self.loss {
            Some(LossConfig::Random(c)) => check_chance("loss", c)?,
            Some(
                l @ LossConfig::State {
                    p13,
                    p31,
                    p32,
                    p23,
                    p14,
                },
            ) => {
                for (i, p) in [p13, p31, p32, p23, p14].into_iter().enumerate() {
                    check_percent("loss", i + 1, *p)?;
                }
                Loss::new(l).map_err(|e| fault("loss", 0, "", e.to_string()))?;
            }
            Some(LossConfig::Gemodel {
                p,
                r,
                loss_bad,
                loss_good,
            }) => {
                for (i, p) in [p, r, loss_bad, loss_good].into_iter().enumerate() {
                    check_percent("loss", i + 1, *p)?;
                }
            }
            None => {}
        }
        if self.ecn && self.loss.is_none() {
            return Err(fault(
                "ecn",
                0,
                "",
                "marks instead of the loss model's drops, so it needs a loss model (add `loss P`)",
            ));
        }
        for (keyword, chance) in [
            ("duplicate", &self.duplicate),
            ("corrupt", &self.corrupt),
            ("reorder", &self.reorder),
        ] {
            if let Some(c) = chance {
                check_chance(keyword, c)?;
            }
        }
        if let Some(ber) = self.ber {
            if !(ber > 0.0 && ber < 1.0) {
                return Err(fault(
                    "ber",
                    1,
                    format!("{ber:e}"),
                    "must be between 0 (exclusive) and 1 (exclusive), the probability that one \
                     bit flips, e.g. 1e-5",
                ));
            }
        }
        if self.reorder.is_some() && self.delay.0 == 0 {
            return Err(fault(
                "reorder",
                0,
                "",
                "reordering needs a delay to reorder against (add `delay TIME`)",
            ));
        }
        if let Some(r) = &self.rate {
            if !(1..=MAX_RATE).contains(&r.rate.0) {
                return Err(fault(
                    "rate",
                    1,
                    format!("{}bit", r.rate.0),
                    format!("must be between 1bit and {} per second", Rate(MAX_RATE)),
                ));
            }
            let ints = [
                (
                    2,
                    "packet overhead",
                    i64::from(r.packet_overhead),
                    OVERHEAD_RANGE,
                ),
                (3, "cell size", i64::from(r.cell_size), CELL_SIZE_RANGE),
                (
                    4,
                    "cell overhead",
                    i64::from(r.cell_overhead),
                    OVERHEAD_RANGE,
                ),
            ];
            for (arg, what, v, range) in ints {
                if !range.contains(&v) {
                    return Err(fault("rate", arg, v, int_range(what, &range)));
                }
            }
        }
        if self.limit == 0 {
            return Err(fault("limit", 1, 0, format!("must be {LIMIT_RANGE}")));
        }
        if let Some(t) = self.limit_time {
            if t.0 == 0 || t.0 > MAX_DELAY_NS {
                return Err(fault(
                    "limit",
                    1,
                    t,
                    "a time limit must be above 0 and at most 2^53 ns (about 104 days)",
                ));
            }
        }
        self.validate_discipline()?;
        self.validate_slot()?;
        if let Some(b) = self.limit_bytes {
            if b.0 > MAX_LIMIT_BYTES {
                return Err(fault(
                    "limit-bytes",
                    1,
                    b,
                    format!("must be between 0b and {}", Size(MAX_LIMIT_BYTES)),
                ));
            }
        }
        Ok(())
    }

    /// The most packets of at least `min_len` bytes the rate queue can hold at once (0 without
    /// a rate): its packet limit, or fewer when its byte or time limit holds fewer. An engine
    /// sizes its frame buffers with it.
    pub fn queue_packets(&self, min_len: u32) -> u64 {
        let Some(rate) = &self.rate else {
            return 0;
        };
        if let Some(c) = &self.codel {
            return u64::from(c.limit);
        }
        if let Some(c) = &self.fq_codel {
            return u64::from(c.limit);
        }
        if let Some(c) = &self.pie {
            return u64::from(c.limit);
        }
        if let Some(c) = &self.dualpi2 {
            return u64::from(c.limit);
        }
        let limits = crate::rate::QueueLimits {
            packets: self.limit,
            bytes: self.limit_bytes,
            time: self.limit_time,
        };
        let by_bytes = limits
            .bytes_at(rate.rate)
            .map_or(u64::MAX, |b| b / u64::from(min_len.max(1)) + 1);
        u64::from(self.limit).min(by_bytes)
    }

    /// The longest a ready copy waits for its slot to start (0 without `slot`): the longest
    /// gap, or a drawn gap's mean and four spreads. An engine sizes its frame buffers with it.
    pub fn slot_wait_ns(&self) -> u64 {
        match &self.slot {
            None => 0,
            Some(s) if s.distribution.is_some() => {
                s.delay.0.saturating_add(s.jitter.0.saturating_mul(4))
            }
            Some(s) => s.max_delay.0.max(s.min_delay.0),
        }
    }

    /// Checks the queue discipline: it manages the rate queue, so it needs a rate, and it
    /// brings its own limit.
    fn validate_discipline(&self) -> Result<(), ConfigError> {
        let given = [
            ("codel", self.codel.is_some()),
            ("fq_codel", self.fq_codel.is_some()),
            ("pie", self.pie.is_some()),
            ("dualpi2", self.dualpi2.is_some()),
        ];
        let mut named = given.iter().filter(|(_, set)| *set).map(|(k, _)| *k);
        let first = named.next();
        if let Some(second) = named.next() {
            return Err(fault(
                second,
                0,
                "",
                format!(
                    "a link has one queue discipline: give {} or {second}, not both",
                    first.unwrap_or_default()
                ),
            ));
        }
        let codel = self.codel.as_ref().map(|c| {
            (
                "codel",
                c.limit,
                [
                    ("target", Some(c.target)),
                    ("interval", Some(c.interval)),
                    ("ce_threshold", c.ce_threshold),
                ],
            )
        });
        let fq = self.fq_codel.as_ref().map(|c| {
            (
                "fq_codel",
                c.limit,
                [
                    ("target", Some(c.target)),
                    ("interval", Some(c.interval)),
                    ("ce_threshold", c.ce_threshold),
                ],
            )
        });
        let pie = self.pie.as_ref().map(|c| {
            (
                "pie",
                c.limit,
                [
                    ("target", Some(c.target())),
                    ("tupdate", Some(c.tupdate())),
                    ("max_burst", c.max_burst.filter(|t| t.0 != 0)),
                ],
            )
        });
        let dual = self.dualpi2.as_ref().map(|c| {
            (
                "dualpi2",
                c.limit,
                [
                    ("target", Some(c.target)),
                    ("tupdate", Some(c.tupdate)),
                    ("step_thresh", Some(c.step_thresh)),
                ],
            )
        });
        let Some((keyword, limit, times)) = codel.or(fq).or(pie).or(dual) else {
            return Ok(());
        };
        if let Some(p) = &self.pie {
            // tc's range for the gains it is given (DOCSIS-PIE's default β, 40, is above it).
            let gains = [("alpha", p.alpha), ("beta", p.beta)];
            let too_large = gains
                .iter()
                .find_map(|(name, v)| v.filter(|v| *v > 32).map(|v| (name, v)));
            if let Some((name, v)) = too_large {
                return Err(fault(
                    keyword,
                    0,
                    "",
                    format!("{name} {v} must be from 0 to 32 (sixteenths of a hertz, as in tc)"),
                ));
            }
            if p.docsis && (p.dq_rate_estimator || p.bytemode) {
                return Err(fault(
                    keyword,
                    0,
                    "",
                    "DOCSIS-PIE predicts the delay from the rate and always scales by packet \
                     size: leave out dq_rate_estimator and bytemode",
                ));
            }
        }
        if let Some(d) = &self.dualpi2 {
            for (name, v) in [("alpha", d.alpha), ("beta", d.beta)] {
                if !(0.0..=100.0).contains(&v) {
                    return Err(fault(
                        keyword,
                        0,
                        "",
                        format!("{name} {v} must be from 0 to 100 (hertz)"),
                    ));
                }
            }
            if !(1..=255).contains(&d.coupling_factor) {
                return Err(fault(
                    keyword,
                    0,
                    "",
                    format!(
                        "coupling_factor {} must be a whole number from 1 to 255",
                        d.coupling_factor
                    ),
                ));
            }
            if !(0.0..=1.0).contains(&d.c_protection.0) {
                return Err(fault(
                    keyword,
                    0,
                    "",
                    "c_protection must be from 0% to 100%",
                ));
            }
        }
        if limit > 1 << 24 && self.codel.is_none() {
            return Err(fault(
                keyword,
                0,
                "",
                "limit must be at most 16777216 packets",
            ));
        }
        if let Some(f) = &self.fq_codel {
            for (name, v, range) in [
                ("flows", f.flows, 1..=65536),
                ("quantum", f.quantum, 1..=1 << 20),
                ("drop_batch", f.drop_batch, 1..=1 << 16),
            ] {
                if !range.contains(&v) {
                    return Err(fault(
                        keyword,
                        0,
                        "",
                        format!(
                            "{name} {v} must be from {} to {}",
                            range.start(),
                            range.end()
                        ),
                    ));
                }
            }
            if f.memory_limit.0 == 0 || f.memory_limit.0 > MAX_LIMIT_BYTES {
                return Err(fault(
                    keyword,
                    0,
                    "",
                    format!(
                        "memory_limit must be between 1b and {}",
                        Size(MAX_LIMIT_BYTES)
                    ),
                ));
            }
        }
        if self.rate.is_none() {
            return Err(fault(
                keyword,
                0,
                "",
                "manages the queue of a rate-limited link: add `rate RATE`",
            ));
        }
        if self.limit_bytes.is_some() || self.limit_time.is_some() || self.limit != DEFAULT_LIMIT {
            return Err(fault(
                keyword,
                0,
                "",
                format!(
                    "replaces the drop-tail queue that `limit` and `limit-bytes` bound: give the \
                     discipline its own limit (`{keyword} limit PACKETS`)"
                ),
            ));
        }
        if limit == 0 {
            return Err(fault(
                keyword,
                0,
                "",
                format!(
                    "limit must be {}",
                    LIMIT_RANGE.split(',').next().unwrap_or(LIMIT_RANGE)
                ),
            ));
        }
        for (name, t) in times {
            if let Some(t) = t {
                if t.0 == 0 || t.0 > MAX_DELAY_NS {
                    return Err(fault(
                        keyword,
                        0,
                        "",
                        format!("{name} {t} must be above 0 and at most 2^53 ns (about 104 days)"),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Checks `slot`: one way to draw its gaps, times in range, budgets above zero, and no
    /// queue discipline beside it.
    fn validate_slot(&self) -> Result<(), ConfigError> {
        let Some(s) = &self.slot else {
            return Ok(());
        };
        let bad = |message: String| Err(fault("slot", 0, "", message));
        let times = match &s.distribution {
            None if s.delay.0 != 0 || s.jitter.0 != 0 => {
                return bad(
                    "delay and jitter belong to `slot distribution NAME DELAY JITTER`; \
                            `slot MIN [MAX]` takes min_delay and max_delay"
                        .into(),
                )
            }
            Some(_) if s.min_delay.0 != 0 || s.max_delay.0 != 0 => {
                return bad("min_delay and max_delay belong to `slot MIN [MAX]`; \
                            `slot distribution NAME DELAY JITTER` takes delay and jitter"
                    .into())
            }
            None => [("MIN", s.min_delay), ("MAX", s.max_delay)],
            Some(_) => [("DELAY", s.delay), ("JITTER", s.jitter)],
        };
        for (name, t) in times {
            if t.0 > MAX_DELAY_NS {
                return bad(format!(
                    "{name} {t} must be at most 2^53 ns (about 104 days)"
                ));
            }
        }
        if s.distribution.is_none() && s.max_delay < s.min_delay {
            return bad(format!(
                "MAX {} must not be below MIN {}",
                s.max_delay, s.min_delay
            ));
        }
        if s.distribution.is_none() && s.max_delay.0 == 0 {
            return bad("slots need a gap: MIN or MAX above 0".into());
        }
        if let Some(DistName::Table(name)) = &s.distribution {
            if name.is_empty() || name.contains(char::is_whitespace) {
                return bad(format!(
                    "distribution {name:?}: a table is named by one word without spaces"
                ));
            }
        }
        if s.packets == Some(0) {
            return bad("packets must be from 1 to 4294967295".into());
        }
        if s.bytes.is_some_and(|b| b.0 == 0 || b.0 > MAX_LIMIT_BYTES) {
            return bad(format!(
                "bytes must be between 1b and {}",
                Size(MAX_LIMIT_BYTES)
            ));
        }
        if self.has_discipline() {
            return bad(
                "delivers what a plain link decided; a queue discipline decides when copies \
                 leave its queue, so give slot or the discipline, not both"
                    .into(),
            );
        }
        Ok(())
    }

    /// Whether a queue discipline (`codel`, …) manages the rate queue: the model then decides
    /// a copy's fate when it leaves the queue ([`crate::Model::depart`]).
    pub fn has_discipline(&self) -> bool {
        self.codel.is_some()
            || self.fq_codel.is_some()
            || self.pie.is_some()
            || self.dualpi2.is_some()
    }

    /// Whether the configuration changes nothing (an ideal link).
    pub fn is_ideal(&self) -> bool {
        *self
            == LinkConfig {
                limit: self.limit,
                limit_bytes: self.limit_bytes,
                limit_time: self.limit_time,
                ..LinkConfig::default()
            }
    }
}

/// `WHAT must be a whole number of bytes from LO to HI`, for the values of `rate`.
pub fn int_range(what: &str, range: &std::ops::RangeInclusive<i64>) -> String {
    format!(
        "{what} must be a whole number of bytes from {} to {}",
        range.start(),
        range.end()
    )
}

/// `codel` and the options that differ from tc's defaults.
fn codel_words(c: &CodelConfig) -> String {
    let d = CodelConfig::default();
    let mut w = String::from("codel");
    if c.limit != d.limit {
        w += &format!(" limit {}", c.limit);
    }
    if c.target != d.target {
        w += &format!(" target {}", c.target);
    }
    if c.interval != d.interval {
        w += &format!(" interval {}", c.interval);
    }
    if c.ecn {
        w += " ecn";
    }
    if let Some(t) = c.ce_threshold {
        w += &format!(" ce_threshold {t}");
    }
    w
}

/// `fq_codel` and the options that differ from tc's defaults.
fn fq_codel_words(c: &FqCodelConfig) -> String {
    let d = FqCodelConfig::default();
    let mut w = String::from("fq_codel");
    if c.limit != d.limit {
        w += &format!(" limit {}", c.limit);
    }
    if c.flows != d.flows {
        w += &format!(" flows {}", c.flows);
    }
    if c.target != d.target {
        w += &format!(" target {}", c.target);
    }
    if c.interval != d.interval {
        w += &format!(" interval {}", c.interval);
    }
    if c.quantum != d.quantum {
        w += &format!(" quantum {}", c.quantum);
    }
    if c.memory_limit != d.memory_limit {
        w += &format!(" memory_limit {}", c.memory_limit);
    }
    if !c.ecn {
        w += " noecn";
    }
    if let Some(t) = c.ce_threshold {
        w += &format!(" ce_threshold {t}");
    }
    if c.drop_batch != d.drop_batch {
        w += &format!(" drop_batch {}", c.drop_batch);
    }
    w
}

/// `pie` (or `pie docsis`) and the options that differ from the variant's defaults.
fn pie_words(c: &PieConfig) -> String {
    let d = PieConfig::default();
    let mut w = String::from(if c.docsis { "pie docsis" } else { "pie" });
    if c.limit != d.limit {
        w += &format!(" limit {}", c.limit);
    }
    if let Some(t) = c.target {
        w += &format!(" target {t}");
    }
    if let Some(t) = c.tupdate {
        w += &format!(" tupdate {t}");
    }
    if let Some(a) = c.alpha {
        w += &format!(" alpha {a}");
    }
    if let Some(b) = c.beta {
        w += &format!(" beta {b}");
    }
    if let Some(t) = c.max_burst {
        w += &format!(" max_burst {t}");
    }
    if c.ecn {
        w += " ecn";
    }
    if c.bytemode {
        w += " bytemode";
    }
    if c.dq_rate_estimator {
        w += " dq_rate_estimator";
    }
    w
}

/// `slot` as tc writes it.
fn slot_words(s: &SlotConfig) -> String {
    let mut w = match &s.distribution {
        Some(d) => format!("slot distribution {} {} {}", d.as_str(), s.delay, s.jitter),
        None => format!("slot {} {}", s.min_delay, s.max_delay),
    };
    if let Some(p) = s.packets {
        w += &format!(" packets {p}");
    }
    if let Some(b) = s.bytes {
        w += &format!(" bytes {b}");
    }
    w
}

/// `dualpi2` and the options that differ from tc's defaults.
fn dualpi2_words(c: &DualPi2Config) -> String {
    let d = DualPi2Config::default();
    let mut w = String::from("dualpi2");
    if c.limit != d.limit {
        w += &format!(" limit {}", c.limit);
    }
    for (name, v, default) in [
        ("target", c.target, d.target),
        ("tupdate", c.tupdate, d.tupdate),
        ("step_thresh", c.step_thresh, d.step_thresh),
    ] {
        if v != default {
            w += &format!(" {name} {v}");
        }
    }
    for (name, v, default) in [("alpha", c.alpha, d.alpha), ("beta", c.beta, d.beta)] {
        if v != default {
            w += &format!(" {name} {v}");
        }
    }
    if c.coupling_factor != d.coupling_factor {
        w += &format!(" coupling_factor {}", c.coupling_factor);
    }
    if c.min_qlen_step != d.min_qlen_step {
        w += &format!(" min_qlen_step {}", c.min_qlen_step);
    }
    if c.c_protection != d.c_protection {
        w += &format!(" c_protection {}", c.c_protection);
    }
    w
}

fn chance_words(keyword: &str, c: &ChanceConfig) -> String {
    if c.correlation.0 != 0.0 {
        format!("{keyword} {} {}", c.probability, c.correlation)
    } else {
        format!("{keyword} {}", c.probability)
    }
}

impl fmt::Display for LinkConfig {
    /// The configuration in netem syntax, readable by [`crate::netem::parse`]. An ideal link
    /// writes nothing.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = Vec::new();
        if self.delay.0 != 0 || self.jitter.0 != 0 || self.delay_correlation.0 != 0.0 {
            let mut d = format!("delay {}", self.delay);
            if self.jitter.0 != 0 || self.delay_correlation.0 != 0.0 {
                d += &format!(" {}", self.jitter);
            }
            if self.delay_correlation.0 != 0.0 {
                d += &format!(" {}", self.delay_correlation);
            }
            parts.push(d);
        }
        if self.distribution != DistName::Uniform {
            parts.push(format!("distribution {}", self.distribution.as_str()));
        }
        if self.tables == TableMode::Netem {
            parts.push("tables netem".into());
        }
        if self.ordered {
            parts.push("ordered".into());
        }
        match &self.loss {
            Some(LossConfig::Random(c)) => parts.push(chance_words("loss random", c)),
            Some(LossConfig::State {
                p13,
                p31,
                p32,
                p23,
                p14,
            }) => parts.push(format!("loss state {p13} {p31} {p32} {p23} {p14}")),
            Some(LossConfig::Gemodel {
                p,
                r,
                loss_bad,
                loss_good,
            }) => parts.push(format!("loss gemodel {p} {r} {loss_bad} {loss_good}")),
            None => {}
        }
        if self.ecn {
            parts.push("ecn".into());
        }
        if let Some(c) = &self.duplicate {
            parts.push(chance_words("duplicate", c));
        }
        if let Some(c) = &self.corrupt {
            parts.push(chance_words("corrupt", c));
        }
        if let Some(ber) = self.ber {
            parts.push(format!("ber {ber:e}"));
        }
        if let Some(c) = &self.reorder {
            parts.push(chance_words("reorder", c));
        }
        if self.gap != 0 {
            parts.push(format!("gap {}", self.gap));
        }
        if let Some(r) = &self.rate {
            let mut w = format!("rate {}", r.rate);
            if r.packet_overhead != 0 || r.cell_size != 0 || r.cell_overhead != 0 {
                w += &format!(" {}", r.packet_overhead);
            }
            if r.cell_size != 0 || r.cell_overhead != 0 {
                w += &format!(" {}", r.cell_size);
            }
            if r.cell_overhead != 0 {
                w += &format!(" {}", r.cell_overhead);
            }
            parts.push(w);
        }
        // `limit TIME` alone lifts the packet limit: then u32::MAX goes without saying.
        let packets_said = match self.limit_time {
            Some(_) => self.limit != u32::MAX,
            None => self.limit != DEFAULT_LIMIT,
        };
        if packets_said {
            parts.push(format!("limit {}", self.limit));
        }
        if let Some(t) = self.limit_time {
            parts.push(format!("limit {t}"));
        }
        if let Some(b) = self.limit_bytes {
            parts.push(format!("limit-bytes {b}"));
        }
        if let Some(c) = &self.codel {
            parts.push(codel_words(c));
        }
        if let Some(c) = &self.fq_codel {
            parts.push(fq_codel_words(c));
        }
        if let Some(c) = &self.pie {
            parts.push(pie_words(c));
        }
        if let Some(c) = &self.dualpi2 {
            parts.push(dualpi2_words(c));
        }
        if let Some(s) = &self.slot {
            parts.push(slot_words(s));
        }
        if let Some(seed) = self.seed {
            parts.push(format!("seed {seed}"));
        }
        f.write_str(&parts.join(" "))
    }
}
