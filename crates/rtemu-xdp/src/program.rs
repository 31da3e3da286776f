//! The XDP program that hands an interface's frames to an AF_XDP socket: an `XSKMAP` holding
//! the socket, the program of [`crate::insn::stamp_and_redirect`] (which writes each frame's
//! arrival time before it; [`crate::insn::redirect_to_xsk`] where the kernel refuses that), and
//! a bpf link that attaches it to the interface.
//!
//! The link is what makes clean-up automatic. A program attached with `BPF_LINK_CREATE`
//! (attach type `BPF_XDP`, Linux 5.9) stays attached only while a descriptor of the link is
//! open: when [`Redirect`] drops, or the process exits or is killed with `SIGKILL`, the kernel
//! closes the descriptor and detaches the program, and the map and program go with their last
//! reference. Nothing is left on the interface for anyone to remove, unlike a program attached
//! through netlink (`IFLA_XDP`), which stays until detached by hand. A link also refuses to
//! replace a program someone else attached (`EBUSY`) rather than silently evicting it.
//!
//! Native (driver) mode is tried first: veth runs XDP in its NAPI poll, before a socket buffer
//! is built for the frame. Where the driver refuses, generic (SKB) mode runs the same program
//! after the stack has built one; [`AttachMode::Generic`] keeps the reason.
#![allow(unsafe_code)]

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use crate::error::{Step, XdpError};
use crate::insn::{self, Insn};
use crate::sys::{self, LinkCreateAttr, MapCreateAttr, MapElemAttr, ProgLoadAttr};

/// The program's license: `bpf_redirect_map` is not GPL-only, but the kernel asks for one.
const LICENSE: &CStr = c"Dual MIT/GPL";

/// The program's name, as `bpftool prog` shows it.
const NAME: &[u8] = b"rtemu_xsk";

/// Bytes of verifier log kept when the kernel refuses the program.
const LOG_BYTES: usize = 16 * 1024;

/// How the program runs on the interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttachMode {
    /// In the driver, before a socket buffer exists.
    Native,
    /// After the stack built a socket buffer, because native mode was refused for `reason`.
    Generic {
        /// Why native mode was not used.
        reason: String,
    },
}

/// An XDP program on one interface, redirecting its frames on one queue to one socket;
/// detached when dropped.
#[derive(Debug)]
pub struct Redirect {
    // Field order is drop order: the link first, so the program leaves the interface before
    // its map goes.
    _link: OwnedFd,
    _program: OwnedFd,
    _map: OwnedFd,
    mode: AttachMode,
    stamps: bool,
}

impl Redirect {
    /// Creates the map with `socket` at key `queue`, loads the program and attaches it to
    /// interface `ifindex` of the calling thread's namespace. Needs `CAP_BPF` and
    /// `CAP_NET_ADMIN` (or `CAP_SYS_ADMIN`), Linux 5.9 or later. The socket must be bound.
    pub fn attach(ifindex: u32, queue: u32, socket: impl AsFd) -> Result<Redirect, XdpError> {
        let map = create_map(queue + 1)?;
        insert(&map, queue, socket).map_err(XdpError::at(Step::InsertSocket))?;
        // The stamping program where the kernel takes it; the plain one otherwise.
        let (program, stamps) = match load(&insn::stamp_and_redirect(map.as_raw_fd())) {
            Ok(p) => (p, true),
            Err(_) => (load(&insn::redirect_to_xsk(map.as_raw_fd()))?, false),
        };
        let (link, mode) = match link(&program, ifindex, sys::XDP_FLAGS_DRV_MODE) {
            Ok(link) => (link, AttachMode::Native),
            // Missing privileges and a program already there fail generic mode the same way.
            Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM | libc::EBUSY)) => {
                return Err(XdpError::at(Step::Attach)(e));
            }
            Err(native) => {
                let link = link(&program, ifindex, sys::XDP_FLAGS_SKB_MODE)
                    .map_err(XdpError::at(Step::Attach))?;
                let reason = format!("the driver refused native XDP: {native}");
                (link, AttachMode::Generic { reason })
            }
        };
        Ok(Redirect {
            _link: link,
            _program: program,
            _map: map,
            mode,
            stamps,
        })
    }

    /// How the program runs.
    pub fn mode(&self) -> &AttachMode {
        &self.mode
    }

    /// Whether the program puts each frame's arrival time (`CLOCK_MONOTONIC` ns, 8 bytes)
    /// right before it ([`insn::stamp_and_redirect`]); not where the kernel refused that
    /// program.
    pub fn stamps(&self) -> bool {
        self.stamps
    }
}

fn create_map(entries: u32) -> Result<OwnedFd, XdpError> {
    let mut attr = MapCreateAttr {
        map_type: sys::BPF_MAP_TYPE_XSKMAP,
        key_size: 4,
        value_size: 4,
        max_entries: entries,
        map_flags: 0,
    };
    // SAFETY: the attribute holds no pointers.
    unsafe { sys::bpf_fd(sys::BPF_MAP_CREATE, &mut attr) }.map_err(XdpError::at(Step::CreateMap))
}

fn insert(map: &OwnedFd, queue: u32, socket: impl AsFd) -> io::Result<()> {
    let key = queue;
    let value = socket.as_fd().as_raw_fd() as u32;
    let mut attr = MapElemAttr {
        map_fd: map.as_raw_fd() as u32,
        key: &key as *const u32 as u64,
        value: &value as *const u32 as u64,
        ..MapElemAttr::default()
    };
    // SAFETY: `key` and `value` are live `u32`s, the map's key and value sizes, that the kernel
    // only reads during the call.
    unsafe { sys::bpf(sys::BPF_MAP_UPDATE_ELEM, &mut attr) }.map(drop)
}

fn load(program: &[Insn]) -> Result<OwnedFd, XdpError> {
    let mut name = [0u8; 16];
    name[..NAME.len()].copy_from_slice(NAME);
    let attr = |log: &mut [u8]| ProgLoadAttr {
        prog_type: sys::BPF_PROG_TYPE_XDP,
        insn_cnt: program.len() as u32,
        insns: program.as_ptr() as u64,
        license: LICENSE.as_ptr() as u64,
        log_level: if log.is_empty() { 0 } else { 1 },
        log_size: log.len() as u32,
        log_buf: if log.is_empty() {
            0
        } else {
            log.as_mut_ptr() as u64
        },
        prog_name: name,
        expected_attach_type: sys::BPF_XDP,
        ..ProgLoadAttr::default()
    };
    // SAFETY: `insns` points to `insn_cnt` live instructions and `license` to a NUL-terminated
    // string, both only read during the call; there is no log buffer.
    match unsafe { sys::bpf_fd(sys::BPF_PROG_LOAD, &mut attr(&mut [])) } {
        Ok(fd) => Ok(fd),
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => Err(XdpError::at(Step::LoadProgram)(e)),
        Err(_) => {
            // Again with the verifier's log, to say why.
            let mut log = vec![0u8; LOG_BYTES];
            // SAFETY: as above, and `log_buf` points to `log_size` writable bytes that outlive
            // the call.
            let result = unsafe { sys::bpf_fd(sys::BPF_PROG_LOAD, &mut attr(&mut log)) };
            result.map_err(|source| {
                let end = log.iter().position(|b| *b == 0).unwrap_or(log.len());
                XdpError::Verifier {
                    step: Step::LoadProgram,
                    source,
                    log: String::from_utf8_lossy(&log[..end]).trim().to_owned(),
                }
            })
        }
    }
}

fn link(program: &OwnedFd, ifindex: u32, flags: u32) -> io::Result<OwnedFd> {
    let mut attr = LinkCreateAttr {
        prog_fd: program.as_raw_fd() as u32,
        target_ifindex: ifindex,
        attach_type: sys::BPF_XDP,
        flags,
    };
    // SAFETY: the attribute holds no pointers.
    unsafe { sys::bpf_fd(sys::BPF_LINK_CREATE, &mut attr) }
}
