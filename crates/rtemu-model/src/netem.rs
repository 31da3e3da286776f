//! The netem parameter syntax, as `tc qdisc … netem` takes it.
//!
//! ```text
//! [netem] [delay TIME [JITTER [CORRELATION]]] [distribution {uniform|normal|pareto|paretonormal|TABLE}]
//!         [loss [random] PERCENT [CORRELATION] | loss state P13 [P31 [P32 [P23 [P14]]]]
//!          | loss gemodel P [R [1-H [1-K]]]]
//!         [duplicate PERCENT [CORRELATION]] [corrupt PERCENT [CORRELATION]]
//!         [reorder PERCENT [CORRELATION] [gap DISTANCE]]
//!         [rate RATE [PACKETOVERHEAD [CELLSIZE [CELLOVERHEAD]]]] [limit PACKETS] [seed N]
//! rtemu's additions:
//!         [ber RATE] [limit-bytes SIZE] [ordered] [tables {exact|netem}]
//!         [slot MIN_DELAY [MAX_DELAY] | slot distribution NAME DELAY JITTER]
//!              [packets N] [bytes SIZE]
//! ```
//!
//! Units and defaults are tc's (see [`crate::units`]); `drop` is accepted for `loss`, as tc
//! does. Every error names the
//! word, its column and the valid range, e.g. `loss 120% (column 6): must be between 0% and
//! 100%`.

use crate::aqm::codel::CodelConfig;
use crate::aqm::dualpi2::DualPi2Config;
use crate::aqm::fq_codel::FqCodelConfig;
use crate::aqm::pie::PieConfig;
use crate::chance::ChanceConfig;
use crate::config::{
    int_range, ConfigError, DistName, LinkConfig, TableMode, CELL_SIZE_RANGE, LIMIT_RANGE,
    OVERHEAD_RANGE,
};
use crate::loss::LossConfig;
use crate::rate::RateConfig;
use crate::slot::SlotConfig;
use crate::units::{Percent, Rate, Size, Time, UnitError};

/// A netem parameter string that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{context} (column {column}): {message}")]
pub struct NetemError {
    /// The keyword and the offending word, e.g. `loss 120%`.
    pub context: String,
    /// 1-based column of the offending word.
    pub column: usize,
    /// What is wrong and what is allowed.
    pub message: String,
}

struct Word<'a> {
    text: &'a str,
    column: usize,
}

struct Parser<'a> {
    words: Vec<Word<'a>>,
    pos: usize,
    input_len: usize,
}

impl<'a> Parser<'a> {
    fn new(input: &'a str) -> Self {
        let mut words = Vec::new();
        let mut start = None;
        for (i, c) in input
            .char_indices()
            .chain(std::iter::once((input.len(), ' ')))
        {
            match (c.is_whitespace(), start) {
                (true, Some(s)) => {
                    words.push(Word {
                        text: &input[s..i],
                        column: input[..s].chars().count() + 1,
                    });
                    start = None;
                }
                (false, None) => start = Some(i),
                _ => {}
            }
        }
        Parser {
            words,
            pos: 0,
            input_len: input.chars().count(),
        }
    }

    fn next(&mut self) -> Option<&Word<'a>> {
        let w = self.words.get(self.pos);
        self.pos += w.is_some() as usize;
        w
    }

    /// The next word if it starts like a number: tc's rule for optional positional values.
    fn next_if_number(&mut self) -> Option<&Word<'a>> {
        let w = self.words.get(self.pos)?;
        if w.text
            .starts_with(|c: char| c.is_ascii_digit() || c == '.' || c == '-')
        {
            self.pos += 1;
            Some(w)
        } else {
            None
        }
    }

    fn error(
        &self,
        keyword: &str,
        word: Option<&Word<'_>>,
        message: impl Into<String>,
    ) -> NetemError {
        // A word of any length may be given; the error names its start, with the column.
        const SHOWN: usize = 32;
        let (context, column) = match word {
            Some(w) if w.text == keyword => (keyword.to_string(), w.column),
            Some(w) if w.text.chars().count() > SHOWN => {
                let start: String = w.text.chars().take(SHOWN).collect();
                (format!("{keyword} {start}…"), w.column)
            }
            Some(w) => (format!("{keyword} {}", w.text), w.column),
            None => (keyword.to_string(), self.input_len + 1),
        };
        NetemError {
            context,
            column,
            message: message.into(),
        }
    }

    /// The value after `keyword`, required.
    fn value<T>(
        &mut self,
        keyword: &str,
        what: &str,
        read: impl Fn(&str) -> Result<T, UnitError>,
    ) -> Result<T, NetemError> {
        let pos = self.pos;
        match self.next() {
            Some(w) => {
                let text = w.text;
                read(text).map_err(|e| {
                    let w = &self.words[pos];
                    self.error(keyword, Some(w), e.to_string())
                })
            }
            None => Err(self.error(keyword, None, format!("expected {what} after it"))),
        }
    }

    /// An optional positional value after `keyword`.
    fn optional<T>(
        &mut self,
        keyword: &str,
        read: impl Fn(&str) -> Result<T, UnitError>,
    ) -> Result<Option<T>, NetemError> {
        let pos = self.pos;
        match self.next_if_number() {
            Some(w) => {
                let text = w.text;
                read(text)
                    .map(Some)
                    .map_err(|e| self.error(keyword, Some(&self.words[pos]), e.to_string()))
            }
            None => Ok(None),
        }
    }

    /// An optional whole number in `range` after `keyword`.
    fn optional_int(
        &mut self,
        keyword: &str,
        what: &str,
        range: std::ops::RangeInclusive<i64>,
    ) -> Result<Option<i64>, NetemError> {
        let pos = self.pos;
        let Some(w) = self.next_if_number() else {
            return Ok(None);
        };
        match w.text.parse::<i64>() {
            Ok(v) if range.contains(&v) => Ok(Some(v)),
            _ => Err(self.error(keyword, Some(&self.words[pos]), int_range(what, &range))),
        }
    }

    fn chance(&mut self, keyword: &str) -> Result<ChanceConfig, NetemError> {
        let probability = self.value(keyword, "a percentage", Percent::parse)?;
        let correlation = self.correlation(keyword)?.unwrap_or_default();
        Ok(ChanceConfig {
            probability,
            correlation,
        })
    }

    /// An optional correlation; its range is [`LinkConfig::validate`]'s to check.
    fn correlation(&mut self, keyword: &str) -> Result<Option<Percent>, NetemError> {
        self.optional(keyword, Percent::parse)
    }

    fn integer<T: std::str::FromStr>(
        &mut self,
        keyword: &str,
        range: &str,
    ) -> Result<T, NetemError> {
        self.value(keyword, "a number", |s| {
            s.parse::<T>().map_err(|_| UnitError::Malformed {
                what: "a whole number",
                example: "1000",
            })
        })
        .map_err(|mut e| {
            e.message = format!("must be {range}");
            e
        })
    }
}

/// Reads a netem parameter string into a [`LinkConfig`], checked by
/// [`LinkConfig::validate`]: the parser reads words, the configuration's own rules decide
/// which values are allowed, whatever wrote them.
pub fn parse(input: &str) -> Result<LinkConfig, NetemError> {
    let mut p = Parser::new(input);
    let mut cfg = LinkConfig::default();
    if p.words.first().is_some_and(|w| w.text == "netem") {
        p.pos = 1;
    }
    // Where each keyword's words were last given: word index of the keyword, and the end.
    let mut spans: Vec<(&'static str, usize, usize)> = Vec::new();
    // Whether a `limit PACKETS` was given: `limit TIME` alone lifts the packet limit.
    let mut packets_said = false;
    while let Some(word) = p.next() {
        let keyword = word.text;
        let at = p.pos - 1;
        let canonical = match keyword {
            "latency" => "delay",
            "drop" => "loss",
            _ => keyword,
        };
        match keyword {
            "delay" | "latency" => {
                cfg.delay = p.value(keyword, "a time", Time::parse)?;
                cfg.jitter = p.optional(keyword, Time::parse)?.unwrap_or_default();
                cfg.delay_correlation = p.correlation(keyword)?.unwrap_or_default();
            }
            "distribution" => {
                let name = p.value(keyword, "a distribution name", |s| Ok(DistName::parse(s)))?;
                cfg.distribution = name;
            }
            "tables" => {
                cfg.tables = p.value(keyword, "exact or netem", |s| match s {
                    "exact" => Ok(TableMode::Exact),
                    "netem" => Ok(TableMode::Netem),
                    _ => Err(UnitError::Malformed { what: "a table mode", example: "exact or netem" }),
                })?;
            }
            "ordered" => cfg.ordered = true,
            "loss" | "drop" => cfg.loss = Some(parse_loss(&mut p, keyword)?),
            "duplicate" => cfg.duplicate = Some(p.chance(keyword)?),
            "corrupt" => cfg.corrupt = Some(p.chance(keyword)?),
            "reorder" => cfg.reorder = Some(p.chance(keyword)?),
            "gap" => cfg.gap = p.integer(keyword, "a whole number from 0 to 4294967295")?,
            "ber" => {
                cfg.ber = Some(p.value(keyword, "a bit error rate", |s| {
                    s.parse::<f64>().map_err(|_| UnitError::Malformed { what: "a bit error rate", example: "1e-5" })
                })?);
            }
            "rate" => {
                let rate = p.value(keyword, "a rate", Rate::parse)?;
                let packet_overhead = p.optional_int(keyword, "packet overhead", OVERHEAD_RANGE)?.unwrap_or(0);
                let cell_size = p.optional_int(keyword, "cell size", CELL_SIZE_RANGE)?.unwrap_or(0);
                let cell_overhead = p.optional_int(keyword, "cell overhead", OVERHEAD_RANGE)?.unwrap_or(0);
                cfg.rate = Some(RateConfig {
                    rate,
                    packet_overhead: packet_overhead as i32,
                    cell_size: cell_size as u32,
                    cell_overhead: cell_overhead as i32,
                });
            }
            "limit" => {
                // A whole number is packets; a time needs its unit (tc's bare µs would read
                // `limit 500` as a time).
                let time = p.words.get(p.pos).map(|w| w.text).filter(|t| {
                    t.parse::<i64>().is_err() && t.ends_with(|c: char| c.is_ascii_alphabetic())
                });
                if time.is_some_and(|t| Time::parse(t).is_ok()) {
                    cfg.limit_time = Some(p.value(keyword, "a time", Time::parse)?);
                } else {
                    cfg.limit = p.integer(keyword, LIMIT_RANGE)?;
                    packets_said = true;
                }
            }
            "limit-bytes" => cfg.limit_bytes = Some(p.value(keyword, "a size", Size::parse)?),
            "seed" => cfg.seed = Some(p.integer(keyword, "a whole number from 0 to 18446744073709551615")?),
            "ecn" => cfg.ecn = true,
            "codel" => cfg.codel = Some(parse_codel(&mut p)?),
            "fq_codel" => cfg.fq_codel = Some(parse_fq_codel(&mut p)?),
            "pie" => cfg.pie = Some(parse_pie(&mut p)?),
            "dualpi2" => cfg.dualpi2 = Some(parse_dualpi2(&mut p)?),
            "slot" => cfg.slot = Some(parse_slot(&mut p)?),
            _ => {
                return Err(p.error(
                    keyword,
                    Some(&p.words[at]),
                    "unknown keyword; expected one of delay, distribution, loss, ecn, duplicate, corrupt, ber, \
                     reorder, gap, rate, limit, limit-bytes, codel, fq_codel, pie, dualpi2, slot, ordered, tables, seed",
                ))
            }
        }
        let known = [
            "delay",
            "distribution",
            "loss",
            "duplicate",
            "corrupt",
            "reorder",
            "gap",
            "ber",
            "rate",
            "limit",
            "limit-bytes",
            "ecn",
            "codel",
            "fq_codel",
            "pie",
            "dualpi2",
            "slot",
        ];
        if let Some(k) = known.iter().find(|k| **k == canonical) {
            spans.push((k, at, p.pos));
        }
    }
    if cfg.limit_time.is_some() && !packets_said {
        cfg.limit = u32::MAX;
    }
    cfg.validate().map_err(|e| config_error(&p, &spans, e))?;
    Ok(cfg)
}

/// Points a [`ConfigError`] at the word it is about: the value it names, within the words
/// the keyword was last given with, or else the keyword.
fn config_error(
    p: &Parser<'_>,
    spans: &[(&'static str, usize, usize)],
    e: ConfigError,
) -> NetemError {
    let Some(&(_, at, end)) = spans.iter().rev().find(|(k, ..)| *k == e.keyword) else {
        // A rule about a value the line left at its default.
        return NetemError {
            context: e.keyword.to_string(),
            column: 1,
            message: e.message,
        };
    };
    let model_word = e.keyword == "loss"
        && p.words
            .get(at + 1)
            .is_some_and(|w| matches!(w.text, "state" | "gemodel" | "random"));
    let index = at + e.arg + (e.arg > 0 && model_word) as usize;
    let word = if e.arg > 0 && index < end {
        &p.words[index]
    } else {
        &p.words[at]
    };
    p.error(p.words[at].text, Some(word), e.message)
}

/// `codel`'s options, tc's words: they belong to it while they are its own, and the netem
/// line goes on after them (`… codel target 10ms ecn delay 5ms`).
fn parse_codel(p: &mut Parser<'_>) -> Result<CodelConfig, NetemError> {
    let mut c = CodelConfig::default();
    while let Some(word) = p.words.get(p.pos).map(|w| w.text) {
        match word {
            "limit" => {
                p.pos += 1;
                c.limit = p.integer("codel limit", LIMIT_RANGE.split(',').next().unwrap_or(""))?;
            }
            "target" => {
                p.pos += 1;
                c.target = p.value("codel target", "a time", Time::parse)?;
            }
            "interval" => {
                p.pos += 1;
                c.interval = p.value("codel interval", "a time", Time::parse)?;
            }
            "ce_threshold" => {
                p.pos += 1;
                c.ce_threshold = Some(p.value("codel ce_threshold", "a time", Time::parse)?);
            }
            "ecn" => {
                p.pos += 1;
                c.ecn = true;
            }
            "noecn" => {
                p.pos += 1;
                c.ecn = false;
            }
            _ => break,
        }
    }
    Ok(c)
}

/// `slot MIN [MAX]` or `slot distribution NAME DELAY JITTER`, then `packets` and `bytes`.
fn parse_slot(p: &mut Parser<'_>) -> Result<SlotConfig, NetemError> {
    let mut c = SlotConfig::default();
    if p.words.get(p.pos).is_some_and(|w| w.text == "distribution") {
        p.pos += 1;
        let name = p.value("slot distribution", "a distribution name", |s| {
            Ok(DistName::parse(s))
        })?;
        c.distribution = Some(name);
        c.delay = p.value("slot distribution", "a time (DELAY)", Time::parse)?;
        c.jitter = p.value("slot distribution", "a time (JITTER)", Time::parse)?;
    } else {
        c.min_delay = p.value("slot", "a time (MIN_DELAY)", Time::parse)?;
        c.max_delay = p.optional("slot", Time::parse)?.unwrap_or(c.min_delay);
    }
    while let Some(word) = p.words.get(p.pos).map(|w| w.text) {
        p.pos += 1;
        match word {
            "packets" => {
                c.packets = Some(p.integer("slot packets", "a whole number from 1 to 4294967295")?)
            }
            "bytes" => c.bytes = Some(p.value("slot bytes", "a size", Size::parse)?),
            _ => {
                p.pos -= 1;
                break;
            }
        }
    }
    Ok(c)
}

/// `fq_codel`'s options, as [`parse_codel`] reads `codel`'s.
fn parse_fq_codel(p: &mut Parser<'_>) -> Result<FqCodelConfig, NetemError> {
    let mut c = FqCodelConfig::default();
    let number = "a whole number from 1 to 4294967295";
    while let Some(word) = p.words.get(p.pos).map(|w| w.text) {
        p.pos += 1;
        match word {
            "limit" => c.limit = p.integer("fq_codel limit", number)?,
            "flows" => c.flows = p.integer("fq_codel flows", number)?,
            "quantum" => c.quantum = p.integer("fq_codel quantum", number)?,
            "drop_batch" => c.drop_batch = p.integer("fq_codel drop_batch", number)?,
            "memory_limit" => {
                c.memory_limit = p.value("fq_codel memory_limit", "a size", Size::parse)?
            }
            "target" => c.target = p.value("fq_codel target", "a time", Time::parse)?,
            "interval" => c.interval = p.value("fq_codel interval", "a time", Time::parse)?,
            "ce_threshold" => {
                c.ce_threshold = Some(p.value("fq_codel ce_threshold", "a time", Time::parse)?)
            }
            "ecn" => c.ecn = true,
            "noecn" => c.ecn = false,
            _ => {
                p.pos -= 1;
                break;
            }
        }
    }
    Ok(c)
}

/// `pie`'s options (and `docsis`), as [`parse_codel`] reads `codel`'s.
fn parse_pie(p: &mut Parser<'_>) -> Result<PieConfig, NetemError> {
    let mut c = PieConfig::default();
    let gain = "a whole number from 0 to 32 (sixteenths of a hertz)";
    while let Some(word) = p.words.get(p.pos).map(|w| w.text) {
        p.pos += 1;
        match word {
            "docsis" => c.docsis = true,
            "limit" => c.limit = p.integer("pie limit", "a whole number from 1 to 16777216")?,
            "target" => c.target = Some(p.value("pie target", "a time", Time::parse)?),
            "tupdate" => c.tupdate = Some(p.value("pie tupdate", "a time", Time::parse)?),
            "max_burst" => c.max_burst = Some(p.value("pie max_burst", "a time", Time::parse)?),
            "alpha" => c.alpha = Some(p.integer("pie alpha", gain)?),
            "beta" => c.beta = Some(p.integer("pie beta", gain)?),
            "ecn" => c.ecn = true,
            "noecn" => c.ecn = false,
            "bytemode" => c.bytemode = true,
            "nobytemode" => c.bytemode = false,
            "dq_rate_estimator" => c.dq_rate_estimator = true,
            "no_dq_rate_estimator" => c.dq_rate_estimator = false,
            _ => {
                p.pos -= 1;
                break;
            }
        }
    }
    Ok(c)
}

/// `dualpi2`'s options, as [`parse_codel`] reads `codel`'s.
fn parse_dualpi2(p: &mut Parser<'_>) -> Result<DualPi2Config, NetemError> {
    let mut c = DualPi2Config::default();
    let hertz = |s: &str| {
        s.parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or(UnitError::Malformed {
                what: "a number of hertz",
                example: "0.16",
            })
    };
    while let Some(word) = p.words.get(p.pos).map(|w| w.text) {
        p.pos += 1;
        match word {
            "limit" => c.limit = p.integer("dualpi2 limit", "a whole number from 1 to 16777216")?,
            "target" => c.target = p.value("dualpi2 target", "a time", Time::parse)?,
            "tupdate" => c.tupdate = p.value("dualpi2 tupdate", "a time", Time::parse)?,
            "alpha" => c.alpha = p.value("dualpi2 alpha", "a number", hertz)?,
            "beta" => c.beta = p.value("dualpi2 beta", "a number", hertz)?,
            "coupling_factor" => {
                c.coupling_factor =
                    p.integer("dualpi2 coupling_factor", "a whole number from 1 to 255")?
            }
            "step_thresh" => {
                c.step_thresh = p.value("dualpi2 step_thresh", "a time", Time::parse)?
            }
            "min_qlen_step" => {
                c.min_qlen_step = p.integer("dualpi2 min_qlen_step", "a whole number of packets")?
            }
            "c_protection" => {
                c.c_protection = p.value("dualpi2 c_protection", "a percentage", Percent::parse)?
            }
            _ => {
                p.pos -= 1;
                break;
            }
        }
    }
    Ok(c)
}

fn parse_loss(p: &mut Parser<'_>, keyword: &str) -> Result<LossConfig, NetemError> {
    let model = p.words.get(p.pos).map(|w| w.text);
    match model {
        Some("state") => {
            p.pos += 1;
            let kw = "loss state";
            let p13 = p.value(kw, "a percentage (p13)", Percent::parse)?;
            let p31 = p
                .optional(kw, Percent::parse)?
                .unwrap_or(Percent(1.0 - p13.0));
            let p32 = p.optional(kw, Percent::parse)?.unwrap_or(Percent(0.0));
            let p23 = p.optional(kw, Percent::parse)?.unwrap_or(Percent(1.0));
            let p14 = p.optional(kw, Percent::parse)?.unwrap_or(Percent(0.0));
            Ok(LossConfig::State {
                p13,
                p31,
                p32,
                p23,
                p14,
            })
        }
        Some("gemodel") => {
            p.pos += 1;
            let kw = "loss gemodel";
            let gp = p.value(kw, "a percentage (p)", Percent::parse)?;
            let r = p
                .optional(kw, Percent::parse)?
                .unwrap_or(Percent(1.0 - gp.0));
            let loss_bad = p.optional(kw, Percent::parse)?.unwrap_or(Percent(1.0));
            let loss_good = p.optional(kw, Percent::parse)?.unwrap_or(Percent(0.0));
            Ok(LossConfig::Gemodel {
                p: gp,
                r,
                loss_bad,
                loss_good,
            })
        }
        Some("random") => {
            p.pos += 1;
            Ok(LossConfig::Random(p.chance("loss random")?))
        }
        _ => Ok(LossConfig::Random(p.chance(keyword)?)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::Rate;

    #[test]
    fn the_issue_example_reads_as_netem_means_it() {
        let cfg = parse(
            "delay 20ms 5ms 25% distribution normal loss 1% 25% duplicate 0.5% corrupt 0.1% reorder 10% 50% rate 10mbit limit 1000",
        )
        .unwrap();
        assert_eq!(cfg.delay, Time(20_000_000));
        assert_eq!(cfg.jitter, Time(5_000_000));
        assert_eq!(cfg.delay_correlation, Percent(0.25));
        assert_eq!(cfg.distribution, DistName::Normal);
        assert_eq!(
            cfg.loss,
            Some(LossConfig::Random(ChanceConfig {
                probability: Percent(0.01),
                correlation: Percent(0.25)
            }))
        );
        assert_eq!(cfg.duplicate.unwrap().probability, Percent(0.005));
        assert_eq!(cfg.corrupt.unwrap().probability, Percent(0.001));
        assert_eq!(cfg.reorder.unwrap().correlation, Percent(0.5));
        assert_eq!(cfg.rate.unwrap().rate, Rate(10_000_000));
        assert_eq!(cfg.limit, 1000);
    }

    #[test]
    fn markov_defaults_follow_iproute2() {
        let cfg = parse("loss state 1%").unwrap();
        assert_eq!(
            cfg.loss,
            Some(LossConfig::State {
                p13: Percent(0.01),
                p31: Percent(0.99),
                p32: Percent(0.0),
                p23: Percent(1.0),
                p14: Percent(0.0)
            })
        );
        let cfg = parse("loss gemodel 2% 30%").unwrap();
        assert_eq!(
            cfg.loss,
            Some(LossConfig::Gemodel {
                p: Percent(0.02),
                r: Percent(0.3),
                loss_bad: Percent(1.0),
                loss_good: Percent(0.0)
            })
        );
    }

    #[test]
    fn errors_name_the_word_the_column_and_the_range() {
        let e = parse("delay 10ms loss 120%").unwrap_err();
        assert_eq!(
            e.to_string(),
            "loss 120% (column 17): must be between 0% and 100%"
        );
        let e = parse("delay").unwrap_err();
        assert_eq!(e.to_string(), "delay (column 6): expected a time after it");
        let e = parse("delay 10ms jitter 5ms").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("jitter (column 12): unknown keyword"),
            "{e}"
        );
        let e = parse("delay 10ms 1ms 100%").unwrap_err();
        assert!(e.message.contains("below 100%"), "{e}");
        let e = parse("reorder 5%").unwrap_err();
        assert!(e.message.contains("needs a delay"), "{e}");
        let e = parse("limit 0").unwrap_err();
        assert!(e.to_string().starts_with("limit 0 (column 7)"), "{e}");
        let e = parse("rate 1mbit 14 99999").unwrap_err();
        assert_eq!(
            e.to_string(),
            "rate 99999 (column 15): cell size must be a whole number of bytes from 0 to 65535"
        );
    }
}
