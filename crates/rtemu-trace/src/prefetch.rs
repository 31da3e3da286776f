//! A prefetching reader of action traces: the records of a [`RecordReader`] read ahead on
//! their own thread (see [`crate::readahead`]), with the policies a link needs when a record is
//! missing or the trace ends.
//!
//! # Under-runs
//!
//! If the consumer finds no record ready, the reader has fallen behind: an **under-run**.
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
//!
//! # Endless cascades
//!
//! A packet's fate takes records until one that is not a `dup`. A looping trace whose records
//! are all `dup` would never end the first packet's: [`Prefetcher::open`] refuses it under
//! `loop`. Whatever the trace, a fate takes at most [`MAX_FATE_RECORDS`] records; a cascade
//! cut there is counted ([`Counters::cut_cascades`]).

use std::fmt;
use std::io::{Read, Seek};
use std::path::Path;
use std::str::FromStr;

use crate::action::{assemble_fate, Action, Fate, MAX_FATE_RECORDS};
use crate::error::{ErrorKind, TraceError};
use crate::format::{Format, Header};
use crate::readahead::{Pull, ReadAhead, Ring};
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
    /// Packets whose cascade of `dup` records was cut at [`MAX_FATE_RECORDS`].
    pub cut_cascades: u64,
}

/// The consumer side of a prefetching reader. See the [module docs](self).
pub struct Prefetcher {
    ahead: ReadAhead<Action>,
    last: Action,
    underrun: UnderrunPolicy,
    end: EndPolicy,
    underruns: u64,
    after_end: u64,
    cut_cascades: u64,
    header: Option<Header>,
    /// An error met in the middle of a cascade, returned by the next call.
    pending_error: Option<TraceError>,
}

impl fmt::Debug for Prefetcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Prefetcher")
            .field("ahead", &self.ahead)
            .field("counters", &self.counters())
            .finish_non_exhaustive()
    }
}

impl Prefetcher {
    /// Opens `path` (form detected unless given) and starts the reader thread. The header is
    /// read, and so checked, before this returns; later errors (a reserved code at record
    /// 10⁹) come from [`Prefetcher::next_action`], naming the file. Under
    /// [`EndPolicy::Loop`], a trace with no record that ends a packet (all `dup`) is refused
    /// here.
    pub fn open(
        path: &Path,
        format: Option<Format>,
        config: PrefetchConfig,
    ) -> Result<Prefetcher, TraceError> {
        let reader = RecordReader::open_with(path, format, config.read_buffer)?;
        if config.end == EndPolicy::Loop {
            check_ends_packets(RecordReader::open_with(path, Some(reader.format()), 4096)?)
                .map_err(|e| e.with_path(path))?;
        }
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
        let header = reader.header().cloned();
        let ring = Ring {
            block_items: config.block_records,
            blocks: config.blocks,
            looping: config.end == EndPolicy::Loop,
        };
        Ok(Prefetcher {
            ahead: ReadAhead::spawn(reader, ring, annotate)?,
            last: Action::Pass { delay_ns: 0 },
            underrun: config.underrun,
            end: config.end,
            underruns: 0,
            after_end: 0,
            cut_cascades: 0,
            header,
            pending_error: None,
        })
    }

    /// The next action for a packet (or a copy of one). `Ok(None)` only after the end under
    /// [`EndPolicy::Stop`]. An error (bad record, I/O) is returned once; the trace then counts
    /// as ended.
    #[inline]
    pub fn next_action(&mut self) -> Result<Option<Action>, TraceError> {
        match self.ahead.pull(self.underrun == UnderrunPolicy::Wait)? {
            Pull::Item(a) => {
                self.last = a;
                Ok(Some(a))
            }
            Pull::NotReady => {
                self.underruns += 1;
                Ok(Some(self.substitute()))
            }
            Pull::Ended => match self.pending_error.take() {
                Some(e) => Err(e),
                None => Ok(self.after_end()),
            },
        }
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
        if fate.is_some_and(|f| f.cut()) {
            self.cut_cascades += 1;
        }
        match (error, fate) {
            (Some(e), None) => Err(e),
            (Some(e), Some(_)) => {
                self.pending_error = Some(e);
                Ok(fate)
            }
            (None, fate) => Ok(fate),
        }
    }

    /// Waits until records are ready (or the trace has ended), so that a consumer starting
    /// right after [`Prefetcher::open`] does not under-run while the reader's first read is in
    /// flight. Call it once before the packet path starts; afterwards the reader stays ahead
    /// as long as the disk is faster than the link.
    pub fn prime(&mut self) -> Result<(), TraceError> {
        self.ahead.prime()
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
                self.after_end += 1;
                Some(Action::Pass { delay_ns: 0 })
            }
        }
    }

    /// What the consumer has seen so far.
    pub fn counters(&self) -> Counters {
        Counters {
            records: self.ahead.taken(),
            underruns: self.underruns,
            after_end: self.after_end,
            loops: self.ahead.loops(),
            cut_cascades: self.cut_cascades,
        }
    }

    /// The framed form's header, if the trace has one.
    pub fn header(&self) -> Option<&Header> {
        self.header.as_ref()
    }
}

/// Reads `reader` until a record that ends a packet (a `drop` or a `pass`); a trace of nothing
/// but `dup` records is an error, since looping it would make one endless cascade. A valid
/// trace stops this at its first such record, usually the first.
fn check_ends_packets<R: Read>(mut reader: RecordReader<R>) -> Result<(), TraceError> {
    let mut block = Vec::with_capacity(1024);
    loop {
        block.clear();
        let read = reader.read_block(&mut block, 1024);
        // The records before a bad one still count: its error comes from the stream, in turn.
        if block.iter().any(|a| !matches!(a, Action::Dup { .. })) {
            return Ok(());
        }
        if read? == 0 {
            let records = reader.records_read();
            return Err(match records {
                0 => TraceError::new(ErrorKind::Empty),
                _ => TraceError::new(ErrorKind::NoPacketEnd {
                    records,
                    max: MAX_FATE_RECORDS,
                }),
            });
        }
    }
}
