//! One module per subcommand.

pub mod bench;
pub mod bench_engine;
pub mod bench_topo;
pub mod demo;
pub mod engine;
pub mod lab;
pub mod link;
pub mod output;
pub mod plot;
pub mod sim;
pub mod topo;
pub mod trace;

/// Whether rtemu runs as root (effective user id 0), which labs and the engine need.
pub fn is_root() -> bool {
    // The effective user id is the second field of `Uid:`.
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

/// Fails with a clear message unless rtemu runs as root.
pub fn need_root(what: &str) -> anyhow::Result<()> {
    if is_root() {
        Ok(())
    } else {
        anyhow::bail!(
            "{what} needs root: it creates network namespaces and interfaces \
             (CAP_SYS_ADMIN, CAP_NET_ADMIN); run it with sudo"
        )
    }
}
