"""The Kubernetes DaemonSet of rtemu's agent (deploy/kubernetes/rtemu-agent.yaml).

No cluster runs here, so the manifest is checked in two ways: against the Kubernetes API's own
types (the official client's models: every field known, of the right type, required fields
present), and by running its container's command as the kubelet would (``$(NODE_IP)``
expanded, the token mounted as a Secret volume mounts it, the node's directories as its
hostPath volumes) in a network namespace that plays the node, then driving a lab through it."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import yaml
from conftest import require_root, unique_lab
from kubernetes import client as k8s

MANIFEST = Path(__file__).parents[2] / "deploy" / "kubernetes" / "rtemu-agent.yaml"


def documents() -> dict[str, dict[str, Any]]:
    """The manifest's objects by kind."""
    docs = [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]
    return {d["kind"]: d for d in docs}


def unknown_fields(value: Any, kind: str, where: str = "") -> list[str]:
    """The paths in ``value`` that the API type ``kind`` (a model name of the client, or one
    of its ``list[…]``/``dict(str, …)`` forms) does not have, or that have the wrong type."""
    m = re.fullmatch(r"(?:list|List)\[(.+)\]", kind)
    if m:
        if not isinstance(value, list):
            return [f"{where}: a list expected"]
        return [e for i, v in enumerate(value) for e in unknown_fields(v, m[1], f"{where}[{i}]")]
    m = re.fullmatch(r"(?:dict\(str, |Dict\[str, )(.+)[)\]]", kind)
    if m:
        if not isinstance(value, dict):
            return [f"{where}: a map expected"]
        return [e for k, v in value.items() for e in unknown_fields(v, m[1], f"{where}.{k}")]
    scalars: dict[str, type | tuple[type, ...]] = {
        "str": str,
        "int": int,
        "bool": bool,
        "float": (int, float),
    }
    if kind in scalars:
        ok = isinstance(value, scalars[kind]) and not (kind == "int" and isinstance(value, bool))
        return [] if ok else [f"{where}: {kind} expected, not {value!r}"]
    if kind in ("object", "datetime"):
        return []
    model = getattr(k8s, kind)
    if not isinstance(value, dict):
        return [f"{where}: a {kind} object expected"]
    fields = {json_name: model.openapi_types[py] for py, json_name in model.attribute_map.items()}
    errors = []
    for key, v in value.items():
        if key not in fields:
            errors.append(f"{where}.{key}: no such field in {kind}")
        else:
            errors.extend(unknown_fields(v, fields[key], f"{where}.{key}"))
    return errors


def test_the_manifest_is_made_of_the_api_s_own_types() -> None:
    docs = documents()
    assert set(docs) == {"Namespace", "DaemonSet"}
    for kind, model in [("Namespace", "V1Namespace"), ("DaemonSet", "V1DaemonSet")]:
        assert unknown_fields(docs[kind], model) == [], kind
    # Required fields and enumerations, as the client's models check them when built.
    api = k8s.ApiClient()
    ds = api._ApiClient__deserialize(docs["DaemonSet"], "V1DaemonSet")
    assert ds.spec.template.spec.containers[0].name == "agent"
    # The checker sees a misspelt field: it is not a checker that passes everything.
    bad = json.loads(json.dumps(docs["DaemonSet"]))
    bad["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][2]["mountPropogation"] = "x"
    bad["spec"]["template"]["spec"]["hostNetwork"] = "yes"
    assert set(unknown_fields(bad, "V1DaemonSet")) == {
        ".spec.template.spec.containers[0].volumeMounts[2].mountPropogation: no such field in "
        "V1VolumeMount",
        ".spec.template.spec.hostNetwork: bool expected, not 'yes'",
    }


def test_the_agent_runs_in_the_node_s_network_with_the_node_s_state() -> None:
    ds = documents()["DaemonSet"]
    pod = ds["spec"]["template"]["spec"]
    (agent,) = pod["containers"]
    # The node's network (the underlay) and privileges; a restart must not come by itself.
    assert pod["hostNetwork"] is True
    assert agent["securityContext"]["privileged"] is True
    assert ds["spec"]["updateStrategy"]["type"] == "OnDelete"
    assert "limits" not in agent["resources"], "a CPU limit throttles the engine"
    assert pod["nodeSelector"] == {"rtemu/agent": "true"}
    # The agent's port is the one [hosts] entries default to, and what the probe checks.
    assert "$(NODE_IP):7781" in agent["args"]
    assert agent["ports"][0]["containerPort"] == 7781
    assert agent["readinessProbe"]["tcpSocket"]["port"] == 7781
    # The state rtemu keeps on a node lives on the node, where a later agent reaps it.
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in agent["volumeMounts"]}
    for path in ["/run/rtemu", "/run/netns", "/etc/netns"]:
        assert volumes[mounts[path]["name"]]["hostPath"]["path"] == path
    assert mounts["/run/netns"]["mountPropagation"] == "Bidirectional"
    # The shared token: a Secret readable by its owner only, which `--token-from` demands.
    token = volumes["token"]["secret"]
    assert token["defaultMode"] == 0o400
    assert agent["args"][agent["args"].index("--token-from") + 1] == (
        mounts_of(agent, "token") + "/token"
    )
    # TLS with a key kept on the node, so a restarted agent keeps its pinned fingerprint.
    tls = agent["args"][agent["args"].index("--tls-dir") + 1]
    assert tls == mounts_of(agent, "tls")
    assert volumes["tls"]["hostPath"]["path"] == tls


def mounts_of(container: dict[str, Any], volume: str) -> str:
    """Where ``container`` mounts ``volume``."""
    (path,) = [m["mountPath"] for m in container["volumeMounts"] if m["name"] == volume]
    return str(path)


def expand(arg: str, env: dict[str, str]) -> str:
    """``$(VAR)`` expanded as the kubelet expands a container's command and arguments."""
    return re.sub(r"\$\((\w+)\)", lambda m: env.get(m[1], m[0]), arg)


def ip(*args: str) -> None:
    out = subprocess.run(["ip", *args], capture_output=True, text=True)
    assert out.returncode == 0, f"ip {' '.join(args)}: {out.stderr}"


def in_node(netns: str, script: str) -> str:
    """Runs Python ``script`` in namespace ``netns`` (the node's network) with this
    interpreter, which has the package; its output."""
    out = subprocess.run(
        ["ip", "netns", "exec", netns, sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_the_container_s_command_serves_a_lab_with_the_secret_s_token(tmp_path: Path) -> None:
    require_root()
    binary = os.environ.get("RTEMU_BIN") or shutil.which("rtemu")
    assert binary, "set RTEMU_BIN to the rtemu binary"
    ds = documents()["DaemonSet"]
    (agent,) = ds["spec"]["template"]["spec"]["containers"]
    node_ip = "192.0.2.77"
    env = {"NODE_IP": node_ip}
    # The Secret volume: the key a symbolic link into the data, mode from defaultMode.
    secret_dir = tmp_path / "secret"
    (secret_dir / "..data").mkdir(parents=True)
    token = "f" * 16 + os.urandom(16).hex()
    (secret_dir / "..data" / "token").write_text(token)
    mode = ds["spec"]["template"]["spec"]["volumes"][0]["secret"]["defaultMode"]
    (secret_dir / "..data" / "token").chmod(mode)
    (secret_dir / "token").symlink_to("..data/token")
    mount = mounts_of(agent, "token")
    # The TLS directory: new, made by the agent.
    tls_dir = tmp_path / "tls"
    tls_mount = mounts_of(agent, "tls")
    argv = [binary] + [
        expand(a, env).replace(mount, str(secret_dir)).replace(tls_mount, str(tls_dir))
        for a in agent["command"][1:] + agent["args"]
    ]
    # The node: a namespace with the node's address; its /run/rtemu, /run/netns and
    # /etc/netns private to the agent (they are the node's own in a pod).
    netns = f"k8s{os.getpid() % 100000}"
    ip("netns", "add", netns)
    try:
        # No dummy driver on every kernel: a veth pair inside the namespace holds the address.
        ip("-n", netns, "link", "add", "eth0", "type", "veth", "peer", "name", "eth1")
        ip("-n", netns, "addr", "add", f"{node_ip}/24", "dev", "eth0")
        ip("-n", netns, "link", "set", "eth0", "up")
        ip("-n", netns, "link", "set", "lo", "up")
        private = (
            "for d in /run/rtemu /run/netns /etc/netns; do "
            'mkdir -p $d && mount -t tmpfs -o mode=0755 tmpfs $d || exit 1; done; exec "$@"'
        )
        server = subprocess.Popen(
            ["ip", "netns", "exec", netns, "unshare", "-m", "sh", "-c", private, "sh", *argv],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            url = f"https://{node_ip}:{agent['ports'][0]['containerPort']}"
            drive_a_lab(netns, url, token, tls_dir / "agent.crt")
        finally:
            server.send_signal(signal.SIGTERM)
            grace = ds["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
            _, err = server.communicate(timeout=grace)
        assert server.returncode == 0, err
        assert token not in err, "the shared token went to the agent's log"
        assert "stopped serving" in err
        # The fingerprint it printed is its certificate's, to pin in the credentials.
        der = ssl.PEM_cert_to_DER_cert((tls_dir / "agent.crt").read_text())
        digest = hashlib.sha256(der).hexdigest().upper()
        shown = ":".join(digest[i : i + 2] for i in range(0, 64, 2))
        assert f"TLS certificate SHA-256 fingerprint {shown}" in err, err
    finally:
        subprocess.run(["ip", "netns", "del", netns], check=False)


def drive_a_lab(netns: str, url: str, token: str, cert: Path) -> None:
    """Brings a two-node lab up through the agent at ``url`` (from inside the node, over TLS
    to the certificate ``cert`` the agent made), pings across it and takes it down; a wrong
    token is refused."""
    lab = unique_lab("k")
    script = textwrap.dedent(
        f"""
        import os, ssl, time, httpx, rtemu
        def client(token):
            # The agent's own certificate is the one trusted (it names the node's address).
            ctx = ssl.create_default_context(cafile={str(cert)!r})
            ctx.verify_flags &= ~getattr(ssl, "VERIFY_X509_STRICT", 0)
            return rtemu.Client(url={url!r}, token=token, transport=httpx.HTTPTransport(verify=ctx))
        deadline = time.monotonic() + 15
        while True:
            try:
                if not os.path.exists({str(cert)!r}):
                    raise rtemu.RtemuError("no certificate yet")
                client("0" * 64).labs()
                raise SystemExit("a wrong token was let in")
            except rtemu.Unauthorized:
                break
            except rtemu.RtemuError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        c = client({token!r})
        topology = '''lab = "{lab}"
        [nodes.a]
        [nodes.b]
        [[links]]
        endpoints = ["a", "b"]
        netem = "delay 5ms"
        '''
        with c.up(topology) as lab:
            print(lab.node("a").exec(["ping", "-c", "3", "-i", "0.2", "b"]).status)
        print(len(c.labs()))
        """
    )
    out = in_node(netns, script).split()
    assert out == ["0", "0"], out
