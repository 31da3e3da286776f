//! The per-packet action trace that two captures of the same packets imply: one taken where
//! they were sent, one where they arrived. Recording a real path this way and replaying the
//! trace with `rtemu sim --trace` reproduces its delays, drops and duplicates packet by packet.
//!
//! Packets are matched by content: a hash of the IP addresses, the protocol and everything
//! after the IP header, so that what routers change on the way (TTL or hop limit, the IPv4
//! header checksum, the link-layer header) does not matter. A non-IP frame is hashed whole.
//! Each receiver copy goes to the latest sender packet with the same content sent at or
//! before it (the first one, if it arrived before any was sent); a sender packet with no copy
//! was dropped, one with several was duplicated. The receiver's clock must be the sender's
//! (captures on one machine, or synchronised clocks); a copy seen before its packet was sent
//! gets a delay of zero and is counted.
//!
//! The receiver capture is held in memory as one timestamp per frame; the sender capture
//! streams twice.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use rtemu_model::wire::ip_packet;
use rtemu_trace::Action;

use crate::source::{FrameSource, SourceError};

/// What matching two captures found; as words, what `rtemu trace convert --receiver` says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct PairStats {
    /// Packets in the sender capture.
    pub sent: u64,
    /// Sender packets that arrived at least once.
    pub delivered: u64,
    /// Sender packets that never arrived.
    pub dropped: u64,
    /// Extra copies beyond the first.
    pub duplicates: u64,
    /// Receiver frames that match no sent packet (other traffic), ignored.
    pub unmatched: u64,
    /// Copies seen before their packet was sent, given a delay of zero.
    pub negative_delays: u64,
}

impl std::fmt::Display for PairStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} packets sent: {} delivered, {} dropped, {} extra copies; {} receiver frames \
             matched nothing; {} copies seen before they were sent (delay 0)",
            self.sent,
            self.delivered,
            self.dropped,
            self.duplicates,
            self.unmatched,
            self.negative_delays
        )
    }
}

/// The content key of a frame.
fn content_key(link: u32, frame: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    match ip_packet(link, frame) {
        Some(ip) if ip.first().is_some_and(|b| b >> 4 == 4) && ip.len() >= 20 => {
            let header = ((ip[0] & 0x0f) as usize * 4).min(ip.len());
            (ip[9], &ip[12..20], &ip[header..]).hash(&mut h);
        }
        Some(ip) if ip.first().is_some_and(|b| b >> 4 == 6) && ip.len() >= 40 => {
            (ip[6], &ip[8..40], &ip[40..]).hash(&mut h);
        }
        _ => frame.hash(&mut h),
    }
    h.finish()
}

/// Reads every frame of `source` as `(content key, timestamp)`, in order.
fn for_each_frame(
    source: &mut dyn FrameSource,
    mut f: impl FnMut(u64, u64),
) -> Result<(), SourceError> {
    let link = source.link_type();
    while let Some(frame) = source.next_frame()? {
        f(content_key(link, frame.data), frame.ts_ns);
    }
    Ok(())
}

/// Matches the two captures and gives each sender packet's actions to `emit`, in sender order:
/// `Drop`, `Pass(delay)`, or `Dup(d₁) … Dup(dₙ₋₁) Pass(dₙ)` for `n` copies. `sender` is read
/// twice, so it comes as a function that opens it.
pub fn actions_from_captures(
    mut open_sender: impl FnMut() -> Result<Box<dyn FrameSource>, SourceError>,
    receiver: &mut dyn FrameSource,
    mut emit: impl FnMut(Action),
) -> Result<PairStats, SourceError> {
    let mut stats = PairStats::default();
    // For each content: the send times of its packets, in order.
    let mut sends: HashMap<u64, Vec<u64>> = HashMap::new();
    for_each_frame(open_sender()?.as_mut(), |key, ts| {
        sends.entry(key).or_default().push(ts)
    })?;
    // For each content and each of its packets: the arrival times of its copies.
    let mut arrivals: HashMap<u64, Vec<Vec<u64>>> = sends
        .iter()
        .map(|(k, v)| (*k, vec![Vec::new(); v.len()]))
        .collect();
    for_each_frame(receiver, |key, ts| {
        match (sends.get(&key), arrivals.get_mut(&key)) {
            (Some(times), Some(copies)) => {
                let owner = times.partition_point(|&sent| sent <= ts).saturating_sub(1);
                copies[owner].push(ts);
            }
            _ => stats.unmatched += 1,
        }
    })?;
    let mut seen: HashMap<u64, usize> = HashMap::new();
    for_each_frame(open_sender()?.as_mut(), |key, sent| {
        stats.sent += 1;
        let index = seen.entry(key).or_default();
        let copies = arrivals
            .get(&key)
            .map(|c| c[*index].as_slice())
            .unwrap_or(&[]);
        *index += 1;
        if copies.is_empty() {
            stats.dropped += 1;
            emit(Action::Drop);
            return;
        }
        stats.delivered += 1;
        stats.duplicates += copies.len() as u64 - 1;
        for (i, &arrived) in copies.iter().enumerate() {
            stats.negative_delays += (arrived < sent) as u64;
            let delay_ns = arrived.saturating_sub(sent);
            emit(if i + 1 < copies.len() {
                Action::Dup { delay_ns }
            } else {
                Action::Pass { delay_ns }
            });
        }
    })?;
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{Frame, Progress, ProgressUnit};

    /// Frames from a list, each `(timestamp, payload byte)`: an IPv4/UDP frame whose payload
    /// is that byte, with a TTL that depends on `ttl` (as routers change it).
    struct List {
        frames: Vec<(u64, u8)>,
        ttl: u8,
        next: usize,
        buf: Vec<u8>,
    }

    impl List {
        fn boxed(frames: &[(u64, u8)], ttl: u8) -> Box<dyn FrameSource> {
            Box::new(List {
                frames: frames.to_vec(),
                ttl,
                next: 0,
                buf: Vec::new(),
            })
        }
    }

    impl FrameSource for List {
        fn link_type(&self) -> u32 {
            crate::source::LINKTYPE_ETHERNET
        }

        fn next_frame(&mut self) -> Result<Option<Frame<'_>>, SourceError> {
            let Some(&(ts, byte)) = self.frames.get(self.next) else {
                return Ok(None);
            };
            self.next += 1;
            self.buf = vec![0u8; 14 + 20 + 8 + 1];
            self.buf[12..14].copy_from_slice(&[0x08, 0x00]);
            self.buf[14] = 0x45;
            self.buf[14 + 8] = self.ttl;
            self.buf[14 + 9] = 17;
            self.buf[14 + 10] = self.ttl ^ 0x5a; // the header checksum changes with the TTL
            self.buf[42] = byte;
            Ok(Some(Frame {
                ts_ns: ts,
                data: &self.buf,
                orig_len: self.buf.len() as u32,
            }))
        }

        fn progress(&self) -> Progress {
            Progress {
                done: self.next as u64,
                total: None,
                unit: ProgressUnit::Bytes,
            }
        }
    }

    #[test]
    fn matches_copies_by_content_across_routers() {
        // Sent: a, b, c, a (again, later), d. Received (TTL changed): a after 5, c twice,
        // the second a after 1, and an unrelated frame z. b and d are lost.
        let sent = [
            (100, b'a'),
            (200, b'b'),
            (300, b'c'),
            (400, b'a'),
            (500, b'd'),
        ];
        let received = [
            (105, b'a'),
            (310, b'c'),
            (330, b'c'),
            (401, b'a'),
            (450, b'z'),
        ];
        let mut actions = Vec::new();
        let stats = actions_from_captures(
            || Ok(List::boxed(&sent, 64)),
            List::boxed(&received, 61).as_mut(),
            |a| actions.push(a),
        )
        .unwrap();
        assert_eq!(
            actions,
            vec![
                Action::Pass { delay_ns: 5 },
                Action::Drop,
                Action::Dup { delay_ns: 10 },
                Action::Pass { delay_ns: 30 },
                Action::Pass { delay_ns: 1 },
                Action::Drop,
            ]
        );
        assert_eq!(
            stats,
            PairStats {
                sent: 5,
                delivered: 3,
                dropped: 2,
                duplicates: 1,
                unmatched: 1,
                negative_delays: 0
            }
        );
        assert_eq!(
            stats.to_string(),
            "5 packets sent: 3 delivered, 2 dropped, 1 extra copies; 1 receiver frames matched \
             nothing; 0 copies seen before they were sent (delay 0)"
        );
    }
}
