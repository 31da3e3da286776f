"""Requests the package sends and how it reads replies, against a fake server in-process."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import golden

import rtemu

Handler = Callable[[httpx.Request], httpx.Response]


def fake(handler: Handler) -> tuple[rtemu.Client, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        request.read()
        seen.append(request)
        return handler(request)

    return rtemu.Client(transport=httpx.MockTransport(record)), seen


def routes(table: dict[tuple[str, str], Any]) -> Handler:
    def handle(request: httpx.Request) -> httpx.Response:
        key = (request.method, request.url.path)
        if key not in table:
            return httpx.Response(404, json={"error": f"no route {key}"})
        reply = table[key]
        return reply(request) if callable(reply) else httpx.Response(200, json=reply)

    return handle


LAB = golden("lab.json")


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, rtemu.BadRequest),
        (401, rtemu.Unauthorized),
        (404, rtemu.NotFound),
        (409, rtemu.Conflict),
        (422, rtemu.InvalidTopology),
        (500, rtemu.ServerError),
        (503, rtemu.EngineNotRunning),
        (502, rtemu.ServerError),
    ],
)
def test_error_status_maps_to_its_exception_with_the_server_text(
    status: int, kind: type[rtemu.RtemuError]
) -> None:
    text = "<request>:3:7: unknown key `nodez`"
    c, _ = fake(lambda r: httpx.Response(status, json={"error": text}))
    with pytest.raises(kind) as e:
        c.labs()
    assert e.value.status == status
    assert e.value.message == text and str(e.value) == text
    assert isinstance(e.value, rtemu.RtemuError)


def test_invalid_topology_is_a_bad_request() -> None:
    assert issubclass(rtemu.InvalidTopology, rtemu.BadRequest)


def test_error_without_a_json_body_keeps_the_text() -> None:
    c, _ = fake(lambda r: httpx.Response(502, text="bad gateway\n"))
    with pytest.raises(rtemu.ServerError, match="^bad gateway$"):
        c.labs()
    c, _ = fake(lambda r: httpx.Response(500, json=["not", "an", "error"]))
    with pytest.raises(rtemu.ServerError, match=r'\["not"'):
        c.labs()


def test_a_reply_that_is_not_json_is_a_protocol_error() -> None:
    c, _ = fake(lambda r: httpx.Response(200, text="<html>"))
    with pytest.raises(rtemu.ProtocolError, match="GET /v1/labs: the reply is not JSON"):
        c.labs()


def test_up_sends_inline_toml_or_an_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    c, seen = fake(routes({("POST", "/v1/labs"): lambda r: httpx.Response(201, json=LAB)}))
    toml = 'lab = "x"\n[nodes.a]\n'
    lab = c.up(toml, name="pyx", replace=True)
    assert lab.name == LAB["name"]
    assert json.loads(seen[-1].content) == {"topology": toml, "name": "pyx", "replace": True}
    monkeypatch.chdir(tmp_path)
    c.up("lab.toml")
    assert json.loads(seen[-1].content) == {"file": str(tmp_path / "lab.toml")}
    c.up(Path("/etc/x.toml"))
    assert json.loads(seen[-1].content) == {"file": "/etc/x.toml"}


def test_refresh_reads_the_lab_again_only_when_its_revision_changed() -> None:
    held = dict(LAB, revision="r1")
    newer = dict(LAB, revision="r2", detached=golden("lab-detached.json")["detached"])

    def get(r: httpx.Request) -> httpx.Response:
        if r.headers.get("if-none-match") == '"r2"':
            return httpx.Response(304, headers={"ETag": '"r2"'})
        return httpx.Response(200, json=newer, headers={"ETag": '"r2"'})

    c, seen = fake(routes({("GET", "/v1/labs/pygolden"): get}))
    lab = rtemu.Lab.from_json(held, c)
    fresh = lab.refresh()
    assert seen[-1].headers["if-none-match"] == '"r1"'
    assert (fresh.revision, len(fresh.detached)) == ("r2", 1)
    # Unchanged: the server sends no lab, and the one held is the answer.
    assert fresh.refresh() is fresh
    assert seen[-1].headers["if-none-match"] == '"r2"'
    assert len(seen) == 2


def test_labs_are_listed_counted_and_read_whole_on_demand() -> None:
    summary = golden("labs.json")
    c, seen = fake(
        routes(
            {
                ("GET", "/v1/labs"): summary,
                ("GET", "/v1/labs/pygolden"): golden("lab-detached.json"),
            }
        )
    )
    (listed,) = c.labs()
    assert isinstance(listed, rtemu.LabSummary)
    assert (listed.name, listed.nodes, listed.links, listed.detached) == ("pygolden", 3, 1, 1)
    whole = listed.lab()
    assert seen[-1].url.path == "/v1/labs/pygolden"
    assert (whole.revision, len(whole.nodes)) == (listed.revision, 3)


def test_names_in_paths_are_one_segment() -> None:
    c, seen = fake(routes({}))
    with pytest.raises(rtemu.NotFound):
        c.lab("../../etc")
    assert seen[-1].url.raw_path == b"/v1/labs/..%2F..%2Fetc"


def test_link_operations_send_the_api_bodies() -> None:
    ok = {"ok": True}
    c, seen = fake(
        routes(
            {
                ("GET", "/v1/labs/pygolden/links"): golden("links.json"),
                ("POST", "/v1/labs/pygolden/links/uplink/set"): ok,
                ("POST", "/v1/labs/pygolden/links/uplink/down"): ok,
                ("POST", "/v1/labs/pygolden/links/uplink/up"): ok,
                ("POST", "/v1/labs/pygolden/links/uplink/schedule"): ok,
            }
        )
    )
    lab = rtemu.Lab.from_json(LAB, c)
    link = lab.link("uplink")
    link.set("delay 50ms loss 1%")
    assert json.loads(seen[-1].content) == {"netem": "delay 50ms loss 1%", "dir": "both"}
    link.set("rate 1mbit", dir="b-a")
    assert json.loads(seen[-1].content) == {"netem": "rate 1mbit", "dir": "b-a"}
    link.down()
    link.up()
    assert [r.url.path.rsplit("/", 1)[1] for r in seen[-2:]] == ["down", "up"]
    link.schedule([("2s", "delay 80ms"), rtemu.Change(0.25, "delay 5ms", "a-b")])
    assert json.loads(seen[-1].content) == {
        "changes": [
            {"at": "2s", "netem": "delay 80ms", "dir": "both"},
            {"at": "250000us", "netem": "delay 5ms", "dir": "a-b"},
        ]
    }


def test_a_missing_name_lists_the_ones_there_are() -> None:
    c, _ = fake(
        routes(
            {
                ("GET", "/v1/labs/pygolden/links"): golden("links.json"),
                ("GET", "/v1/labs/pygolden/nodes"): golden("nodes.json"),
            }
        )
    )
    lab = rtemu.Lab.from_json(LAB, c)
    with pytest.raises(
        rtemu.NotFound, match="lab pygolden has no link 'upl' \\(its links: uplink\\)"
    ):
        lab.link("upl")
    with pytest.raises(
        rtemu.NotFound, match="no node 'web' \\(its nodes: client, router, server\\)"
    ):
        lab.node("web")


def test_exec_sends_argv_and_checks() -> None:
    reply = golden("exec.json")
    c, seen = fake(
        routes(
            {
                ("GET", "/v1/labs/pygolden/nodes"): golden("nodes.json"),
                ("POST", "/v1/labs/pygolden/nodes/client/exec"): lambda r: httpx.Response(
                    200, json=dict(reply, status=json.loads(r.content)["timeout"])
                ),
            }
        )
    )
    node = rtemu.Lab.from_json(LAB, c).node("client")
    ok = node.exec(["ping", "-c", "1", Path("server")], timeout=0)
    assert json.loads(seen[-1].content) == {"argv": ["ping", "-c", "1", "server"], "timeout": 0}
    assert ok.ok and ok.argv == ["ping", "-c", "1", "server"] and ok.node == "client"
    failed = node.exec(["false"], timeout=2)
    assert failed.status == 2 and not failed.ok
    failure = "`false` in node client exited with status 2"
    with pytest.raises(rtemu.CommandFailed, match=failure) as e:
        node.exec(["false"], timeout=2, check=True)
    assert e.value.result.status == 2
    with pytest.raises(TypeError, match="not a string"):
        node.exec("ping server")


def test_image_nodes_say_their_container_and_give_their_logs() -> None:
    node = dict(golden("nodes.json")[0], name="web")
    node["container"] = {"image": "localhost/web:1", "state": "exited", "exit_code": 3}
    logs = {
        "status": 0,
        "signal": None,
        "stdout": "listening\n",
        "stderr": "",
        "timed_out": False,
        "duration": 0.1,
    }
    c, seen = fake(
        routes(
            {
                ("GET", "/v1/labs/pygolden/nodes"): [node, golden("nodes.json")[1]],
                ("GET", "/v1/labs/pygolden/nodes/web/logs"): logs,
                ("POST", "/v1/labs/pygolden/nodes/web/exec"): dict(logs, stdout="a\n"),
            }
        )
    )
    lab = rtemu.Lab.from_json(LAB, c)
    web = lab.node("web")
    assert web.container == rtemu.Container("localhost/web:1", "exited", 3)
    assert lab.node(golden("nodes.json")[1]["name"]).container is None
    assert web.logs(tail=20).stdout == "listening\n"
    assert seen[-1].url.query == b"tail=20"
    assert web.exec(["cat", "/etc/image-name"], netns=True).stdout == "a\n"
    assert json.loads(seen[-1].content) == {
        "argv": ["cat", "/etc/image-name"],
        "timeout": 60.0,
        "netns": True,
    }


def sse_chunks(events: list[tuple[str, Any]], cut: int) -> Iterator[bytes]:
    data = b"".join(f"event: {e}\ndata: {json.dumps(d)}\n\n".encode() for e, d in events)
    for i in range(0, len(data), cut):
        yield data[i : i + cut]


@pytest.mark.parametrize("cut", [1, 7, 100, 100000])
def test_stats_stream_yields_each_event_until_end(cut: int) -> None:
    stats = golden("stats.json")
    events = [("stats", dict(stats, pid=i)) for i in range(3)] + [("end", {})]
    c, seen = fake(
        lambda r: httpx.Response(
            200, headers={"content-type": "text/event-stream"}, content=sse_chunks(events, cut)
        )
    )
    lab = rtemu.Lab.from_json(LAB, c)
    got = list(lab.stats(stream=True, interval=0.5, count=5))
    assert [s.pid for s in got] == [0, 1, 2]
    assert got[0].links["uplink"].a_to_b.delivered == stats["directions"][0]["delivered"]
    assert seen[-1].url.path == "/v1/labs/pygolden/stats/stream"
    assert dict(seen[-1].url.params) == {"interval": "0.5", "count": "5"}
    assert seen[-1].headers["accept"] == "text/event-stream"


def test_stats_stream_error_raises_before_the_first_item() -> None:
    c, _ = fake(lambda r: httpx.Response(400, json={"error": "interval must be in [0.05, 3600]"}))
    it = rtemu.Lab.from_json(LAB, c).stats(stream=True, interval=0.01)
    with pytest.raises(rtemu.BadRequest, match="interval must be"):
        next(it)


def test_stats_snapshot() -> None:
    c, _ = fake(routes({("GET", "/v1/labs/pygolden/stats"): golden("stats.json")}))
    s = rtemu.Lab.from_json(LAB, c).stats()
    assert isinstance(s, rtemu.Stats) and "uplink" in s.links


def test_capture_writes_the_stream_to_the_file(tmp_path: Path) -> None:
    body = bytes(range(256)) * 100
    c, seen = fake(lambda r: httpx.Response(200, content=iter([body[:1000], body[1000:]])))
    out = rtemu.Lab.from_json(LAB, c).capture(
        ["uplink", "client:eth0"], tmp_path / "x.pcapng", count=10, duration=2
    )
    assert out.read_bytes() == body
    assert seen[-1].url.params.multi_items() == [
        ("target", "uplink"),
        ("target", "client:eth0"),
        ("count", "10"),
        ("duration", "2"),
    ]
    assert seen[-1].headers["accept"] == "application/x-pcapng"
    with pytest.raises(ValueError, match="count=, duration="):
        rtemu.Lab.from_json(LAB, c).capture("uplink", tmp_path / "y.pcapng")


def test_with_block_takes_the_lab_down_even_on_error() -> None:
    down = golden("down.json")
    c, seen = fake(routes({("DELETE", "/v1/labs/pygolden"): down}))
    with pytest.raises(KeyError):
        with rtemu.Lab.from_json(LAB, c):
            raise KeyError("in the block")
    assert [(r.method, r.url.path) for r in seen] == [("DELETE", "/v1/labs/pygolden")]


def test_a_failing_down_is_noted_on_the_block_error() -> None:
    c, _ = fake(lambda r: httpx.Response(500, json={"error": "netlink said no"}))
    with pytest.raises(KeyError) as e:
        with rtemu.Lab.from_json(LAB, c):
            raise KeyError("in the block")
    assert e.value.__notes__ == ["and bringing lab pygolden down failed: netlink said no"]
    with pytest.raises(rtemu.ServerError, match="netlink said no"):
        with rtemu.Lab.from_json(LAB, c):
            pass


def test_tcp_client_sends_the_token_from_the_file(tmp_path: Path) -> None:
    token = tmp_path / "api.token"
    token.write_text("ab" * 32 + "\n")
    seen: list[httpx.Request] = []

    def handle(r: httpx.Request) -> httpx.Response:
        seen.append(r)
        return httpx.Response(200, json=[])

    c = rtemu.Client(
        url="http://127.0.0.1:9", token_file=token, transport=httpx.MockTransport(handle)
    )
    assert c.labs() == []
    assert seen[0].headers["authorization"] == "Bearer " + "ab" * 32
    with pytest.raises(rtemu.ConnectionFailed, match="reading the API token from"):
        rtemu.Client(url="http://127.0.0.1:9", token_file=tmp_path / "none")


def test_nothing_listening_without_start_is_a_connection_error(tmp_path: Path) -> None:
    c = rtemu.Client(socket=tmp_path / "none.sock", start_server=False)
    with pytest.raises(rtemu.ConnectionFailed, match="no rtemu server answers at .*none.sock"):
        c.labs()
