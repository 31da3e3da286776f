//! Files that hold secrets (API tokens, private keys): read only when no one but their owner,
//! this user, may read or write them, as ssh treats a private key. The coordinator's
//! credentials, an agent's shared token and its TLS key are all checked so.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use anyhow::{bail, Result};

/// Refuses `path` (of metadata `meta`, holding `what`) unless only its owner, this user, may
/// read or write it, as ssh refuses a private key.
pub fn owner_only(path: &Path, meta: &std::fs::Metadata, what: &str) -> Result<()> {
    let mode = meta.mode() & 0o777;
    if mode & 0o077 != 0 {
        bail!(
            "{} holds {what} but is open to group or others (mode {mode:03o}): run `chmod 600 \
             {}`",
            path.display(),
            path.display()
        );
    }
    if meta.uid() != nix::unistd::geteuid().as_raw() {
        bail!(
            "{} holds {what} but belongs to user {}, not to this user",
            path.display(),
            meta.uid()
        );
    }
    Ok(())
}
