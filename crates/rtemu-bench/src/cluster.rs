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
use rtemu_testutil::multihost::{host_address, machine_cgroups, Hosts, PRIVATE_STATE};
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
            .arg(format!(
                "{PRIVATE_STATE} && {} && exec \"$@\"",
                machine_cgroups()
            ))
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
        let coordinator = self.coordinator_netns();
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

/// The coordinator's own server: `rtemu serve --credentials` in the coordinator's namespace,
/// its state directory as `/run/rtemu`, its Unix socket in the cluster's directory (reachable
/// from any namespace: a socket file is not a network address). Ended (SIGTERM, then waited
/// for) when dropped.
pub struct Coordinator {
    child: Child,
    socket: Target,
}

impl Coordinator {
    /// `method path` over its socket: the whole reply.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> std::io::Result<rtemu_api::client::Reply> {
        let body = body.map(Value::to_string);
        let headers = [("Content-Type", "application/json")];
        request(
            &self.socket,
            method,
            path,
            &headers,
            body.as_deref().map(str::as_bytes),
            // An `up` across hosts waits for every agent's.
            Duration::from_secs(120),
        )
    }
}

impl Drop for Coordinator {
    fn drop(&mut self) {
        // SIGTERM: the server stops and removes its socket.
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = self.child.wait();
    }
}

impl Cluster {
    /// Starts the coordinator's server (log `coordinator.log`, socket `coordinator.sock` in the
    /// cluster's directory) and waits until it answers. With `tcp`, it also listens there in
    /// its namespace, its token in `coordinator.token`.
    pub fn serve(&self, tcp: Option<std::net::SocketAddr>) -> Result<Coordinator> {
        let socket = self.dir.join("coordinator.sock");
        let log_path = self.dir.join("coordinator.log");
        let log = std::fs::File::create(&log_path)
            .with_context(|| format!("creating {}", log_path.display()))?;
        let mut args = vec![
            "serve".into(),
            "--socket".into(),
            socket.clone().into_os_string(),
        ];
        if let Some(addr) = tcp {
            args.extend([
                "--listen".into(),
                addr.to_string().into(),
                "--token-file".into(),
            ]);
            args.push(self.dir.join("coordinator.token").into_os_string());
        }
        args.extend(["--credentials".into(), self.credentials().into_os_string()]);
        let child = self
            .coordinate(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .context("starting the coordinator's server")?;
        let mut c = Coordinator {
            child,
            socket: Target::Unix(socket),
        };
        let started = Instant::now();
        while c.request("GET", "/v1/labs", None).is_err() {
            let log = || std::fs::read_to_string(&log_path).unwrap_or_default();
            if let Some(status) = c.child.try_wait()? {
                bail!(
                    "the coordinator's server ended ({status}): {}",
                    log().trim()
                );
            }
            if started.elapsed() > WAIT {
                bail!(
                    "the coordinator's server did not answer within {} s: {}",
                    WAIT.as_secs(),
                    log().trim()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(c)
    }

    /// The coordinator's namespace.
    pub fn coordinator_netns(&self) -> &str {
        self.hosts
            .names
            .last()
            .expect("a cluster has a coordinator")
    }
}

/// Where the coordinator's server listens in its namespace when [`hold`] relays to it.
const COORDINATOR_TCP: &str = "127.0.0.1:7790";

/// What [`hold`] prints once the cluster is ready: how to reach it.
#[derive(Debug, serde::Serialize)]
pub struct Held {
    /// The coordinator's Unix socket (root only; no token).
    pub socket: PathBuf,
    /// The web view through the relay in this namespace, the token in its fragment.
    pub url: String,
    /// The relay's address here: the coordinator's TCP API (with `token`).
    pub api: std::net::SocketAddr,
    /// The bearer token of `api`.
    pub token: String,
    /// The credentials file the coordinator uses (`rtemu up --credentials`).
    pub credentials: PathBuf,
    /// The `[hosts]` table a topology needs to spread over the agents.
    pub hosts: String,
}

/// `rtemu-bench cluster`: `agents` hosts with their agents and a coordinating server on this
/// machine, held until Ctrl-C or SIGTERM: for trying a lab across hosts on one machine, and for
/// the Python package's and the web view's tests of one. Prints `rtemu-bench cluster: ` and a
/// [`Held`] as JSON on one line once ready; removes everything when it ends.
pub fn hold(agents: usize) -> Result<()> {
    rtemu_control::root::need_root("rtemu-bench cluster")?;
    let stop = crate::topo::Stop::install()?;
    let scratch = crate::topo::DirGuard::new("cluster")?;
    let dir = &scratch.0;
    let cluster = Cluster::start(&crate::rtemu()?, "c", agents, dir)?;
    let inside: std::net::SocketAddr = COORDINATOR_TCP.parse().expect("an address");
    let coordinator = cluster.serve(Some(inside))?;
    let api = crate::relay::start(
        "127.0.0.1:0".parse().expect("an address"),
        cluster.coordinator_netns(),
        inside,
    )?;
    let token_path = dir.join("coordinator.token");
    let token = std::fs::read_to_string(&token_path)
        .with_context(|| format!("reading {}", token_path.display()))?
        .trim()
        .to_owned();
    let held = Held {
        socket: dir.join("coordinator.sock"),
        url: format!("http://{api}/#token={token}"),
        api,
        token,
        credentials: cluster.credentials(),
        hosts: rtemu_testutil::multihost::hosts_table(agents, Some(PORT)),
    };
    println!("rtemu-bench cluster: {}", serde_json::to_string(&held)?);
    eprintln!(
        "rtemu-bench cluster: {agents} hosts ready; Ctrl-C takes their labs down and ends it"
    );
    while stop.check().is_ok() {
        std::thread::sleep(Duration::from_millis(100));
    }
    // The coordinator first, then the agents (their labs down), then the namespaces.
    drop(coordinator);
    drop(cluster);
    Ok(())
}
