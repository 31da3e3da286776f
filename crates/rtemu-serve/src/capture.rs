//! `GET /v1/labs/{lab}/capture`: packets of a lab's interfaces as a pcapng download, written
//! while they are captured. The capture (blocking, on a thread of its own) writes into a
//! channel the response body reads; when the client leaves, the body is dropped and the
//! capture stops.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use rtemu_cluster::spread::Spread;
use rtemu_topo::state::State;
use tokio::sync::mpsc;

use crate::error::ApiError;

/// The most packets one capture may ask for.
pub const MAX_COUNT: u64 = 10_000_000;

/// The longest capture, seconds.
pub const MAX_DURATION: f64 = 3600.0;

/// What a capture request asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// `NODE:IF` or link names (none: every interface).
    pub targets: Vec<String>,
    /// Stop after this many packets.
    pub count: Option<u64>,
    /// Stop after this long.
    pub duration: Option<Duration>,
}

/// Reads a capture request from a query string's pairs: `target` (repeated), `count`,
/// `duration`; at least one of the last two.
pub fn parse(pairs: &[(String, String)]) -> Result<Request, ApiError> {
    let mut req = Request {
        targets: Vec::new(),
        count: None,
        duration: None,
    };
    for (k, v) in pairs {
        match k.as_str() {
            "target" => req.targets.push(v.clone()),
            "count" => {
                req.count = Some(
                    v.parse::<u64>()
                        .ok()
                        .filter(|c| (1..=MAX_COUNT).contains(c))
                        .ok_or_else(|| {
                            ApiError::bad_request(format!(
                                "count {} is out of range: give a number of packets from 1 \
                                 to {MAX_COUNT}",
                                rtemu_sys::terminal::quoted(v)
                            ))
                        })?,
                )
            }
            "duration" => {
                let s = v
                    .parse::<f64>()
                    .ok()
                    .filter(|s| *s > 0.0 && *s <= MAX_DURATION)
                    .ok_or_else(|| {
                        ApiError::bad_request(format!(
                            "duration {} is out of range: give seconds above 0, at most \
                             {MAX_DURATION}",
                            rtemu_sys::terminal::quoted(v)
                        ))
                    })?;
                req.duration = Some(Duration::from_secs_f64(s));
            }
            other => {
                return Err(ApiError::bad_request(format!(
                    "unknown query parameter {}: a capture takes target, count and duration",
                    rtemu_sys::terminal::quoted(other)
                )))
            }
        }
    }
    if req.count.is_none() && req.duration.is_none() {
        return Err(ApiError::bad_request(
            "a capture needs a limit: give count (packets) or duration (seconds), or both",
        ));
    }
    Ok(req)
}

/// Hands what the capture writes to the response body, chunk by chunk; fails (ending the
/// capture) once the body is gone.
struct ToBody(mpsc::Sender<Bytes>);

impl std::io::Write for ToBody {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .blocking_send(Bytes::copy_from_slice(buf))
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::BrokenPipe))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Sets its flag when dropped: the response body holds it, so a client that leaves stops the
/// capture even while no packet comes.
pub struct StopOnDrop(pub Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Starts capturing `targets` (checked against the lab) of lab `state` on a blocking thread;
/// returns the channel of the pcapng file's chunks and the flag that stops it.
pub fn start(
    state: State,
    targets: Vec<(String, String)>,
    req: &Request,
) -> (mpsc::Receiver<Bytes>, StopOnDrop) {
    let (tx, rx) = mpsc::channel(16);
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let (count, duration) = (req.count, req.duration);
    tokio::task::spawn_blocking(move || {
        let limits = rtemu_topo::capture::Limits {
            duration,
            count,
            stop: &flag,
        };
        if let Err(e) = rtemu_topo::capture::capture(&state, &targets, ToBody(tx), &limits) {
            // A client that left is not worth a word.
            if !flag.load(Ordering::Relaxed) {
                eprintln!(
                    "rtemu serve: capture in lab {}: {}",
                    state.lab,
                    rtemu_control::error::message(&e)
                );
            }
        }
    });
    (rx, StopOnDrop(stop))
}

/// Starts capturing what `req` asks of lab `spread` across hosts (its targets already checked
/// against the lab) on a blocking thread: each host's agent captures its interfaces, and the
/// merged file goes to the channel once every agent's capture ended; the flag, set when the
/// client leaves, closes the agents' streams, which ends their captures.
pub fn start_across(spread: Spread, req: &Request) -> (mpsc::Receiver<Bytes>, StopOnDrop) {
    let (tx, rx) = mpsc::channel(16);
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let (targets, limits) = (req.targets.clone(), (req.duration, req.count));
    tokio::task::spawn_blocking(move || {
        let captured = rtemu_cluster::capture::capture(&spread, &targets, limits, &flag, |_| {});
        let written = captured.and_then(|c| Ok(c.write(ToBody(tx))?));
        if let Err(e) = written {
            if !flag.load(Ordering::Relaxed) {
                eprintln!(
                    "rtemu serve: capture in lab {} across hosts: {}",
                    spread.lab,
                    rtemu_control::error::message(e.as_ref())
                );
            }
        }
    });
    (rx, StopOnDrop(stop))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(q: &[(&str, &str)]) -> Vec<(String, String)> {
        q.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn queries_need_a_limit_in_range() {
        let r = parse(&pairs(&[
            ("target", "uplink"),
            ("target", "a:eth0"),
            ("count", "10"),
        ]))
        .unwrap();
        assert_eq!(r.targets, ["uplink", "a:eth0"]);
        assert_eq!(r.count, Some(10));
        let r = parse(&pairs(&[("duration", "0.5")])).unwrap();
        assert_eq!(r.duration, Some(Duration::from_millis(500)));
        assert!(parse(&pairs(&[("target", "uplink")]))
            .unwrap_err()
            .message
            .contains("needs a limit"));
        for bad in ["0", "10000001", "x", "-1"] {
            assert!(parse(&pairs(&[("count", bad)])).is_err(), "{bad}");
        }
        for bad in ["0", "3600.1", "nan", "inf", "-2"] {
            assert!(parse(&pairs(&[("duration", bad)])).is_err(), "{bad}");
        }
        assert!(parse(&pairs(&[("count", "1"), ("colour", "red")])).is_err());
    }
}
