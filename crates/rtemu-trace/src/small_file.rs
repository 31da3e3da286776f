//! Reading a small file a user names (a distribution table, a model file, a topology), when
//! rtemu may run as root.
//!
//! Only a regular file of at most the caller's bound is read. The file is opened
//! non-blocking, so a FIFO (whose open would wait for a writer) or a device is refused at once
//! rather than read; the errors say what the file is, never what it holds.

use std::io::{Error, ErrorKind, Read as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

/// Reads the text of `path`, a regular file of at most `max_bytes`.
pub fn read_small_file(path: &Path, max_bytes: u64) -> std::io::Result<String> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            "not a regular file (a directory, FIFO, socket or device); give a file",
        ));
    }
    if meta.len() > max_bytes {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            format!(
                "{} bytes, more than the {max_bytes} bytes allowed",
                meta.len()
            ),
        ));
    }
    let mut text = String::new();
    // Bounded again in case the file grows while it is read.
    file.take(max_bytes).read_to_string(&mut text)?;
    Ok(text)
}
