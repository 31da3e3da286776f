//! [`Runtime`] through rootful podman's command line (tested with podman 4.3 and runc on
//! Debian 12). Every command line is built as an argument vector, never through a shell.
//!
//! Per invocation, never in the host's configuration (a lab changes nothing on the host
//! beyond what it made): `--cgroup-manager cgroupfs`, which works with cgroup v1, hybrid and
//! v2 and makes no systemd units, and `--runtime runc` where runc is installed (crun refuses
//! cgroup v1 hosts). Health checks are run by rtemu while `up` waits, not by podman's systemd
//! timers (`--health-interval disable`), so none are left on the host.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde::Deserialize;

use super::{Listed, RunSpec, Runtime, RuntimeError, Status, LAB_LABEL, NODE_LABEL};
use crate::container::HealthTest;

/// Rootful podman.
#[derive(Debug, Clone)]
pub struct Podman {
    program: PathBuf,
    /// Options before the subcommand.
    global: Vec<String>,
    /// `(soft, hard)` limits of open files and processes given to containers.
    limits: [(u64, u64); 2],
}

/// The most processes podman 4.3 lets a container's runtime set without CAP_SYS_RESOURCE:
/// where podman cannot raise its own RLIMIT_NPROC it lowers it to this, and runc then cannot
/// give the container more, so a container asking for the host's value fails to start.
const PODMAN_NPROC: u64 = 32_768;

impl Podman {
    /// Podman as installed on this host's `PATH`; `None` when it is not.
    pub fn find() -> Option<Podman> {
        let program = on_path("podman")?;
        let mut global = vec!["--cgroup-manager".to_owned(), "cgroupfs".to_owned()];
        if let Some(runc) = on_path("runc") {
            global.push("--runtime".to_owned());
            global.push(runc.display().to_string());
        }
        Some(Podman {
            program,
            global,
            limits: limits(),
        })
    }

    /// A command of podman with its global options and `args`, which dies with this process
    /// (a killed `up` leaves no podman running on behind `down`'s back).
    fn command<I: IntoIterator<Item = S>, S: AsRef<std::ffi::OsStr>>(&self, args: I) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.global).args(args);
        crate::sys::die_with_parent_on_exec(&mut cmd);
        cmd
    }

    /// Runs podman with `args`, standard input from /dev/null: how it ended, and its command
    /// line for messages.
    fn exit<S: AsRef<str>>(&self, args: &[S]) -> Result<(String, Output), RuntimeError> {
        let args: Vec<&str> = args.iter().map(AsRef::as_ref).collect();
        let command = format!("podman {}", args.join(" "));
        match self.command(&args).stdin(Stdio::null()).output() {
            Ok(out) => Ok((command, out)),
            Err(source) => Err(RuntimeError::Spawn { command, source }),
        }
    }

    /// Runs podman with `args`; its output when it succeeds.
    fn output<S: AsRef<str>>(&self, args: &[S]) -> Result<Output, RuntimeError> {
        let (command, out) = self.exit(args)?;
        if out.status.success() {
            Ok(out)
        } else {
            Err(failed(command, &out))
        }
    }

    /// Runs podman with `args`, a command that answers with its exit status: 0 yes, 1 no,
    /// anything else a failure.
    fn yes_or_no(&self, args: &[&str]) -> Result<bool, RuntimeError> {
        let (command, out) = self.exit(args)?;
        match out.status.code() {
            Some(0) => Ok(true),
            Some(1) => Ok(false),
            _ => Err(failed(command, &out)),
        }
    }

    /// The arguments of `podman run` for `spec` (after the global options).
    pub fn run_args(&self, spec: &RunSpec<'_>) -> Vec<String> {
        let c = spec.container;
        let mut a: Vec<String> = vec!["run".into(), "--detach".into()];
        let mut opt = |k: &str, v: String| {
            a.push(k.to_owned());
            a.push(v);
        };
        opt("--name", spec.name.clone());
        opt("--hostname", spec.node.to_owned());
        opt("--label", format!("{LAB_LABEL}={}", spec.lab));
        opt("--label", format!("{NODE_LABEL}={}", spec.node));
        opt("--network", format!("ns:{}", spec.netns.display()));
        // Images were resolved (and pulled) before anything was made.
        opt("--pull", "never".into());
        // Logs in a file podman keeps with the container (no journald needed), removed with it.
        opt("--log-driver", "k8s-file".into());
        let [(nofile_soft, nofile_hard), (nproc_soft, nproc_hard)] = self.limits;
        opt("--ulimit", format!("nofile={nofile_soft}:{nofile_hard}"));
        opt("--ulimit", format!("nproc={nproc_soft}:{nproc_hard}"));
        if let Some(hosts) = &spec.hosts {
            opt("--volume", format!("{}:/etc/hosts:ro", hosts.display()));
        }
        if let Some(resolv) = &spec.resolv {
            opt(
                "--volume",
                format!("{}:/etc/resolv.conf:ro", resolv.display()),
            );
        }
        for (k, v) in &spec.env {
            opt("--env", format!("{k}={v}"));
        }
        for b in &c.binds {
            let mode = if b.read_only { ":ro" } else { "" };
            opt("--volume", format!("{}:{}{mode}", b.host, b.container));
        }
        for cap in &c.caps {
            opt("--cap-add", cap.clone());
        }
        if let Some(m) = c.memory {
            opt("--memory", m.to_string());
        }
        if let Some(cpu) = spec.cpu {
            opt("--cpus", cpu.to_string());
        }
        if let Some(cpus) = &spec.cpuset {
            opt("--cpuset-cpus", rtemu_clock::rt::format_cpu_list(cpus));
        }
        if let Some(h) = &c.healthcheck {
            // Podman 4.3 reads `--health-cmd` as a command line for the image's `/bin/sh -c`
            // (no JSON array): a `CMD` check's words are quoted into one.
            let test = match &h.test {
                HealthTest::Cmd(argv) => shlex::try_join(argv.iter().map(String::as_str))
                    .expect("NUL is refused in the file"),
                HealthTest::Shell(line) => line.clone(),
            };
            opt("--health-cmd", test);
            opt("--health-interval", "disable".into());
            opt("--health-retries", h.retries.to_string());
            opt(
                "--health-timeout",
                format!("{}ms", h.timeout_ns / 1_000_000),
            );
            opt(
                "--health-start-period",
                format!("{}ms", h.start_period_ns / 1_000_000),
            );
        }
        opt("--restart", c.restart.as_runtime_arg());
        if let Some(e) = &c.entrypoint {
            opt(
                "--entrypoint",
                serde_json::to_string(e).expect("strings serialise"),
            );
        }
        a.push(c.image.clone());
        a.extend(c.cmd.iter().flatten().cloned());
        a
    }
}

impl Runtime for Podman {
    fn has_image(&self, image: &str) -> Result<bool, RuntimeError> {
        self.yes_or_no(&["image", "exists", image])
    }

    fn pull(&self, image: &str) -> Result<(), RuntimeError> {
        self.output(&["pull".into(), "--quiet".into(), image.to_owned()])
            .map(drop)
    }

    fn run(&self, spec: &RunSpec<'_>) -> Result<(), RuntimeError> {
        self.output(&self.run_args(spec)).map(drop)
    }

    fn check_health(&self, name: &str) -> Result<bool, RuntimeError> {
        self.yes_or_no(&["healthcheck", "run", name])
    }

    fn list(&self, lab: &str) -> Result<Vec<Listed>, RuntimeError> {
        let args: Vec<String> = [
            "ps",
            "--all",
            "--format",
            "json",
            "--filter",
            &format!("label={LAB_LABEL}={lab}"),
        ]
        .map(str::to_owned)
        .to_vec();
        let out = self.output(&args)?;
        let command = format!("podman {}", args.join(" "));
        parse_ps(&out.stdout, lab).map_err(|why| RuntimeError::Output { command, why })
    }

    fn orphans(&self) -> Result<Vec<Listed>, RuntimeError> {
        let args = ["ps", "--all", "--external", "--format", "json"];
        let out = self.output(&args)?;
        let command = format!("podman {}", args.join(" "));
        parse_orphans(&out.stdout).map_err(|why| RuntimeError::Output { command, why })
    }

    fn remove(&self, ids: &[String]) -> Result<(), RuntimeError> {
        if ids.is_empty() {
            return Ok(());
        }
        let mut args: Vec<String> = ["rm", "--force", "--time", "0", "--ignore"]
            .map(str::to_owned)
            .to_vec();
        args.extend(ids.iter().cloned());
        self.output(&args).map(drop)
    }

    fn exec(&self, name: &str, argv: &[String], interactive: bool) -> Command {
        let mut args = vec!["exec".to_owned()];
        if interactive {
            args.push("--interactive".into());
            if std::io::stdin().is_terminal() {
                args.push("--tty".into());
            }
        }
        args.push(name.to_owned());
        args.extend(argv.iter().cloned());
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.global).args(args);
        cmd
    }

    fn logs(&self, name: &str, follow: bool, tail: Option<u32>) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.global).arg("logs");
        if let Some(n) = tail {
            cmd.arg("--tail").arg(n.to_string());
        }
        if follow {
            cmd.arg("--follow");
        }
        cmd.arg(name);
        cmd
    }
}

/// `program` in a directory of `PATH` (or the system directories, for a `sudo` that resets
/// it), as an executable file.
fn on_path(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/local/bin", "/usr/bin", "/usr/sbin", "/bin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(program))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// The open-file and process limits a container gets: this process's, so an image node's
/// programs run under the limits a bare node's do, with processes at most [`PODMAN_NPROC`]
/// (podman's defaults exceed what a runtime without CAP_SYS_RESOURCE may set, and the
/// container would not start).
fn limits() -> [(u64, u64); 2] {
    use nix::sys::resource::{getrlimit, Resource};
    let get = |r| getrlimit(r).unwrap_or((1024, 1024));
    let nofile = get(Resource::RLIMIT_NOFILE);
    let (soft, hard) = get(Resource::RLIMIT_NPROC);
    [nofile, (soft.min(PODMAN_NPROC), hard.min(PODMAN_NPROC))]
}

/// A failed podman command, with the last lines of its standard error (bounded).
fn failed(command: String, out: &Output) -> RuntimeError {
    let text = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut stderr = lines[lines.len().saturating_sub(3)..].join("; ");
    if stderr.len() > 2000 {
        let mut end = 2000;
        while !stderr.is_char_boundary(end) {
            end -= 1;
        }
        stderr.truncate(end);
    }
    RuntimeError::Failed {
        command,
        status: out.status.to_string(),
        stderr,
    }
}

/// One entry of `podman ps --format json`.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct PsEntry {
    id: String,
    #[serde(default)]
    names: Vec<String>,
    #[serde(default)]
    labels: Option<std::collections::BTreeMap<String, String>>,
    #[serde(default)]
    image: String,
    #[serde(default)]
    state: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    exit_code: i32,
}

/// The containers of lab `lab` in `podman ps --format json` output: only those whose label
/// is exactly `lab` (the filter is podman's; the mark is checked here too).
fn parse_ps(json: &[u8], lab: &str) -> Result<Vec<Listed>, String> {
    let entries: Vec<PsEntry> = serde_json::from_slice(json).map_err(|e| e.to_string())?;
    Ok(entries
        .into_iter()
        .filter_map(|e| {
            let labels = e.labels.unwrap_or_default();
            if labels.get(LAB_LABEL).map(String::as_str) != Some(lab) {
                return None;
            }
            let status = match e.state.as_str() {
                "running" if e.status.ends_with("(healthy)") => Status::Healthy,
                "running" if e.status.ends_with("(unhealthy)") => Status::Unhealthy,
                "running" => Status::Running,
                "exited" | "stopped" => Status::Exited {
                    exit_code: e.exit_code,
                },
                "created" | "configured" | "initialized" => Status::Created,
                other => Status::Other {
                    runtime_state: other.to_owned(),
                },
            };
            Some(Listed {
                id: e.id,
                name: e.names.into_iter().next().unwrap_or_default(),
                node: labels.get(NODE_LABEL).cloned(),
                image: e.image,
                status,
            })
        })
        .collect())
}

/// The storage-only containers in `podman ps --all --external --format json` output: state
/// `storage`, not known to podman's own database, so without labels.
fn parse_orphans(json: &[u8]) -> Result<Vec<Listed>, String> {
    let entries: Vec<PsEntry> = serde_json::from_slice(json).map_err(|e| e.to_string())?;
    Ok(entries
        .into_iter()
        .filter(|e| e.state == "storage" && e.labels.as_ref().is_none_or(|l| l.is_empty()))
        .map(|e| Listed {
            id: e.id,
            name: e.names.into_iter().next().unwrap_or_default(),
            node: None,
            image: e.image,
            status: Status::Other {
                runtime_state: e.state,
            },
        })
        .collect())
}

/// The resolver configuration a process in node namespace `netns` sees (as `ip netns exec`
/// arranges it): the namespace's own under `/etc/netns`, else the host's.
pub fn resolv_conf(netns: &str) -> Option<PathBuf> {
    [
        Path::new("/etc/netns").join(netns).join("resolv.conf"),
        PathBuf::from("/etc/resolv.conf"),
    ]
    .into_iter()
    .find(|p| p.exists())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::container::{Bind, Container, Healthcheck, Pull, Restart};

    fn podman() -> Podman {
        Podman {
            program: "/usr/bin/podman".into(),
            global: vec!["--cgroup-manager".into(), "cgroupfs".into()],
            limits: [(1024, 4096), (100, 200)],
        }
    }

    #[test]
    fn a_node_container_starts_in_its_namespace_labelled_with_every_key_as_an_argument() {
        let c = Container {
            image: "localhost/web:1".into(),
            pull: Pull::Never,
            entrypoint: Some(vec!["/bin/sh".into(), "-c".into(), "httpd -f".into()]),
            cmd: Some(vec!["a b".into()]),
            binds: vec![Bind {
                host: "/srv/site".into(),
                container: "/www".into(),
                read_only: true,
            }],
            caps: vec!["CAP_NET_ADMIN".into()],
            memory: Some(64 << 20),
            healthcheck: Some(Healthcheck {
                test: HealthTest::Cmd(vec!["wget".into(), "-q".into(), "http://localhost/".into()]),
                interval_ns: 1_000_000_000,
                timeout_ns: 2_000_000_000,
                start_period_ns: 500_000_000,
                retries: 3,
            }),
            wait_for: Vec::new(),
            restart: Restart::OnFailure { max: Some(2) },
        };
        let spec = RunSpec {
            name: "rtemu-l1-web".into(),
            lab: "l1",
            node: "web",
            netns: "/run/netns/rtemu-l1-web".into(),
            hosts: Some("/etc/netns/rtemu-l1-web/hosts".into()),
            resolv: None,
            container: &c,
            env: vec![
                ("RTEMU_NODE".into(), "web".into()),
                ("X".into(), "1 2".into()),
            ],
            cpu: Some(0.5),
            cpuset: Some(vec![0, 2, 3]),
        };
        let args = podman().run_args(&spec);
        let expected = [
            "run",
            "--detach",
            "--name",
            "rtemu-l1-web",
            "--hostname",
            "web",
            "--label",
            "rtemu.lab=l1",
            "--label",
            "rtemu.node=web",
            "--network",
            "ns:/run/netns/rtemu-l1-web",
            "--pull",
            "never",
            "--log-driver",
            "k8s-file",
            "--ulimit",
            "nofile=1024:4096",
            "--ulimit",
            "nproc=100:200",
            "--volume",
            "/etc/netns/rtemu-l1-web/hosts:/etc/hosts:ro",
            "--env",
            "RTEMU_NODE=web",
            "--env",
            "X=1 2",
            "--volume",
            "/srv/site:/www:ro",
            "--cap-add",
            "CAP_NET_ADMIN",
            "--memory",
            "67108864",
            "--cpus",
            "0.5",
            "--cpuset-cpus",
            "0,2-3",
            "--health-cmd",
            "wget -q http://localhost/",
            "--health-interval",
            "disable",
            "--health-retries",
            "3",
            "--health-timeout",
            "2000ms",
            "--health-start-period",
            "500ms",
            "--restart",
            "on-failure:2",
            "--entrypoint",
            r#"["/bin/sh","-c","httpd -f"]"#,
            "localhost/web:1",
            "a b",
        ];
        assert_eq!(args, expected);
    }

    #[test]
    fn ps_output_is_read_for_the_labs_own_containers_only() {
        let json = br#"[
          {"Id":"a1","Names":["rtemu-l1-web"],"Labels":{"rtemu.lab":"l1","rtemu.node":"web"},
           "Image":"localhost/web:1","State":"running","Status":"Up 2 seconds (healthy)","ExitCode":0},
          {"Id":"b2","Names":["rtemu-l1-db"],"Labels":{"rtemu.lab":"l1","rtemu.node":"db"},
           "Image":"localhost/db:1","State":"exited","Status":"Exited (3) 1 second ago","ExitCode":3},
          {"Id":"c3","Names":["rtemu-l1-x"],"Labels":{"rtemu.lab":"l1"},
           "Image":"i","State":"running","Status":"Up 1 second (unhealthy)","ExitCode":0},
          {"Id":"d4","Names":["other"],"Labels":{"rtemu.lab":"l10"},
           "Image":"i","State":"running","Status":"Up","ExitCode":0},
          {"Id":"e5","Names":["unlabelled"],"Labels":null,"Image":"i","State":"created","Status":"Created","ExitCode":0}
        ]"#;
        let listed = parse_ps(json, "l1").unwrap();
        let got: Vec<(&str, Option<&str>, Status)> = listed
            .iter()
            .map(|l| (l.id.as_str(), l.node.as_deref(), l.status.clone()))
            .collect();
        assert_eq!(
            got,
            [
                ("a1", Some("web"), Status::Healthy),
                ("b2", Some("db"), Status::Exited { exit_code: 3 }),
                ("c3", None, Status::Unhealthy),
            ]
        );
        assert_eq!(
            Status::Exited { exit_code: 3 }.to_string(),
            "exited with code 3"
        );
        assert!(parse_ps(b"not json", "l1").is_err());
        // Only storage-only, unlabelled entries are a killed create's leftovers.
        let orphans = parse_orphans(json).unwrap();
        assert!(orphans.is_empty());
        let json = br#"[{"Id":"f6","Names":["rtemu-l1-n3"],"Labels":null,"Image":"i","State":"storage","Status":"Storage","ExitCode":0},
          {"Id":"g7","Names":["rtemu-l1-n4"],"Labels":{"x":"y"},"Image":"i","State":"storage","Status":"Storage","ExitCode":0}]"#;
        let orphans = parse_orphans(json).unwrap();
        assert_eq!(orphans.len(), 1);
        assert_eq!(
            (orphans[0].id.as_str(), orphans[0].name.as_str()),
            ("f6", "rtemu-l1-n3")
        );
    }
}
