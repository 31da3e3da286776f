//! rtemu's real-time engine: impaired links in user space.
#![deny(unsafe_code)]
#![warn(missing_docs)]
