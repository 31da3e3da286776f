//! AF_XDP for rtemu's engine, on `libc` alone: the UMEM, the four rings, the socket, and the
//! XDP program that sends an interface's frames to the socket instead of up the kernel's stack.
//!
//! It is its own crate, as AF_XDP is in s2n-quic (`tools/xdp/s2n-quic-xdp`): the engine's
//! packet I/O (`rtemu_engine::xdp`) is built on it, and it knows nothing of the engine. The
//! layers, from memory to the interface:
//!
//! * [`umem`]: the shared memory of equal chunks, and [`umem::Chunk`], the token that says user
//!   space owns a chunk (so its bytes can be borrowed) until it goes back to the kernel;
//! * [`ring`]: the fill, completion, receive and transmit rings, with libxdp's cached indexes
//!   and acquire/release orderings ([`ring::Cursor`] is the index arithmetic alone);
//! * [`socket`]: the AF_XDP socket: set-up, bind in copy mode with need-wakeup, the transmit
//!   kick, statistics;
//! * [`insn`] and [`program`]: the five-instruction eBPF program (`bpf_redirect_map` into an
//!   `XSKMAP`, falling back to `XDP_PASS`), loaded with `bpf(2)` and attached with a bpf link,
//!   in native mode where the driver allows it, else generic mode.
//!
//! # Nothing leaks
//!
//! The program is attached through a bpf link, which lives as long as its descriptor: when the
//! [`program::Redirect`] drops, or the process exits or is `SIGKILL`ed, the program detaches
//! from the interface by itself. Sockets, maps and UMEM are descriptors and mappings too.
//!
//! # Requirements
//!
//! Linux 5.9 or later (bpf links for XDP; the ring flags of 5.4 and the `XDP_PASS` fallback of
//! 5.3 come with it), `CAP_NET_RAW` for the socket, `CAP_BPF` and `CAP_NET_ADMIN` (or
//! `CAP_SYS_ADMIN`) for the program. Every error names the step that failed
//! ([`error::Step`]) and, where the kernel's error says which, the privilege or version missing.
//!
//! # Example
//!
//! ```no_run
//! use rtemu_xdp::{program::Redirect, socket::{RingSizes, Socket}, umem::{Geometry, Umem}};
//!
//! let (umem, mut chunks) = Umem::new(Geometry { frame_size: 2048, frames: 4096 })?;
//! let sizes = RingSizes { fill: 2048, completion: 2048, rx: 2048, tx: 2048 };
//! let (socket, mut rings) = Socket::open(7, 0, &umem, sizes)?;
//! for chunk in chunks.drain(..2048) {
//!     rings.fill.push(chunk).expect("the fill ring holds 2048");
//! }
//! rings.fill.submit();
//! let redirect = Redirect::attach(7, 0, &socket)?;
//! while let Some(frame) = rings.rx.pop() {
//!     println!("{} bytes", umem.bytes(&frame.chunk, frame.offset, frame.len).len());
//!     let _ = rings.fill.push(frame.chunk);
//! }
//! rings.rx.release();
//! rings.fill.submit();
//! # drop(redirect);
//! # Ok::<(), rtemu_xdp::error::XdpError>(())
//! ```
//!
//! Root tests in `tests/veth.rs` check the set-up on a veth pair, a frame each way, and that
//! the program is gone from the interface once its owner drops.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]
// Every unsafe block says why it is sound.
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod error;
pub mod insn;
mod mmap;
pub mod program;
pub mod ring;
pub mod socket;
mod sys;
pub mod umem;

pub use error::{Step, XdpError};
