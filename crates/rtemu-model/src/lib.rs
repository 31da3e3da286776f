//! Pure, seeded link models for rtemu.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod probability;
pub mod rng;

pub use probability::Probability;
pub use rng::Stream;
