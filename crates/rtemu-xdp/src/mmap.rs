//! A memory mapping owned by one value and unmapped when it drops: the UMEM (anonymous) and
//! the four rings (the socket's, at the kernel's page offsets).
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;

/// A shared, read-write mapping of `len` bytes.
#[derive(Debug)]
pub struct Mmap {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is owned by this value alone and unmapped only in `Drop`; moving it to
// another thread moves every access with it.
unsafe impl Send for Mmap {}

impl Mmap {
    /// `len` bytes of zeroed anonymous memory, page-aligned and populated up front so no page
    /// fault lands on the packet path.
    pub fn anonymous(len: usize) -> io::Result<Mmap> {
        Mmap::map(
            len,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
            None,
            0,
        )
    }

    /// `len` bytes of the object behind `fd` at `offset` (a ring of an AF_XDP socket).
    pub fn shared(fd: BorrowedFd<'_>, len: usize, offset: u64) -> io::Result<Mmap> {
        Mmap::map(
            len,
            libc::MAP_SHARED | libc::MAP_POPULATE,
            Some(fd),
            offset as libc::off_t,
        )
    }

    fn map(
        len: usize,
        flags: libc::c_int,
        fd: Option<BorrowedFd<'_>>,
        offset: libc::off_t,
    ) -> io::Result<Mmap> {
        if len == 0 {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        }
        // SAFETY: a fresh mapping at an address the kernel picks, so no existing memory is
        // touched; the result is checked before use.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd.map_or(-1, |fd| fd.as_raw_fd()),
                offset,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(base.cast()).ok_or_else(io::Error::last_os_error)?;
        Ok(Mmap { base, len })
    }

    /// The mapping's first byte.
    pub fn ptr(&self) -> *mut u8 {
        self.base.as_ptr()
    }

    /// The mapping's length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are exactly the mapping made in `map`, unmapped only here; every
        // borrow of its memory borrows the owner of this value and so has ended.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}
