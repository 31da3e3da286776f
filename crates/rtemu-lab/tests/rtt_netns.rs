//! `rtemu lab rtt` across a pair of network namespaces joined by a veth pair, as between two
//! nodes of a lab, over UDP and over raw Ethernet. Needs root: skips with a printed reason without it, unless
//! `RTEMU_REQUIRE_ROOT=1` (CI), where it fails instead. Everything it creates is named
//! `rtemu-lt<pid>…` and removed when the test ends, whatever happens.

use std::fs::File;
use std::os::fd::AsFd;
use std::process::Command;

use rtemu_lab::rtt::{self, Echo, Endpoint, RttConfig, SizeResult};

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

/// Two namespaces joined by a veth pair (`va` in `a`, `vb` in `b`), removed on drop.
struct Pair {
    a: String,
    b: String,
    va: String,
    vb: String,
}

impl Pair {
    /// A pair named after this process and `tag` (one letter per test: tests run in
    /// parallel).
    fn create(tag: char) -> Result<Pair, String> {
        let pid = std::process::id();
        let pair = Pair {
            a: format!("rtemu-lt{pid}{tag}-a"),
            b: format!("rtemu-lt{pid}{tag}-b"),
            va: format!("rlt{pid}{tag}a"),
            vb: format!("rlt{pid}{tag}b"),
        };
        // Created first and removed by Drop, so a failure half-way leaves nothing behind.
        ip(&["netns", "add", &pair.a])?;
        ip(&["netns", "add", &pair.b])?;
        let (va, vb) = (&pair.va, &pair.vb);
        ip(&[
            "link", "add", va, "netns", &pair.a, "type", "veth", "peer", "name", vb, "netns",
            &pair.b,
        ])?;
        // Addresses exist only inside these two namespaces.
        for (ns, dev, addr) in [
            (&pair.a, va, "10.254.77.1/30"),
            (&pair.b, vb, "10.254.77.2/30"),
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
    rtemu_sys::netns::enter(file.as_fd())
}

/// Whether the test may run: root, or a printed reason to skip (a failure under
/// `RTEMU_REQUIRE_ROOT=1`).
fn root_or_skip(test: &str) -> bool {
    rtemu_testutil::root_or_skip(test, "creating namespaces")
}

/// Runs `f` on a thread inside namespace `ns`.
fn inside<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let ns = ns.to_owned();
    std::thread::spawn(move || {
        enter(&ns).unwrap();
        f()
    })
    .join()
    .unwrap()
}

/// Every probe came back once, and the kernel's round trip, where the veth driver stamped it,
/// lies within the application's.
fn check_complete(results: &[SizeResult], count: u64) {
    assert_eq!(results.len(), 3);
    for r in results {
        // A veth pair loses nothing; a reply later than 1 s would show as reordered.
        assert_eq!(r.lost, 0, "{r:?}");
        assert_eq!(r.received + r.reordered, count, "{r:?}");
        assert_eq!(r.duplicates, 0, "{r:?}");
        assert!(r.rtt_ns.min_ns > 0);
        let k = r.kernel_rtt_ns.expect("veth takes software stamps");
        let slack = 1_000 + r.rtt_ns.max_ns / 1_000;
        assert!(k.n > 0 && k.min_ns > 0, "{r:?}");
        assert!(k.min_ns <= r.rtt_ns.min_ns + slack, "{r:?}");
        assert!(k.max_ns <= r.rtt_ns.max_ns + slack, "{r:?}");
    }
}

#[test]
fn round_trips_between_two_namespaces() {
    if !root_or_skip("round_trips_between_two_namespaces") {
        return;
    }
    let pair = Pair::create('u').unwrap();
    let echo = inside(&pair.a, || {
        Echo::udp("10.254.77.1:0".parse().unwrap(), 60_000_000_000).unwrap()
    });
    let Endpoint::Udp(target) = echo.local().clone() else {
        panic!("a UDP echo has a UDP address");
    };
    let sweep = inside(&pair.b, move || {
        let config = RttConfig {
            target: Endpoint::Udp(target),
            min_size: 16,
            max_size: 1472,
            step: 728,
            count: 50,
            warmup: 10,
            timeout_ns: 1_000_000_000,
        };
        rtt::run(&config, &mut |_| {}).unwrap()
    });
    check_complete(&sweep.results, 50);
    assert_eq!(echo.stop().unwrap(), 3 * 60);
    drop(pair);
}

/// The paper's raw protocol: Ethernet frames of the local experimental EtherType from one
/// namespace's veth end to the other's, echoed with the addresses swapped.
#[test]
fn raw_ethernet_round_trips_between_two_namespaces() {
    if !root_or_skip("raw_ethernet_round_trips_between_two_namespaces") {
        return;
    }
    let pair = Pair::create('r').unwrap();
    let va = pair.va.clone();
    let echo = inside(&pair.a, move || Echo::raw(&va, 60_000_000_000).unwrap());
    let Endpoint::Raw { mac, .. } = echo.local().clone() else {
        panic!("a raw echo has an interface and a MAC");
    };
    let vb = pair.vb.clone();
    let (sweep, wrong_interface) = inside(&pair.b, move || {
        let config = RttConfig {
            target: Endpoint::Raw { interface: vb, mac },
            min_size: 60,
            max_size: 1514,
            step: 727,
            count: 50,
            warmup: 10,
            timeout_ns: 1_000_000_000,
        };
        let sweep = rtt::run(&config, &mut |_| {}).unwrap();
        // The echo's interface is in the other namespace: not here.
        let wrong = RttConfig {
            target: Endpoint::Raw {
                interface: "rtemu-none0".into(),
                mac,
            },
            ..config
        };
        (
            sweep,
            rtt::run(&wrong, &mut |_| {}).unwrap_err().to_string(),
        )
    });
    assert_eq!(
        sweep.results.iter().map(|r| r.size).collect::<Vec<_>>(),
        [60, 787, 1514]
    );
    check_complete(&sweep.results, 50);
    assert!(
        wrong_interface.contains("no interface `rtemu-none0`"),
        "{wrong_interface}"
    );
    assert_eq!(echo.stop().unwrap(), 3 * 60);
    // A probe to a station that is not there is lost, not mistaken for a reply.
    let vb = pair.vb.clone();
    let lost = inside(&pair.b, move || {
        let config = RttConfig {
            target: Endpoint::Raw { interface: vb, mac },
            min_size: 60,
            max_size: 60,
            step: 1,
            count: 3,
            warmup: 0,
            timeout_ns: 50_000_000,
        };
        rtt::run(&config, &mut |_| {}).unwrap()
    });
    assert_eq!((lost.results[0].lost, lost.results[0].received), (3, 0));
    drop(pair);
}
