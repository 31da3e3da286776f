//! An [`Impairment`] as a state file holds it: each netem value's text with its configuration
//! beside it, every configuration validated again when read back.

use rtemu_model::direction::Ways;
use rtemu_model::LinkConfig;

use super::impairment::{Change, Impairment, Netem};

/// An [`Impairment`] as a state file holds it.
#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct ImpairmentRecord {
    netem: Option<String>,
    #[serde(default)]
    netem_ab: Option<String>,
    #[serde(default)]
    netem_ba: Option<String>,
    trace: Option<String>,
    #[serde(default)]
    resolution_modelled: bool,
    #[serde(default)]
    schedule: Vec<ChangeRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    netem_config: Option<LinkConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    netem_ab_config: Option<LinkConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    netem_ba_config: Option<LinkConfig>,
}

/// A [`Change`] as a state file holds it.
#[derive(serde::Serialize, serde::Deserialize)]
struct ChangeRecord {
    at_ns: u64,
    ways: Ways,
    netem: String,
    #[serde(default)]
    config: Option<LinkConfig>,
}

/// A netem value's text and configuration, apart.
fn split(netem: Option<Netem>) -> (Option<String>, Option<LinkConfig>) {
    netem.map_or((None, None), |n| (Some(n.text), Some(*n.config)))
}

impl From<Impairment> for ImpairmentRecord {
    fn from(imp: Impairment) -> Self {
        let (netem, netem_config) = split(imp.netem);
        let (netem_ab, netem_ab_config) = split(imp.netem_ab);
        let (netem_ba, netem_ba_config) = split(imp.netem_ba);
        ImpairmentRecord {
            netem,
            netem_ab,
            netem_ba,
            trace: imp.trace,
            resolution_modelled: imp.resolution_modelled,
            schedule: imp
                .schedule
                .into_iter()
                .map(|c| ChangeRecord {
                    at_ns: c.at_ns,
                    ways: c.ways,
                    netem: c.netem.text,
                    config: Some(*c.netem.config),
                })
                .collect(),
            netem_config,
            netem_ab_config,
            netem_ba_config,
        }
    }
}

impl TryFrom<ImpairmentRecord> for Impairment {
    type Error = String;

    fn try_from(r: ImpairmentRecord) -> Result<Self, String> {
        let join = |text: Option<String>, config: Option<LinkConfig>, what: &str| match text {
            Some(text) => Netem::from_record(text, config).map(Some),
            None if config.is_some() => Err(format!("{what}_config without its {what}")),
            None => Ok(None),
        };
        Ok(Impairment {
            netem: join(r.netem, r.netem_config, "netem")?,
            netem_ab: join(r.netem_ab, r.netem_ab_config, "netem_ab")?,
            netem_ba: join(r.netem_ba, r.netem_ba_config, "netem_ba")?,
            trace: r.trace,
            resolution_modelled: r.resolution_modelled,
            schedule: r
                .schedule
                .into_iter()
                .map(|c| {
                    Ok(Change {
                        at_ns: c.at_ns,
                        ways: c.ways,
                        netem: Netem::from_record(c.netem, c.config)?,
                    })
                })
                .collect::<Result<_, String>>()?,
        })
    }
}

impl Netem {
    /// A configuration read back from a record with its text, as a state file holds it: it
    /// was validated when first parsed, but the file may have been changed since, so it is
    /// validated again.
    fn from_record(text: String, config: Option<LinkConfig>) -> Result<Netem, String> {
        match config {
            Some(config) => match config.validate() {
                Ok(()) => Ok(Netem {
                    text,
                    config: Box::new(config),
                }),
                Err(e) => Err(format!(
                    "netem {}: its configuration is invalid: {e}",
                    rtemu_sys::terminal::quoted(&text)
                )),
            },
            // A record written before configurations were stored: its text is all there is.
            None => Netem::parse(&text)
                .map_err(|e| format!("netem {}: {e}", rtemu_sys::terminal::quoted(&text))),
        }
    }
}
