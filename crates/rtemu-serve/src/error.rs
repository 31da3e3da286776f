//! Errors as the API returns them: a status code and `{"error": TEXT}`, where TEXT is what the
//! command line prints after `rtemu: error: `.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use rtemu_api::body::ErrorBody;
use rtemu_cluster::ClusterError;
use rtemu_control::error::{message, ControlError, Kind};
use rtemu_topo::lab::LabError;
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

impl From<ControlError> for ApiError {
    /// The status says whose fault the error is.
    fn from(err: ControlError) -> ApiError {
        let status = match err.kind() {
            Kind::Invalid => StatusCode::BAD_REQUEST,
            Kind::NotFound => StatusCode::NOT_FOUND,
            Kind::Conflict | Kind::Busy => StatusCode::CONFLICT,
            Kind::Unsupported => StatusCode::NOT_IMPLEMENTED,
            Kind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError::new(status, message(&err))
    }
}

/// The errors of the lab libraries the handlers meet outside `rtemu-control`'s calls (a lab
/// name, a topology, a lab's state), answered as `rtemu-control` classes them.
macro_rules! as_control_error {
    ($($cause:ty),+) => {$(
        impl From<$cause> for ApiError {
            fn from(err: $cause) -> ApiError {
                ControlError::from(err).into()
            }
        }
    )+};
}

as_control_error!(LabError, StateError, BadLabName, LoadError, SpecError);

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
    use rtemu_control::engine::Refused;
    use rtemu_control::message::ErrorKind;
    use rtemu_topo::state::LabName;

    #[test]
    fn every_kind_of_control_error_reaches_its_status() {
        for (err, status) in [
            (
                ControlError::from(BadLabName("A".into())),
                StatusCode::BAD_REQUEST,
            ),
            (
                LabError::NoSuchLab("a".into()).into(),
                StatusCode::NOT_FOUND,
            ),
            (LabError::Exists("a".into()).into(), StatusCode::CONFLICT),
            (
                LabError::MultiHost {
                    lab: "m".into(),
                    hosts: "h1, h2".into(),
                }
                .into(),
                StatusCode::NOT_IMPLEMENTED,
            ),
            (
                ControlError::EngineSilent(10),
                StatusCode::INTERNAL_SERVER_ERROR,
            ),
        ] {
            assert_eq!(ApiError::from(err).status, status);
        }
        let missing = ApiError::from(LabError::NoSuchLab("a".into()));
        assert_eq!(
            missing.message,
            "no lab `a` is running (`rtemu ls` lists the labs)"
        );
        let exists = ControlError::from(LabError::Exists("a".into())).context("bringing up a");
        assert_eq!(ApiError::from(exists).status, StatusCode::CONFLICT);
        let spec = rtemu_topo::Topology::parse("<request>", "lab = 1\n").unwrap_err();
        let err = ApiError::from(spec);
        assert_eq!(err.status, StatusCode::BAD_REQUEST);
        assert!(
            err.message.starts_with("<request>:1:7: "),
            "{}",
            err.message
        );
        let uplink = ApiError::from(LabError::Uplink {
            host: "eth0".into(),
            why: "the default route".into(),
        });
        assert_eq!(uplink.status, StatusCode::CONFLICT);
        // An engine's refusal, under what rtemu was doing, answered by whose fault it is.
        let refused = |kind| {
            let refused = Refused {
                kind,
                message: "table /x cannot be read".into(),
            };
            ApiError::from(ControlError::from(refused).context("link `ab`"))
        };
        assert_eq!(refused(ErrorKind::Request).status, StatusCode::BAD_REQUEST);
        assert_eq!(refused(ErrorKind::Busy).status, StatusCode::CONFLICT);
        let internal = refused(ErrorKind::Internal);
        assert_eq!(internal.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(internal.message, "link `ab`: table /x cannot be read");
    }

    #[test]
    fn a_coordinator_s_failure_is_answered_as_the_agent_s_or_as_the_gateway_s() {
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
        let local = ClusterError::from(anyhow::anyhow!("the record fell over"));
        assert_eq!(
            ApiError::from(local).status,
            StatusCode::INTERNAL_SERVER_ERROR
        );
    }
}
