//! `rtemu lab deadline`: real time vs real fast, the tire benchmark.

use rtemu_clock::rt;
use rtemu_lab::deadline::{self, DeadlineConfig, Mode};
use rtemu_lab::env::{Conditions, RtRequest};
use rtemu_report::lab::DeadlineReport;

use rtemu_report::progress::Steps;

use super::OutputArgs;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum DeadlineMode {
    /// Steps released at --rate against absolute deadlines.
    Realtime,
    /// Steps back to back.
    Fast,
    /// Both, one after the other.
    Both,
}

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  rtemu lab deadline
  rtemu lab deadline --mode fast --quadrant-nodes 250 --threads 2 --steps 1000 --json
  rtemu lab deadline --mode realtime --rate 200 --steps 2000 --csv steps.csv
  sudo rtemu lab deadline --sweep --sweep-sizes 25,250 --sweep-threads 1,2 --plot deadline.svg")]
pub(super) struct DeadlineArgs {
    /// Tire nodes per quadrant (the tire has 4× as many).
    #[arg(long, default_value_t = 25, value_parser = crate::cmd::number_in::<u64>(1..=1_000_000))]
    quadrant_nodes: u64,
    /// Solver threads.
    #[arg(long, default_value_t = 1, value_parser = crate::cmd::number_in::<u64>(1..=1024))]
    threads: u64,
    /// Steps to run (the paper: 6000, 60 s at 100 Hz).
    #[arg(long, default_value_t = 300, value_parser = crate::cmd::number_in::<u64>(1..=10_000_000))]
    steps: u64,
    /// Release rate of real-time steps, Hz, and so the model's time step (the paper: 100;
    /// at least 100, because the explicit solver is stable only up to 10 ms steps).
    #[arg(long, default_value_t = 100, value_parser = crate::cmd::number_in::<u64>(100..=100_000))]
    rate: u64,
    /// Which benchmark to run.
    #[arg(long, value_enum, default_value_t = DeadlineMode::Both)]
    mode: DeadlineMode,
    /// Run the solver threads under SCHED_FIFO at this priority (1–99).
    #[arg(long, value_name = "PRIO", value_parser = crate::cmd::number_in::<u8>(1..=99))]
    fifo: Option<u8>,
    /// Sweep model sizes × thread counts × SCHED_OTHER/SCHED_FIFO in real-time mode and show
    /// missed deadlines as a table (the paper's Figures 9–12).
    #[arg(long)]
    sweep: bool,
    /// Sizes for --sweep, in nodes per quadrant.
    #[arg(long, value_delimiter = ',', default_value = "25,250,2500")]
    sweep_sizes: Vec<usize>,
    /// Thread counts for --sweep (default: 1, one per CPU, two per CPU).
    #[arg(long, value_delimiter = ',')]
    sweep_threads: Vec<usize>,
    /// Do not lock memory with mlockall.
    #[arg(long)]
    no_mlock: bool,
    /// Do not hold /dev/cpu_dma_latency at 0 while measuring.
    #[arg(long)]
    no_dma_latency: bool,
    #[command(flatten)]
    output: OutputArgs,
}

pub(super) fn run(args: &DeadlineArgs) -> anyhow::Result<()> {
    let period_ns = 1_000_000_000 / args.rate;
    let request = RtRequest {
        mlock: !args.no_mlock,
        dma_latency: !args.no_dma_latency,
        ..RtRequest::default()
    };
    args.output.check(&[])?;
    let conditions = Conditions::set_up(&request, None, None)?;
    let steps = args.steps as usize;
    let (runs, skipped) = if args.sweep {
        let cpus = conditions.header().cpus;
        let fifo = rt::fifo_permitted().then(|| args.fifo.unwrap_or(80));
        let sizes = &args.sweep_sizes;
        deadline::sweep_plan(sizes, &args.sweep_threads, cpus, fifo, (steps, period_ns))
    } else {
        let both = args.mode == DeadlineMode::Both;
        let modes = (
            both || args.mode == DeadlineMode::Realtime,
            both || args.mode == DeadlineMode::Fast,
        );
        let base = DeadlineConfig {
            threads: args.threads as usize,
            steps,
            mode: Mode::RealFast,
            fifo_priority: args.fifo,
        };
        let size = args.quadrant_nodes as usize;
        (deadline::mode_runs(size, modes, period_ns, base), None)
    };
    let bar = Steps::new(runs.len());
    let results = deadline::run_all(&runs, period_ns, &mut |size, config| {
        bar.next(format!("{} nodes, {} threads", 4 * size, config.threads));
    });
    bar.finish();
    let header = conditions.end();
    let skipped = skipped.into_iter().map(str::to_owned).collect();
    let report = DeadlineReport::new(header, results?, skipped, args.steps, args.rate);
    args.output.emit(&report)
}

#[cfg(test)]
mod tests {
    use super::super::{parse, LabCommand};
    use super::*;

    #[test]
    fn deadline_defaults_are_short_and_sweeps_take_lists() {
        let deadline = |args: &[&str]| match parse(&[&["deadline"][..], args].concat()).unwrap() {
            LabCommand::Deadline(args) => args,
            other => panic!("not deadline: {other:?}"),
        };
        let args = deadline(&[]);
        assert_eq!(
            (args.steps, args.rate, args.mode),
            (300, 100, DeadlineMode::Both)
        );
        let args = deadline(&["--sweep", "--sweep-sizes", "1,10", "--sweep-threads", "1,4"]);
        assert!(args.sweep);
        assert_eq!(
            (args.sweep_sizes, args.sweep_threads),
            (vec![1, 10], vec![1, 4])
        );
        assert!(parse(&["deadline", "--threads", "0"]).is_err());
    }
}
