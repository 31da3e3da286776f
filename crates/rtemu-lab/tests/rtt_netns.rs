//! `rtemu lab rtt` across a pair of network namespaces joined by a veth pair, as between two
//! nodes of a lab. Needs root: skips with a printed reason without it, unless
//! `RTEMU_REQUIRE_ROOT=1` (CI), where it fails instead. Everything it creates is named
//! `rtemu-lt<pid>…` and removed when the test ends, whatever happens.
// The only unsafe: entering a namespace with setns(2), which std does not offer.
#![allow(unsafe_code)]

use std::fs::File;
use std::io::Write as _;
use std::os::fd::AsRawFd;
use std::process::Command;

use rtemu_lab::rtt::{self, Echo, RttConfig};

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("running ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Two namespaces joined by a veth pair, removed on drop.
struct Pair {
    a: String,
    b: String,
}

impl Pair {
    fn create() -> Result<Pair, String> {
        let pid = std::process::id();
        let pair = Pair {
            a: format!("rtemu-lt{pid}-a"),
            b: format!("rtemu-lt{pid}-b"),
        };
        // Created first and removed by Drop, so a failure half-way leaves nothing behind.
        ip(&["netns", "add", &pair.a])?;
        ip(&["netns", "add", &pair.b])?;
        let (va, vb) = (format!("rlt{pid}a"), format!("rlt{pid}b"));
        ip(&[
            "link", "add", &va, "netns", &pair.a, "type", "veth", "peer", "name", &vb, "netns",
            &pair.b,
        ])?;
        // Addresses exist only inside these two namespaces.
        for (ns, dev, addr) in [
            (&pair.a, &va, "10.254.77.1/30"),
            (&pair.b, &vb, "10.254.77.2/30"),
        ] {
            ip(&["-n", ns, "addr", "add", addr, "dev", dev])?;
            ip(&["-n", ns, "link", "set", dev, "up"])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        Ok(pair)
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        // Deleting a namespace deletes its end of the veth pair, and with it the other end.
        let _ = ip(&["netns", "del", &self.a]);
        let _ = ip(&["netns", "del", &self.b]);
    }
}

/// Moves the calling thread into the named network namespace.
fn enter(ns: &str) -> std::io::Result<()> {
    let file = File::open(format!("/run/netns/{ns}"))?;
    // SAFETY: `file` is an open namespace file for the whole call; CLONE_NEWNET asks setns to
    // check that it is a network namespace. It changes only the calling thread.
    if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[test]
fn round_trips_between_two_namespaces() {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        assert!(
            std::env::var("RTEMU_REQUIRE_ROOT").as_deref() != Ok("1"),
            "not root but RTEMU_REQUIRE_ROOT=1"
        );
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED round_trips_between_two_namespaces: creating namespaces needs root"
        );
        return;
    }
    let pair = Pair::create().unwrap();
    let a = pair.a.clone();
    let echo = std::thread::spawn(move || {
        enter(&a).unwrap();
        Echo::start("10.254.77.1:0".parse().unwrap(), 60_000_000_000).unwrap()
    })
    .join()
    .unwrap();
    let target = std::net::SocketAddr::new("10.254.77.1".parse().unwrap(), echo.addr().port());
    let b = pair.b.clone();
    let results = std::thread::spawn(move || {
        enter(&b).unwrap();
        let config = RttConfig {
            target,
            min_size: 16,
            max_size: 1472,
            step: 728,
            count: 50,
            warmup: 10,
            timeout_ns: 1_000_000_000,
        };
        rtt::run(&config, &mut |_| {}).unwrap()
    })
    .join()
    .unwrap();
    assert_eq!(results.len(), 3);
    for r in &results {
        // A veth pair loses nothing; a reply later than 1 s would show as reordered.
        assert_eq!(r.lost, 0, "{r:?}");
        assert_eq!(r.received + r.reordered, 50, "{r:?}");
        assert_eq!(r.duplicates, 0, "{r:?}");
        assert!(r.rtt_ns.min_ns > 0);
    }
    assert_eq!(echo.stop().unwrap(), 3 * 60);
    drop(pair);
}
