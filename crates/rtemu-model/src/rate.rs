//! The rate stage: serialization at a link rate behind a finite drop-tail queue.
//!
//! The queue is computed, not kept: each admitted packet's serialization finishes at
//! `max(arrival, previous finish) + transmission time`, and the backlog at any instant is the
//! set of admitted packets whose serialization has not finished yet (the one on the wire
//! included). Only their finish times and lengths are stored, in a ring bounded by the packet
//! limit, so the stage needs no feedback from I/O and the simulator and the real-time engine
//! compute the same departures.
//!
//! Unlike netem, which adds each packet's transmission time to the *delayed* departure of the
//! packet before it (so jitter and serialization interfere), rtemu serializes first and adds
//! propagation delay and jitter afterwards, as on a real link.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::packet::Nanos;
use crate::units::{Rate, Size, Time};

/// `rate RATE [PACKETOVERHEAD [CELLSIZE [CELLOVERHEAD]]]`, with netem's meanings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateConfig {
    /// Link rate.
    pub rate: Rate,
    /// Bytes added to (or, if negative, taken from) every packet's length, e.g. 24 for an
    /// Ethernet FCS, preamble and inter-frame gap.
    #[serde(default)]
    pub packet_overhead: i32,
    /// Cell size of a cell-based link layer such as ATM (53); 0 for none.
    #[serde(default)]
    pub cell_size: u32,
    /// Bytes added to every cell (5 for ATM).
    #[serde(default)]
    pub cell_overhead: i32,
}

impl RateConfig {
    /// Time to serialize a packet of `len` bytes, in ns, rounded down as netem does.
    #[inline]
    pub fn transmit_ns(&self, len: u32) -> Nanos {
        let mut bytes = (len as i64 + self.packet_overhead as i64).max(0);
        if self.cell_size > 0 {
            let cells = (bytes as u64).div_ceil(self.cell_size as u64) as i64;
            bytes = cells * (self.cell_size as i64 + self.cell_overhead as i64);
        }
        ((bytes.max(0) as u128 * 8 * 1_000_000_000) / self.rate.0 as u128) as Nanos
    }
}

/// The default packet limit of the rate queue, netem's.
pub const DEFAULT_LIMIT: u32 = 1000;

/// The queue bounds of the rate stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueLimits {
    /// Most packets in the backlog.
    pub packets: u32,
    /// Most bytes in the backlog, if bounded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<Size>,
    /// Most time the backlog may take to send: as many bytes as the link's rate sends in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<Time>,
}

impl QueueLimits {
    /// The byte bound these limits give a link of `rate`: the byte limit, or the bytes the
    /// link sends in the time limit, whichever is smaller.
    pub fn bytes_at(&self, rate: Rate) -> Option<u64> {
        let by_time = self
            .time
            .map(|t| (u128::from(rate.0) * u128::from(t.0) / 8_000_000_000) as u64);
        match (self.bytes.map(|b| b.0), by_time) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

impl Default for QueueLimits {
    fn default() -> Self {
        QueueLimits {
            packets: DEFAULT_LIMIT,
            bytes: None,
            time: None,
        }
    }
}

/// The rate stage's state.
#[derive(Debug, Clone)]
pub struct RateQueue {
    cfg: RateConfig,
    limits: QueueLimits,
    /// The byte bound of the limits at the configured rate.
    max_bytes: Option<u64>,
    /// Finish time and length of every packet in the backlog, oldest first. Finish times
    /// increase, so the finished ones are always at the front.
    backlog: VecDeque<(Nanos, u32)>,
    backlog_bytes: u64,
    last_finish: Nanos,
}

impl RateQueue {
    /// An empty queue. Memory for the backlog grows up to the packet limit and is then reused.
    pub fn new(cfg: RateConfig, limits: QueueLimits) -> Self {
        RateQueue {
            cfg,
            limits,
            max_bytes: limits.bytes_at(cfg.rate),
            backlog: VecDeque::with_capacity(limits.packets.min(4096) as usize),
            backlog_bytes: 0,
            last_finish: 0,
        }
    }

    /// Offers a packet of `len` bytes at `now`: returns when its serialization finishes, or
    /// `None` if the backlog is full (drop-tail).
    #[inline]
    pub fn offer(&mut self, now: Nanos, len: u32) -> Option<Nanos> {
        while let Some(&(finish, l)) = self.backlog.front() {
            if finish > now {
                break;
            }
            self.backlog.pop_front();
            self.backlog_bytes -= l as u64;
        }
        let over_bytes = self
            .max_bytes
            .is_some_and(|b| self.backlog_bytes + len as u64 > b);
        if self.backlog.len() >= self.limits.packets as usize || over_bytes {
            return None;
        }
        let finish = self.last_finish.max(now) + self.cfg.transmit_ns(len);
        self.last_finish = finish;
        self.backlog.push_back((finish, len));
        self.backlog_bytes += len as u64;
        Some(finish)
    }

    /// Changes the link's rate from now on, keeping the backlog. The rate queue decides each
    /// packet's finish at its offer, and those finishes have been handed out (the engine holds
    /// the frames until then), so packets already admitted keep them: the new rate serializes
    /// the packets offered next, behind the backlog, and the byte bound of a time limit
    /// (`limit 500ms`) follows the new rate at once. A real link would also serialize the
    /// backlog's remaining bytes at the new rate; here the backlog drains at the rate it was
    /// admitted at, so the change reaches the delay one backlog later.
    pub fn set_rate(&mut self, rate: crate::units::Rate) {
        self.cfg.rate = rate;
        self.max_bytes = self.limits.bytes_at(rate);
    }

    /// Packets in the backlog after the last offer.
    pub fn backlog_packets(&self) -> usize {
        self.backlog.len()
    }

    /// Bytes in the backlog after the last offer.
    pub fn backlog_bytes(&self) -> u64 {
        self.backlog_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(bits: u64) -> RateConfig {
        RateConfig {
            rate: Rate(bits),
            packet_overhead: 0,
            cell_size: 0,
            cell_overhead: 0,
        }
    }

    #[test]
    fn transmission_time_follows_netem_arithmetic() {
        // 1000 bytes at 8 Mbit/s: 1 ms.
        assert_eq!(cfg(8_000_000).transmit_ns(1000), 1_000_000);
        // ATM: 100 + 10 overhead = 110 bytes → 3 cells of 48 → 3 × 53 = 159 bytes.
        let atm = RateConfig {
            rate: Rate(8_000_000),
            packet_overhead: 10,
            cell_size: 48,
            cell_overhead: 5,
        };
        assert_eq!(atm.transmit_ns(100), 159_000);
        // A negative overhead larger than the packet never gives a negative time.
        let neg = RateConfig {
            packet_overhead: -2000,
            ..cfg(8_000_000)
        };
        assert_eq!(neg.transmit_ns(100), 0);
    }

    #[test]
    fn back_to_back_packets_queue_and_the_limit_drops_tail() {
        let mut q = RateQueue::new(
            cfg(8_000_000),
            QueueLimits {
                packets: 3,
                ..QueueLimits::default()
            },
        );
        // Four 1000-byte packets at t = 0: 1 ms each; the fourth finds 3 in the backlog.
        assert_eq!(q.offer(0, 1000), Some(1_000_000));
        assert_eq!(q.offer(0, 1000), Some(2_000_000));
        assert_eq!(q.offer(0, 1000), Some(3_000_000));
        assert_eq!(q.offer(0, 1000), None);
        // At 1 ms the first has left: room again, and it queues behind the third.
        assert_eq!(q.offer(1_000_000, 1000), Some(4_000_000));
        // An idle link starts serializing at arrival.
        assert_eq!(q.offer(10_000_000, 1000), Some(11_000_000));
        assert_eq!(q.backlog_packets(), 1);
    }

    #[test]
    fn byte_limit_drops_tail() {
        let limits = QueueLimits {
            packets: 100,
            bytes: Some(Size(2500)),
            time: None,
        };
        let mut q = RateQueue::new(cfg(8_000_000), limits);
        assert!(q.offer(0, 1000).is_some());
        assert!(q.offer(0, 1000).is_some());
        assert!(q.offer(0, 1000).is_none());
        assert!(q.offer(0, 500).is_some());
        assert_eq!(q.backlog_bytes(), 2500);
    }

    /// `limit 5ms` at 8 Mbit/s holds 5000 bytes: five 1000-byte packets queue, the sixth is
    /// dropped; with a byte limit too, the smaller bound holds.
    #[test]
    fn time_limit_holds_what_the_rate_sends_in_that_time() {
        let limits = QueueLimits {
            packets: u32::MAX,
            bytes: None,
            time: Some(Time(5_000_000)),
        };
        assert_eq!(limits.bytes_at(Rate(8_000_000)), Some(5000));
        assert_eq!(limits.bytes_at(Rate(80_000_000)), Some(50_000));
        let mut q = RateQueue::new(cfg(8_000_000), limits);
        for i in 0..5 {
            assert_eq!(q.offer(0, 1000), Some((i + 1) * 1_000_000));
        }
        assert_eq!(q.offer(0, 1000), None);
        // The first left after 1 ms: its room is free again, and the one queued waits 5 ms.
        assert_eq!(q.offer(1_000_000, 1000), Some(6_000_000));
        let both = QueueLimits {
            bytes: Some(Size(3000)),
            ..limits
        };
        assert_eq!(both.bytes_at(Rate(8_000_000)), Some(3000));
    }

    /// A rate change keeps the backlog and its promised finishes: packets offered after it
    /// queue behind them and serialize at the new rate, and a time limit's byte bound follows.
    #[test]
    fn a_rate_change_keeps_the_backlog_and_applies_to_the_next_packets() {
        let limits = QueueLimits {
            packets: 100,
            bytes: None,
            time: Some(Time(4_000_000)),
        };
        let mut q = RateQueue::new(cfg(8_000_000), limits);
        // 4 ms at 8 Mbit/s: 4000 bytes; three 1000-byte packets queue, 1 ms each.
        for i in 1..=3 {
            assert_eq!(q.offer(0, 1000), Some(i * 1_000_000));
        }
        // At 0.5 ms the link slows to 4 Mbit/s: 4 ms hold 2000 bytes now, and 3000 are queued.
        q.set_rate(Rate(4_000_000));
        assert_eq!((q.backlog_packets(), q.backlog_bytes()), (3, 3000));
        assert_eq!(q.offer(500_000, 1000), None);
        // At 2 ms one is left on the wire: the next queues behind it and takes 2 ms.
        assert_eq!(q.offer(2_000_000, 1000), Some(5_000_000));
        // Back to 8 Mbit/s: 1 ms again, behind what the slower rate queued.
        q.set_rate(Rate(8_000_000));
        assert_eq!(q.offer(2_000_000, 1000), Some(6_000_000));
    }
}
