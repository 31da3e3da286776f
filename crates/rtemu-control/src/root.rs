//! Whether this process may make labs: namespaces and interfaces need root.

/// Whether the process runs as root (effective user id 0), which labs and the engine need.
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

/// Fails with a clear message, naming `what` needs it, unless the process runs as root.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn need_root_agrees_with_is_root_and_names_what_needs_it() {
        match need_root("rtemu up") {
            Ok(()) => assert!(is_root()),
            Err(e) => {
                assert!(!is_root());
                assert!(e.to_string().starts_with("rtemu up needs root: "), "{e}");
            }
        }
    }
}
