//! The nodes: names, loopback addresses, sysctls, environment, CPU limits, containers and the
//! hosts they are pinned to.

use std::collections::BTreeMap;

use ipnet::IpNet;

use super::Validator;
use crate::container::Container;
use crate::error::SpecError;
use crate::spec::{FileSpec, NodeSpec};
use crate::topology::{Host, Node, MAX_NODE_NAME};

impl Validator<'_> {
    /// The nodes in the file's (name) order, with each name's index.
    pub(super) fn nodes(
        &mut self,
        spec: &FileSpec,
        machines: &[Host],
    ) -> Result<(Vec<Node>, BTreeMap<String, usize>), SpecError> {
        let mut nodes = Vec::new();
        let mut node_names = BTreeMap::new();
        for (name, node) in &spec.nodes {
            let checked = self.name(name, "node name", MAX_NODE_NAME)?;
            node_names.insert(checked.clone(), nodes.len());
            let mut built = self.node(checked, node)?;
            built.host = node
                .host
                .as_ref()
                .map(|h| self.host_of(h, machines, &format!("node `{}`", name.get_ref())))
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
        Ok((nodes, node_names))
    }

    pub(super) fn node(&mut self, name: String, spec: &NodeSpec) -> Result<Node, SpecError> {
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
}
