//! What a round-trip run was asked for, checked before anything starts: which protocols run
//! against the echo servers named ([`Protocol::choose`]), and the sweeps of the sizes and
//! probes asked for ([`Probes`]).

use std::net::SocketAddr;

use super::{total_sizes, Echo, Endpoint, Mac, RttConfig, RttError};

/// The round trips a run measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// UDP datagrams to a UDP echo.
    Udp,
    /// Raw Ethernet frames to a raw echo.
    Raw,
    /// UDP, then raw Ethernet, reported side by side.
    Both,
}

/// The echo servers a command names: a UDP one (`--to ADDR:PORT`), a raw one (`--raw IFACE
/// --peer MAC`), or a lab whose nodes give both (`--from`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Named {
    /// A UDP echo is named.
    pub udp: bool,
    /// A raw echo is named.
    pub raw: bool,
    /// The run is between two nodes of a lab, which find their echo servers themselves.
    pub in_lab: bool,
}

/// Protocols that do not fit the echo servers named, or sizes a protocol cannot sweep.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// A raw echo named for a UDP run.
    #[error(
        "--raw names a raw Ethernet echo, which --protocol udp does not measure: add \
         --protocol both, or leave out --raw"
    )]
    RawUnused,
    /// A raw run with no raw echo named (the protocol's name).
    #[error(
        "--protocol {0} needs the raw echo's interface and MAC address: add --raw IFACE --peer \
         MAC (--to ADDR:PORT names a UDP echo only); between two nodes of a lab, --lab LAB \
         --from A --to B finds them"
    )]
    NoRawEcho(&'static str),
    /// A UDP echo named for a raw run.
    #[error(
        "--to names a UDP echo, which a raw Ethernet run does not measure: add --protocol \
         both, or leave out --to"
    )]
    UdpUnused,
    /// Sizes one protocol of several cannot sweep: each reads them in its own unit.
    #[error(
        "--min-size, --max-size and --step apply to each protocol in its own unit (UDP \
         payload, Ethernet frame)"
    )]
    SizesPerProtocol(#[source] RttError),
    /// Sizes the one protocol cannot sweep.
    #[error(transparent)]
    Sizes(RttError),
    /// A UDP echo that is no socket address (a lab node's name needs `--from`).
    #[error("--to {0}: expected ADDR:PORT (a node name needs --from)")]
    To(String, #[source] std::net::AddrParseError),
    /// The echo server for the run could not start.
    #[error(transparent)]
    Echo(RttError),
}

impl Protocol {
    /// Whether a UDP sweep runs.
    pub fn udp(self) -> bool {
        matches!(self, Protocol::Udp | Protocol::Both)
    }

    /// Whether a raw Ethernet sweep runs.
    pub fn raw(self) -> bool {
        matches!(self, Protocol::Raw | Protocol::Both)
    }

    /// `udp`, `raw` or `both`, as the command line spells it.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Udp => "udp",
            Protocol::Raw => "raw",
            Protocol::Both => "both",
        }
    }

    /// The protocols to run: `asked`, else raw when a raw echo is named, else UDP. An echo
    /// named that they would not use is refused rather than ignored, and raw needs its echo
    /// named (a lab finds both).
    pub fn choose(asked: Option<Protocol>, named: Named) -> Result<Protocol, PlanError> {
        let protocol = asked.unwrap_or(if named.raw {
            Protocol::Raw
        } else {
            Protocol::Udp
        });
        if !protocol.raw() && named.raw {
            return Err(PlanError::RawUnused);
        }
        if protocol.raw() && !named.in_lab && !named.raw {
            return Err(PlanError::NoRawEcho(protocol.name()));
        }
        if !protocol.udp() && !named.in_lab && named.udp {
            return Err(PlanError::UdpUnused);
        }
        Ok(protocol)
    }
}

/// The sweeps' sizes as asked (each `None`: the protocol's default) and their probes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Probes {
    /// Smallest size, bytes, in the protocol's own unit.
    pub min_size: Option<usize>,
    /// Largest size, bytes.
    pub max_size: Option<usize>,
    /// Size increment, bytes.
    pub step: Option<usize>,
    /// Measured probes per size.
    pub count: u64,
    /// Discarded probes before each size.
    pub warmup: u64,
    /// How long each probe waits for its reply, ns.
    pub timeout_ns: u64,
}

impl Probes {
    /// The sweep towards `target`, its sizes defaulting to its protocol's: UDP payloads of 16
    /// to 1472 bytes by 182, raw frames of 64 to 1514 by 145 (nine and eleven sizes).
    pub fn config(&self, target: Endpoint) -> RttConfig {
        let (min, max, step) = match target {
            Endpoint::Udp(_) => (16, 1472, 182),
            Endpoint::Raw { .. } => (64, 1514, 145),
        };
        RttConfig {
            target,
            min_size: self.min_size.unwrap_or(min),
            max_size: self.max_size.unwrap_or(max),
            step: self.step.unwrap_or(step),
            count: self.count as usize,
            warmup: self.warmup as usize,
            timeout_ns: self.timeout_ns,
        }
    }

    /// The sweeps towards `targets`, in order, and how many sizes they measure in all; an
    /// error for sizes one of them cannot sweep.
    pub fn sweeps(
        &self,
        targets: impl IntoIterator<Item = Endpoint>,
    ) -> Result<(Vec<RttConfig>, usize), PlanError> {
        let configs: Vec<RttConfig> = targets.into_iter().map(|t| self.config(t)).collect();
        match total_sizes(&configs) {
            Ok(sizes) => Ok((configs, sizes)),
            Err(e) if configs.len() > 1 => Err(PlanError::SizesPerProtocol(e)),
            Err(e) => Err(PlanError::Sizes(e)),
        }
    }

    /// How long echo servers must serve sweeps of `sizes` sizes at most: every probe waiting
    /// its whole timeout, plus a minute.
    pub fn echo_bound_ns(&self, sizes: usize) -> u64 {
        (sizes as u64)
            .saturating_mul(self.count + self.warmup)
            .saturating_mul(self.timeout_ns)
            .saturating_add(60_000_000_000)
    }
}

/// The longest an echo started for a run on this host may outlive it by mistake.
const LOCAL_ECHO_BOUND_NS: u64 = 600_000_000_000;

/// Where a run from this host sends its probes, UDP first: to `to`, else to an echo server
/// started on loopback for the run (stopped when this is dropped); raw frames to the echo at
/// `raw` (interface and MAC address).
#[derive(Debug)]
pub struct Here {
    local: Option<Echo>,
    /// The echo servers, in the order the sweeps run.
    pub targets: Vec<Endpoint>,
}

impl Here {
    /// The targets of `protocol`, which [`Protocol::choose`] made sure are named: `to` is
    /// the UDP echo's address, as given.
    pub fn start(
        protocol: Protocol,
        to: Option<&str>,
        raw: Option<(String, Mac)>,
    ) -> Result<Here, PlanError> {
        let to: Option<SocketAddr> = to
            .map(|to| to.parse().map_err(|e| PlanError::To(to.to_owned(), e)))
            .transpose()?;
        let local = match (protocol.udp(), to) {
            (true, None) => Some(
                Echo::udp(SocketAddr::from(([127, 0, 0, 1], 0)), LOCAL_ECHO_BOUND_NS)
                    .map_err(PlanError::Echo)?,
            ),
            _ => None,
        };
        let udp = to
            .map(Endpoint::Udp)
            .or_else(|| local.as_ref().map(|echo| echo.local().clone()))
            .filter(|_| protocol.udp());
        let raw = raw.filter(|_| protocol.raw());
        let raw = raw.map(|(interface, mac)| Endpoint::Raw { interface, mac });
        Ok(Here {
            local,
            targets: udp.into_iter().chain(raw).collect(),
        })
    }

    /// Whether the UDP echo runs on loopback for the run.
    pub fn local_echo(&self) -> bool {
        self.local.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAB: Named = Named {
        udp: true,
        raw: false,
        in_lab: true,
    };

    /// The protocols `asked` and the echoes named choose, or the error's message.
    fn choose(asked: Option<Protocol>, udp: bool, raw: bool) -> Result<Protocol, String> {
        let named = Named {
            udp,
            raw,
            in_lab: false,
        };
        Protocol::choose(asked, named).map_err(|e| e.to_string())
    }

    #[test]
    fn protocols_default_to_udp_and_need_their_echo() {
        use Protocol::{Both, Raw, Udp};
        for (asked, udp, raw, expected) in [
            (None, false, false, Udp),
            (None, true, false, Udp),
            (None, false, true, Raw),
            (Some(Raw), false, true, Raw),
            (Some(Both), false, true, Both),
            (Some(Both), true, true, Both),
        ] {
            assert_eq!(
                choose(asked, udp, raw),
                Ok(expected),
                "{asked:?} {udp} {raw}"
            );
        }
        for asked in [None, Some(Udp), Some(Raw), Some(Both)] {
            let expected = asked.unwrap_or(Udp);
            assert_eq!(Protocol::choose(asked, LAB).ok(), Some(expected));
        }
        for (asked, udp, raw, says) in [
            (Some(Raw), false, false, "add --raw IFACE --peer MAC"),
            (
                Some(Raw),
                true,
                false,
                "--to ADDR:PORT names a UDP echo only",
            ),
            (
                Some(Both),
                false,
                false,
                "--lab LAB --from A --to B finds them",
            ),
            (None, true, true, "leave out --to"),
            (Some(Udp), false, true, "leave out --raw"),
        ] {
            let err = choose(asked, udp, raw).unwrap_err();
            assert!(err.contains(says), "{asked:?} {udp} {raw}: {err}");
        }
    }

    #[test]
    fn sizes_default_to_each_protocols_own_and_are_checked_per_protocol() {
        let probes = Probes {
            count: 5,
            warmup: 1,
            timeout_ns: 1_000_000,
            ..Probes::default()
        };
        let raw = Endpoint::Raw {
            interface: "eth0".into(),
            mac: "02:00:5e:10:00:01".parse().unwrap(),
        };
        let udp = Endpoint::Udp("127.0.0.1:9".parse().unwrap());
        let sizes = probes.config(raw.clone()).sizes().unwrap();
        assert_eq!((sizes.len(), sizes[0], sizes[10]), (11, 64, 1514));
        let sizes = probes.config(udp.clone()).sizes().unwrap();
        assert_eq!((sizes.len(), sizes[0], sizes[8]), (9, 16, 1472));
        let (configs, total) = probes.sweeps([udp.clone(), raw.clone()]).unwrap();
        assert_eq!((configs.len(), total), (2, 20));
        assert_eq!(configs[0].count, 5);

        // 20 bytes is a UDP payload but no Ethernet frame.
        let small = Probes {
            min_size: Some(20),
            ..probes.clone()
        };
        assert_eq!(small.sweeps([udp.clone()]).unwrap().1, 8);
        let one = small.sweeps([raw.clone()]).unwrap_err().to_string();
        assert!(one.starts_with("Ethernet frame sizes 20..1514"), "{one}");
        let both = small.sweeps([udp, raw]).unwrap_err();
        assert!(matches!(both, PlanError::SizesPerProtocol(_)), "{both}");
    }

    #[test]
    fn echo_servers_outlast_the_longest_sweep_by_a_minute() {
        let probes = Probes {
            count: 10,
            warmup: 2,
            timeout_ns: 1_000_000_000,
            ..Probes::default()
        };
        assert_eq!(probes.echo_bound_ns(3), (3 * 12 + 60) * 1_000_000_000);
        let huge = Probes {
            count: u64::MAX / 2,
            ..probes
        };
        assert_eq!(huge.echo_bound_ns(9), u64::MAX);
    }

    #[test]
    fn a_run_here_starts_a_loopback_echo_only_when_no_udp_echo_is_named() {
        let here = Here::start(Protocol::Udp, None, None).unwrap();
        assert!(here.local_echo());
        assert!(matches!(&here.targets[..], [Endpoint::Udp(a)] if a.ip().is_loopback()));
        let mac: Mac = "02:00:5e:10:00:01".parse().unwrap();
        let raw = Some(("eth0".to_owned(), mac));
        let both = Here::start(Protocol::Both, Some("192.0.2.1:7"), raw.clone()).unwrap();
        assert!(!both.local_echo());
        assert_eq!(
            both.targets[0],
            Endpoint::Udp("192.0.2.1:7".parse().unwrap())
        );
        let e = Here::start(Protocol::Udp, Some("b"), None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--to b: expected ADDR:PORT (a node name needs --from)"
        );
        assert!(matches!(&both.targets[1], Endpoint::Raw { interface, .. } if interface == "eth0"));
        let raw_only = Here::start(Protocol::Raw, None, raw).unwrap();
        assert!(!raw_only.local_echo() && raw_only.targets.len() == 1);
    }
}
