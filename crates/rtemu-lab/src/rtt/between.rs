//! Round trips between two nodes of a running lab (`rtemu lab rtt --lab LAB --from A --to
//! B`): where the probes go from `A`, the echo servers started in `B` for the run, and the
//! command line of the sweeps run inside `A`.
//!
//! A UDP sweep goes to `B`'s address facing `A`; a raw Ethernet one leaves `A`'s interface
//! facing `B` for the MAC address of `B`'s interface facing `A` (raw frames cross no router,
//! so the two must share a link or LAN).

use std::ffi::OsString;
use std::io::{self, BufRead as _, BufReader};
use std::net::{IpAddr, SocketAddr};
use std::process::{Child, Stdio};

use rtemu_topo::lab::{self, LabError};
use rtemu_topo::state::State;
use rtemu_topo::topology::{Attachment, Topology};

use super::{Endpoint, Mac, MacError};

/// Why the sweep between two nodes cannot start.
#[derive(Debug, thiserror::Error)]
pub enum BetweenError {
    /// A node is unknown, or a command could not be made for it.
    #[error(transparent)]
    Lab(#[from] LabError),
    /// The `to` node has no address.
    #[error("lab `{lab}`: no address of node `{to}` (or no node `{from}` or `{to}`)")]
    NoAddress {
        /// The lab.
        lab: String,
        /// Where the probes leave.
        from: String,
        /// Where the echo runs.
        to: String,
    },
    /// The nodes share no segment, which raw frames need.
    #[error(
        "lab `{lab}`: nodes `{from}` and `{to}` share no link or LAN (or one is not a node), \
         and raw Ethernet frames cross no router: pick two nodes on one segment, or use \
         --protocol udp"
    )]
    NoSegment {
        /// The lab.
        lab: String,
        /// Where the probes leave.
        from: String,
        /// Where the echo runs.
        to: String,
    },
    /// A command in a node failed to run.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The operating system's error.
        source: io::Error,
    },
    /// A command in a node ran and failed.
    #[error("{what}: {detail}")]
    Failed {
        /// What was being done.
        what: String,
        /// What it said.
        detail: String,
    },
    /// A node's interface has no usable MAC address.
    #[error("{what}: {source}")]
    Mac {
        /// Where it was read.
        what: String,
        /// Why it is not one.
        source: MacError,
    },
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> BetweenError {
    let what = what.into();
    move |source| BetweenError::Io { what, source }
}

/// The address `to` is reached at from `from`: its first address on a link or LAN both are
/// on (IPv4 before IPv6), else its first address at all. `None` when a node is unknown or
/// `to` has no address.
pub fn peer_address(topo: &Topology, from: &str, to: &str) -> Option<IpAddr> {
    let index = |name: &str| topo.nodes.iter().position(|n| n.name == name);
    let (a, b) = (index(from)?, index(to)?);
    let first = |m: &Attachment| {
        m.ipv4
            .map(|n| IpAddr::V4(n.addr()))
            .or(m.ipv6.map(|n| IpAddr::V6(n.addr())))
    };
    let shared = topo
        .segments
        .iter()
        .filter(|seg| seg.members.iter().any(|m| m.node == a))
        .flat_map(|seg| seg.members.iter().filter(|m| m.node == b))
        .find_map(first);
    shared
        .or_else(|| {
            topo.segments
                .iter()
                .flat_map(|seg| seg.members.iter().filter(|m| m.node == b))
                .find_map(first)
        })
        .or_else(|| topo.nodes[b].loopback.first().map(|n| n.addr()))
}

/// The interfaces of `from` and `to` on the first link or LAN both are on, in that order:
/// where raw Ethernet frames leave `from` and arrive at `to` (they cross no router). `None`
/// when a node is unknown or the two share no segment.
pub fn facing_interfaces(topo: &Topology, from: &str, to: &str) -> Option<(String, String)> {
    let index = |name: &str| topo.nodes.iter().position(|n| n.name == name);
    let (a, b) = (index(from)?, index(to)?);
    topo.segments.iter().find_map(|seg| {
        let on = |node: usize| seg.members.iter().find(|m| m.node == node);
        Some((on(a)?.ifname.clone(), on(b)?.ifname.clone()))
    })
}

/// A command's arguments without `--lab`, `--from`, `--to`, `--port` and `--protocol` (and
/// their values), for the sweeps run inside the `--from` node, which are given their
/// protocol and echo servers explicitly.
pub fn forwarded_args(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    const DROP: [&str; 5] = ["--lab", "--from", "--to", "--port", "--protocol"];
    let mut out = Vec::new();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let text = arg.to_string_lossy();
        if DROP.contains(&text.as_ref()) {
            args.next();
        } else if !DROP
            .iter()
            .any(|flag| text.starts_with(&format!("{flag}=")))
        {
            out.push(arg);
        }
    }
    out
}

/// An echo server in the `to` node: killed and reaped when dropped, whatever happened.
#[derive(Debug)]
pub struct EchoServer(Child);

impl Drop for EchoServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the echo server `argv` (`rtemu lab echo …`) in node `node` and waits until it
/// serves.
pub fn start_echo(state: &State, node: &str, argv: &[String]) -> Result<EchoServer, BetweenError> {
    let mut cmd = lab::node_command(state, node, argv)?;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut echo = EchoServer(cmd.spawn().map_err(io_err(format!(
        "starting `rtemu lab echo` in node `{node}`"
    )))?);
    // It says so once it serves; an error or an early exit closes the pipe instead.
    let mut first = String::new();
    let stderr = echo.0.stderr.take().ok_or_else(|| BetweenError::Failed {
        what: "the echo server's stderr".into(),
        detail: "not captured".into(),
    })?;
    BufReader::new(stderr)
        .read_line(&mut first)
        .map_err(io_err("reading the echo server's output"))?;
    if !first.contains("echoing") {
        return Err(BetweenError::Failed {
            what: format!("`rtemu lab echo` in node `{node}` did not start"),
            detail: first.trim().to_owned(),
        });
    }
    Ok(echo)
}

/// The Ethernet address of `interface` in node `node`, read from the node's own sysfs.
fn interface_mac(state: &State, node: &str, interface: &str) -> Result<Mac, BetweenError> {
    let path = format!("/sys/class/net/{interface}/address");
    let what = format!("reading {path} in node `{node}`");
    let out = lab::node_command(state, node, &["cat".to_owned(), path.clone()])?
        .stdin(Stdio::null())
        .output()
        .map_err(io_err(what.clone()))?;
    if !out.status.success() {
        return Err(BetweenError::Failed {
            what,
            detail: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .map_err(|source| BetweenError::Mac { what, source })
}

/// One sweep between the two nodes: where the probes go from `from`, the arguments of the
/// echo server in `to`, and where it runs, in words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leg {
    /// Where the probes go.
    pub target: Endpoint,
    /// The echo server's arguments after `rtemu lab echo`.
    pub echo_args: Vec<String>,
    /// The sweep, in words.
    pub description: String,
}

/// The sweeps from `from` to `to` in the lab of `state`, UDP (to `port`) first: `udp` and
/// `raw` say which run.
pub fn legs(
    state: &State,
    (from, to): (&str, &str),
    (udp, raw): (bool, bool),
    port: u16,
) -> Result<Vec<Leg>, BetweenError> {
    let lab = || state.lab.to_string();
    let mut legs = Vec::new();
    if udp {
        let addr =
            peer_address(&state.topology, from, to).ok_or_else(|| BetweenError::NoAddress {
                lab: lab(),
                from: from.into(),
                to: to.into(),
            })?;
        let target = SocketAddr::new(addr, port);
        legs.push(Leg {
            target: Endpoint::Udp(target),
            echo_args: vec!["--listen".into(), target.to_string()],
            description: format!("from node `{from}` to node `{to}` at {target}"),
        });
    }
    if raw {
        let (near, far) = facing_interfaces(&state.topology, from, to).ok_or_else(|| {
            BetweenError::NoSegment {
                lab: lab(),
                from: from.into(),
                to: to.into(),
            }
        })?;
        let mac = interface_mac(state, to, &far)?;
        legs.push(Leg {
            description: format!(
                "raw Ethernet from node `{from}`'s {near} to node `{to}`'s {far} at {mac}"
            ),
            echo_args: vec!["--raw".into(), far],
            target: Endpoint::Raw {
                interface: near,
                mac,
            },
        });
    }
    Ok(legs)
}

/// The command line of the sweeps inside the `from` node: `exe`, the user's arguments
/// `forwarded` (see [`forwarded_args`]), then the protocol and each leg's echo server.
pub fn sweep_argv(exe: &str, forwarded: &[OsString], protocol: &str, legs: &[Leg]) -> Vec<String> {
    let mut argv = vec![exe.to_owned()];
    argv.extend(forwarded.iter().map(|a| a.to_string_lossy().into_owned()));
    argv.extend(["--protocol".to_owned(), protocol.to_owned()]);
    for leg in legs {
        match &leg.target {
            Endpoint::Udp(target) => argv.extend(["--to".to_owned(), target.to_string()]),
            Endpoint::Raw { interface, mac } => argv.extend([
                "--raw".to_owned(),
                interface.clone(),
                "--peer".to_owned(),
                mac.to_string(),
            ]),
        }
    }
    argv
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peer_is_found_on_a_shared_segment_first() {
        const SRC: &str = r#"
lab = "t"
ip = "ipv4"
[nodes.a]
[nodes.b]
[nodes.c]
[[links]]
endpoints = ["b", "c"]
ipv4 = "10.0.0.0/30"
[[links]]
endpoints = ["a", "b"]
ipv4 = "10.0.1.0/30"
"#;
        let topo = Topology::parse("t.toml", SRC).unwrap();
        // Whether `addr` lies in the /30 `net` of this file.
        let on = |net: &str, addr: IpAddr| match addr {
            IpAddr::V4(v4) => {
                let [a, b, c, d] = v4.octets();
                net == format!("{a}.{b}.{c}.0/30") && d < 4
            }
            IpAddr::V6(_) => false,
        };
        let b = peer_address(&topo, "a", "b").unwrap();
        assert!(on("10.0.1.0/30", b), "{b}");
        // No segment shared with c: its first address at all.
        let c = peer_address(&topo, "a", "c").unwrap();
        assert!(on("10.0.0.0/30", c), "{c}");
        assert_eq!(peer_address(&topo, "a", "nobody"), None);
        // Raw frames need a shared segment: b is a's only neighbour, on b's second interface.
        assert_eq!(
            facing_interfaces(&topo, "a", "b"),
            Some(("eth0".into(), "eth1".into()))
        );
        assert_eq!(
            facing_interfaces(&topo, "b", "a"),
            Some(("eth1".into(), "eth0".into()))
        );
        assert_eq!(facing_interfaces(&topo, "a", "c"), None);
        assert_eq!(facing_interfaces(&topo, "a", "nobody"), None);
    }

    #[test]
    fn every_flag_is_forwarded_but_the_lab_ones() {
        let args = [
            "lab",
            "rtt",
            "--lab",
            "t",
            "--from=a",
            "--to",
            "b",
            "--port",
            "9",
            "--count",
            "5",
            "--protocol",
            "both",
            "--json",
            "--protocol=raw",
        ]
        .map(OsString::from);
        let out: Vec<_> = forwarded_args(args)
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect();
        assert_eq!(out, ["lab", "rtt", "--count", "5", "--json"]);
    }

    #[test]
    fn the_sweep_names_each_legs_echo() {
        let mac: Mac = "02:00:5e:10:00:01".parse().unwrap();
        let legs = [
            Leg {
                target: Endpoint::Udp("10.0.0.2:7777".parse().unwrap()),
                echo_args: vec![],
                description: String::new(),
            },
            Leg {
                target: Endpoint::Raw {
                    interface: "eth0".into(),
                    mac,
                },
                echo_args: vec![],
                description: String::new(),
            },
        ];
        let argv = sweep_argv("rtemu", &["lab".into(), "rtt".into()], "both", &legs);
        assert_eq!(
            argv,
            [
                "rtemu",
                "lab",
                "rtt",
                "--protocol",
                "both",
                "--to",
                "10.0.0.2:7777",
                "--raw",
                "eth0",
                "--peer",
                "02:00:5e:10:00:01"
            ]
        );
    }
}
