"""The API's JSON (golden files captured from a real server and engine) into dataclasses."""

from __future__ import annotations

import copy
import json
from typing import Any

import httpx
import pytest
from conftest import FIXTURES, golden

import rtemu
from rtemu.sse import SSEParser
from rtemu.types import Direction, HostPart


def offline() -> rtemu.Client:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise AssertionError(f"no request expected, got {request.method} {request.url}")

    return rtemu.Client(transport=httpx.MockTransport(refuse))


def test_stats_golden_has_both_directions_by_link() -> None:
    raw = golden("stats.json")
    s = rtemu.Stats.from_json(raw)
    assert s.lab == raw["lab"]
    assert s.io == "af-packet"
    assert s.pid == raw["pid"]
    assert s.monotonic_ns == raw["monotonic_ns"] > 0
    assert [d.dir for d in s.directions] == ["a-b", "b-a"]
    up = s.links["uplink"]
    assert up.a_to_b is s.directions[0] and up.b_to_a is s.directions[1]
    a = up.a_to_b
    first = raw["directions"][0]
    assert (a.from_node, a.to_node) == (first["from"], first["to"]) == ("router", "server")
    assert a.received == first["received"] and a.delivered == first["delivered"]
    assert a.dropped == first["dropped"] and a.dropped_total == sum(first["dropped"].values())
    assert a.conserved is True
    assert a.buffers == first["buffers"]
    f = a.fidelity
    assert f.count == first["fidelity"]["count"]
    assert f.released.p99_ns == first["fidelity"]["released"]["p99_ns"]
    assert f.arrival_lag.max_ns == first["fidelity"]["arrival_lag"]["max_ns"]
    assert (a.corrupted, a.cut, a.netem) == (0, False, "delay 5ms loss 1%")
    assert s.links["uplink"].b_to_a.netem == "delay 5ms"
    hist = f.released_histogram
    assert hist.edges_ns == first["fidelity"]["released_histogram"]["edges_ns"]
    assert sum(hist.counts) == f.count > 0
    buckets = hist.buckets()
    assert buckets[0][:2] == (0, 1000) and buckets[-1][1] is None
    assert [n for _, _, n in buckets] == hist.counts


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda h: h["counts"].pop(), "16 counts for 16 edges, expected one more"),
        (lambda h: h["edges_ns"].reverse(), "'edges_ns' must increase"),
        (lambda h: h["counts"].__setitem__(0, 1.5), "'counts' must be a list of integers"),
    ],
)
def test_a_broken_histogram_is_refused(change: Any, message: str) -> None:
    raw = golden("stats.json")
    change(raw["directions"][0]["fidelity"]["released_histogram"])
    with pytest.raises(rtemu.ProtocolError, match=message):
        rtemu.Stats.from_json(raw)


def test_counters_golden() -> None:
    raw = golden("counters.json")
    counters = [rtemu.InterfaceCounters.from_json(c, f"counters[{i}]") for i, c in enumerate(raw)]
    assert [(c.node, c.interface, c.segment) for c in counters] == [
        (c["node"], c["interface"], c["segment"]) for c in raw
    ]
    # The capture pinged client → server through the router: every end carried frames.
    by_end = {(c.node, c.segment): c for c in counters}
    assert by_end[("client", "office")].tx_packets > 0
    assert by_end[("server", "uplink")].rx_bytes > 0


def test_stats_without_engine_is_empty() -> None:
    s = rtemu.Stats.from_json(golden("stats-no-engine.json"))
    assert (s.io, s.pid, s.monotonic_ns, s.directions, s.links) == (None, None, None, [], {})


def test_stats_of_a_lab_across_hosts_name_each_engine() -> None:
    # Captured from a coordinator over two agents (`rtemu-bench cluster`): no `io` or `pid` of
    # its own, one engine per engine host.
    raw = golden("stats-across-hosts.json")
    s = rtemu.Stats.from_json(raw)
    assert (s.io, s.pid, s.monotonic_ns, s.threads) == (None, None, None, [])
    assert [(e.host, e.io, e.pid) for e in s.engines] == [
        ("h1", "af-packet", raw["engines"][0]["pid"])
    ]
    assert sorted(s.links) == ["lan", "wan"] and s.missing == []
    assert s.links["wan"].a_to_b.delivered == raw["directions"][0]["delivered"]
    raw["missing"] = [{"host": "h2", "links": ["wan"], "problem": "the agent did not answer"}]
    (missing,) = rtemu.Stats.from_json(raw).missing
    assert (missing.host, missing.links) == ("h2", ["wan"])
    del raw["missing"]
    with pytest.raises(rtemu.ProtocolError, match="stats.missing: expected a JSON array"):
        rtemu.Stats.from_json(raw)


def test_unknown_fields_are_ignored() -> None:
    raw = golden("stats.json")
    raw["new_field"] = 1
    raw["directions"][0]["another"] = {"x": 1}
    assert rtemu.Stats.from_json(raw).links["uplink"].a_to_b.received > 0


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.pop("delivered"), "no 'delivered'"),
        (lambda d: d.__setitem__("delivered", "10"), "'delivered' is '10', expected int"),
        (lambda d: d.__setitem__("received", True), "'received' is True, expected int"),
        (lambda d: d.__setitem__("dir", "up"), "'dir' is 'up'"),
        (lambda d: d["fidelity"]["released"].pop("p99_ns"), "fidelity.released: the reply has no"),
        (lambda d: d["dropped"].__setitem__("loss", -0.5), "'dropped' must map kinds to counts"),
    ],
)
def test_broken_direction_names_the_field(change: Any, message: str) -> None:
    raw = golden("stats.json")
    change(raw["directions"][0])
    with pytest.raises(rtemu.ProtocolError) as e:
        rtemu.Stats.from_json(raw)
    assert message in str(e.value)
    assert "stats.directions[0]" in str(e.value)


def test_kernel_drops_are_unknown_where_the_io_cannot_tell() -> None:
    raw = golden("stats.json")
    raw["directions"][0]["kernel_drops"] = None
    assert rtemu.Stats.from_json(raw).links["uplink"].a_to_b.kernel_drops is None


def test_a_link_missing_a_direction_is_refused() -> None:
    raw = golden("stats.json")
    del raw["directions"][1]
    with pytest.raises(rtemu.ProtocolError, match="directions \\['a-b'\\], expected both"):
        rtemu.Stats.from_json(raw)
    raw = golden("stats.json")
    raw["directions"][1] = copy.deepcopy(raw["directions"][0])
    with pytest.raises(rtemu.ProtocolError, match="direction a-b twice"):
        rtemu.Stats.from_json(raw)


def test_down_reply_carries_the_final_report() -> None:
    raw = golden("down.json")
    d = rtemu.DownResult.from_json(raw)
    assert d.removed is True and d.lab == raw["lab"]
    assert d.report is not None and d.report.error is None
    assert d.report.cpu_ns == raw["report"]["cpu_ns"]
    assert d.report.links["uplink"].b_to_a.delivered == raw["report"]["directions"][1]["delivered"]


def test_down_reply_with_an_engine_error_or_no_report() -> None:
    d = rtemu.DownResult.from_json(
        {"lab": "x", "removed": True, "report": {"lab": "x", "error": "engine gone"}}
    )
    assert d.report is not None and d.report.error == "engine gone" and d.report.links == {}
    assert rtemu.DownResult.from_json({"lab": "x", "removed": False, "report": None}).report is None


def test_lab_golden() -> None:
    raw = golden("lab.json")
    lab = rtemu.Lab.from_json(raw, offline())
    assert (lab.name, lab.file, lab.status) == (raw["name"], raw["file"], raw["status"])
    assert lab.file == "<request>" and lab.status == "up"
    assert [n.name for n in lab.nodes] == [n["name"] for n in raw["nodes"]]
    for node, rn in zip(lab.nodes, raw["nodes"], strict=True):
        assert node.lab == lab.name and node.netns == rn["netns"]
        assert node.loopback == rn["loopback"]
        assert [(i.name, i.mac, i.addresses, i.segment) for i in node.interfaces] == [
            (i["name"], i["mac"], i["addresses"], i["segment"]) for i in rn["interfaces"]
        ]
    server = next(n for n in lab.nodes if n.name == "server")
    assert server.loopback == ["192.0.2.1/32"]
    assert server.host is None
    placed = rtemu.Node.from_json({**raw["nodes"][0], "host": "h2"}, offline(), lab.name, "n")
    assert placed.host == "h2"
    with pytest.raises(rtemu.ProtocolError, match="'host' is 7"):
        rtemu.Node.from_json({**raw["nodes"][0], "host": 7}, offline(), lab.name, "n")
    link = lab.links[0]
    rl = raw["links"][0]
    assert (link.name, link.a, link.b) == (rl["name"], rl["a"], rl["b"])
    assert (link.impaired, link.a_to_b, link.b_to_a) == (True, "delay 5ms loss 1%", "delay 5ms")
    assert link.underlay is None
    across = {**rl, "underlay": {"host": "h1", "peer": "h2", "rtt_ns": 2_057_000}}
    crossing = rtemu.Link.from_json(across, offline(), lab.name, "l")
    assert crossing.underlay == rtemu.Underlay("h1", "h2", 2_057_000)
    assert [(x.name, x.members, x.ipv4, x.ipv6) for x in lab.lans] == [
        (x["name"], x["members"], x["ipv4"], x["ipv6"]) for x in raw["lans"]
    ]
    assert lab.detached == [] and lab.externals == []
    # The client is not part of a lab's value.
    assert rtemu.Lab.from_json(raw, offline()) == lab
    assert "_client" not in repr(lab)
    ext = {"name": "ext-eth9", "node": "server", "host": "eth9", "mode": "macvlan"}
    raw["externals"] = [ext]
    (parsed,) = rtemu.Lab.from_json(raw, offline()).externals
    assert parsed == rtemu.External("ext-eth9", "server", "eth9", "macvlan")


def test_a_lab_on_one_machine_names_its_engine_and_the_links_its_threads_serve() -> None:
    raw = golden("lab.json")
    (engine,) = rtemu.Lab.from_json(raw, offline()).engines
    (rl,) = raw["engines"]
    assert (engine.host, engine.io, engine.pid) == (rl["host"], "af-packet", rl["pid"])
    assert engine.host and engine.pid > 0
    # The one impaired link, served by one of its release threads, each in a class it names.
    assert sorted(link for t in engine.threads for link in t.links) == ["uplink"]
    assert [t.index for t in engine.threads] == list(range(len(rl["threads"])))
    assert all(t.policy.startswith("SCHED_") for t in engine.threads)
    # Read again later (a process detached meanwhile): the same threads, whatever their load.
    (later,) = rtemu.Lab.from_json(golden("lab-detached.json"), offline()).engines
    assert [(t.index, t.links) for t in later.threads] == [
        (t.index, t.links) for t in engine.threads
    ]
    assert later.pid == engine.pid
    # Without an engine that answers, a lab has none.
    assert rtemu.Lab.from_json({**raw, "engines": []}, offline()).engines == []
    del raw["engines"]
    assert rtemu.Lab.from_json(raw, offline()).engines == []


def test_lists_golden_match_the_lab() -> None:
    c = offline()
    lab = rtemu.Lab.from_json(golden("lab.json"), c)
    (listed,) = [rtemu.LabSummary.from_json(x, c) for x in golden("labs.json")]
    counts = (listed.nodes, listed.links, listed.lans, listed.externals)
    assert counts == (len(lab.nodes), len(lab.links), len(lab.lans), len(lab.externals))
    # Listed after a process was started in it, as the lab read then: a new revision.
    now = rtemu.Lab.from_json(golden("lab-detached.json"), c)
    assert (len(lab.detached), listed.detached, len(now.detached)) == (0, 1, 1)
    assert listed.revision == now.revision != lab.revision
    assert (now.nodes, now.links, now.lans) == (lab.nodes, lab.links, lab.lans)
    (d,) = now.detached
    assert (d.node, d.command, d.running) == ("server", ["sleep", "60"], True)
    assert d.pid > 0 and d.log.endswith(".log")
    nodes = [rtemu.Node.from_json(x, c, lab.name, "n") for x in golden("nodes.json")]
    links = [rtemu.Link.from_json(x, c, lab.name, "l") for x in golden("links.json")]
    lans = [rtemu.Lan.from_json(x, lab.name, "l") for x in golden("lans.json")]
    assert (nodes, links, lans) == (lab.nodes, lab.links, lab.lans)


def test_stream_golden_parses_to_stats() -> None:
    events = SSEParser().feed((FIXTURES / "stats-stream.txt").read_bytes())
    assert [e.event for e in events] == ["stats", "stats"]
    snaps = [rtemu.Stats.from_json(json.loads(e.data)) for e in events]
    a = [s.links["uplink"].a_to_b for s in snaps]
    assert a[0].from_node == "router" and a[0].to_node == "server"
    assert a[0].delivered <= a[1].delivered


@pytest.mark.parametrize("case", sorted(golden("errors.json")))
def test_error_golden_maps_to_its_exception(case: str) -> None:
    expected = {
        "up-bad-toml": rtemu.BadRequest,
        "up-exists": rtemu.Conflict,
        "set-bad-netem": rtemu.BadRequest,
        "no-lab": rtemu.NotFound,
        "bad-lab-name": rtemu.BadRequest,
        "exec-empty-argv": rtemu.BadRequest,
    }[case]
    reply = golden("errors.json")[case]
    c = rtemu.Client(
        transport=httpx.MockTransport(lambda r: httpx.Response(reply["status"], json=reply["body"]))
    )
    with pytest.raises(expected) as e:
        c.labs()
    assert (e.value.status, e.value.message) == (reply["status"], reply["body"]["error"])


def test_topology_errors_name_the_place() -> None:
    assert golden("errors.json")["up-bad-toml"]["body"]["error"].startswith("<request>:3:1: ")


def test_a_lab_says_where_its_programs_run_only_when_kept_off_the_engine() -> None:
    raw = golden("lab.json")
    assert rtemu.Lab.from_json(raw, offline()).programs_cpus is None
    kept = rtemu.Lab.from_json({**raw, "programs_cpus": "0,2-3"}, offline())
    assert kept.programs_cpus == "0,2-3"
    with pytest.raises(rtemu.ProtocolError, match="programs_cpus"):
        rtemu.Lab.from_json({**raw, "programs_cpus": 0}, offline())


SHARED = {
    "error": "its state file is not JSON",
    "hosts": [
        {"host": "h1", "agent": "192.0.2.1:7781", "status": "up"},
        {"host": "h2", "agent": "192.0.2.2:7781", "status": "missing", "problem": "gone"},
    ],
    "programs_cpus": "0,2-3",
}


def test_a_lab_and_its_list_entry_read_the_fields_they_share_alike() -> None:
    c = offline()
    lab = rtemu.Lab.from_json({**golden("lab.json"), **SHARED}, c)
    (listed,) = [rtemu.LabSummary.from_json({**x, **SHARED}, c) for x in golden("labs.json")]
    shared = ("name", "file", "status", "error", "hosts", "programs_cpus")
    assert [getattr(lab, f) for f in shared] == [getattr(listed, f) for f in shared]
    assert lab.hosts[1] == HostPart("h2", "192.0.2.2:7781", "missing", "gone")
    assert (lab.error, lab.programs_cpus) == (SHARED["error"], SHARED["programs_cpus"])


@pytest.mark.parametrize(
    ("key", "bad", "message"),
    [
        ("name", 7, "lab: 'name'"),
        ("revision", None, "lab: 'revision'"),
        ("error", 3, "lab: 'error'"),
        ("hosts", "h1", "lab.hosts: expected a JSON array, got str"),
        ("hosts", [{"host": "h1"}], "lab.hosts"),
        ("programs_cpus", 0, "lab: 'programs_cpus'"),
    ],
)
def test_a_lab_and_its_list_entry_refuse_a_bad_shared_field_alike(
    key: str, bad: Any, message: str
) -> None:
    c = offline()
    errors = []
    for parse, raw in [
        (rtemu.Lab.from_json, golden("lab.json")),
        (rtemu.LabSummary.from_json, golden("labs.json")[0]),
    ]:
        with pytest.raises(rtemu.ProtocolError, match=message) as e:
            parse({**raw, key: bad}, c)
        errors.append(str(e.value))
    assert errors[0] == errors[1]


def test_lab_without_a_list_is_refused() -> None:
    raw = golden("lab.json")
    raw["links"] = {"uplink": {}}
    with pytest.raises(rtemu.ProtocolError, match="lab.links: expected a JSON array, got dict"):
        rtemu.Lab.from_json(raw, offline())


def test_exec_timeout_golden() -> None:
    r = rtemu.ExecResult.from_json(golden("exec-timeout.json"), "client", ["sleep", "5"])
    assert r.timed_out and r.status is None and r.signal == 9 and not r.ok
    assert r.describe().startswith("timed out after 0.2")


def test_exec_result() -> None:
    raw = golden("exec.json")
    assert "3 packets transmitted" in raw["stdout"]
    r = rtemu.ExecResult.from_json(raw, "client", ["ping", "server"])
    assert r.ok and r.status == 0 and r.stdout == raw["stdout"] and r.duration == raw["duration"]
    killed = rtemu.ExecResult.from_json(dict(raw, status=None, signal=9), "client", ["x"])
    assert not killed.ok and killed.describe() == "killed by signal 9"
    late = dict(raw, status=None, timed_out=True, duration=2)
    assert rtemu.ExecResult.from_json(late, "c", ["x"]).describe() == "timed out after 2 s"
    assert (
        rtemu.ExecResult.from_json(dict(raw, status=3), "c", ["x"]).describe()
        == "exited with status 3"
    )


def test_change_times() -> None:
    assert rtemu.Change(1.5, "delay 5ms").to_json() == {
        "at": "1500000us",
        "netem": "delay 5ms",
        "dir": "both",
    }
    assert rtemu.Change("10s", "delay 5ms", "a-b").to_json()["at"] == "10s"
    with pytest.raises(ValueError, match="at least 0 s"):
        rtemu.Change(-1, "delay 5ms").to_json()
    with pytest.raises(ValueError, match="at least 0 s"):
        rtemu.Change(float("nan"), "delay 5ms").to_json()


def test_a_direction_between_hosts_carries_its_underlay() -> None:
    raw = golden("stats.json")["directions"][0]
    assert Direction.from_json(raw, "d").underlay is None
    raw["underlay"] = {"host": "h1", "peer": "h2", "rtt_ns": 2_102_000}
    assert Direction.from_json(raw, "d").underlay == rtemu.Underlay("h1", "h2", 2_102_000)
    raw["underlay"]["rtt_ns"] = None
    assert Direction.from_json(raw, "d").underlay == rtemu.Underlay("h1", "h2", None)
    raw["underlay"] = {"host": "h1", "rtt_ns": 1}
    with pytest.raises(rtemu.ProtocolError, match="d.underlay: the reply has no 'peer'"):
        Direction.from_json(raw, "d")


def test_direction_is_a_value() -> None:
    raw = golden("stats.json")["directions"][0]
    assert Direction.from_json(raw, "d") == Direction.from_json(copy.deepcopy(raw), "d")
