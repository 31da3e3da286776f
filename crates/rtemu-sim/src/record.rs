//! A link model's decisions recorded as an action trace (`rtemu trace gen netem`): the
//! fates it gives packets offered at a steady rate, in a form that replays without the
//! model.

use std::collections::VecDeque;

use std::fmt;

use rtemu_model::{Model, PacketMeta};
use rtemu_trace::gen::Generator;
use rtemu_trace::Action;
use serde::Serialize;

/// The records of the fates `model` gives packets of `size` bytes, one every `period_ns`:
/// per packet, a drop, or a `dup` before each copy after the first and a pass for the last.
/// Delays are rounded to the microsecond (the raw form's unit, RplTrc's resolution);
/// corruption is not recorded (an action trace has no field for it).
#[derive(Debug)]
pub struct ModelRecords<M> {
    model: M,
    size: u32,
    period_ns: u64,
    /// Records to write in all: the last never announces a copy the trace would not hold.
    count: u64,
    pending: VecDeque<Action>,
    packets: u64,
    written: u64,
    dropped: u64,
    duplicated: u64,
}

impl<M: Model> ModelRecords<M> {
    /// The first `count` records of `model`'s fates for packets of `size` bytes every
    /// `period_ns`.
    pub fn new(model: M, size: u32, period_ns: u64, count: u64) -> ModelRecords<M> {
        ModelRecords {
            model,
            size,
            period_ns,
            count,
            pending: VecDeque::new(),
            packets: 0,
            written: 0,
            dropped: 0,
            duplicated: 0,
        }
    }

    /// The next record.
    pub fn next_action(&mut self) -> Action {
        if self.pending.is_empty() {
            let arrival_ns = self.packets * self.period_ns;
            let fate = self.model.decide(&PacketMeta {
                len: self.size,
                flow: Default::default(),
                arrival_ns,
                seq: self.packets,
                ecn: Default::default(),
            });
            self.packets += 1;
            let copies = fate.delivered.as_slice();
            if copies.is_empty() {
                self.dropped += 1;
                self.pending.push_back(Action::Drop);
            }
            for (i, d) in copies.iter().enumerate() {
                let delay_ns = (d.at_ns - arrival_ns + 500) / 1000 * 1000;
                let last = i + 1 == copies.len();
                self.duplicated += u64::from(!last);
                self.pending.push_back(if last {
                    Action::Pass { delay_ns }
                } else {
                    Action::Dup { delay_ns }
                });
            }
        }
        self.written += 1;
        match self.pending.pop_front() {
            Some(Action::Dup { delay_ns }) if self.written == self.count => {
                Action::Pass { delay_ns }
            }
            Some(action) => action,
            // A fate has at least one copy or is a drop: never empty after refilling.
            None => Action::Drop,
        }
    }

    /// Packets offered to the model so far.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Packets the model dropped.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Extra copies the model made.
    pub fn duplicated(&self) -> u64 {
        self.duplicated
    }
}

/// What a model's recorded run came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct RecordsOutcome {
    /// Packets offered to the model.
    pub packets: u64,
    /// Packets it dropped.
    pub dropped: u64,
    /// Extra copies it made.
    pub duplicated: u64,
}

impl fmt::Display for RecordsOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} packets, {} dropped, {} duplicated",
            self.packets, self.dropped, self.duplicated
        )
    }
}

impl<M: Model> Generator for ModelRecords<M> {
    type Outcome = RecordsOutcome;

    fn next_action(&mut self) -> Action {
        ModelRecords::next_action(self)
    }

    fn outcome(&self) -> RecordsOutcome {
        RecordsOutcome {
            packets: self.packets,
            dropped: self.dropped,
            duplicated: self.duplicated,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtemu_model::{netem, LinkModel};

    fn records(model: &str, count: u64) -> (Vec<Action>, ModelRecords<LinkModel>) {
        let cfg = netem::parse(model).unwrap();
        let tables = crate::tables::FileTables::from_env();
        let model = LinkModel::new(&cfg, &tables, 1, 0).unwrap();
        let mut r = ModelRecords::new(model, 1000, 1_000_000, count);
        let out = (0..count).map(|_| r.next_action()).collect();
        (out, r)
    }

    #[test]
    fn a_fixed_delay_passes_every_packet_to_the_microsecond() {
        let (out, r) = records("delay 20ms", 10);
        assert_eq!(
            out,
            vec![
                Action::Pass {
                    delay_ns: 20_000_000
                };
                10
            ]
        );
        assert_eq!((r.packets(), r.dropped(), r.duplicated()), (10, 0, 0));
    }

    #[test]
    fn every_copy_is_announced_but_the_last_record_never_is() {
        let (out, r) = records("delay 1ms duplicate 100%", 5);
        // Two copies per packet: dup, pass, dup, pass, and the fifth record would be a dup
        // whose copy the trace does not hold.
        let dup = Action::Dup {
            delay_ns: 1_000_000,
        };
        let pass = Action::Pass {
            delay_ns: 1_000_000,
        };
        assert_eq!(out, [dup, pass, dup, pass, pass]);
        assert_eq!((r.packets(), r.duplicated()), (3, 3));
        assert_eq!(
            Generator::outcome(&r).to_string(),
            "3 packets, 0 dropped, 3 duplicated"
        );
        let (out, r) = records("loss 100%", 4);
        assert_eq!(out, [Action::Drop; 4]);
        assert_eq!(r.dropped(), 4);
    }
}
