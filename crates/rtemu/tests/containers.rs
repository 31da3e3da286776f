//! Container nodes: two images built here (no registry is reachable) and a bare node across
//! impaired links. Each image's entrypoint finds its links at its first instruction; a server
//! in one image answers a client in the other across `delay 10ms` with the round trip that
//! asks for; `env`, `binds`, `run`, `caps` and `healthcheck`/`wait_for` do what they say;
//! `exec` runs inside the container; `down`, also after `up` is SIGKILLed while containers
//! start, leaves no container, namespace or state; a missing image fails `up` before
//! anything is made.
//!
//! Needs root and podman (install.sh installs it); without them the test says why and passes,
//! unless `RTEMU_REQUIRE_ROOT=1`.

#[allow(dead_code)]
mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{root_or_skip, rtemu, text, Lab};

/// Podman as rtemu runs it on hosts with cgroup v1 (see `rtemu_topo::runtime::podman`).
fn podman(args: &[&str]) -> std::process::Output {
    Command::new("podman")
        .args(["--cgroup-manager", "cgroupfs"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("podman runs")
}

/// The two images of the test, removed at drop.
struct Images {
    /// `podman import` of a busybox root file system: no entrypoint of its own.
    a: String,
    /// `podman build` FROM scratch: its own entrypoint, which records the interfaces it finds
    /// and serves HTTP.
    b: String,
}

impl Images {
    /// Builds them in `dir`, tagged with `test` and this process (tests run in parallel).
    fn build(dir: &Path, test: &str) -> Images {
        let tag = format!("{test}-{}", std::process::id());
        let busybox = ["/bin/busybox", "/usr/bin/busybox"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .expect("busybox-static is installed (install.sh)");
        let rootfs = |name: &str| {
            let root = dir.join(format!("rootfs-{name}"));
            for d in ["bin", "etc", "tmp", "www"] {
                std::fs::create_dir_all(root.join(d)).unwrap();
            }
            std::fs::copy(busybox, root.join("bin/busybox")).unwrap();
            for applet in [
                "sh", "ip", "cat", "echo", "sleep", "wget", "httpd", "ping", "hostname", "env",
            ] {
                std::os::unix::fs::symlink("busybox", root.join("bin").join(applet)).unwrap();
            }
            std::fs::write(root.join("etc/image-name"), format!("{name}\n")).unwrap();
            root
        };
        let a = format!("localhost/rtemu-test-a:{tag}");
        let root = rootfs("a");
        let tar = dir.join("a.tar");
        let out = Command::new("tar")
            .arg("-C")
            .arg(&root)
            .arg("-cf")
            .arg(&tar)
            .arg(".")
            .output()
            .unwrap();
        assert!(out.status.success(), "tar: {}", text(&out));
        let out = podman(&["import", "--quiet", tar.to_str().unwrap(), &a]);
        assert!(out.status.success(), "podman import: {}", text(&out));

        let b = format!("localhost/rtemu-test-b:{tag}");
        let root = rootfs("b");
        // The entrypoint's first instruction records what the node has.
        std::fs::write(
            root.join("entry.sh"),
            "ip -o addr > /tmp/first-addrs; ip -o link > /tmp/first-links\n\
             exec httpd -f -p 80 -h /www\n",
        )
        .unwrap();
        let context = dir.join("context-b");
        std::fs::create_dir_all(&context).unwrap();
        std::fs::rename(&root, context.join("rootfs")).unwrap();
        std::fs::write(
            context.join("Containerfile"),
            "FROM scratch\nCOPY rootfs/ /\nENV IMAGE=b\nENTRYPOINT [\"/bin/sh\", \"/entry.sh\"]\n",
        )
        .unwrap();
        let out = podman(&[
            "build",
            "--quiet",
            "--layers=false",
            "--tag",
            &b,
            context.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "podman build: {}", text(&out));
        Images { a, b }
    }
}

impl Drop for Images {
    fn drop(&mut self) {
        let _ = podman(&["rmi", "--force", &self.a, &self.b]);
    }
}

/// The containers labelled with lab `lab`, in any state.
fn containers_of(lab: &str) -> Vec<String> {
    let out = podman(&[
        "ps",
        "--all",
        "--format",
        "{{.Names}}",
        "--filter",
        &format!("label=rtemu.lab={lab}"),
    ]);
    assert!(out.status.success(), "podman ps: {}", text(&out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Everything lab `lab` could leave: containers (also a killed create's storage-only
/// leftovers), namespaces, state.
fn leftovers(lab: &str) -> Vec<String> {
    let mut left = containers_of(lab);
    let out = podman(&["ps", "--all", "--external", "--format", "{{.Names}}"]);
    let prefix = format!("rtemu-{lab}-");
    left.extend(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|n| n.starts_with(&prefix))
            .map(|n| format!("storage container {n}")),
    );
    // Each namespace with what it is, to tell a crash's placeholder from a namespace.
    left.extend(
        rtemu_testutil::lab_namespaces(lab)
            .into_iter()
            .map(|ns| format!("{ns} ({})", netns_kind(&ns))),
    );
    if Path::new("/run/rtemu").join(lab).exists() {
        left.push(format!("/run/rtemu/{lab}"));
    }
    left
}

/// What is at `/run/netns/NAME`: an empty file on the directory's own file system (a
/// placeholder `up` made before mounting the namespace), or a mounted namespace.
fn netns_kind(name: &str) -> String {
    use std::os::unix::fs::MetadataExt;
    let dir = Path::new("/run/netns");
    match (
        std::fs::metadata(dir),
        std::fs::symlink_metadata(dir.join(name)),
    ) {
        (Ok(d), Ok(m)) if m.dev() == d.dev() => format!("a file of {} bytes, not mounted", m.len()),
        (Ok(_), Ok(_)) => "a mounted namespace".to_owned(),
        (_, Err(e)) | (Err(e), _) => format!("unreadable: {e}"),
    }
}

/// Runs `rtemu exec` in lab `lab` and returns its standard output, which must succeed.
fn exec(lab: &str, args: &[&str]) -> String {
    let mut all = vec!["exec", "--lab", lab];
    all.extend_from_slice(args);
    let out = rtemu(&all);
    assert!(out.status.success(), "exec {args:?}: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

const LAB: &str = r#"
lab = "LAB"
neighbours = "static"
[nodes.server]
image = "IMAGE_B"
pull = "never"
binds = ["site:/www:ro"]
healthcheck = { test = ["CMD", "wget", "-q", "-O", "/dev/null", "http://localhost/"], interval = "100ms", retries = 50 }
[nodes.client]
image = "IMAGE_A"
pull = "never"
cmd = ["sh", "-c", "ip -o addr > /tmp/first-addrs; wget -q -O /tmp/at-start http://server/; exec sleep 100000"]
env = { GREETING = "hello from the topology" }
run = ["echo \"$GREETING\" > /tmp/ran"]
caps = ["NET_ADMIN", "NET_RAW"]
wait_for = ["server:healthy"]
[nodes.once]
image = "IMAGE_A"
pull = "never"
cmd = ["sh", "-c", "exit 3"]
[nodes.bare]
[[links]]
endpoints = ["client", "server"]
netem = "delay 10ms"
[[links]]
endpoints = ["bare", "server"]
netem = "delay 1ms"
"#;

/// The scratch directory and images of test `test`, `tag` telling its images apart; `None`
/// when it cannot run here (it said why).
fn set_up(test: &str, tag: &str) -> Option<(rtemu_testutil::TempDir, Images)> {
    if !root_or_skip(test)
        || !rtemu_testutil::program_or_skip(test, "podman", "--version", "podman")
    {
        return None;
    }
    let scratch = rtemu_testutil::TempDir::new(&format!("containers-{tag}"));
    let images = Images::build(&scratch.0, tag);
    Some((scratch, images))
}

#[test]
fn image_nodes_run_in_their_wired_namespaces_and_leave_nothing() {
    let test = "image_nodes_run_in_their_wired_namespaces_and_leave_nothing";
    let Some((_scratch, images)) = set_up(test, "lab") else {
        return;
    };
    let toml = LAB
        .replace("IMAGE_A", &images.a)
        .replace("IMAGE_B", &images.b);
    let lab = Lab::up_with(
        "ctr",
        &toml,
        &[("site/index.html", "served from the bind\n")],
    );
    let name = lab.name.clone();

    // The server image's own entrypoint found every interface and address of its node at its
    // first instruction: both links, their IPv4 and IPv6 addresses.
    let links = exec(&name, &["server", "--", "cat", "/tmp/first-links"]);
    let addrs = exec(&name, &["server", "--", "cat", "/tmp/first-addrs"]);
    for ifname in ["eth0", "eth1"] {
        let listed = [":", "@"].map(|end| format!(": {ifname}{end}"));
        assert!(listed.iter().any(|l| links.contains(l)), "{links}");
        let with_v4 = addrs
            .lines()
            .any(|l| l.contains(ifname) && l.contains("inet "));
        let with_v6 = addrs
            .lines()
            .any(|l| l.contains(ifname) && l.contains("inet6 fd00:"));
        assert!(
            with_v4 && with_v6,
            "{ifname} without its addresses: {addrs}"
        );
    }
    // So did the client's `cmd`, which replaced the image's (it has none), and the server was
    // healthy before the client started (`wait_for`): its first request was answered.
    let client_addrs = exec(&name, &["client", "--", "cat", "/tmp/first-addrs"]);
    assert!(
        client_addrs.contains("eth0") && client_addrs.contains("inet "),
        "{client_addrs}"
    );
    let at_start = exec(&name, &["client", "--", "cat", "/tmp/at-start"]);
    assert_eq!(at_start, "served from the bind\n");

    // `exec` runs inside each node's container (its own file system), `--netns` outside.
    assert_eq!(
        exec(&name, &["client", "--", "cat", "/etc/image-name"]),
        "a\n"
    );
    assert_eq!(
        exec(&name, &["server", "--", "cat", "/etc/image-name"]),
        "b\n"
    );
    assert_eq!(exec(&name, &["client", "--", "hostname"]), "client\n");
    let outside = rtemu(&[
        "exec",
        "--lab",
        &name,
        "--netns",
        "client",
        "--",
        "cat",
        "/etc/image-name",
    ]);
    assert!(
        !outside.status.success(),
        "the host has no /etc/image-name: {}",
        text(&outside)
    );
    // The image's environment and the topology's `env`; `run` ran in the container with it.
    assert_eq!(
        exec(&name, &["server", "--", "sh", "-c", "echo $IMAGE"]),
        "b\n"
    );
    assert_eq!(
        exec(
            &name,
            &["client", "--", "sh", "-c", "echo $GREETING $RTEMU_NODE"]
        ),
        "hello from the topology client\n"
    );
    let mut ran = String::new();
    for _ in 0..50 {
        let out = rtemu(&["exec", "--lab", &name, "client", "--", "cat", "/tmp/ran"]);
        ran = String::from_utf8_lossy(&out.stdout).into_owned();
        if out.status.success() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(ran, "hello from the topology\n");
    // The bind is read-only; `caps` added NET_ADMIN to the client only.
    let write = rtemu(&[
        "exec",
        "--lab",
        &name,
        "server",
        "--",
        "sh",
        "-c",
        "echo x > /www/x",
    ]);
    assert!(!write.status.success(), "a read-only bind was written");
    exec(
        &name,
        &[
            "client",
            "--",
            "ip",
            "addr",
            "add",
            "192.0.2.99/32",
            "dev",
            "lo",
        ],
    );
    let denied = rtemu(&[
        "exec",
        "--lab",
        &name,
        "server",
        "--",
        "ip",
        "addr",
        "add",
        "192.0.2.98/32",
        "dev",
        "lo",
    ]);
    assert!(
        !denied.status.success(),
        "the server has no NET_ADMIN: {}",
        text(&denied)
    );
    // The lab's hosts file is the container's.
    let hosts = exec(&name, &["client", "--", "cat", "/etc/hosts"]);
    assert!(
        hosts.contains("\tserver") && hosts.contains("\tbare"),
        "{hosts}"
    );

    // The server in one image answers the client in the other across `delay 10ms` each way:
    // a round trip of 20 ms (and a little).
    let body = exec(
        &name,
        &["client", "--", "wget", "-q", "-O", "-", "http://server/"],
    );
    assert_eq!(body, "served from the bind\n");
    let ping = exec(
        &name,
        &["client", "--", "ping", "-c", "5", "-i", "0.2", "server"],
    );
    let rtt = rtemu_testutil::multihost::median_rtt(&ping);
    assert!((20.0..30.0).contains(&rtt), "round trip {rtt} ms: {ping}");
    // The bare node is a namespace as before: the host's file system, the server 2 ms away.
    let ping = exec(
        &name,
        &["bare", "--", "ping", "-c", "5", "-i", "0.2", "server"],
    );
    let rtt = rtemu_testutil::multihost::median_rtt(&ping);
    assert!((2.0..12.0).contains(&rtt), "round trip {rtt} ms: {ping}");

    // `logs` shows a container's output.
    let out = rtemu(&["logs", "--lab", &name, "server"]);
    assert!(out.status.success(), "{}", text(&out));

    // `ls` shows each image node's image and how its container stands.
    let ls = rtemu(&["ls", &name]);
    let listing = text(&ls);
    for line in [
        format!("    image {}  healthy", images.b),
        format!("    image {}  running", images.a),
        format!("    image {}  exited with code 3", images.a),
    ] {
        assert!(
            listing.lines().any(|l| l == line),
            "no `{line}` in:\n{listing}"
        );
    }
    let json: serde_json::Value =
        serde_json::from_slice(&rtemu(&["ls", &name, "--json"]).stdout).unwrap();
    assert_eq!(
        json[0]["containers"]["once"],
        serde_json::json!({"state": "exited", "exit_code": 3})
    );
    assert_eq!(json[0]["containers"]["server"]["state"], "healthy");

    assert_eq!(containers_of(&name).len(), 3);
    drop(lab);
    assert!(
        leftovers(&name).is_empty(),
        "left after down: {:?}",
        leftovers(&name)
    );
    drop(images);
}

/// A lab of `n` image nodes in a chain, `LAB` to be named.
fn chain(image: &str, n: usize) -> String {
    let mut t = String::from("lab = \"LAB\"\n");
    for i in 0..n {
        t.push_str(&format!(
            "[nodes.n{i}]\nimage = \"{image}\"\npull = \"never\"\ncmd = [\"sleep\", \"100000\"]\n"
        ));
    }
    for i in 1..n {
        t.push_str(&format!(
            "[[links]]\nendpoints = [\"n{}\", \"n{i}\"]\n",
            i - 1
        ));
    }
    t
}

/// Writes topology `toml` with `LAB` as `name` into `dir`; its path.
fn topology(dir: &Path, name: &str, toml: &str) -> String {
    let file = dir.join(format!("{name}.toml"));
    std::fs::write(&file, toml.replace("LAB", name)).unwrap();
    file.display().to_string()
}

/// `up` SIGKILLed while its containers start, then `down`: nothing is left, the containers
/// found by their labels. A missing image with `pull = "never"` and a health check that never
/// passes each fail `up`, naming the image or node, with nothing left behind.
#[test]
fn a_killed_or_failed_up_leaves_nothing_after_down() {
    let test = "a_killed_or_failed_up_leaves_nothing_after_down";
    let Some((scratch, images)) = set_up(test, "kill") else {
        return;
    };
    let name = format!("ck{}", std::process::id() % 100_000);
    let file = topology(&scratch.0, &name, &chain(&images.a, 6));
    // Killed early (images resolved, namespaces being made), mid-start and late.
    for after_ms in [150, 700, 1300] {
        let mut up = Command::new(env!("CARGO_BIN_EXE_rtemu"))
            .args(["up", &file])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(after_ms));
        let _ = up.kill();
        let _ = up.wait();
        let down = rtemu(&["down", &name]);
        assert!(
            down.status.success(),
            "down after a kill at {after_ms} ms: {}",
            text(&down)
        );
        assert!(
            leftovers(&name).is_empty(),
            "left after a kill at {after_ms} ms: {:?}; down said: {}",
            leftovers(&name),
            text(&down)
        );
    }

    // A lost state file: `down` still finds the containers by their labels.
    let out = rtemu(&["up", &file]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(containers_of(&name).len(), 6);
    std::fs::remove_dir_all(Path::new("/run/rtemu").join(&name)).unwrap();
    let down = rtemu(&["down", &name]);
    assert!(down.status.success(), "{}", text(&down));
    assert!(
        containers_of(&name).is_empty(),
        "{:?}",
        containers_of(&name)
    );
    // (The namespaces of a lab without its state file are not rtemu's to judge: removed here.)
    for ns in rtemu_testutil::lab_namespaces(&name) {
        for pid in String::from_utf8_lossy(
            &Command::new("ip")
                .args(["netns", "pids", &ns])
                .output()
                .unwrap()
                .stdout,
        )
        .split_whitespace()
        {
            let _ = Command::new("kill").args(["-9", pid]).status();
        }
        rtemu_testutil::ip(&["netns", "del", &ns]);
        let _ = std::fs::remove_dir_all(Path::new("/etc/netns").join(&ns));
    }

    // A missing image fails `up` before anything is made, naming it.
    let missing = format!("localhost/rtemu-test-missing:{}", std::process::id());
    let file = topology(
        &scratch.0,
        &name,
        &chain(&missing, 2).replacen(&missing, &images.a, 1),
    );
    let out = rtemu(&["up", &file]);
    assert!(!out.status.success());
    let said = text(&out);
    assert!(
        said.contains(&format!(
            "images not on this host, with pull = \"never\": {missing};"
        )),
        "{said}"
    );
    assert!(leftovers(&name).is_empty(), "{:?}", leftovers(&name));

    // A health check that never passes fails `up` naming the node, and takes the lab down.
    let sick = format!(
        "{}healthcheck = {{ test = \"false\", interval = \"50ms\", retries = 2 }}\n",
        chain(&images.a, 1)
    );
    let file = topology(&scratch.0, &name, &sick);
    let out = rtemu(&["up", &file]);
    assert!(!out.status.success());
    let said = text(&out);
    assert!(
        said.contains("containers are not healthy: n0 (its health check failed 2 times in a row)"),
        "{said}"
    );
    assert!(leftovers(&name).is_empty(), "{:?}", leftovers(&name));
    drop(images);
}
