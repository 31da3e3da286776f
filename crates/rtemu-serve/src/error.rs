//! Errors as the API returns them: a status code and `{"error": TEXT}`, where TEXT is what the
//! command line prints after `rtemu: error: `.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use rtemu_api::body::ErrorBody;
use rtemu_cluster::ClusterError;
use rtemu_control::engine::Refused;
use rtemu_control::error::message;
use rtemu_control::message::ErrorKind;
use rtemu_topo::lab::LabError;
use rtemu_topo::launch::LaunchError;
use rtemu_topo::state::{BadLabName, StateError};
use rtemu_topo::{LoadError, SpecError};

/// A failed request: its status and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// The message.
    pub message: String,
}

impl ApiError {
    /// A 400: the request is wrong (its body, a parameter, a name).
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }

    /// A 404: no such lab, node or link.
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, message)
    }

    /// An error with `status`.
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
        }
    }
}

/// The status an error from the lab libraries deserves, found from the first cause in its chain
/// whose type tells; anything unrecognised is the server's failure (500). The matches name
/// every variant, so a new kind of error is classed where it is added.
fn status_of(err: &(dyn std::error::Error + 'static)) -> StatusCode {
    let mut cause = Some(err);
    while let Some(e) = cause {
        if let Some(e) = e.downcast_ref::<LabError>() {
            return lab_status(e);
        }
        if let Some(e) = e.downcast_ref::<StateError>() {
            return state_status(e);
        }
        if e.is::<BadLabName>() || e.is::<SpecError>() {
            return StatusCode::BAD_REQUEST;
        }
        // The machine's CPUs cannot keep the lab's programs off the engine's.
        if e.is::<rtemu_topo::cpuset::OffEngineError>() {
            return StatusCode::CONFLICT;
        }
        if let Some(e) = e.downcast_ref::<LoadError>() {
            return match e {
                // A file the request names that is not there or not readable.
                LoadError::Read { .. } => StatusCode::BAD_REQUEST,
                LoadError::Invalid(_) => StatusCode::BAD_REQUEST,
            };
        }
        // The engine refused the request (its link, its model, the tables and traces that
        // names), could not take it yet, or failed itself.
        if let Some(e) = e.downcast_ref::<Refused>() {
            return match e.kind {
                ErrorKind::Request => StatusCode::BAD_REQUEST,
                ErrorKind::Busy => StatusCode::CONFLICT,
                ErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            };
        }
        cause = e.source();
    }
    StatusCode::INTERNAL_SERVER_ERROR
}

/// The status of a lab lifecycle error.
fn lab_status(e: &LabError) -> StatusCode {
    match e {
        LabError::Exists(_) => StatusCode::CONFLICT,
        LabError::NoSuchLab(_) | LabError::NoSuchNode { .. } => StatusCode::NOT_FOUND,
        // The node has no output to show.
        LabError::NoLogs(_) => StatusCode::NOT_FOUND,
        LabError::BadName(_) | LabError::BadTarget(_) | LabError::WhichLab(_) => {
            StatusCode::BAD_REQUEST
        }
        // Something on the host is in the way of the lab's names or needs, or the request
        // asks for the host's own uplink.
        LabError::ForeignNamespace(_)
        | LabError::OtherLabsNamespace { .. }
        | LabError::Uplink { .. }
        | LabError::NoHostInterface(_)
        | LabError::CpuLimit(_)
        | LabError::NoCpuset
        | LabError::LeftAlone { .. } => StatusCode::CONFLICT,
        LabError::State(e) => state_status(e),
        LabError::MultiHost { .. } => StatusCode::NOT_IMPLEMENTED,
        // The request's part does not fit its file (a host, VNIs, an MTU).
        LabError::Part(_) => StatusCode::BAD_REQUEST,
        // The part was sent to the wrong machine.
        LabError::NotThisHost { .. } => StatusCode::CONFLICT,
        LabError::Containers(e) => match e {
            // The topology names images the host lacks and may not pull.
            LaunchError::MissingImages(_) => StatusCode::CONFLICT,
            LaunchError::Runtime(_)
            | LaunchError::Pull(_)
            | LaunchError::Start(_)
            | LaunchError::Unhealthy(_) => StatusCode::INTERNAL_SERVER_ERROR,
        },
        LabError::Io { .. } | LabError::Netlink { .. } => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The status of a lab state error.
fn state_status(e: &StateError) -> StatusCode {
    match e {
        StateError::BadName(_) => StatusCode::BAD_REQUEST,
        // A directory under the state root that rtemu did not make, or does not trust, holds
        // the lab's name: the host is in the way.
        StateError::Untrusted { .. }
        | StateError::NoStateFile { .. }
        | StateError::Foreign { .. } => StatusCode::CONFLICT,
        StateError::Io { .. } => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl From<anyhow::Error> for ApiError {
    fn from(err: anyhow::Error) -> ApiError {
        let err: &(dyn std::error::Error + 'static) = err.as_ref();
        ApiError::new(status_of(err), message(err))
    }
}

impl From<LabError> for ApiError {
    fn from(err: LabError) -> ApiError {
        ApiError::new(status_of(&err), message(&err))
    }
}

impl From<StateError> for ApiError {
    fn from(err: StateError) -> ApiError {
        ApiError::new(status_of(&err), message(&err))
    }
}

impl From<BadLabName> for ApiError {
    fn from(err: BadLabName) -> ApiError {
        ApiError::bad_request(err.to_string())
    }
}

/// The status a coordinator's failure deserves: the request's own fault is a 4xx, an agent's
/// refusal for the request (4xx) is relayed as it is, an agent that failed or cannot be
/// reached is a 502 (the server is a gateway to it), none answering a 503, this machine's
/// own failure a 500.
fn cluster_status(e: &ClusterError) -> StatusCode {
    match e {
        ClusterError::Exists { .. } => StatusCode::CONFLICT,
        // The topology names hosts the credentials do not, or places them elsewhere.
        ClusterError::NoCredentials { .. } | ClusterError::Misplaced { .. } => {
            StatusCode::BAD_REQUEST
        }
        ClusterError::NoSuchLink(_) | ClusterError::NoSuchNode { .. } => StatusCode::NOT_FOUND,
        ClusterError::Refused { status, .. } => match StatusCode::from_u16(*status) {
            Ok(s) if s.is_client_error() => s,
            _ => StatusCode::BAD_GATEWAY,
        },
        ClusterError::Unreachable { .. } | ClusterError::Partly(_) => StatusCode::BAD_GATEWAY,
        ClusterError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        ClusterError::Up { cause, .. } => cluster_status(cause),
        ClusterError::Local(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl From<ClusterError> for ApiError {
    fn from(err: ClusterError) -> ApiError {
        ApiError::new(cluster_status(&err), err.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.status,
            axum::Json(ErrorBody {
                error: self.message,
            }),
        )
            .into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtemu_topo::state::LabName;

    #[test]
    fn statuses_follow_the_cause_in_the_chain() {
        let exists = anyhow::Error::new(LabError::Exists("a".into())).context("bringing up a");
        assert_eq!(ApiError::from(exists).status, StatusCode::CONFLICT);
        let missing = ApiError::from(LabError::NoSuchLab("a".into()));
        assert_eq!(missing.status, StatusCode::NOT_FOUND);
        assert_eq!(
            missing.message,
            "no lab `a` is running (`rtemu ls` lists the labs)"
        );
        let spec = rtemu_topo::Topology::parse("<request>", "lab = 1\n").unwrap_err();
        let err = ApiError::from(anyhow::Error::new(spec));
        assert_eq!(err.status, StatusCode::BAD_REQUEST);
        assert!(
            err.message.starts_with("<request>:1:7: "),
            "{}",
            err.message
        );
        let multi = ApiError::from(LabError::MultiHost {
            lab: "m".into(),
            hosts: "h1, h2".into(),
        });
        assert_eq!(multi.status, StatusCode::NOT_IMPLEMENTED);
        let uplink = ApiError::from(LabError::Uplink {
            host: "eth0".into(),
            why: "the default route".into(),
        });
        assert_eq!(uplink.status, StatusCode::CONFLICT);
        let refused = |kind| {
            let refused = Refused {
                kind,
                message: "table /x cannot be read".into(),
            };
            ApiError::from(anyhow::Error::new(refused).context("link `ab`"))
        };
        assert_eq!(refused(ErrorKind::Request).status, StatusCode::BAD_REQUEST);
        assert_eq!(refused(ErrorKind::Busy).status, StatusCode::CONFLICT);
        let internal = refused(ErrorKind::Internal);
        assert_eq!(internal.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(internal.message, "link `ab`: table /x cannot be read");
        let agent = |status| ClusterError::Refused {
            host: "h2".into(),
            agent: "192.0.2.2:7781".parse().unwrap(),
            status,
            message: "no".into(),
        };
        assert_eq!(ApiError::from(agent(400)).status, StatusCode::BAD_REQUEST);
        assert_eq!(ApiError::from(agent(500)).status, StatusCode::BAD_GATEWAY);
        let failed_up = ClusterError::Up {
            lab: LabName::new("m").unwrap(),
            undone: "no part had been built".into(),
            cause: Box::new(agent(409)),
        };
        assert_eq!(ApiError::from(failed_up).status, StatusCode::CONFLICT);
        let gone = ClusterError::Unreachable {
            host: "h1".into(),
            agent: "192.0.2.1:7781".parse().unwrap(),
            why: "Connection refused".into(),
        };
        assert_eq!(ApiError::from(gone).status, StatusCode::BAD_GATEWAY);
        let unknown = ClusterError::NoCredentials {
            file: "hosts.toml".into(),
            hosts: "h3".into(),
        };
        assert_eq!(ApiError::from(unknown).status, StatusCode::BAD_REQUEST);
        let other = ApiError::from(anyhow::anyhow!("the engine fell over"));
        assert_eq!(other.status, StatusCode::INTERNAL_SERVER_ERROR);
    }
}
