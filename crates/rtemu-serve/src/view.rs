//! `rtemu view`: the web view of a running lab in one command. It serves the API and the page
//! on localhost TCP only (no Unix socket, no token file: the token is in the address it
//! prints, and dies with it), so it runs beside an `rtemu serve` without touching its files.

use std::net::SocketAddr;

use anyhow::{bail, Context, Result};
use rtemu_topo::state::State;

use crate::Server;

/// Where `rtemu view` listens unless `--listen` says otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7780";

/// Show a running lab in a web browser: topology, live link statistics, link changes.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  sudo rtemu view                         the only running lab (or a list to choose from)
  sudo rtemu view shaped --listen 127.0.0.1:8080
  ssh -L 7780:127.0.0.1:7780 labhost      then open the printed address on your machine")]
pub struct ViewArgs {
    /// The lab to show first (default: the only one running; the page lists them all).
    pub lab: Option<String>,
    /// The loopback address and port to serve the view on.
    #[arg(long, value_name = "ADDR:PORT", default_value = DEFAULT_LISTEN)]
    pub listen: SocketAddr,
}

/// `rtemu view`: serves until Ctrl-C.
pub fn run(args: &ViewArgs) -> Result<()> {
    if !args.listen.ip().is_loopback() {
        bail!(
            "rtemu view listens on a loopback address only (127.0.0.1:PORT or [::1]:PORT), not \
             {}: reach it from elsewhere through `ssh -L`, or use `rtemu serve --listen`",
            args.listen
        );
    }
    rtemu_control::root::need_root("rtemu view")?;
    let lab = match &args.lab {
        Some(name) => Some(rtemu_topo::lab::resolve_lab(Some(name))?.lab.to_string()),
        None => match State::labs()?.as_slice() {
            [one] => Some(one.to_string()),
            _ => None,
        },
    };
    let server = Server::start_tcp(args.listen).with_context(|| {
        format!(
            "serving the view (another `rtemu view` on {}? choose a port with --listen)",
            args.listen
        )
    })?;
    let url = server
        .view_url(lab.as_deref())
        .context("the server has no TCP address")?;
    eprintln!("rtemu view: web view at {url} (Ctrl-C stops)");
    server.run_until_signal()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_loopback_address_is_taken() {
        for addr in ["0.0.0.0:7780", "192.0.2.1:80", "[::]:7780"] {
            let args = ViewArgs {
                lab: None,
                listen: addr.parse().unwrap(),
            };
            let e = run(&args).unwrap_err().to_string();
            assert!(e.contains("loopback address only"), "{addr}: {e}");
        }
    }
}
