//! The synthetic traces' generators as one kind of thing: each gives its records one by one and
//! says what its run came to, so one writer (`rtemu trace gen`) drives them all.

use std::fmt;

use serde::Serialize;

use crate::action::Action;
use crate::fgn::FgnDelays;
use crate::iid::IidTrace;
use crate::onoff::OnOffDelays;

/// A source of synthetic action records.
pub trait Generator {
    /// What the run came to (clamped delays, dropped probes, …): as JSON, and in words.
    type Outcome: Serialize + fmt::Display;

    /// The next record.
    fn next_action(&mut self) -> Action;

    /// What the records so far came to.
    fn outcome(&self) -> Self::Outcome;
}

/// What a generator of delays from a distribution with a negative tail reports: how many
/// delays came out negative and were written as 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Clamped {
    /// Delays clamped to 0.
    pub clamped_negative_delays: u64,
}

impl fmt::Display for Clamped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} negative delays clamped to 0",
            self.clamped_negative_delays
        )
    }
}

/// What the ON/OFF generator reports: the load it offered and the Hurst parameter it tends
/// to, and how many probes found the queue full.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct OnOffOutcome {
    /// Mean offered load as a fraction of the link rate.
    pub offered_load: f64,
    /// The Hurst parameter the superposition tends to.
    pub target_hurst: f64,
    /// Probes dropped at a full queue.
    pub probes_dropped: u64,
}

impl fmt::Display for OnOffOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "offered load {:.3}, target H {:.2}, {} probes dropped",
            self.offered_load, self.target_hurst, self.probes_dropped
        )
    }
}

impl Generator for FgnDelays {
    type Outcome = Clamped;

    /// Every record a pass after the next delay.
    fn next_action(&mut self) -> Action {
        Action::Pass {
            delay_ns: self.next_delay_ns(),
        }
    }

    fn outcome(&self) -> Clamped {
        Clamped {
            clamped_negative_delays: self.clamped(),
        }
    }
}

impl Generator for IidTrace {
    type Outcome = Clamped;

    fn next_action(&mut self) -> Action {
        IidTrace::next_action(self)
    }

    fn outcome(&self) -> Clamped {
        Clamped {
            clamped_negative_delays: self.clamped(),
        }
    }
}

impl Generator for OnOffDelays {
    type Outcome = OnOffOutcome;

    fn next_action(&mut self) -> Action {
        OnOffDelays::next_action(self)
    }

    fn outcome(&self) -> OnOffOutcome {
        OnOffOutcome {
            offered_load: self.config().load(),
            target_hurst: self.config().hurst(),
            probes_dropped: self.dropped(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fgn::Fgn;
    use crate::iid::Dist;
    use crate::onoff::OnOffConfig;

    #[test]
    fn fgn_records_are_passes_and_its_outcome_counts_the_clamped() {
        // A mean of 0 makes about half the delays negative.
        let fgn = Fgn::new(0.8, 64, 1).unwrap();
        let mut g = FgnDelays::new(fgn, 0.0, 1e6, 1_000).unwrap();
        for _ in 0..64 {
            assert!(matches!(g.next_action(), Action::Pass { .. }));
        }
        let outcome = Generator::outcome(&g);
        assert!(
            (10..=54).contains(&outcome.clamped_negative_delays),
            "{outcome}"
        );
        assert_eq!(
            outcome.to_string(),
            format!("{} negative delays clamped to 0", g.clamped())
        );
    }

    #[test]
    fn each_outcome_reads_as_json_and_as_words() {
        let g = IidTrace::new(Dist::Constant, 5e6, 0.0, 1_000, None, 1).unwrap();
        let json = serde_json::to_string(&Generator::outcome(&g)).unwrap();
        assert_eq!(json, r#"{"clamped_negative_delays":0}"#);
        let cfg = OnOffConfig {
            sources: 10,
            alpha: 1.4,
            mean_on_ns: 50e6,
            mean_off_ns: 50e6,
            source_rate_bps: 1e6,
            link_rate_bps: 10e6,
            buffer_bytes: 1e6,
            probe_bytes: 1500.0,
            interval_ns: 1_000_000,
            base_delay_ns: 0,
            resolution_ns: 1_000,
        };
        // The parameters state the model, not how its records are written.
        let parameters = serde_json::to_value(cfg).unwrap();
        assert_eq!(parameters.as_object().unwrap().len(), 10);
        assert!(parameters.get("resolution_ns").is_none());
        let g = OnOffDelays::new(cfg, 1).unwrap();
        let outcome = Generator::outcome(&g);
        assert_eq!(
            outcome.to_string(),
            "offered load 0.500, target H 0.80, 0 probes dropped"
        );
        assert_eq!((outcome.offered_load, outcome.target_hurst), (0.5, 0.8));
    }
}
