//! The lab's namespaces: marked before they are named, found again by their mark, entered
//! with netlink connections, and given their sysctls.

use std::io;
use std::os::fd::OwnedFd;

use futures_util::TryStreamExt;
use rtnetlink::packet_route::link::LinkAttribute;
use rtnetlink::{Handle, LinkMessageBuilder, LinkUnspec};

use crate::sys;

use super::error::{io_err, LabError};

/// The loopback interface's index, the same in every network namespace (the kernel registers
/// it first).
const LOOPBACK_INDEX: u32 = 1;

/// Marks the namespace the calling thread is in with `mark`: its loopback interface gets it as
/// alias. Called inside a new namespace before it is named ([`sys::create_netns`]), so no
/// named namespace of a lab is ever unmarked.
pub(super) fn mark_this_netns(mark: String) -> io::Result<()> {
    with_own_netlink(|handle| async move {
        let alias = LinkAttribute::IfAlias(mark);
        set_link(&handle, LOOPBACK_INDEX, |msg| {
            msg.append_extra_attribute(alias)
        })
        .await
        .map_err(io::Error::other)
    })
}

/// Changes the existing interface `index` as `change` says (its state, alias, controller,
/// namespace or name): the one way the lab changes an interface it did not just create.
pub(super) async fn set_link(
    handle: &Handle,
    index: u32,
    change: impl FnOnce(LinkMessageBuilder<LinkUnspec>) -> LinkMessageBuilder<LinkUnspec>,
) -> Result<(), rtnetlink::Error> {
    let msg = change(LinkUnspec::new_with_index(index)).build();
    handle.link().set(msg).execute().await
}

/// Runs `work` to its end on a runtime of the calling thread's own, which is outside any:
/// the lab's netlink work. Only I/O is enabled; netlink needs no timer.
pub(super) fn block_on<F: std::future::Future>(work: F) -> Result<F::Output, LabError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .map_err(io_err("starting the netlink runtime"))?;
    Ok(runtime.block_on(work))
}

/// Runs `f` with a netlink connection whose socket is in the calling thread's namespace, on a
/// runtime of its own ([`block_on`]): for threads that have entered a namespace outside any
/// runtime.
pub(super) fn with_own_netlink<T, F: std::future::Future<Output = io::Result<T>>>(
    f: impl FnOnce(Handle) -> F,
) -> io::Result<T> {
    block_on(async move {
        let (conn, handle, _) = rtnetlink::new_connection()?;
        tokio::spawn(conn);
        f(handle).await
    })
    .map_err(io::Error::other)?
}

/// What `down` finds under one of a lab's namespace names.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Found {
    /// Nothing.
    Nothing,
    /// The empty mount point a crash left between creating it and mounting the namespace.
    Placeholder,
    /// A namespace with this mark (its loopback's alias).
    Marked(Option<String>),
}

/// What is at namespace name `ns`: nothing, a crash's placeholder, or a namespace and its mark.
pub(super) fn find_netns(ns: &str) -> io::Result<Found> {
    use std::os::unix::fs::MetadataExt;
    let path = sys::netns_path(ns);
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Found::Nothing),
        Err(e) => return Err(e),
    };
    let dir = std::fs::metadata(sys::NETNS_DIR)?;
    // A mounted namespace file lives on nsfs, not on the directory's file system.
    if meta.is_file() && meta.len() == 0 && meta.dev() == dir.dev() {
        return Ok(Found::Placeholder);
    }
    let alias = sys::in_netns(ns, || {
        with_own_netlink(|handle| async move {
            let mut links = handle.link().get().match_index(LOOPBACK_INDEX).execute();
            let lo = links.try_next().await.map_err(io::Error::other)?;
            Ok(lo.and_then(|m| {
                m.attributes.into_iter().find_map(|a| match a {
                    LinkAttribute::IfAlias(alias) => Some(alias),
                    _ => None,
                })
            }))
        })
    })?;
    Ok(Found::Marked(alias))
}

/// Writes sysctls inside namespace `ns`.
pub(super) fn set_sysctls(ns: &str, sysctls: Vec<(String, String)>) -> Result<(), LabError> {
    if sysctls.is_empty() {
        return Ok(());
    }
    sys::in_netns(ns, move || write_sysctls(&sysctls))
        .map_err(io_err(format!("setting sysctls in {ns}")))
}

/// Writes sysctls in the calling thread's namespace. Only keys of `net.` can be a namespace's
/// own, and the kernel shows a namespace other than the host's the machine-wide ones
/// (`net.core.rmem_max`) read-only or not at all: those are refused.
pub(super) fn write_sysctls(sysctls: &[(String, String)]) -> io::Result<()> {
    let proc = sys::ProcSys::here();
    for (key, value) in sysctls {
        if !key.starts_with("net.") {
            return Err(io::Error::other(format!(
                "sysctl {key} is the whole machine's"
            )));
        }
        let file = proc.open(key).map_err(|e| match e.kind() {
            // Root may write every key of a namespace's own that can be written.
            io::ErrorKind::NotFound | io::ErrorKind::PermissionDenied => io::Error::new(
                e.kind(),
                format!(
                    "sysctl {key} is not a network namespace's own (the kernel keeps it for \
                     the whole machine, shows it read-only, or has no such key): a node does \
                     not set it"
                ),
            ),
            _ => io::Error::new(e.kind(), format!("sysctl {key}={value}: {e}")),
        })?;
        std::io::Write::write_all(&mut &file, value.as_bytes())
            .map_err(|e| io::Error::new(e.kind(), format!("sysctl {key}={value}: {e}")))?;
    }
    Ok(())
}

/// A netlink connection whose socket lives in namespace `ns`, and the future that carries its
/// messages (to be polled on the current runtime; the socket closes when it is dropped).
fn connect_in(ns: &str) -> Result<(impl std::future::Future<Output = ()>, Handle), LabError> {
    // The socket must be made on the thread in the namespace, and registered with this
    // runtime's reactor, so that thread enters the runtime too.
    let runtime = tokio::runtime::Handle::current();
    let (conn, handle, _) = sys::in_netns(ns, move || {
        let _entered = runtime.enter();
        rtnetlink::new_connection()
    })
    .map_err(io_err(format!("opening netlink in {ns}")))?;
    Ok((conn, handle))
}

/// A netlink connection whose socket lives in namespace `ns`, open as long as the runtime.
pub(super) fn connect(ns: &str) -> Result<Handle, LabError> {
    let (conn, handle) = connect_in(ns)?;
    tokio::spawn(conn);
    Ok(handle)
}

/// Runs `f` with a netlink connection into namespace `ns`, whose socket is closed as soon as
/// `f` is done: a lab of any size holds one such socket at a time.
pub(super) async fn with_netlink<T, F>(ns: &str, f: impl FnOnce(Handle) -> F) -> Result<T, LabError>
where
    F: std::future::Future<Output = Result<T, LabError>>,
{
    let (conn, handle) = connect_in(ns)?;
    let work = std::pin::pin!(f(handle));
    match futures_util::future::select(work, std::pin::pin!(conn)).await {
        futures_util::future::Either::Left((done, _)) => done,
        futures_util::future::Either::Right(((), _)) => Err(LabError::Io {
            what: format!("talking to netlink in {ns}"),
            source: io::Error::other("the connection closed"),
        }),
    }
}

pub(super) fn open_netns(ns: &str) -> Result<OwnedFd, LabError> {
    std::fs::File::open(sys::netns_path(ns))
        .map(OwnedFd::from)
        .map_err(io_err(format!("opening namespace {ns}")))
}
