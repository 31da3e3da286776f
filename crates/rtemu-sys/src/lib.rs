//! The Linux calls std does not offer that more than one rtemu crate needs, each written once.
//!
//! * [`errno`]: turning a C return convention into `io::Result`;
//! * [`input`]: opening an input a user names (a regular file or a pipe, never a device), and
//!   reading a small file within a bound;
//! * [`memory`]: whether an allocation a user's numbers ask for fits in the machine;
//! * [`netns`]: moving a thread into a network namespace, and running code there;
//! * [`packet`]: opening and binding an `AF_PACKET` socket, interface indices, socket options;
//! * [`terminal`]: text from outside escaped before it reaches a terminal;
//! * [`thread`]: starting a named thread, a refused one an error rather than a panic;
//! * [`output`]: opening a file to write at a path a user names, so it cannot be aimed
//!   elsewhere (links of other users, devices, inputs), and writing it whole.
//!
//! The bottom floor of the workspace: it depends on libc only and knows nothing of labs,
//! links or packets' contents. Every wrapper is a thin, commented `unsafe` block around one
//! libc call; what a single crate alone needs (the engine's rings, the lab's timestamps, the
//! clock's timers) stays in that crate.
#![deny(unsafe_code)]
#![warn(missing_docs)]
// Every unsafe block says why it is sound.
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod errno;
pub mod input;
pub mod memory;
pub mod netns;
pub mod output;
pub mod packet;
pub mod terminal;
pub mod thread;
