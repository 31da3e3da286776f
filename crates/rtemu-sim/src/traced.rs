//! Trace feeds for the simulator: the readers of `rtemu-trace` behind the model's
//! [`TraceFeed`] interface, and the per-flow classifier that picks a model by 5-tuple.
//!
//! Trace time 0 is the arrival of the first packet on the link: a time series or a
//! delivery-opportunity trace starts when the traffic does, whatever the capture's clock says.

use rtemu_model::trace::{FeedCounters, TraceFeed, Verdict};
use rtemu_model::{Departure, DropReason, Exhaustion, Fate, FlowKey, Model, PacketMeta};
use rtemu_trace::flow::{FiveTuple, FlowTable};
use rtemu_trace::mahimahi::OpportunityStream;
use rtemu_trace::prefetch::{Prefetcher, UnderrunPolicy};
use rtemu_trace::series::SeriesStream;
use rtemu_trace::TraceError;

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
            Err(e) => failed(&mut self.ended, e),
        }
    }

    fn exhausted(&self) -> Option<&Exhaustion> {
        self.ended.as_ref()
    }

    fn counters(&self) -> Option<FeedCounters> {
        let c = self.trace.counters();
        Some(FeedCounters {
            records: c.records,
            underruns: c.underruns,
            loops: c.loops,
            after_end: c.after_end,
            cut_cascades: c.cut_cascades,
        })
    }
}

/// Records that a feed's trace failed with `e` (the run reports it) and drops the packet.
fn failed(ended: &mut Option<Exhaustion>, e: TraceError) -> Verdict {
    *ended = Some(Exhaustion::Failed(e.to_string()));
    Verdict::Drop(DropReason::Trace)
}

/// What a feed answers for a packet when its stream has nothing ready (an under-run): the
/// [`UnderrunPolicy`], with `hold-last` giving the previous verdict's delay.
fn substitute(policy: UnderrunPolicy, last_delay_ns: u64) -> Verdict {
    match policy {
        UnderrunPolicy::Pass | UnderrunPolicy::Wait => Verdict::pass(0),
        UnderrunPolicy::Drop => Verdict::Drop(DropReason::TraceUnderrun),
        UnderrunPolicy::HoldLast => Verdict::pass(last_delay_ns),
    }
}

/// A delay/loss time series, streamed, looked up at each packet's arrival.
#[derive(Debug)]
pub struct SeriesFeed {
    series: SeriesStream,
    start: Option<u64>,
    ended: Option<Exhaustion>,
}

impl SeriesFeed {
    /// Feeds lookups of `series`.
    pub fn new(series: SeriesStream) -> Self {
        SeriesFeed {
            series,
            start: None,
            ended: None,
        }
    }
}

impl TraceFeed for SeriesFeed {
    fn verdict(&mut self, pkt: &PacketMeta) -> Verdict {
        let start = *self.start.get_or_insert(pkt.arrival_ns);
        let underruns = self.series.underruns();
        match self.series.at(pkt.arrival_ns - start) {
            Ok(at) if at.lost => Verdict::Drop(if self.series.underruns() > underruns {
                DropReason::TraceUnderrun
            } else {
                DropReason::Trace
            }),
            Ok(at) => Verdict::pass(at.delay_ns),
            Err(e) => failed(&mut self.ended, e),
        }
    }

    fn exhausted(&self) -> Option<&Exhaustion> {
        self.ended.as_ref()
    }

    fn counters(&self) -> Option<FeedCounters> {
        Some(FeedCounters {
            records: self.series.samples_read(),
            underruns: self.series.underruns(),
            ..FeedCounters::default()
        })
    }
}

/// A Mahimahi delivery-opportunity trace, streamed: packets wait in an unbounded FIFO and
/// leave at the opportunity that carries their last byte, each opportunity carrying
/// [`OPPORTUNITY_BYTES`] (a packet may span several, as in Mahimahi).
#[derive(Debug)]
pub struct OpportunityFeed {
    trace: OpportunityStream,
    underrun: UnderrunPolicy,
    /// The first arrival, once traffic started: trace time 0.
    start: Option<u64>,
    /// Bytes still free in the current opportunity.
    bytes_left: u32,
    last_delay_ns: u64,
    underruns: u64,
    ended: Option<Exhaustion>,
}

impl OpportunityFeed {
    /// Feeds departures from `trace`; `underrun` answers a packet whose opportunity is not
    /// read yet.
    pub fn new(trace: OpportunityStream, underrun: UnderrunPolicy) -> Self {
        OpportunityFeed {
            trace,
            underrun,
            start: None,
            bytes_left: 0,
            last_delay_ns: 0,
            underruns: 0,
            ended: None,
        }
    }

    /// Moves the trace on; `None` (counted) if the stream had nothing ready.
    fn moved(&mut self, moved: Result<bool, TraceError>) -> Option<Verdict> {
        match moved {
            Ok(true) => None,
            Ok(false) => {
                self.underruns += 1;
                Some(substitute(self.underrun, self.last_delay_ns))
            }
            Err(e) => Some(failed(&mut self.ended, e)),
        }
    }
}

impl TraceFeed for OpportunityFeed {
    fn verdict(&mut self, pkt: &PacketMeta) -> Verdict {
        if self.ended.is_some() {
            return Verdict::Drop(DropReason::Trace);
        }
        let start = *self.start.get_or_insert_with(|| {
            self.bytes_left = OPPORTUNITY_BYTES;
            pkt.arrival_ns
        });
        let t = pkt.arrival_ns - start;
        // Opportunities that passed while the queue was empty are lost, unused.
        if self.trace.time_ns() < t {
            let moved = self.trace.skip_to(t);
            if let Some(v) = self.moved(moved) {
                return v;
            }
            self.bytes_left = OPPORTUNITY_BYTES;
        }
        let mut remaining = pkt.len.max(1);
        loop {
            if self.bytes_left == 0 {
                let moved = self.trace.advance();
                if let Some(v) = self.moved(moved) {
                    return v;
                }
                self.bytes_left = OPPORTUNITY_BYTES;
            }
            let take = remaining.min(self.bytes_left);
            remaining -= take;
            self.bytes_left -= take;
            if remaining == 0 {
                self.last_delay_ns = self.trace.time_ns() - t;
                return Verdict::pass(self.last_delay_ns);
            }
        }
    }

    fn exhausted(&self) -> Option<&Exhaustion> {
        self.ended.as_ref()
    }

    fn counters(&self) -> Option<FeedCounters> {
        Some(FeedCounters {
            records: self.trace.records(),
            underruns: self.underruns,
            loops: self.trace.loops(),
            ..FeedCounters::default()
        })
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
pub struct PerFlow {
    flows: FlowTable<Box<dyn Model + Send>>,
    default: Box<dyn Model + Send>,
}

impl PerFlow {
    /// Classifies into `flows` in order, else `default`.
    pub fn new(flows: FlowTable<Box<dyn Model + Send>>, default: Box<dyn Model + Send>) -> Self {
        PerFlow { flows, default }
    }
}

impl PerFlow {
    /// Every model: the flows' and the default.
    fn models(&self) -> impl Iterator<Item = &(dyn Model + Send)> + '_ {
        self.flows
            .entries()
            .iter()
            .map(|(_, m)| m.as_ref())
            .chain([self.default.as_ref()])
    }
}

impl Model for PerFlow {
    fn decide(&mut self, pkt: &PacketMeta) -> Fate {
        let t = five_tuple(&pkt.flow);
        match self.flows.classify_mut(&t) {
            Some((_, m)) => m.decide(pkt),
            None => self.default.decide(pkt),
        }
    }

    fn next_departure(&self) -> Option<u64> {
        self.models().filter_map(|m| m.next_departure()).min()
    }

    fn depart(&mut self) -> Option<Departure> {
        let t = self.next_departure()?;
        if self.default.next_departure() == Some(t) {
            return self.default.depart();
        }
        self.flows
            .values_mut()
            .find(|m| m.next_departure() == Some(t))?
            .depart()
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

    fn trace_counters(&self) -> Option<FeedCounters> {
        self.flows
            .entries()
            .iter()
            .map(|(_, m)| m.trace_counters())
            .chain([self.default.trace_counters()])
            .flatten()
            .reduce(|a, b| a + b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{self, Discard};
    use crate::fatelog::FateLog;
    use crate::summary::Summary;
    use crate::traffic::{TrafficGen, TrafficSpec};
    use rtemu_model::trace::TraceModel;
    use rtemu_trace::format::Format;
    use rtemu_trace::mahimahi::OpportunityReader;
    use rtemu_trace::prefetch::PrefetchConfig;
    use rtemu_trace::reader::RecordReader;
    use rtemu_trace::series::SeriesReader;
    use std::io::Cursor;

    fn pkt(seq: u64, t: u64, len: u32) -> PacketMeta {
        PacketMeta {
            len,
            flow: Default::default(),
            arrival_ns: t,
            seq,
            ecn: Default::default(),
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
        let trace = OpportunityStream::spawn(
            OpportunityReader::new(Cursor::new(b"0\n1\n1\n5\n".to_vec())),
            true,
            |e| e,
        )
        .unwrap();
        let mut f = OpportunityFeed::new(trace, UnderrunPolicy::Wait);
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

    /// Runs `packets` packets of CBR traffic over a link driven by the action trace `text`.
    fn run_action_trace(text: &str, packets: u64, underrun: &str, end: &str) -> Summary {
        let reader = RecordReader::new(
            std::io::Cursor::new(text.as_bytes().to_vec()),
            Format::Text,
            64,
        )
        .unwrap();
        let config = PrefetchConfig {
            underrun: underrun.parse().unwrap(),
            end: end.parse().unwrap(),
            ..PrefetchConfig::default()
        };
        let mut trace = Prefetcher::spawn(reader, config, |e| e).unwrap();
        trace.prime().unwrap();
        let mut model = TraceModel::new(ActionFeed::new(trace), &Default::default(), 1, 0).unwrap();
        let spec: TrafficSpec = format!("cbr 1000pps 100B {}ms", packets).parse().unwrap();
        let mut source = TrafficGen::new(&spec, 1);
        engine::run(
            &mut source,
            &mut model,
            &mut Discard,
            None::<&mut FateLog<Vec<u8>>>,
            &mut |_| {},
        )
        .unwrap()
    }

    #[test]
    fn packets_after_the_end_of_an_action_trace_reach_the_summary() {
        // Three records, 100 packets, `end = pass`: 97 packets pass with no trace delay,
        // counted after the end or, those that come before the reader thread has reported the
        // end (virtual time outruns it), as under-runs under `underrun = pass`; none is silent.
        let s = run_action_trace("pass 1ms\ndrop\npass 2ms\n", 100, "pass", "pass");
        assert_eq!(s.packets_in, 100);
        assert_eq!(s.dropped["trace"], 1);
        let t = s.trace.expect("an action trace drives the link");
        assert_eq!(t.records, 3);
        assert_eq!(t.loops, 0);
        assert_eq!(t.after_end + t.underruns, 97, "{t:?}");
        let text = s.to_string();
        assert!(
            text.contains(&format!(
                "trace: underruns {}, loops 0, after_end {}",
                t.underruns, t.after_end
            )),
            "{text}"
        );
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["trace"]["after_end"], t.after_end);
        assert_eq!(json["trace"]["underruns"], t.underruns);
        assert_eq!(json["trace"]["loops"], 0);
    }

    #[test]
    fn loops_reach_the_summary_and_a_run_without_an_action_trace_has_none() {
        let s = run_action_trace("pass 1ms\npass 2ms\n", 9, "wait", "loop");
        let t = s.trace.unwrap();
        assert_eq!((t.records, t.underruns, t.after_end), (9, 0, 0));
        assert!(t.loops >= 4, "{t:?}");
        assert_eq!(s.delivered, 9);
        // The feed is gone with its model: a later run on this thread reports no trace.
        let spec: TrafficSpec = "cbr 1000pps 100B 5ms".parse().unwrap();
        let mut model =
            rtemu_model::LinkModel::new(&Default::default(), &rtemu_model::link::NoTables, 1, 0)
                .unwrap();
        let s = engine::run(
            &mut TrafficGen::new(&spec, 1),
            &mut model,
            &mut Discard,
            None::<&mut FateLog<Vec<u8>>>,
            &mut |_| {},
        )
        .unwrap();
        assert_eq!(s.trace, None);
        assert!(!s.to_string().contains("trace:"));
    }

    #[test]
    fn a_series_is_looked_up_from_the_first_arrival() {
        let series = SeriesStream::spawn(
            SeriesReader::new(Cursor::new(b"0 10\n1 20 1\n2 30\n".to_vec())),
            Default::default(),
            UnderrunPolicy::Wait,
            |e| e,
        )
        .unwrap();
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
