//! A lab's containers through their life: images resolved before anything is made, each
//! container started into its node's namespace once the namespaces, links and engine are in
//! place (so its entrypoint sees its interfaces from its first instruction), in `wait_for`
//! order, `up` returning once every health check passed; found by their labels and removed at
//! `down`, also after a crash or without the state file.
//!
//! The state file needs no entry of its own for them: it records the topology (which nodes
//! run which image) and the nodes before anything is made, and a container's name and labels
//! follow from its lab and node.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::container::{Container, Pull};
use crate::naming::node_netns;
use crate::runtime::podman::{self, Podman};
use crate::runtime::{Listed, RunSpec, Runtime, RuntimeError, Status};
use crate::state::{lab_dir, State};
use crate::topology::Topology;

/// Why a lab's containers could not be brought up or down.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The runtime failed.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// Images the host lacks and may not pull.
    #[error("images not on this host, with pull = \"never\": {}; load them first (`podman load -i FILE.tar`, `podman import ROOTFS.tar NAME`; docs/containers.md)", .0.join(", "))]
    MissingImages(Vec<String>),
    /// Pulls that failed.
    #[error("pulling images failed: {}", .0.join("; "))]
    Pull(Vec<String>),
    /// Containers that did not start.
    #[error("containers did not start: {}", .0.join("; "))]
    Start(Vec<String>),
    /// Containers whose health check did not pass.
    #[error("containers are not healthy: {} (`rtemu logs NODE` shows their output)", .0.join("; "))]
    Unhealthy(Vec<String>),
}

/// The name of node `node`'s container in lab `lab`: its namespace's.
pub fn container_name(lab: &str, node: &str) -> String {
    node_netns(lab, node)
}

/// How many runtime commands run at once while a lab comes up: podman spends most of a start
/// waiting on its locks and the OCI runtime, so a few at once are faster than one by one.
const PARALLEL: usize = 4;

/// The runtime for the image nodes among `nodes` (indices) of `topo`: `None` when none has an
/// image; an error naming one when the runtime is not installed.
pub fn runtime_for(topo: &Topology, nodes: &[usize]) -> Result<Option<Podman>, LaunchError> {
    let Some(first) = nodes.iter().find(|&&n| topo.nodes[n].container.is_some()) else {
        return Ok(None);
    };
    Podman::find().map(Some).ok_or_else(|| {
        RuntimeError::Missing {
            program: "podman",
            node: topo.nodes[*first].name.clone(),
        }
        .into()
    })
}

/// Makes every image of the nodes `nodes` (indices) of `topo` present on this host before
/// anything of the lab is made: pulls (in parallel) the ones their `pull` asks for, and fails
/// naming every image that is missing with `pull = "never"`, or whose pull failed.
pub fn resolve_images(
    topo: &Topology,
    nodes: &[usize],
    rt: &dyn Runtime,
) -> Result<(), LaunchError> {
    // Per image, the strictest policy any of its nodes asks for.
    let mut images: BTreeMap<&str, Pull> = BTreeMap::new();
    for c in nodes
        .iter()
        .filter_map(|&n| topo.nodes[n].container.as_ref())
    {
        let p = images.entry(&c.image).or_insert(c.pull);
        *p = match (*p, c.pull) {
            (Pull::Always, _) | (_, Pull::Always) => Pull::Always,
            (Pull::IfNotPresent, _) | (_, Pull::IfNotPresent) => Pull::IfNotPresent,
            _ => Pull::Never,
        };
    }
    let images: Vec<(&str, Pull)> = images.into_iter().collect();
    let present = parallel(&images, |(image, pull)| match pull {
        Pull::Always => Ok(false),
        _ => rt.has_image(image),
    });
    let mut missing = Vec::new();
    let mut to_pull = Vec::new();
    for ((image, pull), present) in images.iter().zip(present) {
        match (present?, pull) {
            (true, _) => {}
            (false, Pull::Never) => missing.push(image.to_string()),
            (false, _) => to_pull.push(*image),
        }
    }
    if !missing.is_empty() {
        return Err(LaunchError::MissingImages(missing));
    }
    let pulled = parallel(&to_pull, |image| rt.pull(image));
    let failed: Vec<String> = to_pull
        .iter()
        .zip(pulled)
        .filter_map(|(image, r)| r.err().map(|e| format!("{image}: {e}")))
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(LaunchError::Pull(failed))
    }
}

/// Starts the containers of lab `state`'s nodes (a part's own, in a multi-host lab) into
/// their namespaces, in `wait_for` order: each wave starts at once, then waits until the
/// health check of each of its containers that has one passes. Starts their `run` lines in
/// them, output in `/run/rtemu/<lab>/<node>.log`. Returns once every container is up and
/// healthy; on error the caller takes the lab down.
pub fn start(state: &State, rt: &dyn Runtime) -> Result<Launched, LaunchError> {
    let mut launched = Launched::default();
    let topo = &state.topology;
    let containers: Vec<Option<Container>> = topo
        .nodes
        .iter()
        .map(|n| {
            let here = state.nodes.iter().any(|(name, _)| *name == n.name);
            n.container.clone().filter(|_| here)
        })
        .collect();
    let waves =
        crate::container::start_order(topo.nodes.iter().map(|n| n.name.as_str()), &containers)
            .expect("wait_for cycles are refused when the file is read");
    for wave in waves {
        let at = Instant::now();
        let started = parallel(&wave, |&ni| start_one(state, ni, rt));
        launched.starting += at.elapsed();
        launched.containers += wave.len();
        let failed = failures(topo, &wave, started, ": ");
        if !failed.is_empty() {
            return Err(LaunchError::Start(failed));
        }
        let checked: Vec<usize> = wave
            .into_iter()
            .filter(|&ni| {
                containers[ni]
                    .as_ref()
                    .is_some_and(|c| c.healthcheck.is_some())
            })
            .collect();
        let at = Instant::now();
        let health = parallel(&checked, |&ni| wait_healthy(state, ni, rt));
        launched.health += at.elapsed();
        let unhealthy = failures(topo, &checked, health, " ");
        if !unhealthy.is_empty() {
            return Err(LaunchError::Unhealthy(unhealthy));
        }
    }
    Ok(launched)
}

/// What starting a lab's containers took.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Launched {
    /// How many were started.
    pub containers: usize,
    /// Wall time spent starting them (waves of [`PARALLEL`] at a time).
    pub starting: Duration,
    /// Wall time spent waiting for their health checks to pass.
    pub health: Duration,
}

impl std::fmt::Display for Launched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} containers started ({:.0} ms starting, {:.0} ms waiting for health checks)",
            self.containers,
            self.starting.as_secs_f64() * 1e3,
            self.health.as_secs_f64() * 1e3
        )
    }
}

/// What failed of the nodes `nodes` (indices), by `results` in their order: each as its node's
/// name, `sep` and why.
fn failures<T, E: std::fmt::Display>(
    topo: &Topology,
    nodes: &[usize],
    results: Vec<Result<T, E>>,
    sep: &str,
) -> Vec<String> {
    nodes
        .iter()
        .zip(results)
        .filter_map(|(&ni, r)| r.err().map(|e| format!("{}{sep}{e}", topo.nodes[ni].name)))
        .collect()
}

/// Starts the containers of lab `state` on this host ([`start`]) with the installed runtime
/// (none: nothing is asked of the runtime).
pub fn start_all(state: &State) -> Result<Launched, LaunchError> {
    let here: Vec<usize> = state
        .nodes
        .iter()
        .filter_map(|(n, _)| state.topology.node_index(n))
        .collect();
    let Some(rt) = runtime_for(&state.topology, &here)? else {
        return Ok(Launched::default());
    };
    start(state, &rt)
}

/// Starts node `ni`'s container and its `run` lines.
fn start_one(state: &State, ni: usize, rt: &dyn Runtime) -> Result<(), RuntimeError> {
    let node = &state.topology.nodes[ni];
    let container = node
        .container
        .as_ref()
        .expect("only image nodes start containers");
    let ns = node_netns(&state.lab, &node.name);
    let hosts = Path::new("/etc/netns").join(&ns).join("hosts");
    let mut env = vec![
        ("RTEMU_LAB".to_owned(), state.lab.to_string()),
        ("RTEMU_NODE".to_owned(), node.name.clone()),
    ];
    env.extend(node.env.iter().cloned());
    let name = container_name(&state.lab, &node.name);
    rt.run(&RunSpec {
        name: name.clone(),
        lab: &state.lab,
        node: &node.name,
        netns: crate::sys::netns_path(&ns),
        hosts: hosts.exists().then_some(hosts),
        resolv: podman::resolv_conf(&ns),
        container,
        env,
        cpu: node.cpu,
        cpuset: state.programs.as_ref().map(|p| p.cpus.clone()),
    })?;
    if node.run.is_empty() {
        return Ok(());
    }
    let log_path = lab_dir(&state.lab).join(format!("{}.log", node.name));
    let spawn_err = |source| RuntimeError::Spawn {
        command: format!("podman exec {name} sh -c …"),
        source,
    };
    let log = std::fs::File::create(&log_path).map_err(spawn_err)?;
    for line in &node.run {
        let argv = ["sh".to_owned(), "-c".to_owned(), line.clone()];
        let mut cmd = rt.exec(&name, &argv, false);
        cmd.stdin(Stdio::null())
            .stdout(log.try_clone().map_err(spawn_err)?)
            .stderr(log.try_clone().map_err(spawn_err)?);
        // Its own process group, as a bare node's start-up commands: a Ctrl-C at the terminal
        // that ran `up` spares it; `down` ends it with its container.
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        cmd.spawn().map_err(spawn_err)?;
    }
    Ok(())
}

/// Runs node `ni`'s health check until it passes; fails once it failed `retries` times in a
/// row after the start period, or the container is no longer running.
fn wait_healthy(state: &State, ni: usize, rt: &dyn Runtime) -> Result<(), String> {
    let node = &state.topology.nodes[ni];
    let h = node
        .container
        .as_ref()
        .and_then(|c| c.healthcheck.as_ref())
        .expect("only nodes with a health check are waited for");
    let name = container_name(&state.lab, &node.name);
    let started = Instant::now();
    let start_period = Duration::from_nanos(h.start_period_ns);
    let mut failures = 0;
    loop {
        match rt.check_health(&name) {
            Ok(true) => return Ok(()),
            Ok(false) if started.elapsed() >= start_period => {
                failures += 1;
                if failures >= h.retries {
                    return Err(format!(
                        "(its health check failed {failures} times in a row)"
                    ));
                }
            }
            Ok(false) => {}
            Err(e) => {
                // Most often the container ended: say how.
                let status = rt
                    .list(&state.lab)
                    .ok()
                    .and_then(|l| l.into_iter().find(|c| c.name == name).map(|c| c.status));
                return Err(match status {
                    Some(s @ Status::Exited { .. }) => format!("({s})"),
                    _ => format!("(its health check could not run: {e})"),
                });
            }
        }
        std::thread::sleep(Duration::from_nanos(h.interval_ns));
    }
}

/// Removes every container labelled with lab `lab` (stopped at once), and the image-storage
/// leftovers of a create that was killed half-way named as one of `names` (the containers the
/// lab's state file says it makes; such a leftover has no labels, only the name, and runs
/// nothing); returns how many there were. No other container is ever touched.
pub fn remove(lab: &str, names: &[String], rt: &dyn Runtime) -> Result<usize, RuntimeError> {
    let mut ids: Vec<String> = rt.list(lab)?.into_iter().map(|l| l.id).collect();
    if !names.is_empty() {
        let orphans = rt.orphans()?;
        ids.extend(
            orphans
                .into_iter()
                .filter(|o| names.contains(&o.name))
                .map(|o| o.id),
        );
    }
    rt.remove(&ids)?;
    Ok(ids.len())
}

/// The names of the containers of lab `state` on this host.
pub fn names(state: &State) -> Vec<String> {
    state
        .nodes
        .iter()
        .filter(|(n, _)| has_container(state, n))
        .map(|(n, _)| container_name(&state.lab, n))
        .collect()
}

/// Node name → its image and how its container stands, for the image nodes of lab `state`
/// that run on this host.
pub fn statuses(
    state: &State,
    rt: &dyn Runtime,
) -> Result<BTreeMap<String, (String, Status)>, RuntimeError> {
    let listed: Vec<Listed> = rt.list(&state.lab)?;
    let mut out = BTreeMap::new();
    for node in state
        .topology
        .nodes
        .iter()
        .filter(|n| state.nodes.iter().any(|(name, _)| *name == n.name))
    {
        let Some(c) = &node.container else { continue };
        let name = container_name(&state.lab, &node.name);
        let status = listed
            .iter()
            .find(|l| l.name == name)
            .map_or(Status::Missing, |l| l.status.clone());
        out.insert(node.name.clone(), (c.image.clone(), status));
    }
    Ok(out)
}

/// [`statuses`] with the installed runtime, for showing: empty for a lab without image nodes
/// here; a runtime that is missing or fails shows as the word `unknown` and why.
pub fn lab_statuses(state: &State) -> BTreeMap<String, (String, Status)> {
    let here: Vec<usize> = state
        .nodes
        .iter()
        .filter_map(|(n, _)| state.topology.node_index(n))
        .collect();
    let failed = |why: String| {
        here.iter()
            .filter_map(|&n| {
                let node = &state.topology.nodes[n];
                let c = node.container.as_ref()?;
                let status = Status::Other {
                    runtime_state: format!("unknown ({why})"),
                };
                Some((node.name.clone(), (c.image.clone(), status)))
            })
            .collect()
    };
    match runtime_for(&state.topology, &here) {
        Ok(None) => BTreeMap::new(),
        Ok(Some(rt)) => statuses(state, &rt).unwrap_or_else(|e| failed(e.to_string())),
        Err(e) => failed(e.to_string()),
    }
}

/// Whether node `node` of lab `state` runs a container (on this host).
pub fn has_container(state: &State, node: &str) -> bool {
    state.nodes.iter().any(|(n, _)| n == node)
        && state
            .topology
            .node_index(node)
            .is_some_and(|i| state.topology.nodes[i].container.is_some())
}

/// Runs `f` on every item, [`PARALLEL`] at a time; the results in the items' order.
fn parallel<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    if items.len() <= 1 {
        return items.iter().map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let mut results: Vec<Option<R>> = (0..items.len()).map(|_| None).collect();
    let slots: Vec<std::sync::Mutex<&mut Option<R>>> =
        results.iter_mut().map(std::sync::Mutex::new).collect();
    let work = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let Some(item) = items.get(i) else { break };
        let r = f(item);
        **slots[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
    };
    std::thread::scope(|s| {
        // A machine out of threads gets fewer workers, or none: then the caller does the work.
        let started = (0..PARALLEL.min(items.len()))
            .filter(|_| rtemu_sys::thread::spawn_scoped(s, "rtemu-launch", work).is_ok())
            .count();
        if started == 0 {
            work();
        }
    });
    drop(slots);
    results
        .into_iter()
        .map(|r| r.expect("every item ran"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A runtime that holds the images `held` and records what it is asked to pull.
    struct Fake {
        held: Vec<&'static str>,
        pulled: std::sync::Mutex<Vec<String>>,
    }

    impl Runtime for Fake {
        fn has_image(&self, image: &str) -> Result<bool, RuntimeError> {
            Ok(self.held.contains(&image))
        }
        fn pull(&self, image: &str) -> Result<(), RuntimeError> {
            self.pulled.lock().unwrap().push(image.to_owned());
            if image.contains("broken") {
                return Err(RuntimeError::Output {
                    command: format!("pull {image}"),
                    why: "no such image".into(),
                });
            }
            Ok(())
        }
        fn run(&self, _: &RunSpec<'_>) -> Result<(), RuntimeError> {
            unreachable!("resolving images starts nothing")
        }
        fn check_health(&self, _: &str) -> Result<bool, RuntimeError> {
            unreachable!("resolving images checks nothing")
        }
        fn list(&self, _: &str) -> Result<Vec<Listed>, RuntimeError> {
            Ok(Vec::new())
        }
        fn orphans(&self) -> Result<Vec<Listed>, RuntimeError> {
            Ok(Vec::new())
        }
        fn remove(&self, _: &[String]) -> Result<(), RuntimeError> {
            Ok(())
        }
        fn exec(&self, _: &str, _: &[String], _: bool) -> std::process::Command {
            unreachable!()
        }
        fn logs(&self, _: &str, _: bool, _: Option<u32>) -> std::process::Command {
            unreachable!()
        }
    }

    fn topo(nodes: &[(&str, &str, &str)]) -> Topology {
        let mut src = String::from("lab = \"r\"\n");
        for (name, image, pull) in nodes {
            src.push_str(&format!(
                "[nodes.{name}]\nimage = \"{image}\"\npull = \"{pull}\"\n"
            ));
        }
        Topology::parse("r.toml", &src).unwrap()
    }

    #[test]
    fn images_are_resolved_by_their_strictest_policy_and_every_missing_one_is_named() {
        let fake = |held| Fake {
            held,
            pulled: Default::default(),
        };
        let all = |t: &Topology| (0..t.nodes.len()).collect::<Vec<_>>();
        // Missing with `never`: both named, nothing pulled, not even the pullable one.
        let t = topo(&[
            ("a", "x/a:1", "never"),
            ("b", "x/b:1", "never"),
            ("c", "x/c:1", "if-not-present"),
        ]);
        let rt = fake(vec![]);
        let e = resolve_images(&t, &all(&t), &rt).unwrap_err();
        assert!(
            matches!(&e, LaunchError::MissingImages(m) if m == &["x/a:1", "x/b:1"]),
            "{e}"
        );
        assert!(rt.pulled.lock().unwrap().is_empty());
        // Present images are not pulled unless some node says `always`; one image shared by a
        // `never` node and an `always` node is pulled.
        let t = topo(&[
            ("a", "x/a:1", "if-not-present"),
            ("b", "x/b:1", "if-not-present"),
            ("c", "x/c:1", "never"),
            ("d", "x/c:1", "always"),
        ]);
        let rt = fake(vec!["x/a:1", "x/c:1"]);
        resolve_images(&t, &all(&t), &rt).unwrap();
        let mut pulled = rt.pulled.lock().unwrap().clone();
        pulled.sort();
        assert_eq!(pulled, ["x/b:1", "x/c:1"]);
        // Only the nodes asked about count; a failed pull is named with why.
        let t = topo(&[("a", "x/broken:1", "always"), ("b", "x/b:1", "never")]);
        let rt = fake(vec![]);
        let e = resolve_images(&t, &[0], &rt).unwrap_err().to_string();
        assert_eq!(e, "pulling images failed: x/broken:1: `pull x/broken:1` wrote output rtemu does not understand: no such image");
    }

    #[test]
    fn parallel_keeps_the_items_order_and_runs_each_once() {
        let items: Vec<u64> = (0..37).collect();
        let ran = AtomicUsize::new(0);
        let out = parallel(&items, |&i| {
            ran.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(Duration::from_micros(37 - i));
            i * 2
        });
        assert_eq!(out, items.iter().map(|i| i * 2).collect::<Vec<_>>());
        assert_eq!(ran.load(Ordering::Relaxed), 37);
    }
}
