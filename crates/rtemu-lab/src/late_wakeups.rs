//! Why a timed wake-up came late, from the kernel's own trace of the CPU it was due on.
//!
//! A thread that sleeps until a deadline is woken by a timer interrupt; when it wakes late,
//! the sleep test sees only *how* late. The kernel's trace events of that CPU (see
//! [`crate::tracefs`]) say what the CPU was doing meanwhile. A timer interrupt can come late
//! only while interrupts are off or while the virtual CPU is not running at all, and the
//! trace, taken inside the guest, cannot see either directly; what it can see is which
//! context the CPU was in. The delay, from the due time to the thread running, is cut at every
//! event the CPU recorded; the longest piece names the cause:
//!
//! * the CPU **idle** while the timer was overdue: the idle loop runs with interrupts on, so
//!   the virtual CPU was not running (its host gave the physical CPU to someone else, the
//!   hypervisor's "steal"). The one answer that is certain;
//! * a **task** running while the timer was overdue: its kernel work held interrupts off, or
//!   the virtual CPU was away (a task computing in user space cannot hold interrupts off);
//! * an interrupt **handler** or softirq running while the timer was overdue: a long handler,
//!   or the virtual CPU away;
//! * the timer in time, then the thread **waited** behind a task: that task's kernel work,
//!   which a kernel without full preemption does not interrupt even for a real-time thread
//!   (or the virtual CPU away just then).
//!
//! Pure: text in, figures out, so the analysis is tested on traces written by hand.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

/// The trace events the analysis reads, as `tracefs` names them (`system/event`).
pub const EVENTS: &[&str] = &[
    "timer/hrtimer_start",
    "timer/hrtimer_expire_entry",
    "irq_vectors/local_timer_entry",
    "irq_vectors/local_timer_exit",
    "irq_vectors/reschedule_entry",
    "irq_vectors/reschedule_exit",
    "irq_vectors/call_function_entry",
    "irq_vectors/call_function_exit",
    "irq_vectors/call_function_single_entry",
    "irq_vectors/call_function_single_exit",
    "irq/irq_handler_entry",
    "irq/irq_handler_exit",
    "irq/softirq_entry",
    "irq/softirq_exit",
    "sched/sched_switch",
];

/// One trace event the analysis uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// When it was recorded, ns on the trace clock (`mono`: `CLOCK_MONOTONIC`'s timeline).
    pub ts_ns: u64,
    /// The CPU it was recorded on.
    pub cpu: u32,
    /// The thread running when it was recorded.
    pub pid: u32,
    /// Its name.
    pub comm: String,
    /// What happened.
    pub kind: Kind,
}

/// What a trace event says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A high-resolution timer was armed to expire at `expires_ns` (`CLOCK_MONOTONIC` for a
    /// sleeping thread's timer); `sleeper` when it wakes a thread (`hrtimer_wakeup`).
    TimerArmed {
        /// The timer's (hashed) address.
        timer: u64,
        /// Whether it is a sleeping thread's timer.
        sleeper: bool,
        /// When it is due.
        expires_ns: u64,
    },
    /// A timer expired, at `now_ns` on its clock.
    TimerFired {
        /// The timer's (hashed) address.
        timer: u64,
        /// The clock when its handler ran.
        now_ns: u64,
    },
    /// An interrupt handler or softirq began: `timer interrupt`, `softirq NET_RX`, `irq 24
    /// virtio0`, ….
    WorkBegin(String),
    /// The innermost interrupt handler or softirq ended.
    WorkEnd,
    /// The CPU switched from one task to another (pid 0: the idle task).
    Switch {
        /// The task that stopped running.
        prev_comm: String,
        /// The task that runs now.
        next_comm: String,
        /// Its thread id.
        next_pid: u32,
    },
}

/// A line of the `trace` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// An event the analysis uses.
    Event(Event),
    /// The ring buffer dropped this many events of a CPU (`CPU:1 [LOST 12 EVENTS]`).
    Lost(u64),
    /// A comment, or an event the analysis does not use.
    Other,
}

/// The name the timer interrupt's work is given.
const TIMER_INTERRUPT: &str = "timer interrupt";

/// Parses one line of a `tracefs` `trace` file written with the `mono` clock:
/// `COMM-PID [CPU] FLAGS SECONDS.MICROS: EVENT: FIELDS`.
pub fn parse_line(line: &str) -> Line {
    if let Some(n) = line
        .split_once("[LOST ")
        .and_then(|(_, rest)| rest.split_once(' '))
        .and_then(|(n, _)| n.parse().ok())
    {
        return Line::Lost(n);
    }
    parse_event(line).map_or(Line::Other, Line::Event)
}

fn parse_event(line: &str) -> Option<Event> {
    if line.starts_with('#') {
        return None;
    }
    // The CPU column is the first ` [digits] ` (a command's name may hold spaces or dashes).
    let (open, close) = cpu_column(line)?;
    let task = line[..open].trim();
    let (comm, pid) = task.rsplit_once('-')?;
    let pid = pid.parse().ok()?;
    let cpu = line[open + 2..close].parse().ok()?;
    let rest = line[close + 1..].trim_start();
    // FLAGS, then the time stamp ending in ':'.
    let (_flags, rest) = rest.split_once(' ')?;
    let (stamp, rest) = rest.trim_start().split_once(": ")?;
    let ts_ns = parse_stamp(stamp)?;
    let (name, fields) = rest.split_once(": ").unwrap_or((rest, ""));
    let kind = match name {
        "hrtimer_start" => Kind::TimerArmed {
            timer: hex_field(fields, "hrtimer=")?,
            sleeper: field(fields, "function=")? == "hrtimer_wakeup",
            expires_ns: field(fields, "expires=")?.parse().ok()?,
        },
        "hrtimer_expire_entry" => Kind::TimerFired {
            timer: hex_field(fields, "hrtimer=")?,
            now_ns: field(fields, "now=")?.parse().ok()?,
        },
        "local_timer_entry" => Kind::WorkBegin(TIMER_INTERRUPT.into()),
        "reschedule_entry" => Kind::WorkBegin("reschedule interrupt".into()),
        "call_function_entry" | "call_function_single_entry" => {
            Kind::WorkBegin("function call interrupt".into())
        }
        "irq_handler_entry" => Kind::WorkBegin(format!(
            "irq {} {}",
            field(fields, "irq=")?,
            field(fields, "name=").unwrap_or("?")
        )),
        "softirq_entry" => Kind::WorkBegin(format!(
            "softirq {}",
            field(fields, "[action=")?.trim_end_matches(']')
        )),
        "local_timer_exit"
        | "reschedule_exit"
        | "call_function_exit"
        | "call_function_single_exit"
        | "irq_handler_exit"
        | "softirq_exit" => Kind::WorkEnd,
        "sched_switch" => Kind::Switch {
            prev_comm: between(fields, "prev_comm=", " prev_pid=")?.into(),
            next_comm: between(fields, "next_comm=", " next_pid=")?.into(),
            next_pid: field(fields, "next_pid=")?.parse().ok()?,
        },
        _ => return None,
    };
    Some(Event {
        ts_ns,
        cpu,
        pid,
        comm: comm.to_owned(),
        kind,
    })
}

/// The byte range of the first ` [digits]` in `line`: the offsets of its ` ` and its `]`.
fn cpu_column(line: &str) -> Option<(usize, usize)> {
    let bytes = line.as_bytes();
    let mut from = 0;
    while let Some(at) = line[from..].find(" [").map(|i| i + from) {
        let digits = bytes[at + 2..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        if digits > 0 && bytes.get(at + 2 + digits) == Some(&b']') {
            return Some((at, at + 2 + digits));
        }
        from = at + 2;
    }
    None
}

/// `SECONDS.FRACTION` (up to nine digits of fraction) in ns.
fn parse_stamp(stamp: &str) -> Option<u64> {
    let (secs, frac) = stamp.trim().split_once('.')?;
    if frac.is_empty() || frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let scale = 10u64.pow(9 - frac.len() as u32);
    let secs: u64 = secs.parse().ok()?;
    secs.checked_mul(1_000_000_000)?
        .checked_add(frac.parse::<u64>().ok()? * scale)
}

/// The value after `key` up to the next space.
fn field<'a>(fields: &'a str, key: &str) -> Option<&'a str> {
    let start = fields.find(key)? + key.len();
    Some(fields[start..].split(' ').next().unwrap_or(""))
}

/// The value after `key` up to `end` (a command's name may hold spaces).
fn between<'a>(fields: &'a str, key: &str, end: &str) -> Option<&'a str> {
    let start = fields.find(key)? + key.len();
    let len = fields[start..].find(end)?;
    Some(&fields[start..start + len])
}

fn hex_field(fields: &str, key: &str) -> Option<u64> {
    u64::from_str_radix(field(fields, key)?.trim_start_matches("0x"), 16).ok()
}

/// Why one wake-up came late: what the CPU was doing for the longest part of its delay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "cause", rename_all = "snake_case")]
pub enum Cause {
    /// The CPU was idle while the timer interrupt was overdue: the virtual CPU was not running.
    Absent,
    /// `task` ran while the timer interrupt was overdue: its kernel work held interrupts off,
    /// or the virtual CPU was away.
    Task {
        /// The task that was running.
        task: String,
    },
    /// An interrupt handler or softirq ran while the timer interrupt was overdue.
    Handler {
        /// Which.
        work: String,
    },
    /// The timer fired in time; the thread then waited for its CPU behind `work`.
    Waited {
        /// What ran longest before the thread did.
        work: String,
    },
}

/// One late wake-up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LateWakeup {
    /// When it was due, ns (`CLOCK_MONOTONIC`).
    pub due_ns: u64,
    /// How late the thread ran, ns.
    pub late_ns: u64,
    /// How late the timer interrupt that woke it came, ns.
    pub interrupt_late_ns: u64,
    /// The CPU it was due on.
    pub cpu: u32,
    /// How long the piece that names the cause lasted, ns.
    pub cause_ns: u64,
    /// Why.
    #[serde(flatten)]
    pub cause: Cause,
}

/// The late wake-ups of one kind of cause.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CauseTotal {
    /// How many.
    pub count: u64,
    /// Their delays added up, ns.
    pub late_ns: u64,
    /// The latest of them, ns.
    pub worst_ns: u64,
}

impl CauseTotal {
    fn add(&mut self, late_ns: u64) {
        self.count += 1;
        self.late_ns += late_ns;
        self.worst_ns = self.worst_ns.max(late_ns);
    }
}

/// How many of a thread's timed wake-ups came late, and why.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Attribution {
    /// Timed wake-ups of the thread found in the trace (armed, fired and run).
    pub wakeups: u64,
    /// A wake-up is late when the thread ran more than this after its due time, ns.
    pub late_after_ns: u64,
    /// Late: the CPU absent ([`Cause::Absent`]).
    pub absent: CauseTotal,
    /// Late: the timer overdue while a task ran ([`Cause::Task`]).
    pub task: CauseTotal,
    /// Late: the timer overdue in an interrupt handler or softirq ([`Cause::Handler`]).
    pub handler: CauseTotal,
    /// Late: fired in time, then waited for the CPU ([`Cause::Waited`]).
    pub waited: CauseTotal,
    /// The latest wake-ups, latest first (at most [`WORST_KEPT`]).
    pub worst: Vec<LateWakeup>,
    /// Events the kernel's ring buffer dropped: while not 0, some wake-ups may be missing.
    pub lost_events: u64,
}

/// The late wake-ups [`Attribution::worst`] keeps.
pub const WORST_KEPT: usize = 10;

impl Attribution {
    /// All late wake-ups.
    pub fn late(&self) -> u64 {
        self.absent.count + self.task.count + self.handler.count + self.waited.count
    }
}

/// What a CPU was doing between two of its events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Doing {
    /// Nothing: the idle task ran.
    Idle,
    /// A task ran (its name's index in the analysis's table of names).
    Task(usize),
    /// An interrupt handler or softirq ran (its name's index).
    Work(usize),
}

/// One CPU's events with what it was doing after each.
struct CpuLog<'a> {
    events: Vec<&'a Event>,
    doing: Vec<Doing>,
}

/// Names interned, so a [`Doing`] is `Copy`.
#[derive(Default)]
struct Names {
    index: HashMap<String, usize>,
    names: Vec<String>,
}

impl Names {
    fn of(&mut self, name: &str) -> usize {
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        self.names.push(name.to_owned());
        self.index.insert(name.to_owned(), self.names.len() - 1);
        self.names.len() - 1
    }
}

/// Attributes the timed wake-ups of thread `tid` in `events` (in the trace's order), calling
/// one late when the thread ran more than `late_after_ns` after its due time. `lost_events`
/// is carried into the result.
pub fn attribute(events: &[Event], tid: u32, late_after_ns: u64, lost_events: u64) -> Attribution {
    let mut names = Names::default();
    let logs = cpu_logs(events, &mut names);
    let mut result = Attribution {
        late_after_ns,
        lost_events,
        ..Attribution::default()
    };
    let mut late = Vec::new();
    for (&cpu, log) in &logs {
        let mut armed: HashMap<u64, u64> = HashMap::new();
        for (i, e) in log.events.iter().enumerate() {
            match e.kind {
                Kind::TimerArmed {
                    timer,
                    sleeper: true,
                    expires_ns,
                } if e.pid == tid => {
                    armed.insert(timer, expires_ns);
                }
                Kind::TimerFired { timer, .. } => {
                    let Some(due) = armed.remove(&timer) else {
                        continue;
                    };
                    let Some(ran) = ran_at(log, i, tid) else {
                        continue;
                    };
                    result.wakeups += 1;
                    if ran.saturating_sub(due) > late_after_ns {
                        late.push(judge(log, i, cpu, due, ran, &names));
                    }
                }
                _ => {}
            }
        }
    }
    late.sort_by(|a, b| b.late_ns.cmp(&a.late_ns).then(a.due_ns.cmp(&b.due_ns)));
    for w in &late {
        match w.cause {
            Cause::Absent => result.absent.add(w.late_ns),
            Cause::Task { .. } => result.task.add(w.late_ns),
            Cause::Handler { .. } => result.handler.add(w.late_ns),
            Cause::Waited { .. } => result.waited.add(w.late_ns),
        }
    }
    late.truncate(WORST_KEPT);
    result.worst = late;
    result
}

/// Each CPU's events, with what it was doing after each (before a CPU's first switch, its
/// task is the one its events were recorded in).
fn cpu_logs<'a>(events: &'a [Event], names: &mut Names) -> BTreeMap<u32, CpuLog<'a>> {
    let mut logs = BTreeMap::new();
    // Per CPU: the task, then the interrupt handlers and softirqs nested in it.
    let mut stacks: HashMap<u32, Vec<Doing>> = HashMap::new();
    let mut running: HashMap<u32, u32> = HashMap::new();
    for e in events {
        let stack = stacks.entry(e.cpu).or_default();
        // An event recorded in another task than the one last switched to: a switch the trace
        // did not record (some kernels record none from the idle task).
        if running.insert(e.cpu, e.pid) != Some(e.pid) {
            stack.clear();
            stack.push(task_doing(e.pid, &e.comm, names));
        }
        match &e.kind {
            Kind::WorkBegin(what) => stack.push(Doing::Work(names.of(what))),
            // The task at the bottom stays: an end whose beginning the trace missed.
            Kind::WorkEnd if stack.len() > 1 => {
                stack.pop();
            }
            Kind::Switch {
                next_comm,
                next_pid,
                ..
            } => {
                // Tasks switch at task level: whatever was nested has ended.
                stack.clear();
                stack.push(task_doing(*next_pid, next_comm, names));
                running.insert(e.cpu, *next_pid);
            }
            _ => {}
        }
        let log = logs.entry(e.cpu).or_insert_with(|| CpuLog {
            events: Vec::new(),
            doing: Vec::new(),
        });
        log.events.push(e);
        log.doing.push(stack.last().copied().unwrap_or(Doing::Idle));
    }
    logs
}

fn task_doing(pid: u32, comm: &str, names: &mut Names) -> Doing {
    if pid == 0 {
        Doing::Idle
    } else {
        Doing::Task(names.of(&format!("{comm} ({pid})")))
    }
}

/// When thread `tid` ran after its timer fired at event `fired` of `log`: at the switch to
/// it; at once when it was still on its CPU (the event is recorded in its context); or, on
/// an idle CPU, when the interrupt returned to the idle task, which yields to the woken
/// thread at once (some kernels do not record that switch). `None` when the trace ends
/// first.
fn ran_at(log: &CpuLog<'_>, fired: usize, tid: u32) -> Option<u64> {
    let mut after = log.events[fired..].iter().zip(&log.doing[fired..]);
    let (first, _) = after.next()?;
    if first.pid == tid {
        return Some(first.ts_ns);
    }
    after
        .find(|(e, &doing)| {
            e.pid == tid
                || doing == Doing::Idle
                || matches!(e.kind, Kind::Switch { next_pid, .. } if next_pid == tid)
        })
        .map(|(e, _)| e.ts_ns)
}

/// Judges a late wake-up: due at `due`, its timer fired at event `fired` of `log` (CPU
/// `cpu`), the thread ran at `ran`.
fn judge(
    log: &CpuLog<'_>,
    fired: usize,
    cpu: u32,
    due: u64,
    ran: u64,
    names: &Names,
) -> LateWakeup {
    let fired_ts = log.events[fired].ts_ns;
    // The interrupt that fired the timer: the last timer interrupt begun before it.
    let interrupt_ts = log.events[..=fired]
        .iter()
        .rev()
        .take_while(|e| e.ts_ns >= due)
        .find(|e| matches!(&e.kind, Kind::WorkBegin(w) if w == TIMER_INTERRUPT))
        .map_or(fired_ts, |e| e.ts_ns)
        .max(due);
    let late_ns = ran.saturating_sub(due);
    let interrupt_late_ns = interrupt_ts.saturating_sub(due);
    let name = |n: usize| names.names[n].clone();
    // The piece of the whole delay that names its cause, and whether the interrupt's own
    // delay was most of it.
    let (doing, cause_ns) = longest(log, due, ran);
    let interrupt_late = interrupt_late_ns * 2 >= late_ns;
    let cause = match doing {
        // The idle loop runs with interrupts on: the CPU was not running.
        Doing::Idle => Cause::Absent,
        Doing::Task(n) if interrupt_late => Cause::Task { task: name(n) },
        Doing::Work(n) if interrupt_late => Cause::Handler { work: name(n) },
        Doing::Task(n) | Doing::Work(n) => Cause::Waited { work: name(n) },
    };
    LateWakeup {
        due_ns: due,
        late_ns,
        interrupt_late_ns,
        cpu,
        cause_ns,
        cause,
    }
}

/// What `log`'s CPU did longest within `[from, to)`, and for how long: the window is cut at
/// every event recorded in it.
fn longest(log: &CpuLog<'_>, from: u64, to: u64) -> (Doing, u64) {
    let first = log.events.partition_point(|e| e.ts_ns <= from);
    // What it was doing when the window opened.
    let mut doing = match first {
        0 => log.doing.first().copied().unwrap_or(Doing::Idle),
        _ => log.doing[first - 1],
    };
    let (mut best, mut best_ns) = (doing, 0);
    let mut at = from;
    for (e, &after) in log.events[first..].iter().zip(&log.doing[first..]) {
        let ts = e.ts_ns.min(to);
        if ts.saturating_sub(at) > best_ns {
            (best, best_ns) = (doing, ts - at);
        }
        if e.ts_ns >= to {
            return (best, best_ns);
        }
        (at, doing) = (ts, after);
    }
    if to.saturating_sub(at) > best_ns {
        (best, best_ns) = (doing, to - at);
    }
    (best, best_ns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// From a trace of `rtemu lab sleep --methods sleep --fifo 40 --cpu 1` on this project's
    /// 2-vCPU VM: a wake-up due at …044540040 whose timer interrupt came 99 ms late to an
    /// idle CPU (and one before it, 49 µs late, in time).
    const ABSENT: &str = "\
# tracer: nop
           rtemu-23099   [001] d..1. 42374.041270: hrtimer_start: hrtimer=00000000739d118c function=hrtimer_wakeup expires=42374043031907 softexpires=42374043031907 mode=ABS was_armed=0
           rtemu-23099   [001] d..2. 42374.041278: sched_switch: prev_comm=rtemu prev_pid=23099 prev_prio=59 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
          <idle>-0       [001] d.h1. 42374.043056: local_timer_entry: vector=236
          <idle>-0       [001] d.h1. 42374.043058: hrtimer_expire_entry: hrtimer=00000000739d118c function=hrtimer_wakeup now=42374043056698
          <idle>-0       [001] dNh1. 42374.043070: local_timer_exit: vector=236
           rtemu-23099   [001] d..1. 42374.043081: hrtimer_start: hrtimer=00000000d27b0fe5 function=hrtimer_wakeup expires=42374044540040 softexpires=42374044540040 mode=ABS was_armed=0
           rtemu-23099   [001] d..2. 42374.043084: sched_switch: prev_comm=rtemu prev_pid=23099 prev_prio=59 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
          <idle>-0       [001] d.h1. 42374.143666: local_timer_entry: vector=236
          <idle>-0       [001] d.h1. 42374.143670: hrtimer_expire_entry: hrtimer=00000000c381c11e function=tick_nohz_handler now=42374143668073
          <idle>-0       [001] d.h2. 42374.143681: hrtimer_start: hrtimer=00000000c381c11e function=tick_nohz_handler expires=42374144000000 softexpires=42374144000000 mode=ABS was_armed=0
          <idle>-0       [001] d.h1. 42374.143681: hrtimer_expire_entry: hrtimer=00000000d27b0fe5 function=hrtimer_wakeup now=42374143668073
          <idle>-0       [001] dNh1. 42374.143706: local_timer_exit: vector=236
          <idle>-0       [001] .Ns1. 42374.143707: softirq_entry: vec=1 [action=TIMER]
          <idle>-0       [001] .Ns1. 42374.143720: softirq_exit: vec=1 [action=TIMER]
           rtemu-23099   [001] d..1. 42374.143750: hrtimer_start: hrtimer=000000007081b283 function=hrtimer_wakeup expires=42374144824365 softexpires=42374144824365 mode=ABS was_armed=0
           rtemu-23099   [001] d..2. 42374.143756: sched_switch: prev_comm=rtemu prev_pid=23099 prev_prio=59 prev_state=S ==> next_comm=kworker/1:0 next_pid=20729 next_prio=120
CPU:1 [LOST 3 EVENTS]
";

    fn parse_all(text: &str) -> (Vec<Event>, u64) {
        let (mut events, mut lost) = (Vec::new(), 0);
        for line in text.lines() {
            match parse_line(line) {
                Line::Event(e) => events.push(e),
                Line::Lost(n) => lost += n,
                Line::Other => {}
            }
        }
        (events, lost)
    }

    #[test]
    fn trace_lines_parse_into_the_events_they_record() {
        let (events, lost) = parse_all(ABSENT);
        assert_eq!(lost, 3);
        assert_eq!(events.len(), 16, "every line but the comment and the loss");
        assert_eq!(
            events[0],
            Event {
                ts_ns: 42_374_041_270_000,
                cpu: 1,
                pid: 23099,
                comm: "rtemu".into(),
                kind: Kind::TimerArmed {
                    timer: 0x739d118c,
                    sleeper: true,
                    expires_ns: 42_374_043_031_907
                }
            }
        );
        assert_eq!(
            events[1].kind,
            Kind::Switch {
                prev_comm: "rtemu".into(),
                next_comm: "swapper/1".into(),
                next_pid: 0
            }
        );
        assert_eq!(events[2].kind, Kind::WorkBegin("timer interrupt".into()));
        assert_eq!((events[2].pid, events[2].comm.as_str()), (0, "<idle>"));
        assert_eq!(
            events[3].kind,
            Kind::TimerFired {
                timer: 0x739d118c,
                now_ns: 42_374_043_056_698
            }
        );
        assert_eq!(events[4].kind, Kind::WorkEnd);
        assert_eq!(events[12].kind, Kind::WorkBegin("softirq TIMER".into()));
        // A name with spaces and dashes, an interrupt handler, nanosecond stamps.
        let line = "  Web Content-x-1234 [000] d.h1. 17.000000123: irq_handler_entry: irq=24 name=virtio0-input.0";
        let Line::Event(e) = parse_line(line) else {
            panic!("not parsed: {line}");
        };
        assert_eq!(
            (e.comm.as_str(), e.pid, e.cpu, e.ts_ns),
            ("Web Content-x", 1234, 0, 17_000_000_123)
        );
        assert_eq!(e.kind, Kind::WorkBegin("irq 24 virtio0-input.0".into()));
        for other in [
            "",
            "# tracer: nop",
            "  rtemu-1 [001] d..1. 1.000001: sched_wakeup: comm=x pid=2",
            "  rtemu-1 [001] d..1. 1.000001: hrtimer_start: hrtimer=zz function=f expires=1",
            "no cpu column here: hrtimer_start",
        ] {
            assert_eq!(parse_line(other), Line::Other, "{other:?}");
        }
    }

    #[test]
    fn an_interrupt_late_to_an_idle_cpu_is_the_cpu_absent() {
        let (events, lost) = parse_all(ABSENT);
        let a = attribute(&events, 23099, 100_000, lost);
        assert_eq!(a.wakeups, 2, "the third wake-up never fired in the excerpt");
        assert_eq!(a.late(), 1, "the first was 49 µs late: in time");
        assert_eq!(a.absent.count, 1);
        assert_eq!(a.lost_events, 3);
        let w = &a.worst[0];
        assert_eq!(w.cause, Cause::Absent);
        assert_eq!(w.due_ns, 42_374_044_540_040);
        // Ran when the interrupt returned to the idle task (the switch is not recorded here),
        // the interrupt at .143666.
        assert_eq!(w.late_ns, 42_374_143_706_000 - 42_374_044_540_040);
        assert_eq!(w.interrupt_late_ns, 42_374_143_666_000 - 42_374_044_540_040);
        assert_eq!(w.cause_ns, w.interrupt_late_ns);
        assert_eq!(a.absent.late_ns, w.late_ns);
        assert_eq!(a.absent.worst_ns, w.late_ns);
        // Another thread's wake-ups are not this one's.
        assert_eq!(attribute(&events, 4242, 100_000, 0).wakeups, 0);
    }

    /// Thread 10 going to sleep at 200 µs, switching to `comm` (`pid`).
    fn asleep(comm: &str, pid: u32) -> String {
        format!(" lab-10 [000] d..2. 0.000200: sched_switch: prev_comm=lab prev_pid=10 prev_prio=59 prev_state=S ==> next_comm={comm} next_pid={pid} next_prio=120\n")
    }

    /// A trace written by hand: thread 10 sleeps on CPU 0 until 1 000 000 ns, after `before`;
    /// its timer interrupt comes at `interrupt` while `running` (`COMM-PID`) runs, which
    /// switches to it at `ran`.
    fn scenario(before: &str, running: &str, interrupt: u64, ran: u64) -> Vec<Event> {
        let mut text = String::from(
            " lab-10 [000] d..1. 0.000100: hrtimer_start: hrtimer=00000000000000aa function=hrtimer_wakeup expires=1000000 softexpires=1000000 mode=ABS was_armed=0\n",
        );
        text.push_str(before);
        let t = |ns: u64| format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000);
        let (comm, pid) = running.rsplit_once('-').unwrap();
        for (at, event) in [
            (interrupt, "local_timer_entry: vector=236".to_owned()),
            (
                interrupt + 1_000,
                format!("hrtimer_expire_entry: hrtimer=00000000000000aa function=hrtimer_wakeup now={}", interrupt + 1_000),
            ),
            (interrupt + 2_000, "local_timer_exit: vector=236".to_owned()),
            (
                ran,
                format!("sched_switch: prev_comm={comm} prev_pid={pid} prev_prio=120 prev_state=R ==> next_comm=lab next_pid=10 next_prio=59"),
            ),
        ] {
            text.push_str(&format!(" {running} [000] d.h1. {}: {event}\n", t(at)));
        }
        parse_all(&text).0
    }

    #[test]
    fn a_handler_in_the_delay_is_named() {
        let before = asleep("swapper/0", 0)
            + " <idle>-0 [000] .Ns1. 0.001010: softirq_entry: vec=3 [action=NET_RX]\n"
            + " <idle>-0 [000] .Ns1. 0.001900: softirq_exit: vec=3 [action=NET_RX]\n";
        let a = attribute(
            &scenario(&before, "<idle>-0", 1_905_000, 1_910_000),
            10,
            100_000,
            0,
        );
        assert_eq!((a.wakeups, a.handler.count, a.late()), (1, 1, 1));
        let w = &a.worst[0];
        assert_eq!(
            w.cause,
            Cause::Handler {
                work: "softirq NET_RX".into()
            }
        );
        assert_eq!(
            (w.late_ns, w.interrupt_late_ns, w.cause_ns),
            (907_000, 905_000, 890_000)
        );
    }

    #[test]
    fn a_task_running_while_the_timer_is_overdue_is_named() {
        let before = &asleep("cc1 plus", 500);
        let a = attribute(
            &scenario(before, "cc1 plus-500", 3_000_000, 3_004_000),
            10,
            100_000,
            0,
        );
        assert_eq!(a.task.count, 1);
        assert_eq!(
            a.worst[0].cause,
            Cause::Task {
                task: "cc1 plus (500)".into()
            }
        );
        assert_eq!(a.worst[0].cause_ns, 2_000_000);
    }

    #[test]
    fn a_timer_in_time_and_a_busy_cpu_after_it_is_waiting() {
        let before = &asleep("hog", 77);
        let a = attribute(
            &scenario(before, "hog-77", 1_005_000, 4_000_000),
            10,
            100_000,
            0,
        );
        assert_eq!(a.waited.count, 1);
        let w = &a.worst[0];
        assert_eq!(
            w.cause,
            Cause::Waited {
                work: "hog (77)".into()
            }
        );
        assert_eq!((w.late_ns, w.interrupt_late_ns), (3_000_000, 5_000));
        assert_eq!(w.cause_ns, 4_000_000 - 1_005_000 - 2_000);
        // An idle CPU whose switch to the thread is recorded late (or, as on some kernels,
        // not at all): the thread runs when the interrupt returns to the idle task.
        let idle = &asleep("swapper/0", 0);
        let a = attribute(
            &scenario(idle, "<idle>-0", 1_005_000, 1_500_000),
            10,
            100_000,
            0,
        );
        assert_eq!((a.wakeups, a.late()), (1, 0));
        // A switch the trace missed shows in whose name the next event is recorded.
        let missed = " hog-77 [000] d..1. 0.000900: softirq_entry: vec=1 [action=TIMER]\n hog-77 [000] d..1. 0.000901: softirq_exit: vec=1 [action=TIMER]\n";
        let both = format!("{idle}{missed}");
        let a = attribute(
            &scenario(&both, "hog-77", 1_005_000, 1_500_000),
            10,
            100_000,
            0,
        );
        assert_eq!(a.waited.count, 1);
        assert_eq!(
            a.worst[0].cause,
            Cause::Waited {
                work: "hog (77)".into()
            }
        );
        // In time: not late at all.
        let a = attribute(
            &scenario(before, "hog-77", 1_005_000, 1_050_000),
            10,
            100_000,
            0,
        );
        assert_eq!((a.wakeups, a.late()), (1, 0));
        assert!(a.worst.is_empty());
    }

    /// One line of a random trace: a few threads, timers and kinds of work on two CPUs.
    fn line() -> impl Strategy<Value = String> {
        (0u64..5_000, 0u32..2, 0u32..4, 0u8..7, 0u64..4, 0u64..6_000).prop_map(
            |(at_us, cpu, pid, what, timer, ns_us)| {
                let head = format!(" t-{pid} [{cpu:03}] d..1. 0.{:06}: ", at_us);
                let fields = match what {
                    0 => format!("hrtimer_start: hrtimer={timer:x} function=hrtimer_wakeup expires={} softexpires=0 mode=ABS", ns_us * 1_000),
                    1 => format!("hrtimer_expire_entry: hrtimer={timer:x} function=hrtimer_wakeup now={}", ns_us * 1_000),
                    2 => "local_timer_entry: vector=236".into(),
                    3 => "local_timer_exit: vector=236".into(),
                    4 => "softirq_entry: vec=3 [action=NET_RX]".into(),
                    5 => "softirq_exit: vec=3 [action=NET_RX]".into(),
                    _ => format!("sched_switch: prev_comm=t prev_pid={pid} prev_prio=1 prev_state=S ==> next_comm=t next_pid={timer} next_prio=1"),
                };
                head + &fields
            },
        )
    }

    proptest! {
        #[test]
        fn any_trace_gives_consistent_totals(mut lines in prop::collection::vec(line(), 0..300)) {
            // A trace is in time order.
            lines.sort_by_key(|l| l.split_once("0.").map(|(_, r)| r[..6].to_owned()));
            let events: Vec<Event> = lines
                .iter()
                .filter_map(|l| match parse_line(l) {
                    Line::Event(e) => Some(e),
                    _ => None,
                })
                .collect();
            prop_assert_eq!(events.len(), lines.len(), "every generated line parses");
            for tid in 0..4 {
                let a = attribute(&events, tid, 100_000, 0);
                let fired = events.iter().filter(|e| matches!(e.kind, Kind::TimerFired { .. })).count() as u64;
                prop_assert!(a.wakeups <= fired);
                prop_assert!(a.late() <= a.wakeups);
                let kept = a.late().min(WORST_KEPT as u64) as usize;
                prop_assert_eq!(a.worst.len(), kept);
                prop_assert!(a.worst.windows(2).all(|w| w[0].late_ns >= w[1].late_ns));
                for w in &a.worst {
                    prop_assert!(w.late_ns > 100_000);
                    prop_assert!(w.cause_ns <= w.late_ns);
                    prop_assert!(w.interrupt_late_ns <= w.late_ns);
                }
                let total = a.absent.late_ns + a.task.late_ns + a.handler.late_ns + a.waited.late_ns;
                prop_assert!(total >= a.worst.iter().map(|w| w.late_ns).sum::<u64>());
            }
        }
    }
}
