//! A link's impairment: its netem parameters (pointing at the word at fault), trace,
//! resolution and schedule.

use std::ops::Range;

use toml::Spanned;

use super::{ImpairmentAt, Validator};
use crate::error::SpecError;
use rtemu_model::direction::Ways;

use crate::topology::{Change, Impairment, Netem};

impl Validator<'_> {
    /// A link's impairment, checked, with the span of each schedule entry's `netem` in its
    /// schedule's order; `None` for an ideal link.
    pub(super) fn impairment(
        &self,
        link: &crate::spec::LinkSpec,
    ) -> Result<Option<ImpairmentAt>, SpecError> {
        let text = |s: &Option<Spanned<String>>| -> Result<Option<Netem>, SpecError> {
            s.as_ref().map(|t| self.netem(t)).transpose()
        };
        let resolution_modelled = match &link.resolution {
            None => false,
            Some(r) => match r.get_ref().as_str() {
                "pass" => false,
                "model" => true,
                other => {
                    return Err(self.err(
                        r.span(),
                        format!("resolution `{other}`: use \"pass\" or \"model\""),
                    ))
                }
            },
        };
        let mut schedule = Vec::new();
        for c in &link.schedule {
            let at = rtemu_model::units::Time::parse(c.at.get_ref())
                .map_err(|e| self.err(c.at.span(), format!("schedule `at`: {e}")))?;
            let change = Change {
                at_ns: at.0,
                ways: self.ways(c)?,
                netem: self.netem(&c.netem)?,
            };
            schedule.push((change, c.netem.span()));
        }
        // In time order; changes at the same time keep the file's order.
        schedule.sort_by_key(|(c, _)| c.at_ns);
        let (schedule, spans): (Vec<Change>, Vec<Range<usize>>) = schedule.into_iter().unzip();
        let imp = Impairment {
            netem: text(&link.netem)?,
            netem_ab: text(&link.netem_ab)?,
            netem_ba: text(&link.netem_ba)?,
            trace: link.trace.as_ref().map(|s| s.get_ref().clone()),
            resolution_modelled,
            schedule,
        };
        let ideal = imp.netem.is_none()
            && imp.netem_ab.is_none()
            && imp.netem_ba.is_none()
            && imp.trace.is_none()
            && imp.schedule.is_empty();
        if ideal {
            if let Some(r) = &link.resolution {
                return Err(self.err(
                    r.span(),
                    "`resolution` applies to impaired links only: give `netem` or `trace` too",
                ));
            }
        }
        Ok((!ideal).then_some((imp, spans)))
    }

    /// The directions a schedule entry applies to.
    pub(super) fn ways(&self, c: &crate::spec::ChangeSpec) -> Result<Ways, SpecError> {
        let Some(dir) = &c.dir else {
            return Ok(Ways::Both);
        };
        Ways::parse(dir.get_ref()).ok_or_else(|| {
            self.err(
                dir.span(),
                format!("dir `{}`: use \"a-b\", \"b-a\" or \"both\"", dir.get_ref()),
            )
        })
    }

    /// Reads a link's netem parameters, pointing at the offending word inside the string.
    pub(super) fn netem(&self, text: &Spanned<String>) -> Result<Netem, SpecError> {
        Netem::parse(text.get_ref()).map_err(|e| {
            // The string's text starts after its opening quote.
            let at = text.span().start + e.column;
            self.err(at..at, format!("netem: {e}"))
        })
    }
}
