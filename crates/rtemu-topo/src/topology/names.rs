//! Which names rtemu accepts for labs, nodes, links, LANs and interfaces.

use super::MAX_IFNAME;
#[cfg(doc)]
use super::{MAX_LAB_NAME, MAX_NODE_NAME};

/// Whether `name` is a valid lab (`max` = [`MAX_LAB_NAME`]) or node, link or LAN name
/// ([`MAX_NODE_NAME`]): 1 to `max` characters a-z, 0-9 and '-', starting with a letter and not
/// ending with '-', so it is a valid host name and fits namespace and file names.
pub fn valid_name(name: &str, max: usize) -> bool {
    name.len() <= max
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && !name.ends_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// Whether `name` is an interface name rtemu accepts: 1 to [`MAX_IFNAME`] characters a-z, A-Z,
/// 0-9, '.', '_' and '-', and not `.` or `..` (a subset of what the kernel takes, safe in
/// `/sys/class/net` paths and in `ip` commands).
pub fn valid_ifname(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_IFNAME
        && name != "."
        && name != ".."
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}
