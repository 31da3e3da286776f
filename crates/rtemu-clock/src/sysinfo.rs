//! What this machine offers for keeping time: the facts a lab report opens with.
//!
//! [`SystemInfo::probe`] reads `/proc` and `/sys`; the interpretation of what it reads
//! ([`parse_preemption`], [`detect_virtualization`]) is pure and tested on fixed text. A file
//! that cannot be read leaves its field `None` rather than failing the probe: a header with a
//! gap is better than no measurement.

use std::fmt;
use std::fs;

use crate::rt::{self, Policy};

/// The kernel's preemption model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Preemption {
    /// `PREEMPT_RT`: fully preemptible, threaded interrupts.
    Rt,
    /// `PREEMPT`: preemptible kernel (low-latency desktop).
    Full,
    /// `PREEMPT_LAZY`.
    Lazy,
    /// `PREEMPT_DYNAMIC`: chosen at boot; the current mode when debugfs shows it.
    Dynamic(Option<String>),
    /// Neither `PREEMPT` nor `PREEMPT_RT` in the version string: `none` or `voluntary`.
    NoneOrVoluntary,
}

impl fmt::Display for Preemption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Preemption::Rt => f.write_str("PREEMPT_RT"),
            Preemption::Full => f.write_str("PREEMPT (full)"),
            Preemption::Lazy => f.write_str("PREEMPT_LAZY"),
            Preemption::Dynamic(Some(mode)) => write!(f, "PREEMPT_DYNAMIC ({mode})"),
            Preemption::Dynamic(None) => f.write_str("PREEMPT_DYNAMIC"),
            Preemption::NoneOrVoluntary => f.write_str("none or voluntary"),
        }
    }
}

/// Reads the preemption model from `/sys/kernel/realtime` (`1` on PREEMPT_RT kernels), the
/// kernel version string (`uname -v`, e.g. `#1 SMP PREEMPT_DYNAMIC …`) and, when debugfs is
/// mounted, `/sys/kernel/debug/sched/preempt` (`none voluntary (full) lazy`).
pub fn parse_preemption(
    realtime: Option<&str>,
    version: &str,
    debug_preempt: Option<&str>,
) -> Preemption {
    let words: Vec<&str> = version.split_whitespace().collect();
    if realtime.map(str::trim) == Some("1") || words.contains(&"PREEMPT_RT") {
        return Preemption::Rt;
    }
    if words.contains(&"PREEMPT_DYNAMIC") {
        let mode = debug_preempt.and_then(|text| {
            text.split_whitespace()
                .find_map(|w| w.strip_prefix('(')?.strip_suffix(')'))
                .map(str::to_owned)
        });
        return Preemption::Dynamic(mode);
    }
    if words.contains(&"PREEMPT_LAZY") {
        Preemption::Lazy
    } else if words.contains(&"PREEMPT") {
        Preemption::Full
    } else {
        Preemption::NoneOrVoluntary
    }
}

/// Names the hypervisor from the DMI vendor and product (`/sys/class/dmi/id/sys_vendor`,
/// `product_name`), falling back on the `hypervisor` CPU flag in `/proc/cpuinfo`, which every
/// x86 hypervisor sets. `None`: bare metal as far as these tell.
pub fn detect_virtualization(
    cpuinfo: &str,
    sys_vendor: Option<&str>,
    product_name: Option<&str>,
) -> Option<String> {
    const KNOWN: [(&str, &str); 9] = [
        ("QEMU", "QEMU"),
        ("KVM", "KVM"),
        ("VMware", "VMware"),
        ("VirtualBox", "VirtualBox"),
        ("innotek", "VirtualBox"),
        ("Xen", "Xen"),
        ("Amazon EC2", "Amazon EC2"),
        ("Google Compute Engine", "Google Compute Engine"),
        ("Virtual Machine", "Hyper-V"),
    ];
    let dmi = [sys_vendor, product_name];
    for (needle, name) in KNOWN {
        if dmi.iter().flatten().any(|field| field.contains(needle)) {
            return Some(name.to_owned());
        }
    }
    let flagged = cpuinfo
        .lines()
        .filter(|line| line.starts_with("flags"))
        .any(|line| line.split_whitespace().any(|flag| flag == "hypervisor"));
    flagged.then(|| "unidentified hypervisor (CPU flag)".to_owned())
}

/// The timing facts of this machine and of the calling thread.
#[derive(Clone, Debug)]
pub struct SystemInfo {
    /// `uname -r`.
    pub kernel_release: Option<String>,
    /// `uname -v`.
    pub kernel_version: Option<String>,
    /// The preemption model.
    pub preemption: Preemption,
    /// The current clocksource (`tsc` is what low-latency timing wants).
    pub clocksource: Option<String>,
    /// The calling thread's timer slack in ns.
    pub timer_slack_ns: Option<u64>,
    /// The calling thread's scheduling policy.
    pub policy: Option<Policy>,
    /// The CPUs the calling thread may run on.
    pub affinity: Vec<usize>,
    /// Online CPUs.
    pub cpus: usize,
    /// Memory locked by this process in kB (`VmLck`); non-zero after `mlockall`.
    pub locked_kb: Option<u64>,
    /// `kernel.sched_rt_runtime_us`: the share of each second real-time threads may take
    /// (-1: unlimited).
    pub rt_runtime_us: Option<i64>,
    /// The hypervisor, if one is detected.
    pub virtualization: Option<String>,
}

fn read(path: &str) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_owned())
}

impl SystemInfo {
    /// Reads the facts for the calling thread.
    pub fn probe() -> SystemInfo {
        let kernel_version = read("/proc/sys/kernel/version");
        SystemInfo {
            kernel_release: read("/proc/sys/kernel/osrelease"),
            preemption: parse_preemption(
                read("/sys/kernel/realtime").as_deref(),
                kernel_version.as_deref().unwrap_or(""),
                read("/sys/kernel/debug/sched/preempt").as_deref(),
            ),
            kernel_version,
            clocksource: read("/sys/devices/system/clocksource/clocksource0/current_clocksource"),
            timer_slack_ns: rt::timer_slack().ok(),
            policy: rt::current_policy().ok(),
            affinity: rt::affinity().unwrap_or_default(),
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            locked_kb: read("/proc/self/status").and_then(|status| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix("VmLck:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            }),
            rt_runtime_us: read("/proc/sys/kernel/sched_rt_runtime_us")
                .and_then(|v| v.parse().ok()),
            virtualization: detect_virtualization(
                &read("/proc/cpuinfo").unwrap_or_default(),
                read("/sys/class/dmi/id/sys_vendor").as_deref(),
                read("/sys/class/dmi/id/product_name").as_deref(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preemption_models_from_their_version_strings() {
        let cases = [
            (None, "#1 SMP PREEMPT_RT Fri Jan 1", None, Preemption::Rt),
            (Some("1\n"), "#1 SMP", None, Preemption::Rt),
            (Some("0"), "#1 SMP PREEMPT Fri", None, Preemption::Full),
            (None, "#1 SMP PREEMPT_LAZY", None, Preemption::Lazy),
            (
                None,
                "#1 SMP PREEMPT_DYNAMIC @0",
                None,
                Preemption::Dynamic(None),
            ),
            (
                None,
                "#1 SMP PREEMPT_DYNAMIC Debian",
                Some("none (voluntary) full lazy\n"),
                Preemption::Dynamic(Some("voluntary".into())),
            ),
            (
                None,
                "#1 SMP Debian 6.1.0",
                None,
                Preemption::NoneOrVoluntary,
            ),
            // A word that merely starts with PREEMPT is not the flag.
            (
                None,
                "#1 SMP PREEMPTIBLE",
                None,
                Preemption::NoneOrVoluntary,
            ),
        ];
        for (realtime, version, debug, want) in cases {
            assert_eq!(
                parse_preemption(realtime, version, debug),
                want,
                "{version}"
            );
        }
    }

    #[test]
    fn virtualization_from_dmi_then_cpu_flags() {
        let bare = "processor\t: 0\nflags\t\t: fpu vme de pse tsc\n";
        let guest = "processor\t: 0\nflags\t\t: fpu tsc hypervisor lahf_lm\n";
        assert_eq!(detect_virtualization(bare, None, None), None);
        assert_eq!(
            detect_virtualization(guest, None, None).as_deref(),
            Some("unidentified hypervisor (CPU flag)")
        );
        assert_eq!(
            detect_virtualization(guest, Some("QEMU"), Some("Standard PC")).as_deref(),
            Some("QEMU")
        );
        assert_eq!(
            detect_virtualization(bare, Some("Microsoft Corporation"), Some("Virtual Machine"))
                .as_deref(),
            Some("Hyper-V")
        );
        assert_eq!(
            detect_virtualization(bare, Some("Dell Inc."), Some("PowerEdge R640")),
            None
        );
    }

    #[test]
    fn probe_reads_this_machine() {
        let info = SystemInfo::probe();
        assert!(info.kernel_release.is_some_and(|r| !r.is_empty()));
        assert!(!info.affinity.is_empty());
        assert!(info.cpus >= 1);
    }
}
