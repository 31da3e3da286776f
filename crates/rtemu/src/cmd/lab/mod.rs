//! `rtemu lab`: the timing lab. Can this machine keep real time, and how precisely?
//!
//! The experiments live in `rtemu-lab` and their reports (tables in µs, JSON in integer ns,
//! CSV of raw samples, figures) in `rtemu-report`; each module here parses one subcommand's
//! flags, applies the real-time set-up, shows progress between measurements and prints.

mod deadline;
mod doctor;
mod echo;
mod latency;
mod linerate;
mod rtt;
mod sleep;

use std::path::PathBuf;

use clap::Subcommand;
use rtemu_clock::time::parse_duration_in;
use rtemu_lab::env::{Conditions, RtRequest};

/// Arguments of `rtemu lab`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  rtemu lab doctor
  rtemu lab sleep --methods nanosleep,spin,hybrid --count 500
  rtemu lab linerate --rates 1M,10M,100M --json
  rtemu lab deadline --mode both --steps 300
  rtemu lab rtt --max-size 1024 --step 256
  sudo rtemu lab latency --cpu 1 --json")]
pub struct LabArgs {
    // Boxed: the subcommands' flags are large, and LabArgs sits in the CLI's command enum.
    #[command(subcommand)]
    command: Box<LabCommand>,
}

#[derive(Debug, Subcommand)]
enum LabCommand {
    /// Sleep accuracy per wait method (the timing paper's Table 1).
    Sleep(sleep::SleepArgs),
    /// Requested vs achieved line rate per wait method and pacer (the timing paper's Figure 1).
    Linerate(linerate::LinerateArgs),
    /// Task-switch, preemption and IPC latencies under SCHED_OTHER and SCHED_FIFO, and the
    /// priority-inversion test (the RTOS paper's Table 1).
    Latency(latency::LatencyArgs),
    /// Real time vs real fast: the RTOS paper's tire model at a fixed rate against absolute
    /// deadlines, and as fast as possible.
    Deadline(deadline::DeadlineArgs),
    /// A one-screen verdict: what timing this machine can promise, and what to change.
    Doctor(doctor::DoctorArgs),
    /// UDP and/or raw Ethernet round trips per size against `rtemu lab echo` (the real-time
    /// UDP paper's benchmark), with the kernel's view beside the application's; UDP without
    /// --to runs against an echo server on loopback.
    Rtt(rtt::RttArgs),
    /// A UDP or raw Ethernet echo server for `rtemu lab rtt`, bounded in time.
    Echo(echo::EchoArgs),
}

/// Real-time set-up and load, shared by every lab command.
#[derive(Debug, clap::Args)]
struct RtArgs {
    /// Measure under SCHED_FIFO at this priority (1–99); default SCHED_OTHER.
    #[arg(long, value_name = "PRIO", value_parser = crate::cmd::number_in::<u8>(1..=99))]
    fifo: Option<u8>,
    /// Pin the measuring thread to this CPU.
    #[arg(long, value_name = "CPU")]
    cpu: Option<usize>,
    /// Do not lock memory with mlockall.
    #[arg(long)]
    no_mlock: bool,
    /// Do not hold /dev/cpu_dma_latency at 0 while measuring.
    #[arg(long)]
    no_dma_latency: bool,
    /// Set the measuring thread's timer slack (e.g. 1ns; the default is the kernel's, 50us).
    #[arg(long, value_name = "DURATION", value_parser = duration_in(1..=1_000_000_000))]
    timer_slack: Option<u64>,
    /// Run busy threads while measuring, kept off --cpu; without a number, one per CPU.
    #[arg(long, value_name = "THREADS", num_args = 0..=1)]
    load: Option<Option<usize>>,
}

/// Output formats, shared by every lab command.
#[derive(Debug, clap::Args)]
struct OutputArgs {
    /// Print the report as JSON (times in integer ns) instead of tables.
    #[arg(long)]
    json: bool,
    /// Write every raw sample to this CSV file.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
    /// Draw the results to this SVG or PNG file, by its extension (sleep: the timing paper's
    /// Figure 3; linerate: its Figure 1; rtt: round trip vs size; deadline: missed deadlines
    /// per configuration).
    #[arg(long, value_name = "FILE.svg|FILE.png")]
    plot: Option<PathBuf>,
}

impl OutputArgs {
    /// Refuses a `--plot` file of no known format, and outputs that name one file (`more`
    /// are the command's other outputs with their flags), before anything is measured.
    fn check(&self, more: &[(&str, Option<&std::path::Path>)]) -> anyhow::Result<()> {
        if let Some(path) = &self.plot {
            rtemu_report::plot::Format::of(path)?;
        }
        let ours = [
            ("--csv", self.csv.as_deref()),
            ("--plot", self.plot.as_deref()),
        ];
        rtemu_report::output::refuse_same_outputs(&[&ours[..], more].concat())
    }

    /// Writes `report`'s files, then prints it.
    fn emit(&self, report: &impl rtemu_report::lab::Report) -> anyhow::Result<()> {
        rtemu_report::lab::emit(report, self.json, self.csv.as_deref(), self.plot.as_deref())
    }
}

/// Refuses `flag value` when the `items` of `size` bytes it makes a run keep would not fit in
/// this machine's memory: a flag's range is what rtemu can do, not what every machine holds.
fn fits_in_memory(flag: &str, value: u64, items: u64, size: usize) -> anyhow::Result<()> {
    let needed = rtemu_sys::memory::bytes(items, size);
    Ok(rtemu_sys::memory::check(format!("{flag} {value}"), needed)?)
}

/// A duration flag's parser that takes only `range` (ns), naming it in the error.
fn duration_in(
    range: std::ops::RangeInclusive<u64>,
) -> impl Fn(&str) -> Result<u64, String> + Clone + Send + Sync + 'static {
    move |text| parse_duration_in(text, range.clone()).map_err(|e| e.to_string())
}

fn parse_rate(text: &str) -> Result<u64, String> {
    rtemu_lab::linerate::parse_rate_bps(text).map_err(|e| e.to_string())
}

/// Runs `rtemu lab`.
pub fn run(args: &LabArgs) -> anyhow::Result<()> {
    match args.command.as_ref() {
        LabCommand::Sleep(args) => sleep::run(args),
        LabCommand::Linerate(args) => linerate::run(args),
        LabCommand::Latency(args) => latency::run(args),
        LabCommand::Deadline(args) => deadline::run(args),
        LabCommand::Doctor(args) => doctor::run(args),
        LabCommand::Rtt(args) => rtt::run(args),
        LabCommand::Echo(args) => echo::run(args),
    }
}

/// Applies the real-time set-up and starts the load; keep them until the measurement ends.
fn prepare(rt: &RtArgs) -> anyhow::Result<Conditions> {
    let request = RtRequest {
        fifo_priority: rt.fifo,
        cpu: rt.cpu,
        mlock: !rt.no_mlock,
        dma_latency: !rt.no_dma_latency,
        timer_slack_ns: rt.timer_slack,
    };
    Ok(Conditions::set_up(&request, rt.load, rt.cpu)?)
}

/// `rtemu lab ARGS` parsed, for the tests of each subcommand's flags.
#[cfg(test)]
fn parse(args: &[&str]) -> Result<LabCommand, clap::Error> {
    use clap::Parser;
    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        lab: LabArgs,
    }
    Cli::try_parse_from(std::iter::once("lab").chain(args.iter().copied())).map(|c| *c.lab.command)
}
