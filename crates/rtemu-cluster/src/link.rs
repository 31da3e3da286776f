//! `rtemu link set|down|up` of a lab across hosts: a change of an impaired link goes to the
//! agent of the host whose engine carries it.

use std::time::Duration;

use rtemu_api::body::{ScheduleRequest, SetRequest};
use rtemu_control::message::Ack;
use rtemu_model::direction::Ways;
use rtemu_topo::topology::Netem;

use crate::spread::Spread;
use crate::ClusterError;

/// How long the engine host's agent may take to have the change acknowledged.
const CHANGE_TIMEOUT: Duration = Duration::from_secs(10);

/// A change of an impaired link.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// New netem parameters in the directions `dir`.
    Set {
        /// Which directions.
        dir: Ways,
        /// The parameters.
        netem: Netem,
    },
    /// Cut (`true`) or joined again.
    Cut(bool),
}

/// Has the engine host of `link` of `spread` make `change`; a link that no engine carries is
/// refused as the engine of a lab on one machine refuses it.
pub fn change(spread: &Spread, link: &str, change: &Change) -> Result<(), ClusterError> {
    let (action, body) = match change {
        Change::Set { dir, netem } => {
            let req = SetRequest {
                netem: netem.text().to_owned(),
                dir: *dir,
            };
            (
                "set",
                Some(serde_json::to_vec(&req).map_err(anyhow::Error::from)?),
            )
        }
        Change::Cut(true) => ("down", None),
        Change::Cut(false) => ("up", None),
    };
    send(spread, link, action, body)
}

/// Has the engine host of `link` of `spread` queue the changes of `req`, each at its time
/// after the agent gets the request (the coordinator's hop to it comes first).
pub fn schedule(spread: &Spread, link: &str, req: &ScheduleRequest) -> Result<(), ClusterError> {
    let body = serde_json::to_vec(req).map_err(anyhow::Error::from)?;
    send(spread, link, "schedule", Some(body))
}

/// Posts `body` to `action` of `link` on the agent of the host whose engine carries it.
fn send(
    spread: &Spread,
    link: &str,
    action: &str,
    body: Option<Vec<u8>>,
) -> Result<(), ClusterError> {
    let host = spread
        .topology()
        .segments
        .iter()
        .find(|s| s.name == link && s.impairment().is_some())
        .and_then(|s| s.engine_host.as_deref())
        .ok_or_else(|| ClusterError::NoSuchLink(link.to_owned()))?;
    let agent = spread.agent(host)?;
    let path = format!("/v1/labs/{}/links/{link}/{action}", spread.lab);
    agent
        .call::<Ack>("POST", &path, body.as_deref(), CHANGE_TIMEOUT)
        .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Credentials, Recorded};
    use rtemu_topo::state::LabName;
    use rtemu_topo::Topology;

    #[test]
    fn a_link_no_engine_carries_is_refused_in_the_engines_words_before_any_agent_is_asked() {
        let text = rtemu_testutil::multihost::chain("sp", Some("delay 10ms"), None);
        let spread = Spread {
            lab: LabName::new("sp").unwrap(),
            recorded: Recorded {
                file: "sp.toml".into(),
                topology: Topology::parse("sp.toml", &text).unwrap(),
            },
            // No credentials: asking any agent would fail otherwise.
            credentials: Credentials::parse(std::path::Path::new("h.toml"), "").unwrap(),
        };
        // The chain's ideal a–b link, and no link at all.
        let ideal = spread.topology().segments[0].name.clone();
        assert!(spread.topology().segments[0].impairment().is_none());
        for link in ["nope", ideal.as_str()] {
            let e = change(&spread, link, &Change::Cut(true)).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("the engine carries no link `{link}`")
            );
        }
        let e = change(&spread, "wan", &Change::Cut(true)).unwrap_err();
        assert!(
            e.to_string().ends_with("has no credentials for host h1"),
            "{e}"
        );
    }
}
