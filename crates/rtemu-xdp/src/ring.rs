//! The four single-producer single-consumer rings an AF_XDP socket shares with the kernel:
//! fill and transmit (user space produces), receive and completion (the kernel produces).
//!
//! Each ring is a power-of-two array of entries and two free-running `u32` indexes, the
//! producer's and the consumer's, in the same mapping. The side that writes an index keeps a
//! cached copy of the other's and re-reads it only when the cache says the ring is full (or
//! empty), as libxdp's `xsk.h` does (`xsk_prod_nb_free`, `xsk_cons_nb_avail`). The orderings are
//! libxdp's too: the other side's index is read with *acquire* (entries it wrote, or slots it
//! freed, are visible after it), and this side publishes its index with a *release* store
//! (entries written before it are visible to the kernel). Indexes wrap at 2³², so every
//! difference is a wrapping subtraction.
#![allow(unsafe_code)]

use std::marker::PhantomData;
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::error::{Step, XdpError};
use crate::mmap::Mmap;
use crate::umem::{Chunk, Geometry, Umem};

/// The cached indexes of one ring, seen from user space: pure arithmetic, no shared memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    size: u32,
    cached_prod: u32,
    cached_cons: u32,
}

impl Cursor {
    /// A ring of `size` entries (a power of two) that user space produces into, with the
    /// kernel's indexes as read at set-up. The cached consumer index is kept `size` ahead, so
    /// that `cached_cons - cached_prod` is the number of free slots.
    pub fn producer(size: u32, prod: u32, cons: u32) -> Cursor {
        Cursor {
            size,
            cached_prod: prod,
            cached_cons: cons.wrapping_add(size),
        }
    }

    /// A ring of `size` entries that user space consumes from.
    pub fn consumer(size: u32, prod: u32, cons: u32) -> Cursor {
        Cursor {
            size,
            cached_prod: prod,
            cached_cons: cons,
        }
    }

    /// Producer side: free slots, re-reading the consumer index (`load_cons`) only when the
    /// cache shows fewer than `want`.
    pub fn free(&mut self, want: u32, load_cons: impl FnOnce() -> u32) -> u32 {
        let free = self.cached_cons.wrapping_sub(self.cached_prod);
        if free >= want {
            return free;
        }
        self.cached_cons = load_cons().wrapping_add(self.size);
        self.cached_cons.wrapping_sub(self.cached_prod)
    }

    /// Consumer side: entries ready, re-reading the producer index (`load_prod`) only when
    /// the cache shows none.
    pub fn available(&mut self, load_prod: impl FnOnce() -> u32) -> u32 {
        let ready = self.cached_prod.wrapping_sub(self.cached_cons);
        if ready > 0 {
            return ready;
        }
        self.cached_prod = load_prod();
        self.cached_prod.wrapping_sub(self.cached_cons)
    }

    /// The slot of the next entry to produce, and advances past it.
    pub fn produce(&mut self) -> usize {
        let slot = self.cached_prod & (self.size - 1);
        self.cached_prod = self.cached_prod.wrapping_add(1);
        slot as usize
    }

    /// The slot of the next entry to consume, and advances past it.
    pub fn consume(&mut self) -> usize {
        let slot = self.cached_cons & (self.size - 1);
        self.cached_cons = self.cached_cons.wrapping_add(1);
        slot as usize
    }

    /// The producer index to publish.
    pub fn prod(&self) -> u32 {
        self.cached_prod
    }

    /// The consumer index to publish.
    pub fn cons(&self) -> u32 {
        self.cached_cons
    }
}

/// One mapped ring of entries `T` (`u64` UMEM offsets or `xdp_desc`).
#[derive(Debug)]
struct Shared<T> {
    /// Kept for its lifetime: the pointers below point into it.
    _map: Mmap,
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    desc: *mut T,
    cursor: Cursor,
    _entry: PhantomData<T>,
}

// SAFETY: the ring's memory is owned by its mapping, which moves with this value; the kernel's
// side is synchronised through the atomic indexes, not through thread identity.
unsafe impl<T: Send> Send for Shared<T> {}

impl<T: Copy> Shared<T> {
    /// Maps the ring of `size` entries at page offset `pgoff` of socket `fd`, with the field
    /// offsets the kernel gave (`XDP_MMAP_OFFSETS`).
    fn map(
        fd: BorrowedFd<'_>,
        name: &'static str,
        off: &libc::xdp_ring_offset,
        size: u32,
        pgoff: u64,
        produce: bool,
    ) -> Result<Shared<T>, XdpError> {
        let len = off.desc as usize + size as usize * std::mem::size_of::<T>();
        let map = Mmap::shared(fd, len, pgoff).map_err(XdpError::at(Step::MapRing(name)))?;
        let field = |offset: u64| {
            // SAFETY: the kernel's offsets lie inside the mapping it sized from them (`len`
            // covers `desc` and the entries; the indexes and flags come before `desc`).
            unsafe { map.ptr().add(offset as usize) }
        };
        let producer = field(off.producer) as *const AtomicU32;
        let consumer = field(off.consumer) as *const AtomicU32;
        let flags = field(off.flags) as *const AtomicU32;
        let desc = field(off.desc).cast::<T>();
        // SAFETY: the indexes are 4-byte-aligned `u32`s in the live mapping, shared with the
        // kernel, which accesses them atomically (`smp_load_acquire`/`smp_store_release`).
        let (prod, cons) = unsafe {
            (
                (*producer).load(Ordering::Acquire),
                (*consumer).load(Ordering::Acquire),
            )
        };
        let cursor = if produce {
            Cursor::producer(size, prod, cons)
        } else {
            Cursor::consumer(size, prod, cons)
        };
        Ok(Shared {
            _map: map,
            producer,
            consumer,
            flags,
            desc,
            cursor,
            _entry: PhantomData,
        })
    }

    fn index(&self, p: *const AtomicU32) -> &AtomicU32 {
        // SAFETY: `p` is one of this ring's index or flag words: aligned, inside the mapping
        // that `self` owns, and only accessed atomically; the borrow lives no longer than
        // `self`.
        unsafe { &*p }
    }

    /// Whether the kernel asks to be woken (`XDP_RING_NEED_WAKEUP`) to process this ring.
    fn needs_wakeup(&self) -> bool {
        self.index(self.flags).load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }

    /// Producer side: writes `entry` into the next slot if one is free (not yet visible to the
    /// kernel: see [`Shared::publish_prod`]).
    fn push(&mut self, entry: T) -> bool {
        let consumer = self.consumer;
        // SAFETY: as in `index`.
        let load = || unsafe { (*consumer).load(Ordering::Acquire) };
        if self.cursor.free(1, load) == 0 {
            return false;
        }
        let slot = self.cursor.produce();
        // SAFETY: `slot < size` (masked), so the write stays inside the entry array; the slot is
        // free (the kernel consumed it, as the acquire load of its index showed), so the kernel
        // does not read it until the producer index passes it.
        unsafe { self.desc.add(slot).write(entry) };
        true
    }

    /// Makes every pushed entry visible to the kernel.
    fn publish_prod(&self) {
        self.index(self.producer)
            .store(self.cursor.prod(), Ordering::Release);
    }

    /// Consumer side: the next entry the kernel produced, if any (its slot stays the caller's
    /// until [`Shared::publish_cons`]).
    fn pop(&mut self) -> Option<T> {
        let producer = self.producer;
        // SAFETY: as in `index`.
        let load = || unsafe { (*producer).load(Ordering::Acquire) };
        if self.cursor.available(load) == 0 {
            return None;
        }
        let slot = self.cursor.consume();
        // SAFETY: `slot < size`; the kernel wrote the entry before its release store of the
        // producer index, which the acquire load above saw; it does not rewrite the slot until
        // the consumer index passes it.
        Some(unsafe { self.desc.add(slot).read() })
    }

    /// Hands every popped slot back to the kernel.
    fn publish_cons(&self) {
        self.index(self.consumer)
            .store(self.cursor.cons(), Ordering::Release);
    }

    /// Entries produced and not yet consumed by the other side, as last seen (producer side).
    fn outstanding(&self) -> u32 {
        let cons = self.index(self.consumer).load(Ordering::Acquire);
        self.cursor.prod().wrapping_sub(cons)
    }
}

/// Where the kernel's ring offsets and page offsets say each ring is.
pub(crate) struct RingSpec<'a> {
    pub fd: BorrowedFd<'a>,
    pub offsets: &'a libc::xdp_mmap_offsets,
    pub geometry: Geometry,
}

/// The fill ring: chunks user space gives the kernel to receive into.
#[derive(Debug)]
pub struct FillRing(Shared<u64>);

impl FillRing {
    pub(crate) fn map(spec: &RingSpec<'_>, size: u32) -> Result<FillRing, XdpError> {
        let pgoff = libc::XDP_UMEM_PGOFF_FILL_RING;
        Shared::map(spec.fd, "fill", &spec.offsets.fr, size, pgoff, true).map(FillRing)
    }

    /// Gives `chunk` to the kernel to receive into (at the next [`FillRing::submit`]); hands it
    /// back when the ring is full.
    pub fn push(&mut self, chunk: Chunk) -> Result<(), Chunk> {
        if self.0.push(chunk.addr()) {
            Ok(())
        } else {
            Err(chunk)
        }
    }

    /// Publishes the pushed chunks.
    pub fn submit(&self) {
        self.0.publish_prod();
    }

    /// Whether the kernel must be woken (a `recvfrom` or `poll`) to take the chunks.
    pub fn needs_wakeup(&self) -> bool {
        self.0.needs_wakeup()
    }
}

/// The completion ring: chunks the kernel has sent, returned to user space.
#[derive(Debug)]
pub struct CompletionRing {
    ring: Shared<u64>,
    geometry: Geometry,
}

impl CompletionRing {
    pub(crate) fn map(spec: &RingSpec<'_>, size: u32) -> Result<CompletionRing, XdpError> {
        let pgoff = libc::XDP_UMEM_PGOFF_COMPLETION_RING;
        Ok(CompletionRing {
            ring: Shared::map(spec.fd, "completion", &spec.offsets.cr, size, pgoff, false)?,
            geometry: spec.geometry,
        })
    }

    /// The next chunk the kernel finished sending, if any (an offset outside the UMEM, which
    /// the kernel never returns, is skipped).
    pub fn pop(&mut self) -> Option<Chunk> {
        loop {
            let addr = self.ring.pop()?;
            if let Some((chunk, _)) = Umem::claim(self.geometry, addr) {
                return Some(chunk);
            }
        }
    }

    /// Frees the popped slots for the kernel.
    pub fn release(&self) {
        self.ring.publish_cons();
    }
}

/// A received frame: its chunk, and where in it the frame lies.
#[derive(Debug)]
pub struct RxFrame {
    /// The chunk, the caller's until it goes back to the fill ring.
    pub chunk: Chunk,
    /// Where the frame starts in the chunk (after the kernel's headroom).
    pub offset: usize,
    /// The frame's length.
    pub len: usize,
}

/// The receive ring: frames the kernel copied into chunks from the fill ring.
#[derive(Debug)]
pub struct RxRing {
    ring: Shared<libc::xdp_desc>,
    geometry: Geometry,
}

impl RxRing {
    pub(crate) fn map(spec: &RingSpec<'_>, size: u32) -> Result<RxRing, XdpError> {
        let pgoff = libc::XDP_PGOFF_RX_RING as u64;
        Ok(RxRing {
            ring: Shared::map(spec.fd, "receive", &spec.offsets.rx, size, pgoff, false)?,
            geometry: spec.geometry,
        })
    }

    /// The next received frame, if any.
    pub fn pop(&mut self) -> Option<RxFrame> {
        loop {
            let desc = self.ring.pop()?;
            if let Some((chunk, offset)) = Umem::claim(self.geometry, desc.addr) {
                return Some(RxFrame {
                    chunk,
                    offset,
                    len: desc.len as usize,
                });
            }
        }
    }

    /// Frees the popped slots for the kernel.
    pub fn release(&self) {
        self.ring.publish_cons();
    }
}

/// The transmit ring: frames user space wrote into chunks, for the kernel to send.
#[derive(Debug)]
pub struct TxRing(Shared<libc::xdp_desc>);

impl TxRing {
    pub(crate) fn map(spec: &RingSpec<'_>, size: u32) -> Result<TxRing, XdpError> {
        let pgoff = libc::XDP_PGOFF_TX_RING as u64;
        Shared::map(spec.fd, "transmit", &spec.offsets.tx, size, pgoff, true).map(TxRing)
    }

    /// Queues the first `len` bytes of `chunk` for sending (at the next [`TxRing::submit`]);
    /// hands the chunk back when the ring is full.
    pub fn push(&mut self, chunk: Chunk, len: u32) -> Result<(), Chunk> {
        let desc = libc::xdp_desc {
            addr: chunk.addr(),
            len,
            options: 0,
        };
        if self.0.push(desc) {
            Ok(())
        } else {
            Err(chunk)
        }
    }

    /// Publishes the queued frames.
    pub fn submit(&self) {
        self.0.publish_prod();
    }

    /// Frames published that the kernel has not taken yet.
    pub fn outstanding(&self) -> u32 {
        self.0.outstanding()
    }

    /// Whether the kernel must be woken (`sendto`) to send; always so in copy mode.
    pub fn needs_wakeup(&self) -> bool {
        self.0.needs_wakeup()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_producer_sees_free_slots_only_after_the_kernel_consumes() {
        let mut c = Cursor::producer(4, 0, 0);
        let mut reads = 0;
        for _ in 0..4 {
            assert!(c.free(1, || unreachable!("the cache shows room")) >= 1);
            c.produce();
        }
        // Full: the kernel's index is read, and it has consumed nothing.
        assert_eq!(
            c.free(1, || {
                reads += 1;
                0
            }),
            0
        );
        // It consumed two.
        assert_eq!(c.free(1, || 2), 2);
        assert_eq!(reads, 1);
        assert_eq!(c.produce(), 0, "slots wrap to the start");
    }

    #[test]
    fn indexes_wrap_at_two_to_the_32() {
        let start = u32::MAX - 1;
        let mut p = Cursor::producer(8, start, start);
        let slots: Vec<usize> = (0..4).map(|_| p.produce()).collect();
        assert_eq!(slots, [6, 7, 0, 1]);
        assert_eq!(p.prod(), 2, "wrapped");
        assert_eq!(p.free(1, || start), 4);

        let mut c = Cursor::consumer(8, start, start);
        assert_eq!(c.available(|| start.wrapping_add(3)), 3);
        assert_eq!([c.consume(), c.consume(), c.consume()], [6, 7, 0]);
        assert_eq!(c.available(|| start.wrapping_add(3)), 0);
        assert_eq!(c.cons(), 1);
    }

    #[test]
    fn a_consumer_reads_the_producer_index_only_when_its_cache_is_empty() {
        let mut c = Cursor::consumer(16, 0, 0);
        assert_eq!(c.available(|| 5), 5);
        c.consume();
        assert_eq!(c.available(|| unreachable!("four still cached")), 4);
    }
}
