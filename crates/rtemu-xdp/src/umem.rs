//! The UMEM: one page-aligned area of equal frames (chunks) shared with the kernel, which
//! copies received frames into chunks from the fill ring and sends frames from chunks on the
//! transmit ring.
//!
//! A chunk belongs to user space or to the kernel, never both. User space holds a [`Chunk`]
//! token for each chunk it owns: tokens are made once by [`Umem::new`], not `Clone`, and pass
//! to the kernel by value (into the fill or transmit ring) and back (from the receive or
//! completion ring). Reading or writing a chunk takes its token, so the bytes of a chunk the
//! kernel owns are never borrowed. A token used with a UMEM other than its own reaches only
//! that UMEM's memory (every access is bounds-checked), but may see bytes the kernel is
//! writing.
#![allow(unsafe_code)]

use crate::error::{Step, XdpError};
use crate::mmap::Mmap;

/// Ownership of one UMEM chunk, by its offset in the UMEM.
#[derive(Debug, PartialEq, Eq)]
pub struct Chunk(u64);

impl Chunk {
    /// The chunk's offset in the UMEM (what the rings carry).
    pub fn addr(&self) -> u64 {
        self.0
    }
}

/// The shape of a UMEM: `frames` chunks of `frame_size` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// Bytes per chunk: 2048 or 4096 (aligned mode needs a power of two from 2048 to the page
    /// size).
    pub frame_size: u32,
    /// Chunks in the UMEM.
    pub frames: u32,
}

impl Geometry {
    /// Checks the sizes before any system call.
    pub fn check(self) -> Result<Geometry, XdpError> {
        if !matches!(self.frame_size, 2048 | 4096) {
            return Err(XdpError::Config(format!(
                "UMEM frame size {} is invalid: give 2048 or 4096",
                self.frame_size
            )));
        }
        if self.frames == 0 || self.frames > 1 << 20 {
            return Err(XdpError::Config(format!(
                "UMEM of {} frames is invalid: give 1 to {}",
                self.frames,
                1 << 20
            )));
        }
        Ok(self)
    }

    /// The UMEM's length in bytes.
    pub fn bytes(self) -> usize {
        self.frame_size as usize * self.frames as usize
    }

    /// The chunk holding UMEM offset `addr` and the offset within it, if `addr` is inside.
    pub fn split(self, addr: u64) -> Option<(u64, usize)> {
        let start = addr & !(self.frame_size as u64 - 1);
        (start < self.bytes() as u64).then_some((start, (addr - start) as usize))
    }
}

/// The UMEM.
#[derive(Debug)]
pub struct Umem {
    map: Mmap,
    geometry: Geometry,
}

impl Umem {
    /// Maps a UMEM of `geometry` and returns it with a token for each of its chunks.
    pub fn new(geometry: Geometry) -> Result<(Umem, Vec<Chunk>), XdpError> {
        let geometry = geometry.check()?;
        let map = Mmap::anonymous(geometry.bytes()).map_err(XdpError::at(Step::AllocUmem))?;
        let chunks = (0..geometry.frames as u64)
            .map(|i| Chunk(i * geometry.frame_size as u64))
            .collect();
        Ok((Umem { map, geometry }, chunks))
    }

    /// Its shape.
    pub fn geometry(&self) -> Geometry {
        self.geometry
    }

    /// What `XDP_UMEM_REG` takes: the whole area, aligned chunks, no headroom.
    pub(crate) fn registration(&self) -> libc::xdp_umem_reg {
        libc::xdp_umem_reg {
            addr: self.map.ptr() as u64,
            len: self.map.len() as u64,
            chunk_size: self.geometry.frame_size,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        }
    }

    /// Turns a UMEM offset the kernel handed back into the token of its chunk and the offset
    /// within it; `None` if it lies outside.
    pub(crate) fn claim(geometry: Geometry, addr: u64) -> Option<(Chunk, usize)> {
        geometry
            .split(addr)
            .map(|(start, offset)| (Chunk(start), offset))
    }

    /// The `len` bytes at `offset` in `chunk`, cut to the chunk's end.
    pub fn bytes(&self, chunk: &Chunk, offset: usize, len: usize) -> &[u8] {
        let (start, end) = self.range(chunk, offset, len);
        // SAFETY: `start..end` lies inside the mapping (`range` clamps it); the token says user
        // space owns the chunk, so the kernel does not write it while this borrow of `self`
        // lasts, and no `&mut` to it exists (that takes `&mut self`).
        unsafe { std::slice::from_raw_parts(self.map.ptr().add(start), end - start) }
    }

    /// The whole of `chunk`, to write a frame into.
    pub fn bytes_mut(&mut self, chunk: &Chunk) -> &mut [u8] {
        let (start, end) = self.range(chunk, 0, self.geometry.frame_size as usize);
        // SAFETY: as in `bytes`; `&mut self` makes this the only borrow of UMEM memory.
        unsafe { std::slice::from_raw_parts_mut(self.map.ptr().add(start), end - start) }
    }

    /// `chunk`'s `offset..offset + len`, clamped to the chunk and the mapping.
    fn range(&self, chunk: &Chunk, offset: usize, len: usize) -> (usize, usize) {
        let size = self.geometry.frame_size as usize;
        let base = (chunk.0 as usize).min(self.map.len());
        let chunk_end = (base + size).min(self.map.len());
        let start = (base + offset).min(chunk_end);
        (start, (start + len).min(chunk_end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_checked_before_any_system_call() {
        let ok = Geometry {
            frame_size: 2048,
            frames: 8,
        };
        assert!(ok.check().is_ok());
        for bad in [
            Geometry {
                frame_size: 3000,
                ..ok
            },
            Geometry { frames: 0, ..ok },
        ] {
            assert!(matches!(bad.check(), Err(XdpError::Config(_))));
        }
    }

    #[test]
    fn kernel_offsets_map_to_their_chunk() {
        let g = Geometry {
            frame_size: 2048,
            frames: 4,
        };
        // Received frames start after the kernel's headroom inside the chunk.
        assert_eq!(g.split(2048 + 256), Some((2048, 256)));
        assert_eq!(g.split(3 * 2048 + 2047), Some((3 * 2048, 2047)));
        assert_eq!(g.split(4 * 2048), None, "past the last chunk");
    }

    #[test]
    fn chunk_bytes_never_leave_the_chunk() {
        let (mut umem, chunks) = Umem::new(Geometry {
            frame_size: 2048,
            frames: 2,
        })
        .unwrap();
        assert_eq!(chunks.len(), 2);
        umem.bytes_mut(&chunks[1])[..3].copy_from_slice(&[1, 2, 3]);
        assert_eq!(umem.bytes(&chunks[1], 1, 2), &[2, 3]);
        assert_eq!(
            umem.bytes(&chunks[0], 2000, 100).len(),
            48,
            "cut at the chunk's end"
        );
        assert_eq!(umem.bytes(&chunks[1], 4000, 10).len(), 0);
    }
}
