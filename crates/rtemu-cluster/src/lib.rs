//! The coordinator of a multi-host lab: `rtemu up FILE` with `[hosts]`, run on any machine,
//! asks every host's agent (`rtemu serve --listen --tls-dir`, over TLS to the certificate the
//! credentials pin, with that host's token) for the
//! VNIs it uses, allocates the lab's from what none uses, and has each agent build its part;
//! `rtemu down LAB` takes every part down.
//!
//! The coordinating machine keeps one record per such lab, `/run/rtemu/<lab>.hosts.json` (the
//! hosts still to take down), written before any part is built, so `down` knows where to go
//! even after a killed `up`, and whether or not the machine holds a part itself. It also keeps
//! the lab's topology, from which the lab-wide views ([`listing`], [`stats`], [`link`],
//! [`capture`]) know every node's and engine's host and reach the right agents.
//!
//! It is a crate of its own because it is a client, not a server: it only speaks the API
//! (`rtemu-api`'s bodies and client) to the agents, so the command line and the benchmarks
//! coordinate labs without linking the server (`rtemu-serve`).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod capture;
pub mod error;
pub mod link;
pub mod listing;
pub mod node;
pub mod spread;
pub mod stats;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io::Write;
use std::net::SocketAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use rtemu_api::body::{DownReply, ErrorBody, PartRequest, Vnis};
use rtemu_api::client::{request, request_streaming, Reply, Streaming, Target};
use rtemu_api::tls::Fingerprint;
use rtemu_control::message::FinalReport;
use rtemu_topo::part::Stitching;
use rtemu_topo::state::LabName;
use rtemu_topo::topology::{valid_name, Host, MAX_NODE_NAME};
use rtemu_topo::Topology;
use serde::{Deserialize, Serialize};

pub use crate::error::ClusterError;

/// Where the agents' tokens are read from unless `--credentials` says otherwise.
pub const DEFAULT_CREDENTIALS: &str = "/etc/rtemu/hosts.toml";

/// How long an agent may take to answer a question (its VNIs).
const ASK_TIMEOUT: Duration = Duration::from_secs(10);

/// How long an agent may take to build or remove its part (namespaces, tunnels, its engine).
const PART_TIMEOUT: Duration = Duration::from_secs(120);

/// Each host's agent: where it listens, its certificate's fingerprint and its token, in a
/// root-only TOML file of one table per host, never in the topology file, which is shared and
/// versioned. The topology only names a host's agent: one it places elsewhere than its
/// credentials say is refused, and so is an agent that does not show the pinned certificate,
/// both before its token is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    path: PathBuf,
    hosts: BTreeMap<String, Entry>,
}

/// One host's credentials.
#[derive(Clone, PartialEq, Eq)]
struct Entry {
    address: SocketAddr,
    fingerprint: Fingerprint,
    token: String,
}

/// Everything but the token: a debug print (a log line, a panic message) must not carry a
/// key that is root on the agent's host.
impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("address", &self.address)
            .field("fingerprint", &self.fingerprint)
            .field("token", &"(hidden)")
            .finish()
    }
}

/// How one host's credentials are written, for messages.
const ENTRY_FORM: &str = "address = \"IP:PORT\" (where its agent listens), fingerprint = \"…\" \
                          (the SHA-256 its `rtemu serve --tls-dir` printed) and token = \"…\"";

impl Credentials {
    /// Reads `path`, refusing it when anyone but its owner, this user, may read or write it.
    pub fn load(path: &Path) -> Result<Credentials> {
        let meta = std::fs::metadata(path).with_context(|| {
            format!(
                "reading the agents' tokens from {} (give another file with --credentials)",
                path.display()
            )
        })?;
        rtemu_api::secret::owner_only(path, &meta, "the agents' tokens")?;
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Credentials::parse(path, &text)
    }

    /// The tokens of `text` (read from `path`, for messages).
    pub fn parse(path: &Path, text: &str) -> Result<Credentials> {
        let table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| anyhow!("{}: {}", path.display(), e.message()))?;
        let mut hosts = BTreeMap::new();
        for (host, value) in table {
            if !valid_name(&host, MAX_NODE_NAME) {
                bail!(
                    "{}: invalid host name `{host}`: use the names of the topology's [hosts]",
                    path.display()
                );
            }
            let entry = Entry::parse(&host, value).map_err(|e| {
                anyhow!(
                    "{}: host `{host}`: {e}: give [{host}] with {ENTRY_FORM}",
                    path.display()
                )
            })?;
            hosts.insert(host, entry);
        }
        Ok(Credentials {
            path: path.to_owned(),
            hosts,
        })
    }

    /// The agent of every host in `hosts`, or an error naming those without credentials and
    /// any whose address differs from the one its credentials bind it to.
    pub(crate) fn agents<'a>(&'a self, hosts: &'a [Host]) -> Result<Vec<Agent<'a>>, ClusterError> {
        let missing: Vec<&str> = hosts
            .iter()
            .filter(|h| !self.hosts.contains_key(&h.name))
            .map(|h| h.name.as_str())
            .collect();
        if !missing.is_empty() {
            return Err(ClusterError::NoCredentials {
                file: self.path.clone(),
                hosts: missing.join(", "),
            });
        }
        let mut agents = Vec::new();
        for h in hosts {
            let entry = &self.hosts[&h.name];
            let named = SocketAddr::new(h.address, h.port);
            if named != entry.address {
                return Err(ClusterError::Misplaced {
                    host: h.name.clone(),
                    named,
                    file: self.path.clone(),
                    bound: entry.address,
                });
            }
            agents.push(Agent { host: h, entry });
        }
        Ok(agents)
    }

    /// Where each host's agent listens, by host name.
    pub fn addresses(&self) -> impl Iterator<Item = (&str, SocketAddr)> {
        self.hosts.iter().map(|(h, e)| (h.as_str(), e.address))
    }
}

impl Entry {
    /// `value`, the table of host `host`.
    fn parse(host: &str, value: toml::Value) -> Result<Entry> {
        let toml::Value::Table(mut table) = value else {
            bail!("its credentials are a table, not a {}", value.type_str());
        };
        let mut field = |name: &str| match table.remove(name) {
            Some(toml::Value::String(s)) => Ok(s),
            Some(v) => bail!("`{name}` is a {}, not a string", v.type_str()),
            None => bail!("`{name}` is missing"),
        };
        let (address, fingerprint, token) =
            (field("address")?, field("fingerprint")?, field("token")?);
        if let Some(unknown) = table.keys().next() {
            bail!("unknown key `{unknown}`");
        }
        let address = address
            .parse()
            .map_err(|_| anyhow!("address `{address}` is not IP:PORT ([IPv6]:PORT)"))?;
        let fingerprint = fingerprint.parse()?;
        if token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()) {
            bail!(
                "its token is a string of printable characters without spaces (the token the \
                 agent of `{host}` wrote or read)"
            );
        }
        Ok(Entry {
            address,
            fingerprint,
            token,
        })
    }
}

/// One host's agent, as the coordinator reaches it.
pub(crate) struct Agent<'a> {
    pub(crate) host: &'a Host,
    entry: &'a Entry,
}

impl Agent<'_> {
    /// Where the agent listens.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.entry.address
    }

    /// The agent as the client reaches it: over TLS, to its pinned certificate only.
    fn target(&self) -> Target {
        Target::Tls(self.addr(), self.entry.fingerprint)
    }

    /// Sends `method path` (with `body` as JSON) and reads the whole reply, whatever its
    /// status; no reply is an error naming the host.
    pub(crate) fn reply(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        timeout: Duration,
    ) -> Result<Reply, ClusterError> {
        let bearer = format!("Bearer {}", self.entry.token);
        request(
            &self.target(),
            method,
            path,
            &[("Authorization", &bearer)],
            body,
            timeout,
        )
        .map_err(|e| self.unreachable(format!("{e:#}")))
    }

    /// The error of this agent failing as `e` says.
    fn unreachable(&self, why: String) -> ClusterError {
        ClusterError::Unreachable {
            host: self.host.name.clone(),
            agent: self.addr(),
            why,
        }
    }

    /// Sends `GET path` and reads the reply's head: its body is read as it arrives (see
    /// [`request_streaming`]); no reply is an error naming the host.
    pub(crate) fn streaming(&self, path: &str, timeout: Duration) -> Result<Streaming> {
        let bearer = format!("Bearer {}", self.entry.token);
        request_streaming(
            &self.target(),
            "GET",
            path,
            &[("Authorization", &bearer)],
            None,
            timeout,
        )
        .map_err(|e| self.unreachable(format!("{e:#}")).into())
    }

    /// Sends `method path` (with `body` as JSON) and reads the reply as `T`; an error reply
    /// or no reply is an error naming the host.
    pub(crate) fn call<T: serde::de::DeserializeOwned>(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        timeout: Duration,
    ) -> Result<T, ClusterError> {
        let reply = self.ok(self.reply(method, path, body, timeout)?)?;
        reply
            .json()
            .map_err(|e| self.unreachable(format!("its reply: {e}")))
    }

    /// `reply` when its status is a success, else an error naming the host with the agent's
    /// reason.
    pub(crate) fn ok(&self, reply: Reply) -> Result<Reply, ClusterError> {
        if !(200..300).contains(&reply.status) {
            let message = reply
                .json::<ErrorBody>()
                .map_or_else(|_| reply.text(), |e| e.error);
            return Err(ClusterError::Refused {
                host: self.host.name.clone(),
                agent: self.addr(),
                status: reply.status,
                message,
            });
        }
        Ok(reply)
    }

    /// Takes the part of lab `lab` on this host down: whether there was one, and its
    /// engine's final report.
    fn down(&self, lab: &LabName) -> Result<DownReply, ClusterError> {
        self.call("DELETE", &format!("/v1/labs/{lab}"), None, PART_TIMEOUT)
    }
}

/// The coordinator's record of a lab spread over hosts: those still to take down, and the lab
/// as it was brought up (absent from records of older versions).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Record {
    hosts: Vec<Host>,
    #[serde(default)]
    lab: Option<Recorded>,
}

/// A lab across hosts as its coordinator brought it up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Recorded {
    /// The file it came from.
    pub(crate) file: String,
    /// Its topology (named as it runs), which places every node and engine on a host.
    pub(crate) topology: Topology,
}

/// Where lab `lab`'s record is kept (a file beside the labs' directories, which `ls` skips).
fn record_path(lab: &LabName) -> Result<PathBuf> {
    Ok(rtemu_topo::state::state_root()?.join(format!("{lab}.hosts.json")))
}

/// The labs this machine coordinates (those with a record), in name order; none when there is
/// no state directory (as `rtemu ls` finds no lab there).
pub(crate) fn recorded_labs() -> Result<Vec<LabName>> {
    let root = Path::new(rtemu_topo::state::STATE_ROOT);
    if !rtemu_topo::state::trusted_dir(root)? {
        return Ok(Vec::new());
    }
    let entries = std::fs::read_dir(root).with_context(|| format!("reading {}", root.display()))?;
    let mut labs = Vec::new();
    for entry in entries {
        let name = entry?.file_name();
        let lab = name.to_str().and_then(|n| n.strip_suffix(".hosts.json"));
        labs.extend(lab.and_then(|l| LabName::new(l).ok()));
    }
    labs.sort();
    Ok(labs)
}

/// Lab `lab` as this machine brought it up across hosts; `None` when it coordinates no such
/// lab.
pub(crate) fn recorded(lab: &LabName) -> Result<Option<Recorded>> {
    let Some(record) = Record::load(lab)? else {
        return Ok(None);
    };
    match record.lab {
        Some(r) => Ok(Some(r)),
        None => bail!(
            "the record of lab `{lab}` was written by an older rtemu and lacks its topology: \
             `rtemu down {lab}`, then `rtemu up` it again, to see it across hosts"
        ),
    }
}

impl Record {
    fn load(lab: &LabName) -> Result<Option<Record>> {
        let path = record_path(lab)?;
        match std::fs::read(&path) {
            Ok(bytes) => Ok(Some(
                serde_json::from_slice(&bytes)
                    .with_context(|| format!("reading {}", path.display()))?,
            )),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }

    /// Writes the record (root-only, replacing the old one whole), or removes it when no host
    /// is left.
    fn save(&self, lab: &LabName) -> Result<()> {
        let path = record_path(lab)?;
        if self.hosts.is_empty() {
            return match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(e).with_context(|| format!("removing {}", path.display()))
                }
                _ => Ok(()),
            };
        }
        let new = path.with_extension(format!("new.{}", std::process::id()));
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&new)
            .with_context(|| format!("creating {}", new.display()))?;
        f.write_all(&serde_json::to_vec(self)?)
            .and_then(|()| f.sync_all())
            .and_then(|()| std::fs::rename(&new, &path))
            .with_context(|| format!("writing {}", path.display()))
    }
}

/// What bringing a lab up across its hosts did.
#[derive(Debug)]
pub struct ClusterUp {
    /// The lab.
    pub lab: LabName,
    /// Its hosts, in `[hosts]` order.
    pub hosts: Vec<String>,
    /// The VNIs its stitched segments got.
    pub stitching: Stitching,
    /// How long it took.
    pub elapsed: Duration,
}

impl fmt::Display for ClusterUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let vnis: Vec<String> = self
            .stitching
            .vnis
            .iter()
            .map(|(s, v)| format!("{s} {v}"))
            .collect();
        write!(
            f,
            "lab {} is up on {} (VNIs: {}) ({:.0} ms)",
            self.lab,
            self.hosts.join(", "),
            if vnis.is_empty() {
                "none".to_owned()
            } else {
                vnis.join(", ")
            },
            self.elapsed.as_secs_f64() * 1e3
        )
    }
}

/// Brings the multi-host lab `topo` (read from `file`, whose text every agent gets; `topo.lab`
/// may rename it) up: every host's part, through its agent, with the tokens in
/// `credentials`. When a host cannot be reached or fails its part, the parts already built
/// are taken down again and the error names the host and why.
pub fn up(topo: &Topology, file: &Path, credentials: &Path) -> Result<ClusterUp, ClusterError> {
    up_avoiding(topo, file, credentials, BTreeSet::new())
}

/// [`up`], the lab's VNIs chosen from those neither in use nor in `avoid`.
fn up_avoiding(
    topo: &Topology,
    file: &Path,
    credentials: &Path,
    avoid: BTreeSet<u32>,
) -> Result<ClusterUp, ClusterError> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    // The agents look for trace files relative to the file's absolute path, not their own
    // working directory.
    let file = std::path::absolute(file).with_context(|| format!("locating {}", file.display()))?;
    let credentials = Credentials::load(credentials)?;
    up_text(
        topo,
        &text,
        &file.display().to_string(),
        &credentials,
        avoid,
    )
}

/// [`up`] of a topology given as its text (`text`, named `file` in messages and in the
/// agents' state, e.g. a topology an API request carried inline), with `credentials` already
/// read.
pub fn up_from_text(
    topo: &Topology,
    text: &str,
    file: &str,
    credentials: &Credentials,
) -> Result<ClusterUp, ClusterError> {
    up_text(topo, text, file, credentials, BTreeSet::new())
}

fn up_text(
    topo: &Topology,
    text: &str,
    file: &str,
    credentials: &Credentials,
    avoid: BTreeSet<u32>,
) -> Result<ClusterUp, ClusterError> {
    let started = Instant::now();
    let lab = LabName::new(&topo.lab).map_err(anyhow::Error::from)?;
    let agents = credentials.agents(&topo.hosts)?;
    if let Some(r) = Record::load(&lab)? {
        let hosts: Vec<&str> = r.hosts.iter().map(|h| h.name.as_str()).collect();
        return Err(ClusterError::Exists {
            lab,
            hosts: hosts.join(", "),
        });
    }
    let mut in_use = avoid;
    for a in &agents {
        let vnis: Vnis = a.call("GET", "/v1/vnis", None, ASK_TIMEOUT)?;
        in_use.extend(vnis.vnis);
    }
    let stitching = Stitching::allocate(topo, &in_use).map_err(anyhow::Error::from)?;
    let part = |host: &str| PartRequest {
        topology: text.to_owned(),
        file: file.to_owned(),
        name: Some(lab.to_string()),
        host: host.to_owned(),
        stitching: stitching.clone().into(),
    };
    let recorded = Recorded {
        file: file.to_owned(),
        topology: topo.clone(),
    };
    Record {
        hosts: topo.hosts.clone(),
        lab: Some(recorded.clone()),
    }
    .save(&lab)?;
    for (i, a) in agents.iter().enumerate() {
        let body = serde_json::to_vec(&part(&a.host.name)).map_err(anyhow::Error::from)?;
        let built: Result<serde_json::Value, ClusterError> =
            a.call("POST", "/v1/parts", Some(&body), PART_TIMEOUT);
        if let Err(e) = built {
            let undone = undo(&lab, &agents[..i], &recorded);
            return Err(ClusterError::Up {
                lab,
                undone,
                cause: Box::new(e),
            });
        }
    }
    Ok(ClusterUp {
        lab,
        hosts: topo.hosts.iter().map(|h| h.name.clone()).collect(),
        stitching,
        elapsed: started.elapsed(),
    })
}

/// Takes down the parts of `lab` that `built` made, after another host failed; says what it
/// did. The record keeps the hosts it could not reach, for a later `down`.
fn undo(lab: &LabName, built: &[Agent<'_>], recorded: &Recorded) -> String {
    let mut left = Vec::new();
    let mut taken = Vec::new();
    for a in built {
        match a.down(lab) {
            Ok(_) => taken.push(a.host.name.as_str()),
            Err(e) => left.push((a.host.clone(), format!("{e:#}"))),
        }
    }
    let record = Record {
        hosts: left.iter().map(|(h, _)| h.clone()).collect(),
        lab: Some(recorded.clone()),
    };
    let kept = record.save(lab);
    let mut said = if taken.is_empty() {
        "no part had been built".to_owned()
    } else {
        format!("the parts built on {} were taken down", taken.join(", "))
    };
    for (h, why) in &left {
        said += &format!("; the part on `{}` could not be: {why}", h.name);
    }
    if let Err(e) = kept {
        said += &format!("; {e:#}");
    } else if !left.is_empty() {
        said += &format!(" (`rtemu down {lab}` tries again)");
    }
    said
}

/// `rtemu up --replace` of a lab across hosts: takes lab `topo.lab` down on every host of
/// `topo`'s `[hosts]` and every host this machine's record of it still names (a host without
/// the lab has nothing to do), then brings it up as [`up`] does. Its new VNIs differ from
/// those in use before: the kernel frees a removed tunnel's VNI a moment after `down`. The
/// hosts `down` cannot reach stay recorded (with `topo`, read from `file`, unless the record
/// has the lab already), and nothing is brought up.
pub fn replace(topo: &Topology, file: &Path, credentials: &Path) -> Result<ClusterUp> {
    let lab = LabName::new(&topo.lab)?;
    let tokens = Credentials::load(credentials)?;
    let mut avoid = BTreeSet::new();
    for a in &tokens.agents(&topo.hosts)? {
        let vnis: Vnis = a.call("GET", "/v1/vnis", None, ASK_TIMEOUT)?;
        avoid.extend(vnis.vnis);
    }
    let mut record = Record::load(&lab)?.unwrap_or(Record {
        hosts: Vec::new(),
        lab: None,
    });
    record.lab.get_or_insert_with(|| Recorded {
        file: file.display().to_string(),
        topology: topo.clone(),
    });
    for h in &topo.hosts {
        if !record.hosts.iter().any(|r| r.name == h.name) {
            record.hosts.push(h.clone());
        }
    }
    down_recorded(&lab, &record, &tokens)?;
    Ok(up_avoiding(topo, file, credentials, avoid)?)
}

/// What taking a lab down across its hosts did.
#[derive(Debug)]
pub struct ClusterDown {
    /// The lab.
    pub lab: LabName,
    /// The hosts that took their part down.
    pub hosts: Vec<String>,
    /// Their engines' final reports as one (see [`stats::final_report`]); `None` when none
    /// ran an engine.
    pub report: Option<FinalReport>,
    /// Why some host's part is still up, naming each and what to do; `None`: down on every
    /// host. The report above stands either way.
    pub partly: Option<ClusterError>,
}

impl ClusterDown {
    /// The lab down on every host, or why not (the report is then dropped).
    pub fn everywhere(self) -> Result<ClusterDown, ClusterError> {
        match self.partly {
            Some(e) => Err(e),
            None => Ok(self),
        }
    }
}

impl fmt::Display for ClusterDown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "lab {} is down on {}", self.lab, self.hosts.join(", "))
    }
}

/// Takes lab `lab` down on every host, with the tokens in `credentials`: when this machine
/// coordinates it, on every host it brought it up on; when this host holds a part of it (and
/// has the credentials file), its own part with `take_here` (its engine's report, and whether
/// there was a part) and every other host's through its agent. Either way the engines' reports
/// come back as one. `None` when neither: the lab may still run here
/// alone. A host that cannot be reached is named in the error (and kept in the coordinator's
/// record, so a later `down` there tries it again); `down` on that host alone also cleans its
/// part.
pub fn down(
    lab: &LabName,
    credentials: &Path,
    take_here: impl FnOnce() -> rtemu_control::lab::Down,
) -> Option<Result<ClusterDown>> {
    let record = match Record::load(lab) {
        Ok(r) => r,
        Err(e) => return Some(Err(e)),
    };
    if let Some(record) = record {
        let down =
            Credentials::load(credentials).and_then(|c| Ok(down_recorded(lab, &record, &c)?));
        return Some(down);
    }
    match spread::part_here(lab, credentials) {
        Ok(None) => None,
        Ok(Some((recorded, here))) => Some(down_from_part(
            lab,
            &recorded,
            &here,
            credentials,
            take_here,
        )),
        Err(e) => Some(Err(e)),
    }
}

/// Takes down lab `lab` (as `recorded`) from host `here`, which holds a part of it: the part
/// here with `take_here`, every other host's through its agent.
fn down_from_part(
    lab: &LabName,
    recorded: &Recorded,
    here: &str,
    credentials: &Path,
    take_here: impl FnOnce() -> rtemu_control::lab::Down,
) -> Result<ClusterDown> {
    let credentials = Credentials::load(credentials)?;
    let others: Vec<Host> = recorded
        .topology
        .hosts
        .iter()
        .filter(|h| h.name != here)
        .cloned()
        .collect();
    let agents = credentials.agents(&others)?;
    let mut done = Vec::new();
    let mut why = Vec::new();
    let mut reports = Vec::new();
    let own = take_here();
    reports.extend(own.report.map(|r| (here.to_owned(), r)));
    match own.removed {
        Ok(_) => done.push(here.to_owned()),
        Err(e) => why.push(format!(
            "host `{here}` (this one): {}",
            rtemu_control::error::message(&e)
        )),
    }
    for a in &agents {
        match a.down(lab) {
            Ok(down) => {
                done.push(a.host.name.clone());
                reports.extend(down.report.map(|r| (a.host.name.clone(), r)));
            }
            Err(e) => why.push(format!("{e:#}")),
        }
    }
    let mut down = went_down(lab, done, &why, "`rtemu down {lab}` tries again");
    down.report = stats::final_report(lab, Some(&recorded.topology), reports);
    Ok(down)
}

/// Takes lab `lab` down as `rtemu down` does: across hosts when it is spread ([`down`]), else
/// on this machine alone. The engines' final report goes to `out` (and, when `fidelity`
/// names a file, as JSON there); which hosts it went down on goes to `notes`, before a file
/// that could not be saved is told. Whether there was a lab.
pub fn take_down(
    lab: &LabName,
    credentials: &Path,
    fidelity: Option<&Path>,
    out: &mut impl Write,
    notes: &mut impl Write,
) -> Result<bool> {
    let Some(spread) = down(lab, credentials, || rtemu_control::lab::down(lab)) else {
        return rtemu_control::lab::take_down(lab, fidelity, out);
    };
    let down = spread?;
    // The engines' reports as one, as a lab on one machine shows its engine's.
    let saved = match &down.report {
        Some(report) => {
            rtemu_control::message::give_final_report(out, lab.as_str(), report, fidelity)
                .context("writing the final report")?
        }
        None => Ok(()),
    };
    // The report of what went down first, then which host's part did not, then whether the
    // report could be saved.
    writeln!(notes, "{}", down.everywhere()?)?;
    saved?;
    Ok(true)
}

/// Takes lab `lab` down on every host this machine's record of it names, with the tokens in
/// `credentials`; `None` when this machine coordinates no such lab (it may run here alone).
/// A host that cannot be reached stays in the record, for a later `down`.
pub fn down_coordinated(
    lab: &LabName,
    credentials: &Credentials,
) -> Result<Option<ClusterDown>, ClusterError> {
    match Record::load(lab)? {
        Some(record) => down_recorded(lab, &record, credentials)?
            .everywhere()
            .map(Some),
        None => Ok(None),
    }
}

fn down_recorded(
    lab: &LabName,
    record: &Record,
    credentials: &Credentials,
) -> Result<ClusterDown, ClusterError> {
    let agents = credentials.agents(&record.hosts)?;
    let mut done = Vec::new();
    let mut left = Vec::new();
    let mut why = Vec::new();
    let mut reports = Vec::new();
    for a in &agents {
        match a.down(lab) {
            Ok(down) => {
                done.push(a.host.name.clone());
                reports.extend(down.report.map(|r| (a.host.name.clone(), r)));
            }
            Err(e) => {
                left.push(a.host.clone());
                why.push(e.to_string());
            }
        }
    }
    Record {
        hosts: left,
        lab: record.lab.clone(),
    }
    .save(lab)?;
    let again = "`rtemu down {lab}` here tries again; `rtemu down {lab}` on such a host cleans \
                 its part";
    let mut down = went_down(lab, done, &why, again);
    down.report = stats::final_report(lab, record.lab.as_ref().map(|r| &r.topology), reports);
    Ok(down)
}

/// What a lab-wide `down` did: the hosts in `done` took their part down; when any could not
/// (`why`, naming each), why, saying what to do (`again`, `{lab}` standing for the lab).
fn went_down(lab: &LabName, done: Vec<String>, why: &[String], again: &str) -> ClusterDown {
    let partly = (!why.is_empty()).then(|| {
        ClusterError::Partly(format!(
            "lab `{lab}` is down on {}, but not everywhere: {} ({})",
            if done.is_empty() {
                "no host".to_owned()
            } else {
                done.join(", ")
            },
            why.join("; "),
            again.replace("{lab}", lab.as_str())
        ))
    });
    ClusterDown {
        lab: lab.clone(),
        hosts: done,
        report: None,
        partly,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtemu_serve::tls::AgentCert;
    use std::io::Read;
    use std::net::TcpListener;

    const TOKEN: &str = "t0ken-that-must-not-leak-0123456789abcdef";

    fn entry(address: &str, fingerprint: Fingerprint) -> String {
        format!("address = \"{address}\"\nfingerprint = \"{fingerprint}\"\ntoken = \"{TOKEN}\"\n")
    }

    fn host(name: &str, addr: SocketAddr) -> Host {
        Host {
            name: name.into(),
            address: addr.ip(),
            port: addr.port(),
        }
    }

    fn pair() -> AgentCert {
        AgentCert::new_pair(vec!["rtemu-agent".into()]).unwrap().0
    }

    #[test]
    fn credentials_bind_each_host_to_an_address_a_fingerprint_and_a_token() {
        let p = Path::new("hosts.toml");
        let f = Fingerprint::of(b"x");
        let text = format!(
            "[h1]\n{}[h2]\n{}",
            entry("192.0.2.1:7781", f),
            entry("[2001:db8::1]:7781", f)
        );
        let c = Credentials::parse(p, &text).unwrap();
        assert_eq!(c.hosts.len(), 2);
        assert_eq!(c.hosts["h2"].address, "[2001:db8::1]:7781".parse().unwrap());
        assert_eq!(c.hosts["h1"].fingerprint, f);
        assert_eq!(c.hosts["h1"].token, TOKEN);
        let shown = format!("{c:?}");
        assert!(
            !shown.contains(TOKEN) && shown.contains("(hidden)") && shown.contains("192.0.2.1"),
            "a debug print shows where the agents are, never their tokens: {shown}"
        );
        let good = entry("192.0.2.1:7781", f);
        for (bad, says) in [
            (format!("[H1]\n{good}"), "invalid host name `H1`"),
            // The old form, a token alone: no address or certificate to hold the agent to.
            (
                "h1 = \"abc\"\n".into(),
                "host `h1`: its credentials are a table, not a string",
            ),
            (
                format!("[h1]\n{}", good.replace("address", "adress")),
                "`address` is missing",
            ),
            (
                format!(
                    "[h1]\n{}",
                    good.replace("fingerprint = ", "fingerprint = 1 #")
                ),
                "`fingerprint` is a integer",
            ),
            (
                format!("[h1]\n{}", good.replace(":7781", "")),
                "address `192.0.2.1` is not IP:PORT",
            ),
            (
                format!("[h1]\n{}", good.replace(&f.to_string(), "AB:CD")),
                "SHA-256 in hex",
            ),
            (
                format!("[h1]\n{}", good.replace(TOKEN, "a b")),
                "printable characters",
            ),
            (
                format!("[h1]\n{good}insecure = true\n"),
                "unknown key `insecure`",
            ),
            ("h1 = \"a\nb\"\n".into(), "hosts.toml: "),
        ] {
            let e = format!("{:#}", Credentials::parse(p, &bad).unwrap_err());
            assert!(e.contains(says), "{bad:?}: {e}");
            assert!(!e.contains(TOKEN), "the token shown: {e}");
        }
    }

    #[test]
    fn credentials_open_to_others_are_refused() {
        let dir = std::env::temp_dir().join(format!("rtemu-cred-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("hosts.toml");
        let f = Fingerprint::of(b"x");
        std::fs::write(&path, format!("[h1]\n{}", entry("192.0.2.1:7781", f))).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = Credentials::load(&path).unwrap_err().to_string();
        assert!(e.contains("open to group or others (mode 644)"), "{e}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let c = Credentials::load(&path).unwrap();
        let hosts = [
            host("h1", "192.0.2.1:7781".parse().unwrap()),
            host("h2", "192.0.2.2:7781".parse().unwrap()),
        ];
        let e = c.agents(&hosts).err().unwrap().to_string();
        assert!(
            e.ends_with("hosts.toml has no credentials for host h2"),
            "{e}"
        );
        let e = format!("{:#}", Credentials::load(&dir.join("none")).unwrap_err());
        assert!(e.contains("give another file with --credentials"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Bytes off the wire, and bytes read through TLS.
    type Got = (Vec<u8>, Vec<u8>);

    /// What a listener with `cert` got from one client: every byte off the wire, and what it
    /// read through TLS once the handshake ended (nothing when it did not).
    fn listen_tls(cert: &AgentCert) -> (SocketAddr, std::thread::JoinHandle<Got>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let config = cert.server_config().unwrap();
        let got = std::thread::spawn(move || {
            let (sock, _) = listener.accept().unwrap();
            sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            // Every byte the client sends is kept as it passes.
            struct Tap(std::net::TcpStream, Vec<u8>);
            impl std::io::Read for Tap {
                fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                    let n = self.0.read(buf)?;
                    self.1.extend_from_slice(&buf[..n]);
                    Ok(n)
                }
            }
            impl std::io::Write for Tap {
                fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                    self.0.write(buf)
                }
                fn flush(&mut self) -> std::io::Result<()> {
                    self.0.flush()
                }
            }
            let mut tap = Tap(sock, Vec::new());
            let mut tls = rustls::ServerConnection::new(config).unwrap();
            let mut plain = Vec::new();
            while tls.is_handshaking() {
                if tls.complete_io(&mut tap).is_err() {
                    // The client's alert may still be on its way: read what is left.
                    let mut rest = Vec::new();
                    let _ = tap.0.read_to_end(&mut rest);
                    tap.1.extend_from_slice(&rest);
                    return (tap.1, plain);
                }
            }
            let mut stream = rustls::Stream::new(&mut tls, &mut tap);
            let mut buf = [0u8; 4096];
            while let Ok(n) = stream.read(&mut buf) {
                if n == 0 {
                    break;
                }
                plain.extend_from_slice(&buf[..n]);
                if plain.windows(4).any(|w| w == b"\r\n\r\n") {
                    break;
                }
            }
            (tap.1, plain)
        });
        (addr, got)
    }

    fn contains(hay: &[u8], needle: &str) -> bool {
        hay.windows(needle.len()).any(|w| w == needle.as_bytes())
    }

    #[test]
    fn an_agent_without_the_pinned_certificate_gets_no_token() {
        let (pinned, other) = (pair(), pair());
        let p = Path::new("hosts.toml");
        // The pinned agent: the token arrives (so the listener would see it).
        let (addr, got) = listen_tls(&pinned);
        let c = Credentials::parse(
            p,
            &format!("[h1]\n{}", entry(&addr.to_string(), pinned.fingerprint())),
        )
        .unwrap();
        let hosts = [host("h1", addr)];
        let agents = c.agents(&hosts).unwrap();
        let _ = agents[0].reply("GET", "/v1/vnis", None, Duration::from_secs(1));
        let (wire, plain) = got.join().unwrap();
        assert!(contains(&plain, TOKEN), "the pinned agent got the request");
        assert!(
            !contains(&wire, TOKEN),
            "the token crossed the wire in clear"
        );
        // Another certificate at the same address (a listener of anyone's choosing).
        let (addr, got) = listen_tls(&other);
        let c = Credentials::parse(
            p,
            &format!("[h1]\n{}", entry(&addr.to_string(), pinned.fingerprint())),
        )
        .unwrap();
        let hosts = [host("h1", addr)];
        let agents = c.agents(&hosts).unwrap();
        let e = format!(
            "{:#}",
            agents[0]
                .reply("GET", "/v1/vnis", None, Duration::from_secs(5))
                .unwrap_err()
        );
        let (wire, plain) = got.join().unwrap();
        assert!(
            plain.is_empty() && !contains(&wire, TOKEN),
            "the token was sent"
        );
        assert!(!wire.is_empty(), "the client did connect");
        assert!(
            e.starts_with(&format!("host `h1`: its agent at {addr}")),
            "{e}"
        );
        assert!(
            e.contains(&format!(
                "its certificate's SHA-256 fingerprint is {}, but the credentials pin {}",
                other.fingerprint(),
                pinned.fingerprint()
            )),
            "{e}"
        );
    }

    #[test]
    fn an_agent_placed_elsewhere_than_its_credentials_say_is_not_contacted() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let named = listener.local_addr().unwrap();
        let bound = "127.0.0.1:7781";
        let p = Path::new("hosts.toml");
        let c = Credentials::parse(p, &format!("[h1]\n{}", entry(bound, Fingerprint::of(b"x"))))
            .unwrap();
        // The topology sends h1's agent to the listener instead.
        let hosts = [host("h1", named)];
        let e = c.agents(&hosts).err().unwrap().to_string();
        assert_eq!(
            e,
            format!(
                "host `h1`: the topology places its agent at {named}, but hosts.toml binds it \
                 to {bound}: its token is sent nowhere else (correct the topology's [hosts] or \
                 the credentials)"
            )
        );
        std::thread::sleep(Duration::from_millis(50));
        assert!(listener.accept().is_err(), "the listener was contacted");
    }
}
