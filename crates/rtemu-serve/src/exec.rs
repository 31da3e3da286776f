//! `POST /v1/labs/{lab}/nodes/{node}/exec`: a command in a node, its output returned, its time
//! limited.

use std::collections::BTreeSet;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::Stdio;
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use rtemu_api::body::{ExecReply, ExecRequest};
use rtemu_topo::state::State;

use crate::error::ApiError;

/// The most arguments a command may have.
pub const MAX_ARGV: usize = 256;

/// The most bytes of each output stream kept; the rest is read and dropped, so the command
/// never blocks on a full pipe.
pub const MAX_OUTPUT: usize = 16 << 20;

/// The time limit when the request gives none, seconds.
pub const DEFAULT_TIMEOUT: f64 = 60.0;

/// The longest time limit, seconds.
pub const MAX_TIMEOUT: f64 = 3600.0;

/// How long output is still read after the command ended, for what a process that left its
/// process group still writes.
const DRAIN: Duration = Duration::from_secs(1);

/// The processes [`run`] started and waits for itself, which [`reap_orphans`] leaves alone.
static WAITED: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

/// Reaps the server's children that ended and that no request waits for: the engines `up`
/// started, and the commands of nodes' `run` lines. They outlive the request that started them,
/// and the server, unlike `rtemu up`, does not exit to hand them to init, so without this each
/// lab taken down would leave zombies. A child younger than [`YOUNG`] is left alone: whoever
/// started it may still be watching it (an engine's start waits up to 10 s for its answer).
pub fn reap_orphans() {
    reap_older_than(YOUNG);
}

/// Reaps this process's ended children older than `young` that no request waits for.
fn reap_older_than(young: Duration) {
    let waited = WAITED.lock().unwrap_or_else(|e| e.into_inner());
    let me = std::process::id().to_string();
    // Start times count clock ticks of 1/100 s (USER_HZ, fixed on Linux).
    let ticks = 100;
    // Seconds since boot, the clock process start times count on.
    let Some(now) = std::fs::read_to_string("/proc/uptime")
        .ok()
        .and_then(|u| u.split_whitespace().next()?.parse::<f64>().ok())
    else {
        return;
    };
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return;
    };
    for entry in procs.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        if waited.contains(&pid) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // After the command name (in parentheses, maybe holding spaces): the state (field 3),
        // the parent (4), ..., the start time in ticks after boot (22).
        let fields: Vec<&str> = stat[stat.rfind(')').map_or(0, |i| i + 1)..]
            .split_whitespace()
            .collect();
        let (Some(&"Z"), Some(&ppid), Some(start)) = (
            fields.first(),
            fields.get(1),
            fields.get(22 - 3).and_then(|s| s.parse::<u64>().ok()),
        ) else {
            continue;
        };
        let age = now - (start / ticks) as f64;
        if ppid == me && age >= young.as_secs_f64() {
            let _ = nix::sys::wait::waitpid(
                Pid::from_raw(pid),
                Some(nix::sys::wait::WaitPidFlag::WNOHANG),
            );
        }
    }
}

/// How long after its start a child is left to whoever started it.
const YOUNG: Duration = Duration::from_secs(15);

/// Checks a request: its argv and time limit.
pub fn check(req: &ExecRequest) -> Result<Duration, ApiError> {
    if req.argv.is_empty() || req.argv.len() > MAX_ARGV {
        return Err(ApiError::bad_request(format!(
            "argv has {} elements: give the program and its arguments, 1 to {MAX_ARGV} elements",
            req.argv.len()
        )));
    }
    if req.argv[0].is_empty() {
        return Err(ApiError::bad_request(
            "argv[0] is empty: it names the program to run",
        ));
    }
    if let Some(i) = req.argv.iter().position(|a| a.contains('\0')) {
        return Err(ApiError::bad_request(format!(
            "argv[{i}] holds a NUL character, which no program argument can"
        )));
    }
    let timeout = req.timeout.unwrap_or(DEFAULT_TIMEOUT);
    if !(timeout > 0.0 && timeout <= MAX_TIMEOUT) {
        return Err(ApiError::bad_request(format!(
            "timeout {timeout} is out of range: give seconds above 0, at most {MAX_TIMEOUT}"
        )));
    }
    Ok(Duration::from_secs_f64(timeout))
}

/// Reads `from` to its end on a thread of its own, keeping the first [`MAX_OUTPUT`] bytes;
/// fails only if the thread cannot be started.
fn collect(
    mut from: impl Read + Send + 'static,
    done: mpsc::Sender<(bool, Vec<u8>)>,
    err: bool,
) -> std::io::Result<()> {
    std::thread::Builder::new().spawn(move || {
        let mut kept = Vec::new();
        let mut buf = [0u8; 1 << 16];
        loop {
            match from.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    let room = MAX_OUTPUT - kept.len();
                    kept.extend_from_slice(&buf[..n.min(room)]);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let _ = done.send((err, kept));
    })?;
    Ok(())
}

/// Runs `req.argv` in node `node` of lab `state` in a process group of its own, standard input
/// from /dev/null; when the time limit passes, the group is killed. When the command ends,
/// what it left running in its group is killed too, so its output ends with it. Blocks.
pub fn run(state: &State, node: &str, req: &ExecRequest) -> Result<ExecReply, ApiError> {
    let timeout = check(req)?;
    let cmd = rtemu_topo::lab::exec_command(state, node, &req.argv, req.netns, false)?;
    run_command(cmd, node, &req.argv, timeout)
}

/// How long reading a node's logs may take.
const LOGS_TIMEOUT: Duration = Duration::from_secs(10);

/// The most lines of a node's logs returned.
pub const MAX_LOG_LINES: u32 = 100_000;

/// Node `node`'s output (see [`rtemu_topo::lab::logs_command`]): its last `tail` lines (at
/// most [`MAX_LOG_LINES`], which is also the default), in `stdout` and `stderr` as the node
/// wrote them.
pub fn logs(state: &State, node: &str, tail: Option<u32>) -> Result<ExecReply, ApiError> {
    let tail = tail.unwrap_or(MAX_LOG_LINES);
    if !(1..=MAX_LOG_LINES).contains(&tail) {
        return Err(ApiError::bad_request(format!(
            "tail {tail} is out of range: give 1 to {MAX_LOG_LINES} lines"
        )));
    }
    let cmd = rtemu_topo::lab::logs_command(state, node, false, Some(tail))?;
    run_command(cmd, node, &["logs".to_owned()], LOGS_TIMEOUT)
}

/// Runs `cmd` (`argv` in node `node`, for messages) as [`run`] does.
fn run_command(
    mut cmd: std::process::Command,
    node: &str,
    argv: &[String],
    timeout: Duration,
) -> Result<ExecReply, ApiError> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let started = Instant::now();
    // Recorded before the reaper can see it end.
    let mut waited = WAITED.lock().unwrap_or_else(|e| e.into_inner());
    let child = cmd.spawn().map_err(|e| {
        let status = if e.kind() == std::io::ErrorKind::NotFound {
            axum::http::StatusCode::BAD_REQUEST
        } else {
            axum::http::StatusCode::INTERNAL_SERVER_ERROR
        };
        ApiError::new(
            status,
            format!("running `{}` in node `{node}`: {e}", argv.join(" ")),
        )
    })?;
    let group = Pid::from_raw(i32::try_from(child.id()).expect("pids fit in i32"));
    waited.insert(group.as_raw());
    drop(waited);
    let reply = wait(child, group, started, timeout, argv);
    WAITED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&group.as_raw());
    reply
}

/// Waits for `child` (the leader of process group `group`) until `timeout` after `started`,
/// and collects its output.
fn wait(
    mut child: std::process::Child,
    group: Pid,
    started: Instant,
    timeout: Duration,
    argv: &[String],
) -> Result<ExecReply, ApiError> {
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().expect("piped");
    let stderr = child.stderr.take().expect("piped");
    let reading = collect(stdout, tx.clone(), false).and_then(|()| collect(stderr, tx, true));
    if let Err(e) = reading {
        // The machine is out of threads: the command is not left running unread.
        let _ = killpg(group, Signal::SIGKILL);
        let _ = child.wait();
        return Err(ApiError::new(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "starting a thread to read the output of `{}`: {e}",
                argv.join(" ")
            ),
        ));
    }
    let mut timed_out = false;
    let mut pause = Duration::from_millis(1);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => {
                let _ = killpg(group, Signal::SIGKILL);
                let _ = child.wait();
                return Err(ApiError::new(
                    axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                    format!("waiting for `{}`: {e}", argv.join(" ")),
                ));
            }
        }
        let left = timeout.saturating_sub(started.elapsed());
        if left.is_zero() {
            timed_out = true;
            let _ = killpg(group, Signal::SIGKILL);
            break child.wait().map_err(|e| {
                ApiError::new(
                    axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                    format!("waiting for `{}`: {e}", argv.join(" ")),
                )
            })?;
        }
        // Short commands answer fast; long ones are looked at every 50 ms.
        std::thread::sleep(pause.min(left));
        pause = (pause * 2).min(Duration::from_millis(50));
    };
    let duration = started.elapsed().as_secs_f64();
    // The group's other members would keep the pipes open.
    let _ = killpg(group, Signal::SIGKILL);
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let deadline = Instant::now() + DRAIN;
    for _ in 0..2 {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok((false, out)) => stdout = out,
            Ok((true, out)) => stderr = out,
            Err(_) => break,
        }
    }
    Ok(ExecReply {
        status: if timed_out { None } else { status.code() },
        signal: status.signal(),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
        timed_out,
        duration,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(argv: &[&str], timeout: Option<f64>) -> ExecRequest {
        ExecRequest {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            timeout,
            netns: false,
        }
    }

    #[test]
    fn ended_children_nobody_waits_for_are_reaped() {
        let child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        // Not waited for, as the engines `up` starts are not.
        std::mem::forget(child);
        let zombie =
            || rtemu_topo::state::proc_stat(pid as i32).is_some_and(|(state, _)| state == 'Z');
        let started = Instant::now();
        while !zombie() {
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "`true` did not end"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        // Too young to reap (its starter may be watching), then old enough.
        reap_older_than(Duration::from_secs(3600));
        assert!(zombie());
        reap_older_than(Duration::ZERO);
        assert!(
            rtemu_topo::state::proc_stat(pid as i32).is_none(),
            "pid {pid} is still there"
        );
    }

    #[test]
    fn requests_are_checked_with_the_valid_range() {
        assert_eq!(
            check(&req(&["true"], None)).unwrap(),
            Duration::from_secs(60)
        );
        assert_eq!(
            check(&req(&["true"], Some(0.5))).unwrap(),
            Duration::from_millis(500)
        );
        let e = check(&req(&[], None)).unwrap_err();
        assert!(e.message.contains("1 to 256"), "{}", e.message);
        let many: Vec<&str> = vec!["x"; 257];
        assert!(check(&req(&many, None)).is_err());
        assert!(check(&req(&[""], None)).is_err());
        assert!(check(&req(&["a\0b"], None)).is_err());
        for t in [0.0, -1.0, 3600.5, f64::NAN, f64::INFINITY] {
            let e = check(&req(&["true"], Some(t))).unwrap_err();
            assert_eq!(e.status, axum::http::StatusCode::BAD_REQUEST);
            assert!(e.message.contains("at most 3600"), "{}", e.message);
        }
    }
}
