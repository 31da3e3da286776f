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

/// The text form on `out`. A framed header's flow, provenance and unit come first as `#`
/// comments, so the output is still a text trace.
pub(super) fn run(a: &CatArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let mut r = RecordReader::open(&a.file, a.format)?;
    if let Some(h) = r.header() {
        rtemu_trace::text::write_header_comments(&mut *out, h)?;
    }
    r.for_each_record(|x| {
        rtemu_trace::text::write_action(&mut *out, x).map_err(anyhow::Error::from)
    })?;
    out.flush()?;
    Ok(())
}
