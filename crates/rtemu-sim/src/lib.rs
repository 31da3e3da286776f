//! rtemu's real-fast engine: runs link models in virtual time over packet captures.
#![forbid(unsafe_code)]
