//! `rtemu sim`.

/// Arguments of `rtemu sim`.
#[derive(Debug, clap::Args)]
pub struct SimArgs {}

/// Runs `rtemu sim`.
pub fn run(_args: &SimArgs) -> anyhow::Result<()> {
    anyhow::bail!("rtemu sim is not available in this build yet")
}
