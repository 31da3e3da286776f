//! `rtemu serve`: the HTTP/JSON API (docs/api.md). The server is `rtemu-serve`'s; this module
//! parses arguments.

use std::net::SocketAddr;
use std::path::PathBuf;

use std::io::IsTerminal;

use anyhow::Result;
use clap::Args;

/// Serve the HTTP/JSON API on a Unix socket (and on TCP with a token) until Ctrl-C.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  sudo rtemu serve
  sudo rtemu serve --group rtemu                    members of group rtemu may use the socket
  curl --unix-socket /run/rtemu/api.sock http://rtemu/v1/labs
  sudo rtemu serve --listen 127.0.0.1:8470
  curl -H \"Authorization: Bearer $(sudo cat /run/rtemu/api.token)\" http://127.0.0.1:8470/v1/labs
  sudo rtemu serve --listen 192.0.2.10:7781 --tls-dir /var/lib/rtemu/tls     an agent (prints
                                                   the fingerprint the credentials pin)")]
pub struct ServeArgs {
    /// The Unix socket to listen on (mode 0600: root only; no token needed).
    #[arg(long, value_name = "PATH", default_value = rtemu_serve::DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// Let this group's members use the Unix socket too (mode 0660, owned by the group), as the
    /// package's systemd unit does with group `rtemu`. The API runs programs as root inside
    /// labs: membership gives root's power, as membership of `docker` does.
    #[arg(long, value_name = "GROUP")]
    pub group: Option<String>,
    /// Also listen on TCP at this address (127.0.0.1:PORT or [::1]:PORT; another address only
    /// when you mean it: anyone who can reach it and holds the token drives your labs). Every
    /// request over TCP needs `Authorization: Bearer <token>`.
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: Option<SocketAddr>,
    /// Where to write the TCP token (mode 0600).
    #[arg(long, value_name = "PATH", default_value = rtemu_serve::DEFAULT_TOKEN_FILE)]
    pub token_file: PathBuf,
    /// Read the TCP token from this file instead of drawing one (nothing is written): one
    /// token shared by the agents of a cluster, e.g. a Kubernetes Secret (deploy/kubernetes).
    /// At least 32 printable characters; the file must be readable by its owner only.
    #[arg(
        long,
        value_name = "PATH",
        requires = "listen",
        conflicts_with = "token_file"
    )]
    pub token_from: Option<PathBuf>,
    /// Serve TCP over TLS with a key and self-signed certificate kept in this directory (only
    /// root may write it; made, mode 0700, when missing), made there the first time, so a
    /// restarted agent keeps its certificate. Prints the certificate's SHA-256 fingerprint,
    /// which the coordinator's credentials pin.
    #[arg(
        long,
        value_name = "DIR",
        requires = "listen",
        conflicts_with_all = ["tls_cert", "tls_key"]
    )]
    pub tls_dir: Option<PathBuf>,
    /// Serve TCP over TLS with this certificate (PEM; with --tls-key).
    #[arg(long, value_name = "FILE", requires_all = ["listen", "tls_key"])]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM, readable by its owner only).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Serve --listen in clear text on an address other than loopback (refused otherwise:
    /// the token, root on this machine, would cross the network readable). Only on a network
    /// no one else can see; prefer --tls-dir.
    #[arg(long, requires = "listen")]
    pub insecure_listen: bool,
    /// Print the web view's address, which holds the token, even when stderr is not a
    /// terminal (a journal, a pod's log) or the token is shared (--token-from).
    #[arg(long)]
    pub print_url: bool,
    /// Coordinate labs across hosts with the agents' tokens in this file (as `rtemu up
    /// --credentials`): `POST /v1/labs` of a topology with [hosts] brings it up on every
    /// host's agent, and the API and web view show and drive it as one lab. The API token
    /// then opens every agent: root on every host.
    #[arg(long, value_name = "FILE")]
    pub credentials: Option<PathBuf>,
    /// Print the API's OpenAPI document and exit (no root needed).
    #[arg(long)]
    pub print_openapi: bool,
}

/// `rtemu serve`.
pub fn run(args: &ServeArgs) -> Result<()> {
    if args.print_openapi {
        let document = rtemu_serve::openapi_json();
        let what = "the OpenAPI document";
        return rtemu_report::output::write_or_print(None, &[], document.as_bytes(), what);
    }
    rtemu_control::root::need_root("rtemu serve")?;
    let opts = rtemu_serve::Options {
        socket: args.socket.clone(),
        group: args.group.clone(),
        listen: args.listen,
        token_file: args.token_file.clone(),
        token_from: args.token_from.clone(),
        tls: match (&args.tls_dir, &args.tls_cert, &args.tls_key) {
            (Some(dir), _, _) => Some(rtemu_serve::tls::Source::Dir(dir.clone())),
            (None, Some(cert), Some(key)) => Some(rtemu_serve::tls::Source::Files {
                cert: cert.clone(),
                key: key.clone(),
            }),
            _ => None,
        },
        insecure_listen: args.insecure_listen,
        credentials: args.credentials.clone(),
    };
    let server = rtemu_serve::Server::start(&opts)?;
    eprintln!("{}", server.describe(&opts));
    if let Some(url) = server.view_url(None) {
        let terminal = std::io::stderr().is_terminal();
        if rtemu_serve::web::print_url(args.print_url, terminal, args.token_from.is_some()) {
            eprintln!("rtemu serve: web view at {url}");
        } else {
            eprintln!(
                "rtemu serve: the web view's address holds the token and is not printed here \
                 (--print-url prints it)"
            );
        }
    }
    server.run_until_signal()?;
    eprintln!("stopped serving");
    Ok(())
}
