//! The file checked in passes, each named for what it checks, in the order a user's mistakes
//! are reported: the lab-wide [`settings`], the [`hosts`], the [`nodes`], the links and LANs
//! ([`segments`], with each link's [`impairment`]), the [`externals`], then the
//! [`addresses`] every interface gets and where each node runs ([`hosts`] again). What only
//! the files a topology names show comes last, apart ([`files`]).

mod addresses;
mod externals;
mod files;
mod hosts;
mod impairment;
mod nodes;
mod segments;
mod settings;

use std::collections::BTreeMap;
use std::ops::Range;

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use toml::Spanned;

use super::impairment::Impairment;
use super::model::{Routing, SegmentKind, Topology};
use super::{valid_name, MAX_LAB_NAME};
use crate::claims::Claims;
use crate::error::SpecError;
use crate::spec::FileSpec;

impl Topology {
    /// Reads and validates `source`: the topology, and the validator that knows where each
    /// value is for the passes that need the file's directory ([`files`]).
    pub(super) fn validate<'a>(
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
}

/// What a subnet or address in use belongs to, for overlap messages.
pub(super) struct Validator<'a> {
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

impl Validator<'_> {
    pub(super) fn err(&self, span: Range<usize>, message: impl Into<String>) -> SpecError {
        SpecError::at(self.file, self.source, span, message.into())
    }

    pub(super) fn line(&self, span: &Range<usize>) -> usize {
        self.lines.line(span.start)
    }

    /// Every pass in turn: the first mistake found is the one reported.
    fn run(&mut self, spec: FileSpec) -> Result<Topology, SpecError> {
        let lab = self.name(&spec.lab, "lab name", MAX_LAB_NAME)?;
        let routing = self.routing(&spec)?;
        let neighbours = self.neighbours(&spec)?;
        let families = self.families(&spec)?;
        let programs_cpus = self.programs_cpus(&spec)?;
        let default_mtu = spec.mtu.as_ref().map(|m| self.mtu(m)).transpose()?;
        let default_mtu_span = spec.mtu.as_ref().map(|m| m.span());

        let machines = self.hosts(&spec)?;
        let (mut nodes, node_names) = self.nodes(&spec, &machines)?;

        let mut segment_names: BTreeMap<String, usize> = BTreeMap::new();
        let mut drafts = self.links(
            &spec,
            &nodes,
            &node_names,
            (default_mtu, &default_mtu_span),
            &mut segment_names,
        )?;
        drafts.extend(self.lans(
            &spec,
            &nodes,
            &node_names,
            (default_mtu, &default_mtu_span),
            &mut segment_names,
        )?);
        drafts.extend(self.externals(&spec, &nodes, &node_names)?);

        let mut segments = self.finish(drafts, &spec, families, &nodes)?;
        self.place(&spec, &machines, &mut nodes, &mut segments)?;
        if routing == Routing::Static {
            self.route_budget(&spec, &nodes, &segments)?;
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
            programs_cpus,
        })
    }

    /// Names: a lower-case letter, then lower-case letters, digits and `-`, not ending in `-`,
    /// so they are valid host names and fit namespace and file names.
    pub(super) fn name(
        &self,
        name: &Spanned<String>,
        what: &str,
        max: usize,
    ) -> Result<String, SpecError> {
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

    pub(super) fn mtu(&self, mtu: &Spanned<i64>) -> Result<u32, SpecError> {
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
}
