//! The names rtemu gives what it makes for a lab: its namespaces, the engine's interfaces and
//! the ownership mark. A module of their own, below [`crate::lab`], [`crate::part`],
//! [`crate::state`] and [`crate::launch`], which all name the same objects.

/// The namespace of node `node` in lab `lab`: `rtemu-<lab>.<node>`. Lab and node names hold no
/// `.`, so no two labs' nodes ever share a name (with a `-` they did: lab `sxk` node `a-b` and
/// lab `sxk-a` node `b`).
pub fn node_netns(lab: &str, node: &str) -> String {
    format!("rtemu-{lab}.{node}")
}

/// The namespace an rtemu from before [`node_netns`] gave node `node` of lab `lab`, which a
/// state file written then names: `down` still takes such a lab down (its namespaces carry the
/// lab's mark, so another lab's of the same name is never touched).
pub fn legacy_node_netns(lab: &str, node: &str) -> String {
    format!("rtemu-{lab}-{node}")
}

/// The lab's own namespace, holding the LAN bridges.
pub fn lab_netns(lab: &str) -> String {
    format!("rtemu-{lab}")
}

/// The cpuset of lab `lab`'s programs ([`crate::cpuset`]): `rtemu-<lab>`, and for the part of
/// a lab across hosts on host `host`, `rtemu-<lab>@<host>`: hosts that are namespaces of one
/// machine (`rtemu-bench cluster`) share its cgroups, and a name holds no `@`.
pub fn lab_cpuset(lab: &str, host: Option<&str>) -> String {
    match host {
        None => lab_netns(lab),
        Some(host) => format!("rtemu-{lab}@{host}"),
    }
}

/// The engine's two interfaces of segment `index` (an impaired link), in the lab namespace:
/// the one facing the link's first node and the one facing its second.
pub fn engine_ends(index: usize) -> [String; 2] {
    [format!("e{index}a"), format!("e{index}b")]
}

/// The ownership mark (interface alias) of every interface and namespace rtemu creates in lab
/// `lab`.
pub fn ownership_mark(lab: &str) -> String {
    format!("rtemu:{lab}")
}
