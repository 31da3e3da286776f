//! Opening an input a user names (a trace, a capture, a topology), when rtemu may run as root.
//!
//! The file is opened non-blocking, so a FIFO no one writes to does not hold the open forever;
//! what was opened is checked on the descriptor, and the errors say what the file is, never
//! what it holds. [`open`] reads a regular file or a pipe; a device, directory or socket is
//! refused (`/dev/zero` would be read forever, `/dev/vda` is no trace). [`read_small_file`]
//! reads a regular file of bounded size only.

#![allow(unsafe_code)]

use std::fs::File;
use std::io::{Error, ErrorKind, Read as _};
use std::os::fd::AsRawFd as _;
use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
use std::path::Path;

use crate::errno::cvt;

/// Opens `path` for reading without waiting for a FIFO's writer.
fn open_nonblocking(path: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
}

/// Opens `path` for reading: a regular file, or a pipe (read blocking once it is open).
pub fn open(path: &Path) -> std::io::Result<File> {
    let file = open_nonblocking(path)?;
    let kind = file.metadata()?.file_type();
    if !(kind.is_file() || kind.is_fifo()) {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            "not a regular file or pipe (a directory, socket or device); give a file",
        ));
    }
    // A pipe's writer may be slow: wait for its data rather than fail with EAGAIN. Clearing
    // every status flag leaves only O_RDONLY, which F_SETFL does not change anyway.
    // SAFETY: F_SETFL takes an int and touches only the status flags of a descriptor `file`
    // owns for the whole call.
    cvt(unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETFL, 0) })?;
    Ok(file)
}

/// Reads the text of `path`, a regular file of at most `max_bytes`.
pub fn read_small_file(path: &Path, max_bytes: u64) -> std::io::Result<String> {
    let file = open_nonblocking(path)?;
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
        let small = read_small_file(&file, 1);
        let too_big = read_small_file(&file, 0);
        let fifo_small = read_small_file(&fifo, 1);
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(made.success());
        assert_eq!(read.unwrap(), 0);
        assert_eq!(regular.unwrap(), 1);
        assert_eq!(small.unwrap(), "x");
        assert!(too_big
            .unwrap_err()
            .to_string()
            .contains("more than the 0 bytes"));
        assert_eq!(fifo_small.unwrap_err().kind(), ErrorKind::InvalidInput);
    }

    #[test]
    fn an_opened_pipe_reads_blocking() {
        let mut fds = [0; 2];
        // SAFETY: pipe writes two descriptors into the array it is given.
        cvt(unsafe { libc::pipe(fds.as_mut_ptr()) }).unwrap();
        // SAFETY: both descriptors were just made and are owned by nothing else.
        let (r, w) = unsafe {
            use std::os::fd::{FromRawFd as _, OwnedFd};
            (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]))
        };
        let path = format!("/proc/self/fd/{}", r.as_raw_fd());
        let file = open(Path::new(&path)).unwrap();
        drop((r, w));
        // SAFETY: F_GETFL reads the status flags of a descriptor `file` owns.
        let flags = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETFL) };
        assert!(flags >= 0);
        assert_eq!(flags & libc::O_NONBLOCK, 0, "O_NONBLOCK was left set");
    }
}
