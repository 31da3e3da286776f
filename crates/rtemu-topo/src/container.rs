//! A node's container, as the topology file describes it: the image it runs in the node's
//! namespace and how (entrypoint, command, mounts, capabilities, limits, health, start order).
//!
//! Names follow containerlab's where they fit (`image`, `entrypoint`, `cmd`, `binds`, `env`,
//! `exec` is rtemu's `run`, `healthcheck`, `wait-for` is `wait_for`). Everything here is
//! checked as the file is read, with the file, line and column of a mistake; nothing here runs
//! a container (that is [`crate::runtime`] and [`crate::launch`]).

use std::collections::BTreeMap;
use std::ops::Range;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::error::SpecError;
use crate::spec::{HealthcheckSpec, NodeSpec};

/// A node's container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Container {
    /// The image reference, as the runtime resolves it (`localhost/web:1`,
    /// `docker.io/library/nginx:1.27`).
    pub image: String,
    /// When the image is pulled.
    pub pull: Pull,
    /// The image's entrypoint replaced, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entrypoint: Option<Vec<String>>,
    /// The image's command replaced, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cmd: Option<Vec<String>>,
    /// Host paths mounted into the container, host paths absolute once the file is loaded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub binds: Vec<Bind>,
    /// Capabilities added to the runtime's defaults, as `CAP_…` names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub caps: Vec<String>,
    /// Memory limit in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<u64>,
    /// How the container tells that it is healthy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthcheck: Option<Healthcheck>,
    /// What must hold of other nodes' containers before this one starts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wait_for: Vec<WaitFor>,
    /// The restart policy.
    #[serde(default)]
    pub restart: Restart,
}

/// When an image is pulled from its registry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pull {
    /// Never: a missing image fails `up` before anything is made.
    Never,
    /// Only when the host does not have it.
    #[default]
    IfNotPresent,
    /// At every `up`.
    Always,
}

/// A host path mounted into the container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bind {
    /// The host path (relative to the topology file as written; absolute once loaded).
    pub host: String,
    /// The absolute path inside the container.
    pub container: String,
    /// Mounted read-only.
    pub read_only: bool,
}

/// A container's health check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Healthcheck {
    /// What runs in the container: exit status 0 is healthy.
    pub test: HealthTest,
    /// Time between checks while `up` waits, ns.
    pub interval_ns: u64,
    /// How long one check may take, ns.
    pub timeout_ns: u64,
    /// Failures in this time after the container starts do not count, ns.
    pub start_period_ns: u64,
    /// Failures in a row that make the container unhealthy.
    pub retries: u32,
}

/// The command of a health check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HealthTest {
    /// A program and its arguments (`CMD`); podman 4.3 runs them through the image's
    /// `/bin/sh`, quoted.
    Cmd(Vec<String>),
    /// A command line run by the image's `/bin/sh -c` (`CMD-SHELL`).
    Shell(String),
}

/// One `wait_for` entry: node `node`'s container must be in `condition` first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitFor {
    /// The other node.
    pub node: String,
    /// What must hold of its container.
    pub condition: Condition,
}

/// What `wait_for` waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Condition {
    /// Its container started.
    Running,
    /// Its health check passed.
    Healthy,
}

/// A container's restart policy (the runtime restarts it; `down` ends it for good).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Restart {
    /// Never restarted.
    #[default]
    No,
    /// Restarted when it exits with a status other than 0, at most `max` times when given.
    OnFailure {
        /// The most restarts.
        max: Option<u32>,
    },
    /// Always restarted.
    Always,
    /// Restarted unless stopped by hand.
    UnlessStopped,
}

impl Restart {
    /// The policy as podman and Docker write it (`on-failure:3`).
    pub fn as_runtime_arg(&self) -> String {
        match self {
            Restart::No => "no".into(),
            Restart::OnFailure { max: None } => "on-failure".into(),
            Restart::OnFailure { max: Some(n) } => format!("on-failure:{n}"),
            Restart::Always => "always".into(),
            Restart::UnlessStopped => "unless-stopped".into(),
        }
    }
}

/// Health check defaults: a check a second, five seconds each, three failures in a row.
pub const DEFAULT_HEALTH_INTERVAL_NS: u64 = 1_000_000_000;
/// How long one check may take when the file does not say.
pub const DEFAULT_HEALTH_TIMEOUT_NS: u64 = 5_000_000_000;
/// Failures in a row that make a container unhealthy when the file does not say.
pub const DEFAULT_HEALTH_RETRIES: u32 = 3;
/// The longest health interval, timeout or start period: ten minutes.
pub const MAX_HEALTH_TIME_NS: u64 = 600_000_000_000;
/// The smallest memory limit the runtimes accept (podman's and Docker's 6 MiB).
pub const MIN_MEMORY: u64 = 6 << 20;

/// The Linux capabilities, without their `CAP_` prefix.
const CAPABILITIES: &[&str] = &[
    "CHOWN",
    "DAC_OVERRIDE",
    "DAC_READ_SEARCH",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "SETPCAP",
    "LINUX_IMMUTABLE",
    "NET_BIND_SERVICE",
    "NET_BROADCAST",
    "NET_ADMIN",
    "NET_RAW",
    "IPC_LOCK",
    "IPC_OWNER",
    "SYS_MODULE",
    "SYS_RAWIO",
    "SYS_CHROOT",
    "SYS_PTRACE",
    "SYS_PACCT",
    "SYS_ADMIN",
    "SYS_BOOT",
    "SYS_NICE",
    "SYS_RESOURCE",
    "SYS_TIME",
    "SYS_TTY_CONFIG",
    "MKNOD",
    "LEASE",
    "AUDIT_WRITE",
    "AUDIT_CONTROL",
    "SETFCAP",
    "MAC_OVERRIDE",
    "MAC_ADMIN",
    "SYSLOG",
    "WAKE_ALARM",
    "BLOCK_SUSPEND",
    "AUDIT_READ",
    "PERFMON",
    "BPF",
    "CHECKPOINT_RESTORE",
];

/// Longest image reference (Docker's limit on a repository name plus tag and digest).
pub const MAX_IMAGE_REF: usize = 255;

/// Whether `image` is an image reference rtemu passes to a runtime: 1 to [`MAX_IMAGE_REF`]
/// characters a-z, A-Z, 0-9, `.`, `_`, `-`, `/`, `:` and `@`, starting with a letter or digit
/// (never `-`, so it cannot read as an option).
pub fn valid_image(image: &str) -> bool {
    image.len() <= MAX_IMAGE_REF
        && image.starts_with(|c: char| c.is_ascii_alphanumeric())
        && image
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/' | ':' | '@'))
}

/// Makes a [`SpecError`] at a span of the file.
pub(crate) type ErrAt<'a> = &'a dyn Fn(Range<usize>, String) -> SpecError;

/// The container keys of node `node`'s table, checked: `None` for a bare node (an error when
/// it has a container key without `image`). `wait_for` names are checked against the other
/// nodes by [`check_wait_for`] once every node is read.
pub(crate) fn from_spec(
    node: &str,
    spec: &NodeSpec,
    err: ErrAt<'_>,
) -> Result<Option<Container>, SpecError> {
    let Some(image) = &spec.image else {
        let stray = [
            ("pull", spec.pull.as_ref().map(Spanned::span)),
            ("entrypoint", spec.entrypoint.as_ref().map(Spanned::span)),
            ("cmd", spec.cmd.as_ref().map(Spanned::span)),
            ("binds", spec.binds.first().map(Spanned::span)),
            ("caps", spec.caps.first().map(Spanned::span)),
            ("memory", spec.memory.as_ref().map(Spanned::span)),
            ("healthcheck", spec.healthcheck.as_ref().map(Spanned::span)),
            ("wait_for", spec.wait_for.first().map(Spanned::span)),
            ("restart", spec.restart.as_ref().map(Spanned::span)),
        ];
        if let Some((key, Some(span))) = stray.into_iter().find(|(_, s)| s.is_some()) {
            return Err(err(span, format!("`{key}` applies to a node with a container: give node `{node}` an `image` too, or remove `{key}`")));
        }
        return Ok(None);
    };
    let name = image.get_ref();
    if !valid_image(name) {
        return Err(err(image.span(), format!("invalid image `{name}`: write an image reference like \"localhost/web:1\" or \"docker.io/library/alpine:3.20\" (1 to {MAX_IMAGE_REF} characters a-z, A-Z, 0-9, '.', '_', '-', '/', ':', '@', starting with a letter or digit)")));
    }
    let pull = match spec.pull.as_ref().map(|p| (p.get_ref().as_str(), p.span())) {
        None | Some(("if-not-present", _)) => Pull::IfNotPresent,
        Some(("never", _)) => Pull::Never,
        Some(("always", _)) => Pull::Always,
        Some((other, span)) => {
            return Err(err(
                span,
                format!(
                "unknown pull `{other}`: allowed are \"never\", \"if-not-present\" and \"always\""
            ),
            ))
        }
    };
    let argv = |value: &Option<Spanned<toml::Value>>,
                key: &str|
     -> Result<Option<Vec<String>>, SpecError> {
        value.as_ref().map(|v| words(v, key, err)).transpose()
    };
    let mut caps = Vec::new();
    for c in &spec.caps {
        let upper = c.get_ref().to_ascii_uppercase();
        let bare = upper.strip_prefix("CAP_").unwrap_or(&upper);
        if bare != "ALL" && !CAPABILITIES.contains(&bare) {
            return Err(err(c.span(), format!("unknown capability `{}`: write a Linux capability such as \"NET_ADMIN\" or \"CAP_NET_RAW\" (capabilities(7)), or \"ALL\"", c.get_ref())));
        }
        let cap = if bare == "ALL" {
            "ALL".to_owned()
        } else {
            format!("CAP_{bare}")
        };
        if !caps.contains(&cap) {
            caps.push(cap);
        }
    }
    let memory = match &spec.memory {
        None => None,
        Some(m) => match rtemu_model::units::Size::parse(m.get_ref()) {
            Ok(size) if size.0 >= MIN_MEMORY => Some(size.0),
            Ok(_) => {
                return Err(err(
                    m.span(),
                    format!(
                        "memory `{}` is too small: allowed are 6mb and more",
                        m.get_ref()
                    ),
                ))
            }
            Err(e) => return Err(err(m.span(), format!("memory: {e}"))),
        },
    };
    let restart = match &spec.restart {
        None => Restart::No,
        Some(r) => restart(r.get_ref()).ok_or_else(|| err(r.span(), format!("unknown restart `{}`: allowed are \"no\", \"on-failure\", \"on-failure:N\" (N from 1), \"always\" and \"unless-stopped\"", r.get_ref())))?,
    };
    Ok(Some(Container {
        image: name.clone(),
        pull,
        entrypoint: argv(&spec.entrypoint, "entrypoint")?,
        cmd: argv(&spec.cmd, "cmd")?,
        binds: spec
            .binds
            .iter()
            .map(|b| bind(b, err))
            .collect::<Result<_, _>>()?,
        caps,
        memory,
        healthcheck: spec
            .healthcheck
            .as_ref()
            .map(|h| healthcheck(h, err))
            .transpose()?,
        // Checked against the other nodes by `check_wait_for`.
        wait_for: Vec::new(),
        restart,
    }))
}

/// A restart policy as written.
fn restart(text: &str) -> Option<Restart> {
    match text {
        "no" => Some(Restart::No),
        "on-failure" => Some(Restart::OnFailure { max: None }),
        "always" => Some(Restart::Always),
        "unless-stopped" => Some(Restart::UnlessStopped),
        other => {
            let n: u32 = other.strip_prefix("on-failure:")?.parse().ok()?;
            (n >= 1).then_some(Restart::OnFailure { max: Some(n) })
        }
    }
}

/// An argument list: an array of strings taken as it is, or a string split as a POSIX shell
/// splits words (quotes and backslashes, no expansions).
fn words(
    value: &Spanned<toml::Value>,
    key: &str,
    err: ErrAt<'_>,
) -> Result<Vec<String>, SpecError> {
    let bad = || {
        err(value.span(), format!("`{key}` is an array of strings (`[\"/bin/server\", \"--port\", \"80\"]`) or a string split as a shell splits words"))
    };
    let argv = match value.get_ref() {
        toml::Value::String(s) => shlex::split(s).ok_or_else(|| {
            err(
                value.span(),
                format!("`{key}` has an unclosed quote or a trailing backslash"),
            )
        })?,
        toml::Value::Array(items) => items
            .iter()
            .map(|i| i.as_str().map(str::to_owned))
            .collect::<Option<Vec<String>>>()
            .ok_or_else(bad)?,
        _ => return Err(bad()),
    };
    if argv.iter().any(|a| a.contains('\0')) {
        return Err(err(
            value.span(),
            format!("`{key}` holds a NUL character, which no argument can"),
        ));
    }
    if key == "entrypoint" && argv.first().is_none_or(String::is_empty) {
        return Err(err(
            value.span(),
            "`entrypoint` names a program: give at least one non-empty word".into(),
        ));
    }
    Ok(argv)
}

/// A bind as written: `HOST:CONTAINER` or `HOST:CONTAINER:ro|rw`.
fn bind(text: &Spanned<String>, err: ErrAt<'_>) -> Result<Bind, SpecError> {
    let s = text.get_ref();
    let bad = |why: &str| {
        err(text.span(), format!("bind `{s}`: {why}; write \"HOST:CONTAINER\" or \"HOST:CONTAINER:ro\" (the host path relative to the topology file, the container path absolute)"))
    };
    let parts: Vec<&str> = s.split(':').collect();
    let (host, container, read_only) = match parts.as_slice() {
        [h, c] => (*h, *c, false),
        [h, c, "ro"] => (*h, *c, true),
        [h, c, "rw"] => (*h, *c, false),
        [_, _, mode] => {
            return Err(bad(&format!(
                "unknown mode `{mode}` (allowed are ro and rw)"
            )))
        }
        _ => return Err(bad("paths cannot hold ':'")),
    };
    if host.is_empty() {
        return Err(bad("the host path is empty"));
    }
    if !container.starts_with('/') {
        return Err(bad("the container path is not absolute"));
    }
    // The runtime reads options after a comma, and a NUL ends a path early.
    if s.contains([',', '\0']) {
        return Err(bad("paths cannot hold ',' or NUL"));
    }
    Ok(Bind {
        host: host.to_owned(),
        container: container.to_owned(),
        read_only,
    })
}

/// A health check as written.
fn healthcheck(spec: &Spanned<HealthcheckSpec>, err: ErrAt<'_>) -> Result<Healthcheck, SpecError> {
    let h = spec.get_ref();
    let bad = || {
        err(h.test.span(), "healthcheck `test` is [\"CMD\", \"prog\", \"arg\"…], [\"CMD-SHELL\", \"command line\"] or a command line string".into())
    };
    let test = match h.test.get_ref() {
        toml::Value::String(s) if !s.trim().is_empty() => HealthTest::Shell(s.clone()),
        toml::Value::Array(items) => {
            let words: Vec<&str> = items
                .iter()
                .map(toml::Value::as_str)
                .collect::<Option<_>>()
                .ok_or_else(bad)?;
            match words.as_slice() {
                ["CMD", prog, rest @ ..] if !prog.is_empty() => HealthTest::Cmd(
                    std::iter::once(*prog)
                        .chain(rest.iter().copied())
                        .map(str::to_owned)
                        .collect(),
                ),
                ["CMD-SHELL", line] if !line.trim().is_empty() => {
                    HealthTest::Shell((*line).to_owned())
                }
                _ => return Err(bad()),
            }
        }
        _ => return Err(bad()),
    };
    let words = match &test {
        HealthTest::Cmd(argv) => argv.clone(),
        HealthTest::Shell(line) => vec![line.clone()],
    };
    if words.iter().any(|w| w.contains('\0')) {
        return Err(err(
            h.test.span(),
            "healthcheck `test` holds a NUL character, which no argument can".into(),
        ));
    }
    let time = |t: &Option<Spanned<String>>,
                key: &str,
                default: u64,
                min: u64|
     -> Result<u64, SpecError> {
        let Some(t) = t else { return Ok(default) };
        match rtemu_model::units::parse_duration_ns(t.get_ref(), None) {
            Ok(ns) if (min..=MAX_HEALTH_TIME_NS).contains(&ns) => Ok(ns),
            Ok(_) => Err(err(
                t.span(),
                format!(
                    "healthcheck `{key}` {} is out of range: allowed are {} to 10m",
                    t.get_ref(),
                    if min == 0 { "0s" } else { "10ms" }
                ),
            )),
            Err(e) => Err(err(t.span(), format!("healthcheck `{key}`: {e}"))),
        }
    };
    let retries = match &h.retries {
        None => DEFAULT_HEALTH_RETRIES,
        Some(r) => u32::try_from(*r.get_ref())
            .ok()
            .filter(|n| (1..=100).contains(n))
            .ok_or_else(|| {
                err(
                    r.span(),
                    format!(
                        "healthcheck `retries` {} is out of range: allowed are 1 to 100",
                        r.get_ref()
                    ),
                )
            })?,
    };
    Ok(Healthcheck {
        test,
        interval_ns: time(
            &h.interval,
            "interval",
            DEFAULT_HEALTH_INTERVAL_NS,
            10_000_000,
        )?,
        timeout_ns: time(&h.timeout, "timeout", DEFAULT_HEALTH_TIMEOUT_NS, 10_000_000)?,
        start_period_ns: time(&h.start_period, "start_period", 0, 0)?,
        retries,
    })
}

/// Reads every image node's `wait_for` against the others: each names another image node,
/// `:healthy` only one with a health check, and no node waits for itself through others.
/// `specs` and `nodes` are in the same order; `containers[i]` is node `i`'s container.
pub(crate) fn check_wait_for(
    specs: &[(&str, &NodeSpec)],
    containers: &mut [Option<Container>],
    err: ErrAt<'_>,
) -> Result<(), SpecError> {
    let index: BTreeMap<&str, usize> = specs
        .iter()
        .enumerate()
        .map(|(i, (n, _))| (*n, i))
        .collect();
    for (i, (name, spec)) in specs.iter().enumerate() {
        let mut waits = Vec::new();
        for w in &spec.wait_for {
            let text = w.get_ref();
            let (other, condition) = match text.split_once(':') {
                None => (text.as_str(), Condition::Running),
                Some((n, "healthy")) => (n, Condition::Healthy),
                Some((n, "running")) => (n, Condition::Running),
                Some((_, c)) => return Err(err(w.span(), format!("unknown condition `{c}` in wait_for: write \"NODE\" (its container started) or \"NODE:healthy\" (its health check passed)"))),
            };
            let Some(&j) = index.get(other) else {
                let known: Vec<&str> = index.keys().copied().collect();
                return Err(err(
                    w.span(),
                    format!(
                        "wait_for names unknown node `{other}`: the nodes are {}",
                        known.join(", ")
                    ),
                ));
            };
            if j == i {
                return Err(err(w.span(), format!("node `{name}` waits for itself")));
            }
            let Some(target) = &containers[j] else {
                return Err(err(w.span(), format!("wait_for names node `{other}`, which has no container (no `image`) to wait for")));
            };
            if condition == Condition::Healthy && target.healthcheck.is_none() {
                return Err(err(w.span(), format!("wait_for `{text}`: node `{other}` has no `healthcheck` to pass: give it one, or wait for \"{other}\" (started)")));
            }
            if !waits.iter().any(|x: &WaitFor| x.node == other) {
                waits.push(WaitFor {
                    node: other.to_owned(),
                    condition,
                });
            }
        }
        if let Some(c) = &mut containers[i] {
            c.wait_for = waits;
        }
    }
    // A cycle would leave its nodes waiting for ever: refuse it at the first entry on it.
    if let Some(start) = start_order(specs.iter().map(|(n, _)| *n), containers).err() {
        let spec = specs[start].1;
        let span = spec.wait_for.first().map(Spanned::span).unwrap_or_default();
        return Err(err(span, format!("node `{}` waits for itself through other nodes' wait_for: remove one entry of the cycle", specs[start].0)));
    }
    Ok(())
}

/// The order containers start in: waves, each node after every node it waits for, node
/// index order within a wave. `Err(i)` names a node on a `wait_for` cycle.
pub fn start_order<'a>(
    names: impl Iterator<Item = &'a str>,
    containers: &[Option<Container>],
) -> Result<Vec<Vec<usize>>, usize> {
    let index: BTreeMap<&str, usize> = names.enumerate().map(|(i, n)| (n, i)).collect();
    let deps: Vec<Vec<usize>> = containers
        .iter()
        .map(|c| {
            c.iter()
                .flat_map(|c| &c.wait_for)
                .filter_map(|w| index.get(w.node.as_str()).copied())
                .collect()
        })
        .collect();
    let mut wave_of: Vec<Option<usize>> = vec![None; containers.len()];
    let mut waves: Vec<Vec<usize>> = Vec::new();
    let mut left: Vec<usize> = (0..containers.len())
        .filter(|&i| containers[i].is_some())
        .collect();
    while !left.is_empty() {
        let ready: Vec<usize> = left
            .iter()
            .copied()
            .filter(|&i| deps[i].iter().all(|&d| wave_of[d].is_some()))
            .collect();
        if ready.is_empty() {
            return Err(left[0]);
        }
        for &i in &ready {
            wave_of[i] = Some(waves.len());
        }
        left.retain(|i| !ready.contains(i));
        waves.push(ready);
    }
    Ok(waves)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restart_policies_read_as_podman_writes_them() {
        for text in [
            "no",
            "on-failure",
            "on-failure:3",
            "always",
            "unless-stopped",
        ] {
            assert_eq!(restart(text).unwrap().as_runtime_arg(), text);
        }
        for bad in [
            "",
            "on-failure:0",
            "on-failure:x",
            "sometimes",
            "on-failure:",
        ] {
            assert_eq!(restart(bad), None, "{bad}");
        }
    }

    #[test]
    fn image_references_never_read_as_options() {
        for ok in [
            "busybox",
            "localhost/web:1",
            "docker.io/library/nginx:1.27",
            "r.example/a/b@sha256:0123abcd",
        ] {
            assert!(valid_image(ok), "{ok}");
        }
        for bad in [
            "",
            "-it",
            "--privileged",
            "web 1",
            "a;b",
            "a\0b",
            &"x".repeat(256),
        ] {
            assert!(!valid_image(bad), "{bad}");
        }
    }
}
