//! rtemu's control plane as a library: what the command line (and any other face) does to a
//! lab. [`lab`] brings labs up and down and steers their links; [`engine`] is the engine
//! process that carries a lab's impaired links and the client of its control socket;
//! [`assemble`] builds a link direction's model from netem text and traces; [`message`] types
//! the engine's replies; [`error`] types what the calls the API makes fail with, and says an
//! error the way every face shows it; [`root`] says whether this process may make labs;
//! [`demo`] is the lab, traffic and predictions of `rtemu demo`; [`sim`] runs `rtemu sim` from
//! its flags' values.
//!
//! Nothing here prints to standard output: results are returned for the caller to show.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod assemble;
pub mod demo;
pub mod engine;
pub mod error;
pub mod lab;
pub mod message;
pub mod root;
pub mod sim;
