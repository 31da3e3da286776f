//! rtemu's reports: what its commands write for people and for other programs.
//!
//! * [`bufferbloat`]: the bufferbloat scenario's table and its figure of delay over time;
//! * [`output`]: files written whole or not at all, never over one of the command's inputs;
//! * [`plot`]: figures (charts and heat maps) as SVG or PNG;
//! * [`progress`]: progress bars on standard error while a command measures or runs;
//! * [`text`]: the pieces every report shares: times in µs, JSON on stdout, CSV files;
//! * [`lab`]: the timing lab's reports (tables, JSON, CSV and figures of `rtemu-lab`'s
//!   results);
//! * [`trace`]: a trace's statistics as text and as a variance-time plot; traces written
//!   whole, generated and converted, with their summaries.
//!
//! The measurements are the other crates'; this one only presents them. Errors are
//! `anyhow`'s: a report's failures are a file that could not be written or a figure with
//! nothing to draw, each said once with its path, for the command line to print.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod bufferbloat;
pub mod burst;
pub mod capacity;
pub mod lab;
pub mod output;
pub mod plot;
pub mod progress;
pub mod text;
pub mod trace;

/// Checks a report's output against its golden file in `tests/golden` (`RTEMU_BLESS=1`
/// rewrites it; review the diff).
#[cfg(test)]
fn assert_golden(name: &str, out: &[u8]) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("RTEMU_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, out).unwrap();
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (RTEMU_BLESS=1 writes it)", path.display()));
    assert_eq!(String::from_utf8_lossy(out), want);
}
