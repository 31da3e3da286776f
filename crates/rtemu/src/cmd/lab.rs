//! `rtemu lab`: placeholder until its crate lands in this workspace.

/// Arguments of `rtemu lab`.
#[derive(Debug, clap::Args)]
pub struct LabArgs {}

/// Runs `rtemu lab`.
pub fn run(_args: &LabArgs) -> anyhow::Result<()> {
    anyhow::bail!("rtemu lab is not available in this build yet")
}
