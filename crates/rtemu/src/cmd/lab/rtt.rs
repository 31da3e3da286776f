//! `rtemu lab rtt`: round trips per size against `rtemu lab echo`, here or between two nodes
//! of a lab.

use anyhow::Context as _;
use rtemu_control::lab as control;
use rtemu_lab::rtt::plan::{Here, Named, Probes, Protocol};
use rtemu_lab::rtt::{self, between, Mac};
use rtemu_report::lab::RttReport;
use rtemu_report::progress::Steps;
use rtemu_topo::lab;

use super::{duration_in, prepare, OutputArgs, RtArgs};

/// The round trips `rtemu lab rtt` measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ProtocolArg {
    /// UDP datagrams to `rtemu lab echo --listen`.
    Udp,
    /// Raw Ethernet frames to `rtemu lab echo --raw`.
    Raw,
    /// UDP, then raw Ethernet, reported side by side.
    Both,
}

impl From<ProtocolArg> for Protocol {
    fn from(protocol: ProtocolArg) -> Protocol {
        match protocol {
            ProtocolArg::Udp => Protocol::Udp,
            ProtocolArg::Raw => Protocol::Raw,
            ProtocolArg::Both => Protocol::Both,
        }
    }
}

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  rtemu lab rtt
  rtemu lab rtt --min-size 64 --max-size 1024 --step 64 --count 1000 --json --plot rtt.png
  rtemu lab echo --listen 0.0.0.0:7777 --duration 10m     # on the far host, then here:
  rtemu lab rtt --to 192.0.2.10:7777 --half-rtt --csv rtt.csv
  sudo rtemu lab echo --raw eth0 --duration 10m           # on the far host, then here:
  sudo rtemu lab rtt --raw eth0 --peer 02:00:5e:10:00:01 --plot raw.svg
  sudo rtemu lab rtt --protocol both --to 192.0.2.10:7777 --raw eth0 --peer 02:00:5e:10:00:01
  sudo rtemu lab rtt --lab demo --from a --to b --count 1000
  sudo rtemu lab rtt --lab demo --from a --to b --protocol both --plot rtt.svg")]
pub(super) struct RttArgs {
    /// Which round trips: udp, raw (Ethernet frames), or both, UDP first [default: udp, or
    /// raw when --raw is given].
    #[arg(long, value_enum)]
    protocol: Option<ProtocolArg>,
    /// The UDP echo server (`rtemu lab echo`), ADDR:PORT; with --from, the lab node to start
    /// the echo servers in. Default: a UDP echo started on 127.0.0.1 for the run.
    #[arg(long, value_name = "ADDR:PORT|NODE")]
    to: Option<String>,
    /// Run the sweeps inside this node of a running lab, against echo servers started in the
    /// --to node for the run (raw Ethernet: on the interface facing this node).
    #[arg(long, value_name = "NODE", requires = "to", conflicts_with = "raw")]
    from: Option<String>,
    /// The lab of --from and --to (default: the only one running).
    #[arg(long, value_name = "LAB", requires = "from")]
    lab: Option<String>,
    /// The UDP port of the echo server started with --from.
    #[arg(long, default_value_t = 7777, requires = "from")]
    port: u16,
    /// The interface raw Ethernet frames (EtherType 0x88b5) leave on, to the
    /// `rtemu lab echo --raw` at --peer (needs CAP_NET_RAW).
    #[arg(long, value_name = "IFACE", requires = "peer")]
    raw: Option<String>,
    /// The MAC address of the raw echo's interface (`ip link` on its host shows it).
    #[arg(long, value_name = "MAC", requires = "raw")]
    peer: Option<Mac>,
    /// Smallest size, bytes, in each protocol's own unit: UDP payload (12–1472, default 16)
    /// or Ethernet frame for raw (60–1514, default 64).
    #[arg(long)]
    min_size: Option<usize>,
    /// Largest size, bytes (default 1472 for UDP, 1514 for raw).
    #[arg(long)]
    max_size: Option<usize>,
    /// Size increment, bytes (default 182 for UDP, 145 for raw: nine and eleven sizes).
    #[arg(long)]
    step: Option<usize>,
    /// Measured round trips per size (the paper's NUM_MEASUREMENTS).
    #[arg(long, default_value_t = 100, value_parser = crate::cmd::number_in::<u64>(1..=1_000_000))]
    count: u64,
    /// Discarded round trips before each size.
    #[arg(long, default_value_t = 10, value_parser = crate::cmd::number_in::<u64>(0..=1_000_000))]
    warmup: u64,
    /// How long to wait for each reply before counting the probe lost (1ms to 60s).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = duration_in(1_000_000..=60_000_000_000))]
    timeout: u64,
    /// Report one-way times (half the round trip).
    #[arg(long)]
    half_rtt: bool,
    #[command(flatten)]
    rt: RtArgs,
    #[command(flatten)]
    output: OutputArgs,
}

impl RttArgs {
    /// The sizes and probes asked for.
    fn probes(&self) -> Probes {
        Probes {
            min_size: self.min_size,
            max_size: self.max_size,
            step: self.step,
            count: self.count,
            warmup: self.warmup,
            timeout_ns: self.timeout,
        }
    }
}

pub(super) fn run(args: &RttArgs) -> anyhow::Result<()> {
    let named = Named {
        udp: args.to.is_some(),
        raw: args.raw.is_some(),
        in_lab: args.from.is_some(),
    };
    let protocol = Protocol::choose(args.protocol.map(Protocol::from), named)?;
    if let Some(from) = &args.from {
        return run_in_lab(args, protocol, from);
    }
    let raw = args.raw.clone().zip(args.peer);
    let here = Here::start(protocol, args.to.as_deref(), raw)?;
    let probes = args.probes();
    let (configs, sizes) = probes.sweeps(here.targets.iter().cloned())?;
    args.output.check(&[])?;
    let conditions = prepare(&args.rt)?;
    let bar = Steps::new(sizes);
    let sweeps = rtt::run_all(&configs, &mut |protocol, size| {
        bar.next(format!("{protocol} {size} bytes"));
    });
    bar.finish();
    let header = conditions.end();
    let local_echo = here.local_echo();
    drop(here);
    let runs = (configs, sweeps?);
    let report = RttReport::new(header, runs, args.half_rtt, local_echo, &probes);
    args.output.emit(&report)
}

/// `rtemu lab rtt --lab LAB --from A --to B`: the sweeps run inside node A by this program,
/// against echo servers it starts in node B for the run.
fn run_in_lab(args: &RttArgs, protocol: Protocol, from: &str) -> anyhow::Result<()> {
    let to = args.to.as_deref().context("--from needs --to NODE")?;
    let state = lab::resolve_lab(args.lab.as_deref())?;
    let exe = std::env::current_exe().context("finding this program")?;
    let forwarded = between::forwarded_args(std::env::args_os().skip(1));
    let sweeps = (protocol, args.port, &args.probes());
    control::rtt_between(&state, (from, to), sweeps, (&exe, &forwarded), &mut |leg| {
        eprintln!("rtemu lab rtt: lab `{}`, {}", state.lab, leg.description)
    })
}

#[cfg(test)]
mod tests {
    use super::super::{parse, LabCommand};

    #[test]
    fn rtt_flags_need_their_partners() {
        assert!(matches!(
            parse(&["rtt", "--raw", "eth0", "--peer", "02:00:5e:10:00:01"]),
            Ok(LabCommand::Rtt(_))
        ));
        for bad in [
            &["rtt", "--raw", "eth0"][..],
            &["rtt", "--peer", "02:00:5e:10:00:01"],
            &["rtt", "--protocol", "tcp"],
            &["echo", "--raw", "eth0", "--listen", "0.0.0.0:7"],
            &["rtt", "--from", "a"],
            // A lab finds the interfaces itself.
            &[
                "rtt",
                "--from",
                "a",
                "--to",
                "b",
                "--raw",
                "eth0",
                "--peer",
                "02:00:5e:10:00:01",
            ],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        let err = parse(&["rtt", "--raw", "eth0", "--peer", "02:00:5e:10:00"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("bad MAC address"), "{err}");
    }
}
