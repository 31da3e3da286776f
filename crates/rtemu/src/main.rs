//! The `rtemu` command line: argument parsing and report printing over the rtemu libraries.
//!
//! Each subcommand lives in `cmd/<name>.rs` and exposes a clap `Args` struct and a `run`
//! function; the work itself belongs to the library crates.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd;

/// rtemu: a real-time network emulator for Linux.
#[derive(Debug, Parser)]
#[command(name = "rtemu", version, about, long_about = None, max_term_width = 100)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Sim(cmd::sim::SimArgs),
    Bench(cmd::bench::BenchArgs),
    Trace(cmd::trace::TraceArgs),
    Lab(cmd::lab::LabArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Sim(args) => cmd::sim::run(args),
        Command::Bench(args) => cmd::bench::run(args),
        Command::Trace(args) => cmd::trace::run(args),
        Command::Lab(args) => cmd::lab::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // A closed pipe (`rtemu sim … | head`) is not an error worth reporting.
            if err
                .downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
            {
                return ExitCode::SUCCESS;
            }
            eprintln!("rtemu: error: {err:#}");
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
    }
}
