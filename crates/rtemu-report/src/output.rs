//! Files the commands write: never one of the command's own inputs, never two outputs of one
//! command in one file, never left half written, and never somewhere a link or a device aims
//! them.
//!
//! An [`Output`] is [`rtemu_sys::output::Output`] (see there how a path is opened so that it
//! cannot be aimed elsewhere) with errors that name the file: a temporary file beside its
//! target, renamed over the target by [`Output::commit`] once everything is written and synced;
//! dropped without a commit (an error, a panic, Ctrl-C before the end) it is removed, so a good
//! file that stood at the target stays whole. Pipes, terminals and `/dev/null` are written in
//! place.
//!
//! Whether two paths are one file is decided by device and inode (symbolic and hard links
//! included), not by name.

use std::io::{self, BufWriter, Write};
use std::path::Path;

use anyhow::{bail, Context, Result};
use rtemu_sys::output::Identity;

/// A file being written; see the module's documentation.
#[derive(Debug)]
pub struct Output(rtemu_sys::output::Output);

impl Output {
    /// Starts writing `path`, refusing when it is the same file as one of `inputs`, when a
    /// link another user made aims it elsewhere, or when it is a device.
    pub fn create(path: &Path, inputs: &[&Path]) -> Result<Output> {
        rtemu_sys::output::Output::create(path, inputs)
            .map(Output)
            .map_err(|e| {
                // rtemu-sys's own refusals name the path and say why; a system call's error
                // is given its path here.
                if e.raw_os_error().is_none() {
                    anyhow::Error::msg(e.to_string())
                } else {
                    anyhow::Error::new(e).context(format!("opening {}", path.display()))
                }
            })
    }

    /// Finishes the file: syncs it and puts it in place of the target.
    pub fn commit(self) -> Result<()> {
        let path = self.0.path().to_owned();
        self.0
            .commit()
            .with_context(|| format!("writing {}", path.display()))
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.0.write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// Writes `bytes` to `path` whole (through an [`Output`]), refusing when it is one of `inputs`.
pub fn write(path: &Path, inputs: &[&Path], bytes: &[u8]) -> Result<()> {
    let mut out = Output::create(path, inputs)?;
    out.write_all(bytes)
        .with_context(|| format!("writing {}", path.display()))?;
    out.commit()
}

/// Writes `path` whole (through a buffered [`Output`]) with what `body` writes to it: a CSV
/// file, a histogram.
pub fn write_with(
    path: &Path,
    body: impl FnOnce(&mut BufWriter<Output>) -> io::Result<()>,
) -> Result<()> {
    let mut out = BufWriter::new(Output::create(path, &[])?);
    body(&mut out)
        .and_then(|()| out.flush())
        .with_context(|| format!("writing {}", path.display()))?;
    out.into_inner().map_err(|e| e.into_error())?.commit()
}

/// Writes `bytes` to `path` whole (see [`write`]), or to standard output without one;
/// `what` names them in an error on standard output.
pub fn write_or_print(
    path: Option<&Path>,
    inputs: &[&Path],
    bytes: &[u8],
    what: &str,
) -> Result<()> {
    if let Some(path) = path {
        return write(path, inputs, bytes);
    }
    let mut out = io::stdout().lock();
    out.write_all(bytes)
        .and_then(|()| out.flush())
        .with_context(|| format!("writing {what}"))
}

/// Fails when `output` is the same file as one of `inputs`.
pub fn refuse_inputs(output: &Path, inputs: &[&Path]) -> Result<()> {
    let Ok(out) = Identity::of_output(output) else {
        // Refused with its reason when it is opened.
        return Ok(());
    };
    for input in inputs {
        if Identity::of_input(input).is_ok_and(|i| i == out) {
            bail!(
                "{} is also an input of this command ({}): write the output to another file",
                output.display(),
                input.display()
            );
        }
    }
    Ok(())
}

/// Fails when two of a command's `outputs` (each with the flag that names it) are one file,
/// so that one would overwrite the other: `--csv X --histogram X`.
pub fn refuse_same_outputs(outputs: &[(&str, Option<&Path>)]) -> Result<()> {
    let named: Vec<(&str, &Path, Option<Identity>)> = outputs
        .iter()
        .filter_map(|(flag, path)| path.map(|p| (*flag, p, Identity::of_output(p).ok())))
        .collect();
    for (i, (flag, path, id)) in named.iter().enumerate() {
        for (other, _, other_id) in &named[i + 1..] {
            if id.is_some() && id == other_id {
                bail!(
                    "{flag} and {other} name one file ({}): give each its own",
                    path.display()
                );
            }
        }
    }
    Ok(())
}

/// Whether `a` and `b`, as outputs, are one file (see [`Identity::of_output`]).
pub fn same_file(a: &Path, b: &Path) -> bool {
    match (Identity::of_output(a), Identity::of_output(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn scratch(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("rtemu-output-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_named_output_is_written_whole_and_never_over_an_input() {
        let dir = scratch("print");
        let (input, target) = (dir.join("in.toml"), dir.join("g.dot"));
        std::fs::write(&input, "x").unwrap();
        write_or_print(Some(&target), &[&input], b"graph", "the graph").unwrap();
        let refused = write_or_print(Some(&input), &[&input], b"graph", "the graph");
        let early = refuse_inputs(&input, &[&input]);
        let (written, kept) = (std::fs::read(&target), std::fs::read(&input));
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(written.unwrap(), b"graph");
        assert!(refused.unwrap_err().to_string().contains("also an input"));
        assert!(early.unwrap_err().to_string().contains("also an input"));
        assert_eq!(kept.unwrap(), b"x");
    }

    #[test]
    fn two_outputs_of_one_command_are_never_one_file() {
        let dir = scratch("two");
        let (a, b) = (dir.join("x.csv"), dir.join("y.csv"));
        let dotted = dir.join(".").join("x.csv");
        let one = refuse_same_outputs(&[
            ("--csv", Some(&a)),
            ("--plot", None),
            ("--histogram", Some(&dotted)),
        ]);
        let apart = refuse_same_outputs(&[("--csv", Some(&a)), ("--histogram", Some(&b))]);
        let same = (same_file(&a, &dotted), same_file(&a, &b));
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(same, (true, false));
        let e = one.unwrap_err().to_string();
        assert!(e.starts_with("--csv and --histogram name one file"), "{e}");
        assert!(apart.is_ok());
    }

    #[test]
    fn a_refusal_says_why_and_a_failed_open_names_the_file() {
        let e = Output::create(Path::new("/dev/zero"), &[]).unwrap_err();
        assert!(
            e.to_string().starts_with("/dev/zero is a character device"),
            "{e}"
        );
        let e = Output::create(Path::new("/nonexistent-dir/x"), &[]).unwrap_err();
        assert!(
            format!("{e:#}").starts_with("opening /nonexistent-dir/x: "),
            "{e:#}"
        );
    }
}
