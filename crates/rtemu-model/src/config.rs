//! A link direction's whole configuration, in one structured, serde-friendly type.
//!
//! The netem-syntax parser ([`crate::netem`]) produces a [`LinkConfig`], and its `Display`
//! writes one back in netem syntax, so a configuration can be pasted from `tc`, stored as
//! TOML/JSON, and printed again. Field names in TOML/JSON are the netem keywords.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::chance::ChanceConfig;
use crate::loss::LossConfig;
use crate::rate::{RateConfig, DEFAULT_LIMIT};
use crate::units::{Percent, Size, Time};

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
    /// Packet limit of the rate queue (only with `rate`; a delay alone never drops).
    pub limit: u32,
    /// Byte limit of the rate queue.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit_bytes: Option<Size>,
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
            duplicate: None,
            corrupt: None,
            ber: None,
            reorder: None,
            gap: 0,
            rate: None,
            limit: DEFAULT_LIMIT,
            limit_bytes: None,
            seed: None,
        }
    }
}

impl LinkConfig {
    /// Whether the configuration changes nothing (an ideal link).
    pub fn is_ideal(&self) -> bool {
        *self
            == LinkConfig {
                limit: self.limit,
                limit_bytes: self.limit_bytes,
                ..LinkConfig::default()
            }
    }
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
        if self.limit != DEFAULT_LIMIT {
            parts.push(format!("limit {}", self.limit));
        }
        if let Some(b) = self.limit_bytes {
            parts.push(format!("limit-bytes {b}"));
        }
        if let Some(seed) = self.seed {
            parts.push(format!("seed {seed}"));
        }
        f.write_str(&parts.join(" "))
    }
}
