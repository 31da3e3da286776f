//! `rtemu lab rtt` and `rtemu lab echo`: the real-time UDP paper's round-trip benchmark.
//!
//! The client sweeps the payload size from `min_size` to `max_size` by `step`; at each size it
//! sends `warmup` discarded probes, then `count` measured ones, stop-and-wait: one probe in
//! flight, the next sent when its reply arrives or its timeout passes. A probe carries its
//! sequence number, so replies are matched exactly: a reply to an earlier probe is counted as
//! reordered (it came after its successor was sent), a second reply to the same probe as a
//! duplicate, a probe with no reply before its timeout as lost. Per size the report gives the
//! paper's best / average / worst round trip and percentiles. Times are taken in the
//! application with `CLOCK_MONOTONIC`, right around `send` and `recv`.
//!
//! Only UDP is implemented here; the raw Ethernet variant of the paper is not.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rtemu_clock::Instant;
use serde::Serialize;

use crate::stats::Distribution;

/// The smallest payload: the 8-byte sequence number and the 4-byte size.
pub const MIN_PAYLOAD: usize = 12;
/// The largest payload that fits an Ethernet frame without fragmentation (1500 − 20 − 8).
pub const MAX_PAYLOAD: usize = 1472;

/// What `rtemu lab rtt` measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RttConfig {
    /// The echo server.
    pub target: SocketAddr,
    /// Smallest payload, bytes.
    pub min_size: usize,
    /// Largest payload, bytes.
    pub max_size: usize,
    /// Payload increment, bytes.
    pub step: usize,
    /// Measured probes per size.
    pub count: usize,
    /// Discarded probes before each size's measurement.
    pub warmup: usize,
    /// How long to wait for each reply, ns.
    pub timeout_ns: u64,
}

/// A configuration that cannot run.
#[derive(Debug, thiserror::Error)]
pub enum RttError {
    /// Sizes out of range or out of order.
    #[error(
        "payload sizes {min}..{max} by {step}: give {MIN_PAYLOAD} ≤ min ≤ max ≤ {MAX_PAYLOAD} \
         and a step of at least 1"
    )]
    Sizes {
        /// Smallest.
        min: usize,
        /// Largest.
        max: usize,
        /// Step.
        step: usize,
    },
    /// A socket call failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The operating system's error.
        source: io::Error,
    },
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> RttError {
    let what = what.into();
    move |source| RttError::Io { what, source }
}

impl RttConfig {
    /// The payload sizes of the sweep.
    pub fn sizes(&self) -> Result<Vec<usize>, RttError> {
        if self.min_size < MIN_PAYLOAD
            || self.max_size > MAX_PAYLOAD
            || self.min_size > self.max_size
            || self.step == 0
        {
            return Err(RttError::Sizes {
                min: self.min_size,
                max: self.max_size,
                step: self.step,
            });
        }
        Ok((self.min_size..=self.max_size).step_by(self.step).collect())
    }
}

/// One payload size's results.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SizeResult {
    /// Payload, bytes.
    pub size: usize,
    /// Measured probes sent.
    pub sent: u64,
    /// Replies to measured probes received in time.
    pub received: u64,
    /// Probes with no reply before the timeout.
    pub lost: u64,
    /// Second replies to a probe.
    pub duplicates: u64,
    /// Replies that came after the next probe was sent.
    pub reordered: u64,
    /// Mean round trip, ns.
    pub mean_ns: f64,
    /// Round-trip percentiles, ns: min is the paper's best, max its worst.
    pub rtt_ns: Distribution,
}

fn encode(buf: &mut [u8], seq: u64) {
    buf[..8].copy_from_slice(&seq.to_be_bytes());
    let size = buf.len() as u32;
    buf[8..12].copy_from_slice(&size.to_be_bytes());
}

fn decode(buf: &[u8]) -> Option<u64> {
    let seq = u64::from_be_bytes(buf.get(..8)?.try_into().ok()?);
    let size = u32::from_be_bytes(buf.get(8..12)?.try_into().ok()?);
    (size as usize == buf.len()).then_some(seq)
}

/// Counts what happened to one size's probes.
#[derive(Default)]
struct Tally {
    received: u64,
    duplicates: u64,
    reordered: u64,
}

/// Runs the sweep against `config.target`.
pub fn run(
    config: &RttConfig,
    before_each: &mut dyn FnMut(usize),
) -> Result<Vec<SizeResult>, RttError> {
    let sizes = config.sizes()?;
    let bind: SocketAddr = if config.target.is_ipv4() {
        "0.0.0.0:0".parse().expect("a valid address")
    } else {
        "[::]:0".parse().expect("a valid address")
    };
    let socket = UdpSocket::bind(bind).map_err(io_err("binding the client socket"))?;
    socket
        .connect(config.target)
        .map_err(io_err(format!("connecting to {}", config.target)))?;
    let mut out = [0u8; MAX_PAYLOAD];
    let mut input = [0u8; MAX_PAYLOAD + 1];
    let mut seq = 0u64;
    let mut results = Vec::with_capacity(sizes.len());
    for size in sizes {
        before_each(size);
        let mut samples = Vec::with_capacity(config.count);
        // Which measured probes got a reply: for telling duplicates from reordering.
        let mut answered = vec![false; config.count];
        let mut tally = Tally::default();
        let first_measured = seq + config.warmup as u64;
        for _ in 0..config.warmup + config.count {
            seq += 1;
            let probe = seq;
            encode(&mut out[..size], probe);
            let sent = Instant::now();
            socket
                .send(&out[..size])
                .map_err(io_err(format!("sending to {}", config.target)))?;
            let deadline = sent + config.timeout_ns;
            loop {
                let now = Instant::now();
                if now >= deadline {
                    break;
                }
                socket
                    .set_read_timeout(Some(Duration::from_nanos(
                        deadline.nanos_since(now).max(1_000),
                    )))
                    .map_err(io_err("setting the reply timeout"))?;
                let n = match socket.recv(&mut input) {
                    Ok(n) => n,
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                        ) =>
                    {
                        break
                    }
                    // A reply that cannot be delivered (ICMP port unreachable) counts as lost.
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
                    Err(e) => return Err(io_err("receiving a reply")(e)),
                };
                let arrived = Instant::now();
                let Some(got) = decode(&input[..n]) else {
                    continue;
                };
                let slot = got
                    .checked_sub(first_measured + 1)
                    .filter(|&i| (i as usize) < config.count)
                    .map(|i| i as usize);
                if got == probe {
                    if let Some(i) = slot {
                        if answered[i] {
                            tally.duplicates += 1;
                            continue;
                        }
                        answered[i] = true;
                        tally.received += 1;
                        samples.push(arrived.signed_nanos_since(sent));
                    }
                    break;
                }
                // A reply to an earlier probe: late (reordered) or a second copy.
                if let Some(i) = slot {
                    if answered[i] {
                        tally.duplicates += 1;
                    } else {
                        answered[i] = true;
                        tally.reordered += 1;
                    }
                }
            }
        }
        let sent = config.count as u64;
        let mean_ns = if samples.is_empty() {
            0.0
        } else {
            samples.iter().sum::<i64>() as f64 / samples.len() as f64
        };
        results.push(SizeResult {
            size,
            sent,
            received: tally.received,
            lost: sent - tally.received - tally.reordered,
            duplicates: tally.duplicates,
            reordered: tally.reordered,
            mean_ns,
            rtt_ns: Distribution::compute(&samples),
        });
    }
    Ok(results)
}

/// A UDP echo server, bounded in time, that stops when its flag is set or it is dropped.
#[derive(Debug)]
pub struct Echo {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<io::Result<u64>>>,
}

impl Echo {
    /// Binds `addr` and echoes every datagram back to its sender, for at most `max_ns`.
    pub fn start(addr: SocketAddr, max_ns: u64) -> Result<Echo, RttError> {
        let socket =
            UdpSocket::bind(addr).map_err(io_err(format!("binding the echo server to {addr}")))?;
        let addr = socket
            .local_addr()
            .map_err(io_err("reading the echo address"))?;
        // Wake up regularly to notice the stop flag and the time bound.
        socket
            .set_read_timeout(Some(Duration::from_millis(50)))
            .map_err(io_err("setting the echo timeout"))?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let end = Instant::now() + max_ns;
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 65_536];
            let mut echoed = 0u64;
            while !flag.load(Ordering::Relaxed) && Instant::now() < end {
                match socket.recv_from(&mut buf) {
                    Ok((n, from)) => {
                        socket.send_to(&buf[..n], from)?;
                        echoed += 1;
                    }
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                        ) => {}
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(echoed)
        });
        Ok(Echo {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops the server and returns how many datagrams it echoed.
    pub fn stop(mut self) -> io::Result<u64> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .map_or(Ok(0), |t| t.join().unwrap_or(Ok(0)))
    }

    /// Waits until the server's time bound passes (for `rtemu lab echo`).
    pub fn wait(mut self) -> io::Result<u64> {
        self.thread
            .take()
            .map_or(Ok(0), |t| t.join().unwrap_or(Ok(0)))
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(target: SocketAddr) -> RttConfig {
        RttConfig {
            target,
            min_size: 16,
            max_size: 1472,
            step: 728,
            count: 30,
            warmup: 3,
            timeout_ns: 200_000_000,
        }
    }

    #[test]
    fn sizes_are_checked_and_swept() {
        let c = config("127.0.0.1:9".parse().unwrap());
        assert_eq!(c.sizes().unwrap(), vec![16, 744, 1472]);
        for (min, max, step) in [(8, 100, 1), (100, 1473, 1), (200, 100, 1), (16, 100, 0)] {
            let bad = RttConfig {
                min_size: min,
                max_size: max,
                step,
                ..c
            };
            assert!(
                matches!(bad.sizes(), Err(RttError::Sizes { .. })),
                "{min} {max} {step}"
            );
        }
    }

    #[test]
    fn probes_encode_and_decode() {
        let mut buf = [0u8; 20];
        encode(&mut buf, 42);
        assert_eq!(decode(&buf), Some(42));
        assert_eq!(decode(&buf[..19]), None); // truncated: the size field disagrees
        assert_eq!(decode(&buf[..5]), None);
    }

    /// Over loopback every probe comes back once, in order.
    #[test]
    fn loopback_round_trips_are_complete() {
        let echo = Echo::start("127.0.0.1:0".parse().unwrap(), 60_000_000_000).unwrap();
        let results = run(&config(echo.addr()), &mut |_| {}).unwrap();
        assert_eq!(results.len(), 3);
        for r in &results {
            assert_eq!(
                (r.sent, r.received, r.lost, r.duplicates, r.reordered),
                (30, 30, 0, 0, 0)
            );
            assert!(r.rtt_ns.min_ns > 0 && r.rtt_ns.min_ns as f64 <= r.mean_ns);
            assert!(r.mean_ns <= r.rtt_ns.max_ns as f64);
        }
        // Warm-up probes are echoed too: 3 sizes × 33 probes.
        assert_eq!(echo.stop().unwrap(), 99);
    }

    /// A faulty echo (drops every third probe, answers every fifth twice) is counted exactly.
    #[test]
    fn losses_and_duplicates_are_counted() {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = socket.local_addr().unwrap();
        socket
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let faulty = std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            for i in 1..=33u64 {
                let Ok((n, from)) = socket.recv_from(&mut buf) else {
                    return;
                };
                if i % 3 == 0 {
                    continue;
                }
                socket.send_to(&buf[..n], from).unwrap();
                if i % 5 == 0 {
                    socket.send_to(&buf[..n], from).unwrap();
                }
            }
        });
        let c = RttConfig {
            min_size: 64,
            max_size: 64,
            timeout_ns: 100_000_000,
            ..config(addr)
        };
        let r = &run(&c, &mut |_| {}).unwrap()[0];
        faulty.join().unwrap();
        // Probes 1–3 are warm-up, 4–33 measured: the multiples of 3 among them are lost, the
        // multiples of 5 that are not dropped (5, 10, 20, 25) come back twice.
        let lost = (4..=33).filter(|i| i % 3 == 0).count() as u64;
        let dups = (4..=33).filter(|i| i % 5 == 0 && i % 3 != 0).count() as u64;
        // A reply delayed past its timeout on a busy machine counts as reordered, not lost.
        assert_eq!((r.sent, r.lost, r.duplicates), (30, lost, dups));
        assert_eq!(r.received + r.reordered, 30 - lost);
    }
}
