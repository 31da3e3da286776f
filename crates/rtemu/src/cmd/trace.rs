//! `rtemu trace`: placeholder until its crate lands in this workspace.

/// Arguments of `rtemu trace`.
#[derive(Debug, clap::Args)]
pub struct TraceArgs {}

/// Runs `rtemu trace`.
pub fn run(_args: &TraceArgs) -> anyhow::Result<()> {
    anyhow::bail!("rtemu trace is not available in this build yet")
}
