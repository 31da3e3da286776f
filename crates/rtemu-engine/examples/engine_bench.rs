//! Benchmark of the real-time engine on veth: release error per wait strategy, and packets per
//! second through one impaired link, for each packet I/O layer side by side in one run. Needs
//! root; prints Markdown tables.
//!
//! ```text
//! cargo run --release -p rtemu-engine --example engine_bench [SECONDS] [--io af-packet|af-xdp|both] [--part precision|throughput]
//! ```
//!
//! `--io` (default `both`) picks the engine's I/O: `AF_PACKET` rings ([`rtemu_engine::afpacket`])
//! or AF_XDP ([`rtemu_engine::xdp`]); with `both`, every row is measured for each, one after the
//! other, so the two share the machine's state of the moment. `--part` runs one part only.
//!
//! * **Precision**: a generator in namespace A sends UDP at 10 kpps (one datagram every 100 µs,
//!   or bursts of 10 every 1 ms) through `delay 1ms` to B; the engine's own fidelity record gives the release error
//!   (actual send time − intended time) for `spin`, `hybrid:50us` and `sleep`. Beside them, a
//!   bare busy-wait on the same machine in the same run: the limit of any spinning strategy.
//! * **Throughput**: an `AF_PACKET` generator in A sends as fast as one core lets it (64-byte
//!   and 1400-byte frames, to a MAC address B's kernel drops at once, so B's stack costs
//!   nothing) through `delay 0ms` and `delay 10ms` with the engine spinning; beside it a bare
//!   relay over the same I/O with no model and no timing queue (the I/O path's limit). The
//!   frames, the flood and the relay are [`rtemu_engine::bench`]'s, as in
//!   `rtemu-bench engine --part throughput`, which sets the kernel's own forwarding beside
//!   them in labs that `rtemu up` builds.
//!
//! The generator and the engine share the VM's cores: the engine is pinned to the last CPU, the
//! generator to the first.

#[path = "../tests/common/mod.rs"]
mod common;

use std::net::{Ipv4Addr, UdpSocket};

use rtemu_engine::io::PacketIo;
use std::time::Duration;

use common::{Lab, A_ADDR, B_ADDR};
use rtemu_clock::{rt, Instant, WaitStrategy, Waiter};
use rtemu_engine::afpacket::AfPacketConfig;
use rtemu_engine::bench::{self, UdpFrame};
use rtemu_engine::direction::{DirectionConfig, Resolution};
use rtemu_engine::engine::{self, DirectionReport, EngineConfig, LinkSpec, RtConfig};
use rtemu_engine::pool;
use rtemu_engine::xdp::AfXdpConfig;
use rtemu_model::direction::Way;
use rtemu_model::{link::NoTables, netem, LinkModel};

fn direction(text: &str, label: u64) -> DirectionConfig {
    let cfg = netem::parse(text).unwrap();
    DirectionConfig {
        model: Box::new(LinkModel::new(&cfg, &NoTables, 1, label).unwrap()),
        resolution: Resolution::Pass {
            delay_ns: cfg.delay.0,
        },
        pool_frames: pool::frames_for(1_000_000, cfg.delay.0.max(1_000_000), 64),
        slot_size: 1600,
        late_after_ns: 10_000,
    }
}

/// Online CPUs, read once before any pinning (`available_parallelism` follows the affinity).
fn cpus() -> usize {
    static CPUS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CPUS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The engine's packet I/O layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Io {
    AfPacket,
    AfXdp,
}

impl Io {
    fn name(self) -> &'static str {
        match self {
            Io::AfPacket => "AF_PACKET",
            Io::AfXdp => "AF_XDP",
        }
    }
}

struct Run {
    engine: engine::EngineHandle,
    tx: UdpSocket,
    _rx: UdpSocket,
}

fn start(lab: &Lab, io: Io, wait: WaitStrategy, a_to_b: &str) -> Run {
    match io {
        Io::AfPacket => {
            let (a, b) = lab.engine_ends(AfPacketConfig::default());
            start_with(lab, wait, a_to_b, a, b)
        }
        Io::AfXdp => {
            let (a, b) = lab.engine_ends_xdp(AfXdpConfig::default());
            start_with(lab, wait, a_to_b, a, b)
        }
    }
}

fn start_with<P: PacketIo + Send + 'static>(
    lab: &Lab,
    wait: WaitStrategy,
    a_to_b: &str,
    a: P,
    b: P,
) -> Run {
    let link = LinkSpec {
        name: "ab".into(),
        a,
        b,
        a_to_b: direction(a_to_b, 1),
        b_to_a: direction("delay 0ms", 2),
        senders: None,
    };
    let config = EngineConfig {
        wait,
        rt: RtConfig {
            cpus: vec![cpus() - 1],
            ..RtConfig::default()
        },
        ..EngineConfig::default()
    };
    let engine = engine::spawn(config, vec![link]).unwrap();
    let tx = lab.udp(&lab.a, A_ADDR, 9000);
    // Bound but never read: once its buffer is full B's kernel drops quietly (no ICMP back).
    let rx = lab.udp(&lab.b, B_ADDR, 9000);
    // Prime ARP so the measurement sees data frames only.
    tx.send_to(b"arp", (B_ADDR, 9000)).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    Run {
        engine,
        tx,
        _rx: rx,
    }
}

fn a_to_b(reports: Vec<DirectionReport>) -> DirectionReport {
    reports.into_iter().find(|d| d.way == Way::AToB).unwrap()
}

fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1000.0)
}

/// Sends bursts of `burst` datagrams every `period_ns` for `secs`, pacing with `clock_nanosleep`.
fn paced(tx: &UdpSocket, burst: u32, period_ns: u64, secs: u64) -> u64 {
    let mut waiter = Waiter::new(WaitStrategy::Sleep).unwrap();
    let start = Instant::now();
    let end = start + secs * 1_000_000_000;
    let payload = [0u8; 18];
    let mut sent = 0;
    let mut next = start;
    while next < end {
        waiter.wait_until(next).unwrap();
        for _ in 0..burst {
            sent += tx.send_to(&payload, (B_ADDR, 9000)).is_ok() as u64;
        }
        next = next + period_ns;
    }
    sent
}

fn precision(secs: u64, ios: &[Io]) {
    println!("### Release error, `delay 1ms`, 10 kpps, {secs} s each\n");
    println!("Release error = after the send returned − intended; start error = before the send − intended.\n");
    println!("| I/O | strategy | load | packets | p50 µs | p99 µs | p99.9 µs | max µs | late (>10 µs) | start p50 µs | start p99 µs | engine CPU % |");
    println!("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let strategies = [
        WaitStrategy::Spin,
        WaitStrategy::Hybrid { margin_ns: 50_000 },
        WaitStrategy::Sleep,
    ];
    // The generator stays off the engine's CPU, as a real node's traffic would be.
    let _ = rt::set_affinity(&[0]);
    // (burst, period): one datagram every 100 µs, or ten every millisecond.
    for (burst, period_ns, load) in [
        (1, 100_000, "1 every 100 µs"),
        (10, 1_000_000, "10 every 1 ms"),
    ] {
        for (wait, &io) in strategies
            .into_iter()
            .flat_map(|w| ios.iter().map(move |io| (w, io)))
        {
            let lab = Lab::new();
            let run = start(&lab, io, wait, "delay 1ms");
            let before = a_to_b(run.engine.snapshot());
            paced(&run.tx, burst, period_ns, secs);
            std::thread::sleep(Duration::from_millis(20));
            let report = run.engine.stop().unwrap();
            let cpu = 100.0 * report.cpu_ns as f64 / report.wall_ns as f64;
            for n in &report.notices {
                println!("<!-- notice: {n} -->");
            }
            let d = a_to_b(report.directions);
            let f = d.fidelity;
            assert!(d.counters.conserved());
            println!(
                "| {} | {wait} | {load} | {} | {} | {} | {} | {} | {} | {} | {} | {cpu:.0} |",
                io.name(),
                f.count - before.fidelity.count,
                us(f.released.p50_ns),
                us(f.released.p99_ns),
                us(f.released.p999_ns),
                us(f.released.max_ns),
                f.late,
                us(f.started.p50_ns),
                us(f.started.p99_ns),
            );
        }
    }
    bare_spin(secs);
    println!();
}

/// The machine's limit: the same spin waiter the engine uses, with nothing else to do, waiting
/// for deadlines 100 µs apart, error measured right after it returns.
fn bare_spin(secs: u64) {
    let _ = rt::set_affinity(&[cpus() - 1]);
    let mut waiter = Waiter::new(WaitStrategy::Spin).unwrap();
    let mut errors = Vec::new();
    let end = Instant::now() + secs * 1_000_000_000;
    let mut next = Instant::now() + 100_000;
    while next < end {
        waiter.wait_until(next).unwrap();
        errors.push(Instant::now().nanos_since(next));
        next = next + 100_000;
    }
    errors.sort_unstable();
    let q = |q: f64| errors[((errors.len() - 1) as f64 * q) as usize];
    println!(
        "| — | bare busy-wait | deadlines every 100 µs | {} | {} | {} | {} | {} | {} | — | — | 100 |",
        errors.len(),
        us(q(0.5)),
        us(q(0.99)),
        us(q(0.999)),
        us(*errors.last().unwrap()),
        errors.iter().filter(|e| **e > 10_000).count(),
    );
    let _ = rt::set_affinity(&(0..cpus()).collect::<Vec<_>>());
}

/// A frame from A's side to a MAC address nobody has: B's kernel drops it at once, so the
/// measurement is the engine's cost, not B's network stack.
fn foreign_frame(wire: usize) -> Vec<u8> {
    let spec = UdpFrame {
        dst_mac: bench::FOREIGN_MAC,
        src_mac: [2, 0, 0, 0, 0, 0x01],
        src: A_ADDR,
        dst: Ipv4Addr::new(10, 77, 0, 99),
        port: 9000,
    };
    bench::udp_frame(&spec, wire).unwrap()
}

/// Sends `frame` flat out from A's `na` through the TX ring for `secs`; returns frames sent
/// per second.
fn flood(lab: &Lab, frame: &[u8], secs: u64) -> f64 {
    let mut tx = lab.open(&lab.a, "na", AfPacketConfig::default());
    bench::flood(&mut tx, frame, secs * 1_000_000_000)
        .unwrap()
        .sent_per_s()
}

fn throughput(secs: u64, ios: &[Io]) {
    println!(
        "### Throughput: AF_PACKET generator flat out on CPU 0, relay pinned to CPU {}, {secs} s each\n",
        cpus() - 1
    );
    println!("| I/O | path | frame bytes | offered pps | received pps | delivered pps | dropped | kernel drops | release p50 µs | p99 µs | relay CPU % |");
    println!("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let _ = rt::set_affinity(&[0]);
    for wire in [64usize, 1400] {
        let frame = foreign_frame(wire);
        for &io in ios {
            bare_relay(secs, &frame, io);
        }
        for (netem, &io) in ["delay 0ms", "delay 10ms"]
            .into_iter()
            .flat_map(|n| ios.iter().map(move |io| (n, io)))
        {
            let lab = Lab::new();
            let run = start(&lab, io, WaitStrategy::Spin, netem);
            let before = a_to_b(run.engine.snapshot()).counters;
            let offered = flood(&lab, &frame, secs);
            let t = secs as f64;
            let after = a_to_b(run.engine.snapshot()).counters;
            let report = run.engine.stop().unwrap();
            let cpu = 100.0 * report.cpu_ns as f64 / report.wall_ns as f64;
            let d = a_to_b(report.directions);
            assert!(d.counters.conserved());
            println!(
                "| {} | engine, `{netem}` | {wire} | {offered:.0} | {:.0} | {:.0} | {} | {} | {} | {} | {cpu:.0} |",
                io.name(),
                (after.received - before.received) as f64 / t,
                (after.delivered - before.delivered) as f64 / t,
                after.dropped_total() - before.dropped_total(),
                d.kernel_drops.map_or("—".to_owned(), |k| k.to_string()),
                us(d.fidelity.released.p50_ns),
                us(d.fidelity.released.p99_ns),
            );
        }
    }
    let _ = rt::set_affinity(&(0..cpus()).collect::<Vec<_>>());
    println!();
}

/// The I/O path's limit: the same I/O layer, each received frame staged at once, no model, no
/// pool, no timing queue.
fn bare_relay(secs: u64, frame: &[u8], io: Io) {
    let lab = Lab::new();
    let (forwarded, offered, cpu) = match io {
        Io::AfPacket => {
            let (a, b) = lab.engine_ends(AfPacketConfig::default());
            relay(&lab, secs, frame, a, b)
        }
        Io::AfXdp => {
            let (a, b) = lab.engine_ends_xdp(AfXdpConfig::default());
            relay(&lab, secs, frame, a, b)
        }
    };
    println!(
        "| {} | bare relay (no model, no queue) | {} | {offered:.0} | — | {:.0} | — | — | — | — | {:.0} |",
        io.name(),
        frame.len() + 4,
        forwarded as f64 / secs as f64,
        cpu * 100.0
    );
}

/// Relays from `a` to `b` on the last CPU while A floods; returns frames forwarded, the
/// offered rate and the relay's CPU share.
fn relay<P: PacketIo + Send + 'static>(
    lab: &Lab,
    secs: u64,
    frame: &[u8],
    mut a: P,
    mut b: P,
) -> (u64, f64, f64) {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let relay = {
        let stop = std::sync::Arc::clone(&stop);
        std::thread::spawn(move || {
            let _ = rt::set_affinity(&[cpus() - 1]);
            bench::relay(&mut a, &mut b, &stop).unwrap()
        })
    };
    std::thread::sleep(Duration::from_millis(20));
    let offered = flood(lab, frame, secs);
    std::thread::sleep(Duration::from_millis(20));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let work = relay.join().unwrap();
    (work.sent, offered, work.cpu_percent() / 100.0)
}

fn main() {
    if !common::root_or_skip("engine_bench") {
        return;
    }
    cpus();
    let mut secs = 3;
    let mut ios = vec![Io::AfPacket, Io::AfXdp];
    let mut parts = vec!["precision", "throughput"];
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = match arg.as_str() {
            "--io" | "--part" => args.next(),
            _ => None,
        };
        match (arg.as_str(), value.as_deref()) {
            ("--io", Some("af-packet")) => ios = vec![Io::AfPacket],
            ("--io", Some("af-xdp")) => ios = vec![Io::AfXdp],
            ("--io", Some("both")) => {}
            ("--part", Some("precision")) => parts = vec!["precision"],
            ("--part", Some("throughput")) => parts = vec!["throughput"],
            (n, None) if n.parse::<u64>().is_ok() => secs = n.parse().unwrap_or(secs),
            _ => {
                eprintln!("usage: engine_bench [SECONDS] [--io af-packet|af-xdp|both] [--part precision|throughput]");
                std::process::exit(2);
            }
        }
    }
    if parts.contains(&"precision") {
        precision(secs, &ios);
    }
    if parts.contains(&"throughput") {
        throughput(secs, &ios);
    }
}
