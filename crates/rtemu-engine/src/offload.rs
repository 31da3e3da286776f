//! Switching off the offloads that would hide real frames from the engine.
//!
//! With segmentation offloads on, a node's TCP hands a veth 64 KB super-packets that the engine
//! would delay and lose as one (netem's known flaw); with transmit checksum offload on, a node's
//! UDP and TCP frames carry unfinished checksums that the far node drops after the engine
//! copied them. So every veth end on an impaired link gets TSO, GSO, GRO and TX checksumming
//! switched off: the node's ends (where frames are made) and the engine's ends (where they are
//! received and sent).

use std::io;

use crate::sys;
pub use crate::sys::EthtoolFlag;

/// The offloads [`disable`] switches off, in order. Scatter-gather goes after TSO, which the
/// kernel ties to it.
pub const OFFLOADS: [EthtoolFlag; 5] = [
    EthtoolFlag::Tso,
    EthtoolFlag::Gso,
    EthtoolFlag::Gro,
    EthtoolFlag::TxChecksum,
    EthtoolFlag::ScatterGather,
];

/// An offload could not be switched off.
#[derive(Debug, thiserror::Error)]
#[error("switching off {flag:?} on {interface}: {source} (needs CAP_NET_ADMIN)")]
pub struct OffloadError {
    /// The interface.
    pub interface: String,
    /// The offload.
    pub flag: EthtoolFlag,
    /// The operating system's error.
    pub source: io::Error,
}

/// Switches off TSO, GSO, GRO, TX checksumming and scatter-gather on `interface` in the calling
/// thread's namespace (wrap in [`crate::netns::run_in`] for another namespace).
pub fn disable(interface: &str) -> Result<(), OffloadError> {
    for flag in OFFLOADS {
        sys::set_ethtool_flag(interface, flag, false).map_err(|source| OffloadError {
            interface: interface.to_owned(),
            flag,
            source,
        })?;
    }
    Ok(())
}
