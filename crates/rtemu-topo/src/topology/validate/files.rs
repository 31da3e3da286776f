//! What only the files a topology names show, checked once the rest passed: each impaired
//! link's model built (its tables loaded, its trace opened) and each bind's host path.

use std::ops::Range;

use rtemu_model::direction::Way;

use super::{ImpairedLink, Validator};
use crate::error::SpecError;
use crate::topology::load::resolve_trace;
use crate::topology::{Culprit, LinkCheck, LinkCheckError, Topology};

impl Validator<'_> {
    /// Makes every bind's host path absolute, relative to the topology file's directory `dir`
    /// as a user reads it; with `exist`, one that names nothing fails here, at its value,
    /// rather than when its container starts.
    pub(in crate::topology) fn resolve_binds(
        &self,
        topo: &mut Topology,
        dir: &std::path::Path,
        exist: bool,
    ) -> Result<(), SpecError> {
        for (ni, bi, span) in &self.binds {
            let Some(c) = &mut topo.nodes[*ni].container else {
                continue;
            };
            let bind = &mut c.binds[*bi];
            bind.host = resolve_trace(dir, &bind.host);
            if exist {
                if let Err(e) = std::fs::symlink_metadata(&bind.host) {
                    return Err(
                        self.err(span.clone(), format!("bind: host path {}: {e}", bind.host))
                    );
                }
            }
        }
        Ok(())
    }

    /// Builds both directions of every impaired link, and each scheduled change, with
    /// `check`; an error points at the value at fault.
    pub(in crate::topology) fn check_links(
        &self,
        check: &dyn LinkCheck,
        dir: &std::path::Path,
    ) -> Result<(), SpecError> {
        for link in &self.impaired {
            let mut imp = link.imp.clone();
            if let Some(trace) = &mut imp.trace {
                *trace = resolve_trace(dir, trace);
            }
            for way in [Way::AToB, Way::BToA] {
                let backwards = way == Way::BToA;
                let own = &link.netem[if backwards { 2 } else { 1 }];
                let netem = own.as_ref().or(link.netem[0].as_ref());
                check
                    .direction(&link.name, &imp, None, backwards)
                    .map_err(|e| self.link_error(link, netem, e))?;
                for (change, span) in link.imp.schedule.iter().zip(&link.schedule) {
                    if change.ways.includes(way) {
                        check
                            .direction(&link.name, &imp, Some(change.netem.config()), backwards)
                            .map_err(|e| self.link_error(link, Some(span), e))?;
                    }
                }
            }
        }
        Ok(())
    }

    /// A failed check, at the value it is about: inside a netem string, at its
    /// `distribution` or `tables` word when it has one (the tables are what building adds
    /// to parsing); the trace's value; else the link's endpoints.
    pub(super) fn link_error(
        &self,
        link: &ImpairedLink,
        netem: Option<&Range<usize>>,
        e: LinkCheckError,
    ) -> SpecError {
        let (what, at) = match (e.culprit, netem, &link.trace) {
            (Culprit::Netem, Some(span), _) => {
                let text = self.source.get(span.clone()).unwrap_or("");
                let word = text.find("distribution").or_else(|| text.find("tables"));
                ("netem", span.start + word.unwrap_or(1))
            }
            (_, _, Some(span)) => ("trace", span.start + 1),
            _ => ("link", link.endpoints.start),
        };
        self.err(at..at, format!("{what}: {}", e.message))
    }
}
