//! The packets a discipline holds: one slab allocated at construction, and first-in first-out
//! lists threaded through it, so queueing never allocates and any number of queues (FQ-CoDel's
//! flows) share one bounded store.

/// Index of a slot; [`NONE`] for no slot.
pub(crate) type Slot = u32;
/// No slot.
pub(crate) const NONE: Slot = Slot::MAX;

/// A fixed number of slots of `T`, each free or holding one value, linked into lists.
#[derive(Debug, Clone)]
pub(crate) struct Store<T> {
    items: Box<[T]>,
    next: Box<[Slot]>,
    free: Slot,
    len: usize,
}

impl<T: Copy + Default> Store<T> {
    /// `capacity` free slots (at most `u32::MAX − 1`).
    pub(crate) fn new(capacity: usize) -> Self {
        let capacity = capacity.min(NONE as usize - 1);
        Store {
            items: vec![T::default(); capacity].into_boxed_slice(),
            // Every slot links to the next: the free list is the whole store.
            next: (1..=capacity as Slot)
                .map(|n| if n as usize == capacity { NONE } else { n })
                .collect(),
            free: if capacity == 0 { NONE } else { 0 },
            len: 0,
        }
    }

    /// Slots in use.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.len
    }

    /// Whether every slot is in use.
    #[cfg(test)]
    fn is_full(&self) -> bool {
        self.free == NONE
    }

    /// Takes a free slot for `value`; `None` when the store is full.
    fn take(&mut self, value: T) -> Option<Slot> {
        let slot = self.free;
        if slot == NONE {
            return None;
        }
        self.free = self.next[slot as usize];
        self.items[slot as usize] = value;
        self.next[slot as usize] = NONE;
        self.len += 1;
        Some(slot)
    }

    /// Gives `slot` back and returns its value.
    fn give(&mut self, slot: Slot) -> T {
        self.next[slot as usize] = self.free;
        self.free = slot;
        self.len -= 1;
        self.items[slot as usize]
    }
}

/// A first-in first-out list of slots of a [`Store`], with its length and bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fifo {
    head: Slot,
    tail: Slot,
    /// Values in the list.
    pub(crate) len: u32,
    /// Their bytes, as the caller counts them.
    pub(crate) bytes: u64,
}

impl Default for Fifo {
    fn default() -> Self {
        Fifo {
            head: NONE,
            tail: NONE,
            len: 0,
            bytes: 0,
        }
    }
}

impl Fifo {
    /// Whether the list is empty.
    pub(crate) fn is_empty(&self) -> bool {
        self.head == NONE
    }

    /// The first slot, if any.
    pub(crate) fn front(&self) -> Option<Slot> {
        (self.head != NONE).then_some(self.head)
    }

    /// The first value, if any.
    pub(crate) fn peek<'a, T>(&self, store: &'a Store<T>) -> Option<&'a T> {
        self.front().map(|slot| &store.items[slot as usize])
    }

    /// The values, first to last.
    pub(crate) fn iter<'a, T>(&self, store: &'a Store<T>) -> impl Iterator<Item = &'a T> + 'a {
        let mut slot = self.head;
        std::iter::from_fn(move || {
            let at = (slot != NONE).then_some(slot)?;
            slot = store.next[at as usize];
            Some(&store.items[at as usize])
        })
    }

    /// Appends `value` of `bytes` bytes; `Err(value)` when the store is full.
    pub(crate) fn push<T: Copy + Default>(
        &mut self,
        store: &mut Store<T>,
        value: T,
        bytes: u32,
    ) -> Result<Slot, T> {
        let slot = store.take(value).ok_or(value)?;
        if self.tail == NONE {
            self.head = slot;
        } else {
            store.next[self.tail as usize] = slot;
        }
        self.tail = slot;
        self.len += 1;
        self.bytes += u64::from(bytes);
        Ok(slot)
    }

    /// Takes the first value out, with `bytes` its size as it was pushed.
    pub(crate) fn pop<T: Copy + Default>(
        &mut self,
        store: &mut Store<T>,
        bytes: impl Fn(&T) -> u32,
    ) -> Option<T> {
        let slot = self.front()?;
        self.head = store.next[slot as usize];
        if self.head == NONE {
            self.tail = NONE;
        }
        let value = store.give(slot);
        self.len -= 1;
        self.bytes -= u64::from(bytes(&value));
        Some(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_share_the_store_and_keep_their_order() {
        let mut store: Store<u64> = Store::new(3);
        let (mut a, mut b) = (Fifo::default(), Fifo::default());
        a.push(&mut store, 1, 10).unwrap();
        b.push(&mut store, 2, 20).unwrap();
        a.push(&mut store, 3, 30).unwrap();
        assert!(store.is_full());
        assert_eq!(a.push(&mut store, 4, 40), Err(4));
        assert_eq!((a.len, a.bytes, b.len, b.bytes), (2, 40, 1, 20));
        assert_eq!(a.iter(&store).copied().collect::<Vec<_>>(), [1, 3]);
        assert_eq!(a.pop(&mut store, |v| *v as u32 * 10), Some(1));
        b.push(&mut store, 5, 50).unwrap();
        assert_eq!(a.pop(&mut store, |v| *v as u32 * 10), Some(3));
        assert_eq!(a.pop(&mut store, |v| *v as u32 * 10), None);
        assert!(a.is_empty() && a.bytes == 0);
        assert_eq!(b.pop(&mut store, |v| *v as u32 * 10), Some(2));
        assert_eq!(b.pop(&mut store, |v| *v as u32 * 10), Some(5));
        assert_eq!(store.len(), 0);
    }
}
