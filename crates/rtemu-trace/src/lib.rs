//! Traces for rtemu: what happens to each packet on a trace-driven link.
//!
//! Layers, from the bottom:
//!
//! * **Records** ([`action`]): [`Action`] (drop, pass after a delay, duplicate), the 32-bit
//!   RplTrc word that encodes it, and [`Fate`], a packet's original plus its cascade of copies.
//! * **Forms** ([`format`], [`text`]): raw `.rpl`, framed `.rplx` with a header, and text.
//! * **Streams** ([`reader`], [`writer`], [`readahead`], [`prefetch`]): block readers whose
//!   output does not depend on buffer size, a read-ahead ring on its own thread whose consumer
//!   side neither allocates nor locks per record, and the action trace's under-run and
//!   end-of-trace policies on top; [`bench`] measures how fast a trace streams through them.
//! * **Other trace kinds** ([`mahimahi`], [`series`]): delivery-opportunity traces and
//!   delay/loss time series, each a line reader plus a stream that reads it ahead through the
//!   same ring ([`readahead`]) as action records.
//! * **Generators and statistics** ([`fgn`], [`onoff`], [`iid`], one [`gen::Generator`] over
//!   them, [`stats`]).
//! * **Flows** ([`flow`]): the pattern that binds a trace to a flow, and its matcher.
//!
//! Everything except the readers and streams, [`writer`], [`bench`] and [`cache`] is pure: no clock, no
//! I/O. Time is always passed in, in nanoseconds.
//!
//! # Driving a link from a trace
//!
//! Per-packet action traces: open a [`Prefetcher`] once (it checks the header and starts the
//! reader thread), then ask for each arriving packet's [`Fate`]. The simulator uses
//! [`UnderrunPolicy::Wait`] so its results do not depend on the disk; the real-time engine uses
//! `pass`, `drop` or `hold-last` and reports [`prefetch::Counters::underruns`].
//!
//! ```
//! use std::io::Cursor;
//! use rtemu_trace::{Action, EndPolicy, Format, Header, PrefetchConfig, Prefetcher,
//!                   RecordReader, RecordWriter, UnderrunPolicy};
//!
//! // A trace in memory; a file would be `Prefetcher::open(path, None, config)`.
//! let mut w = RecordWriter::new(Vec::new(), Format::Raw, &Header::default())?;
//! for a in [Action::Pass { delay_ns: 5_000 }, Action::Dup { delay_ns: 1_000 },
//!           Action::Pass { delay_ns: 2_000 }, Action::Drop] {
//!     w.write(a)?;
//! }
//! let bytes = w.finish()?;
//!
//! let config = PrefetchConfig {
//!     underrun: UnderrunPolicy::Wait,
//!     end: EndPolicy::Stop,
//!     ..PrefetchConfig::default()
//! };
//! let reader = RecordReader::new(Cursor::new(bytes), Format::Raw, 1 << 16)?;
//! let mut trace = Prefetcher::spawn(reader, config, |e| e)?;
//! let mut deliveries = Vec::new();
//! while let Some(fate) = trace.next_fate()? {
//!     // One packet: deliver a copy after each delay (none: dropped).
//!     deliveries.push(fate.deliveries().to_vec());
//! }
//! assert_eq!(deliveries, vec![vec![5_000], vec![1_000, 2_000], vec![]]);
//! assert_eq!(trace.counters().underruns, 0);
//! # Ok::<(), rtemu_trace::TraceError>(())
//! ```
//!
//! The other kinds stream the same way, in constant memory whatever their length:
//! [`series::SeriesStream`] (`at(t_ns)` gives delay and loss at non-decreasing times) and
//! [`mahimahi::OpportunityStream`] (`skip_to(t_ns)` and `advance()` walk the delivery
//! opportunities, looping). A link with several traces tries each [`FlowPattern::matches`] on the
//! packet's [`FiveTuple`] in order; a packet that matches none uses the default model.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod action;
pub mod bench;
pub mod cache;
pub mod duration;
pub mod error;
pub mod fgn;
pub mod flow;
pub mod format;
pub mod gen;
pub mod iid;
mod lines;
pub mod mahimahi;
pub mod onoff;
pub mod prefetch;
pub mod readahead;
pub mod reader;
pub mod series;
pub mod stats;
pub mod text;
pub mod writer;

pub use action::{assemble_fate, Action, Fate, TimeUnit};
pub use error::{ErrorKind, TraceError};
pub use flow::{FiveTuple, FlowPattern, FlowTable};
pub use format::{Format, Header};
pub use prefetch::{EndPolicy, PrefetchConfig, Prefetcher, UnderrunPolicy};
pub use reader::RecordReader;
pub use writer::RecordWriter;
