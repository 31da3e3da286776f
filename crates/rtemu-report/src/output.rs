//! Files the commands write: never one of the command's own inputs, and never left half
//! written.
//!
//! An [`Output`] is a temporary file beside its target, renamed over the target by
//! [`Output::commit`] once everything is written and synced; dropped without a commit (an
//! error, a panic, Ctrl-C before the end) it is removed, so a good file that stood at the
//! target stays whole. A target that exists and is not a regular file (`/dev/null`, a FIFO, a
//! terminal) is written in place: renaming over a device would replace it.
//!
//! Whether two paths are one file is decided by device and inode (symbolic and hard links
//! included), not by name.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// A file being written; see the module's documentation.
#[derive(Debug)]
pub struct Output {
    /// Where it goes.
    path: PathBuf,
    /// The temporary file, `None` when the target is written in place.
    tmp: Option<PathBuf>,
    file: File,
}

impl Output {
    /// Starts writing `path`, refusing when it is the same file as one of `inputs` (or as one
    /// of them would be, for a target that does not exist yet).
    pub fn create(path: &Path, inputs: &[&Path]) -> Result<Output> {
        refuse_inputs(path, inputs)?;
        match std::fs::metadata(path) {
            Ok(m) if !m.is_file() => {
                let file = OpenOptions::new()
                    .write(true)
                    .open(path)
                    .with_context(|| format!("opening {}", path.display()))?;
                return Ok(Output {
                    path: path.to_owned(),
                    tmp: None,
                    file,
                });
            }
            _ => {}
        }
        let name = path
            .file_name()
            .with_context(|| format!("{} names no file", path.display()))?;
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".rtemu-{}.tmp", std::process::id()));
        let tmp = dir.join(tmp_name);
        // A leftover of a killed run of this process id is this program's own temporary.
        let _ = std::fs::remove_file(&tmp);
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o666)
            .open(&tmp)
            .with_context(|| format!("creating a temporary file for {}", path.display()))?;
        // A file written over keeps its permissions.
        if let Ok(m) = std::fs::metadata(path) {
            let _ = file.set_permissions(std::fs::Permissions::from_mode(m.mode() & 0o7777));
        }
        Ok(Output {
            path: path.to_owned(),
            tmp: Some(tmp),
            file,
        })
    }

    /// Finishes the file: syncs it and puts it in place of the target.
    pub fn commit(mut self) -> Result<()> {
        let what = || format!("writing {}", self.path.display());
        self.file.flush().with_context(what)?;
        let Some(tmp) = self.tmp.take() else {
            return Ok(());
        };
        let placed = self
            .file
            .sync_all()
            .and_then(|()| std::fs::rename(&tmp, &self.path));
        if placed.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        placed.with_context(what)
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.file.write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        if let Some(tmp) = &self.tmp {
            let _ = std::fs::remove_file(tmp);
        }
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
    for input in inputs {
        if same_file(output, input) {
            bail!(
                "{} is also an input of this command ({}): write the output to another file",
                output.display(),
                input.display()
            );
        }
    }
    Ok(())
}

/// Whether `a` and `b` are one file: the same device and inode when both exist, else the same
/// name in the same directory (a file that does not exist yet is one file with another name
/// for it only once made).
pub fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => (x.dev(), x.ino()) == (y.dev(), y.ino()),
        (Err(_), Err(_)) => absolute(a).is_some_and(|x| Some(x) == absolute(b)),
        _ => false,
    }
}

/// `path` with its directory resolved (links included), for comparing names of files that do
/// not exist yet.
fn absolute(path: &Path) -> Option<PathBuf> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    Some(dir.canonicalize().ok()?.join(path.file_name()?))
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let (written, kept) = (std::fs::read(&target), std::fs::read(&input));
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(written.unwrap(), b"graph");
        assert!(refused.unwrap_err().to_string().contains("also an input"));
        assert_eq!(kept.unwrap(), b"x");
    }

    #[test]
    fn a_dropped_output_leaves_the_old_file_whole_and_no_temporary() {
        let dir = scratch("drop");
        let target = dir.join("out.txt");
        std::fs::write(&target, "good").unwrap();
        {
            let mut out = Output::create(&target, &[]).unwrap();
            out.write_all(b"half").unwrap();
        }
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "good");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        let mut out = Output::create(&target, &[]).unwrap();
        out.write_all(b"new").unwrap();
        out.commit().unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_input_is_refused_as_output_by_any_of_its_names() {
        let dir = scratch("same");
        let input = dir.join("in.pcap");
        std::fs::write(&input, "capture").unwrap();
        std::os::unix::fs::symlink(&input, dir.join("link.pcap")).unwrap();
        std::fs::hard_link(&input, dir.join("hard.pcap")).unwrap();
        let dotted = dir.join(".").join("in.pcap");
        for name in ["in.pcap", "link.pcap", "hard.pcap"] {
            let err = Output::create(&dir.join(name), &[&input]).unwrap_err();
            assert!(err.to_string().contains("also an input"), "{name}: {err}");
        }
        assert!(Output::create(&dotted, &[&input]).is_err());
        assert_eq!(std::fs::read_to_string(&input).unwrap(), "capture");
        assert!(Output::create(&dir.join("other.pcap"), &[&input]).is_ok());
        // Two outputs of one run that do not exist yet are one file by name.
        assert!(same_file(
            &dir.join("new.csv"),
            &dir.join(".").join("new.csv")
        ));
        assert!(!same_file(&dir.join("new.csv"), &dir.join("new2.csv")));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_device_is_written_in_place() {
        let mut out = Output::create(Path::new("/dev/null"), &[]).unwrap();
        out.write_all(b"gone").unwrap();
        out.commit().unwrap();
        assert!(!std::fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_file());
    }
}
