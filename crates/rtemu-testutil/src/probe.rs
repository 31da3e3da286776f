//! The independent probe of a link's one-way timing, shared by the engine's precision tests and
//! `rtemu-bench precision`.
//!
//! It shares nothing with the engine's clocks: [`send`] writes `CLOCK_REALTIME` into each UDP
//! datagram just before handing it to the kernel, and [`receive`] takes the kernel's receive
//! stamp of each (`SO_TIMESTAMPNS`, the same clock, taken when the frame entered the
//! receiving node). A datagram's error is its stamp − its send time − the link's delay: what a
//! user of the link sees. Run the sender where nothing preempts it between its clock read and
//! its send (the caller's business: a `SCHED_FIFO` thread below the engine's).

use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nix::sys::socket::{recvmsg, setsockopt, sockopt, ControlMessageOwned, MsgFlags};

/// Bytes of a probe datagram: sequence number, link index, send time (ns, `CLOCK_REALTIME`).
pub const DATAGRAM: usize = 24;

/// `CLOCK_REALTIME` now, ns.
fn realtime_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// Makes `socket` a probe receiver: kernel receive stamps on, and a buffer (16 MiB, forced past
/// the system's limit) that holds every datagram of a long stall of the receiving thread.
pub fn prepare_receiver(socket: &UdpSocket) -> nix::Result<()> {
    setsockopt(socket, sockopt::ReceiveTimestampns, &true)?;
    setsockopt(socket, sockopt::RcvBufForce, &(16 << 20))
}

/// Sends `per_link_pps` datagrams per second through each of `senders` to the address of the
/// same index in `to`, round robin, for `seconds`, paced on absolute deadlines (after a stall
/// the datagrams owed go at once); returns how many it sent. Each datagram carries its send
/// time, read last, just before the send.
pub fn send(senders: &[UdpSocket], to: &[SocketAddr], per_link_pps: u64, seconds: f64) -> u64 {
    let total_pps = per_link_pps * senders.len() as u64;
    if total_pps == 0 {
        std::thread::sleep(Duration::from_secs_f64(seconds));
        return 0;
    }
    let gap = Duration::from_nanos(1_000_000_000 / total_pps);
    let count = (total_pps as f64 * seconds) as u64;
    let start = Instant::now() + Duration::from_millis(1);
    let mut payload = [0u8; DATAGRAM];
    for seq in 0..count {
        let due = start + gap * seq as u32;
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        let link = (seq % senders.len() as u64) as usize;
        payload[..8].copy_from_slice(&seq.to_le_bytes());
        payload[8..16].copy_from_slice(&(link as u64).to_le_bytes());
        payload[16..].copy_from_slice(&realtime_ns().to_le_bytes());
        let _ = senders[link].send_to(&payload, to[link]);
    }
    count
}

/// What a receiver saw: each datagram's error, ns (negative when it arrived early).
#[derive(Debug, Default, Clone)]
pub struct Probe {
    /// Stamp − send time − delay of every datagram received, in arrival order.
    pub errors_ns: Vec<i64>,
    /// When each datagram was due (send time + delay, `CLOCK_REALTIME` ns), in the order of
    /// `errors_ns`.
    pub due_ns: Vec<i64>,
    /// Datagrams that arrived before their send time + delay.
    pub early: u64,
}

/// Datagrams due close together that all arrived late: what the probe sees when something on
/// the path stopped (the engine's thread, the sender, or the hypervisor taking a virtual CPU),
/// as against a release that is merely imprecise. Found by [`Probe::stalls`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stall {
    /// The first late datagram's due time, ns.
    pub first_due_ns: i64,
    /// The last late datagram's due time, ns.
    pub last_due_ns: i64,
    /// Late datagrams in it.
    pub frames: usize,
    /// Its largest error, ns.
    pub worst_ns: i64,
}

impl Probe {
    /// The `p`-quantile (0 < p ≤ 1) of the errors, nearest rank; 0 when none were received.
    pub fn percentile(&self, p: f64) -> i64 {
        let mut v = self.errors_ns.clone();
        v.sort_unstable();
        if v.is_empty() {
            return 0;
        }
        v[((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1]
    }

    /// The share of datagrams (%) whose error is from 0 to `ns`.
    pub fn within(&self, ns: i64) -> f64 {
        let n = self
            .errors_ns
            .iter()
            .filter(|&&e| (0..=ns).contains(&e))
            .count();
        100.0 * n as f64 / self.errors_ns.len().max(1) as f64
    }

    /// The stretches of datagrams later than `late_ns` whose due times follow each other by at
    /// most `join_ns`, those whose worst error reaches `worst_ns`, in due order. A stall of
    /// the path for a time T leaves every datagram due in it late, the first by about T, and
    /// the datagrams after it on time again; one imprecise release leaves a single late one.
    pub fn stalls(&self, late_ns: i64, join_ns: i64, worst_ns: i64) -> Vec<Stall> {
        let mut late: Vec<(i64, i64)> = self
            .due_ns
            .iter()
            .zip(&self.errors_ns)
            .filter(|(_, &e)| e > late_ns)
            .map(|(&d, &e)| (d, e))
            .collect();
        late.sort_unstable();
        let mut runs: Vec<Stall> = Vec::new();
        for (due, error) in late {
            match runs.last_mut() {
                Some(s) if due - s.last_due_ns <= join_ns => {
                    s.last_due_ns = due;
                    s.frames += 1;
                    s.worst_ns = s.worst_ns.max(error);
                }
                _ => runs.push(Stall {
                    first_due_ns: due,
                    last_due_ns: due,
                    frames: 1,
                    worst_ns: error,
                }),
            }
        }
        runs.retain(|s| s.worst_ns >= worst_ns);
        runs
    }

    /// The share of datagrams (%) whose error is from 0 to `ns`, among those not due within
    /// one of `stalls` (sorted by due time, as [`Probe::stalls`] gives them): the precision
    /// of the releases the path was there to make.
    pub fn within_outside(&self, ns: i64, stalls: &[Stall]) -> f64 {
        let inside = |due: i64| {
            let i = stalls.partition_point(|s| s.last_due_ns < due);
            stalls.get(i).is_some_and(|s| s.first_due_ns <= due)
        };
        let (mut kept, mut good) = (0usize, 0usize);
        for (&due, &e) in self.due_ns.iter().zip(&self.errors_ns) {
            if !inside(due) {
                kept += 1;
                good += usize::from((0..=ns).contains(&e));
            }
        }
        100.0 * good as f64 / kept.max(1) as f64
    }
}

/// Receives probe datagrams on `receivers` (each made by [`prepare_receiver`]) until `done` is
/// set and half a second passed without one, for a link delay of `delay_ns`.
pub fn receive(receivers: &[UdpSocket], delay_ns: i64, done: &AtomicBool) -> Probe {
    let mut probe = Probe::default();
    let mut buf = [0u8; 64];
    let mut cmsg = nix::cmsg_space!(nix::sys::time::TimeSpec);
    let mut quiet_since = Instant::now();
    loop {
        let mut fds: Vec<nix::poll::PollFd> = receivers
            .iter()
            .map(|s| nix::poll::PollFd::new(s.as_fd(), nix::poll::PollFlags::POLLIN))
            .collect();
        let ready = nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(100u16)).unwrap_or(0);
        if ready == 0 {
            if done.load(Ordering::Relaxed) && quiet_since.elapsed() > Duration::from_millis(500) {
                break;
            }
            continue;
        }
        quiet_since = Instant::now();
        let readable: Vec<usize> = fds
            .iter()
            .enumerate()
            .filter(|(_, f)| {
                f.revents()
                    .is_some_and(|r| r.contains(nix::poll::PollFlags::POLLIN))
            })
            .map(|(i, _)| i)
            .collect();
        drop(fds);
        for i in readable {
            // Everything queued on this socket, then the next poll.
            loop {
                let mut iov = [std::io::IoSliceMut::new(&mut buf)];
                let Ok(msg) = recvmsg::<()>(
                    receivers[i].as_raw_fd(),
                    &mut iov,
                    Some(&mut cmsg),
                    MsgFlags::MSG_DONTWAIT,
                ) else {
                    break;
                };
                let stamp = msg.cmsgs().ok().and_then(|mut c| {
                    c.find_map(|c| match c {
                        ControlMessageOwned::ScmTimestampns(t) => {
                            Some(t.tv_sec() * 1_000_000_000 + t.tv_nsec())
                        }
                        _ => None,
                    })
                });
                let (Some(stamp), DATAGRAM) = (stamp, msg.bytes) else {
                    continue;
                };
                let sent = i64::from_le_bytes(buf[16..24].try_into().expect("8 bytes"));
                let error = stamp - sent - delay_ns;
                probe.early += u64::from(error < 0);
                probe.errors_ns.push(error);
                probe.due_ns.push(sent + delay_ns);
            }
        }
    }
    probe
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;
    use std::sync::Arc;

    #[test]
    fn percentiles_and_shares_are_by_nearest_rank() {
        let p = Probe {
            errors_ns: (1..=100).map(|i| i * 1_000).collect(),
            due_ns: (1..=100).collect(),
            early: 0,
        };
        assert_eq!(p.percentile(0.5), 50_000);
        assert_eq!(p.percentile(0.99), 99_000);
        assert_eq!(p.percentile(1.0), 100_000);
        assert_eq!(p.within(20_000), 20.0);
        assert_eq!(Probe::default().percentile(0.5), 0);
    }

    /// A probe at 10 kpps (a datagram due every 100 µs) whose path stopped for 5 ms from
    /// 1 s and again for 2 ms from 2 s, with one merely imprecise datagram (300 µs late) between.
    fn stalled() -> Probe {
        let mut p = Probe::default();
        for i in 0..30_000i64 {
            let due = i * 100_000;
            let error = match due {
                1_000_000_000..=1_004_999_999 => 1_005_000_000 - due,
                2_000_000_000..=2_001_999_999 => 2_002_000_000 - due,
                1_500_000_000 => 300_000,
                _ => 10_000,
            };
            p.due_ns.push(due);
            p.errors_ns.push(error);
        }
        p
    }

    #[test]
    fn a_stall_is_the_run_of_late_datagrams_it_leaves_and_a_lone_late_one_is_not() {
        let p = stalled();
        let stalls = p.stalls(100_000, 1_000_000, 1_000_000);
        assert_eq!(
            stalls,
            vec![
                Stall {
                    first_due_ns: 1_000_000_000,
                    // Due 1.0049 s: 100 µs late, not later than the bound.
                    last_due_ns: 1_004_800_000,
                    frames: 49,
                    worst_ns: 5_000_000,
                },
                Stall {
                    first_due_ns: 2_000_000_000,
                    last_due_ns: 2_001_800_000,
                    frames: 19,
                    worst_ns: 2_000_000,
                },
            ]
        );
        // Any bound on the worst error keeps the lone late datagram as a stall of its own.
        assert_eq!(p.stalls(100_000, 1_000_000, 0).len(), 3);
        // Order does not matter: the record is in arrival order, stalls are by due time.
        let mut r = p.clone();
        r.due_ns.reverse();
        r.errors_ns.reverse();
        assert_eq!(r.stalls(100_000, 1_000_000, 1_000_000), stalls);
    }

    #[test]
    fn precision_outside_the_stalls_leaves_out_exactly_the_datagrams_due_in_them() {
        let p = stalled();
        let stalls = p.stalls(100_000, 1_000_000, 1_000_000);
        // 30,000 datagrams, 68 in the stalls' spans; of the other 29,932 one is 300 µs late.
        let expected = 100.0 * 29_931.0 / 29_932.0;
        assert!((p.within_outside(100_000, &stalls) - expected).abs() < 1e-9);
        // With no stalls it is the plain share.
        assert_eq!(p.within_outside(100_000, &[]), p.within(100_000));
        // Everything inside one: nothing is left, and the share of nothing is 0.
        let all = [Stall {
            first_due_ns: 0,
            last_due_ns: i64::MAX,
            frames: 0,
            worst_ns: 0,
        }];
        assert_eq!(p.within_outside(100_000, &all), 0.0);
    }

    /// Over loopback (no delay) every datagram arrives, none early, each within a second.
    #[test]
    fn a_loopback_probe_counts_every_datagram_and_none_early() {
        let rx = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        prepare_receiver(&rx).unwrap_or_else(|_| {
            // RcvBufForce needs CAP_NET_ADMIN: stamps alone suffice here.
            setsockopt(&rx, sockopt::ReceiveTimestampns, &true).unwrap();
        });
        let to = rx.local_addr().unwrap();
        let tx = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let done = Arc::new(AtomicBool::new(false));
        let receiver = {
            let done = Arc::clone(&done);
            std::thread::spawn(move || receive(&[rx], 0, &done))
        };
        let sent = send(&[tx], &[to], 2_000, 0.1);
        done.store(true, Ordering::Relaxed);
        let p = receiver.join().unwrap();
        assert_eq!(sent, 200);
        assert_eq!(p.errors_ns.len(), 200);
        assert_eq!(p.due_ns.len(), 200);
        assert_eq!(p.early, 0);
        assert!(p.percentile(1.0) < 1_000_000_000);
    }
}
