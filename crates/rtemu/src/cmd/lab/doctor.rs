//! `rtemu lab doctor`: a one-screen verdict on this machine's timing.

use std::path::PathBuf;

use rtemu_clock::time::format_duration_ns;
use rtemu_lab::doctor::{self, Facts};
use rtemu_lab::env::{Header, RtSetup};
use rtemu_report::lab::DoctorReport;
use rtemu_report::progress::Steps;

use super::duration_in;

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  rtemu lab doctor
  rtemu lab doctor --duration 2s --json
  rtemu lab doctor --csv doctor.csv
  sudo rtemu lab doctor --duration 10s")]
pub(super) struct DoctorArgs {
    /// Length of the sleep tests, idle then with every CPU busy, half each (50ms to 10m).
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = duration_in(doctor::DURATION_RANGE_NS))]
    duration: u64,
    /// Print the verdict as JSON (times in integer ns).
    #[arg(long)]
    json: bool,
    /// Write the facts and the sleep test's figures as one CSV row to this file.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
}

pub(super) fn run(args: &DoctorArgs) -> anyhow::Result<()> {
    let facts = Facts::probe();
    // Half the time idle, half with every CPU busy.
    let half = (args.duration / 2).max(*doctor::DURATION_RANGE_NS.start());
    let bar = Steps::spinner(format!(
        "sleep test, {} idle and {} with every CPU busy",
        format_duration_ns(half),
        format_duration_ns(half)
    ));
    let test = doctor::sleep_test(half, &facts, false)?;
    let loaded = doctor::sleep_test(half, &facts, true)?;
    bar.finish();
    let mut advice = doctor::advise(&facts);
    advice.extend(doctor::advise_under_load(&loaded));
    // The verdict is about the machine as it is: the header shows this process unchanged.
    let header = Header::probe(&RtSetup::default(), 0);
    let report = DoctorReport::new(header, facts, test, loaded, advice, half);
    rtemu_report::lab::emit(&report, args.json, args.csv.as_deref(), None)
}
