//! rtemu's real-time engine: impaired links in user space, each frame released at its intended
//! `CLOCK_MONOTONIC` time, with the release error measured for every frame.
//!
//! A link is two interfaces (the engine's veth ends facing node A and node B) and one model per
//! direction. The release thread receives frames on both ends, asks the direction's
//! [`rtemu_model::Model`] for each frame's fate (the same pure, seeded models the simulator
//! uses, so the same seed gives the same decisions), copies delivered frames into preallocated
//! buffers, and sends each copy from the other end when its release time comes.
//!
//! The crate is layered like the path of a frame:
//!
//! * [`io`]: packet I/O behind one small interface, [`io::PacketIo`] (receive a batch, stage
//!   frames, flush them as one send); [`afpacket`] implements it with `TPACKET_V2` receive and
//!   transmit rings and `PACKET_QDISC_BYPASS`, [`xdp`] with an AF_XDP socket and an XDP
//!   program (the `rtemu-xdp` crate); side by side on veth AF_XDP relays slightly fewer
//!   packets/s (0.87–0.99), with the same latency per hop within the noise and fewer frames
//!   lost under load (`docs/benchmarks.md`);
//! * [`pool`]: the buffers of copies in flight (sized from rate × delay, a full pool is the
//!   counted drop `pool-exhausted`), released in time order by the simulator's own
//!   [`rtemu_model::timing::TimingQueue`];
//! * [`direction`]: one link direction: receive → model → queue → release, time passed in;
//! * [`release`]: one release thread: its links, its loop, its `SCHED_FIFO` class within a
//!   real-time budget the kernel never throttles; `pacer` (private): how it waits between
//!   turns, asleep on its sockets until a frame or the approach of a release;
//! * [`engine`]: the links partitioned over release threads, and the
//!   [`engine::EngineHandle`] that reads counters, fidelity and thread status while it runs;
//! * [`counters`] and [`fidelity`]: what leaves the hot path, through a sequence lock over
//!   atomics (counters, a consistent snapshot in which every copy is accounted for) and a
//!   lock-free ring (intended and actual release time of every copy, summarised as percentiles);
//! * [`offload`] and [`netns`]: set-up helpers: switching off segmentation and checksum
//!   offloads, and opening sockets inside a lab's namespace;
//! * [`control`]: the lab engine's control socket, one request line in, one reply out;
//! * [`bench`]: a throughput benchmark's cheap pieces (a transmit-ring flood, a sink read from
//!   interface counters, a bare relay), shared by `rtemu-bench engine` and the example.
//!
//! # Example
//!
//! ```no_run
//! use rtemu_engine::afpacket::{AfPacket, AfPacketConfig};
//! use rtemu_engine::direction::{DirectionConfig, Resolution};
//! use rtemu_engine::engine::{self, EngineConfig, LinkSpec};
//! use rtemu_model::{link::NoTables, netem, LinkModel};
//!
//! let dir = |text: &str, label| DirectionConfig {
//!     model: Box::new(LinkModel::new(&netem::parse(text).unwrap(), &NoTables, 1, label).unwrap()),
//!     resolution: Resolution::Pass { delay_ns: 10_000_000 },
//!     pool_frames: rtemu_engine::pool::frames_for(100_000, 10_000_000, 64),
//!     slot_size: 2048 - 32,
//!     late_after_ns: 10_000,
//! };
//! let ring = AfPacketConfig::default();
//! let link = LinkSpec {
//!     name: "a-b".into(),
//!     a: AfPacket::open("veth-a", &ring)?,
//!     b: AfPacket::open("veth-b", &ring)?,
//!     a_to_b: dir("delay 10ms", 1),
//!     b_to_a: dir("delay 10ms loss 1%", 2),
//!     senders: None,
//! };
//! let handle = engine::spawn(EngineConfig::default(), vec![link])?;
//! std::thread::sleep(std::time::Duration::from_secs(10));
//! for d in handle.stop()?.directions {
//!     println!("{} {}: p99 {} ns", d.link, d.way.as_str(), d.fidelity.released.p99_ns);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Tests and benchmark
//!
//! Unit tests drive directions with invented times through an in-memory I/O layer (fates equal
//! the model's for the same seed, counters are
//! conserved, snapshots are never torn). Root tests (`tests/veth.rs`, `tests/afpacket.rs`)
//! build three namespaces A ═ engine ═ B and check a 10 ms delay on UDP, `loss 100%`,
//! conservation under overload, and the `AF_PACKET` layer itself; `tests/xdp.rs` checks the
//! AF_XDP layer the same way and the engine over it; without root they print why and pass,
//! unless `RTEMU_REQUIRE_ROOT=1`. `examples/engine_bench.rs` measures release error per wait
//! strategy and packets/s against a bare relay, for both I/O layers side by side;
//! `rtemu-bench engine --part throughput` sets the same generator and relay beside the kernel's
//! own forwarding (figures in `docs/benchmarks.md`).
//!
//! # In a lab
//!
//! `rtemu up` runs one engine process per lab with impaired links (`crates/rtemu/src/cmd/
//! engine.rs`): it enters the lab's namespace with [`netns::enter`], switches offloads off with
//! [`offload::disable`] on all four ends of each link, opens them with [`afpacket`] (or
//! [`xdp`] when asked, `rtemu up --engine-io af-xdp`), builds each
//! direction's model (netem or trace-driven), and serves [`control`] requests (`stats`, `set`,
//! `down`, `up`, `stop`) while the release thread runs. [`engine::Steerer`] changes running
//! directions: a new model or a cut, without a lock on the packet path.
//!
//! # What is missing
//!
//! * Under saturation each loop turn receives up to `rx_batch` frames per interface and
//!   releases at most [`direction::RELEASE_BATCH`] per direction, so a backlog of due copies
//!   drains slowly and the release error grows (measured: median 59–435 µs at 0.6–0.7 Mpps with
//!   `delay 10ms`). On AF_XDP a frame's arrival is a clock read after the receive, not a
//!   kernel stamp, so time it waited in the ring is not in the fidelity record.
//! * Frames the kernel drops in the veth backlog, before the packet socket, are not counted
//!   (those lost to a full receive ring are, as [`engine::DirectionReport::kernel_drops`]).
//!
//! All `unsafe` lives in the private `sys` module, one commented block per kernel call.
#![deny(unsafe_code)]
#![warn(missing_docs)]
// Every unsafe block says why it is sound.
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod afpacket;
pub mod bench;
pub mod control;
pub mod counters;
pub mod direction;
pub mod engine;
pub mod fidelity;
pub mod ifcounters;
pub mod io;
pub mod netns;
pub mod offload;
mod pacer;
pub mod pool;
pub mod release;
mod sys;
pub mod xdp;

pub use counters::{Counters, DropKind};
pub use direction::{DirectionConfig, Resolution, Swap};
pub use engine::{
    spawn, EngineConfig, EngineHandle, LinkSpec, Report, RtConfig, Steerer, ThreadReport,
};
