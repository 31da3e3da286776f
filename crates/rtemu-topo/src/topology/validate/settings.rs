//! The lab-wide settings: how routes are installed, how neighbours are resolved, which address
//! families the pools give, where the nodes' programs run, and whether static routes stay
//! within what a lab may install.

use super::{Families, Validator};
use crate::error::SpecError;
use crate::spec::FileSpec;
use crate::topology::{NeighbourMode, Node, ProgramsCpus, Routing, Segment, MAX_STATIC_ROUTES};

impl Validator<'_> {
    /// `routing`: `static` unless the file says otherwise.
    pub(super) fn routing(&self, spec: &FileSpec) -> Result<Routing, SpecError> {
        Ok(
            match spec
                .routing
                .as_ref()
                .map(|r| (r.get_ref().as_str(), r.span()))
            {
                None | Some(("static", _)) => Routing::Static,
                Some(("aggregate", _)) => Routing::Aggregate,
                Some(("none", _)) => Routing::None,
                Some((other, span)) => {
                    let allowed = "\"static\", \"aggregate\" and \"none\"";
                    let message = format!("unknown routing `{other}`: allowed are {allowed}");
                    return Err(self.err(span, message));
                }
            },
        )
    }

    /// `neighbours`: `dynamic` unless the file says otherwise.
    pub(super) fn neighbours(&self, spec: &FileSpec) -> Result<NeighbourMode, SpecError> {
        Ok(
            match spec
                .neighbours
                .as_ref()
                .map(|r| (r.get_ref().as_str(), r.span()))
            {
                None | Some(("dynamic", _)) => NeighbourMode::Dynamic,
                Some(("static", _)) => NeighbourMode::Static,
                Some((other, span)) => {
                    return Err(self.err(
                        span,
                        format!(
                            "unknown neighbours `{other}`: allowed are \"static\" and \"dynamic\""
                        ),
                    ))
                }
            },
        )
    }

    /// `programs_cpus`: `all` unless the file says otherwise.
    pub(super) fn programs_cpus(&self, spec: &FileSpec) -> Result<ProgramsCpus, SpecError> {
        spec.programs_cpus
            .as_ref()
            .map_or(Ok(ProgramsCpus::All), |p| {
                p.get_ref().parse().map_err(|e| self.err(p.span(), e))
            })
    }

    /// `ip`: both families unless the file says otherwise.
    pub(super) fn families(&self, spec: &FileSpec) -> Result<Families, SpecError> {
        Ok(
            match spec.ip.as_ref().map(|r| (r.get_ref().as_str(), r.span())) {
                None | Some(("dual", _)) => Families { v4: true, v6: true },
                Some(("ipv4", _)) => Families {
                    v4: true,
                    v6: false,
                },
                Some(("ipv6", _)) => Families {
                    v4: false,
                    v6: true,
                },
                Some((other, span)) => {
                    return Err(self.err(
                        span,
                        format!(
                            "unknown ip `{other}`: allowed are \"dual\", \"ipv4\" and \"ipv6\""
                        ),
                    ))
                }
            },
        )
    }

    /// With `routing = "static"`, the routes every node would install stay within
    /// [`MAX_STATIC_ROUTES`].
    pub(super) fn route_budget(
        &self,
        spec: &FileSpec,
        nodes: &[Node],
        segments: &[Segment],
    ) -> Result<(), SpecError> {
        let destinations: usize = segments
            .iter()
            .map(|s| usize::from(s.ipv4.is_some()) + usize::from(s.ipv6.is_some()))
            .chain(nodes.iter().map(|n| n.loopback.len()))
            .sum();
        let routes = destinations.saturating_mul(nodes.len());
        if routes > MAX_STATIC_ROUTES {
            let span = spec.routing.as_ref().map_or(spec.lab.span(), |r| r.span());
            return Err(self.err(
                span,
                format!(
                    "routing = \"static\" would install about {routes} routes ({} nodes × \
                     {destinations} destinations; at most {MAX_STATIC_ROUTES}): set routing = \
                     \"aggregate\" (the same paths in a few routes per node) or \"none\"",
                    nodes.len()
                ),
            ));
        }
        Ok(())
    }
}
