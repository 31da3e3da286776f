//! Page-cache control for cold-cache benchmarks.

use std::io;
use std::path::Path;

/// Asks the kernel to drop `path`'s pages from the page cache, so that the next read comes
/// from the disk: `fsync` (only clean pages can be dropped), then `posix_fadvise(DONTNEED)`
/// over the whole file. Advice, not a guarantee: pages mapped or locked by another process
/// stay. Needs no privileges, unlike writing to `/proc/sys/vm/drop_caches`.
pub fn evict(path: &Path) -> io::Result<()> {
    let file = rtemu_sys::input::open(path)?;
    file.sync_all()?;
    rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed)?;
    Ok(())
}
