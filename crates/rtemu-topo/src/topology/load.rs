//! Reading a topology file, and building each impaired link's model to find what only
//! building shows, at the value at fault.

use rtemu_model::LinkConfig;

use super::impairment::Impairment;
use super::model::{SegmentKind, Topology};
use super::MAX_TOPOLOGY_BYTES;
use crate::error::{LoadError, SpecError};

impl Topology {
    /// Reads and validates the topology file at `path`.
    pub fn load(path: &std::path::Path) -> Result<Topology, LoadError> {
        Topology::load_with(path, None)
    }

    /// Reads and validates the topology file at `path`, and builds every impaired link
    /// direction's model with `check` (its tables loaded, its trace opened), its scheduled
    /// changes included, so what only building shows fails here, with the file, line and
    /// column of the `netem` or `trace` value at fault. Needs no root.
    pub fn load_checked(
        path: &std::path::Path,
        check: &dyn LinkCheck,
    ) -> Result<Topology, LoadError> {
        Topology::load_with(path, Some(check))
    }

    fn load_with(
        path: &std::path::Path,
        check: Option<&dyn LinkCheck>,
    ) -> Result<Topology, LoadError> {
        // A FIFO or device named as the topology is refused, not waited on or read for ever.
        let source =
            rtemu_sys::input::read_small_file(path, MAX_TOPOLOGY_BYTES).map_err(|source| {
                LoadError::Read {
                    path: path.display().to_string(),
                    source,
                }
            })?;
        let file = path.display().to_string();
        // Trace files are named relative to the topology file, as a user reads it.
        let dir = path.parent().unwrap_or(std::path::Path::new(""));
        Ok(Topology::parse_with(&file, &source, dir, check)?)
    }

    /// Validates `source`, the text of the file named `file` (used in error messages), and
    /// builds every impaired link direction's model with `check` as [`Topology::load_checked`]
    /// does, trace files named relative to `dir`: for a topology that arrives as text.
    pub fn parse_checked(
        file: &str,
        source: &str,
        dir: &std::path::Path,
        check: &dyn LinkCheck,
    ) -> Result<Topology, SpecError> {
        Topology::parse_with(file, source, dir, Some(check))
    }

    fn parse_with(
        file: &str,
        source: &str,
        dir: &std::path::Path,
        check: Option<&dyn LinkCheck>,
    ) -> Result<Topology, SpecError> {
        let (mut topo, validator) = Topology::validate(file, source)?;
        if let Some(check) = check {
            validator.check_links(check, dir)?;
        }
        validator.resolve_binds(&mut topo, dir, check.is_some())?;
        for seg in &mut topo.segments {
            if let SegmentKind::Link {
                impairment:
                    Some(Impairment {
                        trace: Some(trace), ..
                    }),
            } = &mut seg.kind
            {
                *trace = resolve_trace(dir, trace);
            }
        }
        Ok(topo)
    }

    /// Validates `source`, the text of the file named `file` (used in error messages).
    pub fn parse(file: &str, source: &str) -> Result<Topology, SpecError> {
        Topology::validate(file, source).map(|(topo, _)| topo)
    }
}

/// Which value of an impaired link a failed [`LinkCheck`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Culprit {
    /// The netem parameters (a distribution table, for instance).
    Netem,
    /// The trace file.
    Trace,
}

/// Why a link direction's model cannot be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkCheckError {
    /// Which value is at fault.
    pub culprit: Culprit,
    /// What is wrong (without the file's name and position, which the loader adds).
    pub message: String,
}

/// Builds what each impaired link direction names, to find before anything is created what
/// only building it shows: a distribution table that is missing or malformed, a trace that
/// cannot be opened or read. Models are assembled above this crate, so the caller supplies
/// the check ([`Topology::load_checked`]).
pub trait LinkCheck {
    /// Builds the model of one direction of link `link` (`backwards`: from its second
    /// endpoint to its first) from `imp`, whose trace path is resolved, with `netem` instead
    /// of the direction's own configuration when given (a scheduled change).
    fn direction(
        &self,
        link: &str,
        imp: &Impairment,
        netem: Option<&LinkConfig>,
        backwards: bool,
    ) -> Result<(), LinkCheckError>;
}

/// A trace path as the user reads it: relative to the topology file's directory.
pub(super) fn resolve_trace(dir: &std::path::Path, trace: &str) -> String {
    let full = dir.join(trace);
    std::path::absolute(&full)
        .unwrap_or(full)
        .display()
        .to_string()
}
