//! The links and LANs: their names, endpoints or members, MTUs and subnets, before interfaces
//! are named and pool addresses given ([`super::addresses`]).

use std::collections::BTreeMap;
use std::ops::Range;

use toml::Spanned;

use super::{Draft, ImpairedLink, Member, Validator};
use crate::error::SpecError;
use crate::spec::FileSpec;
use crate::topology::{valid_ifname, Node, SegmentKind, MAX_IFNAME, MAX_NODE_NAME};

/// The file's default MTU, if any, and the span that set it.
pub(super) type DefaultMtu<'a> = (Option<u32>, &'a Option<Range<usize>>);

impl Validator<'_> {
    /// The links, in the file's order, each impaired one recorded for [`Validator::check_links`].
    pub(super) fn links(
        &mut self,
        spec: &FileSpec,
        nodes: &[Node],
        node_names: &BTreeMap<String, usize>,
        default_mtu: DefaultMtu<'_>,
        segment_names: &mut BTreeMap<String, usize>,
    ) -> Result<Vec<Draft>, SpecError> {
        let mut drafts: Vec<Draft> = Vec::new();
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
            let a = self.member(&ends[0], node_names)?;
            let b = self.member(&ends[1], node_names)?;
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
            self.unique_segment(segment_names, &name, &span)?;
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
            let (mtu, mtu_span) = self.segment_mtu(link.mtu.as_ref(), default_mtu)?;
            drafts.push(Draft {
                mtu,
                ipv4: self.subnet4(link.ipv4.as_ref(), &name)?,
                ipv6: self.subnet6(link.ipv6.as_ref(), &name)?,
                name,
                kind: SegmentKind::Link {
                    impairment: impairment.map(|(imp, _)| imp),
                },
                members: vec![a, b],
                span,
                mtu_span,
            });
        }
        Ok(drafts)
    }

    /// The LANs, in the file's order.
    pub(super) fn lans(
        &mut self,
        spec: &FileSpec,
        nodes: &[Node],
        node_names: &BTreeMap<String, usize>,
        default_mtu: DefaultMtu<'_>,
        segment_names: &mut BTreeMap<String, usize>,
    ) -> Result<Vec<Draft>, SpecError> {
        let mut drafts: Vec<Draft> = Vec::new();
        for lan in &spec.lans {
            let name = self.name(&lan.name, "LAN name", MAX_NODE_NAME)?;
            self.unique_segment(segment_names, &name, &lan.name.span())?;
            let mut members: Vec<Member> = Vec::new();
            for m in lan.members.get_ref() {
                let member = self.member(m, node_names)?;
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
            let (mtu, mtu_span) = self.segment_mtu(lan.mtu.as_ref(), default_mtu)?;
            drafts.push(Draft {
                mtu,
                ipv4: self.subnet4(lan.ipv4.as_ref(), &name)?,
                ipv6: self.subnet6(lan.ipv6.as_ref(), &name)?,
                name,
                kind: SegmentKind::Lan,
                members,
                span: lan.name.span(),
                mtu_span,
            });
        }
        Ok(drafts)
    }

    /// A segment's MTU and the span that set it: its own `mtu`, else the file's default.
    fn segment_mtu(
        &self,
        own: Option<&Spanned<i64>>,
        (default, default_span): DefaultMtu<'_>,
    ) -> Result<(Option<u32>, Option<Range<usize>>), SpecError> {
        Ok(match own {
            Some(m) => (Some(self.mtu(m)?), Some(m.span())),
            None => (default, default_span.clone()),
        })
    }

    pub(super) fn member(
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

    pub(super) fn unique_segment(
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
}
