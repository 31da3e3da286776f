//! rtemu's virtual networks: a lab of nodes (network namespaces) joined by point-to-point links
//! (veth pairs) and LAN segments (bridges), described by one TOML file.
//!
//! * [`spec`]: the file as written, with the position of every value;
//! * [`topology`]: the validated [`Topology`] (names checked, interfaces named, addresses
//!   assigned), with errors that name the file, line and column;
//! * [`routing`]: the routes, static neighbours and forwarding flags every node gets.
//!
//! Nothing in these modules needs root or touches the system.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod error;
pub mod routing;
pub mod spec;
pub mod topology;

pub use error::{LoadError, SpecError};
pub use topology::Topology;
