//! `rtemu lab rtt` and `rtemu lab echo`: the real-time UDP paper's round-trip benchmark, over
//! UDP ([`Endpoint::Udp`]) and over raw Ethernet ([`Endpoint::Raw`], the paper's `RAW`
//! protocol, through an `AF_PACKET` socket).
//!
//! The client sweeps the size from `min_size` to `max_size` by `step` (the UDP payload, or the
//! whole Ethernet frame for raw); at each size it sends `warmup` discarded probes, then `count`
//! measured ones, stop-and-wait: one probe in flight, the next sent when its reply arrives or
//! its timeout passes. A probe carries its sequence number, so replies are matched exactly: a
//! reply to an earlier probe is counted as reordered (it came after its successor was sent), a
//! second reply to the same probe as a duplicate, a probe with no reply before its timeout as
//! lost. Per size the report gives the paper's best / average / worst round trip and
//! percentiles. Both protocols run the same sweep; only the transport (a private trait) differs.
//!
//! Two clocks, never mixed:
//!
//! * the application's round trip: `CLOCK_MONOTONIC`, read right before `send` and right
//!   after `recvmsg` returns;
//! * the kernel's round trip: the software TX stamp (taken as the driver sends the probe) to
//!   the software RX stamp (taken as the reply enters the stack), both `SO_TIMESTAMPING`
//!   stamps of `CLOCK_REALTIME`, subtracted from each other only.
//!
//! Their difference is the time spent in the client's own socket calls and scheduling. Where
//! the kernel gives no stamps (an option refused, a driver that does not stamp), the kernel
//! figures are `None` and [`Sweep::kernel_notice`] says why.
//!
//! [`plan`] checks what a run was asked for before anything starts; [`between`] runs the
//! sweeps between two nodes of a lab.

pub mod between;
pub mod plan;
mod raw;
mod sys;
mod udp;

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rtemu_clock::Instant;
use serde::Serialize;

pub use raw::{Mac, MacError, ETHERTYPE};

use crate::stats::Distribution;

/// The sizes one protocol can sweep, and what a size counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SizeLimits {
    /// Smallest size, bytes.
    pub min: usize,
    /// Largest size, bytes.
    pub max: usize,
    /// What a size counts, for messages.
    pub what: &'static str,
}

/// UDP payloads: from the probe's 8-byte sequence number and 4-byte size to the largest
/// payload an Ethernet frame carries without fragmentation (1500 − 20 − 8).
pub const UDP_SIZES: SizeLimits = SizeLimits {
    min: 12,
    max: 1472,
    what: "UDP payload",
};

/// Ethernet frames without the frame check sequence: the minimum frame to the largest an MTU
/// of 1500 allows (1500 + 14).
pub const RAW_SIZES: SizeLimits = SizeLimits {
    min: 60,
    max: 1514,
    what: "Ethernet frame",
};

/// Where probes go (the client's target), or where an echo server listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// A UDP socket address.
    Udp(SocketAddr),
    /// A station on an Ethernet interface of this host's (or namespace's) network.
    Raw {
        /// The interface frames leave and arrive on.
        interface: String,
        /// The station's address: the peer for a client, its own for an echo server.
        mac: Mac,
    },
}

impl Endpoint {
    /// The sizes this endpoint's protocol can sweep.
    pub fn size_limits(&self) -> SizeLimits {
        match self {
            Endpoint::Udp(_) => UDP_SIZES,
            Endpoint::Raw { .. } => RAW_SIZES,
        }
    }

    /// `udp` or `raw`, as in reports.
    pub fn protocol(&self) -> &'static str {
        match self {
            Endpoint::Udp(_) => "udp",
            Endpoint::Raw { .. } => "raw",
        }
    }

    /// The bytes a probe carries on the wire besides its size: UDP's, IP's (v4 or v6) and
    /// Ethernet's headers for UDP, whose size is the payload; none for raw, whose size is the
    /// frame.
    pub fn frame_overhead(&self) -> usize {
        match self {
            Endpoint::Udp(addr) => 8 + if addr.is_ipv4() { 20 } else { 40 } + raw::HEADER,
            Endpoint::Raw { .. } => 0,
        }
    }

    /// The Ethernet frame (without its FCS) a probe of `size` is on the wire: the size plus
    /// [`Endpoint::frame_overhead`], padded to Ethernet's 60 bytes. It puts UDP and raw sizes
    /// on one axis.
    pub fn frame_len(&self, size: usize) -> usize {
        (size + self.frame_overhead()).max(RAW_SIZES.min)
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Udp(addr) => write!(f, "UDP {addr}"),
            Endpoint::Raw { interface, mac } => {
                write!(
                    f,
                    "raw Ethernet {mac} on {interface} (EtherType {ETHERTYPE:#06x})"
                )
            }
        }
    }
}

/// What `rtemu lab rtt` measures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RttConfig {
    /// The echo server.
    pub target: Endpoint,
    /// Smallest size, bytes.
    pub min_size: usize,
    /// Largest size, bytes.
    pub max_size: usize,
    /// Size increment, bytes.
    pub step: usize,
    /// Measured probes per size.
    pub count: usize,
    /// Discarded probes before each size's measurement.
    pub warmup: usize,
    /// How long to wait for each reply, ns.
    pub timeout_ns: u64,
}

/// A configuration that cannot run, or a socket that failed.
#[derive(Debug, thiserror::Error)]
pub enum RttError {
    /// Sizes out of range or out of order.
    #[error(
        "{} sizes {min}..{max} by {step}: give {} ≤ min ≤ max ≤ {} and a step of at least 1",
        limits.what, limits.min, limits.max
    )]
    Sizes {
        /// Smallest.
        min: usize,
        /// Largest.
        max: usize,
        /// Step.
        step: usize,
        /// What the protocol allows.
        limits: SizeLimits,
    },
    /// The interface does not exist in this network namespace.
    #[error("no interface `{0}` here: `ip link` lists the interfaces of this network namespace")]
    NoInterface(String),
    /// The interface has no Ethernet address.
    #[error("interface `{0}` has no Ethernet address: raw round trips need an Ethernet (or veth) interface")]
    NotEthernet(String),
    /// A packet socket needs `CAP_NET_RAW`.
    #[error("raw Ethernet round trips need CAP_NET_RAW to open a packet socket: run as root (sudo), or use UDP")]
    NotPermitted,
    /// The peer's address reaches a group, which the echo does not answer.
    #[error("--peer {0} is a group (multicast or broadcast) address: give the echo station's own MAC address")]
    PeerNotUnicast(Mac),
    /// The echo's thread could not be started.
    #[error(transparent)]
    Spawn(#[from] rtemu_sys::thread::SpawnError),
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
    /// The sizes of the sweep.
    pub fn sizes(&self) -> Result<Vec<usize>, RttError> {
        let limits = self.target.size_limits();
        if self.min_size < limits.min
            || self.max_size > limits.max
            || self.min_size > self.max_size
            || self.step == 0
        {
            return Err(RttError::Sizes {
                min: self.min_size,
                max: self.max_size,
                step: self.step,
                limits,
            });
        }
        Ok((self.min_size..=self.max_size).step_by(self.step).collect())
    }
}

/// One size's results.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SizeResult {
    /// UDP payload or Ethernet frame, bytes.
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
    /// Mean round trip as the application saw it, ns.
    pub mean_ns: f64,
    /// The application's round-trip percentiles, ns: min is the paper's best, max its worst.
    pub rtt_ns: Distribution,
    /// Mean round trip as the kernel saw it (software TX stamp to RX stamp), ns; `None` when
    /// no probe of this size got both stamps.
    pub kernel_mean_ns: Option<f64>,
    /// The kernel's round-trip percentiles, over the probes that got both stamps (`n`).
    pub kernel_rtt_ns: Option<Distribution>,
}

impl SizeResult {
    /// Halves every time, for one-way figures (`--half-rtt`).
    pub fn halve(&mut self) {
        fn halve(d: &mut Distribution) {
            for v in [
                &mut d.min_ns,
                &mut d.p50_ns,
                &mut d.p90_ns,
                &mut d.p99_ns,
                &mut d.p99_9_ns,
                &mut d.p99_99_ns,
                &mut d.max_ns,
            ] {
                *v /= 2;
            }
        }
        self.mean_ns /= 2.0;
        halve(&mut self.rtt_ns);
        if let Some(mean) = &mut self.kernel_mean_ns {
            *mean /= 2.0;
        }
        if let Some(d) = &mut self.kernel_rtt_ns {
            halve(d);
        }
    }
}

/// A whole sweep's results.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Sweep {
    /// One entry per size.
    pub results: Vec<SizeResult>,
    /// Why the kernel's figures are missing, when they are (for every size or some).
    pub kernel_notice: Option<String>,
}

/// What a transport's receive gave.
enum Recv {
    /// A frame or datagram of `len` bytes, with the kernel's RX stamp when there is one.
    Frame { len: usize, kernel_ns: Option<i64> },
    /// Something that is not a reply (another station's frame, a refused datagram): keep
    /// waiting.
    Other,
    /// Nothing before the timeout.
    TimedOut,
}

/// How probes travel: the part of the benchmark that differs between UDP and raw Ethernet.
trait Transport {
    /// Bytes before the probe in every frame (the Ethernet header; none for UDP).
    fn header_len(&self) -> usize;
    /// Writes that header at the start of `frame`.
    fn write_header(&self, frame: &mut [u8]);
    /// Whether kernel stamps were switched on, and why not.
    fn stamps(&self) -> Result<(), String>;
    /// Sends one frame.
    fn send(&mut self, frame: &[u8]) -> Result<(), RttError>;
    /// Waits up to `timeout_ns` for one frame into `buf`.
    fn recv(&mut self, buf: &mut [u8], timeout_ns: u64) -> Result<Recv, RttError>;
    /// The next kernel TX stamp waiting, without waiting.
    fn tx_stamp(&mut self) -> Result<Option<i64>, RttError>;
}

/// The probe: sequence number and its own length (frame or payload), after `header` bytes.
fn encode(buf: &mut [u8], header: usize, seq: u64) {
    let size = buf.len() as u32;
    buf[header..header + 8].copy_from_slice(&seq.to_be_bytes());
    buf[header + 8..header + 12].copy_from_slice(&size.to_be_bytes());
}

/// The sequence number of a reply whose length matches the size it carries.
fn decode(buf: &[u8], header: usize) -> Option<u64> {
    let seq = u64::from_be_bytes(buf.get(header..header + 8)?.try_into().ok()?);
    let size = u32::from_be_bytes(buf.get(header + 8..header + 12)?.try_into().ok()?);
    (size as usize == buf.len()).then_some(seq)
}

/// How long a sweep waits after switching kernel stamps on, before its first probe. Linux
/// turns receive stamping on lazily: the first socket that asks schedules a work item that
/// enables it (and the last to close one that disables it), so on a busy machine the probes of
/// a short sweep could all go unstamped before that item runs.
const STAMPS_SETTLE: Duration = Duration::from_millis(50);

/// Counts what happened to one size's probes.
#[derive(Default)]
struct Tally {
    received: u64,
    duplicates: u64,
    reordered: u64,
}

/// Most stale TX stamps dropped before a send: more than one means a stamp came late.
const STALE_STAMPS: usize = 64;

/// How many sizes the sweeps of `configs` measure in all; an error for sizes one of them
/// cannot sweep.
pub fn total_sizes(configs: &[RttConfig]) -> Result<usize, RttError> {
    configs.iter().map(|c| c.sizes().map(|s| s.len())).sum()
}

/// Runs the sweeps of `configs` one after the other; `before_each` is called with the
/// protocol and each size before it is measured (for a progress bar).
pub fn run_all(
    configs: &[RttConfig],
    before_each: &mut dyn FnMut(&'static str, usize),
) -> Result<Vec<Sweep>, RttError> {
    configs
        .iter()
        .map(|config| {
            let protocol = config.target.protocol();
            run(config, &mut |size| before_each(protocol, size))
        })
        .collect()
}

/// Runs the sweep against `config.target`; `before_each` is called with each size before it is
/// measured (for a progress bar).
pub fn run(config: &RttConfig, before_each: &mut dyn FnMut(usize)) -> Result<Sweep, RttError> {
    let sizes = config.sizes()?;
    match &config.target {
        Endpoint::Udp(addr) => sweep(
            config,
            &sizes,
            &mut udp::UdpClient::connect(*addr)?,
            before_each,
        ),
        Endpoint::Raw { interface, mac } => sweep(
            config,
            &sizes,
            &mut raw::RawClient::open(interface, *mac)?,
            before_each,
        ),
    }
}

fn sweep(
    config: &RttConfig,
    sizes: &[usize],
    transport: &mut dyn Transport,
    before_each: &mut dyn FnMut(usize),
) -> Result<Sweep, RttError> {
    let header = transport.header_len();
    let limits = config.target.size_limits();
    let mut out = vec![0u8; limits.max];
    transport.write_header(&mut out);
    let mut input = vec![0u8; limits.max + 1];
    let mut seq = 0u64;
    let mut results = Vec::with_capacity(sizes.len());
    let stamps = transport.stamps();
    if stamps.is_ok() {
        std::thread::sleep(STAMPS_SETTLE);
    }
    for &size in sizes {
        before_each(size);
        let mut samples = Vec::with_capacity(config.count);
        let mut kernel_samples = Vec::with_capacity(config.count);
        // Which measured probes got a reply: for telling duplicates from reordering.
        let mut answered = vec![false; config.count];
        let mut tally = Tally::default();
        let first_measured = seq + config.warmup as u64;
        for _ in 0..config.warmup + config.count {
            seq += 1;
            let probe = seq;
            encode(&mut out[..size], header, probe);
            if stamps.is_ok() {
                // Stamps of earlier probes (lost ones) must not pass for this one's.
                for _ in 0..STALE_STAMPS {
                    if transport.tx_stamp()?.is_none() {
                        break;
                    }
                }
            }
            let sent = Instant::now();
            transport.send(&out[..size])?;
            let deadline = sent + config.timeout_ns;
            loop {
                let now = Instant::now();
                if now >= deadline {
                    break;
                }
                let (n, kernel_rx) = match transport.recv(&mut input, deadline.nanos_since(now))? {
                    Recv::Frame { len, kernel_ns } => (len, kernel_ns),
                    Recv::Other => continue,
                    Recv::TimedOut => break,
                };
                let arrived = Instant::now();
                let Some(got) = decode(&input[..n], header) else {
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
                        // An RX stamp comes only with stamps on; the TX stamp waits on the
                        // error queue since the send.
                        if let Some(rx) = kernel_rx {
                            if let Some(tx) = transport.tx_stamp()? {
                                kernel_samples.push(rx - tx);
                            }
                        }
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
        let mean = |s: &[i64]| s.iter().sum::<i64>() as f64 / s.len().max(1) as f64;
        results.push(SizeResult {
            size,
            sent,
            received: tally.received,
            lost: sent - tally.received - tally.reordered,
            duplicates: tally.duplicates,
            reordered: tally.reordered,
            mean_ns: mean(&samples),
            rtt_ns: Distribution::compute(&samples),
            kernel_mean_ns: (!kernel_samples.is_empty()).then(|| mean(&kernel_samples)),
            kernel_rtt_ns: (!kernel_samples.is_empty())
                .then(|| Distribution::compute(&kernel_samples)),
        });
    }
    let received: u64 = results.iter().map(|r| r.received).sum();
    let stamped: u64 = results
        .iter()
        .filter_map(|r| r.kernel_rtt_ns.map(|d| d.n))
        .sum();
    let kernel_notice = match stamps {
        Err(why) => Some(format!(
            "kernel timestamps unavailable (SO_TIMESTAMPING: {why})"
        )),
        Ok(()) if received > 0 && stamped == 0 => Some(
            "kernel timestamps unavailable: the kernel stamped none of the probes (the \
             interface's driver may not take software TX stamps)"
                .to_owned(),
        ),
        Ok(()) if stamped < received => Some(format!(
            "kernel timestamps for {stamped} of {received} replies only"
        )),
        Ok(()) => None,
    };
    Ok(Sweep {
        results,
        kernel_notice,
    })
}

/// How often an echo server wakes up to notice its stop flag and time bound.
const ECHO_WAKE_UP: Duration = Duration::from_millis(50);

/// An echo server ([`Echo::udp`], [`Echo::raw`]), bounded in time, that stops when told or
/// dropped.
#[derive(Debug)]
pub struct Echo {
    local: Endpoint,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<io::Result<u64>>>,
}

impl Echo {
    /// Binds `addr` and echoes every datagram back to its sender, for at most `max_ns`.
    pub fn udp(addr: SocketAddr, max_ns: u64) -> Result<Echo, RttError> {
        udp::echo(addr, max_ns)
    }

    /// Echoes every [`ETHERTYPE`] frame addressed to `interface` back to its sender (the
    /// addresses swapped), for at most `max_ns`. Needs `CAP_NET_RAW`.
    pub fn raw(interface: &str, max_ns: u64) -> Result<Echo, RttError> {
        raw::echo(interface, max_ns)
    }

    /// Runs `serve` (one receive and, when it got a probe, one reply: `true`) in a thread until
    /// stopped or `max_ns` passes. `serve` must wait at most [`ECHO_WAKE_UP`].
    fn spawn(
        local: Endpoint,
        max_ns: u64,
        mut serve: impl FnMut() -> io::Result<bool> + Send + 'static,
    ) -> Result<Echo, RttError> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let end = Instant::now() + max_ns;
        let thread = rtemu_sys::thread::spawn("rtemu-echo", move || {
            let mut echoed = 0u64;
            while !flag.load(Ordering::Relaxed) && Instant::now() < end {
                echoed += u64::from(serve()?);
            }
            Ok(echoed)
        })?;
        Ok(Echo {
            local,
            stop,
            thread: Some(thread),
        })
    }

    /// Where it listens: the UDP address (with the port chosen), or the interface and its MAC.
    pub fn local(&self) -> &Endpoint {
        &self.local
    }

    /// Stops the server and returns how many probes it echoed.
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
    use std::net::UdpSocket;

    #[test]
    fn sizes_of_both_protocols_map_to_the_frame_on_the_wire() {
        let v4 = Endpoint::Udp("192.0.2.1:7".parse().unwrap());
        let v6 = Endpoint::Udp("[2001:db8::1]:7".parse().unwrap());
        let raw = Endpoint::Raw {
            interface: "eth0".into(),
            mac: "02:00:00:00:00:01".parse().unwrap(),
        };
        // A 16-byte UDP payload is a 58-byte frame, padded to 60; 1472 fills a 1514-byte one.
        assert_eq!((v4.frame_len(16), v4.frame_len(1472)), (60, 1514));
        assert_eq!((v6.frame_overhead(), v6.frame_len(1452)), (62, 1514));
        assert_eq!((raw.frame_len(64), raw.frame_len(1514)), (64, 1514));
    }

    fn config(target: SocketAddr) -> RttConfig {
        RttConfig {
            target: Endpoint::Udp(target),
            min_size: 16,
            max_size: 1472,
            step: 728,
            count: 30,
            warmup: 3,
            timeout_ns: 200_000_000,
        }
    }

    fn udp_echo() -> (Echo, SocketAddr) {
        let echo = Echo::udp("127.0.0.1:0".parse().unwrap(), 60_000_000_000).unwrap();
        let Endpoint::Udp(addr) = *echo.local() else {
            panic!("a UDP echo listens on a UDP address");
        };
        (echo, addr)
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
                ..c.clone()
            };
            let err = bad.sizes().unwrap_err();
            assert!(matches!(err, RttError::Sizes { .. }), "{min} {max} {step}");
            assert!(err.to_string().contains("UDP payload sizes"), "{err}");
        }
        // Raw frames: 60–1514 bytes, the Ethernet header included.
        let raw = RttConfig {
            target: Endpoint::Raw {
                interface: "eth0".into(),
                mac: Mac([2, 0, 0, 0, 0, 1]),
            },
            min_size: 60,
            max_size: 1514,
            step: 727,
            ..c
        };
        assert_eq!(raw.sizes().unwrap(), vec![60, 787, 1514]);
        for (min, max) in [(59, 100), (60, 1515)] {
            let err = RttConfig {
                min_size: min,
                max_size: max,
                ..raw.clone()
            }
            .sizes()
            .unwrap_err()
            .to_string();
            assert!(
                err.contains("Ethernet frame sizes") && err.contains("60 ≤ min ≤ max ≤ 1514"),
                "{err}"
            );
        }
    }

    #[test]
    fn probes_encode_and_decode_after_any_header() {
        for header in [0, 14] {
            let mut buf = [0u8; 40];
            encode(&mut buf, header, 42);
            assert_eq!(decode(&buf, header), Some(42));
            assert_eq!(decode(&buf[..39], header), None); // truncated: the size disagrees
            assert_eq!(decode(&buf[..header + 5], header), None);
        }
    }

    #[test]
    fn halving_halves_every_figure() {
        let d = Distribution::compute(&[10, 20, 30]);
        let mut r = SizeResult {
            size: 60,
            sent: 3,
            received: 3,
            lost: 0,
            duplicates: 0,
            reordered: 0,
            mean_ns: 20.0,
            rtt_ns: d,
            kernel_mean_ns: Some(8.0),
            kernel_rtt_ns: Some(d),
        };
        r.halve();
        assert_eq!((r.mean_ns, r.kernel_mean_ns), (10.0, Some(4.0)));
        assert_eq!((r.rtt_ns.min_ns, r.rtt_ns.max_ns), (5, 15));
        assert_eq!(r.kernel_rtt_ns.map(|d| d.max_ns), Some(15));
        assert_eq!(r.sent, 3);
    }

    /// Over loopback every probe comes back once, in order, and the kernel's round trip (its
    /// stamps, taken inside the application's send and receive) is never longer than the
    /// application's.
    #[test]
    fn loopback_round_trips_are_complete_with_kernel_stamps() {
        let (echo, addr) = udp_echo();
        let sweep = run(&config(addr), &mut |_| {}).unwrap();
        assert_eq!(sweep.results.len(), 3);
        // Loopback's driver takes software TX stamps.
        assert_eq!(sweep.kernel_notice, None);
        for r in &sweep.results {
            assert_eq!(
                (r.sent, r.received, r.lost, r.duplicates, r.reordered),
                (30, 30, 0, 0, 0)
            );
            assert!(r.rtt_ns.min_ns > 0 && r.rtt_ns.min_ns as f64 <= r.mean_ns);
            assert!(r.mean_ns <= r.rtt_ns.max_ns as f64);
            let k = r.kernel_rtt_ns.expect("kernel stamps on loopback");
            assert_eq!(k.n, 30, "{r:?}");
            // Every probe's kernel round trip lies inside its application round trip, so the
            // extremes do too (up to the clocks' rate difference, a few ppm).
            let slack = 1_000 + r.rtt_ns.max_ns / 1_000;
            assert!(k.min_ns > 0 && k.min_ns <= r.rtt_ns.min_ns + slack, "{r:?}");
            assert!(k.max_ns <= r.rtt_ns.max_ns + slack, "{r:?}");
            assert!(
                r.kernel_mean_ns.unwrap() <= r.mean_ns + slack as f64,
                "{r:?}"
            );
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
        let sweep = run(&c, &mut |_| {}).unwrap();
        let r = &sweep.results[0];
        faulty.join().unwrap();
        // Probes 1–3 are warm-up, 4–33 measured: the multiples of 3 among them are lost, the
        // multiples of 5 that are not dropped (5, 10, 20, 25) come back twice.
        let lost = (4..=33).filter(|i| i % 3 == 0).count() as u64;
        let dups = (4..=33).filter(|i| i % 5 == 0 && i % 3 != 0).count() as u64;
        // A reply delayed past its timeout on a busy machine counts as reordered, not lost.
        assert_eq!((r.sent, r.lost, r.duplicates), (30, lost, dups));
        assert_eq!(r.received + r.reordered, 30 - lost);
        // The stamps of lost probes are dropped, not paired with the next reply: each kernel
        // round trip stays within the application's.
        let k = r.kernel_rtt_ns.expect("kernel stamps on loopback");
        assert!(
            k.max_ns <= r.rtt_ns.max_ns + 1_000 + r.rtt_ns.max_ns / 1_000,
            "{r:?}"
        );
    }

    #[test]
    fn raw_errors_say_what_to_fix() {
        let peer = Mac([2, 0, 0, 0, 0, 1]);
        let raw = |interface: &str, mac: Mac| RttConfig {
            target: Endpoint::Raw {
                interface: interface.into(),
                mac,
            },
            min_size: 60,
            max_size: 60,
            step: 1,
            count: 1,
            warmup: 0,
            timeout_ns: 1_000_000,
        };
        let err = run(&raw("rtemu-no-such0", peer), &mut |_| {}).unwrap_err();
        // Without CAP_NET_RAW the interface is still looked up first.
        assert!(
            matches!(err, RttError::NoInterface(ref i) if i == "rtemu-no-such0"),
            "{err}"
        );
        assert!(err.to_string().contains("ip link"), "{err}");
        let err = run(&raw("lo", Mac([0xff; 6])), &mut |_| {}).unwrap_err();
        assert!(matches!(err, RttError::PeerNotUnicast(_)), "{err}");
        let err = Echo::raw("rtemu-no-such0", 1_000_000).unwrap_err();
        assert!(matches!(err, RttError::NoInterface(_)), "{err}");
    }
}
