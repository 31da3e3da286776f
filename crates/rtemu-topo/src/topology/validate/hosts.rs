//! The machines of a multi-host lab, and which of them each node and each link's engine runs
//! on.

use std::net::IpAddr;

use toml::Spanned;

use super::Validator;
use crate::error::SpecError;
use crate::spec::FileSpec;
use crate::topology::{Host, Node, Segment, DEFAULT_AGENT_PORT, MAX_NODE_NAME};

impl Validator<'_> {
    /// `[hosts]`, checked: valid names, addresses and ports, no two agents at one address.
    pub(super) fn hosts(&self, spec: &FileSpec) -> Result<Vec<Host>, SpecError> {
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
    pub(super) fn host_of(
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
    pub(super) fn place(
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
}
