//! `rtemu stats` and `rtemu link`: reading and steering a running lab's impaired links through
//! its engine's control socket, and the tables that show what the engine did.

use std::time::Duration;

use std::io::Write as _;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use rtemu_cluster::link::Change;
use rtemu_control::lab;
use rtemu_control::message;
use rtemu_control::message::Direction;
use rtemu_model::direction::Ways;
use rtemu_topo::state::LabName;
use rtemu_topo::topology::Netem;
use serde::Serialize;

use super::topo::Credentials;

/// Show the counters and release fidelity of a lab's impaired links.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  sudo rtemu stats
  sudo rtemu stats shaped --fidelity
  sudo rtemu stats shaped --json --watch 1")]
pub struct StatsArgs {
    /// The lab (may be left out when exactly one runs).
    pub lab: Option<LabName>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Show the release-error percentiles instead of the counters.
    #[arg(long)]
    pub fidelity: bool,
    /// Print again every this many seconds, until Ctrl-C.
    #[arg(long, value_name = "SECONDS")]
    pub watch: Option<f64>,
    #[command(flatten)]
    pub hosts: Credentials,
}

/// `rtemu stats`.
pub fn run_stats(args: &StatsArgs) -> Result<()> {
    let every = match args.watch {
        None => None,
        Some(s) if s.is_finite() && (0.05..=3600.0).contains(&s) => {
            Some(Duration::from_secs_f64(s))
        }
        Some(s) => bail!("--watch {s} is out of range: give 0.05 to 3600 seconds"),
    };
    if let Some(spread) = args.hosts.spread(args.lab.as_ref())? {
        let show = |s: &rtemu_cluster::stats::SpreadStats| {
            let threads: Vec<String> = s
                .engines
                .iter()
                .flat_map(|e| e.threads.iter().map(move |t| format!("{}: {t}", e.host)))
                .collect();
            show_stats(args, s, &s.directions, &threads)
        };
        return rtemu_cluster::stats::watch(&spread, every, show, |e| {
            eprintln!("rtemu: warning: {e}")
        });
    }
    let state = rtemu_topo::lab::resolve_lab(args.lab.as_deref())?;
    lab::watch_stats(&state, every, |s| {
        let threads: Vec<String> = s.threads.iter().map(ToString::to_string).collect();
        show_stats(args, s, &s.directions, &threads)
    })
}

/// Prints one reading of stats: `whole` as JSON with `--json`, else the table of its
/// `directions` and a line for each of the engine's release `threads`.
fn show_stats(
    args: &StatsArgs,
    whole: &impl Serialize,
    directions: &[Direction],
    threads: &[String],
) -> Result<()> {
    if args.json {
        println!("{}", message::pretty(whole));
        return Ok(());
    }
    let mut out = std::io::stdout().lock();
    message::write_table(&mut out, directions, args.fidelity).context("writing the table")?;
    for t in threads {
        writeln!(out, "{t}").context("writing the table")?;
    }
    Ok(())
}

/// Change an impaired link while traffic flows.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  sudo rtemu link set uplink delay 50ms loss 1%
  sudo rtemu link down uplink")]
pub struct LinkArgs {
    #[command(subcommand)]
    pub action: LinkAction,
}

// A link of a running lab, as every `rtemu link` action names it (no doc comment: a
// flattened struct's would replace the action's own help).
#[derive(Debug, Args)]
pub struct LinkRef {
    /// The lab (may be left out when exactly one runs).
    #[arg(long)]
    lab: Option<LabName>,
    /// The link.
    link: String,
    #[command(flatten)]
    hosts: Credentials,
}

/// What `rtemu link` does.
#[derive(Debug, Subcommand)]
pub enum LinkAction {
    /// Replace a link's netem parameters without stopping traffic (queued packets keep their
    /// release times; the new model decides from the next packet on).
    #[command(after_help = "Examples:
  sudo rtemu link set uplink delay 50ms 5ms distribution normal
  sudo rtemu link set --lab shaped uplink --dir b-a rate 1mbit limit 50")]
    Set {
        #[command(flatten)]
        at: LinkRef,
        /// Which way.
        #[arg(long, value_enum, default_value = "both")]
        dir: Ways,
        /// netem parameters, e.g. `delay 50ms loss 1%`.
        #[arg(required = true, num_args = 1.., allow_hyphen_values = true)]
        netem: Vec<String>,
    },
    /// Cut a link: it carries nothing (failure injection).
    #[command(after_help = "Examples:
  sudo rtemu link down uplink
  sudo rtemu link down --lab shaped uplink")]
    Down(LinkRef),
    /// Restore a cut link.
    #[command(after_help = "Examples:
  sudo rtemu link up uplink
  sudo rtemu link up --lab shaped uplink")]
    Up(LinkRef),
}

/// `rtemu link`.
pub fn run_link(args: &LinkArgs) -> Result<()> {
    let (at, change) = match &args.action {
        LinkAction::Set { at, dir, netem } => {
            let text = netem.join(" ");
            // Parsed before the lab is looked for, so a mistake shows without a lab.
            let netem = Netem::parse(&text)
                .with_context(|| format!("netem {}", rtemu_sys::terminal::quoted(&text)))?;
            (at, Change::Set { dir: *dir, netem })
        }
        LinkAction::Down(at) => (at, Change::Cut(true)),
        LinkAction::Up(at) => (at, Change::Cut(false)),
    };
    if let Some(spread) = at.hosts.spread(at.lab.as_ref())? {
        return Ok(rtemu_cluster::link::change(&spread, &at.link, &change)?);
    }
    let state = rtemu_topo::lab::resolve_lab(at.lab.as_deref())?;
    Ok(match change {
        Change::Set { dir, netem } => lab::set_link(&state.lab, &at.link, dir, &netem),
        Change::Cut(down) => lab::cut_link(&state.lab, &at.link, down),
    }?)
}
