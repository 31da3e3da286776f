//! What a listener's peers may hold: how many connections at once, in all and per peer, and
//! how long a connection may go without sending a request's head.
//!
//! Every connection costs a descriptor until it closes. Without bounds, about 20,000 idle TCP
//! connections took every descriptor the process had, and even the Unix socket stopped
//! answering. So each listener serves at most [`Limits::total`] connections at once, a TCP
//! peer (one address) at most [`Limits::per_peer`]; a connection over either bound is closed
//! as soon as it is accepted. A connection that sends no request head within [`HEAD_TIMEOUT`]
//! (idle between requests included) is closed too. The TCP bound stays well below the
//! descriptors the process may open, so the Unix socket, served by its own loop with its own
//! bound, always has descriptors left.

use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::serve::Listener;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;

/// How long a connection may take to send a request's head, and may stay idle between
/// requests. A stream being answered (stats, capture, exec) is not idle.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// The most connections a listener holds at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// In all.
    pub total: usize,
    /// From one peer address (TCP).
    pub per_peer: usize,
}

/// TCP's: any peer that can reach the address may connect before it shows a token.
pub const TCP: Limits = Limits {
    total: 256,
    per_peer: 32,
};

/// The Unix socket's (only root, or `--group`'s members, can connect).
pub const UNIX: Limits = Limits {
    total: 256,
    per_peer: 256,
};

/// The connections open now, in all and per peer.
#[derive(Debug, Default)]
struct Open {
    total: usize,
    per_peer: HashMap<IpAddr, usize>,
}

/// A connection's place in [`Open`], given back when it is dropped.
struct Slot {
    open: Arc<Mutex<Open>>,
    peer: Option<IpAddr>,
}

impl Slot {
    /// A place for a connection from `peer`, if `limits` leave one.
    fn take(open: &Arc<Mutex<Open>>, peer: Option<IpAddr>, limits: Limits) -> Option<Slot> {
        let mut o = open.lock().unwrap_or_else(|e| e.into_inner());
        let of_peer = peer.map_or(0, |p| o.per_peer.get(&p).copied().unwrap_or(0));
        if o.total >= limits.total || of_peer >= limits.per_peer {
            return None;
        }
        o.total += 1;
        if let Some(p) = peer {
            *o.per_peer.entry(p).or_insert(0) += 1;
        }
        Some(Slot {
            open: open.clone(),
            peer,
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut o = self.open.lock().unwrap_or_else(|e| e.into_inner());
        o.total -= 1;
        if let Some(p) = self.peer {
            if let Some(n) = o.per_peer.get_mut(&p) {
                *n -= 1;
                if *n == 0 {
                    o.per_peer.remove(&p);
                }
            }
        }
    }
}

/// Serves `router` on `listener` within `limits` until `stop` ends; then waits for the open
/// connections to finish their requests (the caller bounds that wait). `peer` gives the
/// address a connection is counted under (None: counted in the total only). With `tls`, each
/// connection is a TLS one, its handshake made in the connection's own task within
/// [`HEAD_TIMEOUT`], so a peer that stalls it holds up no one else.
pub async fn serve<L: Listener>(
    mut listener: L,
    router: Router,
    limits: Limits,
    peer: fn(&L::Addr) -> Option<IpAddr>,
    tls: Option<tokio_rustls::TlsAcceptor>,
    stop: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let open = Arc::new(Mutex::new(Open::default()));
    let graceful = GracefulShutdown::new();
    let mut stop = std::pin::pin!(stop);
    loop {
        let (io, addr) = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut stop => break,
        };
        // Over a bound: dropped, so closed, at once.
        let Some(slot) = Slot::take(&open, peer(&addr), limits) else {
            continue;
        };
        let (router, watcher, tls) = (router.clone(), graceful.watcher(), tls.clone());
        tokio::spawn(async move {
            // A peer that goes away, fails its handshake or times out ends its connection;
            // nothing to report.
            match tls {
                None => drop(watcher.watch(http(io, router)).await),
                Some(tls) => {
                    if let Ok(Ok(io)) = tokio::time::timeout(HEAD_TIMEOUT, tls.accept(io)).await {
                        drop(watcher.watch(http(io, router)).await);
                    }
                }
            }
            drop(slot);
        });
    }
    graceful.shutdown().await;
    Ok(())
}

/// HTTP/1.1 on `io`, answered by `router`, its head read within [`HEAD_TIMEOUT`] (the `http`
/// fuzz target reads its requests with it too).
pub fn http<I>(
    io: I,
    router: Router,
) -> hyper::server::conn::http1::Connection<TokioIo<I>, TowerToHyperService<Router>>
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .serve_connection(TokioIo::new(io), TowerToHyperService::new(router))
}

/// The address a TCP connection is counted under.
pub fn tcp_peer(addr: &std::net::SocketAddr) -> Option<IpAddr> {
    Some(addr.ip())
}

/// Unix peers are counted in the total only.
pub fn unix_peer(_: &tokio::net::unix::SocketAddr) -> Option<IpAddr> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_bounded_in_all_and_per_peer_and_given_back() {
        let open = Arc::new(Mutex::new(Open::default()));
        let limits = Limits {
            total: 3,
            per_peer: 2,
        };
        let (a, b) = (
            Some(IpAddr::from([10, 0, 0, 1])),
            Some(IpAddr::from([10, 0, 0, 2])),
        );
        let a1 = Slot::take(&open, a, limits).unwrap();
        let _a2 = Slot::take(&open, a, limits).unwrap();
        assert!(
            Slot::take(&open, a, limits).is_none(),
            "a third of one peer"
        );
        let _b1 = Slot::take(&open, b, limits).unwrap();
        assert!(Slot::take(&open, b, limits).is_none(), "a fourth in all");
        drop(a1);
        let b2 = Slot::take(&open, b, limits);
        assert!(b2.is_some(), "a place given back");
        assert_eq!(open.lock().unwrap().total, 3);
        drop(b2);
        assert_eq!(open.lock().unwrap().per_peer.get(&b.unwrap()), Some(&1));
    }
}
