"""A real Prometheus scraping `rtemu serve`'s /metrics (root): Debian's `prometheus`, on
loopback with a private storage directory, scrapes the API's TCP listener every second with
the bearer token, while iperf3 sends 20 Mbit/s of UDP through a `delay 5ms` link. Prometheus's
`rate()` of the link's delivered bytes must match iperf3's rate within 2 %, and every query of
the Grafana dashboard (deploy/grafana/rtemu.json) must run on what it scraped.

Without /usr/bin/prometheus or iperf3 the test skips and says which is missing;
RTEMU_REQUIRE_ROOT=1 (CI) makes that a failure. Prometheus, the server and the lab are stopped
and their files removed, also when the test fails.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    address,
    in_node,
    lab_up,
    printing,
    require_root,
    skip_or_fail,
    unique_lab,
    wait_for,
)

import rtemu
from rtemu.server import rtemu_binary

PROMETHEUS = "/usr/bin/prometheus"
#: Prometheus's own checker of an exposition (syntax and naming conventions), in the package.
PROMTOOL = "/usr/bin/promtool"
DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "rtemu.json"

TOPOLOGY = """
lab = "{name}"
neighbours = "static"

[nodes.client]
[nodes.server]

[[links]]
name = "wan"
endpoints = ["client", "server"]
netem = "delay 5ms"
"""

#: iperf3's UDP payload per datagram, and the frame that carries it: UDP (8), IPv4 (20) and
#: Ethernet (14) headers. The engine counts frames' bytes; iperf3 counts payload.
PAYLOAD = 1400
FRAME = PAYLOAD + 8 + 20 + 14
#: How long iperf3 sends, and the window of the rate query, seconds.
SECONDS = 8
WINDOW = 5


def free_port() -> int:
    """A TCP port of the loopback address no one listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def serve_tcp(tmp: Path) -> Iterator[tuple[str, Path]]:
    """`rtemu serve` on a private socket and an ephemeral loopback port: its URL and token
    file."""
    argv = [rtemu_binary(), "serve", "--socket", str(tmp / "api.sock")]
    argv += ["--listen", "127.0.0.1:0", "--token-file", str(tmp / "api.token")]
    with printing(argv, tmp / "serve.log", r"and on (http://\S+),", 15) as m:
        yield m.group(1), tmp / "api.token"


@contextmanager
def prometheus(tmp: Path, target: str, token_file: Path) -> Iterator[str]:
    """Prometheus scraping ``target`` every second with the token: its URL."""
    config = tmp / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        "scrape_configs:\n  - job_name: rtemu\n"
        f"    authorization:\n      credentials_file: {token_file}\n"
        f"    static_configs:\n      - targets: ['{target}']\n"
    )
    argv = [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp / 'data'}"]
    argv += [f"--web.listen-address=127.0.0.1:{free_port()}"]
    with printing(argv, tmp / "prometheus.log", r"address=(127\.0\.0\.1:\d+)", 30) as m:
        wait_for(
            lambda: "Server is ready" in (tmp / "prometheus.log").read_text(),
            30,
            "prometheus did not become ready",
        )
        yield f"http://{m.group(1)}"


def query(url: str, expr: str, at: float | None = None) -> list[dict[str, Any]]:
    """The result of an instant query (at ``at``, else now); fails on an error."""
    params = {"query": expr} | ({"time": f"{at:.3f}"} if at is not None else {})
    with urllib.request.urlopen(f"{url}/api/v1/query?{urllib.parse.urlencode(params)}") as r:
        reply = json.load(r)
    assert reply["status"] == "success", f"{expr}: {reply}"
    result: list[dict[str, Any]] = reply["data"]["result"]
    return result


def one_value(url: str, expr: str, at: float | None = None) -> float:
    result = query(url, expr, at)
    assert len(result) == 1, f"{expr}: {result}"
    return float(result[0]["value"][1])


def dashboard_queries(lab: str) -> list[str]:
    """The dashboard's panel queries, with Grafana's variables as values for ``lab``."""
    dash = json.loads(DASHBOARD.read_text())
    exprs = []
    for row in dash["panels"]:
        for p in [row, *row.get("panels", [])]:
            exprs += [t["expr"] for t in p.get("targets", [])]
    return [
        e.replace("$lab", lab).replace("$link", ".*").replace("$__rate_interval", f"{WINDOW}s")
        for e in exprs
    ]


@pytest.fixture(scope="module")
def tools() -> None:
    require_root()
    missing = [p for p in (PROMETHEUS, PROMTOOL) if not os.access(p, os.X_OK)]
    if shutil.which("iperf3") is None:
        missing.append("iperf3")
    if missing:
        skip_or_fail(f"the Prometheus test needs {', '.join(missing)} (install.sh installs them)")


def test_prometheus_scrapes_a_lab_and_its_rate_matches_iperf3(tools: None) -> None:
    with tempfile.TemporaryDirectory(prefix="rtemu-prometheus-") as tmpdir:
        tmp = Path(tmpdir)
        with (
            serve_tcp(tmp) as (url, token_file),
            rtemu.Client(url=url, token_file=token_file) as client,
            lab_up(client, TOPOLOGY.format(name=unique_lab("p"))) as lab,
            prometheus(tmp, url.removeprefix("http://"), token_file) as prom,
        ):
            run_and_check(lab, tmp, prom)
            check_exposition(url, token_file)
    # Prometheus's storage, its configuration and the logs went with the directory.
    assert not Path(tmpdir).exists()


def check_exposition(url: str, token_file: Path) -> None:
    """/metrics over TCP with the token passes `promtool check metrics`: the format and
    Prometheus's naming conventions (units, `_total` on counters)."""
    token = token_file.read_text().strip()
    request = urllib.request.Request(f"{url}/metrics", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request) as r:
        assert r.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
        text = r.read()
    assert b"\nrtemu_link_release_error_seconds_bucket{" in text
    check = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True)
    assert check.returncode == 0 and not check.stdout + check.stderr, check


def run_and_check(lab: rtemu.Lab, tmp: Path, prom: str) -> None:
    series = f'lab="{lab.name}",link="wan",direction="a-b"'
    # The target answers with the token, and shows the lab.
    wait_for(
        lambda: query(prom, f'rtemu_lab_status{{lab="{lab.name}",status="up"}} == 1'),
        15,
        "prometheus never scraped the lab as up",
    )
    assert one_value(prom, 'up{job="rtemu"}') == 1

    server = ["iperf3", "-s", "-1", "--forceflush"]
    with in_node(lab, "server", server, tmp / "s.log"):
        wait_for(lambda: "listening" in (tmp / "s.log").read_text(), 5, "iperf3 -s did not start")
        argv = ["iperf3", "-c", address(lab, "server", "wan"), "-u", "-b", "20M"]
        argv += ["-l", str(PAYLOAD), "-t", str(SECONDS), "-J"]
        start = time.time()
        with in_node(lab, "client", argv, tmp / "c.json") as client:
            assert client.wait(SECONDS + 20) == 0, (tmp / "c.json").read_text()
    report = json.loads((tmp / "c.json").read_text())["end"]["sum"]
    # What iperf3 sent, as the engine counts it: frames, each FRAME bytes.
    frames_per_second = report["packets"] / report["seconds"]
    assert report["bytes"] == report["packets"] * PAYLOAD

    # A window well inside the run (iperf3 starts within a second), and scraped after it.
    at = start + SECONDS - 1
    time.sleep(max(0.0, at + 2.5 - time.time()))
    delivered = one_value(
        prom, f"rate(rtemu_link_delivered_bytes_total{{{series}}}[{WINDOW}s])", at
    )
    expected = frames_per_second * FRAME
    # Shown with the failure (pytest keeps a test's output), and with -s.
    print(
        f"prometheus: {delivered * 8 / 1e6:.3f} Mbit/s of frames; iperf3: {expected * 8 / 1e6:.3f} "
        f"({report['bits_per_second'] / 1e6:.3f} Mbit/s of payload)"
    )
    assert abs(delivered - expected) <= 0.02 * expected
    frames = one_value(prom, f"rate(rtemu_link_delivered_frames_total{{{series}}}[{WINDOW}s])", at)
    assert abs(frames - frames_per_second) <= 0.02 * frames_per_second
    # Nothing dropped (a failure names each reason that counted), and the release-error
    # histogram grew with the copies released.
    drops = query(prom, f"rtemu_link_dropped_frames_total{{{series}}}")
    dropped = {d["metric"]["reason"]: float(d["value"][1]) for d in drops}
    assert dropped and not any(dropped.values()), dropped
    p99 = one_value(
        prom,
        f"histogram_quantile(0.99, rate(rtemu_link_release_error_seconds_bucket{{{series}}}"
        f"[{WINDOW}s]))",
        at,
    )
    assert math.isfinite(p99) and 0 < p99 <= 0.1, p99

    # Every dashboard query runs on what Prometheus scraped; each shows the lab unless it
    # keeps only non-zero values (no drops here).
    for expr in dashboard_queries(lab.name):
        result = query(prom, expr)
        if not re.search(r"> 0$", expr):
            assert result, f"the dashboard's {expr} shows nothing"
