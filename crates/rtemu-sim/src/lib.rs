//! rtemu's real-fast engine: runs link models in virtual time over packet captures.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod bufferbloat;
pub mod burst;
pub mod capacity;
pub mod capture;
pub mod capture_pair;
pub mod engine;
pub mod fatelog;
pub mod record;
pub mod source;
pub mod summary;
pub mod tables;
pub mod traced;
pub mod traffic;
