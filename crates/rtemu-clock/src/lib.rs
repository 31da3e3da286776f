//! Time, waiting and real-time set-up for rtemu.
//!
//! rtemu schedules every release against an absolute deadline on `CLOCK_MONOTONIC`, so errors
//! never accumulate. This crate owns that one idea and is shared by the real-time engine and the
//! timing lab, so that what the lab measures is exactly what the engine does:
//!
//! * [`time`]: [`Instant`], a `CLOCK_MONOTONIC` reading in integer nanoseconds, the thread's CPU
//!   time, and the duration syntax (`50us`, `2ms`) used on the command line;
//! * [`wait`]: the [`WaitStrategy`] names (`sleep`, `spin`, `hybrid:X`, …) and the [`Waiter`]
//!   that waits until an absolute deadline with one of them;
//! * [`wake`]: sleeping until a descriptor has input, a bell rings or a deadline passes, so a
//!   thread with nothing to do costs nothing;
//! * [`budget`]: the real-time share a thread allows itself in each short window, so the
//!   kernel never throttles it and normal threads never starve;
//! * [`rt`]: real-time set-up (`SCHED_FIFO`, CPU affinity, `mlockall`, timer slack,
//!   `/dev/cpu_dma_latency`), each call failing with an error that names the missing privilege;
//! * [`sysinfo`]: what the kernel offers for timing (preemption model, clocksource, …), with the
//!   parsing kept pure so it is tested without the files it reads.
//!
//! It knows nothing about packets. All `unsafe` lives in the private `sys` module: one thin,
//! commented wrapper per libc call.
#![deny(unsafe_code)]
#![warn(missing_docs)]
// Every unsafe block says why it is sound.
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod budget;
pub mod rt;
mod sys;
pub mod sysinfo;
pub mod time;
pub mod wait;
pub mod wake;

pub use time::Instant;
pub use wait::{WaitStrategy, Waiter};
