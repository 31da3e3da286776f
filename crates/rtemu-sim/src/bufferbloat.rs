//! Bufferbloat and its cures, in virtual time: the same upload and the same "game" flow cross a
//! 10 Mbit/s link behind each queue rtemu models. `rtemu-bench aqm` tabulates what each queue
//! did; `rtemu demo bufferbloat` also plots the game flow's delay over time.
//!
//! The models are driven in time order as the simulator drives them (departures due by an
//! arrival first), so every figure is a function of the seed: the same on any machine. The
//! simulator replays traffic and has no TCP, so the upload is unresponsive: Poisson arrivals of
//! 1500-byte frames 20 % over the link's rate, the overload a bulk TCP flow presents to a
//! queue between its window's growth and its loss. That is the hardest case for a queue: a
//! responsive flow backs off when the queue drops or marks, this one never does. A lab with
//! real TCP is the root test `aqm_lab` in `crates/rtemu/tests`.

use rtemu_model::link::{LinkError, NoTables, RateChangeError};
use rtemu_model::netem::{self, NetemError};
use rtemu_model::units::Rate;
use rtemu_model::{FlowKey, LinkConfig, LinkModel, Model, Outcome, PacketMeta, Stream};
use serde::Serialize;

/// One queue the scenario compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Queue {
    /// Its name in tables and legends.
    pub name: &'static str,
    /// Its words after [`LINK`] in the link's netem text.
    pub words: &'static str,
}

/// The link every queue sits on.
pub const LINK: &str = "rate 10mbit";

/// The queues compared, in the order tables and legends list them.
pub const QUEUES: [Queue; 7] = [
    Queue {
        name: "drop-tail, 500 ms",
        words: "limit 500ms",
    },
    Queue {
        name: "drop-tail, 1000 packets",
        words: "limit 1000",
    },
    Queue {
        name: "CoDel",
        words: "codel",
    },
    Queue {
        name: "FQ-CoDel",
        words: "fq_codel",
    },
    Queue {
        name: "PIE",
        words: "pie",
    },
    Queue {
        name: "DOCSIS-PIE",
        words: "pie docsis",
    },
    Queue {
        name: "DualPI2",
        words: "dualpi2",
    },
];

/// The link's rate, bit/s.
pub const RATE: f64 = 10e6;
/// The upload's frames and their mean rate: 1000 pps of 1500 bytes, 12 Mbit/s.
pub const UPLOAD_BYTES: u32 = 1500;
/// The upload's mean packet rate.
pub const UPLOAD_PPS: f64 = 1000.0;
/// The game flow: 50 pps of 100 bytes, evenly spaced.
pub const GAME_BYTES: u32 = 100;
/// The game flow's spacing, ns.
pub const GAME_GAP_NS: u64 = 20_000_000;
/// Simulated time, s.
pub const SECONDS: u64 = 60;
/// The start of what the summary measures, ns: the queues have settled by then.
pub const MEASURED_FROM_NS: u64 = 10_000_000_000;

/// Why a queue's run could not start.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// Its netem text does not parse.
    #[error("`{text}`: {source}")]
    Netem {
        /// The text.
        text: String,
        /// Why.
        source: NetemError,
    },
    /// The link refused a rate change.
    #[error("{0}")]
    Rate(#[from] RateChangeError),
    /// Its model cannot be built.
    #[error("`{text}`: {source}")]
    Link {
        /// The text.
        text: String,
        /// Why.
        source: LinkError,
    },
}

/// One packet of a run: which flow, when it arrived, and when it left (`None`: dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet {
    /// Whether it belongs to the game flow (else the upload).
    pub game: bool,
    /// When it arrived, ns.
    pub arrival_ns: u64,
    /// When it left the link, ns; `None` when the queue dropped it.
    pub left_ns: Option<u64>,
}

/// What one queue did: every packet of both flows, in arrival order.
#[derive(Debug, Clone)]
pub struct Run {
    /// The queue.
    pub queue: Queue,
    /// The link's netem text.
    pub model: String,
    /// The packets, by arrival.
    pub packets: Vec<Packet>,
}

/// A run's figures over the measured time (from [`MEASURED_FROM_NS`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// The queue's name.
    pub queue: &'static str,
    /// The link's netem text.
    pub model: String,
    /// The game flow's time through the link (its wait and its own 80 µs serialization), ms
    /// (nearest-rank percentiles).
    pub game_p50_ms: f64,
    /// Its 99th percentile, ms.
    pub game_p99_ms: f64,
    /// Its maximum, ms.
    pub game_max_ms: f64,
    /// Game frames the queue dropped, %.
    pub game_lost_percent: f64,
    /// The upload's delivered rate, Mbit/s.
    pub upload_mbit_s: f64,
    /// Upload frames dropped, %.
    pub upload_dropped_percent: f64,
}

/// A scenario's link: its model, built from its netem text and the configuration that text
/// parses to (a scenario reads the queue's settings, its delay target, from it).
#[derive(Debug)]
pub struct Link {
    /// The model, to drive.
    pub model: LinkModel,
    /// What its text parses to.
    pub config: LinkConfig,
    /// Its netem text.
    pub text: String,
}

impl Link {
    /// The link `text` says, with `seed`.
    pub fn new(text: &str, seed: u64) -> Result<Link, ScenarioError> {
        let text = text.to_string();
        let config = netem::parse(&text).map_err(|source| ScenarioError::Netem {
            text: text.clone(),
            source,
        })?;
        let model =
            LinkModel::new(&config, &NoTables, seed, 0).map_err(|source| ScenarioError::Link {
                text: text.clone(),
                source,
            })?;
        Ok(Link {
            model,
            config,
            text,
        })
    }

    /// The link `rate` says (netem words, [`LINK`] for most scenarios) behind `queue`, with
    /// `seed`: the set-up of every scenario's run.
    pub fn queued(rate: &str, queue: Queue, seed: u64) -> Result<Link, ScenarioError> {
        Link::new(&format!("{rate} {}", queue.words), seed)
    }
}

/// Drives `m` with `arrivals` (in time order: `(arrival ns, length, flow)`) as the simulator
/// does, departures due by an arrival first; when each packet left, in arrival order (`None`:
/// dropped).
pub fn drive(
    m: &mut LinkModel,
    arrivals: impl Iterator<Item = (u64, u32, FlowKey)>,
) -> Vec<Option<u64>> {
    match drive_with(m, &mut Replay(arrivals.peekable()), &[]) {
        Ok(left) => left,
        Err(e) => unreachable!("no rate change to refuse: {e}"),
    }
}

/// What offers packets to a driven link: a replay of arrivals fixed in advance, or senders
/// that answer what the link did with their packets (a congestion controller).
pub trait Sender {
    /// When the sender next acts, if it ever will again.
    fn next_ns(&mut self) -> Option<u64>;
    /// Acts at [`Sender::next_ns`]: the packet it offers then (length, flow), if any. A sender
    /// may act without offering one (it took an acknowledgement).
    fn act(&mut self) -> Option<(u32, FlowKey)>;
    /// The link decided at `now` what becomes of packet `seq` (numbered from 0 in the order
    /// offered): it leaves the link at `left`, or, `None`, it was dropped.
    fn told(&mut self, seq: u64, left: Option<u64>, now: u64);
}

/// Arrivals fixed in advance, in time order.
struct Replay<I: Iterator<Item = (u64, u32, FlowKey)>>(std::iter::Peekable<I>);

impl<I: Iterator<Item = (u64, u32, FlowKey)>> Sender for Replay<I> {
    fn next_ns(&mut self) -> Option<u64> {
        self.0.peek().map(|a| a.0)
    }

    fn act(&mut self) -> Option<(u32, FlowKey)> {
        self.0.next().map(|(_, len, flow)| (len, flow))
    }

    fn told(&mut self, _: u64, _: Option<u64>, _: u64) {}
}

/// Drives `m` with what `sender` offers, changing the link's rate at each of `changes` (time,
/// rate; in time order), in time order as the simulator drives a model. At one instant a rate
/// change comes first (a packet that starts serializing then takes the new rate), then the
/// departures due, then the sender. When each packet left, in the order offered (`None`:
/// dropped); an error if the link refuses a rate.
pub fn drive_with(
    m: &mut LinkModel,
    sender: &mut impl Sender,
    changes: &[(u64, Rate)],
) -> Result<Vec<Option<u64>>, RateChangeError> {
    let mut left: Vec<Option<u64>> = Vec::new();
    let mut changes = changes.iter().peekable();
    loop {
        let (arrival, departure) = (sender.next_ns(), m.next_departure());
        let soonest = match (arrival, departure) {
            (None, None) => return Ok(left),
            (a, d) => a.unwrap_or(u64::MAX).min(d.unwrap_or(u64::MAX)),
        };
        if let Some(&(_, rate)) = changes.next_if(|c| c.0 <= soonest) {
            m.set_rate(rate)?;
        } else if departure == Some(soonest) {
            if let Some(d) = m.depart() {
                let at = match d.outcome {
                    Outcome::Delivered(del) => Some(del.at_ns),
                    Outcome::Dropped(_) => None,
                };
                left[d.seq as usize] = at;
                sender.told(d.seq, at, soonest);
            }
        } else if let Some((len, flow)) = sender.act() {
            let p = PacketMeta {
                len,
                flow,
                arrival_ns: soonest,
                seq: left.len() as u64,
                ecn: Default::default(),
            };
            let fate = m.decide(&p);
            let at = fate.delivered.as_slice().first().map(|d| d.at_ns);
            left.push(at);
            // A copy the queue holds is told of when it leaves.
            if fate.held().next().is_none() {
                sender.told(p.seq, at, soonest);
            }
        }
    }
}

/// A flow of the scenarios: UDP (game, bursts) or TCP (bulk) from `port`.
pub fn flow(port: u16, udp: bool) -> FlowKey {
    FlowKey {
        src_port: port,
        protocol: if udp { 17 } else { 6 },
        ..FlowKey::default()
    }
}

/// Runs the upload and the game flow through [`LINK`] behind `queue`, with `seed`.
pub fn run(queue: Queue, seed: u64) -> Result<Run, ScenarioError> {
    let Link {
        model: mut m,
        text: model,
        ..
    } = Link::queued(LINK, queue, seed)?;
    let mut gaps = Stream::new(seed, 0x4255_4c4b); // "BULK"
    let end = SECONDS * 1_000_000_000;
    let (mut upload_at, mut game_at) = (0u64, 3_000_000u64);
    let arrivals = std::iter::from_fn(|| {
        if upload_at >= end && game_at >= end {
            return None;
        }
        let game = game_at <= upload_at;
        if game {
            game_at += GAME_GAP_NS;
            Some((game_at - GAME_GAP_NS, true))
        } else {
            let at = upload_at;
            upload_at += (-gaps.open01().ln() / UPLOAD_PPS * 1e9) as u64;
            Some((at, false))
        }
    });
    let mut kinds = Vec::new();
    let left = drive(
        &mut m,
        arrivals.map(|(at, game)| {
            kinds.push((at, game));
            match game {
                true => (at, GAME_BYTES, flow(7000, true)),
                false => (at, UPLOAD_BYTES, flow(5201, false)),
            }
        }),
    );
    let packets = kinds
        .into_iter()
        .zip(left)
        .map(|((arrival_ns, game), left_ns)| Packet {
            game,
            arrival_ns,
            left_ns,
        })
        .collect();
    Ok(Run {
        queue,
        model,
        packets,
    })
}

/// Every queue of [`QUEUES`], in order, with `seed`.
pub fn run_all(seed: u64) -> Result<Vec<Run>, ScenarioError> {
    QUEUES.iter().map(|&q| run(q, seed)).collect()
}

/// The `p`-quantile of sorted `xs`, nearest rank; 0 for none.
pub(crate) fn percentile(xs: &[u64], p: f64) -> u64 {
    match xs.len() {
        0 => 0,
        n => xs[((n as f64 * p).ceil() as usize).clamp(1, n) - 1],
    }
}

impl Run {
    /// Each game frame the link delivered, over the whole run: (its arrival, s; its time
    /// through the link, ms). A dropped frame has no point.
    pub fn game_delays(&self) -> impl Iterator<Item = (f64, f64)> + '_ {
        self.packets
            .iter()
            .filter(|p| p.game)
            .filter_map(|p| p.left_ns.map(|t| (p.arrival_ns, t - p.arrival_ns)))
            .map(|(at, delay)| (at as f64 / 1e9, delay as f64 / 1e6))
    }

    /// The game flow's delays and the upload's fate over the measured time.
    pub fn summary(&self) -> Summary {
        let measured = self
            .packets
            .iter()
            .filter(|p| p.arrival_ns >= MEASURED_FROM_NS);
        let (game, upload): (Vec<&Packet>, Vec<&Packet>) = measured.partition(|p| p.game);
        let mut delays: Vec<u64> = game
            .iter()
            .filter_map(|p| p.left_ns.map(|t| t - p.arrival_ns))
            .collect();
        delays.sort_unstable();
        let ms = |ns: u64| ns as f64 / 1e6;
        let lost = |ps: &[&Packet]| {
            100.0 * ps.iter().filter(|p| p.left_ns.is_none()).count() as f64
                / ps.len().max(1) as f64
        };
        let upload_bytes =
            upload.iter().filter(|p| p.left_ns.is_some()).count() as f64 * f64::from(UPLOAD_BYTES);
        let seconds = (SECONDS * 1_000_000_000 - MEASURED_FROM_NS) as f64 / 1e9;
        Summary {
            queue: self.queue.name,
            model: self.model.clone(),
            game_p50_ms: ms(percentile(&delays, 0.5)),
            game_p99_ms: ms(percentile(&delays, 0.99)),
            game_max_ms: ms(delays.last().copied().unwrap_or(0)),
            game_lost_percent: lost(&game),
            upload_mbit_s: upload_bytes * 8.0 / seconds / 1e6,
            upload_dropped_percent: lost(&upload),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(name: &str) -> Queue {
        *QUEUES.iter().find(|q| q.name == name).unwrap()
    }

    /// A scenario's link is its rate's words and then its queue's, parsed once: the model and
    /// the configuration come from that one text (CoDel's default 5 ms target is there), and
    /// a text that does not parse is an error that quotes it.
    #[test]
    fn a_queued_link_is_the_rate_then_the_queue() {
        let link = Link::queued("rate 100mbit", queue("CoDel"), 1).unwrap();
        assert_eq!(link.text, "rate 100mbit codel");
        let codel = link.config.codel.expect("CoDel's settings");
        assert_eq!(codel.target.0, 5_000_000);
        let bad = Queue {
            name: "bad",
            words: "codel target",
        };
        let err = Link::queued(LINK, bad, 1).unwrap_err();
        assert!(
            matches!(&err, ScenarioError::Netem { text, .. } if text == "rate 10mbit codel target"),
            "{err}"
        );
    }

    /// The table's two ends, and that a seed decides every figure: behind 500 ms of drop-tail
    /// the game waits about 500 ms, behind FQ-CoDel about one upload frame's serialization.
    #[test]
    fn drop_tail_bloats_fq_codel_cures_and_the_seed_decides() {
        let bloated = run(queue("drop-tail, 500 ms"), 5).unwrap().summary();
        assert!(
            (450.0..=500.5).contains(&bloated.game_p50_ms),
            "{bloated:?}"
        );
        let cured = run(queue("FQ-CoDel"), 5).unwrap().summary();
        assert!(cured.game_p99_ms < 2.5, "{cured:?}");
        assert_eq!(cured.game_lost_percent, 0.0);
        // Both keep the link busy; the overload is dropped.
        for r in [&bloated, &cured] {
            assert!(
                r.upload_mbit_s > 9.5 && r.upload_dropped_percent > 10.0,
                "{r:?}"
            );
        }
        let again = run(queue("FQ-CoDel"), 5).unwrap().summary();
        assert_eq!(cured, again);
        let other = run(queue("FQ-CoDel"), 6).unwrap().summary();
        assert_ne!(cured, other);
    }

    /// The delays over time are the packets' own, game frames only, and the summary's
    /// percentiles are taken from the same delays.
    #[test]
    fn game_delays_are_each_delivered_game_frames_time_through_the_link() {
        let r = run(queue("drop-tail, 500 ms"), 3).unwrap();
        let delays: Vec<(f64, f64)> = r.game_delays().collect();
        let delivered = r
            .packets
            .iter()
            .filter(|p| p.game && p.left_ns.is_some())
            .count();
        assert_eq!(delays.len(), delivered);
        // 50 pps for 60 s.
        assert_eq!(r.packets.iter().filter(|p| p.game).count(), 3000);
        assert_eq!(delays[0].0, 0.003);
        // The queue fills over the first seconds: the first frame waits little, later ones
        // about the buffer's 500 ms.
        assert!(delays[0].1 < 2.0 && delays[delays.len() - 1].1 > 400.0);
        let mut measured: Vec<f64> = delays
            .iter()
            .filter(|(t, _)| *t >= MEASURED_FROM_NS as f64 / 1e9)
            .map(|&(_, d)| d)
            .collect();
        measured.sort_by(f64::total_cmp);
        assert_eq!(r.summary().game_max_ms, *measured.last().unwrap());
    }
}
