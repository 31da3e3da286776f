//! The validated topology: every name checked, every interface named, every address assigned.
//!
//! [`Topology::parse`] is the only way to build one from a file, so code that receives a
//! [`Topology`] can rely on: unique valid names, nodes that exist, interface names that fit the
//! kernel's 15 characters and are unique per node, subnets that do not overlap one another or
//! any loopback address, and subnets large enough for their members.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::IpAddr;
use std::ops::Range;

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use rtemu_model::config::ConfigError;
use rtemu_model::netem::NetemError;
use rtemu_model::LinkConfig;
use toml::Spanned;

use crate::claims::Claims;
use crate::container::Container;
use crate::error::{LoadError, SpecError};
use crate::spec::{FileSpec, NodeSpec};

/// Longest lab name: it is part of every namespace name and of interface ownership marks.
pub const MAX_LAB_NAME: usize = 12;
/// Longest node, link or LAN name.
pub const MAX_NODE_NAME: usize = 32;
/// The largest topology file read: 16 MiB (a 1000-node file is about 100 KiB).
pub const MAX_TOPOLOGY_BYTES: u64 = 16 << 20;

/// Longest interface name the kernel accepts (`IFNAMSIZ - 1`).
pub const MAX_IFNAME: usize = 15;
/// The IPv4 pool used when the file has no `[pool] ipv4`.
pub const DEFAULT_POOL_V4: &str = "10.0.0.0/8";
/// The IPv6 pool used when the file has no `[pool] ipv6`.
pub const DEFAULT_POOL_V6: &str = "fd00:7274::/32";

/// The most routes `routing = "static"` may install in a lab (one per destination per node):
/// a 2,000-node chain needs 4 million, which take a minute to install; far more would take an
/// hour and gigabytes, where `aggregate` needs a few per node.
pub const MAX_STATIC_ROUTES: usize = 10_000_000;

/// How routes are installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Routing {
    /// rtemu installs shortest-path routes to every address in every node.
    Static,
    /// The same shortest paths as [`Routing::Static`], each node's routes merged into the
    /// fewest prefixes that forward every lab address the same way: a few dozen routes per node
    /// where `Static` installs one per subnet (a 10,000-node chain: 10⁸ routes in all).
    Aggregate,
    /// No routes beyond the on-link ones: a routing daemon started by the user does the rest.
    None,
}

/// How neighbours (ARP/NDP) are resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NeighbourMode {
    /// Permanent entries for every on-link peer: no address resolution during a run.
    Static,
    /// The kernel resolves addresses as usual.
    Dynamic,
}

/// A locally administered, unicast Ethernet address.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct Mac(pub [u8; 6]);

impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }
}

impl Mac {
    /// The address rtemu gives the `index`-th interface of a lab: `02:72:74` ("rt", locally
    /// administered) followed by the index, so it is unique within a lab and the same on every
    /// `up` of the same file.
    pub fn for_interface(index: u32) -> Mac {
        let i = index.to_be_bytes();
        Mac([0x02, 0x72, 0x74, i[1], i[2], i[3]])
    }
}

/// A validated topology.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Topology {
    /// The lab's name.
    pub lab: String,
    /// How routes are installed.
    pub routing: Routing,
    /// How neighbours are resolved.
    pub neighbours: NeighbourMode,
    /// Nodes in name order.
    pub nodes: Vec<Node>,
    /// Links first (file order), then LANs (file order).
    pub segments: Vec<Segment>,
    /// The machines of a multi-host lab, in name order; empty for a lab on one machine.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<Host>,
    /// The pools (IPv4, IPv6) subnets without an address of their own came from: their unused
    /// addresses belong to the lab, so `routing = "aggregate"` may route them with their
    /// neighbours (addresses outside them may be the world's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pools: Vec<IpNet>,
}

/// One machine of a multi-host lab (`[hosts]`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Host {
    /// Its name in the file.
    pub name: String,
    /// Its address on the underlay: where its agent listens and its tunnels end.
    pub address: IpAddr,
    /// Its agent's TCP port.
    pub port: u16,
}

/// The TCP port of a host's agent when `[hosts]` does not give one.
pub const DEFAULT_AGENT_PORT: u16 = 7781;

/// A node: one network namespace.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Node {
    /// The node's name.
    pub name: String,
    /// Addresses on its loopback interface.
    pub loopback: Vec<IpNet>,
    /// Sysctls set in the node, in name order.
    pub sysctls: Vec<(String, String)>,
    /// Start-up commands (`sh -c`).
    pub run: Vec<String>,
    /// Environment of start-up commands.
    pub env: Vec<(String, String)>,
    /// CPU limit in cores.
    pub cpu: Option<f64>,
    /// In a multi-host lab, the host it runs on: the file's choice or rtemu's placement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The container it runs in its namespace; `None` for a bare namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<Container>,
}

/// What a segment is made of.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SegmentKind {
    /// A point-to-point link (a veth pair), maybe impaired.
    Link {
        /// The impairment, when the file asks for one.
        impairment: Option<Impairment>,
    },
    /// A broadcast segment (a bridge with one veth pair per member).
    Lan,
    /// A host interface handed to the segment's only member.
    External {
        /// The host interface's name.
        host: String,
        /// How it is handed over.
        mode: ExternalMode,
        /// Moved even when the host is reached through it (`uplink = true`).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        uplink: bool,
    },
}

/// How a host interface is handed to a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExternalMode {
    /// The interface moves into the node (renamed there) and returns to the host with its
    /// original name at `down`.
    Move,
    /// The node gets a macvlan interface on it; the host keeps the interface.
    Macvlan,
}

/// One direction's netem parameters: the text as the file (or a program) gave it, kept for
/// people to read (`ls --json`, link views), and the configuration it reads as, parsed and
/// validated once, which the engine builds its models from.
#[derive(Debug, Clone, PartialEq)]
pub struct Netem {
    text: String,
    /// Boxed: a segment holds up to three, and most segments none.
    config: Box<LinkConfig>,
}

impl Netem {
    /// Reads netem parameters (checked by [`LinkConfig::validate`]).
    pub fn parse(text: &str) -> Result<Netem, NetemError> {
        Ok(Netem {
            config: Box::new(rtemu_model::netem::parse(text)?),
            text: text.to_owned(),
        })
    }

    /// A configuration made by a program, checked by [`LinkConfig::validate`]; its text is
    /// the configuration in netem syntax.
    pub fn from_config(config: LinkConfig) -> Result<Netem, ConfigError> {
        config.validate()?;
        Ok(Netem {
            text: config.to_string(),
            config: Box::new(config),
        })
    }

    /// A configuration read back from a record with its text, as a state file holds it: it
    /// was validated when first parsed, but the file may have been changed since, so it is
    /// validated again.
    fn from_record(text: String, config: Option<LinkConfig>) -> Result<Netem, String> {
        match config {
            Some(config) => match config.validate() {
                Ok(()) => Ok(Netem {
                    text,
                    config: Box::new(config),
                }),
                Err(e) => Err(format!(
                    "netem {}: its configuration is invalid: {e}",
                    rtemu_sys::terminal::quoted(&text)
                )),
            },
            // A record written before configurations were stored: its text is all there is.
            None => Netem::parse(&text)
                .map_err(|e| format!("netem {}: {e}", rtemu_sys::terminal::quoted(&text))),
        }
    }

    /// The parameters as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The configuration they read as.
    pub fn config(&self) -> &LinkConfig {
        &self.config
    }
}

/// Link parameters that need the real-time engine.
///
/// In a state file (and `ls --json`) each netem value keeps its text under its own name
/// (`netem`, `netem_ab`, `netem_ba`, a schedule entry's `netem`) with the configuration beside
/// it (`netem_config`, …); reading one back validates every configuration.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(into = "ImpairmentRecord", try_from = "ImpairmentRecord")]
pub struct Impairment {
    /// netem-style parameters of both directions.
    pub netem: Option<Netem>,
    /// netem-style parameters from the first endpoint to the second, instead of `netem`.
    pub netem_ab: Option<Netem>,
    /// netem-style parameters from the second endpoint to the first, instead of `netem`.
    pub netem_ba: Option<Netem>,
    /// A trace file.
    pub trace: Option<String>,
    /// Whether address resolution goes through the model too (default: it passes with the
    /// base delay and is never lost).
    pub resolution_modelled: bool,
    /// Parameter changes, in time order.
    pub schedule: Vec<Change>,
}

impl Impairment {
    /// The netem parameters of one direction (`false`: first endpoint to second).
    pub fn netem_for(&self, backwards: bool) -> Option<&Netem> {
        let own = if backwards {
            &self.netem_ba
        } else {
            &self.netem_ab
        };
        own.as_ref().or(self.netem.as_ref())
    }

    /// The configuration of one direction (`false`: first endpoint to second); an ideal link's
    /// when it has no netem parameters (a trace alone decides).
    pub fn config_for(&self, backwards: bool) -> LinkConfig {
        self.netem_for(backwards)
            .map(|n| n.config().clone())
            .unwrap_or_default()
    }
}

/// An [`Impairment`] as a state file holds it.
#[derive(serde::Serialize, serde::Deserialize)]
struct ImpairmentRecord {
    netem: Option<String>,
    #[serde(default)]
    netem_ab: Option<String>,
    #[serde(default)]
    netem_ba: Option<String>,
    trace: Option<String>,
    #[serde(default)]
    resolution_modelled: bool,
    #[serde(default)]
    schedule: Vec<ChangeRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    netem_config: Option<LinkConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    netem_ab_config: Option<LinkConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    netem_ba_config: Option<LinkConfig>,
}

/// A [`Change`] as a state file holds it.
#[derive(serde::Serialize, serde::Deserialize)]
struct ChangeRecord {
    at_ns: u64,
    ways: Ways,
    netem: String,
    #[serde(default)]
    config: Option<LinkConfig>,
}

/// A netem value's text and configuration, apart.
fn split(netem: Option<Netem>) -> (Option<String>, Option<LinkConfig>) {
    netem.map_or((None, None), |n| (Some(n.text), Some(*n.config)))
}

impl From<Impairment> for ImpairmentRecord {
    fn from(imp: Impairment) -> Self {
        let (netem, netem_config) = split(imp.netem);
        let (netem_ab, netem_ab_config) = split(imp.netem_ab);
        let (netem_ba, netem_ba_config) = split(imp.netem_ba);
        ImpairmentRecord {
            netem,
            netem_ab,
            netem_ba,
            trace: imp.trace,
            resolution_modelled: imp.resolution_modelled,
            schedule: imp
                .schedule
                .into_iter()
                .map(|c| ChangeRecord {
                    at_ns: c.at_ns,
                    ways: c.ways,
                    netem: c.netem.text,
                    config: Some(*c.netem.config),
                })
                .collect(),
            netem_config,
            netem_ab_config,
            netem_ba_config,
        }
    }
}

impl TryFrom<ImpairmentRecord> for Impairment {
    type Error = String;

    fn try_from(r: ImpairmentRecord) -> Result<Self, String> {
        let join = |text: Option<String>, config: Option<LinkConfig>, what: &str| match text {
            Some(text) => Netem::from_record(text, config).map(Some),
            None if config.is_some() => Err(format!("{what}_config without its {what}")),
            None => Ok(None),
        };
        Ok(Impairment {
            netem: join(r.netem, r.netem_config, "netem")?,
            netem_ab: join(r.netem_ab, r.netem_ab_config, "netem_ab")?,
            netem_ba: join(r.netem_ba, r.netem_ba_config, "netem_ba")?,
            trace: r.trace,
            resolution_modelled: r.resolution_modelled,
            schedule: r
                .schedule
                .into_iter()
                .map(|c| {
                    Ok(Change {
                        at_ns: c.at_ns,
                        ways: c.ways,
                        netem: Netem::from_record(c.netem, c.config)?,
                    })
                })
                .collect::<Result<_, String>>()?,
        })
    }
}

/// Which directions of a link a change applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Ways {
    /// From the first endpoint to the second.
    AB,
    /// From the second endpoint to the first.
    BA,
    /// Both.
    Both,
}

impl Ways {
    /// Whether the change applies to the direction (`false`: first endpoint to second).
    pub fn includes(self, backwards: bool) -> bool {
        match self {
            Ways::AB => !backwards,
            Ways::BA => backwards,
            Ways::Both => true,
        }
    }
}

/// A scheduled change of a link's parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// When, ns after the engine starts.
    pub at_ns: u64,
    /// Which directions.
    pub ways: Ways,
    /// The new netem parameters.
    pub netem: Netem,
}

/// A link or a LAN.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Segment {
    /// Its name (unique among links and LANs).
    pub name: String,
    /// Link or LAN.
    pub kind: SegmentKind,
    /// MTU of every member interface (kernel default when `None`).
    pub mtu: Option<u32>,
    /// Its IPv4 subnet.
    pub ipv4: Option<Ipv4Net>,
    /// Its IPv6 subnet.
    pub ipv6: Option<Ipv6Net>,
    /// The node interfaces on it.
    pub members: Vec<Attachment>,
    /// In a multi-host lab, the host whose engine releases an impaired link's frames.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_host: Option<String>,
}

/// One node's interface on a segment.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Attachment {
    /// Index into [`Topology::nodes`].
    pub node: usize,
    /// Interface name inside the node.
    pub ifname: String,
    /// Its IPv4 address with the segment's prefix length.
    pub ipv4: Option<Ipv4Net>,
    /// Its IPv6 address with the segment's prefix length.
    pub ipv6: Option<Ipv6Net>,
    /// Its Ethernet address.
    pub mac: Mac,
}

impl Attachment {
    /// Its address of the family of `like`.
    pub fn addr_like(&self, like: IpAddr) -> Option<IpAddr> {
        match like {
            IpAddr::V4(_) => self.ipv4.map(|n| IpAddr::V4(n.addr())),
            IpAddr::V6(_) => self.ipv6.map(|n| IpAddr::V6(n.addr())),
        }
    }
}

impl Segment {
    /// An impaired link's impairment; `None` for an ideal link, a LAN or an external.
    pub fn impairment(&self) -> Option<&Impairment> {
        match &self.kind {
            SegmentKind::Link { impairment } => impairment.as_ref(),
            _ => None,
        }
    }
}

impl Topology {
    /// Reads and validates the topology file at `path`.
    pub fn load(path: &std::path::Path) -> Result<Topology, LoadError> {
        Topology::load_with(path, None)
    }

    /// Reads and validates the topology file at `path`, and builds every impaired link
    /// direction's model with `check` (its tables loaded, its trace opened), its scheduled
    /// changes included, so what only building shows fails here, with the file, line and
    /// column of the `netem` or `trace` value at fault. Needs no root.
    pub fn load_checked(
        path: &std::path::Path,
        check: &dyn LinkCheck,
    ) -> Result<Topology, LoadError> {
        Topology::load_with(path, Some(check))
    }

    fn load_with(
        path: &std::path::Path,
        check: Option<&dyn LinkCheck>,
    ) -> Result<Topology, LoadError> {
        // A FIFO or device named as the topology is refused, not waited on or read for ever.
        let source = rtemu_trace::small_file::read_small_file(path, MAX_TOPOLOGY_BYTES).map_err(
            |source| LoadError::Read {
                path: path.display().to_string(),
                source,
            },
        )?;
        let file = path.display().to_string();
        // Trace files are named relative to the topology file, as a user reads it.
        let dir = path.parent().unwrap_or(std::path::Path::new(""));
        Ok(Topology::parse_with(&file, &source, dir, check)?)
    }

    /// Validates `source`, the text of the file named `file` (used in error messages), and
    /// builds every impaired link direction's model with `check` as [`Topology::load_checked`]
    /// does, trace files named relative to `dir`: for a topology that arrives as text.
    pub fn parse_checked(
        file: &str,
        source: &str,
        dir: &std::path::Path,
        check: &dyn LinkCheck,
    ) -> Result<Topology, SpecError> {
        Topology::parse_with(file, source, dir, Some(check))
    }

    fn parse_with(
        file: &str,
        source: &str,
        dir: &std::path::Path,
        check: Option<&dyn LinkCheck>,
    ) -> Result<Topology, SpecError> {
        let (mut topo, validator) = Topology::validate(file, source)?;
        if let Some(check) = check {
            validator.check_links(check, dir)?;
        }
        validator.resolve_binds(&mut topo, dir, check.is_some())?;
        for seg in &mut topo.segments {
            if let SegmentKind::Link {
                impairment:
                    Some(Impairment {
                        trace: Some(trace), ..
                    }),
            } = &mut seg.kind
            {
                *trace = resolve_trace(dir, trace);
            }
        }
        Ok(topo)
    }

    /// Validates `source`, the text of the file named `file` (used in error messages).
    pub fn parse(file: &str, source: &str) -> Result<Topology, SpecError> {
        Topology::validate(file, source).map(|(topo, _)| topo)
    }

    fn validate<'a>(
        file: &'a str,
        source: &'a str,
    ) -> Result<(Topology, Validator<'a>), SpecError> {
        let spec: FileSpec = toml::from_str(source).map_err(|e| {
            let mut message = e.message().trim_end().to_owned();
            if message == "missing field `lab`" {
                message.push_str(": a topology file starts with `lab = \"NAME\"`");
            }
            SpecError::at(file, source, e.span().unwrap_or(0..0), message)
        })?;
        let mut validator = Validator {
            file,
            source,
            lines: crate::error::Lines::new(source),
            used: Claims::default(),
            cursor: [0, 0],
            impaired: Vec::new(),
            binds: Vec::new(),
        };
        let topo = validator.run(spec)?;
        Ok((topo, validator))
    }

    /// The index of the node called `name`.
    pub fn node_index(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name)
    }

    /// Whether any segment asks for the real-time engine.
    pub fn impaired_links(&self) -> impl Iterator<Item = (&Segment, &Impairment)> {
        self.segments
            .iter()
            .filter_map(|s| s.impairment().map(|i| (s, i)))
    }
}

/// What a subnet or address in use belongs to, for overlap messages.
struct Validator<'a> {
    file: &'a str,
    source: &'a str,
    lines: crate::error::Lines,
    used: Claims,
    /// Where the next IPv4 and IPv6 pool allocation starts looking.
    cursor: [u128; 2],
    /// Every impaired link, with where its values are, for [`LinkCheck`] once the rest passed.
    impaired: Vec<ImpairedLink>,
    /// Where each node's binds are: (node index, bind index, span), for [`Validator::resolve_binds`].
    binds: Vec<(usize, usize, Range<usize>)>,
}

/// An impaired link as the file gives it, and where its values are in the file.
struct ImpairedLink {
    name: String,
    imp: Impairment,
    /// Byte spans of `netem`, `netem_ab` and `netem_ba`.
    netem: [Option<Range<usize>>; 3],
    trace: Option<Range<usize>>,
    /// The span of each schedule entry's `netem`, in `imp.schedule`'s order.
    schedule: Vec<Range<usize>>,
    /// The link's endpoints, for an error no single value is to blame for.
    endpoints: Range<usize>,
}

/// A link's impairment, with the span of each schedule entry's `netem` in its schedule's
/// order.
type ImpairmentAt = (Impairment, Vec<Range<usize>>);

/// Which value of an impaired link a failed [`LinkCheck`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Culprit {
    /// The netem parameters (a distribution table, for instance).
    Netem,
    /// The trace file.
    Trace,
}

/// Why a link direction's model cannot be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkCheckError {
    /// Which value is at fault.
    pub culprit: Culprit,
    /// What is wrong (without the file's name and position, which the loader adds).
    pub message: String,
}

/// Builds what each impaired link direction names, to find before anything is created what
/// only building it shows: a distribution table that is missing or malformed, a trace that
/// cannot be opened or read. Models are assembled above this crate, so the caller supplies
/// the check ([`Topology::load_checked`]).
pub trait LinkCheck {
    /// Builds the model of one direction of link `link` (`backwards`: from its second
    /// endpoint to its first) from `imp`, whose trace path is resolved, with `netem` instead
    /// of the direction's own configuration when given (a scheduled change).
    fn direction(
        &self,
        link: &str,
        imp: &Impairment,
        netem: Option<&LinkConfig>,
        backwards: bool,
    ) -> Result<(), LinkCheckError>;
}

/// A trace path as the user reads it: relative to the topology file's directory.
fn resolve_trace(dir: &std::path::Path, trace: &str) -> String {
    let full = dir.join(trace);
    std::path::absolute(&full)
        .unwrap_or(full)
        .display()
        .to_string()
}

/// Which address families pool addresses are given for.
#[derive(Clone, Copy)]
struct Families {
    v4: bool,
    v6: bool,
}

/// A member or endpoint as written, resolved to a node.
struct Member {
    node: usize,
    ifname: Option<String>,
    span: Range<usize>,
    /// Explicit addresses (external interfaces); others get host number `index + 1`.
    ipv4: Option<Ipv4Net>,
    ipv6: Option<Ipv6Net>,
}

/// A segment before interface names and pool addresses are assigned.
struct Draft {
    name: String,
    kind: SegmentKind,
    mtu: Option<u32>,
    ipv4: Option<Ipv4Net>,
    ipv6: Option<Ipv6Net>,
    members: Vec<Member>,
    span: Range<usize>,
    /// Where the MTU was set (the segment's own or the file's default).
    mtu_span: Option<Range<usize>>,
}

impl<'a> Validator<'a> {
    fn err(&self, span: Range<usize>, message: impl Into<String>) -> SpecError {
        SpecError::at(self.file, self.source, span, message.into())
    }

    fn line(&self, span: &Range<usize>) -> usize {
        self.lines.line(span.start)
    }

    /// Makes every bind's host path absolute, relative to the topology file's directory `dir`
    /// as a user reads it; with `exist`, one that names nothing fails here, at its value,
    /// rather than when its container starts.
    fn resolve_binds(
        &self,
        topo: &mut Topology,
        dir: &std::path::Path,
        exist: bool,
    ) -> Result<(), SpecError> {
        for (ni, bi, span) in &self.binds {
            let Some(c) = &mut topo.nodes[*ni].container else {
                continue;
            };
            let bind = &mut c.binds[*bi];
            bind.host = resolve_trace(dir, &bind.host);
            if exist {
                if let Err(e) = std::fs::symlink_metadata(&bind.host) {
                    return Err(
                        self.err(span.clone(), format!("bind: host path {}: {e}", bind.host))
                    );
                }
            }
        }
        Ok(())
    }

    /// Builds both directions of every impaired link, and each scheduled change, with
    /// `check`; an error points at the value at fault.
    fn check_links(&self, check: &dyn LinkCheck, dir: &std::path::Path) -> Result<(), SpecError> {
        for link in &self.impaired {
            let mut imp = link.imp.clone();
            if let Some(trace) = &mut imp.trace {
                *trace = resolve_trace(dir, trace);
            }
            for backwards in [false, true] {
                let own = &link.netem[if backwards { 2 } else { 1 }];
                let netem = own.as_ref().or(link.netem[0].as_ref());
                check
                    .direction(&link.name, &imp, None, backwards)
                    .map_err(|e| self.link_error(link, netem, e))?;
                for (change, span) in link.imp.schedule.iter().zip(&link.schedule) {
                    if change.ways.includes(backwards) {
                        check
                            .direction(&link.name, &imp, Some(change.netem.config()), backwards)
                            .map_err(|e| self.link_error(link, Some(span), e))?;
                    }
                }
            }
        }
        Ok(())
    }

    /// A failed check, at the value it is about: inside a netem string, at its
    /// `distribution` or `tables` word when it has one (the tables are what building adds
    /// to parsing); the trace's value; else the link's endpoints.
    fn link_error(
        &self,
        link: &ImpairedLink,
        netem: Option<&Range<usize>>,
        e: LinkCheckError,
    ) -> SpecError {
        let (what, at) = match (e.culprit, netem, &link.trace) {
            (Culprit::Netem, Some(span), _) => {
                let text = self.source.get(span.clone()).unwrap_or("");
                let word = text.find("distribution").or_else(|| text.find("tables"));
                ("netem", span.start + word.unwrap_or(1))
            }
            (_, _, Some(span)) => ("trace", span.start + 1),
            _ => ("link", link.endpoints.start),
        };
        self.err(at..at, format!("{what}: {}", e.message))
    }

    fn run(&mut self, spec: FileSpec) -> Result<Topology, SpecError> {
        let lab = self.name(&spec.lab, "lab name", MAX_LAB_NAME)?;
        let routing = match spec
            .routing
            .as_ref()
            .map(|r| (r.get_ref().as_str(), r.span()))
        {
            None | Some(("static", _)) => Routing::Static,
            Some(("aggregate", _)) => Routing::Aggregate,
            Some(("none", _)) => Routing::None,
            Some((other, span)) => {
                let allowed = "\"static\", \"aggregate\" and \"none\"";
                let message = format!("unknown routing `{other}`: allowed are {allowed}");
                return Err(self.err(span, message));
            }
        };
        let neighbours = match spec
            .neighbours
            .as_ref()
            .map(|r| (r.get_ref().as_str(), r.span()))
        {
            None | Some(("dynamic", _)) => NeighbourMode::Dynamic,
            Some(("static", _)) => NeighbourMode::Static,
            Some((other, span)) => {
                return Err(self.err(
                    span,
                    format!("unknown neighbours `{other}`: allowed are \"static\" and \"dynamic\""),
                ))
            }
        };
        let families = match spec.ip.as_ref().map(|r| (r.get_ref().as_str(), r.span())) {
            None | Some(("dual", _)) => Families { v4: true, v6: true },
            Some(("ipv4", _)) => Families {
                v4: true,
                v6: false,
            },
            Some(("ipv6", _)) => Families {
                v4: false,
                v6: true,
            },
            Some((other, span)) => {
                return Err(self.err(
                    span,
                    format!("unknown ip `{other}`: allowed are \"dual\", \"ipv4\" and \"ipv6\""),
                ))
            }
        };
        let default_mtu = spec.mtu.as_ref().map(|m| self.mtu(m)).transpose()?;
        let default_mtu_span = spec.mtu.as_ref().map(|m| m.span());

        let machines = self.hosts(&spec)?;
        let mut nodes = Vec::new();
        let mut node_names = BTreeMap::new();
        for (name, node) in &spec.nodes {
            let checked = self.name(name, "node name", MAX_NODE_NAME)?;
            node_names.insert(checked.clone(), nodes.len());
            let mut built = self.node(checked, node)?;
            built.host = node
                .host
                .as_ref()
                .map(|h| self.host_of(h, &machines, &format!("node `{}`", name.get_ref())))
                .transpose()?;
            for (bi, b) in node.binds.iter().enumerate() {
                self.binds.push((nodes.len(), bi, b.span()));
            }
            nodes.push(built);
        }
        let specs: Vec<(&str, &NodeSpec)> = spec
            .nodes
            .iter()
            .map(|(n, s)| (n.get_ref().as_str(), s))
            .collect();
        let mut containers: Vec<Option<Container>> =
            nodes.iter_mut().map(|n| n.container.take()).collect();
        crate::container::check_wait_for(&specs, &mut containers, &|span, m| self.err(span, m))?;
        for (n, c) in nodes.iter_mut().zip(containers) {
            n.container = c;
        }
        if nodes.is_empty() {
            return Err(self.err(
                spec.lab.span(),
                "the lab has no nodes: add at least one `[nodes.NAME]` table",
            ));
        }

        let mut drafts: Vec<Draft> = Vec::new();
        let mut segment_names: BTreeMap<String, usize> = BTreeMap::new();
        for link in &spec.links {
            let ends = link.endpoints.get_ref();
            if ends.len() != 2 {
                return Err(self.err(
                    link.endpoints.span(),
                    format!(
                        "a link has exactly 2 endpoints (\"node\" or \"node:ifname\"), this one has {}; use a [[lans]] entry for more",
                        ends.len()
                    ),
                ));
            }
            let a = self.member(&ends[0], &node_names)?;
            let b = self.member(&ends[1], &node_names)?;
            if a.node == b.node {
                return Err(self.err(
                    ends[1].span(),
                    format!(
                        "a link joins two different nodes; both ends are on `{}`",
                        nodes[a.node].name
                    ),
                ));
            }
            let (name, span) = match &link.name {
                Some(n) => (self.name(n, "link name", MAX_NODE_NAME)?, n.span()),
                None => (
                    format!("{}-{}", nodes[a.node].name, nodes[b.node].name),
                    link.endpoints.span(),
                ),
            };
            self.unique_segment(&mut segment_names, &name, &span)?;
            let impairment = self.impairment(link)?;
            if let Some((imp, schedule)) = &impairment {
                let span = |s: &Option<Spanned<String>>| s.as_ref().map(Spanned::span);
                self.impaired.push(ImpairedLink {
                    name: name.clone(),
                    imp: imp.clone(),
                    netem: [
                        span(&link.netem),
                        span(&link.netem_ab),
                        span(&link.netem_ba),
                    ],
                    trace: span(&link.trace),
                    schedule: schedule.clone(),
                    endpoints: link.endpoints.span(),
                });
            }
            drafts.push(Draft {
                mtu: link
                    .mtu
                    .as_ref()
                    .map(|m| self.mtu(m))
                    .transpose()?
                    .or(default_mtu),
                ipv4: self.subnet4(link.ipv4.as_ref(), &name)?,
                ipv6: self.subnet6(link.ipv6.as_ref(), &name)?,
                name,
                kind: SegmentKind::Link {
                    impairment: impairment.map(|(imp, _)| imp),
                },
                members: vec![a, b],
                span,
                mtu_span: link
                    .mtu
                    .as_ref()
                    .map(|m| m.span())
                    .or(default_mtu_span.clone()),
            });
        }
        for lan in &spec.lans {
            let name = self.name(&lan.name, "LAN name", MAX_NODE_NAME)?;
            self.unique_segment(&mut segment_names, &name, &lan.name.span())?;
            let mut members: Vec<Member> = Vec::new();
            for m in lan.members.get_ref() {
                let member = self.member(m, &node_names)?;
                if members.iter().any(|o| o.node == member.node) {
                    return Err(self.err(
                        m.span(),
                        format!("node `{}` is already a member of LAN `{name}`; each node joins a LAN once", nodes[member.node].name),
                    ));
                }
                members.push(member);
            }
            if members.is_empty() {
                return Err(self.err(lan.members.span(), "a LAN needs at least one member"));
            }
            drafts.push(Draft {
                mtu: lan
                    .mtu
                    .as_ref()
                    .map(|m| self.mtu(m))
                    .transpose()?
                    .or(default_mtu),
                ipv4: self.subnet4(lan.ipv4.as_ref(), &name)?,
                ipv6: self.subnet6(lan.ipv6.as_ref(), &name)?,
                name,
                kind: SegmentKind::Lan,
                members,
                span: lan.name.span(),
                mtu_span: lan
                    .mtu
                    .as_ref()
                    .map(|m| m.span())
                    .or(default_mtu_span.clone()),
            });
        }

        let mut hosts: BTreeMap<String, String> = BTreeMap::new();
        for ext in &spec.externals {
            let mut text = ext.node.get_ref().clone();
            if let Some(i) = &ext.ifname {
                text = format!("{text}:{}", i.get_ref());
            }
            let mut member = self.member(&Spanned::new(ext.node.span(), text), &node_names)?;
            let host = ext.host.get_ref();
            if !valid_ifname(host) {
                return Err(self.err(ext.host.span(), format!("invalid host interface name `{host}`: use 1 to {MAX_IFNAME} characters a-z, A-Z, 0-9, '.', '_' and '-'")));
            }
            if host == "lo" {
                return Err(self.err(ext.host.span(), "`lo` is the host's own loopback: it cannot be handed to a node (give a node loopback addresses with `addresses`)".to_owned()));
            }
            let node_name = &nodes[member.node].name;
            if let Some(other) = hosts.insert(host.clone(), node_name.clone()) {
                return Err(self.err(ext.host.span(), format!("host interface `{host}` is already handed to node `{other}`: each host interface goes to one node")));
            }
            let mode = match ext.mode.as_ref().map(|m| (m.get_ref().as_str(), m.span())) {
                None | Some(("move", _)) => ExternalMode::Move,
                Some(("macvlan", _)) => ExternalMode::Macvlan,
                Some((other, span)) => {
                    return Err(self.err(
                        span,
                        format!("unknown mode `{other}`: allowed are \"move\" and \"macvlan\""),
                    ))
                }
            };
            let name = format!("{node_name}-{host}");
            let what = format!("external interface `{host}` of node `{node_name}`");
            let mut ipv4 = None;
            if let Some(t) = &ext.ipv4 {
                let a: Ipv4Net = t.get_ref().parse().map_err(|_| self.err(t.span(), format!("invalid IPv4 address `{}`: write the node's address with its prefix length, e.g. \"198.51.100.1/24\"", t.get_ref())))?;
                self.claim(
                    IpNet::V4(a.trunc()),
                    format!("subnet {} of {what}", a.trunc()),
                    &t.span(),
                )?;
                member.ipv4 = Some(a);
                ipv4 = Some(a.trunc());
            }
            let mut ipv6 = None;
            if let Some(t) = &ext.ipv6 {
                let a: Ipv6Net = t.get_ref().parse().map_err(|_| self.err(t.span(), format!("invalid IPv6 address `{}`: write the node's address with its prefix length, e.g. \"2001:db8::1/64\"", t.get_ref())))?;
                self.claim(
                    IpNet::V6(a.trunc()),
                    format!("subnet {} of {what}", a.trunc()),
                    &t.span(),
                )?;
                member.ipv6 = Some(a);
                ipv6 = Some(a.trunc());
            }
            drafts.push(Draft {
                name,
                kind: SegmentKind::External {
                    host: host.clone(),
                    mode,
                    uplink: ext.uplink.as_ref().is_some_and(|u| *u.get_ref()),
                },
                mtu: None,
                ipv4,
                ipv6,
                members: vec![member],
                span: ext.host.span(),
                mtu_span: None,
            });
        }

        let mut segments = self.finish(drafts, &spec, families, &nodes)?;
        self.place(&spec, &machines, &mut nodes, &mut segments)?;
        if routing == Routing::Static {
            let destinations: usize = segments
                .iter()
                .map(|s| usize::from(s.ipv4.is_some()) + usize::from(s.ipv6.is_some()))
                .chain(nodes.iter().map(|n| n.loopback.len()))
                .sum();
            let routes = destinations.saturating_mul(nodes.len());
            if routes > MAX_STATIC_ROUTES {
                let span = spec.routing.as_ref().map_or(spec.lab.span(), |r| r.span());
                return Err(self.err(
                    span,
                    format!(
                        "routing = \"static\" would install about {routes} routes ({} nodes × \
                         {destinations} destinations; at most {MAX_STATIC_ROUTES}): set routing = \
                         \"aggregate\" (the same paths in a few routes per node) or \"none\"",
                        nodes.len()
                    ),
                ));
            }
        }
        let pools = vec![
            IpNet::V4(self.pool4(spec.pool.as_ref())?.0),
            IpNet::V6(self.pool6(spec.pool.as_ref())?.0),
        ];
        Ok(Topology {
            lab,
            routing,
            neighbours,
            nodes,
            segments,
            hosts: machines,
            pools,
        })
    }

    /// `[hosts]`, checked: valid names, addresses and ports, no two agents at one address.
    fn hosts(&self, spec: &FileSpec) -> Result<Vec<Host>, SpecError> {
        let mut hosts: Vec<Host> = Vec::new();
        for (name, h) in &spec.hosts {
            let name = self.name(name, "host name", MAX_NODE_NAME)?;
            let address: IpAddr = h.address.get_ref().parse().map_err(|_| {
                self.err(h.address.span(), format!("invalid address `{}` of host `{name}`: write the machine's IPv4 or IPv6 address on the underlay, e.g. \"192.0.2.10\"", h.address.get_ref()))
            })?;
            let port = match &h.port {
                None => DEFAULT_AGENT_PORT,
                Some(p) => u16::try_from(*p.get_ref())
                    .ok()
                    .filter(|&p| p != 0)
                    .ok_or_else(|| {
                        self.err(
                            p.span(),
                            format!(
                                "port {} of host `{name}` is out of range: allowed are 1 to 65535",
                                p.get_ref()
                            ),
                        )
                    })?,
            };
            if let Some(other) = hosts
                .iter()
                .find(|o| o.address == address && o.port == port)
            {
                return Err(self.err(h.address.span(), format!("host `{name}` has the address and port of host `{}` ({address} port {port}): each host runs its own agent", other.name)));
            }
            hosts.push(Host {
                name,
                address,
                port,
            });
        }
        Ok(hosts)
    }

    /// The `[hosts]` entry `name` names, for `what` (a node or a link).
    fn host_of(
        &self,
        name: &Spanned<String>,
        hosts: &[Host],
        what: &str,
    ) -> Result<String, SpecError> {
        let n = name.get_ref();
        if hosts.is_empty() {
            return Err(self.err(name.span(), format!("{what} names host `{n}`, but the file has no `[hosts]` table: add one, e.g. `{n} = {{ address = \"192.0.2.10\" }}`")));
        }
        if hosts.iter().any(|h| &h.name == n) {
            return Ok(n.clone());
        }
        let known: Vec<&str> = hosts.iter().map(|h| h.name.as_str()).collect();
        Err(self.err(
            name.span(),
            format!(
                "{what} names unknown host `{n}`: the hosts are {}",
                known.join(", ")
            ),
        ))
    }

    /// Puts every node without a `host` on one ([`crate::placement`]) and picks the host of
    /// each impaired link's engine; checks the links' `engine` values, with or without hosts.
    fn place(
        &self,
        spec: &FileSpec,
        hosts: &[Host],
        nodes: &mut [Node],
        segments: &mut [Segment],
    ) -> Result<(), SpecError> {
        // Links come first among segments, in the file's order.
        let mut engines = Vec::new();
        for (seg, link) in segments.iter().zip(&spec.links) {
            let Some(engine) = &link.engine else {
                engines.push(None);
                continue;
            };
            if seg.impairment().is_none() {
                return Err(self.err(
                    engine.span(),
                    format!(
                        "link `{}` is ideal: only an impaired link has an engine to place",
                        seg.name
                    ),
                ));
            }
            engines.push(Some((
                self.host_of(engine, hosts, &format!("link `{}`", seg.name))?,
                engine.span(),
            )));
        }
        if hosts.is_empty() {
            return Ok(());
        }
        let index = |name: &str| hosts.iter().position(|h| h.name == name);
        let mut problem = crate::placement::Problem {
            nodes: nodes.len(),
            hosts: hosts.len(),
            pinned: nodes
                .iter()
                .map(|n| n.host.as_deref().and_then(index))
                .collect(),
            ..Default::default()
        };
        for seg in segments.iter() {
            let first = seg.members[0].node;
            for m in &seg.members[1..] {
                problem.adjacent.push((first, m.node));
                if seg.impairment().is_some() {
                    problem.impaired.push((first, m.node));
                }
            }
        }
        for (node, h) in nodes.iter_mut().zip(crate::placement::place(&problem)) {
            node.host = Some(hosts[h].name.clone());
        }
        for (seg, engine) in segments.iter_mut().zip(engines) {
            if seg.impairment().is_none() {
                continue;
            }
            let [a, b] = [seg.members[0].node, seg.members[1].node];
            let ends = [a, b].map(|n| nodes[n].host.clone().expect("placed above"));
            seg.engine_host = Some(match engine {
                None => ends[0].clone(),
                Some((chosen, _)) if ends.contains(&chosen) => chosen,
                Some((_, span)) => {
                    return Err(self.err(span, format!("the engine of link `{}` must run on the host of one of its endpoints: `{}` is on {}, `{}` on {}", seg.name, nodes[a].name, ends[0], nodes[b].name, ends[1])));
                }
            });
        }
        Ok(())
    }

    /// Names: a lower-case letter, then lower-case letters, digits and `-`, not ending in `-`,
    /// so they are valid host names and fit namespace and file names.
    fn name(&self, name: &Spanned<String>, what: &str, max: usize) -> Result<String, SpecError> {
        let s = name.get_ref();
        if valid_name(s, max) {
            Ok(s.clone())
        } else {
            Err(self.err(
                name.span(),
                format!(
                    "invalid {what} `{s}`: use 1 to {max} characters a-z, 0-9 and '-', starting with a letter and not ending with '-'"
                ),
            ))
        }
    }

    /// A link's impairment, checked, with the span of each schedule entry's `netem` in its
    /// schedule's order; `None` for an ideal link.
    fn impairment(&self, link: &crate::spec::LinkSpec) -> Result<Option<ImpairmentAt>, SpecError> {
        let text = |s: &Option<Spanned<String>>| -> Result<Option<Netem>, SpecError> {
            s.as_ref().map(|t| self.netem(t)).transpose()
        };
        let resolution_modelled = match &link.resolution {
            None => false,
            Some(r) => match r.get_ref().as_str() {
                "pass" => false,
                "model" => true,
                other => {
                    return Err(self.err(
                        r.span(),
                        format!("resolution `{other}`: use \"pass\" or \"model\""),
                    ))
                }
            },
        };
        let mut schedule = Vec::new();
        for c in &link.schedule {
            let at = rtemu_model::units::Time::parse(c.at.get_ref())
                .map_err(|e| self.err(c.at.span(), format!("schedule `at`: {e}")))?;
            let change = Change {
                at_ns: at.0,
                ways: self.ways(c)?,
                netem: self.netem(&c.netem)?,
            };
            schedule.push((change, c.netem.span()));
        }
        // In time order; changes at the same time keep the file's order.
        schedule.sort_by_key(|(c, _)| c.at_ns);
        let (schedule, spans): (Vec<Change>, Vec<Range<usize>>) = schedule.into_iter().unzip();
        let imp = Impairment {
            netem: text(&link.netem)?,
            netem_ab: text(&link.netem_ab)?,
            netem_ba: text(&link.netem_ba)?,
            trace: link.trace.as_ref().map(|s| s.get_ref().clone()),
            resolution_modelled,
            schedule,
        };
        let ideal = imp.netem.is_none()
            && imp.netem_ab.is_none()
            && imp.netem_ba.is_none()
            && imp.trace.is_none()
            && imp.schedule.is_empty();
        if ideal {
            if let Some(r) = &link.resolution {
                return Err(self.err(
                    r.span(),
                    "`resolution` applies to impaired links only: give `netem` or `trace` too",
                ));
            }
        }
        Ok((!ideal).then_some((imp, spans)))
    }

    /// The directions a schedule entry applies to.
    fn ways(&self, c: &crate::spec::ChangeSpec) -> Result<Ways, SpecError> {
        match c.dir.as_ref().map(|d| d.get_ref().as_str()) {
            None | Some("both") => Ok(Ways::Both),
            Some("a-b") => Ok(Ways::AB),
            Some("b-a") => Ok(Ways::BA),
            Some(other) => {
                let span = c.dir.as_ref().map(|d| d.span()).unwrap_or_default();
                Err(self.err(
                    span,
                    format!("dir `{other}`: use \"a-b\", \"b-a\" or \"both\""),
                ))
            }
        }
    }

    /// Reads a link's netem parameters, pointing at the offending word inside the string.
    fn netem(&self, text: &Spanned<String>) -> Result<Netem, SpecError> {
        Netem::parse(text.get_ref()).map_err(|e| {
            // The string's text starts after its opening quote.
            let at = text.span().start + e.column;
            self.err(at..at, format!("netem: {e}"))
        })
    }

    fn mtu(&self, mtu: &Spanned<i64>) -> Result<u32, SpecError> {
        match u32::try_from(*mtu.get_ref()) {
            Ok(m @ 68..=65535) => Ok(m),
            _ => Err(self.err(
                mtu.span(),
                format!(
                    "MTU {} is out of range: allowed are 68 to 65535 (1280 or more with IPv6)",
                    mtu.get_ref()
                ),
            )),
        }
    }

    fn node(&mut self, name: String, spec: &NodeSpec) -> Result<Node, SpecError> {
        let mut loopback = Vec::new();
        for a in &spec.addresses {
            let net: IpNet = a.get_ref().parse().map_err(|_| {
                self.err(a.span(), format!("invalid address `{}`: write an address with its prefix length, e.g. \"192.0.2.1/32\" or \"2001:db8::1/128\"", a.get_ref()))
            })?;
            self.claim(net, format!("address {net} of node `{name}`"), &a.span())?;
            loopback.push(net);
        }
        let mut sysctls = Vec::new();
        for (key, value) in &spec.sysctls {
            let k = key.get_ref();
            let key_ok = !k.is_empty()
                && !k.starts_with('.')
                && !k.contains("..")
                && k.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
            if !key_ok {
                return Err(self.err(key.span(), format!("invalid sysctl name `{k}`: use dotted names like \"net.ipv4.tcp_ecn\" (a-z, 0-9, '.', '_', '-')")));
            }
            // Only a network namespace's own keys: the rest are the whole machine's, and a
            // lab never changes the host.
            if !k.starts_with("net.") {
                return Err(self.err(key.span(), format!("sysctl `{k}` is the whole machine's, not a node's: a node sets only its network namespace's own keys (net.*); set others on the host yourself")));
            }
            let v = match value.get_ref() {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Boolean(b) => u8::from(*b).to_string(),
                _ => {
                    return Err(self.err(
                        value.span(),
                        format!(
                            "invalid value for sysctl `{k}`: use a string, an integer or a boolean"
                        ),
                    ))
                }
            };
            sysctls.push((k.clone(), v));
        }
        let mut env = Vec::new();
        for (key, value) in &spec.env {
            let k = key.get_ref();
            let ok = k.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !ok {
                return Err(self.err(key.span(), format!("invalid environment variable name `{k}`: use A-Z, a-z, 0-9 and '_', not starting with a digit")));
            }
            env.push((k.clone(), value.get_ref().clone()));
        }
        let cpu = match &spec.cpu {
            None => None,
            Some(c) if (0.01..=1024.0).contains(c.get_ref()) => Some(*c.get_ref()),
            Some(c) => {
                return Err(self.err(
                    c.span(),
                    format!(
                        "CPU limit {} is out of range: allowed are 0.01 to 1024 cores",
                        c.get_ref()
                    ),
                ))
            }
        };
        let container = crate::container::from_spec(&name, spec, &|span, m| self.err(span, m))?;
        Ok(Node {
            name,
            loopback,
            sysctls,
            run: spec.run.iter().map(|r| r.get_ref().clone()).collect(),
            env,
            cpu,
            host: None,
            container,
        })
    }

    fn member(
        &self,
        text: &Spanned<String>,
        nodes: &BTreeMap<String, usize>,
    ) -> Result<Member, SpecError> {
        let s = text.get_ref();
        let (node, ifname) = match s.split_once(':') {
            Some((n, i)) => (n, Some(i)),
            None => (s.as_str(), None),
        };
        let Some(&index) = nodes.get(node) else {
            let known: Vec<&str> = nodes.keys().map(String::as_str).collect();
            return Err(self.err(
                text.span(),
                format!("unknown node `{node}`: the nodes are {}", known.join(", ")),
            ));
        };
        if let Some(i) = ifname {
            if !valid_ifname(i) || i == "lo" {
                return Err(self.err(text.span(), format!("invalid interface name `{i}`: use 1 to {MAX_IFNAME} characters a-z, A-Z, 0-9, '.', '_' and '-' (not \"lo\")")));
            }
        }
        Ok(Member {
            node: index,
            ifname: ifname.map(str::to_owned),
            span: text.span(),
            ipv4: None,
            ipv6: None,
        })
    }

    fn unique_segment(
        &self,
        names: &mut BTreeMap<String, usize>,
        name: &str,
        span: &Range<usize>,
    ) -> Result<(), SpecError> {
        if let Some(line) = names.get(name) {
            return Err(self.err(span.clone(), format!("duplicate link or LAN name `{name}` (first used on line {line}): give each link and LAN its own name")));
        }
        names.insert(name.to_owned(), self.line(span));
        Ok(())
    }

    /// Records `net` as in use, or says what it overlaps.
    fn claim(&mut self, net: IpNet, what: String, span: &Range<usize>) -> Result<(), SpecError> {
        if let Some(other) = self.used.overlap(net) {
            return Err(self.err(
                span.clone(),
                format!(
                    "{what} overlaps {} (line {}): subnets and addresses must not overlap",
                    other.what, other.line
                ),
            ));
        }
        let line = self.line(span);
        self.used.insert(net, what, line);
        Ok(())
    }

    fn subnet4(
        &mut self,
        text: Option<&Spanned<String>>,
        segment: &str,
    ) -> Result<Option<Ipv4Net>, SpecError> {
        let Some(text) = text else { return Ok(None) };
        let net: Ipv4Net = text.get_ref().parse().map_err(|_| {
            self.err(
                text.span(),
                format!(
                    "invalid IPv4 subnet `{}`: write a prefix like \"10.1.2.0/24\"",
                    text.get_ref()
                ),
            )
        })?;
        if net.prefix_len() > 30 {
            return Err(self.err(
                text.span(),
                format!("IPv4 subnet {net} is too small: allowed prefix lengths are 0 to 30"),
            ));
        }
        if net.trunc() != net {
            return Err(self.err(
                text.span(),
                format!(
                    "IPv4 subnet `{net}` has host bits set: did you mean \"{}\"?",
                    net.trunc()
                ),
            ));
        }
        self.claim(
            IpNet::V4(net),
            format!("subnet {net} of `{segment}`"),
            &text.span(),
        )?;
        Ok(Some(net))
    }

    fn subnet6(
        &mut self,
        text: Option<&Spanned<String>>,
        segment: &str,
    ) -> Result<Option<Ipv6Net>, SpecError> {
        let Some(text) = text else { return Ok(None) };
        let net: Ipv6Net = text.get_ref().parse().map_err(|_| {
            self.err(
                text.span(),
                format!(
                    "invalid IPv6 subnet `{}`: write a prefix like \"fd00:1::/64\"",
                    text.get_ref()
                ),
            )
        })?;
        if net.prefix_len() > 126 {
            return Err(self.err(
                text.span(),
                format!("IPv6 subnet {net} is too small: allowed prefix lengths are 0 to 126"),
            ));
        }
        if net.trunc() != net {
            return Err(self.err(
                text.span(),
                format!(
                    "IPv6 subnet `{net}` has host bits set: did you mean \"{}\"?",
                    net.trunc()
                ),
            ));
        }
        self.claim(
            IpNet::V6(net),
            format!("subnet {net} of `{segment}`"),
            &text.span(),
        )?;
        Ok(Some(net))
    }

    /// Names interfaces, allocates pool subnets and gives every member its addresses.
    fn finish(
        &mut self,
        drafts: Vec<Draft>,
        spec: &FileSpec,
        families: Families,
        nodes: &[Node],
    ) -> Result<Vec<Segment>, SpecError> {
        // Explicit interface names first, so automatic ones (`eth0`, `eth1`, …) avoid them.
        let mut taken: Vec<BTreeSet<String>> = vec![BTreeSet::new(); nodes.len()];
        for d in &drafts {
            for m in &d.members {
                if let Some(name) = &m.ifname {
                    if !taken[m.node].insert(name.clone()) {
                        return Err(self.err(m.span.clone(), format!("duplicate interface `{name}` on node `{}`: each interface of a node needs its own name", nodes[m.node].name)));
                    }
                }
            }
        }
        let mut next_auto = vec![0usize; nodes.len()];
        let pool = spec.pool.as_ref();
        let (pool4, len4) = self.pool4(pool)?;
        let (pool6, len6) = self.pool6(pool)?;
        let mut segments = Vec::with_capacity(drafts.len());
        let mut interface_index = 0u32;
        for d in drafts {
            let ipv4 = match d.ipv4 {
                Some(n) => Some(n),
                None if families.v4 && !matches!(d.kind, SegmentKind::External { .. }) => {
                    let net = self.allocate(IpNet::V4(pool4), len4, &d)?;
                    match net {
                        IpNet::V4(n) => Some(n),
                        IpNet::V6(_) => unreachable!("an IPv4 pool yields IPv4 subnets"),
                    }
                }
                None => None,
            };
            let ipv6 = match d.ipv6 {
                Some(n) => Some(n),
                None if families.v6 && !matches!(d.kind, SegmentKind::External { .. }) => {
                    match self.allocate(IpNet::V6(pool6), len6, &d)? {
                        IpNet::V6(n) => Some(n),
                        IpNet::V4(_) => unreachable!("an IPv6 pool yields IPv6 subnets"),
                    }
                }
                None => None,
            };
            if let (Some(mtu), Some(_)) = (d.mtu, ipv6) {
                if mtu < 1280 {
                    return Err(self.err(d.mtu_span.clone().unwrap_or(d.span.clone()), format!("MTU {mtu} of `{}` is too small for IPv6: allowed are 1280 to 65535 on a segment with IPv6", d.name)));
                }
            }
            let mut members = Vec::with_capacity(d.members.len());
            for (i, m) in d.members.iter().enumerate() {
                let ifname = match &m.ifname {
                    Some(n) => n.clone(),
                    None => loop {
                        let candidate = format!("eth{}", next_auto[m.node]);
                        next_auto[m.node] += 1;
                        if taken[m.node].insert(candidate.clone()) {
                            break candidate;
                        }
                    },
                };
                let host = i as u128 + 1;
                members.push(Attachment {
                    node: m.node,
                    ifname,
                    ipv4: m.ipv4.or(ipv4.map(|n| {
                        let a = u32::from(n.network()) + host as u32;
                        Ipv4Net::new(a.into(), n.prefix_len()).expect("prefix length was checked")
                    })),
                    ipv6: m.ipv6.or(ipv6.map(|n| {
                        let a = u128::from(n.network()) + host;
                        Ipv6Net::new(a.into(), n.prefix_len()).expect("prefix length was checked")
                    })),
                    mac: Mac::for_interface(interface_index),
                });
                interface_index += 1;
            }
            let external = matches!(d.kind, SegmentKind::External { .. });
            if let Some(n) = ipv4.filter(|_| !external) {
                // Network and broadcast addresses are not for members.
                let hosts = (1u64 << (32 - n.prefix_len())) - 2;
                if (members.len() as u64) > hosts {
                    return Err(self.err(d.span.clone(), format!("IPv4 subnet {n} of `{}` holds {hosts} hosts but it has {} members: use a shorter prefix", d.name, members.len())));
                }
            }
            if let Some(n) = ipv6.filter(|_| !external) {
                let bits = 128 - u32::from(n.prefix_len());
                if bits < 64 && (members.len() as u128) >= (1u128 << bits) - 1 {
                    return Err(self.err(d.span.clone(), format!("IPv6 subnet {n} of `{}` is too small for its {} members: use a shorter prefix", d.name, members.len())));
                }
            }
            segments.push(Segment {
                name: d.name,
                kind: d.kind,
                mtu: d.mtu,
                ipv4,
                ipv6,
                members,
                engine_host: None,
            });
        }
        Ok(segments)
    }

    fn pool4(&self, pool: Option<&crate::spec::PoolSpec>) -> Result<(Ipv4Net, u8), SpecError> {
        let net = match pool.and_then(|p| p.ipv4.as_ref()) {
            None => DEFAULT_POOL_V4.parse().expect("the default pool is valid"),
            Some(t) => t.get_ref().parse::<Ipv4Net>().ok().filter(|n| n.trunc() == *n).ok_or_else(|| {
                self.err(t.span(), format!("invalid IPv4 pool `{}`: write a prefix like \"10.0.0.0/8\" without host bits", t.get_ref()))
            })?,
        };
        let len = self.pool_len(
            pool.and_then(|p| p.ipv4_prefix.as_ref()),
            net.prefix_len(),
            30,
            24,
        )?;
        Ok((net, len))
    }

    fn pool6(&self, pool: Option<&crate::spec::PoolSpec>) -> Result<(Ipv6Net, u8), SpecError> {
        let net = match pool.and_then(|p| p.ipv6.as_ref()) {
            None => DEFAULT_POOL_V6.parse().expect("the default pool is valid"),
            Some(t) => t.get_ref().parse::<Ipv6Net>().ok().filter(|n| n.trunc() == *n).ok_or_else(|| {
                self.err(t.span(), format!("invalid IPv6 pool `{}`: write a prefix like \"fd00:1::/48\" without host bits", t.get_ref()))
            })?,
        };
        let len = self.pool_len(
            pool.and_then(|p| p.ipv6_prefix.as_ref()),
            net.prefix_len(),
            126,
            64,
        )?;
        Ok((net, len))
    }

    fn pool_len(
        &self,
        len: Option<&Spanned<i64>>,
        pool_len: u8,
        max: u8,
        default: u8,
    ) -> Result<u8, SpecError> {
        match len {
            None => Ok(default.max(pool_len)),
            Some(l) => match u8::try_from(*l.get_ref()) {
                Ok(v) if v >= pool_len && v <= max => Ok(v),
                _ => Err(self.err(l.span(), format!("segment prefix length {} is out of range: allowed are {pool_len} (the pool's) to {max}", l.get_ref()))),
            },
        }
    }

    /// The first subnet of length `len` in `pool` that overlaps nothing in use.
    ///
    /// Candidates are tried in order from where the last allocation of the family stopped:
    /// explicit subnets are all claimed before any allocation, so a candidate passed over once
    /// stays unusable, and allocation stays linear in the number of segments (each claim in
    /// the way stepped over whole, each overlap found in logarithmic time).
    fn allocate(&mut self, pool: IpNet, len: u8, d: &Draft) -> Result<IpNet, SpecError> {
        let cursor = usize::from(matches!(pool, IpNet::V6(_)));
        if let Some((i, candidate)) = self.used.first_free(pool, len, self.cursor[cursor]) {
            self.cursor[cursor] = i + 1;
            let what = format!("subnet {candidate} of `{}` (from the pool)", d.name);
            self.claim(candidate, what, &d.span)?;
            return Ok(candidate);
        }
        Err(self.err(d.span.clone(), format!("the address pool {pool} has no free /{len} left for `{}`: set a larger `[pool]` prefix", d.name)))
    }
}

/// Whether `name` is a valid lab (`max` = [`MAX_LAB_NAME`]) or node, link or LAN name
/// ([`MAX_NODE_NAME`]): 1 to `max` characters a-z, 0-9 and '-', starting with a letter and not
/// ending with '-', so it is a valid host name and fits namespace and file names.
pub fn valid_name(name: &str, max: usize) -> bool {
    name.len() <= max
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && !name.ends_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// Whether `name` is an interface name rtemu accepts: 1 to [`MAX_IFNAME`] characters a-z, A-Z,
/// 0-9, '.', '_' and '-', and not `.` or `..` (a subset of what the kernel takes, safe in
/// `/sys/class/net` paths and in `ip` commands).
pub fn valid_ifname(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_IFNAME
        && name != "."
        && name != ".."
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// Where two nodes reach each other: for tools run between them (`rtemu lab rtt --from A
/// --to B`).
impl Topology {
    /// The address `to` is reached at from `from`: its first address on a link or LAN both
    /// are on (IPv4 before IPv6), else its first address at all. `None` when a node is
    /// unknown or `to` has no address.
    pub fn peer_address(&self, from: &str, to: &str) -> Option<IpAddr> {
        let index = |name: &str| self.nodes.iter().position(|n| n.name == name);
        let (a, b) = (index(from)?, index(to)?);
        let first = |m: &Attachment| {
            m.ipv4
                .map(|n| IpAddr::V4(n.addr()))
                .or(m.ipv6.map(|n| IpAddr::V6(n.addr())))
        };
        let shared = self
            .segments
            .iter()
            .filter(|seg| seg.members.iter().any(|m| m.node == a))
            .flat_map(|seg| seg.members.iter().filter(|m| m.node == b))
            .find_map(first);
        shared
            .or_else(|| {
                self.segments
                    .iter()
                    .flat_map(|seg| seg.members.iter().filter(|m| m.node == b))
                    .find_map(first)
            })
            .or_else(|| self.nodes[b].loopback.first().map(|n| n.addr()))
    }

    /// The interfaces of `from` and `to` on the first link or LAN both are on, in that
    /// order: where Ethernet frames leave `from` and arrive at `to` without crossing a
    /// router. `None` when a node is unknown or the two share no segment.
    pub fn facing_interfaces(&self, from: &str, to: &str) -> Option<(String, String)> {
        let index = |name: &str| self.nodes.iter().position(|n| n.name == name);
        let (a, b) = (index(from)?, index(to)?);
        self.segments.iter().find_map(|seg| {
            let on = |node: usize| seg.members.iter().find(|m| m.node == node);
            Some((on(a)?.ifname.clone(), on(b)?.ifname.clone()))
        })
    }
}
