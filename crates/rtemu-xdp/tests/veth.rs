//! AF_XDP on a veth pair in a namespace of its own: frames cross both ways through the rings,
//! the program runs in native mode, and it leaves the interface when its owner drops.
//!
//! Needs root; skips with the reason otherwise, unless `RTEMU_REQUIRE_ROOT=1`. The namespace
//! (and with it the veths) is deleted by a guard, also when an assertion fails.

use std::os::fd::AsFd;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use rtemu_xdp::program::{AttachMode, Redirect};
use rtemu_xdp::socket::{RingSizes, Rings, Socket};
use rtemu_xdp::umem::{Chunk, Geometry, Umem};

fn root_or_skip(test: &str) -> bool {
    rtemu_testutil::root_or_skip(test, "network namespaces, AF_XDP sockets, bpf()")
        && rtemu_testutil::program_or_skip(test, "ip", "-V", "iproute2")
}

fn ip(args: &[&str]) -> String {
    let out = Command::new("ip").args(args).output().expect("running ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A namespace holding the veth pair `x0` ═ `x1`, IPv6 off; deleted on drop.
struct Ns(String);

impl Ns {
    fn new() -> Ns {
        static COUNT: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "rtemu-xdp{}-{}",
            std::process::id(),
            COUNT.fetch_add(1, Ordering::Relaxed)
        );
        ip(&["netns", "add", &name]);
        let ns = Ns(name);
        // No IPv6, so the only frames on the pair are the test's own.
        ns.run(|| {
            for conf in ["all", "default"] {
                let path = format!("/proc/sys/net/ipv6/conf/{conf}/disable_ipv6");
                std::fs::write(path, "1").expect("switching IPv6 off");
            }
        });
        ip(&[
            "-n", &ns.0, "link", "add", "x0", "type", "veth", "peer", "name", "x1",
        ]);
        for dev in ["x0", "x1"] {
            ip(&["-n", &ns.0, "link", "set", dev, "up"]);
        }
        ns
    }

    /// Runs `f` on a thread inside the namespace.
    fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        let path = format!("/run/netns/{}", self.0);
        std::thread::scope(|s| {
            s.spawn(|| {
                let ns = std::fs::File::open(&path).expect("opening the namespace");
                rtemu_sys::netns::enter(ns.as_fd()).expect("setns");
                f()
            })
            .join()
            .expect("the namespace thread panicked")
        })
    }

    fn link(&self, dev: &str) -> String {
        ip(&["-n", &self.0, "-d", "link", "show", "dev", dev])
    }
}

impl Drop for Ns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

fn if_index(name: &str) -> u32 {
    rtemu_sys::packet::if_index(name).unwrap_or_else(|e| panic!("no interface {name}: {e}"))
}

/// One interface's AF_XDP end: half the chunks in the fill ring, half free for sending.
struct End {
    umem: Umem,
    free: Vec<Chunk>,
    socket: Socket,
    rings: Rings,
    redirect: Redirect,
}

fn open(dev: &str) -> End {
    let (umem, mut free) = Umem::new(Geometry {
        frame_size: 2048,
        frames: 256,
    })
    .unwrap();
    let sizes = RingSizes {
        fill: 128,
        completion: 128,
        rx: 128,
        tx: 128,
    };
    let ifindex = if_index(dev);
    let (socket, mut rings) = Socket::open(ifindex, 0, &umem, sizes).unwrap();
    for chunk in free.drain(..128) {
        rings.fill.push(chunk).unwrap();
    }
    rings.fill.submit();
    let redirect = Redirect::attach(ifindex, 0, &socket).unwrap();
    End {
        umem,
        free,
        socket,
        rings,
        redirect,
    }
}

impl End {
    fn send(&mut self, frame: &[u8]) {
        let chunk = self.free.pop().expect("a free chunk");
        self.umem.bytes_mut(&chunk)[..frame.len()].copy_from_slice(frame);
        self.rings.tx.push(chunk, frame.len() as u32).unwrap();
        self.rings.tx.submit();
        let end = Instant::now() + Duration::from_secs(1);
        while self.rings.tx.outstanding() > 0 && Instant::now() < end {
            let _ = self.socket.kick_tx();
        }
        assert_eq!(self.rings.tx.outstanding(), 0, "the kernel took the frame");
    }

    fn receive(&mut self) -> Option<Vec<u8>> {
        let end = Instant::now() + Duration::from_secs(1);
        while Instant::now() < end {
            if let Some(f) = self.rings.rx.pop() {
                let bytes = self.umem.bytes(&f.chunk, f.offset, f.len).to_vec();
                self.rings.rx.release();
                self.rings.fill.push(f.chunk).unwrap();
                self.rings.fill.submit();
                return Some(bytes);
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        None
    }

    fn reap(&mut self) -> usize {
        let mut n = 0;
        while let Some(chunk) = self.rings.completion.pop() {
            self.free.push(chunk);
            n += 1;
        }
        self.rings.completion.release();
        n
    }
}

fn frame(id: u8) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 0x99, 2, 0, 0, 0, 0, 0x01, 0x88, 0xb5];
    f.extend((0..50).map(|i| id.wrapping_add(i)));
    f
}

#[test]
fn frames_cross_a_veth_pair_both_ways_through_the_rings() {
    if !root_or_skip("frames_cross_a_veth_pair_both_ways_through_the_rings") {
        return;
    }
    let ns = Ns::new();
    ns.run(|| {
        let mut x0 = open("x0");
        let mut x1 = open("x1");
        assert_eq!(
            x0.redirect.mode(),
            &AttachMode::Native,
            "veth runs XDP natively"
        );
        for id in 0..3 {
            x0.send(&frame(id));
            assert_eq!(x1.receive(), Some(frame(id)));
            x1.send(&frame(id + 100));
            assert_eq!(x0.receive(), Some(frame(id + 100)));
        }
        // The sent chunks come back through the completion ring.
        let end = Instant::now() + Duration::from_secs(1);
        let mut reaped = 0;
        while reaped < 3 && Instant::now() < end {
            reaped += x0.reap();
        }
        assert_eq!(reaped, 3);
        let stats = rtemu_xdp::socket::statistics(std::os::fd::AsFd::as_fd(&x1.socket)).unwrap();
        assert_eq!(stats.rx_dropped + stats.rx_ring_full, 0);
    });
}

#[test]
fn the_program_leaves_the_interface_when_its_owner_drops() {
    if !root_or_skip("the_program_leaves_the_interface_when_its_owner_drops") {
        return;
    }
    let ns = Ns::new();
    let end = ns.run(|| open("x1"));
    assert!(ns.link("x1").contains("prog/xdp"), "{}", ns.link("x1"));
    drop(end);
    assert!(!ns.link("x1").contains("prog/xdp"), "{}", ns.link("x1"));
}
