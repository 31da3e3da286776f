//! `rtemu serve`: rtemu's HTTP/JSON API (docs/api.md), over the control plane
//! (`rtemu-control`) and the lab library (`rtemu-topo`).
//!
//! * [`Server`]: the listeners (a root-only Unix socket, and TCP with a bearer token when
//!   asked), their clean shutdown;
//! * [`routes`]: the handlers, over [`ctl`], the control plane under them (their bodies are
//!   `rtemu-api`'s), [`exec`] and [`capture`] the two that run processes and stream packets;
//! * [`web`]: the web view's files, served at `/` without the token (they hold no data), and
//!   [`view`], `rtemu view`: the view of a lab on localhost TCP, in one command;
//! * [`connections`]: how many connections a listener holds, in all and per peer, and how
//!   long one may idle before a request;
//! * [`tls`]: an agent's TCP over TLS, with the certificate a coordinator pins;
//! * [`metrics`]: `GET /metrics`, the labs' and engines' counters for Prometheus;
//! * [`error`]: errors as `{"error": TEXT}` with the command line's text and a status;
//! * [`openapi_json`]: the OpenAPI 3.1 document, derived from the handlers and types, also
//!   checked in as docs/openapi.json.
//!
//! It is only the server: the API's bodies and its client are `rtemu-api`'s, and the
//! coordinator of a multi-host lab, which drives every host's agent through that client, is
//! `rtemu-cluster`'s.
//!
//! The server runs on a tokio runtime of its own and never in the engine: each lab's engine is
//! its own process, which the server reaches through the engine's control socket. Handlers run
//! lab work on tokio's blocking threads.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod capture;
pub mod connections;
pub mod ctl;
pub mod error;
pub mod exec;
pub mod listen;
pub mod metrics;
pub mod routes;
pub mod spread;
pub mod tls;
pub mod view;
pub mod web;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use rtemu_api::tls::Fingerprint;
use tokio::sync::watch;
use utoipa::OpenApi;

/// Where the Unix socket goes unless `--socket` says otherwise.
pub const DEFAULT_SOCKET: &str = "/run/rtemu/api.sock";

/// Where the TCP token goes unless `--token-file` says otherwise.
pub const DEFAULT_TOKEN_FILE: &str = "/run/rtemu/api.token";

/// How long open requests (streams, captures, commands) get to end once the server stops.
const GRACE: Duration = Duration::from_secs(5);

/// How often ended engine processes are reaped.
const REAP_EVERY: Duration = Duration::from_secs(2);

/// Where the server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The Unix socket (mode 0600, or 0660 with `group`).
    pub socket: PathBuf,
    /// The group whose members may use the Unix socket too (mode 0660, group-owned); without
    /// one only root may. The API runs programs as root in labs: membership is root's power.
    pub group: Option<String>,
    /// Also listen on this TCP address, every request needing the token.
    pub listen: Option<SocketAddr>,
    /// Where the token is written (with `listen`).
    pub token_file: PathBuf,
    /// Read the token from this file instead of drawing one (with `listen`; nothing is
    /// written): one token shared by every agent of a cluster, from a Kubernetes Secret.
    pub token_from: Option<PathBuf>,
    /// Serve TCP over TLS with this key and certificate (with `listen`).
    pub tls: Option<tls::Source>,
    /// Serve TCP in clear text on an address other than loopback all the same: the token
    /// crosses the network readable by anyone on the way ([`check_clear_text`]).
    pub insecure_listen: bool,
    /// Coordinate labs across hosts with the agents' tokens in this file (the command line's
    /// `--credentials` format): `POST /v1/labs` of a topology with `[hosts]` brings it up on
    /// their agents, and the lab's routes show and drive it whole. The API token then opens
    /// every host's agent: it is root on all of them.
    pub credentials: Option<PathBuf>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            socket: PathBuf::from(DEFAULT_SOCKET),
            group: None,
            listen: None,
            token_file: PathBuf::from(DEFAULT_TOKEN_FILE),
            token_from: None,
            tls: None,
            insecure_listen: false,
            credentials: None,
        }
    }
}

/// Refuses to serve TCP at `addr` in clear text (without `tls`) when `addr` is not a loopback
/// address, unless `insecure` says to: every request carries the token, which is root on this
/// machine, and anyone on the network's path would read it.
pub fn check_clear_text(addr: SocketAddr, tls: bool, insecure: bool) -> Result<()> {
    if tls || insecure || addr.ip().is_loopback() {
        return Ok(());
    }
    anyhow::bail!(
        "--listen {addr} is not a loopback address, and without TLS every request would carry \
         the API token (root on this machine) in clear text to anyone on the way: give \
         --tls-dir DIR (or --tls-cert and --tls-key) to serve TLS, listen on 127.0.0.1 and \
         reach it through `ssh -L`, or give --insecure-listen if no one else can see the \
         network"
    )
}

/// The agents' credentials at `path`, read and checked (owner-only, every entry well formed)
/// for a server that coordinates labs across hosts and listens on `listen`: an agent at the
/// server's own address is refused, since the coordinator would then ask itself.
pub fn coordinator(path: &Path, listen: Option<SocketAddr>) -> Result<spread::Coordinator> {
    let credentials = rtemu_cluster::Credentials::load(path)
        .with_context(|| format!("--credentials {}", path.display()))?;
    if let Some((host, _)) = credentials.addresses().find(|(_, a)| Some(*a) == listen) {
        anyhow::bail!(
            "--credentials {}: host `{host}`'s agent is this server's own --listen address: \
             a coordinating server does not coordinate itself (run the agent of `{host}` as \
             another `rtemu serve`, or coordinate from another machine)",
            path.display()
        );
    }
    Ok(std::sync::Arc::new(credentials))
}

/// The OpenAPI document's parts that are not derived from a handler.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "rtemu",
        description = "rtemu's HTTP/JSON API: labs, their nodes, links and LANs, link changes, \
                       stats, capture and exec. Over the Unix socket (default \
                       /run/rtemu/api.sock) no token is needed; over TCP every request needs \
                       `Authorization: Bearer <token>` (default token file \
                       /run/rtemu/api.token). See docs/api.md."
    ),
    paths(
        routes::openapi,
        routes::list_labs,
        routes::up,
        routes::get_lab,
        routes::down,
        routes::list_nodes,
        routes::list_links,
        routes::list_lans,
        routes::set_link,
        routes::link_down,
        routes::link_up,
        routes::schedule,
        routes::stats,
        routes::stats_stream,
        routes::metrics,
        routes::counters,
        routes::capture,
        routes::exec,
        routes::logs,
        routes::vnis,
        routes::up_part,
    ),
    modifiers(&BearerOverTcp),
    tags(
        (name = "api", description = "The API itself"),
        (name = "labs", description = "Labs: up, down, and what they are made of"),
        (name = "links", description = "Changing impaired links while traffic flows"),
        (name = "stats", description = "What the engine did, and how precisely"),
        (name = "capture", description = "Packets as pcapng"),
        (name = "exec", description = "Commands in nodes"),
        (name = "hosts", description = "An agent's part in a multi-host lab"),
    )
)]
struct ApiDoc;

/// A TCP listener and what a request on it needs: the token, and TLS when asked.
struct Tcp {
    listener: std::net::TcpListener,
    token: String,
    tls: Option<tls::AgentCert>,
}

/// Binds TCP at `addr` (non-blocking, for tokio) with `token`.
fn bind_tcp(addr: SocketAddr, token: String) -> Result<Tcp> {
    let listener =
        std::net::TcpListener::bind(addr).with_context(|| format!("listening on {addr}"))?;
    listener
        .set_nonblocking(true)
        .context("making the TCP socket non-blocking")?;
    Ok(Tcp {
        listener,
        token,
        tls: None,
    })
}

/// Declares the bearer token, which requests over TCP need.
struct BearerOverTcp;

impl utoipa::Modify for BearerOverTcp {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "token",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "Needed over TCP only: the token `rtemu serve` wrote to its token file",
                    ))
                    .build(),
            ),
        );
    }
}

/// The OpenAPI 3.1 document of the API, as served at `/openapi.json` (pretty JSON, ending in a
/// newline).
pub fn openapi_json() -> String {
    let mut text = ApiDoc::openapi()
        .to_pretty_json()
        .expect("the document serialises");
    text.push('\n');
    text
}

/// What TCP serves: the page's files without the token; the API, and every path it does not
/// know, with `token` (the `http` fuzz target serves its requests with it too).
pub fn tcp_router(app: routes::App, token: &str) -> axum::Router {
    web::router().merge(
        routes::router(app).layer(axum::middleware::from_fn_with_state(
            std::sync::Arc::<str>::from(token),
            listen::require_token,
        )),
    )
}

/// A running server: its listeners, and the files it made (removed when it stops).
pub struct Server {
    runtime: tokio::runtime::Runtime,
    shutdown: watch::Sender<bool>,
    serving: Vec<tokio::task::JoinHandle<std::io::Result<()>>>,
    tcp: Option<SocketAddr>,
    token: Option<String>,
    fingerprint: Option<Fingerprint>,
    files: Vec<listen::OwnFile>,
}

impl Server {
    /// Binds the listeners `opts` asks for, with TCP draws a token and writes it to the token
    /// file (or reads the one given), and starts serving on a runtime of its own. Needs root
    /// for the default paths.
    pub fn start(opts: &Options) -> Result<Server> {
        if let Some(addr) = opts.listen {
            check_clear_text(addr, opts.tls.is_some(), opts.insecure_listen)?;
        }
        // Checked before anything is bound or written.
        let coordinator = match &opts.credentials {
            Some(path) => Some(coordinator(path, opts.listen)?),
            None => None,
        };
        let (unix, socket) = listen::bind_unix(&opts.socket, opts.group.as_deref())?;
        let mut files = vec![socket];
        let mut tcp = match (opts.listen, &opts.token_from) {
            (None, _) => None,
            (Some(addr), Some(from)) => Some(bind_tcp(addr, listen::read_token(from)?)?),
            (Some(addr), None) => {
                let tcp = bind_tcp(addr, listen::new_token()?)?;
                files.push(listen::write_token(&opts.token_file, &tcp.token)?);
                Some(tcp)
            }
        };
        if let (Some(tcp), Some(source)) = (&mut tcp, &opts.tls) {
            tcp.tls = Some(tls::AgentCert::load(source, tcp.listener.local_addr()?)?);
        }
        Server::serve(Some(unix), tcp, files, coordinator)
    }

    /// Listens on TCP at `addr` only, with a token that is written nowhere: the caller hands
    /// it on (`rtemu view` prints the page's address with it), and it dies with the server.
    pub fn start_tcp(addr: SocketAddr) -> Result<Server> {
        Server::serve(
            None,
            Some(bind_tcp(addr, listen::new_token()?)?),
            Vec::new(),
            None,
        )
    }

    fn serve(
        unix: Option<std::os::unix::net::UnixListener>,
        tcp: Option<Tcp>,
        files: Vec<listen::OwnFile>,
        coordinator: Option<spread::Coordinator>,
    ) -> Result<Server> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("rtemu-serve")
            .enable_all()
            .build()
            .context("starting the server's runtime")?;
        let (shutdown, rx) = watch::channel(false);
        let app = routes::App::new(rx.clone()).coordinating(coordinator);
        let stopped = move || {
            let mut rx = rx.clone();
            async move {
                let _ = rx.wait_for(|stop| *stop).await;
            }
        };
        let mut serving = Vec::new();
        let _guard = runtime.enter();
        if let Some(unix) = unix {
            let unix =
                tokio::net::UnixListener::from_std(unix).context("serving the Unix socket")?;
            let router = web::router().merge(routes::router(app.clone()));
            serving.push(runtime.spawn(connections::serve(
                unix,
                router,
                connections::UNIX,
                connections::unix_peer,
                None,
                stopped(),
            )));
        }
        // Engines of labs taken down are this process's children: reaped here.
        serving.push(runtime.spawn({
            let stop = stopped();
            async move {
                let reap = async {
                    let mut every = tokio::time::interval(REAP_EVERY);
                    loop {
                        every.tick().await;
                        let _ = tokio::task::spawn_blocking(exec::reap_orphans).await;
                    }
                };
                tokio::select! {
                    () = reap => {}
                    () = stop => {}
                }
                Ok(())
            }
        }));
        let (mut addr, mut token, mut fingerprint) = (None, None, None);
        if let Some(Tcp {
            listener,
            token: secret,
            tls,
        }) = tcp
        {
            addr = Some(listener.local_addr().context("reading the TCP address")?);
            fingerprint = tls.as_ref().map(tls::AgentCert::fingerprint);
            let acceptor = tls.as_ref().map(tls::AgentCert::acceptor).transpose()?;
            let listener = tokio::net::TcpListener::from_std(listener).context("serving TCP")?;
            serving.push(runtime.spawn(connections::serve(
                listener,
                tcp_router(app, &secret),
                connections::TCP,
                connections::tcp_peer,
                acceptor,
                stopped(),
            )));
            token = Some(secret);
        }
        Ok(Server {
            runtime,
            shutdown,
            serving,
            tcp: addr,
            token,
            fingerprint,
            files,
        })
    }

    /// The TCP address it listens on (the port chosen when asked for port 0).
    pub fn tcp_addr(&self) -> Option<SocketAddr> {
        self.tcp
    }

    /// Where it listens (started with `opts`), as `rtemu serve` says it: the socket, then the
    /// TCP address with its token file, warned of when it is not a loopback address.
    pub fn describe(&self, opts: &Options) -> String {
        listening(opts, self.tcp, self.fingerprint)
    }

    /// The SHA-256 fingerprint of the certificate it serves TCP with, when over TLS.
    pub fn fingerprint(&self) -> Option<Fingerprint> {
        self.fingerprint
    }

    /// The TCP token.
    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// The address of the web view, with the token, preselecting `lab` (on TCP only: a
    /// browser does not speak HTTP over a Unix socket).
    pub fn view_url(&self, lab: Option<&str>) -> Option<String> {
        let url = web::url(self.tcp?, self.token.as_deref()?, lab);
        Some(match self.fingerprint {
            Some(_) => url.replacen("http://", "https://", 1),
            None => url,
        })
    }

    /// Serves until SIGINT or SIGTERM, then stops.
    pub fn run_until_signal(self) -> Result<()> {
        self.runtime.block_on(async {
            use tokio::signal::unix::{signal, SignalKind};
            let mut int = signal(SignalKind::interrupt()).context("catching SIGINT")?;
            let mut term = signal(SignalKind::terminate()).context("catching SIGTERM")?;
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
            anyhow::Ok(())
        })?;
        self.stop()
    }

    /// Stops: no new connections; open requests get a few seconds to end (streams end at
    /// once); the socket and the token file are removed.
    pub fn stop(self) -> Result<()> {
        let _ = self.shutdown.send(true);
        let serving = self.serving;
        let result = self.runtime.block_on(async move {
            let all = futures_util::future::join_all(serving);
            match tokio::time::timeout(GRACE, all).await {
                Ok(results) => results
                    .into_iter()
                    .map(|r| r.map_err(anyhow::Error::from)?.map_err(anyhow::Error::from))
                    .collect::<Result<Vec<()>>>()
                    .map(drop),
                // What still runs is dropped with the runtime.
                Err(_) => Ok(()),
            }
        });
        self.runtime.shutdown_timeout(Duration::from_secs(1));
        drop(self.files);
        result.context("serving")
    }
}

/// [`Server::describe`] of a server listening as `opts` say, on `tcp` too (over TLS with the
/// certificate of `fingerprint`).
fn listening(opts: &Options, tcp: Option<SocketAddr>, fingerprint: Option<Fingerprint>) -> String {
    let socket = opts.socket.display();
    let mut text = format!("serving the rtemu API on {socket} (Ctrl-C stops)");
    if let Some(group) = &opts.group {
        text += &format!("\ngroup {group} may use {socket}");
    }
    if let Some(addr) = tcp {
        if !addr.ip().is_loopback() {
            text += &format!(
                "\nwarning: {addr} is not a loopback address: anyone who reaches it with the \
                 token drives this machine's labs"
            );
            if fingerprint.is_none() {
                text += " (and, without --tls-dir, reads the token on the way)";
            }
        }
        let token = opts.token_from.as_ref().unwrap_or(&opts.token_file);
        let scheme = if fingerprint.is_some() {
            "https"
        } else {
            "http"
        };
        text += &format!("\nand on {scheme}://{addr}, token in {}", token.display());
        if let Some(f) = fingerprint {
            text += &format!(
                "\nTLS certificate SHA-256 fingerprint {f} (the coordinator's credentials \
                 pin it: `fingerprint = \"{f}\"`)"
            );
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clear_text_beyond_loopback_needs_tls_or_the_flag_that_says_so() {
        let addr = |a: &str| a.parse::<SocketAddr>().unwrap();
        for local in ["127.0.0.1:8470", "127.3.2.1:1", "[::1]:8470"] {
            check_clear_text(addr(local), false, false).unwrap();
        }
        for open in [
            "0.0.0.0:8470",
            "192.0.2.10:7781",
            "[::]:8470",
            "[2001:db8::1]:1",
        ] {
            let e = check_clear_text(addr(open), false, false).unwrap_err();
            let text = e.to_string();
            for flag in ["--tls-dir", "--tls-cert", "--insecure-listen", open] {
                assert!(text.contains(flag), "{flag} not in {text}");
            }
            check_clear_text(addr(open), true, false).unwrap();
            check_clear_text(addr(open), false, true).unwrap();
        }
    }

    #[test]
    fn a_server_says_where_it_listens_and_warns_of_an_open_address() {
        let opts = Options {
            socket: "/run/rtemu/api.sock".into(),
            group: None,
            listen: None,
            token_file: "/run/rtemu/api.token".into(),
            token_from: None,
            tls: None,
            insecure_listen: false,
            credentials: None,
        };
        let unix = listening(&opts, None, None);
        assert_eq!(
            unix,
            "serving the rtemu API on /run/rtemu/api.sock (Ctrl-C stops)"
        );
        let local = listening(&opts, Some("127.0.0.1:8470".parse().unwrap()), None);
        assert_eq!(
            local,
            format!("{unix}\nand on http://127.0.0.1:8470, token in /run/rtemu/api.token")
        );
        let open = listening(&opts, Some("0.0.0.0:8470".parse().unwrap()), None);
        assert!(
            open.contains("\nwarning: 0.0.0.0:8470 is not a loopback address"),
            "{open}"
        );
    }
}
