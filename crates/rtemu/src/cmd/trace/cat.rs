//! `rtemu trace cat`: a trace in the text form.

use std::io::Write;
use std::path::PathBuf;

use rtemu_trace::{Format, RecordReader};

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  rtemu trace cat fgn.rpl | head
  rtemu trace cat trace.dat --format raw > trace.txt")]
pub(super) struct CatArgs {
    /// The trace.
    file: PathBuf,
    /// Its form, if detection would guess wrong.
    #[arg(long)]
    format: Option<Format>,
}

/// The text form on `out`.
pub(super) fn run(a: &CatArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let mut r = RecordReader::open(&a.file, a.format)?;
    rtemu_trace::text::write_trace(out, &mut r)
}
