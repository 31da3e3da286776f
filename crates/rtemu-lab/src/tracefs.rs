//! Recording the kernel's trace events of some CPUs while a test runs, in a tracing instance
//! of rtemu's own, and attributing the test thread's late wake-ups ([`crate::late_wakeups`]).
//!
//! The kernel's tracing is shared by every tool on the machine, so rtemu never touches the
//! top-level buffer or another tool's instance: it makes its own (`instances/rtemu-lab-PID`,
//! the name is its mark), records only the events and CPUs it needs on the `mono` clock (the
//! timeline of `CLOCK_MONOTONIC`, which the timers' due times are on) and removes the
//! instance when done. A run killed before that leaves its instance behind; the next
//! recording removes every `rtemu-lab-PID` instance whose process is gone, and no other.

use std::fs::OpenOptions;
use std::io::{BufRead as _, BufReader, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::cputime::CpuTicks;
use crate::late_wakeups::{self, Attribution, Line};

/// The prefix of the instances rtemu makes; the rest of the name is the maker's pid.
const PREFIX: &str = "rtemu-lab-";

/// Where the kernel's tracing is mounted, in the order they are looked for.
const MOUNT_POINTS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// Events without which the analysis means nothing; the others are used where present.
const ESSENTIAL: [&str; 3] = [
    "timer/hrtimer_start",
    "timer/hrtimer_expire_entry",
    "sched/sched_switch",
];

/// The most ring buffer, per CPU, a recording asks for, KiB; it asks for less on machines
/// with many CPUs, as the kernel gives every CPU a buffer of this size.
const BUFFER_KB_MAX: u64 = 16 * 1024;

/// The ring buffer a recording asks for on all CPUs together, KiB.
const BUFFER_KB_TOTAL: u64 = 64 * 1024;

/// A wake-up is late when its thread runs more than this after its due time, ns: the
/// engine's precision goal (within 100 µs).
pub const LATE_AFTER_NS: u64 = 100_000;

/// The kernel's tracing could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// No tracefs is mounted.
    #[error(
        "the kernel's tracing is not mounted (no tracefs at {}); mount it with \
         `mount -t tracefs nodev /sys/kernel/tracing`",
        MOUNT_POINTS.join(" or ")
    )]
    NotMounted,
    /// A step failed.
    #[error("kernel tracing: {what}: {source}{hint}")]
    Os {
        /// The step.
        what: String,
        /// The kernel's reason.
        source: std::io::Error,
        /// What to do, if anything helps.
        hint: &'static str,
    },
}

/// What a recording found.
#[derive(Debug, Clone, Serialize)]
pub struct Traced {
    /// The CPUs recorded.
    pub cpus: Vec<usize>,
    /// The recorded thread's late wake-ups and their causes.
    #[serde(flatten)]
    pub attribution: Attribution,
    /// Time the hypervisor reports it took from those CPUs while recording (`/proc/stat`'s
    /// steal, in its 10 ms steps), ns; `None` where it cannot be read.
    pub steal_ns: Option<u64>,
}

/// A recording in progress; dropped, it removes its instance.
#[derive(Debug)]
pub struct Recording {
    dir: PathBuf,
    tid: u32,
    cpus: Vec<usize>,
    /// Each CPU's ticks when recording began, where `/proc/stat` could be read.
    ticks_before: Option<Vec<CpuTicks>>,
}

impl Recording {
    /// Starts recording `cpus` for the calling thread, whose wake-ups [`Recording::finish`]
    /// attributes.
    pub fn start(cpus: &[usize]) -> Result<Recording, TraceError> {
        let tid = this_thread().map_err(|e| os("finding the calling thread", e))?;
        Recording::start_for(tid, cpus)
    }

    /// Starts recording `cpus` for thread `tid` (of any process), whose wake-ups
    /// [`Recording::finish`] attributes.
    pub fn start_for(tid: u32, cpus: &[usize]) -> Result<Recording, TraceError> {
        let instances = find_instances()?;
        remove_abandoned(&instances);
        let dir = instances.join(format!("{PREFIX}{}", std::process::id()));
        std::fs::create_dir(&dir).map_err(|e| {
            let hint = if e.kind() == std::io::ErrorKind::PermissionDenied {
                " (it needs root)"
            } else {
                ""
            };
            TraceError::Os {
                what: format!("making the instance {}", dir.display()),
                source: e,
                hint,
            }
        })?;
        let recording = Recording {
            dir,
            tid,
            cpus: cpus.to_vec(),
            ticks_before: ticks(cpus),
        };
        recording.set_up()?;
        Ok(recording)
    }

    fn set_up(&self) -> Result<(), TraceError> {
        self.write("tracing_on", "0")?;
        self.write("trace_clock", "mono")?;
        self.write("tracing_cpumask", &cpumask(&self.cpus))?;
        let online = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
        let kb = (BUFFER_KB_TOTAL / online).clamp(1024, BUFFER_KB_MAX);
        self.write("buffer_size_kb", &kb.to_string())?;
        for event in late_wakeups::EVENTS {
            let enable = format!("events/{event}/enable");
            match self.write(&enable, "1") {
                Ok(()) => {}
                // This kernel does not have the event (irq_vectors are x86's): the analysis
                // does without it.
                Err(_) if !ESSENTIAL.contains(event) && !self.dir.join(&enable).exists() => {}
                Err(e) => return Err(e),
            }
        }
        self.write("tracing_on", "1")
    }

    /// Stops recording, reads what was recorded and attributes the thread's late wake-ups.
    pub fn finish(self) -> Result<Traced, TraceError> {
        self.write("tracing_on", "0")?;
        let steal_ns = match (&self.ticks_before, ticks(&self.cpus)) {
            (Some(before), Some(after)) => {
                Some(before.iter().zip(after).map(|(b, a)| b.steal_ns(a)).sum())
            }
            _ => None,
        };
        let lost: u64 = self.cpus.iter().map(|&cpu| self.lost(cpu)).sum();
        let trace = self.dir.join("trace");
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&trace)
            .map_err(|e| os(&format!("opening {}", trace.display()), e))?;
        let mut events = Vec::new();
        let mut lost_lines = 0;
        for line in BufReader::new(file).lines() {
            let line = line.map_err(|e| os(&format!("reading {}", trace.display()), e))?;
            match late_wakeups::parse_line(&line) {
                Line::Event(e) => events.push(e),
                Line::Lost(n) => lost_lines += n,
                Line::Other => {}
            }
        }
        Ok(Traced {
            cpus: self.cpus.clone(),
            attribution: late_wakeups::attribute(
                &events,
                self.tid,
                LATE_AFTER_NS,
                lost.max(lost_lines),
            ),
            steal_ns,
        })
    }

    /// Events the buffer of `cpu` overwrote or dropped (its `stats` file's `overrun` and
    /// `dropped events`), 0 where unreadable.
    fn lost(&self, cpu: usize) -> u64 {
        let stats = self.dir.join(format!("per_cpu/cpu{cpu}/stats"));
        let text = rtemu_sys::input::read_small_file(&stats, 64 * 1024).unwrap_or_default();
        text.lines()
            .filter_map(|l| {
                l.strip_prefix("overrun:")
                    .or_else(|| l.strip_prefix("dropped events:"))
            })
            .filter_map(|v| v.trim().parse::<u64>().ok())
            .sum()
    }

    /// Writes `value` to the instance's control file `file`, which must exist (a control
    /// file is never created, and never followed as a link).
    fn write(&self, file: &str, value: &str) -> Result<(), TraceError> {
        let path = self.dir.join(file);
        OpenOptions::new()
            .write(true)
            .truncate(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .and_then(|mut f| f.write_all(value.as_bytes()))
            .map_err(|e| os(&format!("writing {value} to {}", path.display()), e))
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

fn os(what: &str, source: std::io::Error) -> TraceError {
    TraceError::Os {
        what: what.to_owned(),
        source,
        hint: "",
    }
}

/// The directory of tracing instances: at the first mount point that has one.
fn find_instances() -> Result<PathBuf, TraceError> {
    let mut refused = None;
    for root in MOUNT_POINTS {
        let instances = Path::new(root).join("instances");
        match std::fs::metadata(&instances) {
            Ok(m) if m.is_dir() => return Ok(instances),
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                refused.get_or_insert((instances, e));
            }
            _ => {}
        }
    }
    Err(match refused {
        Some((path, source)) => TraceError::Os {
            what: format!("reading {}", path.display()),
            source,
            hint: " (it needs root)",
        },
        None => TraceError::NotMounted,
    })
}

/// Removes the instances in `instances` that rtemu made for processes that are gone.
fn remove_abandoned(instances: &Path) {
    let Ok(entries) = std::fs::read_dir(instances) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(maker) else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

/// The pid in an instance name rtemu made (`rtemu-lab-PID`), `None` for any other name.
fn maker(name: &str) -> Option<u32> {
    let digits = name.strip_prefix(PREFIX)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The calling thread's id, from `/proc/thread-self` (`PID/task/TID`).
fn this_thread() -> std::io::Result<u32> {
    let link = std::fs::read_link("/proc/thread-self")?;
    link.file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("unexpected {}", link.display())))
}

/// The ticks of each of `cpus` now.
fn ticks(cpus: &[usize]) -> Option<Vec<CpuTicks>> {
    let all = CpuTicks::read_each(cpus.iter().max()? + 1).ok()?;
    Some(cpus.iter().map(|&c| all[c]).collect())
}

/// `cpus` as tracefs's hexadecimal mask: groups of 32 CPUs, the highest first, comma-separated.
fn cpumask(cpus: &[usize]) -> String {
    let groups = cpus.iter().max().map_or(1, |&m| m / 32 + 1);
    let mut words = vec![0u32; groups];
    for &cpu in cpus {
        words[cpu / 32] |= 1 << (cpu % 32);
    }
    let mut text: Vec<String> = words.iter().rev().map(|w| format!("{w:08x}")).collect();
    text[0] = format!("{:x}", words[groups - 1]);
    text.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_masks_are_hexadecimal_groups_of_32() {
        assert_eq!(cpumask(&[1]), "2");
        assert_eq!(cpumask(&[0, 1]), "3");
        assert_eq!(cpumask(&[4, 31]), "80000010");
        assert_eq!(cpumask(&[0, 40]), "100,00000001");
        assert_eq!(cpumask(&[64]), "1,00000000,00000000");
        assert_eq!(cpumask(&[]), "0");
    }

    #[test]
    fn only_rtemus_instance_names_have_a_maker() {
        assert_eq!(maker("rtemu-lab-123"), Some(123));
        for other in [
            "rtemu-lab-",
            "rtemu-lab-12a",
            "rtemu-lab-../x",
            "rtemu-lab--1",
            "perf",
            "rtemu-123",
            "xrtemu-lab-1",
        ] {
            assert_eq!(maker(other), None, "{other}");
        }
    }

    #[test]
    fn the_calling_thread_is_found() {
        let main = this_thread().unwrap();
        let other = std::thread::spawn(|| this_thread().unwrap())
            .join()
            .unwrap();
        assert_ne!(main, other);
        assert!(Path::new(&format!("/proc/self/task/{main}")).exists());
    }
}
