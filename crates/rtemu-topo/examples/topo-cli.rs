//! The `rtemu` binary's topology commands on their own, for trying and timing them before they
//! are wired into `rtemu`: `cargo run -p rtemu-topo --example topo-cli -- up FILE`.
//!
//! It compiles `crates/rtemu/src/cmd/topo.rs` itself, so what runs here is what `rtemu` runs.

#[path = "../../rtemu/src/cmd/topo.rs"]
mod topo;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    Up(topo::UpArgs),
    Down(topo::DownArgs),
    Ls(topo::LsArgs),
    Exec(topo::ExecArgs),
    Shell(topo::ShellArgs),
    Graph(topo::GraphArgs),
    Capture(topo::CaptureArgs),
}

fn main() -> anyhow::Result<()> {
    match &Cli::parse().command {
        Cmd::Up(a) => topo::run_up(a),
        Cmd::Down(a) => topo::run_down(a),
        Cmd::Ls(a) => topo::run_ls(a),
        Cmd::Exec(a) => topo::run_exec(a),
        Cmd::Shell(a) => topo::run_shell(a),
        Cmd::Graph(a) => topo::run_graph(a),
        Cmd::Capture(a) => topo::run_capture(a),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        super::Cli::command().debug_assert();
    }
}
