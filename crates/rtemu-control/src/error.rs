//! What the control plane's calls fail with and how an error reads to a person: [`ControlError`]
//! carries the typed cause (and what rtemu was doing) and says whose fault it is ([`Kind`]),
//! which the HTTP API answers with a status; [`message`] is the one rule the command line
//! prints errors by and the API answers with, so both say the same thing; and the one error not
//! worth reading.

use std::io;
use std::process::ExitStatus;

use rtemu_engine::netns::NetnsError;
use rtemu_engine::offload::OffloadError;
use rtemu_topo::cpuset::{CpusetError, OffEngineError};
use rtemu_topo::lab::LabError;
use rtemu_topo::launch::LaunchError;
use rtemu_topo::state::{BadLabName, LabName, StateError};
use rtemu_topo::{LoadError, SpecError};

use crate::engine::Refused;

/// Why a call of the control plane failed: its typed cause, or what rtemu was doing around it
/// ([`ControlError::Context`]). Its `Display` and sources read as the anyhow chains they
/// replace, so [`message`] prints the same line.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// A lab's life: up, down, its names, its host, its containers.
    #[error(transparent)]
    Lab(#[from] LabError),
    /// A lab's state directory or file.
    #[error(transparent)]
    State(#[from] StateError),
    /// A name that is not a lab name.
    #[error(transparent)]
    BadName(#[from] BadLabName),
    /// A topology file that cannot be read, or is not a valid topology.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A topology that is not valid.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// The machine's CPUs cannot keep the lab's programs off the engine's.
    #[error(transparent)]
    OffEngine(#[from] OffEngineError),
    /// The engine answered the request with an error, of its own kind.
    #[error(transparent)]
    Refused(#[from] Refused),
    /// The lab has no impaired links here, hence no engine and no stats.
    #[error(
        "lab `{0}` has no impaired links: ideal links are plain veth pairs, counted by the \
         kernel (`rtemu exec NODE -- ip -s link`)"
    )]
    NoEngine(LabName),
    /// A scheduled change is further ahead than the engine counts (`u64` nanoseconds).
    #[error("schedule: give a delay under 584 years")]
    TooFar(#[source] std::num::TryFromIntError),
    /// The lab's engine did not take the request or reply to it (not running, or hung).
    #[error(
        "lab `{lab}`'s engine does not answer (its impaired links carry nothing; \
         `rtemu down {lab}` removes the lab)"
    )]
    NoAnswer {
        /// The lab.
        lab: LabName,
        /// Why, from its control socket.
        source: io::Error,
    },
    /// The engine's reply is not one rtemu reads.
    #[error("{what}")]
    Reply {
        /// What the reply was, as a message quoting it.
        what: String,
        /// Why it does not read.
        source: serde_json::Error,
    },
    /// The engine process ended while it started.
    #[error("the engine exited at start ({status}): {log}")]
    EngineExited {
        /// How it ended.
        status: ExitStatus,
        /// Its log, trimmed.
        log: String,
    },
    /// The engine process did not answer within its start-up time.
    #[error("the engine did not answer within {0} s")]
    EngineSilent(u64),
    /// Entering a node's network namespace failed.
    #[error(transparent)]
    Netns(#[from] NetnsError),
    /// Offloads could not be switched off on an interface.
    #[error(transparent)]
    Offload(#[from] OffloadError),
    /// A file, process or system operation failed.
    #[error("{what}")]
    Io {
        /// What rtemu was doing.
        what: String,
        /// Why it failed.
        source: io::Error,
    },
    /// What rtemu was doing when `source` failed (a lab, a link): the kind is the source's.
    #[error("{what}")]
    Context {
        /// What rtemu was doing.
        what: String,
        /// What failed.
        source: Box<ControlError>,
    },
}

/// Whose fault an error is, hence what would mend it; the HTTP API answers each with a status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The request is wrong (a name, a topology, a value): correcting it mends it.
    Invalid,
    /// The request names a lab, node or output that is not there.
    NotFound,
    /// Something on the host is in the way of the request (a lab or namespace of that name,
    /// the CPUs, a missing image): the host must change first.
    Conflict,
    /// The engine cannot take the request yet: the same request may succeed a moment later.
    Busy,
    /// This machine does not do what is asked (a lab across hosts, brought up as one).
    Unsupported,
    /// rtemu or the machine failed.
    Internal,
}

impl ControlError {
    /// Whose fault the error is. Every match names every variant, so a new kind of error is
    /// classed where it is added.
    pub fn kind(&self) -> Kind {
        match self {
            ControlError::Lab(e) => lab_kind(e),
            ControlError::State(e) => state_kind(e),
            ControlError::BadName(_) | ControlError::Spec(_) | ControlError::TooFar(_) => {
                Kind::Invalid
            }
            ControlError::Load(e) => match e {
                // A file the request names that is not there or not readable.
                LoadError::Read { .. } | LoadError::Invalid(_) => Kind::Invalid,
            },
            ControlError::OffEngine(e) => match e {
                OffEngineError::NotPinned | OffEngineError::NoneLeft { .. } => Kind::Conflict,
            },
            ControlError::Refused(e) => match e.kind {
                crate::message::ErrorKind::Request => Kind::Invalid,
                crate::message::ErrorKind::Busy => Kind::Busy,
                crate::message::ErrorKind::Internal => Kind::Internal,
            },
            // Asked of a lab whose links here are all plain veth pairs.
            ControlError::NoEngine(_) => Kind::Invalid,
            ControlError::NoAnswer { .. }
            | ControlError::Reply { .. }
            | ControlError::EngineExited { .. }
            | ControlError::EngineSilent(_)
            | ControlError::Netns(_)
            | ControlError::Offload(_)
            | ControlError::Io { .. } => Kind::Internal,
            ControlError::Context { source, .. } => source.kind(),
        }
    }

    /// The error, as the cause of what rtemu was doing (`what`).
    pub fn context(self, what: impl Into<String>) -> ControlError {
        ControlError::Context {
            what: what.into(),
            source: Box::new(self),
        }
    }

    /// An I/O error, as the cause of what rtemu was doing (`what`).
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(io::Error) -> ControlError {
        let what = what.into();
        move |source| ControlError::Io { what, source }
    }
}

/// Whose fault a lab lifecycle error is.
fn lab_kind(e: &LabError) -> Kind {
    match e {
        LabError::Exists(_) => Kind::Conflict,
        // The node has no output to show.
        LabError::NoSuchLab(_) | LabError::NoSuchNode { .. } | LabError::NoLogs(_) => {
            Kind::NotFound
        }
        // The request's part does not fit its file (a host, VNIs, an MTU).
        LabError::BadName(_)
        | LabError::BadTarget(_)
        | LabError::WhichLab(_)
        | LabError::Part(_) => Kind::Invalid,
        // Something on the host is in the way of the lab's names or needs, the request asks
        // for the host's own uplink, or the part was sent to the wrong machine.
        LabError::ForeignNamespace(_)
        | LabError::OtherLabsNamespace { .. }
        | LabError::Uplink { .. }
        | LabError::NoHostInterface(_)
        | LabError::CpuLimit(_)
        | LabError::NoCpuset
        | LabError::LeftAlone { .. }
        | LabError::NotThisHost { .. } => Kind::Conflict,
        LabError::State(e) => state_kind(e),
        LabError::Cpuset(e) => match e {
            // Another lab's, of the same name.
            CpusetError::InUse { .. } => Kind::Conflict,
            CpusetError::Io { .. } => Kind::Internal,
        },
        LabError::MultiHost { .. } => Kind::Unsupported,
        LabError::Containers(e) => match e {
            // The topology names images the host lacks and may not pull.
            LaunchError::MissingImages(_) => Kind::Conflict,
            LaunchError::Runtime(_)
            | LaunchError::Pull(_)
            | LaunchError::Start(_)
            | LaunchError::Unhealthy(_) => Kind::Internal,
        },
        LabError::Io { .. } | LabError::Netlink { .. } => Kind::Internal,
    }
}

/// Whose fault a lab state error is.
fn state_kind(e: &StateError) -> Kind {
    match e {
        StateError::BadName(_) => Kind::Invalid,
        // A directory under the state root that rtemu did not make, or does not trust, holds
        // the lab's name: the host is in the way.
        StateError::Untrusted { .. }
        | StateError::NoStateFile { .. }
        | StateError::Foreign { .. } => Kind::Conflict,
        StateError::Io { .. } => Kind::Internal,
    }
}

/// The error and its causes on one line, leaving out a cause whose text the message before it
/// already contains (library errors often print their source themselves).
pub fn message(err: &(dyn std::error::Error + 'static)) -> String {
    let mut out = String::new();
    let mut cause = Some(err);
    while let Some(e) = cause {
        let text = e.to_string();
        if !out.contains(&text) {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&text);
        }
        cause = e.source();
    }
    out
}

/// Whether `err` is a closed pipe (`rtemu … | head` stopped reading): no error worth a word.
pub fn is_closed_pipe(err: &anyhow::Error) -> bool {
    err.downcast_ref::<std::io::Error>()
        .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ErrorKind;

    fn refused(kind: ErrorKind) -> Refused {
        Refused {
            kind,
            message: "table /x cannot be read".into(),
        }
    }

    fn io() -> io::Error {
        io::Error::new(io::ErrorKind::NotFound, "no such file")
    }

    #[test]
    fn every_cause_is_classed_and_context_keeps_its_kind() {
        let lab = || LabName::new("a").unwrap();
        for (err, kind) in [
            (ControlError::from(BadLabName("A".into())), Kind::Invalid),
            (LabError::NoSuchLab("a".into()).into(), Kind::NotFound),
            (LabError::NoLogs("n".into()).into(), Kind::NotFound),
            (LabError::Exists("a".into()).into(), Kind::Conflict),
            (LabError::NoCpuset.into(), Kind::Conflict),
            (
                LabError::from(CpusetError::InUse {
                    cgroup: "/sys/fs/cgroup/rtemu-a".into(),
                    lab: "a".into(),
                    pids: vec![41],
                })
                .into(),
                Kind::Conflict,
            ),
            (
                LabError::from(CpusetError::Io {
                    cgroup: "/sys/fs/cgroup/rtemu-a".into(),
                    source: io(),
                })
                .into(),
                Kind::Internal,
            ),
            (
                LabError::from(LaunchError::MissingImages(vec!["x".into()])).into(),
                Kind::Conflict,
            ),
            (
                LabError::from(LaunchError::Start(vec!["x".into()])).into(),
                Kind::Internal,
            ),
            (
                LabError::MultiHost {
                    lab: "m".into(),
                    hosts: "h1, h2".into(),
                }
                .into(),
                Kind::Unsupported,
            ),
            (
                LabError::from(StateError::NoStateFile { path: "/x".into() }).into(),
                Kind::Conflict,
            ),
            (
                StateError::Io {
                    what: "reading /x".into(),
                    source: io(),
                }
                .into(),
                Kind::Internal,
            ),
            (OffEngineError::NotPinned.into(), Kind::Conflict),
            (refused(ErrorKind::Request).into(), Kind::Invalid),
            (refused(ErrorKind::Busy).into(), Kind::Busy),
            (refused(ErrorKind::Internal).into(), Kind::Internal),
            (ControlError::NoEngine(lab()), Kind::Invalid),
            (
                ControlError::TooFar(u64::try_from(u128::MAX).unwrap_err()),
                Kind::Invalid,
            ),
            (
                ControlError::NoAnswer {
                    lab: lab(),
                    source: io(),
                },
                Kind::Internal,
            ),
            (ControlError::EngineSilent(10), Kind::Internal),
        ] {
            assert_eq!(err.kind(), kind, "{err}");
            let wrapped = err.context("link `ab`").context("lab a");
            assert_eq!(wrapped.kind(), kind, "{wrapped}");
        }
        let spec = rtemu_topo::Topology::parse("<request>", "lab = 1\n").unwrap_err();
        assert_eq!(ControlError::from(spec).kind(), Kind::Invalid);
    }

    #[test]
    fn a_cpuset_of_another_lab_of_the_name_is_a_conflict_naming_it() {
        let in_use = CpusetError::InUse {
            cgroup: "/sys/fs/cgroup/rtemu-a@h1".into(),
            lab: "a".into(),
            pids: Vec::new(),
        };
        let err = ControlError::from(LabError::from(in_use)).context("lab a");
        assert_eq!(err.kind(), Kind::Conflict);
        let said = message(&err);
        assert!(
            said.starts_with("lab a: the cpuset /sys/fs/cgroup/rtemu-a@h1 is in use: "),
            "{said}"
        );
        assert!(said.ends_with("(--name)"), "{said}");
        // The kernel's refusal names the cpuset once, then why.
        let refused = ControlError::from(LabError::from(CpusetError::Io {
            cgroup: "/sys/fs/cgroup/rtemu-a".into(),
            source: io(),
        }));
        assert_eq!(
            message(&refused),
            "making the cpuset /sys/fs/cgroup/rtemu-a: no such file"
        );
    }

    #[test]
    fn typed_errors_read_as_the_anyhow_chains_they_replace() {
        let typed = ControlError::from(refused(ErrorKind::Internal)).context("link `ab`");
        let chain = anyhow::Error::new(refused(ErrorKind::Internal)).context("link `ab`");
        assert_eq!(message(&typed), message(chain.as_ref()));
        assert_eq!(message(&typed), "link `ab`: table /x cannot be read");
        let typed = ControlError::io("creating /run/rtemu/a/engine.log")(io())
            .context("starting the engine of lab a");
        let chain = anyhow::Error::new(io())
            .context("creating /run/rtemu/a/engine.log")
            .context("starting the engine of lab a");
        assert_eq!(message(&typed), message(chain.as_ref()));
        assert_eq!(
            message(&typed),
            "starting the engine of lab a: creating /run/rtemu/a/engine.log: no such file"
        );
        // Through the command line's anyhow, the same line again.
        let typed = anyhow::Error::from(ControlError::NoAnswer {
            lab: LabName::new("a").unwrap(),
            source: io(),
        });
        assert_eq!(
            message(typed.as_ref()),
            "lab `a`'s engine does not answer (its impaired links carry nothing; `rtemu down a` \
             removes the lab): no such file"
        );
    }

    #[test]
    fn messages_do_not_repeat_a_cause() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let err = anyhow::Error::new(io)
            .context("cannot open x: no such file")
            .context("reading x");
        assert_eq!(
            message(err.as_ref()),
            "reading x: cannot open x: no such file"
        );
    }

    #[test]
    fn every_new_cause_is_joined_in_order() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let err = anyhow::Error::new(io)
            .context("opening x")
            .context("--trace");
        assert_eq!(message(err.as_ref()), "--trace: opening x: no such file");
    }

    #[test]
    fn a_closed_pipe_is_told_apart_even_under_context() {
        let pipe = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        assert!(is_closed_pipe(
            &anyhow::Error::new(pipe).context("writing the table")
        ));
        let other = std::io::Error::from(std::io::ErrorKind::NotFound);
        assert!(!is_closed_pipe(&anyhow::Error::new(other)));
        assert!(!is_closed_pipe(&anyhow::anyhow!("broken pipe")));
    }
}
