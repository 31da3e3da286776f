//! `rtemu bench`.

/// Arguments of `rtemu bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {}

/// Runs `rtemu bench`.
pub fn run(_args: &BenchArgs) -> anyhow::Result<()> {
    anyhow::bail!("rtemu bench is not available in this build yet")
}
