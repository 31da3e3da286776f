//! `rtemu lab sleep`: sleep accuracy per wait method.

use std::path::PathBuf;

use rtemu_clock::WaitStrategy;
use rtemu_lab::latency;
use rtemu_lab::sleep::{self, SleepConfig, Workload};
use rtemu_lab::tracefs::Recording;
use rtemu_report::lab::{print, write_files, SleepReport};
use rtemu_report::progress::Steps;

use super::{duration_in, prepare, OutputArgs, RtArgs};

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  rtemu lab sleep
  rtemu lab sleep --methods nanosleep,timerfd,spin,hybrid:50us --workload fixed:100us --count 1000 --timer-slack 1ns
  rtemu lab sleep --workload uniform:10us-1ms --load 2 --json --csv sleep.csv --histogram sleep-hist.txt
  sudo rtemu lab sleep --workload paper --count 1000 --fifo 80 --cpu 1 --plot sleep.svg
  sudo rtemu lab sleep --methods sleep --count 5000 --fifo 40 --cpu 1 --trace")]
pub(super) struct SleepArgs {
    /// Wait methods to compare, comma-separated: select, nanosleep, sleep (clock-abs), timerfd,
    /// epoll, slack, spin (busy), hybrid[:MARGIN], auto (the engine's: hybrid with the margin
    /// of its measured wake-up latency).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "select,nanosleep,sleep,timerfd,epoll,slack,spin,hybrid,auto"
    )]
    methods: Vec<WaitStrategy>,
    /// Requested sleeps: paper (uniform 0–100 ms), micro (uniform 10us–2ms), fixed:DURATION,
    /// uniform:MIN-MAX.
    #[arg(long, default_value = "micro")]
    workload: Workload,
    /// Requests per method (the paper used 1000).
    #[arg(long, default_value_t = 200, value_parser = crate::cmd::number_in::<u64>(1..=10_000_000))]
    count: u64,
    /// Seed of the request generator.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Stop each method after this long even if requests remain (1ms to 1h).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration_in(latency::TIME_LIMIT_RANGE_NS))]
    time_limit: u64,
    /// Write a cyclictest-style histogram of the error (one row per µs, one column per
    /// method, up to --histogram-max µs) to this file.
    #[arg(long, value_name = "FILE")]
    histogram: Option<PathBuf>,
    /// Microsecond buckets of --histogram.
    #[arg(long, default_value_t = 1000, value_parser = crate::cmd::number_in::<u64>(1..=1_000_000))]
    histogram_max: u64,
    /// Say why each wake-up more than 100 µs late came late, from the kernel's trace of the
    /// CPUs the test runs on (root; the trace is kept in a tracing instance of rtemu's own,
    /// removed afterwards): the CPU absent (a virtual CPU its host took), the guest's own work,
    /// or a wait for the CPU.
    #[arg(long)]
    trace: bool,
    #[command(flatten)]
    rt: RtArgs,
    #[command(flatten)]
    output: OutputArgs,
}

pub(super) fn run(args: &SleepArgs) -> anyhow::Result<()> {
    let config = SleepConfig {
        methods: args.methods.clone(),
        workload: args.workload,
        count: args.count as usize,
        seed: args.seed,
        time_limit_ns: args.time_limit,
    };
    args.output
        .check(&[("--histogram", args.histogram.as_deref())])?;
    // Per request and method: its request, its sample and the report's sorted copy.
    let items = args.count.saturating_mul(config.methods.len() as u64 + 1);
    super::fits_in_memory("--count", args.count, items, 3 * 8)?;
    let conditions = prepare(&args.rt)?;
    let recording = match args.trace {
        true => Some(Recording::start(&rtemu_clock::rt::affinity()?)?),
        false => None,
    };
    let bar = Steps::new(config.methods.len());
    let samples = sleep::run(&config, &mut |i, method| {
        bar.at(i, method.to_string());
    })?;
    bar.finish();
    let traced = recording.map(Recording::finish).transpose()?;
    let header = conditions.end();
    let report = SleepReport::new(header, &config, samples).with_trace(traced);
    let output = &args.output;
    write_files(&report, output.csv.as_deref(), output.plot.as_deref())?;
    if let Some(path) = &args.histogram {
        rtemu_report::output::write_with(path, |out| {
            report.histogram(out, args.histogram_max as usize)
        })?;
    }
    print(&report, output.json)
}

#[cfg(test)]
mod tests {
    use super::super::{parse, LabCommand};
    use super::*;

    /// `rtemu lab sleep ARGS` parsed.
    fn sleep(args: &[&str]) -> SleepArgs {
        match parse(&[&["sleep"][..], args].concat()).unwrap() {
            LabCommand::Sleep(args) => args,
            other => panic!("not sleep: {other:?}"),
        }
    }

    #[test]
    fn sleep_defaults_are_small_and_complete() {
        let args = sleep(&[]);
        assert_eq!(args.methods.len(), WaitStrategy::ALL.len());
        assert_eq!(args.workload, Workload::Micro);
        assert_eq!(args.count, 200);
        assert_eq!(args.rt.load, None);
        assert_eq!(sleep(&["--load", "3"]).rt.load, Some(Some(3)));
        assert_eq!(sleep(&["--load"]).rt.load, Some(None));
    }

    #[test]
    fn bad_values_are_refused_with_the_reason() {
        let err = parse(&["sleep", "--methods", "spin,sleeep"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown wait strategy `sleeep`"), "{err}");
        let err = parse(&["sleep", "--fifo", "0"]).unwrap_err().to_string();
        assert!(err.contains("1..=99") || err.contains("1..100"), "{err}");
        let err = parse(&["linerate", "--rates", "10x"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a line rate"), "{err}");
        let err = parse(&["sleep", "--workload", "fixed:5"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("no known unit"), "{err}");
    }
}
