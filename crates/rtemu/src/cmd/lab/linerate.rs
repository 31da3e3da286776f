//! `rtemu lab linerate`: requested vs achieved line rate per wait method and pacer.

use rtemu_clock::WaitStrategy;
use rtemu_lab::linerate::{self, Pacer};
use rtemu_report::lab::LinerateReport;

use rtemu_report::progress::Steps;

use super::{duration_in, parse_rate, prepare, OutputArgs, RtArgs};

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  rtemu lab linerate
  rtemu lab linerate --methods sleep,spin --pacers absolute --rates 1M,10M,100M --packet-size 1000 --json
  rtemu lab linerate --rates 1k,10k,100k,1M,10M,100M --time 200ms --csv linerate.csv --plot linerate.svg
  sudo rtemu lab linerate --fifo 80 --cpu 1 --load")]
pub(super) struct LinerateArgs {
    /// Wait methods to compare, comma-separated (see `rtemu lab sleep --help`).
    #[arg(long, value_delimiter = ',', default_value = "nanosleep,sleep,spin")]
    methods: Vec<WaitStrategy>,
    /// Pacers: absolute (deadline start + k·interval, as the engine does) and relative (a
    /// naive sleep of one interval per packet).
    #[arg(long, value_delimiter = ',', default_value = "absolute,relative")]
    pacers: Vec<Pacer>,
    /// Requested line rates in bit/s, comma-separated, with k/M/G (the paper: 1k to 100M).
    #[arg(long, value_delimiter = ',', default_value = "100k,1M,10M,100M", value_parser = parse_rate)]
    rates: Vec<u64>,
    /// Packet size in bytes (the paper used 100).
    #[arg(long, default_value_t = 100, value_parser = crate::cmd::number_in::<u32>(1..=65_535))]
    packet_size: u32,
    /// Time to spend on each rate × method × pacer (1ms to 60s; a slow rate takes longer, to
    /// pace --min-packets).
    #[arg(long, value_name = "DURATION", default_value = "50ms", value_parser = duration_in(1_000_000..=60_000_000_000))]
    time: u64,
    /// Fewest packets per point, however slow the rate.
    #[arg(long, default_value_t = 5, value_parser = crate::cmd::number_in::<u64>(2..=1_000_000))]
    min_packets: u64,
    /// Most packets per point, however fast the rate.
    #[arg(long, default_value_t = 100_000, value_parser = crate::cmd::number_in::<u64>(2..=10_000_000))]
    max_packets: u64,
    #[command(flatten)]
    rt: RtArgs,
    #[command(flatten)]
    output: OutputArgs,
}

pub(super) fn run(args: &LinerateArgs) -> anyhow::Result<()> {
    let points = linerate::sweep_points(
        &args.rates,
        &args.methods,
        &args.pacers,
        args.packet_size,
        args.time,
        (args.min_packets as usize, args.max_packets as usize),
    )?;
    args.output.check(&[])?;
    let conditions = prepare(&args.rt)?;
    let bar = Steps::new(points.len());
    let results = linerate::run(&points, &mut |point| {
        bar.next(format!(
            "{} {} {} bit/s",
            point.method, point.pacer, point.rate_bps
        ));
    });
    bar.finish();
    let header = conditions.end();
    let report = LinerateReport::new(header, args.packet_size, args.time, results?);
    args.output.emit(&report)
}
