//! `rtemu lab doctor`: a one-screen verdict on this machine's timing, with what to change.
//!
//! [`Facts`] gathers what the kernel says (the probe reads files, asks for privileges on
//! scratch threads and runs a short sleep test); [`advise`] turns facts into advice and is pure,
//! so every rule is tested on made-up machines.

use rtemu_clock::rt;
use rtemu_clock::sysinfo::{Preemption, SystemInfo};
use rtemu_clock::time::format_duration_ns;
use rtemu_clock::WaitStrategy;
use serde::Serialize;

use crate::sleep::{self, MethodResult, Workload};

/// The `SCHED_FIFO` priority of the engine's release threads, which the sleep test takes (the
/// lab does not depend on the engine; `rtemu-engine`'s `DEFAULT_FIFO_PRIORITY` is the same).
pub const ENGINE_FIFO_PRIORITY: u8 = 40;

/// Everything the verdict rests on.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Facts {
    /// Preemption model.
    pub preemption: String,
    /// Whether the kernel is PREEMPT_RT.
    pub preempt_rt: bool,
    /// Whether the kernel preempts at all (`full`, `lazy` or RT; dynamic counts when its
    /// current mode is known to be one of those).
    pub preemptible: Option<bool>,
    /// Current clocksource.
    pub clocksource: Option<String>,
    /// `CONFIG_HZ`, when the kernel config is readable.
    pub hz: Option<u32>,
    /// Timer slack of an ordinary thread, ns.
    pub timer_slack_ns: Option<u64>,
    /// `kernel.sched_rt_runtime_us` (-1: no RT throttling).
    pub rt_runtime_us: Option<i64>,
    /// Isolated CPUs (`/sys/devices/system/cpu/isolated`), kernel list syntax; empty if none.
    pub isolated_cpus: Option<String>,
    /// Hypervisor, if detected.
    pub virtualization: Option<String>,
    /// Whether SCHED_FIFO is permitted.
    pub fifo_permitted: bool,
    /// Whether `mlockall` is permitted.
    pub mlock_permitted: bool,
    /// Whether `/dev/cpu_dma_latency` can be held at 0 (idle CPUs kept out of deep sleep, a
    /// vCPU polling instead of halting), as the engine holds it.
    pub dma_latency_permitted: bool,
}

/// Reads `CONFIG_HZ=` from a kernel config text.
pub fn parse_config_hz(config: &str) -> Option<u32> {
    config
        .lines()
        .find_map(|line| line.strip_prefix("CONFIG_HZ="))
        .and_then(|v| v.trim().parse().ok())
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
}

/// The preemption mode a `PREEMPT_DYNAMIC` kernel booted in, when debugfs cannot tell the
/// current one: `preempt=` on its command line `cmdline`, else the default its build chose
/// (`CONFIG_PREEMPT_NONE`, `_VOLUNTARY`, `_LAZY` or `CONFIG_PREEMPT` in `config`). The mode is
/// `none`, `voluntary`, `full` or `lazy`, with where it was read.
pub fn boot_preemption(
    cmdline: Option<&str>,
    config: Option<&str>,
) -> Option<(String, &'static str)> {
    const MODES: [&str; 4] = ["none", "voluntary", "full", "lazy"];
    let given = cmdline
        .into_iter()
        .flat_map(str::split_whitespace)
        // Only the kernel's part: what follows `--` is for init.
        .take_while(|w| *w != "--")
        .filter_map(|w| w.strip_prefix("preempt="))
        .last();
    if let Some(mode) = given.filter(|m| MODES.contains(m)) {
        return Some((mode.to_owned(), "preempt= at boot"));
    }
    let set = |option: &str| config.is_some_and(|c| c.lines().any(|l| l == format!("{option}=y")));
    let built = [
        ("CONFIG_PREEMPT_NONE", "none"),
        ("CONFIG_PREEMPT_VOLUNTARY", "voluntary"),
        ("CONFIG_PREEMPT_LAZY", "lazy"),
        ("CONFIG_PREEMPT", "full"),
    ];
    built
        .iter()
        .find(|(option, _)| set(option))
        .map(|(_, mode)| ((*mode).to_owned(), "the build's default"))
}

/// The running kernel's config: `/boot/config-RELEASE`, else `/proc/config.gz`.
fn kernel_config(release: &str) -> Option<String> {
    read(&format!("/boot/config-{release}")).or_else(|| read_gzip("/proc/config.gz"))
}

/// The text of the gzip file `path`, read up to a bound (a kernel config is some 300 KB).
fn read_gzip(path: &str) -> Option<String> {
    use std::io::Read;
    const MAX_CONFIG: u64 = 8 << 20;
    let gz = std::fs::File::open(path).ok()?;
    let mut text = String::new();
    flate2::read::GzDecoder::new(gz)
        .take(MAX_CONFIG)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

impl Facts {
    /// Probes this machine. Privileges are tried on scratch threads (and `mlockall` undone),
    /// so the caller is left as it was.
    pub fn probe() -> Facts {
        let mut info = SystemInfo::probe();
        let release = info.kernel_release.clone().unwrap_or_default();
        let config = kernel_config(&release);
        let mut preemption = info.preemption.to_string();
        if info.preemption == Preemption::Dynamic(None) {
            let cmdline = read("/proc/cmdline");
            if let Some((mode, from)) = boot_preemption(cmdline.as_deref(), config.as_deref()) {
                preemption = format!("PREEMPT_DYNAMIC ({mode}, {from})");
                info.preemption = Preemption::Dynamic(Some(mode));
            }
        }
        let preemptible = match &info.preemption {
            Preemption::Rt | Preemption::Full | Preemption::Lazy => Some(true),
            Preemption::NoneOrVoluntary => Some(false),
            Preemption::Dynamic(Some(mode)) => Some(mode == "full" || mode == "lazy"),
            Preemption::Dynamic(None) => None,
        };
        let dma_latency_permitted = rt::DmaLatencyGuard::hold(0).is_ok();
        let mlock_permitted = rt::lock_memory().is_ok();
        if mlock_permitted {
            let _ = rt::unlock_memory();
        }
        Facts {
            preemption,
            preempt_rt: info.preemption == Preemption::Rt,
            preemptible,
            clocksource: info.clocksource,
            hz: config.as_deref().and_then(parse_config_hz),
            timer_slack_ns: info.timer_slack_ns,
            rt_runtime_us: info.rt_runtime_us,
            isolated_cpus: read("/sys/devices/system/cpu/isolated"),
            virtualization: info.virtualization,
            fifo_permitted: rt::fifo_permitted(),
            mlock_permitted,
            dma_latency_permitted,
        }
    }
}

/// Turns facts into advice, most important first: each line says what to change and why.
pub fn advise(facts: &Facts) -> Vec<String> {
    let mut advice = Vec::new();
    if !facts.fifo_permitted {
        advice.push(
            "SCHED_FIFO is not permitted: run rtemu as root or grant CAP_SYS_NICE (and, where \
             the kernel groups real-time time by cgroup, give rtemu's cgroup \
             cpu.rt_runtime_us); without it any other process can delay a release by a \
             scheduler slice, milliseconds"
                .to_owned(),
        );
    }
    if !facts.mlock_permitted {
        advice.push(
            "mlockall is not permitted: grant CAP_IPC_LOCK or raise RLIMIT_MEMLOCK, so page \
             faults cannot stall the engine"
                .to_owned(),
        );
    }
    if !facts.dma_latency_permitted {
        advice.push(
            "/dev/cpu_dma_latency cannot be held: idle CPUs fall into deep sleep (a vCPU \
             halts and waits for the hypervisor), so the engine's wake-ups come late; run \
             rtemu as root or give it write access to that device"
                .to_owned(),
        );
    }
    if let Some(vm) = &facts.virtualization {
        advice.push(format!(
            "virtualised ({vm}): the hypervisor can take the CPU away for milliseconds (`rtemu lab \
             sleep --trace` shows how often); use bare metal or dedicated, pinned vCPUs for \
             sub-millisecond worst cases"
        ));
    }
    match facts.preemptible {
        Some(false) => advice.push(format!(
            "the kernel does not preempt ({}): a release waits until the kernel work of \
             another program on its CPU (a system call, a page fault) ends or yields, which \
             can take milliseconds; boot with preempt=full, or use a PREEMPT_RT kernel",
            facts.preemption
        )),
        None => advice.push(
            "PREEMPT_DYNAMIC with the current mode unknown (debugfs not mounted): boot with \
             preempt=full to be sure"
                .to_owned(),
        ),
        Some(true) => {}
    }
    if !facts.preempt_rt {
        advice.push(
            "not a PREEMPT_RT kernel: interrupts and kernel locks are not preemptible, which \
             bounds the worst case only loosely; PREEMPT_RT brings it to tens of µs"
                .to_owned(),
        );
    }
    if facts.isolated_cpus.as_deref().is_none_or(str::is_empty) {
        advice.push(
            "no isolated CPUs: isolcpus= and nohz_full= on the engine's CPU keep other tasks \
             and the tick away from it"
                .to_owned(),
        );
    }
    if let Some(source) = facts.clocksource.as_deref().filter(|s| *s != "tsc") {
        advice.push(format!(
            "clocksource {source}: tsc is the cheapest to read; check dmesg for why it is not used"
        ));
    }
    if facts.timer_slack_ns.is_some_and(|ns| ns > 1) {
        advice.push(
            "ordinary threads have a timer slack: rtemu's engine sets it to 1 ns (the lab: \
             --timer-slack 1ns), or runs SCHED_FIFO, which has none"
                .to_owned(),
        );
    }
    advice
}

/// Advice from the sleep test with every CPU busy: when its 99th percentile is late by more
/// than 100 µs, what keeps other work away from the engine.
pub fn advise_under_load(loaded: &MethodResult) -> Option<String> {
    let p99 = loaded.error_ns.p99_ns;
    (p99 > 100_000).then(|| {
        format!(
            "with every CPU busy, wake-ups were {} µs late at the 99th percentile: give the \
             engine a CPU of its own (`up --engine-cpus`), keep the lab's programs off it \
             (`up --programs-cpus off-engine`), or take it from the scheduler (isolcpus=, nohz_full=)",
            p99 / 1_000
        )
    })
}

/// The sleep test's valid lengths, ns: below 50 ms it holds too few requests (about 50) to
/// judge by, above 10 minutes a verdict looks hung.
pub const DURATION_RANGE_NS: std::ops::RangeInclusive<u64> = 50_000_000..=600_000_000_000;

/// Why the sleep test gave no verdict.
#[derive(Debug, thiserror::Error)]
pub enum SleepTestError {
    /// The length is outside [`DURATION_RANGE_NS`].
    #[error(
        "a sleep test of {} is out of range: give {} to {}",
        format_duration_ns(*.0),
        format_duration_ns(*DURATION_RANGE_NS.start()),
        format_duration_ns(*DURATION_RANGE_NS.end())
    )]
    OutOfRange(u64),
    /// No request completed within the length: there is nothing to judge.
    #[error(
        "the sleep test completed no request in {}: no samples, so no verdict",
        format_duration_ns(*.0)
    )]
    NoSamples(u64),
    /// A wait failed.
    #[error(transparent)]
    Wait(#[from] rtemu_clock::wait::WaitError),
    /// A thread of the test could not be started.
    #[error(transparent)]
    Spawn(#[from] rtemu_sys::thread::SpawnError),
    /// The test's thread panicked.
    #[error("the sleep test's thread panicked")]
    Panicked,
}

/// The short sleep test of the verdict, run as the engine runs as far as `facts` permit: its
/// wait (`auto`) under `SCHED_FIFO` at its priority with no timer slack, else `sleep`, with
/// `/dev/cpu_dma_latency` held at 0 as the engine holds it, on the microsecond
/// workload for about `duration_ns` (within [`DURATION_RANGE_NS`]), run on a scratch thread;
/// with `loaded`, while one busy loop per CPU runs at normal priority beside it (a build, the
/// program under test), as a lab in use has. A test that completed no request is an error,
/// never a perfect result.
pub fn sleep_test(
    duration_ns: u64,
    facts: &Facts,
    loaded: bool,
) -> Result<MethodResult, SleepTestError> {
    if !DURATION_RANGE_NS.contains(&duration_ns) {
        return Err(SleepTestError::OutOfRange(duration_ns));
    }
    let fifo = facts.fifo_permitted;
    // Best effort, as the engine: held until the test ends.
    let _dma_latency = facts
        .dma_latency_permitted
        .then(|| rt::DmaLatencyGuard::hold(0).ok())
        .flatten();
    let method = if fifo {
        WaitStrategy::Auto
    } else {
        WaitStrategy::Sleep
    };
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    // Bounded: the loops end with the test, or after its length and a second at the latest.
    let limit = std::time::Duration::from_nanos(duration_ns) + std::time::Duration::from_secs(1);
    let mut load = Vec::new();
    let mut failed = None;
    for _ in 0..if loaded { cpus } else { 0 } {
        let stop = std::sync::Arc::clone(&stop);
        let spawned = rtemu_sys::thread::spawn("rtemu-doctor-load", move || {
            let start = std::time::Instant::now();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && start.elapsed() < limit {
                std::hint::spin_loop();
            }
        });
        match spawned {
            Ok(l) => load.push(l),
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    let count = (duration_ns / Workload::Micro.mean_ns()).max(1) as usize;
    // Without its whole load the test does not run; the load started ends with the stop below.
    let result = match failed {
        Some(e) => Err(SleepTestError::from(e)),
        None => rtemu_sys::thread::spawn("rtemu-doctor", move || {
            if fifo {
                // Best effort: the verdict reports what it measured with.
                let _ = rt::set_fifo(ENGINE_FIFO_PRIORITY);
                let _ = rt::set_timer_slack(1);
            }
            let requests = Workload::Micro.requests(count, 1);
            sleep::measure(method, &requests, duration_ns)
                .map(|samples| MethodResult::from_samples(&samples, count))
        })
        .map_err(SleepTestError::from)
        .and_then(|t| t.join().map_err(|_| SleepTestError::Panicked)),
    };
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for l in load {
        let _ = l.join();
    }
    let result = result??;
    if result.completed == 0 {
        return Err(SleepTestError::NoSamples(duration_ns));
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ideal() -> Facts {
        Facts {
            preemption: "PREEMPT_RT".into(),
            preempt_rt: true,
            preemptible: Some(true),
            clocksource: Some("tsc".into()),
            hz: Some(1000),
            timer_slack_ns: Some(1),
            rt_runtime_us: Some(-1),
            isolated_cpus: Some("3".into()),
            virtualization: None,
            fifo_permitted: true,
            mlock_permitted: true,
            dma_latency_permitted: true,
        }
    }

    /// A machine where the sleep test runs as any program: `sleep`, no privileges.
    fn plain() -> Facts {
        Facts {
            fifo_permitted: false,
            dma_latency_permitted: false,
            ..ideal()
        }
    }

    #[test]
    fn an_ideal_machine_needs_no_advice() {
        assert_eq!(advise(&ideal()), Vec::<String>::new());
    }

    #[test]
    fn each_shortcoming_gets_its_advice() {
        type Spoil = fn(&mut Facts);
        let cases: [(Spoil, &str); 9] = [
            (|f| f.fifo_permitted = false, "CAP_SYS_NICE"),
            (|f| f.mlock_permitted = false, "CAP_IPC_LOCK"),
            (|f| f.dma_latency_permitted = false, "cpu_dma_latency"),
            (
                |f| f.virtualization = Some("KVM".into()),
                "virtualised (KVM)",
            ),
            (|f| f.preemptible = Some(false), "preempt=full"),
            (|f| f.preemptible = None, "debugfs"),
            (|f| f.preempt_rt = false, "PREEMPT_RT kernel"),
            (|f| f.isolated_cpus = Some(String::new()), "isolcpus="),
            (|f| f.clocksource = Some("hpet".into()), "clocksource hpet"),
        ];
        for (spoil, hint) in cases {
            let mut facts = ideal();
            spoil(&mut facts);
            let advice = advise(&facts);
            assert_eq!(advice.len(), 1, "{hint}: {advice:?}");
            assert!(advice[0].contains(hint), "{hint}: {advice:?}");
        }
    }

    #[test]
    fn a_late_tail_under_load_gets_advice_and_a_tight_one_none() {
        let mut r = sleep_test(50_000_000, &plain(), false).unwrap();
        r.error_ns.p99_ns = 80_000;
        assert_eq!(advise_under_load(&r), None);
        r.error_ns.p99_ns = 2_500_000;
        let advice = advise_under_load(&r).unwrap();
        assert!(
            advice.contains("2500 µs late")
                && advice.contains("--engine-cpus")
                && advice.contains("--programs-cpus off-engine"),
            "{advice}"
        );
    }

    #[test]
    fn a_dynamic_kernels_boot_mode_is_its_command_lines_else_its_builds_default() {
        let config = "CONFIG_PREEMPT_BUILD=y\nCONFIG_PREEMPT_NONE=y\n# CONFIG_PREEMPT is not \
                      set\nCONFIG_PREEMPT_COUNT=y\nCONFIG_PREEMPTION=y\nCONFIG_PREEMPT_DYNAMIC=y\n";
        // This VM: no preempt= at boot, a build that defaults to none.
        let cmdline = "console=ttyS0 quiet -- --firecracker-init --addr 0.0.0.0:2024";
        assert_eq!(
            boot_preemption(Some(cmdline), Some(config)),
            Some(("none".to_owned(), "the build's default"))
        );
        // The command line wins, the last preempt= of the kernel's part of it.
        assert_eq!(
            boot_preemption(
                Some("preempt=none ro preempt=full -- preempt=none"),
                Some(config)
            ),
            Some(("full".to_owned(), "preempt= at boot"))
        );
        // A mode the kernel does not know is ignored, as the kernel ignores it.
        assert_eq!(
            boot_preemption(Some("preempt=fast"), Some(config)),
            Some(("none".to_owned(), "the build's default"))
        );
        for (option, mode) in [
            ("CONFIG_PREEMPT_VOLUNTARY=y", "voluntary"),
            ("CONFIG_PREEMPT_LAZY=y", "lazy"),
            ("CONFIG_PREEMPT=y", "full"),
        ] {
            let config = format!("CONFIG_PREEMPT_DYNAMIC=y\n{option}\nCONFIG_PREEMPTION=y\n");
            assert_eq!(
                boot_preemption(None, Some(&config)),
                Some((mode.to_owned(), "the build's default")),
                "{option}"
            );
        }
        // Neither readable: unknown.
        assert_eq!(boot_preemption(Some("quiet"), None), None);
        assert_eq!(
            boot_preemption(None, Some("CONFIG_PREEMPT_DYNAMIC=y\n")),
            None
        );
    }

    #[test]
    fn a_gzipped_config_is_read_as_text() {
        use std::io::Write;
        let dir = std::env::temp_dir().join(format!("rtemu-doctor-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("config.gz");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(b"CONFIG_HZ=250\nCONFIG_PREEMPT_NONE=y\n")
            .unwrap();
        std::fs::write(&path, gz.finish().unwrap()).unwrap();
        let text = read_gzip(path.to_str().unwrap());
        // Not gzip: nothing, rather than garbage.
        std::fs::write(&path, "CONFIG_HZ=250\n").unwrap();
        let plain = read_gzip(path.to_str().unwrap());
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(text.as_deref().and_then(parse_config_hz), Some(250));
        assert_eq!(plain, None);
    }

    #[test]
    fn config_hz_is_read_from_the_kernel_config() {
        let config = "# comment\nCONFIG_HZ_1000=y\nCONFIG_HZ=1000\nCONFIG_X=y\n";
        assert_eq!(parse_config_hz(config), Some(1000));
        assert_eq!(parse_config_hz("CONFIG_HZ_250=y\n"), None);
    }

    #[test]
    fn the_sleep_test_is_bounded_and_measures() {
        let result = sleep_test(50_000_000, &plain(), false).unwrap();
        assert_eq!(result.method, "sleep");
        assert!(result.completed > 0 && result.error_ns.min_ns >= 0);
        assert!(result.wall_ns < 2_000_000_000);
    }

    #[test]
    fn a_sleep_test_too_short_to_measure_is_refused_not_judged_perfect() {
        // 0 s used to complete no request and report a 0.0 µs verdict.
        for ns in [0, 1, 49_999_999, 600_000_000_001] {
            let e = sleep_test(ns, &plain(), false).unwrap_err();
            assert!(matches!(e, SleepTestError::OutOfRange(v) if v == ns), "{e}");
            assert!(e.to_string().contains("give 50ms to 600s"), "{e}");
        }
    }
}
