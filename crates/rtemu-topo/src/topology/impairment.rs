//! An impaired link's parameters: netem text with the configuration it reads as, a trace, and
//! the changes scheduled over time.

use rtemu_model::config::ConfigError;
use rtemu_model::direction::Ways;
use rtemu_model::netem::NetemError;
use rtemu_model::LinkConfig;

use super::record::ImpairmentRecord;

/// One direction's netem parameters: the text as the file (or a program) gave it, kept for
/// people to read (`ls --json`, link views), and the configuration it reads as, parsed and
/// validated once, which the engine builds its models from.
#[derive(Debug, Clone, PartialEq)]
pub struct Netem {
    pub(super) text: String,
    /// Boxed: a segment holds up to three, and most segments none.
    pub(super) config: Box<LinkConfig>,
}

impl Netem {
    /// Reads netem parameters (checked by [`LinkConfig::validate`]).
    pub fn parse(text: &str) -> Result<Netem, NetemError> {
        Ok(Netem {
            config: Box::new(rtemu_model::netem::parse(text)?),
            text: text.to_owned(),
        })
    }

    /// A configuration made by a program, checked by [`LinkConfig::validate`]; its text is
    /// the configuration in netem syntax.
    pub fn from_config(config: LinkConfig) -> Result<Netem, ConfigError> {
        config.validate()?;
        Ok(Netem {
            text: config.to_string(),
            config: Box::new(config),
        })
    }

    /// The parameters as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The configuration they read as.
    pub fn config(&self) -> &LinkConfig {
        &self.config
    }
}

/// Link parameters that need the real-time engine.
///
/// In a state file (and `ls --json`) each netem value keeps its text under its own name
/// (`netem`, `netem_ab`, `netem_ba`, a schedule entry's `netem`) with the configuration beside
/// it (`netem_config`, …); reading one back validates every configuration.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(into = "ImpairmentRecord", try_from = "ImpairmentRecord")]
pub struct Impairment {
    /// netem-style parameters of both directions.
    pub netem: Option<Netem>,
    /// netem-style parameters from the first endpoint to the second, instead of `netem`.
    pub netem_ab: Option<Netem>,
    /// netem-style parameters from the second endpoint to the first, instead of `netem`.
    pub netem_ba: Option<Netem>,
    /// A trace file.
    pub trace: Option<String>,
    /// Whether address resolution goes through the model too (default: it passes with the
    /// base delay and is never lost).
    pub resolution_modelled: bool,
    /// Parameter changes, in time order.
    pub schedule: Vec<Change>,
}

impl Impairment {
    /// The netem parameters of one direction (`false`: first endpoint to second).
    pub fn netem_for(&self, backwards: bool) -> Option<&Netem> {
        let own = if backwards {
            &self.netem_ba
        } else {
            &self.netem_ab
        };
        own.as_ref().or(self.netem.as_ref())
    }

    /// The configuration of one direction (`false`: first endpoint to second); an ideal link's
    /// when it has no netem parameters (a trace alone decides).
    pub fn config_for(&self, backwards: bool) -> LinkConfig {
        self.netem_for(backwards)
            .map(|n| n.config().clone())
            .unwrap_or_default()
    }
}

/// A scheduled change of a link's parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// When, ns after the engine starts.
    pub at_ns: u64,
    /// Which directions.
    pub ways: Ways,
    /// The new netem parameters.
    pub netem: Netem,
}
