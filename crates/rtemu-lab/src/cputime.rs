//! CPU time by state from `/proc/stat`: what the benchmarks and the lab read before and after a run to
//! say where the CPUs' time went (busy; softirq: the kernel's packet work; steal: the
//! hypervisor's), for all CPUs
//! together or for each.

use std::io::{Error, Result};

/// Ticks (USER_HZ) spent by state since boot: all CPUs' (the first line of `/proc/stat`) or
/// one CPU's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuTicks {
    /// user, nice, system, irq and softirq.
    busy: u64,
    /// softirq alone, wherever it ran (in a task's context or in ksoftirqd).
    softirq: u64,
    /// steal: time the hypervisor gave this virtual CPU's host CPU to someone else, while
    /// the guest had work for it. A real-time thread cannot run then, whatever its class.
    steal: u64,
    /// Every state but guest time, which `user` already holds.
    total: u64,
}

impl CpuTicks {
    /// Parses `/proc/stat`'s `cpu` line: user nice system idle iowait irq softirq steal ….
    pub fn parse(stat: &str) -> Option<CpuTicks> {
        CpuTicks::parse_line(stat, "cpu ")
    }

    /// Parses the line of `/proc/stat` that starts with `prefix` (`cpu ` or `cpu3 `).
    fn parse_line(stat: &str, prefix: &str) -> Option<CpuTicks> {
        let line = stat.lines().find_map(|l| l.strip_prefix(prefix))?;
        let t: Vec<u64> = line
            .split_whitespace()
            .take(8)
            .map(str::parse)
            .collect::<std::result::Result<_, _>>()
            .ok()?;
        (t.len() == 8).then(|| CpuTicks {
            busy: t[0] + t[1] + t[2] + t[5] + t[6],
            softirq: t[6],
            steal: t[7],
            total: t.iter().sum(),
        })
    }

    /// All CPUs' ticks now.
    pub fn read() -> Result<CpuTicks> {
        let stat = read_stat()?;
        CpuTicks::parse(&stat)
            .ok_or_else(|| Error::other("/proc/stat has no `cpu` line of 8 numbers"))
    }

    /// Each CPU's ticks now, `cpu0` first, for the CPUs `0..cpus`.
    pub fn read_each(cpus: usize) -> Result<Vec<CpuTicks>> {
        let stat = read_stat()?;
        (0..cpus)
            .map(|i| {
                CpuTicks::parse_line(&stat, &format!("cpu{i} ")).ok_or_else(|| {
                    Error::other(format!("/proc/stat has no `cpu{i}` line of 8 numbers"))
                })
            })
            .collect()
    }

    /// Softirq and busy time from `self` to `later`, each in % of one core, on `cpus` CPUs
    /// (1 for one CPU's ticks).
    pub fn shares(self, later: CpuTicks, cpus: usize) -> (f64, f64) {
        let total = later.total.saturating_sub(self.total).max(1) as f64;
        let percent = |ticks: u64| ticks as f64 * cpus as f64 * 100.0 / total;
        (
            percent(later.softirq.saturating_sub(self.softirq)),
            percent(later.busy.saturating_sub(self.busy)),
        )
    }

    /// Stolen time from `self` to `later`, ns (`/proc/stat` counts in 1/100 s, `USER_HZ`).
    pub fn steal_ns(self, later: CpuTicks) -> u64 {
        later.steal.saturating_sub(self.steal) * 10_000_000
    }

    /// Stolen time from `self` to `later`, in % of one core, on `cpus` CPUs.
    pub fn steal_share(self, later: CpuTicks, cpus: usize) -> f64 {
        let total = later.total.saturating_sub(self.total).max(1) as f64;
        later.steal.saturating_sub(self.steal) as f64 * cpus as f64 * 100.0 / total
    }
}

fn read_stat() -> Result<String> {
    std::fs::read_to_string("/proc/stat")
        .map_err(|e| Error::new(e.kind(), format!("reading /proc/stat: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_come_from_the_all_cpu_line() {
        let stat = "cpu  100 5 50 800 10 2 20 3 7 0\ncpu0 1 1 1 1 1 1 1 1 0 0\nintr 1 2\n";
        assert_eq!(
            CpuTicks::parse(stat),
            Some(CpuTicks {
                busy: 100 + 5 + 50 + 2 + 20,
                softirq: 20,
                steal: 3,
                total: 100 + 5 + 50 + 800 + 10 + 2 + 20 + 3,
            })
        );
        assert_eq!(CpuTicks::parse("cpu0 1 2 3 4 5 6 7 8\n"), None);
        assert_eq!(
            CpuTicks::parse_line(stat, "cpu0 ").map(|t| (t.busy, t.softirq, t.total)),
            Some((5, 1, 8))
        );
        assert_eq!(CpuTicks::parse("cpu  1 2 3\n"), None);
        assert_eq!(CpuTicks::parse("cpu  1 2 x 4 5 6 7 8\n"), None);
    }

    #[test]
    fn cpu_shares_are_in_percent_of_one_core() {
        let before = CpuTicks {
            busy: 0,
            softirq: 0,
            steal: 0,
            total: 0,
        };
        // Two CPUs for one second at 100 ticks/s: 200 ticks, 150 busy, 50 of them softirq,
        // 10 stolen.
        let after = CpuTicks {
            busy: 150,
            softirq: 50,
            steal: 10,
            total: 200,
        };
        assert_eq!(before.shares(after, 2), (50.0, 150.0));
        assert_eq!(before.steal_share(after, 2), 10.0);
        assert_eq!(before.steal_ns(after), 100_000_000);
        // No tick in between: no division by zero.
        assert_eq!(after.shares(after, 2), (0.0, 0.0));
        assert_eq!(after.steal_share(after, 2), 0.0);
    }
}
