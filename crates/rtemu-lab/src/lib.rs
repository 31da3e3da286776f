//! rtemu's timing lab: can this machine keep real time, and how precisely?
//!
//! Each module is one experiment from the papers rtemu is measured against, run the way
//! cyclictest runs: absolute deadlines on `CLOCK_MONOTONIC`, samples in preallocated arrays, no
//! I/O and no computation until the measurement ends, and the lab's own overhead reported.
//!
//! * [`sleep`]: sleep accuracy per wait method (the timing paper's Table 1 and Figure 3);
//! * [`linerate`]: requested vs achieved line rate per wait method and pacer (its Figure 1);
//! * [`latency`]: task-switch, preemption and IPC latencies under `SCHED_OTHER` and
//!   `SCHED_FIFO`, and the priority-inversion test (the RTOS paper's Table 1);
//! * [`rtt`]: UDP and raw Ethernet round trips per size against an echo server, as the
//!   application and as the kernel's timestamps see them (the real-time UDP paper's
//!   benchmark);
//! * [`deadline`] over [`tire`]: real time vs real fast, the RTOS paper's tire benchmark;
//! * [`doctor`]: a one-screen verdict with what to change;
//! * [`late_wakeups`] over [`tracefs`]: why a timed wake-up came late, from the kernel's
//!   trace of its CPU (the timer late to an idle CPU: the virtual CPU absent; late while a
//!   task or handler ran; or in time, then a wait behind one);
//! * [`stats`]: the statistics they report (error mean and variance, HdrHistogram percentiles);
//! * [`cputime`]: CPU time by state from `/proc/stat` (busy, softirq, the hypervisor's steal);
//! * [`env`]: real-time set-up, busy load, the measurement overhead and the report header;
//! * [`sync`]: the pthread mutex (with or without priority inheritance) and semaphore the
//!   latency tests hand off through.
//!
//! `unsafe` is allowed in two modules only, one libc call per block: [`sync`], and `rtt::sys`
//! (packet sockets, `SO_TIMESTAMPING` and its control messages).
//!
//! The wait methods are `rtemu-clock`'s, the very code the real-time engine runs, so what the
//! lab measures is what the engine does.
#![deny(unsafe_code)]
#![warn(missing_docs)]
// Every unsafe block says why it is sound.
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod cputime;
pub mod deadline;
pub mod doctor;
pub mod env;
pub mod late_wakeups;
pub mod latency;
pub mod linerate;
pub mod rtt;
pub mod sleep;
pub mod stats;
pub mod sync;
pub mod tire;
pub mod tracefs;
