//! `rtemu lab latency`: task-switch, preemption and IPC latencies, and priority inversion.

use std::path::PathBuf;

use rtemu_lab::env::{Conditions, RtRequest};
use rtemu_lab::latency::{self, LatencyConfig, Plan};
use rtemu_report::lab::LatencyReport;

use rtemu_report::progress::Steps;

use super::duration_in;

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  rtemu lab latency
  rtemu lab latency --iterations 10000 --period 500us --json
  rtemu lab latency --csv latency.csv
  sudo rtemu lab latency --cpu 1 --load --watchdog 100ms")]
pub(super) struct LatencyArgs {
    /// The CPU every test thread is pinned to (default: the last one allowed).
    #[arg(long, value_name = "CPU")]
    cpu: Option<usize>,
    /// Samples per test and scheduling class.
    #[arg(long, default_value_t = 1000, value_parser = crate::cmd::number_in::<u64>(1..=10_000_000))]
    iterations: u64,
    /// Wake-up period of the preemption test (10us to 1s).
    #[arg(long, value_name = "DURATION", default_value = "1ms", value_parser = duration_in(latency::PERIOD_RANGE_NS))]
    period: u64,
    /// Bound on each test, and on the spinning medium thread of the priority-inversion test
    /// (1ms to 1h).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration_in(latency::TIME_LIMIT_RANGE_NS))]
    time_limit: u64,
    /// How long the priority-inversion test lets an inversion last before ending it (1ms to
    /// 60s).
    #[arg(long, value_name = "DURATION", default_value = "300ms", value_parser = duration_in(1_000_000..=60_000_000_000))]
    watchdog: u64,
    /// Do not lock memory with mlockall.
    #[arg(long)]
    no_mlock: bool,
    /// Do not hold /dev/cpu_dma_latency at 0 while measuring.
    #[arg(long)]
    no_dma_latency: bool,
    /// Run busy threads on the other CPUs while measuring; without a number, one per CPU.
    #[arg(long, value_name = "THREADS", num_args = 0..=1)]
    load: Option<Option<usize>>,
    /// Print the report as JSON (times in integer ns) instead of tables.
    #[arg(long)]
    json: bool,
    /// Write one row per test and class (and per priority-inversion run) to this CSV file.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
}

pub(super) fn run(args: &LatencyArgs) -> anyhow::Result<()> {
    // Per iteration and class, a sample on each of the test's threads and the report's copy.
    let items = args.iterations.saturating_mul(4 * 2);
    super::fits_in_memory("--iterations", args.iterations, items, 2 * 8)?;
    let plan = Plan::probe(args.cpu)?;
    let config = LatencyConfig {
        cpu: plan.cpu,
        iterations: args.iterations as usize,
        period_ns: args.period,
        time_limit_ns: args.time_limit,
    };
    let request = RtRequest {
        mlock: !args.no_mlock,
        dma_latency: !args.no_dma_latency,
        ..RtRequest::default()
    };
    let conditions = Conditions::set_up(&request, args.load, Some(plan.cpu))?;
    let bar = Steps::new(plan.steps());
    let (rows, inversion) = latency::run_plan(&config, &plan, args.watchdog, &mut |step| {
        bar.next(step.to_string());
    })?;
    bar.finish();
    let header = conditions.end();
    let report = LatencyReport::new(
        header,
        &config,
        rows,
        inversion,
        args.watchdog,
        plan.skipped,
    );
    rtemu_report::lab::emit(&report, args.json, args.csv.as_deref(), None)
}
