//! What can go wrong setting AF_XDP up: the step that failed, the kernel's error, and what to
//! do about it.

use std::fmt;
use std::io;

/// A step of setting up AF_XDP on an interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Mapping the UMEM (`mmap` of anonymous memory).
    AllocUmem,
    /// `socket(AF_XDP, SOCK_RAW, 0)`.
    OpenSocket,
    /// `setsockopt(XDP_UMEM_REG)`.
    RegisterUmem,
    /// `setsockopt` of a ring's size.
    SizeRing(&'static str),
    /// `getsockopt(XDP_MMAP_OFFSETS)`.
    RingOffsets,
    /// `mmap` of a ring.
    MapRing(&'static str),
    /// `bind` to the interface's queue.
    Bind,
    /// `BPF_MAP_CREATE` of the `XSKMAP`.
    CreateMap,
    /// `BPF_PROG_LOAD` of the redirect program.
    LoadProgram,
    /// `BPF_MAP_UPDATE_ELEM`: the socket into the map.
    InsertSocket,
    /// `BPF_LINK_CREATE`: the program onto the interface.
    Attach,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::AllocUmem => write!(f, "allocating the UMEM"),
            Step::OpenSocket => write!(f, "opening an AF_XDP socket"),
            Step::RegisterUmem => write!(f, "registering the UMEM (XDP_UMEM_REG)"),
            Step::SizeRing(ring) => write!(f, "sizing the {ring} ring"),
            Step::RingOffsets => write!(f, "reading the ring offsets (XDP_MMAP_OFFSETS)"),
            Step::MapRing(ring) => write!(f, "mapping the {ring} ring"),
            Step::Bind => write!(f, "binding the socket to the interface's queue 0"),
            Step::CreateMap => write!(f, "creating the XSKMAP (bpf BPF_MAP_CREATE)"),
            Step::LoadProgram => write!(f, "loading the XDP program (bpf BPF_PROG_LOAD)"),
            Step::InsertSocket => write!(f, "putting the socket into the XSKMAP"),
            Step::Attach => write!(f, "attaching the XDP program (bpf BPF_LINK_CREATE)"),
        }
    }
}

impl Step {
    /// What probably fixes `err` at this step.
    fn hint(self, err: &io::Error) -> &'static str {
        let errno = err.raw_os_error().unwrap_or(0);
        match (self, errno) {
            (Step::OpenSocket, libc::EPERM | libc::EACCES) => "needs CAP_NET_RAW",
            (Step::OpenSocket, libc::EAFNOSUPPORT) => {
                "the kernel has no AF_XDP (Linux 4.18 or later, built with CONFIG_XDP_SOCKETS)"
            }
            (Step::RegisterUmem, libc::EPERM | libc::ENOMEM | libc::ENOBUFS) => {
                "the UMEM is locked memory: needs CAP_IPC_LOCK or a higher RLIMIT_MEMLOCK"
            }
            (Step::RingOffsets, _) => "needs Linux 5.4 or later (ring flags, need_wakeup)",
            (Step::Bind, libc::EBUSY) => "another AF_XDP socket is bound to this queue",
            (Step::Bind, libc::EINVAL | libc::EOPNOTSUPP) => {
                "needs Linux 5.4 or later (XDP_USE_NEED_WAKEUP)"
            }
            (Step::CreateMap | Step::LoadProgram | Step::InsertSocket, libc::EPERM) => {
                "needs CAP_BPF and CAP_NET_ADMIN (or CAP_SYS_ADMIN)"
            }
            (Step::CreateMap | Step::LoadProgram, libc::ENOSYS) => {
                "the kernel has no bpf() (CONFIG_BPF_SYSCALL)"
            }
            (Step::CreateMap, libc::EINVAL) => "the kernel has no XSKMAP (Linux 4.18 or later)",
            (Step::Attach, libc::EPERM) => "needs CAP_NET_ADMIN and CAP_BPF",
            (Step::Attach, libc::EBUSY | libc::EEXIST) => {
                "another XDP program is attached to the interface: `ip link set DEV xdp off`"
            }
            (Step::Attach, libc::EINVAL) => "needs Linux 5.9 or later (bpf links for XDP)",
            _ => "",
        }
    }
}

/// Setting AF_XDP up failed.
#[derive(Debug, thiserror::Error)]
pub enum XdpError {
    /// A system call failed.
    #[error("{step}: {source}{}", hint(*.step, .source))]
    Sys {
        /// The step.
        step: Step,
        /// The kernel's error.
        source: io::Error,
    },
    /// The verifier refused the program.
    #[error("{step}: {source}; the verifier said: {log}")]
    Verifier {
        /// Always [`Step::LoadProgram`].
        step: Step,
        /// The kernel's error.
        source: io::Error,
        /// The verifier's log, trimmed.
        log: String,
    },
    /// The kernel answered in a shape this crate does not know.
    #[error("{step}: {what} (needs Linux 5.9 or later)")]
    Unsupported {
        /// The step.
        step: Step,
        /// What was unexpected.
        what: &'static str,
    },
    /// A size the kernel would refuse.
    #[error("{0}")]
    Config(String),
}

fn hint(step: Step, err: &io::Error) -> String {
    match step.hint(err) {
        "" => String::new(),
        h => format!(" ({h})"),
    }
}

impl XdpError {
    /// Wraps the kernel's error at `step`.
    pub fn at(step: Step) -> impl FnOnce(io::Error) -> XdpError {
        move |source| XdpError::Sys { step, source }
    }

    /// The step that failed, if a step did.
    pub fn step(&self) -> Option<Step> {
        match self {
            XdpError::Sys { step, .. }
            | XdpError::Verifier { step, .. }
            | XdpError::Unsupported { step, .. } => Some(*step),
            XdpError::Config(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_step_and_the_missing_privilege() {
        let e = XdpError::at(Step::OpenSocket)(io::Error::from_raw_os_error(libc::EPERM));
        let text = e.to_string();
        assert!(text.starts_with("opening an AF_XDP socket: "), "{text}");
        assert!(text.ends_with("(needs CAP_NET_RAW)"), "{text}");
        let e = XdpError::at(Step::Attach)(io::Error::from_raw_os_error(libc::EINVAL));
        assert!(e.to_string().contains("Linux 5.9"), "{e}");
        let e = XdpError::at(Step::Bind)(io::Error::from_raw_os_error(libc::ENODEV));
        assert!(
            e.to_string().ends_with("(os error 19)"),
            "no hint where none applies: {e}"
        );
        assert_eq!(e.step(), Some(Step::Bind));
    }
}
