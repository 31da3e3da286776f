//! Trace feeds for the simulator: the readers of `rtemu-trace` behind the model's
//! [`TraceFeed`] interface, and the per-flow classifier that picks a model by 5-tuple.
//!
//! Trace time 0 is the arrival of the first packet on the link: a time series or a
//! delivery-opportunity trace starts when the traffic does, whatever the capture's clock says.

use rtemu_model::trace::{TraceFeed, Verdict};
use rtemu_model::{DropReason, Exhaustion, Fate, FlowKey, Model, PacketMeta};
use rtemu_trace::flow::{FiveTuple, FlowTable};
use rtemu_trace::mahimahi::{Cursor, Opportunities};
use rtemu_trace::prefetch::Prefetcher;
use rtemu_trace::series::DelaySeries;

/// Bytes one delivery opportunity carries, as in Mahimahi (`PACKET_SIZE`: an MTU of 1500 plus
/// 4 bytes of framing).
pub const OPPORTUNITY_BYTES: u32 = 1504;

/// A per-packet action trace (RplTrc), read ahead on its own thread.
#[derive(Debug)]
pub struct ActionFeed {
    trace: Prefetcher,
    ended: Option<Exhaustion>,
}

impl ActionFeed {
    /// Feeds the actions of `trace`.
    pub fn new(trace: Prefetcher) -> Self {
        ActionFeed { trace, ended: None }
    }

    /// The reader's counters (records, under-runs, loops).
    pub fn counters(&self) -> rtemu_trace::prefetch::Counters {
        self.trace.counters()
    }
}

impl TraceFeed for ActionFeed {
    fn verdict(&mut self, _: &PacketMeta) -> Verdict {
        let underruns = self.trace.counters().underruns;
        match self.trace.next_fate() {
            Ok(Some(fate)) if fate.deliveries().is_empty() => {
                // An under-run under the `drop` policy shows as a drop that added an under-run.
                let underrun = self.trace.counters().underruns > underruns;
                Verdict::Drop(if underrun {
                    DropReason::TraceUnderrun
                } else {
                    DropReason::Trace
                })
            }
            Ok(Some(fate)) => Verdict::copies(fate.deliveries()),
            Ok(None) => {
                self.ended = Some(Exhaustion::Ended);
                Verdict::Drop(DropReason::Trace)
            }
            Err(e) => {
                self.ended = Some(Exhaustion::Failed(e.to_string()));
                Verdict::Drop(DropReason::Trace)
            }
        }
    }

    fn exhausted(&self) -> Option<&Exhaustion> {
        self.ended.as_ref()
    }
}

/// A delay/loss time series, looked up at each packet's arrival.
#[derive(Debug)]
pub struct SeriesFeed {
    series: DelaySeries,
    start: Option<u64>,
}

impl SeriesFeed {
    /// Feeds lookups of `series`.
    pub fn new(series: DelaySeries) -> Self {
        SeriesFeed {
            series,
            start: None,
        }
    }
}

impl TraceFeed for SeriesFeed {
    fn verdict(&mut self, pkt: &PacketMeta) -> Verdict {
        let start = *self.start.get_or_insert(pkt.arrival_ns);
        let at = self.series.at(pkt.arrival_ns - start);
        if at.lost {
            Verdict::Drop(DropReason::Trace)
        } else {
            Verdict::pass(at.delay_ns)
        }
    }
}

/// A Mahimahi delivery-opportunity trace: packets wait in an unbounded FIFO and leave at the
/// opportunity that carries their last byte, each opportunity carrying
/// [`OPPORTUNITY_BYTES`] (a packet may span several, as in Mahimahi).
#[derive(Debug)]
pub struct OpportunityFeed<'a> {
    trace: &'a Opportunities,
    /// The opportunity being used, once traffic started.
    cursor: Option<Cursor<'a>>,
    /// Bytes still free in the current opportunity.
    bytes_left: u32,
    start: u64,
}

impl<'a> OpportunityFeed<'a> {
    /// Feeds departures from `trace`.
    pub fn new(trace: &'a Opportunities) -> Self {
        OpportunityFeed {
            trace,
            cursor: None,
            bytes_left: 0,
            start: 0,
        }
    }
}

impl TraceFeed for OpportunityFeed<'_> {
    fn verdict(&mut self, pkt: &PacketMeta) -> Verdict {
        let cursor = self.cursor.get_or_insert_with(|| {
            self.start = pkt.arrival_ns;
            self.bytes_left = OPPORTUNITY_BYTES;
            self.trace.cursor_at(0)
        });
        let t = pkt.arrival_ns - self.start;
        // An opportunity that passed while the queue was empty is lost, unused.
        if cursor.time_ns() < t {
            *cursor = self.trace.cursor_at(t);
            self.bytes_left = OPPORTUNITY_BYTES;
        }
        let mut remaining = pkt.len.max(1);
        loop {
            if self.bytes_left == 0 {
                cursor.advance();
                self.bytes_left = OPPORTUNITY_BYTES;
            }
            let take = remaining.min(self.bytes_left);
            remaining -= take;
            self.bytes_left -= take;
            if remaining == 0 {
                return Verdict::pass(cursor.time_ns() - t);
            }
        }
    }
}

/// The 5-tuple as the trace classifier spells it.
fn five_tuple(k: &FlowKey) -> FiveTuple {
    FiveTuple {
        src: k.src,
        dst: k.dst,
        sport: k.src_port,
        dport: k.dst_port,
        proto: k.protocol,
    }
}

/// A link whose packets go to the first model whose flow pattern matches, or to a default.
pub struct PerFlow<'a> {
    flows: FlowTable<Box<dyn Model + Send + 'a>>,
    default: Box<dyn Model + Send + 'a>,
}

impl<'a> PerFlow<'a> {
    /// Classifies into `flows` in order, else `default`.
    pub fn new(
        flows: FlowTable<Box<dyn Model + Send + 'a>>,
        default: Box<dyn Model + Send + 'a>,
    ) -> Self {
        PerFlow { flows, default }
    }
}

impl Model for PerFlow<'_> {
    fn decide(&mut self, pkt: &PacketMeta) -> Fate {
        let t = five_tuple(&pkt.flow);
        match self.flows.classify_mut(&t) {
            Some((_, m)) => m.decide(pkt),
            None => self.default.decide(pkt),
        }
    }

    fn counters(&self) -> rtemu_model::link::LinkCounters {
        self.default.counters()
    }

    fn exhausted(&self) -> Option<&Exhaustion> {
        self.flows
            .entries()
            .iter()
            .find_map(|(_, m)| m.exhausted())
            .or_else(|| self.default.exhausted())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(seq: u64, t: u64, len: u32) -> PacketMeta {
        PacketMeta {
            len,
            flow: Default::default(),
            arrival_ns: t,
            seq,
        }
    }

    fn delay(v: Verdict) -> u64 {
        match v {
            Verdict::Deliver { delays_ns, .. } => delays_ns[0],
            Verdict::Drop(r) => panic!("dropped: {r}"),
        }
    }

    #[test]
    fn opportunities_carry_1504_bytes_each_and_idle_ones_are_lost() {
        // Opportunities at 0, 1, 1, 5 ms; the trace loops every 5 ms.
        let trace = Opportunities::parse("0\n1\n1\n5\n".as_bytes()).unwrap();
        let mut f = OpportunityFeed::new(&trace);
        let ms = 1_000_000;
        // 1000 + 1000 bytes at t=0: the first leaves at 0, the second needs the next one (1 ms).
        assert_eq!(delay(f.verdict(&pkt(0, 0, 1000))), 0);
        assert_eq!(delay(f.verdict(&pkt(1, 0, 1000))), ms);
        // 3000 bytes at 1 ms: 1008 left at the first 1 ms one, 1504 at the second, the rest at 5.
        assert_eq!(delay(f.verdict(&pkt(2, ms, 3000))), 4 * ms);
        // The trace loops with a period of 5 ms: 5, 6, 6, 10 ms next. Arriving at 7 ms, after
        // the link idled, the packet waits for 10 ms.
        assert_eq!(delay(f.verdict(&pkt(3, 7 * ms, 100))), 3 * ms);
    }

    #[test]
    fn a_series_is_looked_up_from_the_first_arrival() {
        let series =
            DelaySeries::parse("0 10\n1 20 1\n2 30\n".as_bytes(), Default::default()).unwrap();
        let mut f = SeriesFeed::new(series);
        let s = 1_000_000_000;
        assert_eq!(delay(f.verdict(&pkt(0, 5 * s, 100))), 10_000_000);
        assert_eq!(
            f.verdict(&pkt(1, 6 * s + 1, 100)),
            Verdict::Drop(DropReason::Trace)
        );
        assert_eq!(delay(f.verdict(&pkt(2, 7 * s, 100))), 30_000_000);
    }
}
