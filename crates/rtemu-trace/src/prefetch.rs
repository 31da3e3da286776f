//! A prefetching trace reader: a thread reads ahead into a ring of preallocated blocks so that
//! the consumer (the packet path) never waits on the disk.
//!
//! # How it works
//!
//! `blocks` vectors of `block_records` actions are allocated once. The reader thread takes an
//! empty block from one bounded channel, fills it from a [`RecordReader`] and sends it on a
//! second bounded channel; the consumer hands each block back when it has used it up. The
//! consumer's [`Prefetcher::next_action`] reads from the block it holds: no allocation, no lock, no
//! syscall. Only when a block is used up does it touch the channels, once per `block_records`
//! records, and then without waiting (`try_recv`), except under [`UnderrunPolicy::Wait`].
//!
//! # Under-runs
//!
//! If the consumer finds no full block ready, the reader has fallen behind: an **under-run**.
//! It is counted ([`Counters::underruns`]) and the packet gets an action chosen by the
//! [`UnderrunPolicy`]; the trace itself is not advanced, so when data arrives it resumes where
//! it was. A substituted action for a copy of a duplicated packet (an under-run in the middle
//! of a cascade) ends the cascade like any other.
//!
//! # End of trace
//!
//! The [`EndPolicy`] decides: `loop` starts again from the first record (done by the reader
//! thread, so the consumer sees no gap), `stop` makes [`Prefetcher::next_action`] return `None`, and
//! `pass` lets every later packet through with no trace delay (counted in
//! [`Counters::after_end`]).

use std::fmt;
use std::io::{Read, Seek};
use std::path::Path;
use std::str::FromStr;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError};
use std::thread::JoinHandle;

use crate::action::{assemble_fate, Action, Fate};
use crate::error::{ErrorKind, TraceError};
use crate::format::{Format, Header};
use crate::reader::RecordReader;

/// What a packet gets when no prefetched record is ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum UnderrunPolicy {
    /// Delivered with no trace delay.
    #[default]
    Pass,
    /// Dropped.
    Drop,
    /// The last action the trace gave again (a `dup` is repeated as a `pass` with its delay, so
    /// an under-run never starts a cascade); `pass` with no delay before the first record.
    HoldLast,
    /// Wait for the reader. Never an under-run; for the simulator, whose virtual time does not
    /// run away while it waits, so that its results do not depend on disk speed.
    Wait,
}

/// What happens after the last record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum EndPolicy {
    /// Start again from the first record.
    #[default]
    Loop,
    /// Report the end: [`Prefetcher::next_action`] returns `None`.
    Stop,
    /// Deliver every later packet with no trace delay.
    Pass,
}

impl FromStr for UnderrunPolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "pass" => Ok(UnderrunPolicy::Pass),
            "drop" => Ok(UnderrunPolicy::Drop),
            "hold-last" => Ok(UnderrunPolicy::HoldLast),
            "wait" => Ok(UnderrunPolicy::Wait),
            _ => Err(format!(
                "unknown under-run policy {s:?} (pass, drop, hold-last, wait)"
            )),
        }
    }
}

impl FromStr for EndPolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "loop" => Ok(EndPolicy::Loop),
            "stop" => Ok(EndPolicy::Stop),
            "pass" => Ok(EndPolicy::Pass),
            _ => Err(format!("unknown end policy {s:?} (loop, stop, pass)")),
        }
    }
}

impl fmt::Display for UnderrunPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            UnderrunPolicy::Pass => "pass",
            UnderrunPolicy::Drop => "drop",
            UnderrunPolicy::HoldLast => "hold-last",
            UnderrunPolicy::Wait => "wait",
        })
    }
}

impl fmt::Display for EndPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EndPolicy::Loop => "loop",
            EndPolicy::Stop => "stop",
            EndPolicy::Pass => "pass",
        })
    }
}

/// Sizes and policies of a [`Prefetcher`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrefetchConfig {
    /// Records per block (at least 1). 64 Ki records = 1 MiB of actions.
    pub block_records: usize,
    /// Blocks in the ring (at least 2: one being read, one being filled).
    pub blocks: usize,
    /// Read buffer of the underlying [`RecordReader`], in bytes.
    pub read_buffer: usize,
    /// What a packet gets when no record is ready.
    pub underrun: UnderrunPolicy,
    /// What happens after the last record.
    pub end: EndPolicy,
}

impl Default for PrefetchConfig {
    fn default() -> Self {
        PrefetchConfig {
            block_records: 1 << 16,
            blocks: 8,
            read_buffer: crate::reader::DEFAULT_BUFFER,
            underrun: UnderrunPolicy::default(),
            end: EndPolicy::default(),
        }
    }
}

/// What the consumer has seen so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counters {
    /// Records taken from the trace.
    pub records: u64,
    /// Actions substituted because no record was ready.
    pub underruns: u64,
    /// Actions given after the end of the trace under [`EndPolicy::Pass`].
    pub after_end: u64,
    /// Times the trace started again from its first record under [`EndPolicy::Loop`].
    pub loops: u64,
}

enum Msg {
    /// A full (or, before the end, partly full) block, and the trace's length in records once
    /// the reader has reached its end.
    Block(Vec<Action>, Option<u64>),
    End,
    Failed(TraceError),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Streaming,
    Ended,
}

/// The consumer side of a prefetching reader. See the [module docs](self).
pub struct Prefetcher {
    cur: Vec<Action>,
    pos: usize,
    full: Receiver<Msg>,
    empty: SyncSender<Vec<Action>>,
    state: State,
    last: Action,
    underrun: UnderrunPolicy,
    end: EndPolicy,
    counters: Counters,
    /// Records in one pass of the trace, known once the reader first reached its end; loops
    /// are counted from it, so the count follows what was consumed, not what was read ahead.
    trace_len: Option<u64>,
    header: Option<Header>,
    /// An error met in the middle of a cascade, returned by the next call.
    pending_error: Option<TraceError>,
    thread: Option<JoinHandle<()>>,
}

impl fmt::Debug for Prefetcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Prefetcher")
            .field("state", &self.state)
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

impl Prefetcher {
    /// Opens `path` (form detected unless given) and starts the reader thread. The header is
    /// read, and so checked, before this returns; later errors (a reserved code at record
    /// 10⁹) come from [`Prefetcher::next_action`], naming the file.
    pub fn open(
        path: &Path,
        format: Option<Format>,
        config: PrefetchConfig,
    ) -> Result<Prefetcher, TraceError> {
        let reader = RecordReader::open_with(path, format, config.read_buffer)?;
        let path = path.to_owned();
        Self::spawn(reader, config, move |e| e.with_path(&path))
    }

    /// Starts the reader thread over `reader`. `annotate` is applied to errors from the thread
    /// (to name the file). Fails only if the thread cannot be created.
    pub fn spawn<R: Read + Seek + Send + 'static>(
        reader: RecordReader<R>,
        config: PrefetchConfig,
        annotate: impl Fn(TraceError) -> TraceError + Send + 'static,
    ) -> Result<Prefetcher, TraceError> {
        let blocks = config.blocks.max(2);
        let block_records = config.block_records.max(1);
        let (full_tx, full) = sync_channel(blocks + 2);
        let (empty, empty_rx) = sync_channel(blocks);
        for _ in 0..blocks {
            empty
                .send(Vec::with_capacity(block_records))
                .expect("the receiver is alive and the channel has room for every block");
        }
        let header = reader.header().cloned();
        let end = config.end;
        let thread = std::thread::Builder::new()
            .name("rtemu-trace-prefetch".into())
            .spawn(move || {
                let msg = match produce(reader, &full_tx, &empty_rx, block_records, end) {
                    Ok(()) => Msg::End,
                    Err(e) => Msg::Failed(annotate(e)),
                };
                // The consumer may have gone; nothing is left to tell then.
                let _ = full_tx.send(msg);
            })?;
        Ok(Prefetcher {
            cur: Vec::new(),
            pos: 0,
            full,
            empty,
            state: State::Streaming,
            last: Action::Pass { delay_ns: 0 },
            underrun: config.underrun,
            end: config.end,
            counters: Counters::default(),
            trace_len: None,
            header,
            pending_error: None,
            thread: Some(thread),
        })
    }

    /// The next action for a packet (or a copy of one). `Ok(None)` only after the end under
    /// [`EndPolicy::Stop`]. An error (bad record, I/O) is returned once; the trace then counts
    /// as ended.
    #[inline]
    pub fn next_action(&mut self) -> Result<Option<Action>, TraceError> {
        if let Some(&a) = self.cur.get(self.pos) {
            self.pos += 1;
            self.counters.records += 1;
            self.last = a;
            return Ok(Some(a));
        }
        self.next_slow()
    }

    /// The next packet's whole fate: its action and those of its copies (see
    /// [`assemble_fate`]). Errors and the end are as in [`Prefetcher::next_action`]; an error in the
    /// middle of a cascade ends the cascade and is returned by the next call.
    #[inline]
    pub fn next_fate(&mut self) -> Result<Option<Fate>, TraceError> {
        let mut error = None;
        let fate = assemble_fate(|| match self.next_action() {
            Ok(a) => a,
            Err(e) => {
                error = Some(e);
                None
            }
        });
        match (error, fate) {
            (Some(e), None) => Err(e),
            (Some(e), Some(_)) => {
                self.pending_error = Some(e);
                Ok(fate)
            }
            (None, fate) => Ok(fate),
        }
    }

    #[cold]
    fn next_slow(&mut self) -> Result<Option<Action>, TraceError> {
        if self.state == State::Ended {
            if let Some(e) = self.pending_error.take() {
                return Err(e);
            }
            return Ok(self.after_end());
        }
        let msg = if self.underrun == UnderrunPolicy::Wait {
            self.full.recv().ok()
        } else {
            match self.full.try_recv() {
                Ok(m) => Some(m),
                Err(TryRecvError::Empty) => {
                    self.counters.underruns += 1;
                    return Ok(Some(self.substitute()));
                }
                Err(TryRecvError::Disconnected) => None,
            }
        };
        match self.accept(msg) {
            Ok(true) => self.next_action(),
            Ok(false) => Ok(self.after_end()),
            Err(e) => Err(e),
        }
    }

    /// Installs a message from the reader: true if it was a block.
    fn accept(&mut self, msg: Option<Msg>) -> Result<bool, TraceError> {
        match msg {
            Some(Msg::Block(block, trace_len)) => {
                let used = std::mem::replace(&mut self.cur, block);
                if used.capacity() > 0 {
                    // Room is guaranteed: the channel holds as many blocks as exist. If the
                    // reader has gone, the block is simply dropped.
                    let _ = self.empty.try_send(used);
                }
                self.pos = 0;
                self.trace_len = self.trace_len.or(trace_len);
                Ok(true)
            }
            Some(Msg::End) | None => {
                self.state = State::Ended;
                Ok(false)
            }
            Some(Msg::Failed(e)) => {
                self.state = State::Ended;
                Err(e)
            }
        }
    }

    /// Waits until records are ready (or the trace has ended), so that a consumer starting
    /// right after [`Prefetcher::open`] does not under-run while the reader's first read is in
    /// flight. Call it once before the packet path starts; afterwards the reader stays ahead
    /// as long as the disk is faster than the link.
    pub fn prime(&mut self) -> Result<(), TraceError> {
        while self.pos == self.cur.len() && self.state == State::Streaming {
            let msg = self.full.recv().ok();
            self.accept(msg)?;
        }
        Ok(())
    }

    fn substitute(&self) -> Action {
        match self.underrun {
            UnderrunPolicy::Pass | UnderrunPolicy::Wait => Action::Pass { delay_ns: 0 },
            UnderrunPolicy::Drop => Action::Drop,
            UnderrunPolicy::HoldLast => match self.last {
                Action::Dup { delay_ns } => Action::Pass { delay_ns },
                a => a,
            },
        }
    }

    fn after_end(&mut self) -> Option<Action> {
        match self.end {
            EndPolicy::Stop | EndPolicy::Loop => None,
            EndPolicy::Pass => {
                self.counters.after_end += 1;
                Some(Action::Pass { delay_ns: 0 })
            }
        }
    }

    /// What the consumer has seen so far.
    pub fn counters(&self) -> Counters {
        let mut c = self.counters;
        // Record r (from 1) of a trace of n records is in pass (r − 1) / n.
        c.loops = self
            .trace_len
            .map_or(0, |n| c.records.saturating_sub(1) / n.max(1));
        c
    }

    /// The framed form's header, if the trace has one.
    pub fn header(&self) -> Option<&Header> {
        self.header.as_ref()
    }
}

impl Drop for Prefetcher {
    fn drop(&mut self) {
        // Closing both channels wakes the reader wherever it waits; then it is joined, so no
        // thread outlives its prefetcher.
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
fn produce<R: Read + Seek>(
    mut reader: RecordReader<R>,
    full: &SyncSender<Msg>,
    empty: &Receiver<Vec<Action>>,
    block_records: usize,
    end: EndPolicy,
) -> Result<(), TraceError> {
    let mut trace_len = None;
    let mut pass_records: u64 = 0;
    loop {
        let Ok(mut block) = empty.recv() else {
            return Ok(());
        };
        block.clear();
        let mut at_end = false;
        while block.len() < block_records {
            let room = block_records - block.len();
            let n = match reader.read_block(&mut block, room) {
                Ok(n) => n,
                Err(e) => {
                    // The good records before the error are still delivered.
                    let _ = full.send(Msg::Block(block, trace_len));
                    return Err(e);
                }
            };
            pass_records += n as u64;
            if n > 0 {
                continue;
            }
            if pass_records == 0 {
                return Err(TraceError::new(ErrorKind::Empty));
            }
            if end != EndPolicy::Loop {
                at_end = true;
                break;
            }
            reader.rewind()?;
            trace_len = trace_len.or(Some(pass_records));
            pass_records = 0;
        }
        if (!block.is_empty() || !at_end) && full.send(Msg::Block(block, trace_len)).is_err() {
            return Ok(());
        }
        if at_end {
            return Ok(());
        }
    }
}
