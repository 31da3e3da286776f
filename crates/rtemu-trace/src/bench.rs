//! How fast a trace streams through the [`Prefetcher`] (`rtemu trace bench`): one pass over
//! a file, as fast as possible or at a link's pace, and a run of passes ([`BenchPlan`]),
//! checked to stay within memory and time.

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::TraceError;
use crate::prefetch::{PrefetchConfig, Prefetcher};

/// The most records a benchmark's prefetch ring may hold (256 MiB of actions).
pub const MAX_RING_RECORDS: u64 = 1 << 24;

/// The longest a paced benchmark may run.
pub const MAX_PACED_NS: u64 = 600_000_000_000;

/// A benchmark that may not run, or a pass that failed.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The prefetch ring would hold more than [`MAX_RING_RECORDS`].
    #[error(
        "--blocks {blocks} × --block-records {block_records} is {} records in the ring: at most \
         {MAX_RING_RECORDS} (256 MiB); lower either",
        blocks * block_records
    )]
    Ring {
        /// Blocks in the ring.
        blocks: u64,
        /// Records per block.
        block_records: u64,
    },
    /// A paced run could take longer than [`MAX_PACED_NS`].
    #[error(
        "--pace {rate} over up to {records} records × {passes} passes would take up to {:.0} s, \
         more than the {} s a paced run may take: raise --pace, or bound each pass with --limit",
        *ns as f64 / 1e9,
        MAX_PACED_NS / 1_000_000_000
    )]
    TooLong {
        /// Records per second.
        rate: u64,
        /// The most records one pass reads.
        records: u64,
        /// Passes.
        passes: u64,
        /// The longest the run could take, ns.
        ns: u128,
    },
    /// The file could not be dropped from the page cache for a cold pass.
    #[error("dropping {} from the page cache", path.display())]
    Evict {
        /// The trace.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A pass failed.
    #[error(transparent)]
    Trace(#[from] TraceError),
}

/// The passes of a benchmark: the first (`cold`: with the file dropped from the page cache
/// first), then `warm_passes` more, each through a prefetcher set up by `config`, at `pace`
/// records per second or as fast as possible, at most `limit` records each.
#[derive(Clone, Copy, Debug)]
pub struct BenchPlan {
    /// The prefetcher's set-up.
    pub config: PrefetchConfig,
    /// Whether the first pass reads from the disk.
    pub cold: bool,
    /// Passes after the first.
    pub warm_passes: u32,
    /// Records per second the consumer takes; `None`: as fast as possible.
    pub pace: Option<u64>,
    /// The most records per pass.
    pub limit: Option<u64>,
}

impl BenchPlan {
    /// Refuses a ring above [`MAX_RING_RECORDS`], and a paced run over a file of `bytes` that
    /// could take longer than [`MAX_PACED_NS`] (every record takes at least 4 bytes in any
    /// form, which bounds the records read).
    pub fn check(&self, bytes: u64) -> Result<(), BenchError> {
        let (blocks, block_records) = (self.config.blocks as u64, self.config.block_records as u64);
        if blocks * block_records > MAX_RING_RECORDS {
            return Err(BenchError::Ring {
                blocks,
                block_records,
            });
        }
        if let Some(rate) = self.pace {
            let records = self.limit.unwrap_or(u64::MAX).min(bytes / 4);
            let passes = 1 + u64::from(self.warm_passes);
            let ns = u128::from(records) * u128::from(passes) * 1_000_000_000 / u128::from(rate);
            if ns > u128::from(MAX_PACED_NS) {
                return Err(BenchError::TooLong {
                    rate,
                    records,
                    passes,
                    ns,
                });
            }
        }
        Ok(())
    }

    /// Runs the passes over the trace at `path`.
    pub fn run(&self, path: &Path) -> Result<Vec<BenchPass>, BenchError> {
        let labels = std::iter::once(if self.cold { "cold" } else { "first" })
            .chain(std::iter::repeat_n("warm", self.warm_passes as usize));
        let mut passes = Vec::new();
        for label in labels {
            if label == "cold" {
                crate::cache::evict(path).map_err(|source| BenchError::Evict {
                    path: path.to_owned(),
                    source,
                })?;
            }
            passes.push(pass(path, label, self.config, self.pace, self.limit)?);
        }
        Ok(passes)
    }
}

/// One pass's figures.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct BenchPass {
    /// Which pass: `cold`, `first` or `warm`.
    pub pass: String,
    /// Records read.
    pub records: u64,
    /// Times the consumer found no record ready.
    pub underruns: u64,
    /// From opening the file to the last record.
    pub seconds: f64,
    /// Records per second.
    pub records_per_second: f64,
    /// Of 4-byte words: the raw form's bytes.
    pub megabytes_per_second: f64,
}

/// Streams the trace at `path` once through a prefetcher set up by `config`, consuming at
/// `pace` records per second (busy-waiting between records, as a link would) or as fast as
/// possible, at most `limit` records; `label` names the pass.
pub fn pass(
    path: &Path,
    label: &str,
    config: PrefetchConfig,
    pace: Option<u64>,
    limit: Option<u64>,
) -> Result<BenchPass, TraceError> {
    let start = Instant::now();
    let mut p = Prefetcher::open(path, None, config)?;
    p.prime()?;
    // A paced consumer starts its schedule once records are ready, as a link would.
    let schedule = Instant::now();
    // Sum the delays so the loop cannot be optimised away, and as a checksum.
    let mut sum = 0u64;
    let mut taken = 0u64;
    while limit.is_none_or(|l| taken < l) {
        if let Some(rate) = pace {
            let due = schedule
                + Duration::from_nanos(
                    (u128::from(taken) * 1_000_000_000 / u128::from(rate)) as u64,
                );
            while Instant::now() < due {
                std::hint::spin_loop();
            }
        }
        let Some(x) = p.next_action()? else { break };
        sum = sum.wrapping_add(x.delay_ns().unwrap_or(1));
        taken += 1;
    }
    let seconds = start.elapsed().as_secs_f64();
    let records = p.counters().records;
    std::hint::black_box(sum);
    Ok(BenchPass {
        pass: label.to_owned(),
        records,
        underruns: p.counters().underruns,
        seconds,
        records_per_second: records as f64 / seconds,
        megabytes_per_second: records as f64 * 4.0 / seconds / 1e6,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Action, EndPolicy, Format, Header, RecordWriter, UnderrunPolicy};

    #[test]
    fn a_pass_reads_every_record_or_stops_at_the_limit() {
        let dir = std::env::temp_dir().join(format!("rtemu-bench-pass-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.rpl");
        let file = std::fs::File::create(&path).unwrap();
        let mut w = RecordWriter::new(file, Format::Raw, &Header::default()).unwrap();
        for i in 0..1000 {
            w.write(Action::Pass { delay_ns: i * 1000 }).unwrap();
        }
        w.finish().unwrap();
        let config = PrefetchConfig {
            block_records: 64,
            blocks: 4,
            underrun: UnderrunPolicy::Wait,
            end: EndPolicy::Stop,
            ..PrefetchConfig::default()
        };
        let all = pass(&path, "first", config, None, None).unwrap();
        assert_eq!(
            (all.pass.as_str(), all.records, all.underruns),
            ("first", 1000, 0)
        );
        assert!(all.records_per_second > 0.0 && all.megabytes_per_second > 0.0);
        // 100 records at 100 000 per second take at least a millisecond.
        let paced = pass(&path, "warm", config, Some(100_000), Some(100)).unwrap();
        assert!(
            paced.records >= 100 && paced.seconds >= 0.000_99,
            "{paced:?}"
        );
        let plan = BenchPlan {
            config,
            cold: true,
            warm_passes: 2,
            pace: None,
            limit: Some(10),
        };
        let passes = plan.run(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let labels: Vec<_> = passes
            .iter()
            .map(|p| (p.pass.as_str(), p.records))
            .collect();
        assert_eq!(labels, [("cold", 10), ("warm", 10), ("warm", 10)]);
    }

    #[test]
    fn a_ring_too_large_or_a_paced_run_too_long_is_refused() {
        let mut plan = BenchPlan {
            config: PrefetchConfig {
                block_records: 1 << 22,
                blocks: 8,
                ..PrefetchConfig::default()
            },
            cold: false,
            warm_passes: 2,
            pace: None,
            limit: None,
        };
        let e = plan.check(1 << 30).unwrap_err();
        assert!(
            e.to_string().contains("is 33554432 records in the ring"),
            "{e}"
        );
        plan.config.blocks = 4;
        assert!(plan.check(1 << 30).is_ok());
        // 1000 records at 1 per second, three passes: 3000 s.
        plan.pace = Some(1);
        let e = plan.check(4000).unwrap_err().to_string();
        assert!(
            e.starts_with("--pace 1 over up to 1000 records × 3 passes would take up to 3000 s"),
            "{e}"
        );
        plan.limit = Some(100);
        assert!(plan.check(4000).is_ok());
    }
}
