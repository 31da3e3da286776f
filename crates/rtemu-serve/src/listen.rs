//! Where the server listens, and who may talk to it: a Unix socket that only root can open
//! (the file's mode is the access control), and optionally TCP, where every request carries the
//! bearer token the server wrote to a root-only file.

use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rtemu_api::secret::owner_only;
use rtemu_topo::state::{state_root, trusted_dir, STATE_ROOT};

use crate::error::ApiError;

/// Checks that `path`'s directory is one only root can write (rtemu's state root is made when
/// missing), so no one else can put a file where the server's socket or token goes.
fn check_parent(path: &Path) -> Result<&Path> {
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if parent == Path::new(STATE_ROOT) {
        state_root()?;
    } else if !trusted_dir(parent)? {
        bail!("{} does not exist", parent.display());
    }
    Ok(parent)
}

/// A file the server made, removed when the server stops, unless something else has taken its
/// place meanwhile.
#[derive(Debug)]
pub struct OwnFile {
    path: PathBuf,
    dev: u64,
    ino: u64,
}

impl OwnFile {
    fn at(path: &Path) -> io::Result<OwnFile> {
        let meta = std::fs::symlink_metadata(path)?;
        Ok(OwnFile {
            path: path.to_owned(),
            dev: meta.dev(),
            ino: meta.ino(),
        })
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for OwnFile {
    fn drop(&mut self) {
        let ours = std::fs::symlink_metadata(&self.path)
            .is_ok_and(|m| m.dev() == self.dev && m.ino() == self.ino);
        if ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// A fresh private directory beside `path` (mode 0700), where a file is made whole before it is
/// renamed to `path`, so no one sees or opens it half-made.
struct Staging(PathBuf);

impl Staging {
    fn beside(path: &Path, parent: &Path) -> Result<Staging> {
        let name = path.file_name().context("the path names no file")?;
        let dir = parent.join(format!(
            ".{}.{}.new",
            name.to_string_lossy(),
            std::process::id()
        ));
        // A leftover of a server that died here with the same pid.
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .with_context(|| format!("creating {}", dir.display()))?;
        Ok(Staging(dir))
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Binds the Unix socket at `path` with mode 0600, or 0660 owned by `group` when given. An
/// existing socket is replaced only when no server answers on it (one left by a server that
/// died); anything else at `path` is refused. The socket is bound in a private directory and
/// renamed into place, so it is never open to others, not even for a moment.
pub fn bind_unix(
    path: &Path,
    group: Option<&str>,
) -> Result<(std::os::unix::net::UnixListener, OwnFile)> {
    let parent = check_parent(path)?;
    let gid = group.map(group_id).transpose()?;
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("examining {}", path.display())),
        Ok(m) if !m.file_type().is_socket() => bail!(
            "{} exists and is not a socket: rtemu serve does not replace it; remove it or \
             choose another path with --socket",
            path.display()
        ),
        Ok(_) => {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                bail!(
                    "a server already listens on {} (another `rtemu serve`?)",
                    path.display()
                );
            }
        }
    }
    let staging = Staging::beside(path, parent)?;
    let fresh = staging.0.join("sock");
    let listener = std::os::unix::net::UnixListener::bind(&fresh)
        .with_context(|| format!("binding {}", fresh.display()))?;
    if let Some(gid) = gid {
        std::os::unix::fs::chown(&fresh, None, Some(gid))
            .with_context(|| format!("giving {} to group {gid}", fresh.display()))?;
    }
    let mode = if gid.is_some() { 0o660 } else { 0o600 };
    std::fs::set_permissions(&fresh, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("setting the mode of {}", fresh.display()))?;
    std::fs::rename(&fresh, path).with_context(|| format!("creating {}", path.display()))?;
    let own = OwnFile::at(path).with_context(|| format!("examining {}", path.display()))?;
    listener
        .set_nonblocking(true)
        .context("making the socket non-blocking")?;
    Ok((listener, own))
}

/// The id of the group named `name`.
fn group_id(name: &str) -> Result<u32> {
    match nix::unistd::Group::from_name(name) {
        Ok(Some(group)) => Ok(group.gid.as_raw()),
        Ok(None) => bail!(
            "there is no group named {name:?}: make it with `groupadd --system {name}` (the \
             package does), or leave out --group"
        ),
        Err(e) => Err(e).with_context(|| format!("looking up group {name:?}")),
    }
}

/// The API token: 32 bytes from the operating system's random generator, in hex.
pub fn new_token() -> Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("drawing the API token: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Writes `token` to a new file at `path` (mode 0600), in a directory only root can write:
/// whole into a private file first, then renamed into place without replacing anything. A
/// file already at `path` is refused, since it may be anything of root's (a lab's
/// `state.json`): only a token left at the default path by a server that died, a regular
/// file in rtemu's own directory, is replaced. The server removes the file when it stops, if
/// it is still the one it made.
pub fn write_token(path: &Path, token: &str) -> Result<OwnFile> {
    let parent = check_parent(path)?;
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("examining {}", path.display())),
        Ok(m) if m.is_file() && path == Path::new(crate::DEFAULT_TOKEN_FILE) => {
            std::fs::remove_file(path).with_context(|| format!("removing {}", path.display()))?;
        }
        Ok(_) => bail!(
            "{} exists: rtemu serve writes its token to a new file and replaces nothing; \
             remove it (if it is an old token) or choose another path with --token-file",
            path.display()
        ),
    }
    let staging = Staging::beside(path, parent)?;
    let fresh = staging.0.join("token");
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&fresh)
        .and_then(|mut f| {
            f.write_all(format!("{token}\n").as_bytes())?;
            f.sync_all()
        });
    written.with_context(|| format!("writing {}", fresh.display()))?;
    nix::fcntl::renameat2(
        None,
        &fresh,
        None,
        path,
        nix::fcntl::RenameFlags::RENAME_NOREPLACE,
    )
    .map_err(io::Error::from)
    .with_context(|| format!("creating {}", path.display()))?;
    OwnFile::at(path).with_context(|| format!("examining {}", path.display()))
}

/// The fewest characters a token read with `--token-from` may have: as many as a drawn token
/// has bytes, so a shared token is not much weaker than a drawn one.
pub const MIN_TOKEN_LEN: usize = 32;

/// The most bytes of a token file read.
const MAX_TOKEN_FILE: u64 = 4096;

/// Reads the token of `path` (a Kubernetes Secret mounted in every agent's pod, say): one line
/// of at least [`MIN_TOKEN_LEN`] printable characters, in a regular file that only its owner,
/// this user, may read, as `rtemu_cluster::Credentials` demands of the coordinator's copy.
/// The file is opened once (non-blocking: a FIFO is refused, not waited on) and every check
/// is made on that descriptor, so a link flipped meanwhile cannot pass one file's checks and
/// give another's token. The errors never show the file's content.
pub fn read_token(path: &Path) -> Result<String> {
    use std::io::Read as _;
    // Followed: a Secret's file is a symbolic link into the volume's current data.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path)
        .with_context(|| format!("reading the token from {}", path.display()))?;
    let meta = file
        .metadata()
        .with_context(|| format!("reading the token from {}", path.display()))?;
    if !meta.is_file() {
        bail!(
            "{} is not a regular file: give the token's file",
            path.display()
        );
    }
    owner_only(path, &meta, "the API token")?;
    let mut text = Vec::new();
    file.take(MAX_TOKEN_FILE + 1)
        .read_to_end(&mut text)
        .with_context(|| format!("reading {}", path.display()))?;
    let token = text.strip_suffix(b"\n").unwrap_or(&text);
    if token.len() < MIN_TOKEN_LEN
        || text.len() as u64 > MAX_TOKEN_FILE
        || !token.iter().all(u8::is_ascii_graphic)
    {
        bail!(
            "{} must hold one line of at least {MIN_TOKEN_LEN} printable characters without \
             spaces (e.g. `openssl rand -hex 32`)",
            path.display()
        );
    }
    Ok(String::from_utf8_lossy(token).into_owned())
}

/// Compares in time that depends only on the lengths, so a caller learns nothing from how long
/// a wrong token takes to refuse.
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// The token of an `Authorization` value `Bearer <token>`; the scheme's case does not matter
/// (RFC 9110, section 11.1).
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then_some(token)
}

/// Lets a request through only with `Authorization: Bearer <token>`; anything else is a 401.
pub async fn require_token(
    State(token): State<std::sync::Arc<str>>,
    request: Request,
    next: Next,
) -> Response {
    let given = request
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token);
    match given {
        Some(t) if same(t.trim().as_bytes(), token.as_bytes()) => next.run(request).await,
        Some(_) => ApiError::new(
            axum::http::StatusCode::UNAUTHORIZED,
            "the bearer token is wrong: use the one `rtemu serve` wrote to its token file",
        )
        .into_response(),
        None => ApiError::new(
            axum::http::StatusCode::UNAUTHORIZED,
            "requests over TCP need `Authorization: Bearer <token>`, with the token `rtemu \
             serve` wrote to its token file (default /run/rtemu/api.token)",
        )
        .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_64_hex_digits_and_differ() {
        let a = new_token().unwrap();
        let b = new_token().unwrap();
        assert_eq!(a.len(), 64);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        for v in ["Bearer t0k", "bearer t0k", "BEARER t0k", "bEaReR t0k"] {
            assert_eq!(bearer_token(v), Some("t0k"), "{v}");
        }
        for v in ["Basic t0k", "Bearert0k", "Bearer", "t0k"] {
            assert_eq!(bearer_token(v), None, "{v}");
        }
    }

    #[test]
    fn comparison_needs_every_byte() {
        assert!(same(b"abcd", b"abcd"));
        assert!(!same(b"abcd", b"abce"));
        assert!(!same(b"abcd", b"abc"));
        assert!(!same(b"", b"a"));
    }
}
