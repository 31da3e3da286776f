//! Round trips between two nodes of a running lab (`rtemu lab rtt --lab LAB --from A --to
//! B`): where the probes go from `A`, the echo servers started in `B` for the run, and the
//! command line of the sweeps run inside `A`; [`run`] runs them all.
//!
//! A UDP sweep goes to `B`'s address facing `A`; a raw Ethernet one leaves `A`'s interface
//! facing `B` for the MAC address of `B`'s interface facing `A` (raw frames cross no router,
//! so the two must share a link or LAN). The lab itself is the caller's: it gives the
//! addresses and interfaces its topology names, and a [`NodeCommand`] that makes a command
//! run inside a node.

use std::error::Error;
use std::ffi::OsString;
use std::io::{self, BufRead as _, BufReader};
use std::net::{IpAddr, SocketAddr};
use std::process::{Child, Command, Stdio};

use super::{Endpoint, Mac, MacError};

/// Makes the command `argv` run inside node `node` of the lab.
pub type NodeCommand<'a> =
    &'a dyn Fn(&str, &[String]) -> Result<Command, Box<dyn Error + Send + Sync>>;

/// Why the sweep between two nodes cannot start.
#[derive(Debug, thiserror::Error)]
pub enum BetweenError {
    /// A node is unknown, or a command could not be made for it.
    #[error(transparent)]
    Node(Box<dyn Error + Send + Sync>),
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
pub fn start_echo(
    node_command: NodeCommand<'_>,
    node: &str,
    argv: &[String],
) -> Result<EchoServer, BetweenError> {
    let mut cmd = node_command(node, argv).map_err(BetweenError::Node)?;
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
fn interface_mac(
    node_command: NodeCommand<'_>,
    node: &str,
    interface: &str,
) -> Result<Mac, BetweenError> {
    let path = format!("/sys/class/net/{interface}/address");
    let what = format!("reading {path} in node `{node}`");
    let out = node_command(node, &["cat".to_owned(), path.clone()])
        .map_err(BetweenError::Node)?
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

impl Leg {
    /// The command line of this leg's echo server: `exe lab echo ARGS`, serving for
    /// `bound_ns` at most (see [`super::plan::Probes::echo_bound_ns`]).
    pub fn echo_argv(&self, exe: &str, bound_ns: u64) -> Vec<String> {
        let mut argv = vec![exe.to_owned(), "lab".into(), "echo".into()];
        argv.extend(self.echo_args.iter().cloned());
        argv.extend(["--duration".into(), format!("{bound_ns}ns")]);
        argv
    }
}

/// Where two nodes of a lab reach each other, as its topology says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peers<'a> {
    /// The lab's name.
    pub lab: &'a str,
    /// Where the probes leave.
    pub from: &'a str,
    /// Where the echo runs.
    pub to: &'a str,
    /// `to`'s address as `from` reaches it, if it has one.
    pub address: Option<IpAddr>,
    /// The interfaces of `from` and `to` on a segment both are on, if any.
    pub facing: Option<(String, String)>,
}

/// The sweeps between `peers`, UDP (to `port`) first: `udp` and `raw` say which run. The
/// raw echo's MAC address is read in the `to` node through `node_command`.
pub fn legs(
    peers: &Peers<'_>,
    (udp, raw): (bool, bool),
    port: u16,
    node_command: NodeCommand<'_>,
) -> Result<Vec<Leg>, BetweenError> {
    let Peers { from, to, .. } = *peers;
    let lab = || peers.lab.to_owned();
    let mut legs = Vec::new();
    if udp {
        let addr = peers.address.ok_or_else(|| BetweenError::NoAddress {
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
        let (near, far) = peers
            .facing
            .clone()
            .ok_or_else(|| BetweenError::NoSegment {
                lab: lab(),
                from: from.into(),
                to: to.into(),
            })?;
        let mac = interface_mac(node_command, to, &far)?;
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

/// Runs the sweeps between `peers`: starts the echo server of each of `legs` in the `to`
/// node (bound by `bound_ns`, as `exe` runs it) and tells `on_echo` once it serves, runs the
/// sweep `sweep` (see [`sweep_argv`]) in the `from` node, then stops the echo servers,
/// whatever happened.
pub fn run(
    node_command: NodeCommand<'_>,
    peers: &Peers<'_>,
    (exe, legs, bound_ns): (&str, &[Leg], u64),
    sweep: &[String],
    on_echo: &mut dyn FnMut(&Leg),
) -> Result<(), BetweenError> {
    let (from, to) = (peers.from, peers.to);
    let mut echoes = Vec::with_capacity(legs.len());
    for leg in legs {
        echoes.push(start_echo(node_command, to, &leg.echo_argv(exe, bound_ns))?);
        on_echo(leg);
    }
    let status = node_command(from, sweep)
        .map_err(BetweenError::Node)?
        .status()
        .map_err(io_err(format!("running the sweep in node `{from}`")))?;
    drop(echoes);
    if status.success() {
        Ok(())
    } else {
        Err(BetweenError::Failed {
            what: format!("the sweep in node `{from}` failed"),
            detail: status.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nodes `a` and `b` of lab `t`, `b` at 10.0.0.2, on no common segment.
    fn peers() -> Peers<'static> {
        Peers {
            lab: "t",
            from: "a",
            to: "b",
            address: Some("10.0.0.2".parse().unwrap()),
            facing: None,
        }
    }

    #[test]
    fn legs_name_their_echo_and_missing_paths_are_errors() {
        let never = |_: &str, _: &[String]| -> Result<Command, Box<dyn Error + Send + Sync>> {
            panic!("no command runs for UDP")
        };
        let peers = peers();
        let legs = legs(&peers, (true, false), 7777, &never).unwrap();
        assert_eq!(
            legs[0].target,
            Endpoint::Udp("10.0.0.2:7777".parse().unwrap())
        );
        assert_eq!(legs[0].echo_args, ["--listen", "10.0.0.2:7777"]);
        let e = super::legs(&peers, (false, true), 7777, &never).unwrap_err();
        assert!(e.to_string().contains("share no link or LAN"), "{e}");
        let nowhere = Peers {
            address: None,
            ..peers
        };
        let e = super::legs(&nowhere, (true, false), 7777, &never).unwrap_err();
        assert_eq!(
            e.to_string(),
            "lab `t`: no address of node `b` (or no node `a` or `b`)"
        );
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

    #[test]
    fn a_run_serves_each_leg_then_sweeps_and_says_how_the_sweep_ended() {
        let calls = std::cell::RefCell::new(Vec::new());
        // The echo says it serves, as `rtemu lab echo` does, and waits to be killed; the
        // sweep ends as its last word says.
        let node_command = |node: &str, argv: &[String]| {
            calls.borrow_mut().push((node.to_owned(), argv.to_vec()));
            let script = if argv.get(1).is_some_and(|a| a == "lab") {
                "echo echoing >&2; exec sleep 30".to_owned()
            } else {
                format!("exit {}", argv.last().map_or("0", |a| a.as_str()))
            };
            let mut cmd = Command::new("sh");
            cmd.args(["-c", &script]);
            Ok::<_, Box<dyn Error + Send + Sync>>(cmd)
        };
        let peers = peers();
        let legs = legs(&peers, (true, false), 7777, &node_command).unwrap();
        let mut served = Vec::new();
        let mut on_echo = |leg: &Leg| served.push(leg.description.clone());
        run(
            &node_command,
            &peers,
            ("rtemu", &legs, 5),
            &["0".into()],
            &mut on_echo,
        )
        .unwrap();
        assert_eq!(served, ["from node `a` to node `b` at 10.0.0.2:7777"]);
        let calls = calls.take();
        assert_eq!(calls[0].0, "b");
        assert_eq!(
            calls[0].1,
            [
                "rtemu",
                "lab",
                "echo",
                "--listen",
                "10.0.0.2:7777",
                "--duration",
                "5ns"
            ]
        );
        assert_eq!(calls[1], ("a".to_owned(), vec!["0".to_owned()]));
        let e = run(
            &node_command,
            &peers,
            ("rtemu", &legs, 5),
            &["3".into()],
            &mut |_| {},
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "the sweep in node `a` failed: exit status: 3"
        );
    }
}
