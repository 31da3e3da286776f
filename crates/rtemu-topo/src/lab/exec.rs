//! Commands in a lab's nodes: `exec` (attached or detached), `logs`, and the start-up
//! commands of the file.

use std::io;
use std::process::{Command, Stdio};

use crate::cgroup;
use crate::state::{lab_dir, Detached, LabName, State};
use crate::sys;
use crate::topology::Topology;

use super::error::{io_err, LabError};

/// Starts `argv` in node `node` of the lab in `state`, detached: in its own process group
/// (a Ctrl-C at the terminal spares it), standard input from `/dev/null`, standard output and
/// error into `/run/rtemu/<lab>/<node>.<n>.log` (`n` = 1, 2, … per node). It is recorded in the
/// lab's state directory ([`crate::state::detached`]) and ended by [`down`](fn@super::down). The caller does
/// not wait for it: once the caller exits, init reaps it.
/// With `bare`, it runs in the node's namespace even when the node has a container
/// ([`exec_command`]).
pub fn exec_detached(
    state: &State,
    node: &str,
    argv: &[String],
    bare: bool,
) -> Result<Detached, LabError> {
    let mut cmd = exec_command(state, node, argv, bare, false)?;
    let dir = lab_dir(&state.lab);
    // The first free number: creating the file claims it, also against a concurrent exec.
    let mut n = 1;
    let (log_path, log) = loop {
        let path = dir.join(format!("{node}.{n}.log"));
        match std::fs::File::create_new(&path) {
            Ok(f) => break (path, f),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => n += 1,
            Err(e) => return Err(io_err(format!("creating {}", path.display()))(e)),
        }
    };
    let out = log.try_clone().map_err(io_err("opening the log"))?;
    cmd.stdin(Stdio::null()).stdout(out).stderr(log);
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let what = format!("`{}` in node `{node}`", argv.join(" "));
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let _ = std::fs::remove_file(&log_path);
            return Err(io_err(format!("starting {what}"))(e));
        }
    };
    let pid = i32::try_from(child.id()).expect("pids fit in i32");
    // The child is not reaped yet, so its /proc entry is there even if it has exited.
    let start_time = crate::state::proc_stat(pid).map_or(0, |(_, start)| start);
    let record = Detached {
        pid,
        start_time,
        node: node.to_owned(),
        command: argv.to_vec(),
        log: log_path,
    };
    if let Err(e) = crate::state::record_detached(&state.lab, &record) {
        // Nothing runs that the lab does not know of.
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
        let _ = child.wait();
        return Err(io_err(format!("recording {what}"))(e));
    }
    Ok(record)
}

/// The lab `--lab` names, or the only running lab when it is left out.
pub fn resolve_lab(lab: Option<&str>) -> Result<State, LabError> {
    let name = match lab {
        Some(l) => LabName::new(l)?,
        None => {
            let labs = State::labs()?;
            match labs.as_slice() {
                [one] => one.clone(),
                _ => return Err(LabError::WhichLab(labs.len())),
            }
        }
    };
    State::load(&name)?.ok_or_else(|| LabError::NoSuchLab(name.to_string()))
}

/// A command that runs `argv` in node `node` of the lab in `state`.
pub fn node_command(state: &State, node: &str, argv: &[String]) -> Result<Command, LabError> {
    let Some((_, ns)) = state.nodes.iter().find(|(n, _)| n == node) else {
        let nodes: Vec<&str> = state.nodes.iter().map(|(n, _)| n.as_str()).collect();
        return Err(LabError::NoSuchNode {
            lab: state.lab.to_string(),
            node: node.to_owned(),
            nodes: nodes.join(", "),
        });
    };
    let mut cmd = Command::new(argv.first().map_or("sh", String::as_str));
    cmd.args(argv.iter().skip(1));
    let limit = state
        .cgroups
        .iter()
        .find(|(n, _)| n == node)
        .map(|(_, cg)| cg);
    // Off the engine's CPUs: the lab's cpuset, unless the node's CPU limit is of the same
    // hierarchy (cgroup v2), whose cgroup then holds the cpuset's CPUs too.
    let cpuset = state
        .programs
        .as_ref()
        .map(|p| &p.cgroup)
        .filter(|set| limit.is_none_or(|cg| !crate::cpuset::one_hierarchy(set, cg)));
    for cg in limit.into_iter().chain(cpuset) {
        let procs = cgroup::open_procs(cg).map_err(io_err(format!("joining {}", cg.display())))?;
        sys::join_cgroup_on_exec(&mut cmd, procs);
    }
    sys::enter_netns_on_exec(&mut cmd, ns).map_err(io_err(format!("entering {ns}")))?;
    Ok(cmd)
}

/// A command that runs `argv` in node `node` of the lab in `state` as `rtemu exec` does: in
/// the node's container when it has one (its file system and environment; `interactive`
/// keeps standard input open, with a terminal when there is one), else, or with `bare`, in
/// its namespace ([`node_command`]).
pub fn exec_command(
    state: &State,
    node: &str,
    argv: &[String],
    bare: bool,
    interactive: bool,
) -> Result<Command, LabError> {
    if bare || !crate::launch::has_container(state, node) {
        return node_command(state, node, argv);
    }
    let here = [state.topology.node_index(node).expect("a node of the lab")];
    let rt = crate::launch::runtime_for(&state.topology, &here)?.expect("an image node");
    let name = crate::launch::container_name(&state.lab, node);
    Ok(crate::runtime::Runtime::exec(&rt, &name, argv, interactive))
}

/// A command that prints node `node`'s output, as `rtemu logs` does: its container's (its
/// entrypoint's and command's), else that of its start-up commands
/// (`/run/rtemu/<lab>/<node>.log`); the last `tail` lines when given, then what follows when
/// `follow`.
pub fn logs_command(
    state: &State,
    node: &str,
    follow: bool,
    tail: Option<u32>,
) -> Result<Command, LabError> {
    // The node's name is checked against the lab's before it becomes a path.
    node_command(state, node, &[])?;
    if crate::launch::has_container(state, node) {
        let here = [state.topology.node_index(node).expect("a node of the lab")];
        let rt = crate::launch::runtime_for(&state.topology, &here)?.expect("an image node");
        let name = crate::launch::container_name(&state.lab, node);
        return Ok(crate::runtime::Runtime::logs(&rt, &name, follow, tail));
    }
    let log = lab_dir(&state.lab).join(format!("{node}.log"));
    if !log.exists() {
        return Err(LabError::NoLogs(node.to_owned()));
    }
    let mut cmd = Command::new("tail");
    cmd.arg("-n")
        .arg(tail.map_or("+1".to_owned(), |n| n.to_string()));
    if follow {
        cmd.arg("--follow=name");
    }
    cmd.arg("--").arg(log);
    Ok(cmd)
}

/// Starts the start-up commands of the nodes `local` (indices) (`sh -c`), detached, output in
/// `/run/rtemu/<lab>/<node>.log`, with `RTEMU_LAB`, `RTEMU_NODE` and `RTEMU_DIR` (the lab's
/// state directory, removed at `down`) set. `down` ends them with their namespace.
pub(super) fn start_commands(
    topo: &Topology,
    local: &[usize],
    state: &State,
) -> Result<(), LabError> {
    // An image node's start-up commands run in its container, once it started.
    for node in local
        .iter()
        .map(|&ni| &topo.nodes[ni])
        .filter(|n| !n.run.is_empty() && n.container.is_none())
    {
        let log_path = lab_dir(&state.lab).join(format!("{}.log", node.name));
        let log = std::fs::File::create(&log_path)
            .map_err(io_err(format!("creating {}", log_path.display())))?;
        for line in &node.run {
            let argv = ["sh".to_owned(), "-c".to_owned(), line.clone()];
            let mut cmd = node_command(state, &node.name, &argv)?;
            let out = log.try_clone().map_err(io_err("opening the log"))?;
            let err = log.try_clone().map_err(io_err("opening the log"))?;
            // Who and where the command is, so one command line can serve every node (a
            // routing daemon's configuration and control socket, for instance).
            cmd.env("RTEMU_LAB", &topo.lab)
                .env("RTEMU_NODE", &node.name)
                .env("RTEMU_DIR", lab_dir(&state.lab))
                .envs(node.env.iter().map(|(k, v)| (k, v)))
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err);
            // Its own process group, so a Ctrl-C at the terminal that ran `up` spares it.
            std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
            cmd.spawn()
                .map_err(io_err(format!("starting `{line}` in node `{}`", node.name)))?;
        }
    }
    Ok(())
}
