//! `rtemu-bench aqm`: bufferbloat and its cures, in virtual time: the scenario of
//! [`rtemu_sim::bufferbloat`] behind each queue rtemu models, one table row per queue.

use std::io::Write;

use rtemu_sim::bufferbloat;

use crate::BenchArgs;

/// Runs `rtemu-bench aqm`.
pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    let rows: Vec<bufferbloat::Summary> = bufferbloat::run_all(args.seed)?
        .iter()
        .map(bufferbloat::Run::summary)
        .collect();
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &rows)?;
        writeln!(out)?;
        return Ok(());
    }
    write!(out, "rtemu-bench aqm: ")?;
    rtemu_report::bufferbloat::write_table(&mut out, args.seed, &rows)?;
    Ok(())
}
