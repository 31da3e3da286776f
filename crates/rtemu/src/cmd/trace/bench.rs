//! `rtemu trace bench`: how fast a trace streams through the prefetching reader.

use std::path::PathBuf;

use anyhow::Context as _;
use rtemu_trace::bench::BenchPlan;
use rtemu_trace::{EndPolicy, PrefetchConfig, UnderrunPolicy};

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  rtemu trace bench big.rpl
  rtemu trace bench big.rpl --cold --json
  rtemu trace bench big.rpl --cold --underrun pass --pace 1000000 --limit 10000000")]
pub(super) struct BenchArgs {
    /// The trace to stream (make it larger than the page cache for a true cold figure).
    file: PathBuf,
    /// Drop the file from the page cache first (fsync, then posix_fadvise DONTNEED), so the
    /// first pass reads from the disk.
    #[arg(long)]
    cold: bool,
    /// Passes over the file after the first (warm cache), 0 to 100.
    #[arg(long, default_value_t = 2, value_parser = crate::cmd::number_in::<u32>(0..=100))]
    warm_passes: u32,
    /// Records per prefetch block, 1 to 4194304 (blocks × records at most 16777216, 256 MiB).
    #[arg(long, default_value_t = 1 << 16, value_parser = crate::cmd::number_in::<u64>(1..=1 << 22))]
    block_records: u64,
    /// Blocks in the prefetch ring, 2 to 256.
    #[arg(long, default_value_t = 8, value_parser = crate::cmd::number_in::<u64>(2..=256))]
    blocks: u64,
    /// Under-run policy: wait (measure the reader's throughput), or pass, drop, hold-last
    /// (measure how often a consumer of the given pace would find no record ready).
    #[arg(long, default_value = "wait")]
    underrun: UnderrunPolicy,
    /// Consume at this many records per second (busy-waiting between records), as a link
    /// would, 1 to 1000000000; default: as fast as possible. A paced run that would take more
    /// than 10 minutes is refused (bound it with --limit).
    #[arg(long, value_name = "RPS", value_parser = crate::cmd::number_in::<u64>(1..=1_000_000_000))]
    pace: Option<u64>,
    /// Stop each pass after this many actions.
    #[arg(long)]
    limit: Option<u64>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub(super) fn run(a: &BenchArgs) -> anyhow::Result<()> {
    let bytes = std::fs::metadata(&a.file)
        .with_context(|| format!("reading {}", a.file.display()))?
        .len();
    let plan = BenchPlan {
        config: PrefetchConfig {
            block_records: a.block_records as usize,
            blocks: a.blocks as usize,
            underrun: a.underrun,
            end: EndPolicy::Stop,
            ..PrefetchConfig::default()
        },
        cold: a.cold,
        warm_passes: a.warm_passes,
        pace: a.pace,
        limit: a.limit,
    };
    plan.check(bytes)?;
    let passes = plan.run(&a.file)?;
    if a.json {
        return rtemu_report::text::print_json(&passes);
    }
    let mut out = std::io::stdout().lock();
    Ok(rtemu_report::trace::write_bench(
        &mut out, &a.file, bytes, &plan, &passes,
    )?)
}
