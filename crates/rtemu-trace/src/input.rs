//! Opening a trace or capture a user names, when rtemu may run as root.
//!
//! The file is opened non-blocking, so a FIFO no one writes to does not hold the open forever
//! (it then reads as empty); what was opened is checked on the descriptor. A regular file or a
//! pipe is read; a device, directory or socket is refused (`/dev/zero` would be read forever,
//! `/dev/vda` is no trace).

use std::fs::File;
use std::io::{Error, ErrorKind};
use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
use std::path::Path;

use rustix::fs::OFlags;

/// Opens `path` for reading: a regular file, or a pipe (read blocking once it is open).
pub fn open(path: &Path) -> std::io::Result<File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(OFlags::NONBLOCK.bits() as i32)
        .open(path)?;
    let kind = file.metadata()?.file_type();
    if !(kind.is_file() || kind.is_fifo()) {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            "not a regular file or pipe (a directory, socket or device); give a file",
        ));
    }
    // A pipe's writer may be slow: wait for its data rather than fail with EAGAIN.
    rustix::fs::fcntl_setfl(&file, OFlags::empty())?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_and_directories_are_refused_files_and_idle_fifos_open_at_once() {
        for refused in ["/dev/zero", "/dev/null", "/"] {
            let e = open(Path::new(refused)).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidInput, "{refused}: {e}");
        }
        let dir = std::env::temp_dir().join(format!("rtemu-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("f");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        let file = dir.join("t");
        std::fs::write(&file, "x").unwrap();
        // No writer: the open returns, and the pipe reads as empty.
        let read = open(&fifo).map(|f| std::io::Read::bytes(f).count());
        let regular = open(&file).map(|f| std::io::Read::bytes(f).count());
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(made.success());
        assert_eq!(read.unwrap(), 0);
        assert_eq!(regular.unwrap(), 1);
    }
}
