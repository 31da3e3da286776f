//! `rtemu-bench aqm`: bufferbloat and its cures, in virtual time: the scenarios of
//! [`rtemu_sim::bufferbloat`], [`rtemu_sim::burst`] (burst absorption) and
//! [`rtemu_sim::capacity`] (varying capacity) behind each queue rtemu models, one table per
//! scenario, one row per queue.

use std::io::Write;

use rtemu_sim::{bufferbloat, burst, capacity};
use serde::Serialize;

use crate::BenchArgs;

/// Runs `rtemu-bench aqm`.
pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    let rows: Vec<bufferbloat::Summary> = bufferbloat::run_all(args.seed)?
        .iter()
        .map(bufferbloat::Run::summary)
        .collect();
    let bursts = burst::run_all(args.seed)?;
    let capacity = capacity::run_all(args.seed)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        /// Every scenario's rows.
        #[derive(Serialize)]
        struct All<'a> {
            bufferbloat: &'a [bufferbloat::Summary],
            burst: &'a [burst::Summary],
            capacity: &'a [capacity::Summary],
        }
        let both = All {
            bufferbloat: &rows,
            burst: &bursts,
            capacity: &capacity,
        };
        serde_json::to_writer_pretty(&mut out, &both)?;
        writeln!(out)?;
        return Ok(());
    }
    write!(out, "rtemu-bench aqm: ")?;
    rtemu_report::bufferbloat::write_table(&mut out, args.seed, &rows)?;
    writeln!(out)?;
    rtemu_report::burst::write_table(&mut out, args.seed, &bursts)?;
    writeln!(out)?;
    rtemu_report::capacity::write_table(&mut out, args.seed, &capacity)?;
    Ok(())
}
