//! Traces for rtemu: what happens to each packet on a trace-driven link.
//!
//! Layers, from the bottom:
//!
//! * **Records** ([`action`]): [`Action`] (drop, pass after a delay, duplicate), the 32-bit
//!   RplTrc word that encodes it, and [`Fate`], a packet's original plus its cascade of copies.
//! * **Forms** ([`format`], [`text`]): raw `.rpl`, framed `.rplx` with a header, and text.
//! * **Streams** ([`reader`], [`writer`], [`prefetch`]): block readers whose output does not
//!   depend on buffer size, and a prefetching reader on its own thread whose consumer side
//!   neither allocates nor locks per record, with under-run and end-of-trace policies.
//! * **Other trace kinds** ([`mahimahi`], [`series`]): delivery-opportunity traces and
//!   delay/loss time series, each a reader plus a pure lookup structure.
//! * **Generators and statistics** ([`fgn`], [`onoff`], [`stats`]).
//! * **Flows** ([`flow`]): the pattern that binds a trace to a flow, and its matcher.
//!
//! Everything except [`reader`], [`writer`] and [`prefetch`] is pure: no clock, no I/O. Time is
//! always passed in, in nanoseconds.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod action;
pub mod cache;
pub mod duration;
pub mod error;
pub mod fgn;
pub mod flow;
pub mod format;
pub mod mahimahi;
pub mod onoff;
pub mod prefetch;
pub mod reader;
pub mod series;
pub mod stats;
pub mod text;
pub mod writer;

pub use action::{assemble_fate, Action, Fate, TimeUnit};
pub use error::{ErrorKind, TraceError};
pub use flow::{FiveTuple, FlowPattern};
pub use format::{Format, Header};
pub use prefetch::{EndPolicy, PrefetchConfig, Prefetcher, UnderrunPolicy};
pub use reader::RecordReader;
pub use writer::RecordWriter;
