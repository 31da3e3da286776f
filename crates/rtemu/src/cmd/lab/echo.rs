//! `rtemu lab echo`: the echo server `rtemu lab rtt` measures against.

use rtemu_clock::time::format_duration_ns;
use rtemu_lab::rtt::Echo;

use super::duration_in;

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  rtemu lab echo
  rtemu lab echo --listen 0.0.0.0:7777 --duration 10m     # then, on another host:
  rtemu lab rtt --to 192.0.2.1:7777
  sudo rtemu lab echo --raw eth0 --duration 10m           # then, on another host:
  sudo rtemu lab rtt --raw eth0 --peer MAC-OF-THIS-ETH0")]
pub(super) struct EchoArgs {
    /// Address to listen on.
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:7777")]
    listen: std::net::SocketAddr,
    /// Echo raw Ethernet frames (EtherType 0x88b5) addressed to this interface, with the
    /// addresses swapped, instead of UDP (needs CAP_NET_RAW).
    #[arg(long, value_name = "IFACE", conflicts_with = "listen")]
    raw: Option<String>,
    /// Stop after this long (1ms to 24h).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = duration_in(1_000_000..=86_400_000_000_000))]
    duration: u64,
}

pub(super) fn run(args: &EchoArgs) -> anyhow::Result<()> {
    let echo = match &args.raw {
        Some(interface) => Echo::raw(interface, args.duration)?,
        None => Echo::udp(args.listen, args.duration)?,
    };
    eprintln!(
        "rtemu lab echo: echoing {} for {}",
        echo.local(),
        format_duration_ns(args.duration)
    );
    let echoed = echo.wait()?;
    eprintln!("rtemu lab echo: {echoed} probes echoed");
    Ok(())
}
