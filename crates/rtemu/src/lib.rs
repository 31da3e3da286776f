//! The `rtemu` command line: argument parsing and report printing over the rtemu libraries.
//!
//! Each subcommand lives in `cmd/<name>.rs` and exposes a clap `Args` struct and a `run`
//! function; the work itself belongs to the library crates. The binary is [`main`]; the command
//! line is a library so that `rtemu-dist` renders the man pages and shell completions from the
//! same [`Cli`] definition. The benchmarks are not in it: they are the package's other binary,
//! `rtemu-bench` (the `rtemu-bench` crate's, arguments and all).

#![warn(missing_docs)]
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::Subcommand;
use signal_hook::consts::{SIGINT, SIGTERM};

mod cmd;

/// rtemu: a real-time network emulator for Linux.
#[derive(Debug, clap::Parser)]
#[command(
    name = "rtemu",
    version,
    about,
    long_about = None,
    max_term_width = 100,
    after_help = "Examples:
  sudo rtemu demo                                   the paper's lab, shaped, measured, removed
  sudo rtemu up examples/shaped-path.toml           a lab from a topology file
  sudo rtemu exec client -- ping -c 3 server        any program inside a node
  sudo rtemu stats --fidelity                       what the engine did, how precisely
  rtemu sim in.pcap --model \"delay 20ms loss 1%\" --out out.pcap
  rtemu trace gen fgn --hurst 0.8 --mean 5ms --std 1ms --count 1000000 -o lrd.rpl
  rtemu lab doctor                                  can this machine keep real time?
  sudo rtemu serve                                  the HTTP/JSON API on /run/rtemu/api.sock
  sudo rtemu view                                   the running lab, live, in a web browser"
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Demo(cmd::demo::DemoArgs),
    Sim(cmd::sim::SimArgs),
    Trace(cmd::trace::TraceArgs),
    Lab(cmd::lab::LabArgs),
    Up(cmd::topo::UpArgs),
    Down(cmd::topo::DownArgs),
    Ls(cmd::topo::LsArgs),
    Exec(cmd::topo::ExecArgs),
    Shell(cmd::topo::ShellArgs),
    Logs(cmd::topo::LogsArgs),
    Graph(cmd::topo::GraphArgs),
    Capture(cmd::topo::CaptureArgs),
    Stats(cmd::link::StatsArgs),
    Link(cmd::link::LinkArgs),
    Serve(cmd::serve::ServeArgs),
    View(rtemu_serve::view::ViewArgs),
    #[command(hide = true)]
    Engine(cmd::engine::EngineArgs),
}

/// The signals that end `command` as they would any program: on them its temporary output
/// files are removed first. The commands that handle a signal themselves keep it (capture
/// ends cleanly at Ctrl-C, the server and the engine stop at both).
fn ending_signals(command: &Command) -> &'static [std::ffi::c_int] {
    match command {
        Command::Serve(_) | Command::View(_) | Command::Engine(_) => &[],
        Command::Capture(_) => &[SIGTERM],
        _ => &[SIGINT, SIGTERM],
    }
}

/// `cmd` with every option of it and its subcommands taking a negative number as its value
/// (`--hurst -0.5`, `--count -5`), so a value out of range is refused with the range rather
/// than taken for an unknown flag.
fn negative_numbers_as_values(cmd: clap::Command) -> clap::Command {
    cmd.mut_args(|a| {
        if a.get_action().takes_values() {
            a.allow_negative_numbers(true)
        } else {
            a
        }
    })
    .mut_subcommands(negative_numbers_as_values)
}

/// The command line of a binary of this package (`rtemu`, `rtemu-bench`), parsed with every
/// option taking a negative number as its value (clap's own error and exit for a bad one).
pub fn parse<P: clap::Parser>() -> P {
    let matches = negative_numbers_as_values(P::command()).get_matches();
    P::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

/// Parses the arguments, runs the subcommand, and says how it ended: 0, or 2 after an error
/// printed on stderr.
pub fn main() -> ExitCode {
    let cli: Cli = parse();
    if let Err(e) = rtemu_sys::output::remove_temporaries_on(ending_signals(&cli.command)) {
        eprintln!("rtemu: error: installing the signal handlers: {e}");
        return ExitCode::from(2);
    }
    let result = match &cli.command {
        Command::Demo(args) => cmd::demo::run(args),
        Command::Sim(args) => cmd::sim::run(args),
        Command::Trace(args) => cmd::trace::run(args),
        Command::Lab(args) => cmd::lab::run(args),
        Command::Up(args) => cmd::topo::run_up(args),
        Command::Down(args) => cmd::topo::run_down(args),
        Command::Ls(args) => cmd::topo::run_ls(args),
        Command::Exec(args) => cmd::topo::run_exec(args),
        Command::Shell(args) => cmd::topo::run_shell(args),
        Command::Logs(args) => cmd::topo::run_logs(args),
        Command::Graph(args) => cmd::topo::run_graph(args),
        Command::Capture(args) => cmd::topo::run_capture(args),
        Command::Stats(args) => cmd::link::run_stats(args),
        Command::Link(args) => cmd::link::run_link(args),
        Command::Serve(args) => cmd::serve::run(args),
        Command::View(args) => rtemu_serve::view::run(args),
        Command::Engine(args) => cmd::engine::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) if rtemu_control::error::is_closed_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            // The API answers with the same text (rtemu_control::error::message).
            // An error may quote a file, a command line or a reply: shown, never obeyed.
            let message = rtemu_control::error::message(err.as_ref());
            eprintln!("rtemu: error: {}", rtemu_sys::terminal::printable(&message));
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
        negative_numbers_as_values(Cli::command()).debug_assert();
    }
}
