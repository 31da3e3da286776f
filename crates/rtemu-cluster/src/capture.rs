//! `rtemu capture --lab LAB` (and a coordinating server's `GET /v1/labs/{lab}/capture`) of a
//! lab across hosts: each host's agent captures the asked
//! interfaces it holds, all at once, and the captures merge into one pcapng file (interfaces
//! renumbered, packets in timestamp order: each host stamps its own packets with its own
//! clock, so across hosts the order is as good as the hosts' clocks agree). Each agent's
//! capture is read as it streams: Ctrl-C closes the connections, which ends the agents'
//! captures, and what every host sent up to then (its whole pcapng blocks) is merged.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use rtemu_api::client::{Closer, Reply};
use rtemu_topo::pcapng::{self, Capture};

use crate::spread::{ask_each, Spread};

/// How long past its duration (or, with a count alone, at all) an agent's capture may go
/// without sending anything.
const SLACK: Duration = Duration::from_secs(30);

/// The longest capture the agents take (their own limit): what they are asked for when no
/// limit is given and Ctrl-C ends the capture.
const MAX_DURATION: Duration = Duration::from_secs(3600);

/// Captures the interfaces `targets` name (`NODE:IF`, or a link's name for both its ends;
/// none: every interface) of `spread` into the pcapng file `path`, written whole, until
/// `duration` passes or `count` packets were seen on each host, or Ctrl-C (SIGINT), which
/// closes every agent's stream (ending its capture) and keeps what each host sent until
/// then; `on_start` is told the interfaces (`NODE:IF`) first. Returns the packets written
/// (with `count`: the first `count` by time).
pub fn capture_to_file(
    spread: &Spread,
    targets: &[String],
    path: &Path,
    limits: (Option<Duration>, Option<u64>),
    on_start: impl FnOnce(&[String]),
) -> Result<u64> {
    if limits.0.is_some_and(|d| d > MAX_DURATION) {
        bail!("--duration is out of range for a lab across hosts: give at most 3600 seconds");
    }
    let stop = rtemu_control::lab::stop_on_ctrl_c()?;
    let captured = capture(spread, targets, limits, &stop, on_start)?;
    let mut file = rtemu_report::output::Output::create(path, &[])?;
    let written = captured
        .write(&mut file)
        .with_context(|| format!("writing {}", path.display()))?;
    file.commit()?;
    Ok(written)
}

/// What every host of a lab captured, to be written as one file.
pub struct Captured {
    /// Each host's capture.
    captures: Vec<Capture>,
    /// The packets asked for, the first by time.
    count: Option<u64>,
}

impl Captured {
    /// Writes the captures to `out` as one pcapng file (interfaces renumbered, packets in
    /// timestamp order, the first `count` when one was asked for); returns the packets
    /// written.
    pub fn write(self, out: impl Write) -> std::io::Result<u64> {
        pcapng::merge(self.captures, out, self.count)
    }
}

/// Captures the interfaces `targets` name of `spread` (see [`capture_to_file`]) until
/// `duration` passes or `count` packets were seen on each host, or `stop` is set, which closes
/// every agent's stream (ending its capture) and keeps what each host sent until then;
/// `on_start` is told the interfaces (`NODE:IF`) first. A name no node or link has is refused
/// before any agent is asked.
pub fn capture(
    spread: &Spread,
    targets: &[String],
    (duration, count): (Option<Duration>, Option<u64>),
    stop: &AtomicBool,
    on_start: impl FnOnce(&[String]),
) -> Result<Captured> {
    let wanted = rtemu_topo::capture::resolve_targets(&spread.state(), targets)?;
    let mut by_host: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (node, ifname) in &wanted {
        let host = spread.host_of(node).unwrap_or_default();
        by_host
            .entry(host)
            .or_default()
            .push(format!("{node}:{ifname}"));
    }
    let agents = by_host
        .keys()
        .map(|h| spread.agent(h))
        .collect::<Result<Vec<_>, _>>()?;
    let names: Vec<String> = by_host.values().flatten().cloned().collect();
    on_start(&names);
    let timeout = duration.unwrap_or(MAX_DURATION) + SLACK;
    let closers = Mutex::new(Vec::new());
    let finished = AtomicBool::new(false);
    let captures = std::thread::scope(|s| -> Result<Vec<Result<Capture>>> {
        // A stop could not end the captures without it: no agent is asked.
        rtemu_sys::thread::spawn_scoped(s, "rtemu-cap-stop", || {
            close_on_stop(stop, &finished, &closers)
        })?;
        let captures = ask_each(&agents, |a| -> Result<Capture> {
            let mut query = form_urlencoded::Serializer::new(String::new());
            for t in &by_host[a.host.name.as_str()] {
                query.append_pair("target", t);
            }
            // The agents take no capture without a limit: theirs, which a stop cuts short.
            if let Some(d) = duration.or(count.is_none().then_some(MAX_DURATION)) {
                query.append_pair("duration", &d.as_secs_f64().to_string());
            }
            if let Some(c) = count {
                query.append_pair("count", &c.to_string());
            }
            let path = format!("/v1/labs/{}/capture?{}", spread.lab, query.finish());
            let mut reply = a.streaming(&path, timeout)?;
            closers
                .lock()
                .expect("no closer panics")
                .push(reply.closer()?);
            let body = read_until_stopped(&mut reply, stop)
                .with_context(|| format!("host `{}`: reading its agent's capture", a.host.name))?;
            let reply = a.ok(Reply {
                status: reply.status,
                headers: reply.headers,
                body,
            })?;
            pcapng::read_complete(&reply.body)
                .with_context(|| format!("host `{}`: its agent's capture", a.host.name))
        });
        finished.store(true, Ordering::Relaxed);
        Ok(captures)
    })?;
    Ok(Captured {
        captures: captures.into_iter().collect::<Result<Vec<_>>>()?,
        count,
    })
}

/// Reads `body` to its end, or until `stop` is set and its connection closed (see
/// [`close_on_stop`]): then what came so far.
fn read_until_stopped(body: &mut impl Read, stop: &AtomicBool) -> std::io::Result<Vec<u8>> {
    let mut got = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match body.read(&mut buf) {
            Ok(0) => return Ok(got),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(_) if stop.load(Ordering::Relaxed) => return Ok(got),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Once `stop` is set, closes every connection in `closers` (those opened later too) until
/// `finished`: each agent sees its client leave and ends its capture.
fn close_on_stop(stop: &AtomicBool, finished: &AtomicBool, closers: &Mutex<Vec<Closer>>) {
    while !finished.load(Ordering::Relaxed) {
        if stop.load(Ordering::Relaxed) {
            for c in closers.lock().expect("no closer panics").iter() {
                c.close();
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
