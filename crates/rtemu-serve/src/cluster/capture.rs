//! `rtemu capture --lab LAB` of a lab across hosts: each host's agent captures the asked
//! interfaces it holds, all at once, and the captures merge into one pcapng file (interfaces
//! renumbered, packets in timestamp order: each host stamps its own packets with its own
//! clock, so across hosts the order is as good as the hosts' clocks agree).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use rtemu_topo::pcapng::{self, Capture};

use super::spread::{ask_each, Spread};

/// How long past its duration (or, with a count alone, at all) an agent's capture may take.
const SLACK: Duration = Duration::from_secs(30);

/// The longest capture the agents take (their own limit).
const MAX_DURATION: Duration = Duration::from_secs(3600);

/// Captures the interfaces `targets` name (`NODE:IF`, or a link's name for both its ends;
/// none: every interface) of `spread` into the pcapng file `path`, written whole, until
/// `duration` passes or `count` packets were seen on each host (one of them is needed: every
/// host's capture must end by itself); `on_start` is told the interfaces (`NODE:IF`) first.
/// Returns the packets written (with `count`: the first `count` by time).
pub fn capture_to_file(
    spread: &Spread,
    targets: &[String],
    path: &Path,
    (duration, count): (Option<Duration>, Option<u64>),
    on_start: impl FnOnce(&[String]),
) -> Result<u64> {
    if duration.is_none() && count.is_none() {
        bail!(
            "lab `{}` runs across hosts: give --duration or --count, so each host's capture ends \
             by itself",
            spread.lab
        );
    }
    if duration.is_some_and(|d| d > MAX_DURATION) {
        bail!("--duration is out of range for a lab across hosts: give at most 3600 seconds");
    }
    let wanted = rtemu_topo::capture::resolve_targets(&spread.state(), targets)?;
    let mut by_host: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (node, ifname) in &wanted {
        let host = spread.host_of(node).unwrap_or_default();
        by_host
            .entry(host)
            .or_default()
            .push(format!("{node}:{ifname}"));
    }
    let agents = by_host
        .keys()
        .map(|h| spread.agent(h))
        .collect::<Result<Vec<_>>>()?;
    let names: Vec<String> = by_host.values().flatten().cloned().collect();
    on_start(&names);
    let timeout = duration.unwrap_or(MAX_DURATION) + SLACK;
    let captures = ask_each(&agents, |a| -> Result<Capture> {
        let mut query = form_urlencoded::Serializer::new(String::new());
        for t in &by_host[a.host.name.as_str()] {
            query.append_pair("target", t);
        }
        if let Some(d) = duration {
            query.append_pair("duration", &d.as_secs_f64().to_string());
        }
        if let Some(c) = count {
            query.append_pair("count", &c.to_string());
        }
        let path = format!("/v1/labs/{}/capture?{}", spread.lab, query.finish());
        let reply = a.ok(a.reply("GET", &path, None, timeout)?)?;
        pcapng::read(&reply.body)
            .with_context(|| format!("host `{}`: its agent's capture", a.host.name))
    });
    let captures = captures.into_iter().collect::<Result<Vec<_>>>()?;
    let mut file = rtemu_report::output::Output::create(path, &[])?;
    let written = pcapng::merge(captures, &mut file, count)
        .with_context(|| format!("writing {}", path.display()))?;
    file.commit()?;
    Ok(written)
}
