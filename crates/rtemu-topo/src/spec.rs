//! The topology file as written: TOML deserialised with the position of every value kept, so
//! validation can point at the line and column of a mistake. Nothing here is checked beyond
//! TOML types; [`crate::topology`] turns a [`FileSpec`] into a validated
//! [`crate::Topology`].

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

/// A whole topology file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSpec {
    /// The lab's name.
    pub lab: Spanned<String>,
    /// `"static"` (default) or `"none"`.
    pub routing: Option<Spanned<String>>,
    /// `"static"` or `"dynamic"` (default).
    pub neighbours: Option<Spanned<String>>,
    /// `"dual"` (default), `"ipv4"` or `"ipv6"`: the families pool addresses are given for.
    pub ip: Option<Spanned<String>>,
    /// `"all"` (default) or `"off-engine"`: where the processes started in the lab's nodes run.
    pub programs_cpus: Option<Spanned<String>>,
    /// Default MTU of every link and LAN.
    pub mtu: Option<Spanned<i64>>,
    /// Where automatic addresses come from.
    pub pool: Option<PoolSpec>,
    /// Nodes by name.
    #[serde(default)]
    pub nodes: BTreeMap<Spanned<String>, NodeSpec>,
    /// Point-to-point links.
    #[serde(default)]
    pub links: Vec<LinkSpec>,
    /// LAN segments (bridges).
    #[serde(default)]
    pub lans: Vec<LanSpec>,
    /// Host interfaces handed to nodes.
    #[serde(default)]
    pub externals: Vec<ExternalSpec>,
    /// The machines a multi-host lab spans, by name.
    #[serde(default)]
    pub hosts: BTreeMap<Spanned<String>, HostSpec>,
}

/// `[hosts]`: one machine of a multi-host lab, whose agent (`rtemu serve`) builds its part.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostSpec {
    /// The machine's address on the underlay: its agent's and its tunnels' end.
    pub address: Spanned<String>,
    /// Its agent's TCP port.
    pub port: Option<Spanned<i64>>,
}

/// `[pool]`: the prefixes segment subnets are allocated from.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolSpec {
    /// IPv4 pool prefix.
    pub ipv4: Option<Spanned<String>>,
    /// Prefix length of each IPv4 segment subnet.
    pub ipv4_prefix: Option<Spanned<i64>>,
    /// IPv6 pool prefix.
    pub ipv6: Option<Spanned<String>>,
    /// Prefix length of each IPv6 segment subnet.
    pub ipv6_prefix: Option<Spanned<i64>>,
}

/// `[nodes.NAME]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    /// Addresses on the node's loopback interface (`"192.0.2.1/32"`).
    #[serde(default)]
    pub addresses: Vec<Spanned<String>>,
    /// Sysctls set in the node (`"net.ipv4.tcp_ecn" = "1"`).
    #[serde(default)]
    pub sysctls: BTreeMap<Spanned<String>, Spanned<toml::Value>>,
    /// Start-up commands, run in the node through `sh -c` once the lab is up.
    #[serde(default)]
    pub run: Vec<Spanned<String>>,
    /// Environment of start-up commands.
    #[serde(default)]
    pub env: BTreeMap<Spanned<String>, Spanned<String>>,
    /// CPU limit in cores for processes rtemu starts in the node.
    pub cpu: Option<Spanned<f64>>,
    /// The `[hosts]` entry the node runs on (default: placed by rtemu).
    pub host: Option<Spanned<String>>,
    /// The container image the node runs in its namespace (absent: a bare namespace); the
    /// keys below apply to image nodes only (see [`crate::container`]).
    pub image: Option<Spanned<String>>,
    /// When the image is pulled: `"never"`, `"if-not-present"` (default) or `"always"`.
    pub pull: Option<Spanned<String>>,
    /// The image's entrypoint replaced: an array of arguments, or a string split as a shell
    /// splits words.
    pub entrypoint: Option<Spanned<toml::Value>>,
    /// The image's command replaced: an array of arguments, or a string split as a shell does.
    pub cmd: Option<Spanned<toml::Value>>,
    /// Host paths mounted into the container, `"HOST:CONTAINER"` or `"HOST:CONTAINER:ro"`,
    /// host paths relative to the topology file.
    #[serde(default)]
    pub binds: Vec<Spanned<String>>,
    /// Capabilities added to the runtime's defaults (`"NET_ADMIN"`, `"CAP_NET_RAW"`).
    #[serde(default)]
    pub caps: Vec<Spanned<String>>,
    /// The container's memory limit (`"256mb"`, `"1g"`).
    pub memory: Option<Spanned<String>>,
    /// How the container tells that it is healthy.
    pub healthcheck: Option<Spanned<HealthcheckSpec>>,
    /// Nodes whose containers must be running (`"db"`) or healthy (`"db:healthy"`) before
    /// this one starts.
    #[serde(default)]
    pub wait_for: Vec<Spanned<String>>,
    /// The container's restart policy: `"no"` (default), `"on-failure"`, `"on-failure:N"`,
    /// `"always"` or `"unless-stopped"`.
    pub restart: Option<Spanned<String>>,
}

/// A node's `healthcheck`: containerlab's (and Compose's) fields.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthcheckSpec {
    /// `["CMD", "prog", "arg"…]`, `["CMD-SHELL", "command line"]`, or a string (a shell
    /// command line).
    pub test: Spanned<toml::Value>,
    /// Time between checks while `up` waits (`"1s"`).
    pub interval: Option<Spanned<String>>,
    /// How long one check may take.
    pub timeout: Option<Spanned<String>>,
    /// Failures in this time after the start do not count.
    pub start_period: Option<Spanned<String>>,
    /// Failures in a row that make the container unhealthy.
    pub retries: Option<Spanned<i64>>,
}

/// `[[links]]`: a point-to-point link.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    /// An optional name (default `NODE_A-NODE_B`).
    pub name: Option<Spanned<String>>,
    /// Two endpoints, each `"node"` or `"node:ifname"`.
    pub endpoints: Spanned<Vec<Spanned<String>>>,
    /// The link's IPv4 subnet; endpoint `i` gets host address `i + 1`.
    pub ipv4: Option<Spanned<String>>,
    /// The link's IPv6 subnet; endpoint `i` gets host address `i + 1`.
    pub ipv6: Option<Spanned<String>>,
    /// MTU of both ends.
    pub mtu: Option<Spanned<i64>>,
    /// netem-style impairment of both directions (needs the real-time engine).
    pub netem: Option<Spanned<String>>,
    /// netem-style impairment from the first endpoint to the second, instead of `netem`.
    pub netem_ab: Option<Spanned<String>>,
    /// netem-style impairment from the second endpoint to the first, instead of `netem`.
    pub netem_ba: Option<Spanned<String>>,
    /// Trace file driving the link (needs the real-time engine).
    pub trace: Option<Spanned<String>>,
    /// Address resolution (ARP, NDP): `"pass"` (default: the base delay, never lost) or
    /// `"model"` (impaired like every other frame).
    pub resolution: Option<Spanned<String>>,
    /// Parameter changes at given times after the engine starts.
    #[serde(default)]
    pub schedule: Vec<ChangeSpec>,
    /// The `[hosts]` entry whose engine releases an impaired link's frames (default: the first
    /// endpoint's host); it must hold one of the endpoints.
    pub engine: Option<Spanned<String>>,
}

/// One entry of a link's `schedule`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChangeSpec {
    /// When, after the engine starts: a time such as `"10s"` or `"1500ms"`.
    pub at: Spanned<String>,
    /// The new netem parameters.
    pub netem: Spanned<String>,
    /// `"a-b"`, `"b-a"` or `"both"` (default).
    pub dir: Option<Spanned<String>>,
}

/// `[[lans]]`: a broadcast segment joining any number of nodes through a bridge.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LanSpec {
    /// The LAN's name.
    pub name: Spanned<String>,
    /// Members, each `"node"` or `"node:ifname"`.
    pub members: Spanned<Vec<Spanned<String>>>,
    /// The LAN's IPv4 subnet; member `i` gets host address `i + 1`.
    pub ipv4: Option<Spanned<String>>,
    /// The LAN's IPv6 subnet; member `i` gets host address `i + 1`.
    pub ipv6: Option<Spanned<String>>,
    /// MTU of every member interface.
    pub mtu: Option<Spanned<i64>>,
}

/// `[[externals]]`: a host interface handed to a node, so hosts outside take part.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExternalSpec {
    /// The node that gets it.
    pub node: Spanned<String>,
    /// The host interface.
    pub host: Spanned<String>,
    /// `"move"` (default: the interface itself moves into the node) or `"macvlan"` (the node
    /// gets a macvlan on it and the host keeps it).
    pub mode: Option<Spanned<String>>,
    /// The interface's name inside the node (default: the next free `ethN`).
    pub ifname: Option<Spanned<String>>,
    /// The node's IPv4 address on it, with prefix length (`"198.51.100.1/24"`).
    pub ipv4: Option<Spanned<String>>,
    /// The node's IPv6 address on it, with prefix length.
    pub ipv6: Option<Spanned<String>>,
    /// Move it even when it carries the host's default route or an address the host is
    /// reached at (the host loses them until `down` gives them back).
    pub uplink: Option<Spanned<bool>>,
}
