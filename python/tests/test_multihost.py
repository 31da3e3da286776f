"""A lab across hosts driven from Python and shown in the web view exactly as a lab on one host.

The hosts are network namespaces on this machine, each running ``rtemu serve`` as its agent,
with a coordinating ``rtemu serve --credentials`` in a namespace of its own:
``rtemu-bench cluster`` holds them (built beside ``rtemu``) and prints how to reach them. The
coordinator's Unix socket is a file, so the client here reaches it directly; the browser
reaches its TCP listener (token required) through the relay that ``rtemu-bench cluster`` keeps
in this namespace.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import printing, require_root, rtt_ms, unique_lab, wait_for
from test_web import browser as browser  # noqa: F401 (a fixture: Chromium, quit after)
from test_web import by_css, open_details, severe_console_messages, shown_model, submit_model

import rtemu
from rtemu.server import rtemu_binary

TOPOLOGY = """
lab = "{name}"
{hosts}
[nodes.a]
host = "h1"
[nodes.b]
host = "h1"
[nodes.c]
host = "h2"
run = ["echo c says hello from h2"]
[nodes.d]
host = "h2"
[[links]]
endpoints = ["a", "b"]
[[links]]
name = "wan"
endpoints = ["b", "c"]
netem = "delay 10ms"
[[links]]
endpoints = ["c", "d"]
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Two hosts with their agents and a coordinator (``rtemu-bench cluster``), ended after:
    what it printed (its socket, the web view's address, the ``[hosts]`` table)."""
    require_root()
    bench = Path(rtemu_binary()).with_name("rtemu-bench")
    log = tmp_path_factory.mktemp("cluster") / "cluster.log"
    with printing([str(bench), "cluster"], log, r"rtemu-bench cluster: (\{.*\})\n", 60) as m:
        held: dict[str, Any] = json.loads(m.group(1))
        yield held


@pytest.fixture(scope="module")
def coordinator(cluster: dict[str, Any]) -> Iterator[rtemu.Client]:
    """The client of the coordinating server, over its Unix socket (it is never started)."""
    with rtemu.Client(socket=cluster["socket"], start_server=False) as c:
        yield c


@pytest.fixture(scope="module")
def spread(coordinator: rtemu.Client, cluster: dict[str, Any]) -> Iterator[rtemu.Lab]:
    """The chain a-b | c-d: a and b on h1, c and d on h2, ``wan`` (10 ms) between b and c;
    down after, on both hosts."""
    text = TOPOLOGY.format(name=unique_lab("mh"), hosts=cluster["hosts"])
    with coordinator.up(text) as lab:
        yield lab


def test_python_brings_up_and_drives_a_lab_across_hosts(
    coordinator: rtemu.Client, spread: rtemu.Lab
) -> None:
    # One lab, each node on its host, both hosts' parts up.
    assert spread.status == "up"
    assert [(h.host, h.status) for h in spread.hosts] == [("h1", "up"), ("h2", "up")]
    assert {n.name: n.host for n in spread.nodes} == {"a": "h1", "b": "h1", "c": "h2", "d": "h2"}
    # wan's engine runs on h1 (b's host), one release thread serving it; h2 carries no
    # impaired link, so no engine there.
    assert [(e.host, [t.links for t in e.threads]) for e in spread.engines] == [("h1", [["wan"]])]
    listed = [lab for lab in coordinator.labs() if lab.name == spread.name]
    assert len(listed) == 1 and listed[0].status == "up"
    # Counted from the record, its hosts as their agents list their parts: the revision the
    # lab's whole view has, so the lab need not be read again.
    assert (listed[0].nodes, listed[0].links, listed[0].hosts) == (
        4,
        len(spread.links),
        spread.hosts,
    )
    assert listed[0].revision == spread.refresh().revision
    assert spread.refresh() is spread

    # Commands run on the node's own host: a on h1 reaches d on h2 across wan, both ways.
    ping = spread.node("a").exec(["ping", "-c", "3", "-i", "0.2", "d"], check=True)
    assert 20.0 <= rtt_ms(ping) < 40.0, ping.stdout
    assert "c says hello from h2" in spread.node("c").logs().stdout

    # A change reaches the engine that carries wan, wherever it runs.
    spread.link("wan").set("delay 30ms")
    ping = spread.node("b").exec(["ping", "-c", "3", "-i", "0.2", "c"], check=True)
    assert 60.0 <= rtt_ms(ping) < 80.0, ping.stdout
    stats = spread.stats()
    wan = stats.links["wan"]
    assert wan.a_to_b.netem == "delay 30ms" and wan.b_to_a.netem == "delay 30ms"
    # Six echo requests crossed b → c, six replies c → b (and ARP besides).
    assert wan.a_to_b.delivered >= 6 and wan.b_to_a.delivered >= 6
    assert [e.host for e in stats.engines] and not stats.missing

    # Counters of nodes on both hosts in one answer.
    counted = {c.node for c in spread.counters(nodes=["a", "d"])}
    assert counted == {"a", "d"}


def test_down_across_hosts_reports_the_engine_and_leaves_no_lab(
    coordinator: rtemu.Client, cluster: dict[str, Any]
) -> None:
    text = TOPOLOGY.format(name=unique_lab("md"), hosts=cluster["hosts"])
    lab = coordinator.up(text)
    try:
        lab.node("b").exec(["ping", "-c", "2", "-i", "0.2", "c"], check=True)
    finally:
        done = lab.down()
    assert done.removed
    assert done.report is not None
    wan = done.report.links["wan"]
    assert wan.a_to_b.delivered >= 2 and wan.b_to_a.delivered >= 2
    assert all(lab.name != other.name for other in coordinator.labs())


def test_the_web_view_shows_and_changes_a_lab_across_hosts(
    browser: Any,  # noqa: F811 (the fixture imported above)
    cluster: dict[str, Any],
    spread: rtemu.Lab,
) -> None:
    page = browser
    page.get(f"{cluster['url']}&lab={spread.name}")
    wait_for(
        lambda: "live" in page.find_element("id", "status").text, 15, "the page never went live"
    )
    # Every node and link of both hosts in the picture; wan's row says which hosts it joins.
    shown = {
        kind: sorted(e.get_attribute(f"data-{kind}") for e in by_css(page, f"#graph [data-{kind}]"))
        for kind in ("node", "link")
    }
    assert shown == {"node": ["a", "b", "c", "d"], "link": sorted(x.name for x in spread.links)}
    (hosts,) = by_css(page, '#links-table tr[data-link="wan"] [data-hosts]')
    assert hosts.text == "h1 ↔ h2"
    # The engine line names h1's engine and its release thread, serving wan.
    engine = page.find_element("id", "engine")
    wait_for(lambda: "h1: thread 0" in engine.text, 10, f"the engine line: {engine.text!r}")
    assert "(wan)" in engine.text, engine.text

    # Frames crossing wan show in its row, counted by the engine of the host that carries it.
    (pps,) = by_css(page, '#links-table tr[data-link="wan"][data-dir="a-b"] [data-field="pps"]')
    pinging = threading.Thread(
        target=lambda: spread.node("b").exec(["ping", "-c", "25", "-i", "0.2", "c"], timeout=30)
    )
    pinging.start()
    try:
        wait_for(lambda: re.fullmatch(r"[1-9][\d.]*", pps.text), 10, f"wan shows {pps.text!r}")
    finally:
        pinging.join()

    # A model set in the page's form reaches that engine.
    open_details(page, "wan")
    submit_model(page, "delay 50ms")
    status = page.find_element("css selector", '[data-field="set-status"]')
    wait_for(lambda: status.text.startswith("applied"), 10, f"no acknowledgement: {status.text!r}")
    ping = spread.node("b").exec(["ping", "-c", "3", "-i", "0.2", "c"], check=True)
    assert 100.0 <= rtt_ms(ping) < 120.0, ping.stdout
    wait_for(
        lambda: shown_model(page, "wan") == ["delay 50ms"] * 3,
        5,
        f"the page shows {shown_model(page, 'wan')}",
    )
    assert severe_console_messages(page) == []
