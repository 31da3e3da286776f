//! Trace-driven links: a trace decides each packet's drop, duplication and delay, and the
//! link's configuration adds what a trace does not say — rate and queue, corruption, order.
//!
//! The model stays pure: the trace arrives through a [`TraceFeed`], which whoever builds the
//! link supplies (a prefetching reader of a per-packet action trace, a delay time series, a
//! delivery-opportunity trace). Feeds see the packet, so a time series can look up the
//! arrival time and a per-flow feed can pick a trace by flow.

use crate::config::LinkConfig;
use crate::fate::{DropReason, Fate, MAX_COPIES};
use crate::link::{LinkCounters, LinkError, LinkModel, NoTables};
use crate::packet::PacketMeta;
use crate::{Exhaustion, Model};

/// What a trace says about one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Drop it, for this reason ([`DropReason::Trace`] or [`DropReason::TraceUnderrun`]).
    Drop(DropReason),
    /// Deliver the original and any duplicates, each after its own delay in ns (at most
    /// [`MAX_COPIES`]; a trace cascading further is cut there).
    Deliver {
        /// Number of copies in `delays_ns`.
        copies: u8,
        /// Delay of each copy, the original first.
        delays_ns: [u64; MAX_COPIES],
    },
}

impl Verdict {
    /// One copy after `delay_ns`.
    pub fn pass(delay_ns: u64) -> Verdict {
        let mut delays_ns = [0; MAX_COPIES];
        delays_ns[0] = delay_ns;
        Verdict::Deliver {
            copies: 1,
            delays_ns,
        }
    }

    /// Copies after each of `delays` (the first `MAX_COPIES`); no delay at all drops.
    pub fn copies(delays: &[u64]) -> Verdict {
        if delays.is_empty() {
            return Verdict::Drop(DropReason::Trace);
        }
        let n = delays.len().min(MAX_COPIES);
        let mut delays_ns = [0; MAX_COPIES];
        delays_ns[..n].copy_from_slice(&delays[..n]);
        Verdict::Deliver {
            copies: n as u8,
            delays_ns,
        }
    }
}

/// What a streamed trace's reader did besides giving records, so that nothing it substituted
/// is silent. Summed over all the traces of a link.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct FeedCounters {
    /// Records taken from the trace.
    pub records: u64,
    /// Actions substituted because no record was ready (the `underrun` policy's action).
    pub underruns: u64,
    /// Times the trace started again from its first record (`end = loop`).
    pub loops: u64,
    /// Actions given after the trace's end (`end = pass`).
    pub after_end: u64,
    /// Packets whose cascade of `dup` records was cut at the most records one packet may take.
    pub cut_cascades: u64,
}

impl std::ops::Add for FeedCounters {
    type Output = FeedCounters;

    fn add(self, o: FeedCounters) -> FeedCounters {
        FeedCounters {
            records: self.records + o.records,
            underruns: self.underruns + o.underruns,
            loops: self.loops + o.loops,
            after_end: self.after_end + o.after_end,
            cut_cascades: self.cut_cascades + o.cut_cascades,
        }
    }
}

/// A source of verdicts, one per packet, in arrival order.
pub trait TraceFeed {
    /// The verdict for `pkt`.
    fn verdict(&mut self, pkt: &PacketMeta) -> Verdict;

    /// Why the feed has ended, if it has (a trace under the `stop` policy, or one that
    /// failed): the verdicts it gives from then on mean nothing.
    fn exhausted(&self) -> Option<&Exhaustion> {
        None
    }

    /// Its reader's counters, for a feed streamed from a file; `None` for one held in memory.
    fn counters(&self) -> Option<FeedCounters> {
        None
    }
}

impl<F: TraceFeed + ?Sized> TraceFeed for Box<F> {
    fn verdict(&mut self, pkt: &PacketMeta) -> Verdict {
        (**self).verdict(pkt)
    }

    fn exhausted(&self) -> Option<&Exhaustion> {
        (**self).exhausted()
    }

    fn counters(&self) -> Option<FeedCounters> {
        (**self).counters()
    }
}

/// A configuration that asks for something the trace already decides.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TraceModelError {
    /// The model names a stage the trace decides.
    #[error(
        "the trace decides delay, loss, duplication and reordering, so the model must not set `{0}` \
         (it may set rate, limit, limit-bytes, corrupt, ber and ordered)"
    )]
    Conflict(&'static str),
    /// The rest of the configuration is invalid.
    #[error(transparent)]
    Link(#[from] LinkError),
}

/// A link driven by a trace, with the configuration's rate, corruption and order stages.
#[derive(Debug)]
pub struct TraceModel<F> {
    feed: F,
    link: LinkModel,
}

/// The part of `cfg` a trace-driven link uses: everything but the stages a trace decides
/// (delay, jitter, loss, duplicate, reorder). For a per-flow trace on a link whose other
/// packets follow the whole configuration.
pub fn untraced_stages(cfg: &LinkConfig) -> LinkConfig {
    LinkConfig {
        rate: cfg.rate,
        limit: cfg.limit,
        limit_bytes: cfg.limit_bytes,
        limit_time: cfg.limit_time,
        codel: cfg.codel,
        fq_codel: cfg.fq_codel,
        pie: cfg.pie,
        dualpi2: cfg.dualpi2,
        corrupt: cfg.corrupt,
        ber: cfg.ber,
        ordered: cfg.ordered,
        seed: cfg.seed,
        ..LinkConfig::default()
    }
}

impl<F: TraceFeed> TraceModel<F> {
    /// A trace-driven link. `cfg` may add rate, queue limits, corruption and order; `seed` and
    /// `label` seed those stages' stream as for [`LinkModel::new`].
    pub fn new(feed: F, cfg: &LinkConfig, seed: u64, label: u64) -> Result<Self, TraceModelError> {
        let conflicts = [
            ("delay", cfg.delay.0 != 0 || cfg.jitter.0 != 0),
            ("loss", cfg.loss.is_some()),
            ("duplicate", cfg.duplicate.is_some()),
            ("reorder", cfg.reorder.is_some()),
        ];
        if let Some((name, _)) = conflicts.iter().find(|(_, set)| *set) {
            return Err(TraceModelError::Conflict(name));
        }
        Ok(TraceModel {
            feed,
            link: LinkModel::new(cfg, &NoTables, seed, label)?,
        })
    }
}

impl<F: TraceFeed> Model for TraceModel<F> {
    fn decide(&mut self, pkt: &PacketMeta) -> Fate {
        match self.feed.verdict(pkt) {
            Verdict::Drop(reason) => Fate::dropped(reason),
            Verdict::Deliver { copies, delays_ns } => {
                let mut fate = Fate::new();
                for (copy, delay) in delays_ns[..copies as usize].iter().enumerate() {
                    self.link.pass(pkt, copy as u8, Some(*delay), &mut fate);
                }
                fate
            }
        }
    }

    fn next_departure(&self) -> Option<crate::Nanos> {
        self.link.next_queued()
    }

    fn depart(&mut self) -> Option<crate::Departure> {
        self.link.depart_queued()
    }

    fn counters(&self) -> LinkCounters {
        self.link.counters()
    }

    fn exhausted(&self) -> Option<&Exhaustion> {
        self.feed.exhausted()
    }

    fn trace_counters(&self) -> Option<FeedCounters> {
        self.feed.counters()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netem;

    /// A feed that replays a fixed list of verdicts.
    #[derive(Debug)]
    struct Replay(std::vec::IntoIter<Verdict>);

    impl TraceFeed for Replay {
        fn verdict(&mut self, _: &PacketMeta) -> Verdict {
            self.0
                .next()
                .unwrap_or(Verdict::Drop(DropReason::TraceUnderrun))
        }
    }

    fn pkt(seq: u64, t: u64) -> PacketMeta {
        PacketMeta {
            len: 1000,
            flow: Default::default(),
            arrival_ns: t,
            seq,
            ecn: Default::default(),
        }
    }

    #[test]
    fn the_trace_decides_and_the_rate_adds_serialization() {
        let verdicts = vec![
            Verdict::pass(5_000),
            Verdict::Drop(DropReason::Trace),
            Verdict::copies(&[1_000, 3_000]),
        ];
        let cfg = netem::parse("rate 8mbit").unwrap();
        let mut m = TraceModel::new(Replay(verdicts.into_iter()), &cfg, 1, 0).unwrap();
        // 1000 bytes at 8 Mbit/s: 1 ms of serialization, then the trace's delay.
        let a = m.decide(&pkt(0, 0));
        assert_eq!(a.delivered.as_slice()[0].at_ns, 1_000_000 + 5_000);
        assert_eq!(m.decide(&pkt(1, 0)).drop_reason(), Some(DropReason::Trace));
        let c = m.decide(&pkt(2, 10_000_000));
        let times: Vec<u64> = c.delivered.as_slice().iter().map(|d| d.at_ns).collect();
        // Both copies queue for the link: the duplicate serializes after the original.
        assert_eq!(times, vec![11_000_000 + 1_000, 12_000_000 + 3_000]);
        assert_eq!(
            m.decide(&pkt(3, 20_000_000)).drop_reason(),
            Some(DropReason::TraceUnderrun)
        );
    }

    #[test]
    fn untraced_stages_keep_exactly_what_a_trace_does_not_decide() {
        let cfg = netem::parse(
            "delay 5ms 1ms loss 1% duplicate 1% reorder 5% rate 1mbit limit 9 corrupt 1% ordered",
        )
        .unwrap();
        let kept = untraced_stages(&cfg);
        assert_eq!(
            kept,
            netem::parse("rate 1mbit limit 9 corrupt 1% ordered").unwrap()
        );
        assert!(TraceModel::new(Replay(vec![].into_iter()), &kept, 1, 0).is_ok());
    }

    #[test]
    fn a_model_that_contradicts_the_trace_is_refused() {
        for (args, name) in [
            ("delay 1ms", "delay"),
            ("loss 1%", "loss"),
            ("duplicate 1%", "duplicate"),
        ] {
            let err = TraceModel::new(
                Replay(vec![].into_iter()),
                &netem::parse(args).unwrap(),
                1,
                0,
            )
            .unwrap_err();
            assert_eq!(err, TraceModelError::Conflict(name));
        }
    }
}
