//! What can go wrong when coordinating a lab across hosts, typed so that a face (the server's
//! routes) chooses its answer by the kind of failure, not by reading messages: the request's
//! own fault, an agent that refused, one that could not be reached, or this machine.

use std::net::SocketAddr;

use rtemu_topo::state::LabName;

/// A failure of the coordinator. Its text is what the command line prints after
/// `rtemu: error: `; it never holds an agent's token.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The lab is already up across hosts, coordinated from here.
    #[error(
        "lab `{lab}` is already up on {hosts} (coordinated from here): `rtemu down {lab}` first"
    )]
    Exists {
        /// The lab.
        lab: LabName,
        /// Its hosts, as a list for the message.
        hosts: String,
    },
    /// The credentials file has no entry for hosts the topology names.
    #[error("{} has no credentials for host {hosts}", file.display())]
    NoCredentials {
        /// The credentials file.
        file: std::path::PathBuf,
        /// The hosts without an entry, as a list for the message.
        hosts: String,
    },
    /// The topology places a host's agent elsewhere than the credentials bind it to: its
    /// token is not sent there.
    #[error(
        "host `{host}`: the topology places its agent at {named}, but {} binds it to {bound}: \
         its token is sent nowhere else (correct the topology's [hosts] or the credentials)",
        file.display()
    )]
    Misplaced {
        /// The host.
        host: String,
        /// Where the topology places its agent.
        named: SocketAddr,
        /// The credentials file.
        file: std::path::PathBuf,
        /// Where the credentials bind it.
        bound: SocketAddr,
    },
    /// No engine of the lab carries the link (none of that name, or an ideal one).
    #[error("the engine carries no link `{0}`")]
    NoSuchLink(String),
    /// No node of that name in the lab.
    #[error("lab `{lab}` has no node `{node}`")]
    NoSuchNode {
        /// The lab.
        lab: LabName,
        /// The node asked for.
        node: String,
    },
    /// An agent answered with an error status.
    #[error("host `{host}`: {message} (HTTP {status} from its agent at {agent})")]
    Refused {
        /// The agent's host.
        host: String,
        /// Where it listens.
        agent: SocketAddr,
        /// Its HTTP status.
        status: u16,
        /// Its reason.
        message: String,
    },
    /// An agent could not be reached, did not show its pinned certificate, or gave a reply
    /// that is not the API's.
    #[error("host `{host}`: its agent at {agent}: {why}")]
    Unreachable {
        /// The agent's host.
        host: String,
        /// Where it listens.
        agent: SocketAddr,
        /// Why, the whole chain.
        why: String,
    },
    /// Bringing a lab up failed on a host; what was built before was undone as `undone` says.
    #[error("bringing up lab `{lab}`: {undone}: {cause}")]
    Up {
        /// The lab.
        lab: LabName,
        /// What became of the parts built before the failure.
        undone: String,
        /// The host's failure.
        cause: Box<ClusterError>,
    },
    /// No host could give what was asked (each named, with why).
    #[error("{0}")]
    Unavailable(String),
    /// Some hosts did what was asked and others could not (each named, with why).
    #[error("{0}")]
    Partly(String),
    /// This machine failed: its record of the lab, the credentials file, a topology file.
    #[error("{0:#}")]
    Local(anyhow::Error),
}

impl From<anyhow::Error> for ClusterError {
    fn from(e: anyhow::Error) -> ClusterError {
        ClusterError::Local(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_up_says_what_was_undone_and_the_hosts_failure() {
        let e = ClusterError::Up {
            lab: LabName::new("sp").unwrap(),
            undone: "the parts built on h1 were taken down".into(),
            cause: Box::new(ClusterError::Refused {
                host: "h2".into(),
                agent: "192.0.2.2:7781".parse().unwrap(),
                status: 409,
                message: "lab `sp` exists".into(),
            }),
        };
        assert_eq!(
            e.to_string(),
            "bringing up lab `sp`: the parts built on h1 were taken down: host `h2`: lab `sp` \
             exists (HTTP 409 from its agent at 192.0.2.2:7781)"
        );
        let local = ClusterError::from(anyhow::anyhow!("inner").context("reading hosts.toml"));
        assert_eq!(local.to_string(), "reading hosts.toml: inner");
    }
}
