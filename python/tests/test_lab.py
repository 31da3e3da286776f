"""A full experiment on real labs through `rtemu serve` (root): up, exec, change links, stats,
capture, down, and nothing left behind."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import free_port, lab_up, namespaces, require_root, rtt_ms, unique_lab

import rtemu

TOPOLOGY = """
lab = "{name}"
neighbours = "static"

[nodes.client]
[nodes.server]

[[links]]
name = "uplink"
endpoints = ["client", "server"]
netem = "delay 10ms"
"""


def pcapng_blocks(data: bytes) -> list[int]:
    """The block types of a pcapng file (little- or big-endian), checking each block's length."""
    assert data[:4] == b"\x0a\x0d\x0d\x0a", "not a pcapng file"
    order = "<" if data[8:12] == b"\x4d\x3c\x2b\x1a" else ">"
    types, at = [], 0
    while at < len(data):
        kind, length = struct.unpack_from(order + "II", data, at)
        assert length >= 12 and at + length <= len(data), "truncated block"
        assert struct.unpack_from(order + "I", data, at + length - 4)[0] == length
        types.append(kind)
        at += length
    return types


@pytest.fixture()
def lab(client: rtemu.Client) -> Iterator[rtemu.Lab]:
    """A two-node lab with a 10 ms link through the engine, always brought down after."""
    with lab_up(client, TOPOLOGY.format(name=unique_lab("e"))) as lab:
        yield lab


def test_full_experiment(client: rtemu.Client, lab: rtemu.Lab, tmp_path: Path) -> None:
    assert lab.status == "up" and lab.file == "<request>"
    assert {n.name for n in lab.nodes} == {"client", "server"}
    assert {n.netns for n in lab.nodes} <= namespaces()
    assert lab.name in {x.name for x in client.labs()}
    link = lab.link("uplink")
    assert (link.a, link.b, link.impaired, link.a_to_b) == ("client", "server", True, "delay 10ms")
    # Its engine, as the lab was read: which release thread serves the link, and how it runs.
    (engine,) = lab.engines
    assert engine.pid == lab.stats().pid and engine.host
    assert [link for t in engine.threads for link in t.links] == ["uplink"]
    assert all(t.policy.startswith("SCHED_") for t in engine.threads)
    ping = ["ping", "-c", "3", "-i", "0.2", "server"]
    node = lab.node("client")

    assert 19 < rtt_ms(node.exec(ping, timeout=20, check=True)) < 60

    link.set("delay 50ms")
    assert 99 < rtt_ms(node.exec(ping, timeout=20, check=True)) < 160
    # The stats say which model each direction runs now; the lab's record keeps the file's.
    now = lab.stats().links["uplink"]
    assert (now.a_to_b.netem, now.b_to_a.netem) == ("delay 50ms", "delay 50ms")
    assert lab.link("uplink").a_to_b == "delay 10ms"

    link.down()
    cut = node.exec(["ping", "-c", "2", "-i", "0.2", "-W", "1", "server"], timeout=20)
    assert cut.status == 1 and "100% packet loss" in cut.stdout
    assert lab.stats().links["uplink"].a_to_b.cut
    link.up()
    assert not lab.stats().links["uplink"].a_to_b.cut

    link.schedule([(0.2, "delay 2ms")])
    time.sleep(0.5)
    assert 3 < rtt_ms(node.exec(ping, timeout=20, check=True)) < 30

    snaps = list(lab.stats(stream=True, interval=0.1, count=3))
    assert len(snaps) == 3
    up = [s.links["uplink"].a_to_b for s in snaps]
    # 3 + 3 + 2 + 3 echo requests went client → server, 2 of them into the cut.
    assert up[0].received >= 11 and up[0].dropped["link-down"] >= 2
    assert all(d.conserved for d in up)
    assert all(sum(d.fidelity.released_histogram.counts) == d.fidelity.count for d in up)
    # The kernel's counters of the link's ends saw the echo requests too.
    ends = {(c.node, c.segment): c for c in lab.counters()}
    assert ends[("client", "uplink")].tx_packets >= up[-1].delivered
    assert [d.delivered for d in up] == sorted(d.delivered for d in up)
    # Only the client's interfaces, when only the client is asked for.
    only = lab.counters(nodes=["client"])
    assert only and {c.node for c in only} == {"client"}
    assert {c.segment for c in only} == {s for n, s in ends if n == "client"}
    with pytest.raises(rtemu.NotFound):
        lab.counters(nodes=["no-such-node"])

    # Capture while pinging: each frame of the link before and after the engine.
    pinger = threading.Thread(target=node.exec, args=(ping,), kwargs={"timeout": 20})
    pinger.start()
    try:
        out = lab.capture("uplink", tmp_path / "uplink.pcapng", count=4, duration=10)
    finally:
        pinger.join()
    blocks = pcapng_blocks(out.read_bytes())
    assert blocks[0] == 0x0A0D0D0A and 1 in blocks and blocks.count(6) >= 4

    final = lab.down()
    assert final.removed and final.report is not None and final.report.error is None
    last = snaps[-1].links["uplink"].a_to_b.delivered
    assert final.report.links["uplink"].a_to_b.delivered >= last
    with pytest.raises(rtemu.NotFound):
        client.lab(lab.name)


def test_errors_carry_the_server_text(client: rtemu.Client, lab: rtemu.Lab) -> None:
    with pytest.raises(rtemu.Conflict) as e:
        client.up(TOPOLOGY.format(name=lab.name))
    assert lab.name in e.value.message
    with pytest.raises(rtemu.BadRequest) as bad:
        lab.link("uplink").set("delay 10 parsecs")
    assert bad.value.status == 400 and "parsecs" in bad.value.message
    with pytest.raises(rtemu.BadRequest) as toml:
        client.up('lab = "x"\n[nodes.a]\nbogus = 1\n')
    assert "<request>:3:1" in toml.value.message
    with pytest.raises(rtemu.NotFound):
        client.lab(unique_lab("n"))
    with pytest.raises(rtemu.BadRequest):
        lab.node("client").exec([])


def test_exec_timeout_kills_the_command(lab: rtemu.Lab) -> None:
    started = time.monotonic()
    r = lab.node("server").exec(["sleep", "30"], timeout=0.5)
    assert r.timed_out and r.status is None and not r.ok
    assert time.monotonic() - started < 10


def test_replace_and_a_lab_without_an_engine(client: rtemu.Client) -> None:
    name = unique_lab("p")
    plain = TOPOLOGY.format(name=name).replace('netem = "delay 10ms"\n', "")
    with client.up(plain) as lab:
        again = client.up(plain, replace=True)
        assert again.name == name and not again.link("uplink").impaired
        assert again.engines == []
        s = lab.stats()
        assert (s.lab, s.directions, s.pid) == (name, [], None)
        ok = lab.node("client").exec(["ping", "-c", "1", "server"], timeout=10, check=True)
        assert rtt_ms(ok) < 5
    assert name not in {x.name for x in client.labs()}


def test_unbounded_stream_ends_when_the_lab_goes_down(client: rtemu.Client) -> None:
    name = unique_lab("s")
    with client.up(TOPOLOGY.format(name=name)) as lab:
        got: list[rtemu.Stats] = []
        reader = threading.Thread(target=lambda: got.extend(lab.stats(stream=True, interval=0.1)))
        reader.start()
        time.sleep(0.6)
        lab.down()
        reader.join(timeout=15)
        assert not reader.is_alive(), "the stream went on after its lab went down"
        assert len(got) >= 2 and all(s.lab == name for s in got)


def test_tcp_with_the_token_file(tmp_path: Path) -> None:
    require_root()
    binary = os.environ.get("RTEMU_BIN") or shutil.which("rtemu")
    assert binary, "set RTEMU_BIN to the rtemu binary"
    sock, token = tmp_path / "api.sock", tmp_path / "api.token"
    port = free_port()
    argv = [
        binary,
        "serve",
        "--socket",
        str(sock),
        "--listen",
        f"127.0.0.1:{port}",
        "--token-file",
        str(token),
    ]
    server = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 15
        while not token.exists() and server.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert token.exists(), f"no token file; the server said: {server.stdout}"
        tcp = rtemu.Client(url=f"http://127.0.0.1:{port}", token_file=token)
        assert isinstance(tcp.labs(), list)
        assert tcp.openapi()["openapi"].startswith("3.1")
        wrong = rtemu.Client(url=f"http://127.0.0.1:{port}", token="0" * 64)
        with pytest.raises(rtemu.Unauthorized) as e:
            wrong.labs()
        assert e.value.status == 401 and "token" in e.value.message
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert not sock.exists() and not token.exists(), "the server left its socket or token"
