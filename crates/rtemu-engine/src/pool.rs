//! Frame buffers preallocated at start: copies in flight live here until their release.
//!
//! One contiguous allocation of `frames × slot_size` bytes and a stack of free slot numbers,
//! both sized once. Taking and returning a slot never allocates; when every slot is taken the
//! caller counts the frame as dropped for lack of a buffer (`pool-exhausted`), which is how the
//! real-time UDP paper's static resources fail: visibly, never by growing.

/// The pool size that holds every copy in flight on a link direction that carries `rate_pps`
/// packets per second for `max_delay_ns`: the bandwidth-delay product, doubled for duplicates
/// and reordering, plus one receive batch so a burst at the limit still fits.
pub fn frames_for(rate_pps: u64, max_delay_ns: u64, batch: usize) -> usize {
    let in_flight = (rate_pps as u128 * max_delay_ns as u128).div_ceil(1_000_000_000);
    (in_flight as usize).saturating_mul(2).saturating_add(batch)
}

/// Preallocated frame slots.
#[derive(Debug)]
pub struct Pool {
    bytes: Box<[u8]>,
    lens: Box<[u32]>,
    free: Vec<u32>,
    slot_size: usize,
}

impl Pool {
    /// `frames` slots of `slot_size` bytes each.
    pub fn new(frames: usize, slot_size: usize) -> Pool {
        Pool {
            bytes: vec![0; frames * slot_size].into_boxed_slice(),
            lens: vec![0; frames].into_boxed_slice(),
            // Popped from the end: slot 0 first, so a quiet link touches few cache lines.
            free: (0..frames as u32).rev().collect(),
            slot_size,
        }
    }

    /// Bytes a slot holds.
    pub fn slot_size(&self) -> usize {
        self.slot_size
    }

    /// Slots in the pool.
    pub fn capacity(&self) -> usize {
        self.lens.len()
    }

    /// Slots in use.
    pub fn in_use(&self) -> usize {
        self.capacity() - self.free.len()
    }

    /// Takes a free slot and fills it with `fill`, which writes into the slot's bytes and
    /// returns the frame's length, or `None` to give the slot back (the frame does not fit).
    /// Returns the slot number, or `Err(Exhausted)` when no slot is free.
    pub fn fill(
        &mut self,
        fill: impl FnOnce(&mut [u8]) -> Option<usize>,
    ) -> Result<Option<u32>, Exhausted> {
        let slot = *self.free.last().ok_or(Exhausted)?;
        let at = slot as usize * self.slot_size;
        match fill(&mut self.bytes[at..at + self.slot_size]) {
            Some(len) => {
                self.free.pop();
                self.lens[slot as usize] = len.min(self.slot_size) as u32;
                Ok(Some(slot))
            }
            None => Ok(None),
        }
    }

    /// The frame in `slot`, mutable (for corruption).
    pub fn frame_mut(&mut self, slot: u32) -> &mut [u8] {
        let at = slot as usize * self.slot_size;
        &mut self.bytes[at..at + self.lens[slot as usize] as usize]
    }

    /// The frame in `slot`.
    pub fn frame(&self, slot: u32) -> &[u8] {
        let at = slot as usize * self.slot_size;
        &self.bytes[at..at + self.lens[slot as usize] as usize]
    }

    /// Returns `slot` to the pool.
    pub fn release(&mut self, slot: u32) {
        debug_assert!(!self.free.contains(&slot), "slot {slot} released twice");
        // Never reallocates: at most `capacity` slots are ever free.
        self.free.push(slot);
    }
}

/// Every slot of the pool is in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exhausted;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_reused_and_exhaustion_is_reported() {
        let mut pool = Pool::new(2, 8);
        let a = pool.fill(|b| {
            b[..3].copy_from_slice(b"abc");
            Some(3)
        });
        let b = pool.fill(|b| {
            b[..2].copy_from_slice(b"xy");
            Some(2)
        });
        let (a, b) = (a.unwrap().unwrap(), b.unwrap().unwrap());
        assert_ne!(a, b);
        assert_eq!(pool.frame(a), b"abc");
        assert_eq!(pool.frame(b), b"xy");
        assert_eq!(pool.fill(|_| Some(1)), Err(Exhausted));
        pool.release(a);
        assert_eq!(pool.in_use(), 1);
        assert_eq!(
            pool.fill(|_| None),
            Ok(None),
            "a refused fill keeps the slot free"
        );
        assert_eq!(pool.in_use(), 1);
        let c = pool.fill(|b| {
            b[0] = 9;
            Some(1)
        });
        assert_eq!(c, Ok(Some(a)));
        assert_eq!(pool.frame(a), &[9]);
    }

    #[test]
    fn sizing_follows_the_bandwidth_delay_product() {
        // 100 kpps for 10 ms: 1000 in flight, doubled, plus a batch of 64.
        assert_eq!(frames_for(100_000, 10_000_000, 64), 2064);
        // A fraction of a packet in flight still needs a slot.
        assert_eq!(frames_for(1, 1, 0), 2);
        assert_eq!(frames_for(0, 10_000_000, 64), 64);
    }
}
