//! Page-cache control for cold-cache benchmarks.

use std::io;
use std::os::fd::AsRawFd as _;
use std::path::Path;

/// Asks the kernel to drop `path`'s pages from the page cache, so that the next read comes
/// from the disk: `fsync` (only clean pages can be dropped), then `posix_fadvise(DONTNEED)`
/// over the whole file. Advice, not a guarantee: pages mapped or locked by another process
/// stay. Needs no privileges, unlike writing to `/proc/sys/vm/drop_caches`.
pub fn evict(path: &Path) -> io::Result<()> {
    let file = rtemu_sys::input::open(path)?;
    file.sync_all()?;
    // Length 0: to the end of the file, however long.
    nix::fcntl::posix_fadvise(
        file.as_raw_fd(),
        0,
        0,
        nix::fcntl::PosixFadviseAdvice::POSIX_FADV_DONTNEED,
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_advised_and_a_device_refused() {
        let path = std::env::temp_dir().join(format!("rtemu-evict-{}", std::process::id()));
        std::fs::write(&path, vec![7u8; 1 << 16]).unwrap();
        let evicted = evict(&path);
        let kept = std::fs::read(&path);
        std::fs::remove_file(&path).unwrap();
        evicted.unwrap();
        assert_eq!(
            kept.unwrap(),
            vec![7u8; 1 << 16],
            "advice never changes the content"
        );
        let e = evict(Path::new("/dev/zero")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
    }
}
