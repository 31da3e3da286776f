//! A cluster of rtemu hosts on this one machine, as `rtemu-bench topo --hosts` and the command
//! line's multi-host tests run labs on: the hosts of [`rtemu_testutil::multihost::Hosts`]
//! (network namespaces on an underlay bridge), an `rtemu serve` agent in each with its own
//! `/run/rtemu`, `/run/netns` and `/etc/netns`, and one more namespace on the underlay for the
//! coordinator (`rtemu up`/`down`), with a state directory and a credentials file of its own.
//!
//! Setting up fails with an error, never a panic; dropping a [`Cluster`] takes every agent's
//! labs down, ends the agents and removes the namespaces.

use std::ffi::OsStr;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use rtemu_api::body::{ExecReply, ExecRequest};
use rtemu_api::client::{request, Target};
use rtemu_testutil::multihost::{host_address, Hosts, PRIVATE_STATE};
use serde_json::Value;

/// The agents' TCP port (each in its host's namespace, so no other process's).
pub const PORT: u16 = 7781;

/// How long an agent may take to answer, and a request to come back (an exec has its own).
const WAIT: Duration = Duration::from_secs(60);

/// One host's agent: `rtemu serve` in the host's namespace, in a process group of its own (a
/// Ctrl-C reaches only its parent, which then cleans up), its state private, its socket, token,
/// log and TLS key and certificate (kept across restarts) in the cluster's directory. Takes its labs down and ends when dropped.
pub struct Agent {
    child: Child,
    socket: Target,
}

impl Agent {
    /// Starts `rtemu` (the executable) as the agent of host `host` in namespace `netns`,
    /// listening on `address`:[`PORT`], and waits until it answers.
    pub fn start(
        rtemu: &Path,
        netns: &str,
        address: &str,
        dir: &Path,
        host: &str,
    ) -> Result<Agent> {
        let socket = dir.join(format!("{host}.sock"));
        let token = dir.join(format!("{host}.token"));
        let log_path = dir.join(format!("{host}.log"));
        // An earlier agent of this host that was killed outright left its token here (in this
        // directory of ours): `rtemu serve` writes its token only to a new file.
        match std::fs::remove_file(&token) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("removing {}", token.display()))
            }
            _ => {}
        }
        let log = std::fs::File::create(&log_path)
            .with_context(|| format!("creating {}", log_path.display()))?;
        let child = Command::new("ip")
            .args(["netns", "exec", netns, "sh", "-c"])
            .arg(format!("{PRIVATE_STATE} && exec \"$@\""))
            .arg("sh")
            .arg(rtemu)
            .args(["serve", "--socket"])
            .arg(&socket)
            .args(["--listen", &format!("{address}:{PORT}"), "--token-file"])
            .arg(&token)
            .arg("--tls-dir")
            .arg(tls_dir(dir, host))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .process_group(0)
            .spawn()
            .with_context(|| format!("starting the agent of {host}"))?;
        let mut agent = Agent {
            child,
            socket: Target::Unix(socket),
        };
        let started = Instant::now();
        while request(&agent.socket, "GET", "/v1/vnis", &[], None, WAIT).is_err() {
            let log = || std::fs::read_to_string(&log_path).unwrap_or_default();
            if let Some(status) = agent.child.try_wait()? {
                bail!("the agent of {host} ended ({status}): {}", log().trim());
            }
            if started.elapsed() > WAIT {
                bail!(
                    "the agent of {host} did not answer within {} s: {}",
                    WAIT.as_secs(),
                    log().trim()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(agent)
    }

    /// Its process id (`rtemu serve`'s: `ip netns exec` and `sh` exec it), e.g. for `nsenter`
    /// into its host's namespaces.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `method path` over the agent's socket: the status and the JSON body (null if none).
    pub fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Result<(u16, Value)> {
        let body = body.map(|b| b.to_string());
        let r = request(
            &self.socket,
            method,
            path,
            &[],
            body.as_deref().map(str::as_bytes),
            WAIT,
        )
        .with_context(|| format!("{method} {path}"))?;
        Ok((r.status, r.json().unwrap_or(Value::Null)))
    }

    /// Runs `argv` in node `node` of lab `lab` through the agent, for at most `timeout`: what it
    /// did (a refused request is an error).
    pub fn exec(
        &self,
        lab: &str,
        node: &str,
        argv: &[&str],
        timeout: Duration,
    ) -> Result<ExecReply> {
        let req = ExecRequest {
            argv: argv.iter().map(|&a| a.to_owned()).collect(),
            timeout: Some(timeout.as_secs_f64()),
            netns: false,
        };
        let path = format!("/v1/labs/{lab}/nodes/{node}/exec");
        let r = request(
            &self.socket,
            "POST",
            &path,
            &[],
            Some(serde_json::to_string(&req)?.as_bytes()),
            timeout + WAIT,
        )
        .with_context(|| format!("POST {path}"))?;
        if r.status != 200 {
            bail!(
                "running {} in {node}: HTTP {}: {}",
                argv.join(" "),
                r.status,
                r.text()
            );
        }
        Ok(r.json()?)
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        // Its engines run in their own process groups: take the labs down first.
        if let Ok((200, Value::Array(labs))) = self.call("GET", "/v1/labs", None) {
            for l in labs {
                let path = format!("/v1/labs/{}", l["name"].as_str().unwrap_or_default());
                let _ = self.call("DELETE", &path, None);
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where the agent of `host` keeps its TLS key and certificate.
fn tls_dir(dir: &Path, host: &str) -> PathBuf {
    dir.join(format!("{host}-tls"))
}

/// The cluster: `agents` hosts h1, h2, … each with its agent, and a coordinator's namespace.
/// The fields drop in order: the agents (their labs down) before the namespaces.
pub struct Cluster {
    /// The agents of h1, h2, …
    pub agents: Vec<Agent>,
    /// The hosts' namespaces: h1, h2, … and last the coordinator's.
    pub hosts: Hosts,
    rtemu: PathBuf,
    dir: PathBuf,
}

impl Cluster {
    /// Builds the namespaces (named after `tag`), starts an agent of `rtemu` on each of the
    /// first `agents` and writes the credentials file, all in `dir` (a private directory that
    /// outlives the cluster).
    pub fn start(rtemu: &Path, tag: &str, agents: usize, dir: &Path) -> Result<Cluster> {
        let hosts = Hosts::new(tag, agents + 1).map_err(|e| anyhow!("building the hosts: {e}"))?;
        Cluster::on_hosts(rtemu, hosts, agents, dir)
    }

    /// The cluster on `hosts` (at least `agents + 1`; the last is the coordinator's), as
    /// [`Cluster::start`] makes it: e.g. hosts on a delayed underlay
    /// ([`Hosts::delayed`]).
    pub fn on_hosts(rtemu: &Path, hosts: Hosts, agents: usize, dir: &Path) -> Result<Cluster> {
        let state = dir.join("coordinator-run");
        std::fs::DirBuilder::new()
            .mode(0o755)
            .create(&state)
            .with_context(|| format!("creating {}", state.display()))?;
        let mut cluster = Cluster {
            agents: Vec::new(),
            hosts,
            rtemu: rtemu.to_owned(),
            dir: dir.to_owned(),
        };
        for i in 0..agents {
            let agent = cluster.start_agent(i)?;
            cluster.agents.push(agent);
        }
        cluster.write_credentials()?;
        Ok(cluster)
    }

    /// Starts the agent of host `i` (0-based: h1 is 0), e.g. again after it was dropped; its
    /// token is new, so [`Cluster::write_credentials`] must follow.
    pub fn start_agent(&self, i: usize) -> Result<Agent> {
        Agent::start(
            &self.rtemu,
            &self.hosts.names[i],
            &host_address(i),
            &self.dir,
            &format!("h{}", i + 1),
        )
    }

    /// Writes the credentials file (mode 0600) from the tokens the agents wrote and the
    /// certificates they made: each host bound to its agent's address and certificate.
    pub fn write_credentials(&self) -> Result<()> {
        let mut text = String::new();
        for i in 0..self.agents.len() {
            let host = format!("h{}", i + 1);
            let path = self.dir.join(format!("{host}.token"));
            let token = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            let tls = tls_dir(&self.dir, &host);
            let cert = rtemu_api::tls::read_certificate(&tls.join(rtemu_api::tls::CERT_FILE))?;
            let fingerprint = rtemu_api::tls::Fingerprint::of(&cert);
            let address = std::net::SocketAddr::new(host_address(i).parse()?, PORT);
            text += &format!(
                "[{host}]\naddress = \"{address}\"\nfingerprint = \"{fingerprint}\"\n\
                 token = \"{}\"\n",
                token.trim()
            );
        }
        let path = self.credentials();
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
        Ok(())
    }

    /// The credentials file (`--credentials`).
    pub fn credentials(&self) -> PathBuf {
        self.dir.join("hosts.toml")
    }

    /// The coordinator's state directory (its `/run/rtemu`).
    pub fn state(&self) -> PathBuf {
        self.dir.join("coordinator-run")
    }

    /// `rtemu ARGS` as the coordinator runs it: in its namespace, with its state directory as
    /// `/run/rtemu` (in a mount namespace of the command's own); to be run by the caller.
    pub fn coordinate<S: AsRef<OsStr>>(&self, args: &[S]) -> Command {
        let coordinator = self
            .hosts
            .names
            .last()
            .expect("a cluster has a coordinator");
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", coordinator, "sh", "-c"])
            .arg("mkdir -p /run/rtemu && mount --bind \"$1\" /run/rtemu && shift && exec \"$@\"")
            .arg("sh")
            .arg(self.state())
            .arg(&self.rtemu)
            .args(args);
        cmd
    }
}
