//! The host interfaces handed to nodes: each to one node, moved or shared through macvlan, with
//! the addresses the file gives it.

use std::collections::BTreeMap;

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use toml::Spanned;

use super::{Draft, Validator};
use crate::error::SpecError;
use crate::spec::FileSpec;
use crate::topology::{valid_ifname, ExternalMode, Node, SegmentKind, MAX_IFNAME};

impl Validator<'_> {
    /// The `[[externals]]`, in the file's order.
    pub(super) fn externals(
        &mut self,
        spec: &FileSpec,
        nodes: &[Node],
        node_names: &BTreeMap<String, usize>,
    ) -> Result<Vec<Draft>, SpecError> {
        let mut drafts: Vec<Draft> = Vec::new();
        let mut hosts: BTreeMap<String, String> = BTreeMap::new();
        for ext in &spec.externals {
            let mut text = ext.node.get_ref().clone();
            if let Some(i) = &ext.ifname {
                text = format!("{text}:{}", i.get_ref());
            }
            let mut member = self.member(&Spanned::new(ext.node.span(), text), node_names)?;
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
        Ok(drafts)
    }
}
