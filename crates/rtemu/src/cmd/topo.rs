//! `rtemu up`, `down`, `ls`, `exec`, `shell` and `graph`: virtual networks from a topology
//! file. The work is `rtemu-topo`'s; this module parses arguments and prints.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use rtemu_cluster::spread::Spread;
use rtemu_control::engine::EngineOptions;
use rtemu_control::lab as control;
use rtemu_topo::lab;
use rtemu_topo::state::{LabName, State};
use rtemu_topo::Topology;

use super::engine;

/// Bring a lab up from a topology file.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  sudo rtemu up examples/shaped-path.toml
  sudo rtemu up examples/east-west-north.toml --name ewn2 --engine-wait spin --engine-cpu 1")]
pub struct UpArgs {
    /// The topology file (TOML; see docs/topology.md).
    pub file: PathBuf,
    /// Run the lab under this name instead of the file's `lab`.
    #[arg(long, value_name = "LAB")]
    pub name: Option<LabName>,
    /// Bring an existing lab of the same name down first.
    #[arg(long)]
    pub replace: bool,
    #[command(flatten)]
    pub engine: engine::EngineFlags,
    #[command(flatten)]
    pub hosts: Credentials,
}

// The agents' tokens, for a lab across hosts (no doc comment: a flattened struct's would
// replace the command's own help).
#[derive(Debug, Args)]
pub struct Credentials {
    /// The agents' tokens of a lab with [hosts] (a root-only file of `host = "token"` lines).
    #[arg(long, value_name = "FILE", default_value = rtemu_cluster::DEFAULT_CREDENTIALS)]
    pub credentials: PathBuf,
}

impl Credentials {
    /// Lab `lab` when it runs across hosts (see [`Spread::open`]).
    pub fn spread(&self, lab: Option<&LabName>) -> Result<Option<Spread>> {
        lab.map_or(Ok(None), |l| Spread::open(l, &self.credentials))
    }
}

/// Remove a lab and everything it made.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  sudo rtemu down shaped
  sudo rtemu down shaped --fidelity shaped-fidelity.json
  sudo rtemu down --all")]
pub struct DownArgs {
    /// The lab to remove.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub lab: Option<LabName>,
    /// Remove every lab.
    #[arg(long)]
    pub all: bool,
    /// Write the engine's final report (counters and release fidelity of every impaired
    /// link) to this JSON file; it is printed as a table either way.
    #[arg(long, value_name = "FILE.json")]
    pub fidelity: Option<PathBuf>,
    #[command(flatten)]
    pub hosts: Credentials,
}

/// List running labs with their nodes, links and addresses.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  sudo rtemu ls
  sudo rtemu ls shaped --json")]
pub struct LsArgs {
    /// Only this lab.
    pub lab: Option<LabName>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub hosts: Credentials,
}

/// Run a command in a node; exits with the command's own exit code (with --detach: starts it
/// in the background, prints its pid and exits).
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  sudo rtemu exec client -- ping -c 3 server
  sudo rtemu exec --lab shaped --detach server -- iperf3 -s")]
pub struct ExecArgs {
    /// The lab (may be left out when exactly one runs).
    #[arg(long)]
    pub lab: Option<LabName>,
    /// Start the command in the background and print its pid: in its own process group, input
    /// from /dev/null, output in /run/rtemu/<lab>/<node>.<n>.log; `rtemu ls` lists it and
    /// `rtemu down` ends it.
    #[arg(short = 'd', long)]
    pub detach: bool,
    /// In a node with a container: run in the node's network namespace, outside the container
    /// (with the host's file system), as in a node without one.
    #[arg(long)]
    pub netns: bool,
    /// The node.
    pub node: String,
    /// The command and its arguments (after `--`).
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// Open an interactive shell in a node.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  sudo rtemu shell router
  sudo rtemu shell --lab shaped server")]
pub struct ShellArgs {
    /// The lab (may be left out when exactly one runs).
    #[arg(long)]
    pub lab: Option<LabName>,
    /// In a node with a container: a shell in the node's network namespace, outside the
    /// container.
    #[arg(long)]
    pub netns: bool,
    /// The node.
    pub node: String,
}

/// Print a node's output: its container's, or its start-up commands'.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  sudo rtemu logs web
  sudo rtemu logs --lab shop db --follow --tail 20")]
pub struct LogsArgs {
    /// The lab (may be left out when exactly one runs).
    #[arg(long)]
    pub lab: Option<LabName>,
    /// Keep printing what follows until Ctrl-C.
    #[arg(short = 'f', long)]
    pub follow: bool,
    /// Only the last N lines.
    #[arg(long, value_name = "N")]
    pub tail: Option<u32>,
    /// The node.
    pub node: String,
}

/// Picture formats of `rtemu graph`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GraphFormat {
    /// Graphviz DOT.
    Dot,
    /// SVG, drawn by Graphviz's `dot -Tsvg` (Debian package graphviz).
    Svg,
    /// Mermaid flowchart.
    Mermaid,
}

/// Print a lab's topology as a graph.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  rtemu graph examples/east-west-north.toml
  rtemu graph examples/east-west-north.toml --format svg -o ewn.svg
  sudo rtemu graph shaped --format mermaid")]
pub struct GraphArgs {
    /// A running lab, or a topology file.
    pub lab: String,
    /// Output format.
    #[arg(long, value_enum, default_value = "dot")]
    pub format: GraphFormat,
    /// Write to this file instead of standard output.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// Capture packets of several node interfaces into one pcapng file.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  sudo rtemu capture uplink -w uplink.pcapng --duration 10
  sudo rtemu capture --lab shaped client:eth0 server:eth0 -w run.pcapng --count 1000")]
pub struct CaptureArgs {
    /// The lab (may be left out when exactly one runs).
    #[arg(long)]
    pub lab: Option<LabName>,
    /// Interfaces as NODE:IF, or a link's name for both its ends (for an impaired link: each
    /// frame as a node sent it into the engine, and as the engine released it to the other
    /// node; the file marks which way each crossed). Default: every interface of every node.
    pub interfaces: Vec<String>,
    /// The pcapng file to write.
    #[arg(short = 'w', long = "write", value_name = "FILE.pcapng")]
    pub write: PathBuf,
    /// Stop after this many seconds (default: at Ctrl-C; a lab across hosts stops at 3600 at
    /// most).
    #[arg(long, value_name = "SECONDS")]
    pub duration: Option<f64>,
    /// Stop after this many packets.
    #[arg(long)]
    pub count: Option<u64>,
    #[command(flatten)]
    pub hosts: Credentials,
}

/// `rtemu up`.
pub fn run_up(args: &UpArgs) -> Result<()> {
    let topo = control::load(&args.file, args.name.as_ref())?;
    // After the file's checks, so its errors show without root too.
    rtemu_control::root::need_root("rtemu up")?;
    let credentials = &args.hosts.credentials;
    if !topo.hosts.is_empty() {
        let up = if args.replace {
            rtemu_cluster::replace(&topo, &args.file, credentials)?
        } else {
            rtemu_cluster::up(&topo, &args.file, credentials)?
        };
        eprintln!("{up}");
        return Ok(());
    }
    if args.replace {
        lab::down(&topo.lab)?;
    }
    bring_up(
        &topo,
        &args.file.display().to_string(),
        &args.engine.options(),
    )
    .map(drop)
}

/// Brings `topo` up with its engine (see [`control::up`]) and says so on standard error.
pub fn bring_up(topo: &Topology, file: &str, engine: &EngineOptions) -> Result<State> {
    let up = control::up(topo, file, engine)?;
    eprintln!("{up}");
    Ok(up.state)
}

/// `rtemu down`.
pub fn run_down(args: &DownArgs) -> Result<()> {
    let labs = if args.all {
        State::labs()?
    } else {
        args.lab.iter().cloned().collect()
    };
    let mut failed = false;
    for name in labs {
        // One lab failing to go down must not keep the others up.
        let fidelity = args.fidelity.as_deref();
        let down = rtemu_cluster::take_down(
            &name,
            &args.hosts.credentials,
            fidelity,
            &mut std::io::stdout().lock(),
            &mut std::io::stderr().lock(),
        );
        match down {
            Ok(true) => eprintln!("lab {name} is down"),
            Ok(false) => eprintln!("no lab {name}: nothing to do"),
            Err(e) => {
                let e = rtemu_control::error::message(e.as_ref());
                let e = rtemu_sys::terminal::printable(&e);
                eprintln!("rtemu: error: lab {name}: {e}");
                failed = true;
            }
        }
    }
    if failed {
        bail!("some labs could not be removed");
    }
    Ok(())
}

/// `rtemu ls`.
pub fn run_ls(args: &LsArgs) -> Result<()> {
    let listing = rtemu_cluster::listing::list(args.lab.as_ref(), &args.hosts.credentials)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&listing)?);
    } else {
        let mut out = std::io::stdout().lock();
        listing.write(&mut out).context("writing the list")?;
    }
    // The others are listed; each unreadable one is named, and the listing fails, as `ls`
    // does with an entry it cannot read.
    for u in &listing.unreadable {
        eprintln!(
            "rtemu: warning: lab `{}` is not listed: {}",
            u.lab,
            rtemu_control::error::message(&u.error)
        );
    }
    if !listing.unreadable.is_empty() {
        bail!(
            "{} lab directories hold no state rtemu can read",
            listing.unreadable.len()
        );
    }
    Ok(())
}

/// Waits for `cmd` and exits with its exit code (128 + signal when a signal ended it, as a
/// shell reports it).
fn exit_with(mut cmd: Command, what: &str) -> Result<()> {
    let status = cmd.status().with_context(|| format!("running {what}"))?;
    let code = status
        .code()
        .or_else(|| std::os::unix::process::ExitStatusExt::signal(&status).map(|s| 128 + s))
        .unwrap_or(1);
    std::process::exit(code);
}

/// `rtemu exec`.
pub fn run_exec(args: &ExecArgs) -> Result<()> {
    let state = lab::resolve_lab(args.lab.as_deref())?;
    if args.detach {
        let d = lab::exec_detached(&state, &args.node, &args.command, args.netns)?;
        println!("{}", d.pid);
        eprintln!("{}", d.started(&state.lab));
        return Ok(());
    }
    let cmd = lab::exec_command(&state, &args.node, &args.command, args.netns, true)?;
    exit_with(
        cmd,
        &format!("`{}` in node {}", args.command.join(" "), args.node),
    )
}

/// `rtemu shell`.
pub fn run_shell(args: &ShellArgs) -> Result<()> {
    let state = lab::resolve_lab(args.lab.as_deref())?;
    let in_container = !args.netns && rtemu_topo::launch::has_container(&state, &args.node);
    // An image has its own shells: the host's $SHELL may not be among them.
    let shell = match std::env::var("SHELL") {
        Ok(s) if !in_container => s,
        _ => "/bin/sh".to_owned(),
    };
    let argv = std::slice::from_ref(&shell);
    let mut cmd = lab::exec_command(&state, &args.node, argv, args.netns, true)?;
    // The prompt shows where the shell runs (shells that read PS1 from the environment).
    cmd.env("PS1", format!("[{}:{}] \\w # ", state.lab, args.node));
    exit_with(cmd, &format!("a shell in node {}", args.node))
}

/// `rtemu logs`.
pub fn run_logs(args: &LogsArgs) -> Result<()> {
    let state = lab::resolve_lab(args.lab.as_deref())?;
    let cmd = lab::logs_command(&state, &args.node, args.follow, args.tail)?;
    exit_with(cmd, &format!("the logs of node {}", args.node))
}

/// `rtemu graph`.
pub fn run_graph(args: &GraphArgs) -> Result<()> {
    let (topo, file) = control::topology_named(&args.lab)?;
    let text = match args.format {
        GraphFormat::Dot => rtemu_topo::graph::dot(&topo),
        GraphFormat::Svg => rtemu_topo::graph::svg(&topo)?,
        GraphFormat::Mermaid => rtemu_topo::graph::mermaid(&topo),
    };
    // The file, and the traces and tables it names.
    let named = control::files_named(&topo);
    let inputs: Vec<&std::path::Path> = file.iter().chain(&named).map(|p| p.as_path()).collect();
    let output = args.output.as_deref();
    rtemu_report::output::write_or_print(output, &inputs, text.as_bytes(), "the graph")
}

/// `rtemu capture`.
pub fn run_capture(args: &CaptureArgs) -> Result<()> {
    let duration = match args.duration {
        None => None,
        Some(s) if s.is_finite() && s > 0.0 && s <= 1e9 => {
            Some(std::time::Duration::from_secs_f64(s))
        }
        Some(s) => bail!("--duration {s} is out of range: give a number of seconds above 0"),
    };
    let file = args.write.display();
    let limits = (duration, args.count);
    let packets = match args.hosts.spread(args.lab.as_ref())? {
        Some(spread) => rtemu_cluster::capture::capture_to_file(
            &spread,
            &args.interfaces,
            &args.write,
            limits,
            |names| {
                eprintln!(
                    "capturing {} into {file} across hosts (Ctrl-C stops)",
                    names.join(" ")
                )
            },
        )?,
        None => {
            let state = lab::resolve_lab(args.lab.as_deref())?;
            control::capture_to_file(&state, &args.interfaces, &args.write, limits, |names| {
                eprintln!("capturing {} into {file} (Ctrl-C stops)", names.join(" "))
            })?
        }
    };
    eprintln!("{packets} packets written to {file}");
    // An empty capture is a result (a quiet link), but not one to take for a capture that
    // worked: said apart, as `sim --out` says a run that delivered nothing.
    if packets == 0 {
        eprintln!("rtemu: warning: no packet was captured: {file} holds none");
    }
    Ok(())
}
