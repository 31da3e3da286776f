//! The engine's flags: `up`'s `--engine-*` options and the hidden `rtemu engine LAB`
//! subcommand that `up` starts (the daemon itself is `rtemu_control::engine`).

use anyhow::Result;
use clap::{Args, ValueEnum};
use rtemu_clock::rt::CpuList;
use rtemu_clock::WaitStrategy;
use rtemu_control::engine::{self, EngineOptions, IoKind, Priority, RunOptions, SIZING_PPS};
use rtemu_topo::state::LabName;
use rtemu_topo::topology::ProgramsCpus;

/// Run a lab's engine (started by `rtemu up`; not for direct use).
#[derive(Debug, Args)]
pub struct EngineArgs {
    /// The lab.
    pub lab: LabName,
    /// How the release loop waits: auto, spin, hybrid:MARGIN, sleep.
    #[arg(long)]
    pub wait: WaitStrategy,
    /// Pin the release threads to these CPUs (round robin).
    #[arg(long)]
    pub cpus: Option<CpuList>,
    /// The release threads' SCHED_FIFO priority, or `off`.
    #[arg(long, default_value = "40")]
    pub priority: Priority,
    /// Release threads.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub threads: u64,
    /// Packet I/O (default: af-packet; af-xdp falls back to af-packet where it cannot be set
    /// up).
    #[arg(long, value_enum)]
    pub io: Option<IoArg>,
    /// The packet rate each direction's buffers are sized for.
    #[arg(long, default_value_t = SIZING_PPS)]
    pub sizing_pps: u64,
}

/// How `up` starts a lab's engine; each option left out takes the engine's default.
#[derive(Debug, Clone, Default, Args)]
pub struct EngineFlags {
    /// How the engine of impaired links waits for a release: `auto` (the default: asleep until
    /// a frame arrives or its measured wake-up latency before a release, then spinning),
    /// `spin` (a core kept busy), `hybrid:MARGIN` (sleep until MARGIN before, then spin) or
    /// `sleep`.
    #[arg(long = "engine-wait", value_name = "STRATEGY")]
    pub wait: Option<WaitStrategy>,
    /// Pin the engine's release threads to these CPUs, round robin (`1`, `2-3`). Default: the
    /// last CPUs, one per thread, where one is left for everything else.
    #[arg(long = "engine-cpus", alias = "engine-cpu", value_name = "LIST")]
    pub cpus: Option<CpuList>,
    /// The release threads' real-time class: a SCHED_FIFO priority from 1 to 99 (default 40:
    /// above every normal program, below the kernel's interrupt threads), or `off` for
    /// SCHED_OTHER. Each thread takes at most 9 ms of every 10 ms under SCHED_FIFO, so the
    /// kernel never throttles it and the CPU's other programs still run.
    #[arg(long = "engine-priority", value_name = "N|off")]
    pub priority: Option<Priority>,
    /// Release threads the impaired links are spread over, link by link (every frame of a
    /// link stays in one thread). Default: one per two CPUs, at most one per link.
    #[arg(long = "engine-threads", value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub threads: Option<u64>,
    /// The engine's packet I/O: `af-packet` (the default) or `af-xdp` (fewer frames lost under
    /// load; no faster on veth, see docs/benchmarks.md). Where AF_XDP cannot be set up, the
    /// engine says so in its log and uses `af-packet`.
    #[arg(long = "engine-io", value_name = "IO", value_enum)]
    pub io: Option<IoArg>,
    /// The packet rate, per direction, that each impaired link's frame buffers are sized for:
    /// its longest delay × PPS frames in flight, twice over, plus its longest rate queue (at
    /// least 4096 and at most 65536 buffers of one MTU each, locked in memory). Beyond that
    /// rate frames are dropped as `pool-exhausted`. Default 100000.
    #[arg(long = "engine-pps", value_name = "PPS", value_parser = crate::cmd::number_in::<u64>(1..))]
    pub sizing_pps: Option<u64>,
    /// Where the processes started in the lab's nodes run: `all` (every CPU, the engine's
    /// among them) or `off-engine` (every CPU but the release threads', in a cpuset of the
    /// lab's; containers too). Default: the file's `programs_cpus`, else `all`.
    #[arg(long = "programs-cpus", value_name = "all|off-engine")]
    pub programs: Option<ProgramsCpus>,
}

impl EngineFlags {
    /// The options these flags give.
    pub fn options(&self) -> EngineOptions {
        EngineOptions {
            wait: self.wait,
            cpus: self.cpus.clone().map(|c| c.0),
            priority: self.priority,
            threads: self.threads.map(|n| n as usize),
            io: self.io.map(IoKind::from),
            sizing_pps: self.sizing_pps,
            programs: self.programs,
            // This executable: `rtemu` itself.
            program: None,
        }
    }
}

/// The engine's packet I/O layer, as flags name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum IoArg {
    /// `AF_PACKET` sockets with `TPACKET_V2` rings.
    AfPacket,
    /// AF_XDP sockets, each fed by an XDP program on its interface.
    AfXdp,
}

impl From<IoArg> for IoKind {
    fn from(io: IoArg) -> IoKind {
        match io {
            IoArg::AfPacket => IoKind::AfPacket,
            IoArg::AfXdp => IoKind::AfXdp,
        }
    }
}

/// `rtemu engine LAB`.
pub fn run(args: &EngineArgs) -> Result<()> {
    engine::run(&RunOptions {
        lab: args.lab.clone(),
        wait: args.wait,
        cpus: args.cpus.clone().map(|c| c.0).unwrap_or_default(),
        priority: args.priority,
        threads: args.threads as usize,
        io: args.io.map(IoKind::from),
        sizing_pps: args.sizing_pps,
    })
}
