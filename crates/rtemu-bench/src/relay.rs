//! A TCP relay from this process's network namespace into another's: how a browser or a
//! client here reaches a server that listens only inside a host's namespace (the one-machine
//! cluster's coordinator). Bytes are passed through untouched, so the server's token still
//! guards it: the relay adds no access of its own.

use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};

/// At most this many connections are relayed at once; more are closed at once (a browser
/// holds a handful).
const MAX_CONNECTIONS: usize = 32;

/// How long connecting to the server in its namespace may take.
const CONNECT: Duration = Duration::from_secs(5);

/// Listens on `listen` here and relays every connection to `to` as seen from namespace
/// `netns` (its name under `/run/netns`), until the process ends. Returns the address it
/// listens on (`listen` may ask for port 0).
pub fn start(listen: SocketAddr, netns: &str, to: SocketAddr) -> Result<SocketAddr> {
    let listener = TcpListener::bind(listen).with_context(|| format!("listening on {listen}"))?;
    let addr = listener.local_addr()?;
    let netns = netns.to_owned();
    let open = Arc::new(AtomicUsize::new(0));
    std::thread::Builder::new()
        .name("relay".into())
        .spawn(move || {
            for client in listener.incoming().flatten() {
                if open.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
                    open.fetch_sub(1, Ordering::AcqRel);
                    continue;
                }
                let (netns, count) = (netns.clone(), Arc::clone(&open));
                let spawned =
                    std::thread::Builder::new()
                        .name("relay-conn".into())
                        .spawn(move || {
                            // A refused or failed connection closes the client's: it sees the
                            // server gone, which it is.
                            let _ = relay(client, &netns, to);
                            count.fetch_sub(1, Ordering::AcqRel);
                        });
                if spawned.is_err() {
                    open.fetch_sub(1, Ordering::AcqRel);
                }
            }
        })
        .context("starting the relay's thread")?;
    Ok(addr)
}

/// Carries one connection both ways until either side closes.
fn relay(client: TcpStream, netns: &str, to: SocketAddr) -> io::Result<()> {
    // A socket belongs to the namespace it is made in: made there, used from here.
    let server =
        rtemu_topo::sys::in_netns(netns, move || TcpStream::connect_timeout(&to, CONNECT))?;
    let (mut up_from, mut up_to) = (client.try_clone()?, server.try_clone()?);
    let upstream = std::thread::Builder::new()
        .name("relay-up".into())
        .spawn(move || {
            let _ = io::copy(&mut up_from, &mut up_to);
            let _ = up_to.shutdown(Shutdown::Write);
        })?;
    let (mut down_from, mut down_to) = (server, client);
    let _ = io::copy(&mut down_from, &mut down_to);
    let _ = down_to.shutdown(Shutdown::Both);
    let _ = down_from.shutdown(Shutdown::Both);
    let _ = upstream.join();
    Ok(())
}
