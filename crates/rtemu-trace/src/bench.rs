//! How fast a trace streams through the [`Prefetcher`] (`rtemu trace bench`): one pass over
//! a file, as fast as possible or at a link's pace.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::TraceError;
use crate::prefetch::{PrefetchConfig, Prefetcher};

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
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
