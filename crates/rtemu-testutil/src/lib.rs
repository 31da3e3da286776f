//! Helpers for rtemu's own tests, shared by every crate's test suite instead of copied into
//! each: whether a test that needs root or a program may run, and saying why it skips; what a
//! lab left behind, and what a capture holds; [`multihost`], the multi-host tests' hosts
//! on one machine (which `rtemu-bench topo --hosts` builds its cluster on too); and [`probe`],
//! the independent one-way timing probe of the precision tests and `rtemu-bench precision`.
//!
//! A test that cannot run here prints why and passes, so `cargo test` works for anyone; CI
//! sets `RTEMU_REQUIRE_ROOT=1`, under which a skip is a failure instead, so nothing that
//! should run there is skipped quietly.
// Only `alloc_count` may hold `unsafe`: a global allocator cannot be written without it.
#![deny(unsafe_code)]
#![warn(missing_docs)]
// Every unsafe block says why it is sound.
#![deny(clippy::undocumented_unsafe_blocks)]

use std::io::Write;
use std::path::Path;
use std::process::Command;

pub mod alloc_count;
pub mod multihost;
pub mod probe;

/// Prints past libtest's output capture (which takes only `print!` and `eprint!`), so a skip
/// reason shows in a passing run too.
pub fn say(text: &str) {
    let _ = writeln!(std::io::stderr(), "{text}");
}

/// Whether `RTEMU_REQUIRE_ROOT=1` forbids skipping.
pub fn skipping_forbidden() -> bool {
    std::env::var_os("RTEMU_REQUIRE_ROOT").is_some_and(|v| v == "1")
}

/// Skips `test` because of `why`: prints the reason and returns false, or panics with it when
/// `RTEMU_REQUIRE_ROOT=1` forbids skipping.
pub fn skip(test: &str, why: &str) -> bool {
    assert!(
        !skipping_forbidden(),
        "{test}: {why}, and RTEMU_REQUIRE_ROOT=1 is set"
    );
    say(&format!("skipping {test}: {why}"));
    false
}

/// Whether the process runs as root (effective user id 0, from `/proc/self/status`).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|v| v.split_whitespace().nth(1).map(|e| e == "0"))
        })
        .unwrap_or(false)
}

/// Whether `test` may run: true as root; otherwise [`skip`]s, saying it needs root for
/// `needs` (what it does with it, e.g. "creates network namespaces").
pub fn root_or_skip(test: &str, needs: &str) -> bool {
    is_root() || skip(test, &format!("needs root ({needs})"))
}

/// Whether `program` can be started (it answers `program arg`); otherwise [`skip`]s, saying
/// which package provides it.
pub fn program_or_skip(test: &str, program: &str, arg: &str, package: &str) -> bool {
    Command::new(program).arg(arg).output().is_ok()
        || skip(
            test,
            &format!("needs `{program}`, which is not installed (Debian package `{package}`)"),
        )
}

/// Runs `ip ARGS…` for a test's fixtures outside any lab (its own namespaces, veth pairs,
/// bridges), panicking with `ip`'s message when it fails.
pub fn ip(args: &[&str]) {
    if let Err(e) = try_ip(args) {
        panic!("{e}");
    }
}

/// [`ip`] for callers that must not panic (the benchmarks): the command and `ip`'s message
/// as the error.
pub fn try_ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    ))
}

/// A private directory (mode 0700, so a server's socket and token may live in it) named after
/// `tag` and this process, removed with what it holds when dropped.
pub struct TempDir(pub std::path::PathBuf);

impl TempDir {
    /// Makes it afresh.
    pub fn new(tag: &str) -> TempDir {
        use std::os::unix::fs::DirBuilderExt;
        let dir = std::env::temp_dir().join(format!("rtemu-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::DirBuilder::new().mode(0o700).create(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The text of a topology file for lab `lab`: its `header` lines (each ending in a newline),
/// then a chain of `n` nodes `n0` … `n{n-1}`, each linked to the next by an ideal link.
pub fn chain_topology(lab: &str, header: &str, n: usize) -> String {
    let mut src = format!("lab = \"{lab}\"\n{header}");
    for i in 0..n {
        src.push_str(&format!("[nodes.n{i}]\n"));
    }
    for i in 1..n {
        let before = i - 1;
        src.push_str(&format!(
            "[[links]]\nendpoints = [\"n{before}\", \"n{i}\"]\n"
        ));
    }
    src
}

/// The network namespaces of lab `lab` that exist (`/run/netns/rtemu-LAB` and
/// `rtemu-LAB.*`): after the lab is down, none should.
pub fn lab_namespaces(lab: &str) -> Vec<String> {
    namespaces_in(Path::new("/run/netns"), lab)
}

/// [`lab_namespaces`] as the directory `dir` lists them.
fn namespaces_in(dir: &Path, lab: &str) -> Vec<String> {
    let prefix = format!("rtemu-{lab}");
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n == &prefix || n.starts_with(&format!("{prefix}.")))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_is_read_from_the_effective_uid() {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let uids: Vec<&str> = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .unwrap()
            .split_whitespace()
            .collect();
        assert_eq!(is_root(), uids[1] == "0");
    }

    #[test]
    fn a_missing_program_skips_or_fails_as_required() {
        let run = std::panic::catch_unwind(|| {
            program_or_skip("t", "/nonexistent/rtemu-no-such-program", "-V", "none")
        });
        match run {
            Ok(may_run) => {
                assert!(!may_run);
                assert!(!skipping_forbidden());
            }
            Err(_) => assert!(skipping_forbidden()),
        }
        assert!(program_or_skip("t", "true", "--version", "coreutils"));
    }

    #[test]
    fn a_labs_namespaces_are_its_own_and_not_a_longer_names() {
        let dir = std::env::temp_dir().join(format!("rtemu-testutil-ns-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for name in [
            "rtemu-ab",
            "rtemu-ab.x",
            "rtemu-ab-x.y",
            "rtemu-abc",
            "rtemu-abc.x",
            "other",
        ] {
            std::fs::write(dir.join(name), "").unwrap();
        }
        let mut found = namespaces_in(&dir, "ab");
        std::fs::remove_dir_all(&dir).unwrap();
        found.sort();
        assert_eq!(found, ["rtemu-ab", "rtemu-ab.x"]);
        assert!(namespaces_in(&dir, "ab").is_empty());
    }
}
