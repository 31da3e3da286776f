//! The machinery under every streamed trace: a thread reads ahead into a ring of preallocated
//! blocks, so that the consumer (the packet path) never waits on the disk, whatever the trace's
//! length.
//!
//! # How it works
//!
//! `blocks` vectors of `block_items` items are allocated once. The reader thread takes an
//! empty block from one bounded channel, fills it from a [`BlockSource`] and sends it on a
//! second bounded channel; the consumer hands each block back when it has used it up. The
//! consumer's [`ReadAhead::pull`] reads from the block it holds: no allocation, no lock, no
//! syscall. Only when a block is used up does it touch the channels, once per `block_items`
//! items, and then without waiting unless asked to.
//!
//! Every trace kind streams through this one ring: action records ([`crate::prefetch`]),
//! delay samples ([`crate::series`]) and delivery opportunities ([`crate::mahimahi`]). Each
//! kind adds its own policies on top; this layer only says whether an item was ready.

use std::fmt;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError};
use std::thread::JoinHandle;

use crate::error::{ErrorKind, TraceError};

/// A trace read in blocks, from its first item to its last, as many times as asked.
pub trait BlockSource: Send + 'static {
    /// What the trace holds.
    type Item: Copy + Send + 'static;

    /// Appends up to `max` items to `out`; returns how many, 0 only at the end of the trace.
    /// Must not allocate when `out` has room for `max` more.
    fn read_block(&mut self, out: &mut Vec<Self::Item>, max: usize) -> Result<usize, TraceError>;

    /// Goes back to the first item, to read the trace again.
    fn rewind(&mut self) -> Result<(), TraceError>;
}

/// Sizes of a [`ReadAhead`] ring, and whether the trace loops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ring {
    /// Items per block (at least 1).
    pub block_items: usize,
    /// Blocks in the ring (at least 2: one being read, one being filled).
    pub blocks: usize,
    /// Whether the reader starts again from the first item after the last.
    pub looping: bool,
}

/// What [`ReadAhead::pull`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pull<T> {
    /// The next item.
    Item(T),
    /// The reader has fallen behind: no item is ready yet (an **under-run**). Nothing was
    /// taken, so the next ready item is the one that was due.
    NotReady,
    /// The trace has ended (it does not loop), or failed earlier.
    Ended,
}

enum Msg<T> {
    /// A full (or, before the end, partly full) block, and the trace's length in items once
    /// the reader has reached its end.
    Block(Vec<T>, Option<u64>),
    End,
    Failed(TraceError),
}

/// The consumer side of a read-ahead ring. See the [module docs](self).
pub struct ReadAhead<T> {
    cur: Vec<T>,
    pos: usize,
    full: Receiver<Msg<T>>,
    empty: SyncSender<Vec<T>>,
    ended: bool,
    /// Items taken so far.
    taken: u64,
    /// Items in one pass, known once the reader first reached the end.
    pass_len: Option<u64>,
    thread: Option<JoinHandle<()>>,
}

impl<T> fmt::Debug for ReadAhead<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadAhead")
            .field("taken", &self.taken)
            .field("pass_len", &self.pass_len)
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

impl<T: Copy + Send + 'static> ReadAhead<T> {
    /// Starts the reader thread over `source`. `annotate` is applied to errors from the thread
    /// (to name the file). Fails only if the thread cannot be created.
    pub fn spawn<S: BlockSource<Item = T>>(
        source: S,
        ring: Ring,
        annotate: impl Fn(TraceError) -> TraceError + Send + 'static,
    ) -> Result<ReadAhead<T>, TraceError> {
        let blocks = ring.blocks.max(2);
        let block_items = ring.block_items.max(1);
        let (full_tx, full) = sync_channel(blocks + 2);
        let (empty, empty_rx) = sync_channel(blocks);
        for _ in 0..blocks {
            empty
                .send(Vec::with_capacity(block_items))
                .expect("the receiver is alive and the channel has room for every block");
        }
        let thread = std::thread::Builder::new()
            .name("rtemu-trace-readahead".into())
            .spawn(move || {
                let msg = match produce(source, &full_tx, &empty_rx, block_items, ring.looping) {
                    Ok(()) => Msg::End,
                    Err(e) => Msg::Failed(annotate(e)),
                };
                // The consumer may have gone; nothing is left to tell then.
                let _ = full_tx.send(msg);
            })?;
        Ok(ReadAhead {
            cur: Vec::new(),
            pos: 0,
            full,
            empty,
            ended: false,
            taken: 0,
            pass_len: None,
            thread: Some(thread),
        })
    }

    /// The next item. With `wait`, blocks until the reader has it (never
    /// [`Pull::NotReady`]): for the simulator, whose virtual time does not run away while it
    /// waits. An error (bad record, I/O) is returned once; the trace then counts as ended.
    #[inline]
    pub fn pull(&mut self, wait: bool) -> Result<Pull<T>, TraceError> {
        if let Some(&x) = self.cur.get(self.pos) {
            self.pos += 1;
            self.taken += 1;
            return Ok(Pull::Item(x));
        }
        self.pull_slow(wait)
    }

    #[cold]
    fn pull_slow(&mut self, wait: bool) -> Result<Pull<T>, TraceError> {
        if self.ended {
            return Ok(Pull::Ended);
        }
        let msg = if wait {
            self.full.recv().ok()
        } else {
            match self.full.try_recv() {
                Ok(m) => Some(m),
                Err(TryRecvError::Empty) => return Ok(Pull::NotReady),
                Err(TryRecvError::Disconnected) => None,
            }
        };
        if self.accept(msg)? {
            self.pull(wait)
        } else {
            Ok(Pull::Ended)
        }
    }

    /// Installs a message from the reader: true if it was a block.
    fn accept(&mut self, msg: Option<Msg<T>>) -> Result<bool, TraceError> {
        match msg {
            Some(Msg::Block(block, pass_len)) => {
                let used = std::mem::replace(&mut self.cur, block);
                if used.capacity() > 0 {
                    // Room is guaranteed: the channel holds as many blocks as exist. If the
                    // reader has gone, the block is simply dropped.
                    let _ = self.empty.try_send(used);
                }
                self.pos = 0;
                self.pass_len = self.pass_len.or(pass_len);
                Ok(true)
            }
            Some(Msg::End) | None => {
                self.ended = true;
                Ok(false)
            }
            Some(Msg::Failed(e)) => {
                self.ended = true;
                Err(e)
            }
        }
    }

    /// Waits until items are ready (or the trace has ended), so that a consumer starting
    /// right after [`ReadAhead::spawn`] does not under-run while the reader's first read is in
    /// flight. Call it once before the packet path starts; afterwards the reader stays ahead
    /// as long as the disk is faster than the link.
    pub fn prime(&mut self) -> Result<(), TraceError> {
        while self.pos == self.cur.len() && !self.ended {
            let msg = self.full.recv().ok();
            self.accept(msg)?;
        }
        Ok(())
    }

    /// Items taken so far.
    pub fn taken(&self) -> u64 {
        self.taken
    }

    /// Times the taken items started again from the first (passes completed before the last
    /// item taken): counted from what was consumed, not from what was read ahead.
    pub fn loops(&self) -> u64 {
        // Item i (from 1) of a trace of n items is in pass (i − 1) / n.
        self.pass_len
            .map_or(0, |n| self.taken.saturating_sub(1) / n.max(1))
    }

    /// Whether the item taken last was the first of a pass after the first.
    pub fn starts_pass(&self) -> bool {
        self.taken > 1
            && self
                .pass_len
                .is_some_and(|n| (self.taken - 1) % n.max(1) == 0)
    }
}

impl<T> Drop for ReadAhead<T> {
    fn drop(&mut self) {
        // Closing both channels wakes the reader wherever it waits; then it is joined, so no
        // thread outlives its ring.
        let (closed_tx, _) = sync_channel(0);
        drop(std::mem::replace(&mut self.empty, closed_tx));
        let (_, closed_rx) = sync_channel(0);
        drop(std::mem::replace(&mut self.full, closed_rx));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The reader thread: fills blocks until the end (or an error), looping if asked. Returns
/// `Ok` at the end of the trace or when the consumer has gone.
fn produce<S: BlockSource>(
    mut source: S,
    full: &SyncSender<Msg<S::Item>>,
    empty: &Receiver<Vec<S::Item>>,
    block_items: usize,
    looping: bool,
) -> Result<(), TraceError> {
    let mut pass_len = None;
    let mut pass_items: u64 = 0;
    loop {
        let Ok(mut block) = empty.recv() else {
            return Ok(());
        };
        block.clear();
        let mut at_end = false;
        while block.len() < block_items {
            let room = block_items - block.len();
            let n = match source.read_block(&mut block, room) {
                Ok(n) => n,
                Err(e) => {
                    // The good items before the error are still delivered.
                    let _ = full.send(Msg::Block(block, pass_len));
                    return Err(e);
                }
            };
            pass_items += n as u64;
            if n > 0 {
                continue;
            }
            if pass_items == 0 {
                return Err(TraceError::new(ErrorKind::Empty));
            }
            if !looping {
                at_end = true;
                break;
            }
            source.rewind()?;
            pass_len = pass_len.or(Some(pass_items));
            pass_items = 0;
        }
        if (!block.is_empty() || !at_end) && full.send(Msg::Block(block, pass_len)).is_err() {
            return Ok(());
        }
        if at_end {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The numbers `0..len`, `per_read` at a time.
    struct Counting {
        next: u32,
        len: u32,
        per_read: usize,
    }

    impl BlockSource for Counting {
        type Item = u32;

        fn read_block(&mut self, out: &mut Vec<u32>, max: usize) -> Result<usize, TraceError> {
            let n = (self.len - self.next).min(max.min(self.per_read) as u32);
            out.extend(self.next..self.next + n);
            self.next += n;
            Ok(n as usize)
        }

        fn rewind(&mut self) -> Result<(), TraceError> {
            self.next = 0;
            Ok(())
        }
    }

    fn ring(looping: bool) -> Ring {
        Ring {
            block_items: 4,
            blocks: 2,
            looping,
        }
    }

    #[test]
    fn items_arrive_in_order_whatever_the_block_size_and_end() {
        let src = Counting {
            next: 0,
            len: 10,
            per_read: 3,
        };
        let mut r = ReadAhead::spawn(src, ring(false), |e| e).unwrap();
        let mut got = Vec::new();
        while let Pull::Item(x) = r.pull(true).unwrap() {
            got.push(x);
        }
        assert_eq!(got, (0..10).collect::<Vec<_>>());
        assert_eq!(r.pull(true).unwrap(), Pull::Ended);
        assert_eq!((r.taken(), r.loops()), (10, 0));
    }

    #[test]
    fn a_looping_trace_marks_each_new_pass() {
        let src = Counting {
            next: 0,
            len: 3,
            per_read: 2,
        };
        let mut r = ReadAhead::spawn(src, ring(true), |e| e).unwrap();
        let mut starts = Vec::new();
        for i in 0..10 {
            assert_eq!(r.pull(true).unwrap(), Pull::Item(i % 3));
            if r.starts_pass() {
                starts.push(i);
            }
        }
        assert_eq!(starts, vec![3, 6, 9]);
        assert_eq!(r.loops(), 3);
    }

    #[test]
    fn an_empty_trace_is_an_error_then_the_end() {
        let src = Counting {
            next: 0,
            len: 0,
            per_read: 1,
        };
        let mut r = ReadAhead::spawn(src, ring(true), |e| e).unwrap();
        let e = r.pull(true).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::Empty));
        assert_eq!(r.pull(true).unwrap(), Pull::Ended);
    }
}
