"""The Server-Sent Events parser, whole and over every way of cutting the stream in chunks."""

from __future__ import annotations

import json
import random
from itertools import pairwise

import pytest
from conftest import FIXTURES, golden

from rtemu.sse import Event, SSEParser


def parse(chunks: list[bytes]) -> list[Event]:
    p = SSEParser()
    return [e for c in chunks for e in p.feed(c)]


def test_fields_comments_and_multiline_data() -> None:
    stream = (
        b": a comment\n"
        b'event: stats\ndata: {"a": 1}\nid: 7\n\n'
        b"data:no space\ndata:  two spaces\n\n"
        b"event: nothing\n\n"
        b"data\n\n"
        b"event: end\r\ndata: {}\r\n\r\n"
    )
    assert parse([stream]) == [
        Event("stats", '{"a": 1}', "7"),
        Event("message", "no space\n two spaces", "7"),
        Event("message", "", "7"),
        Event("end", "{}", "7"),
    ]


def test_an_event_is_dispatched_only_at_its_blank_line() -> None:
    p = SSEParser()
    assert p.feed(b"event: stats\ndata: 1\n") == []
    assert p.feed(b"\n") == [Event("stats", "1")]


def test_bom_and_lone_cr_line_endings() -> None:
    assert parse([b"\xef\xbb\xbfdata: x\r\rdata: y\r\r"]) == [
        Event("message", "x"),
        Event("message", "y"),
    ]


def stream_and_events(rng: random.Random) -> tuple[bytes, list[Event]]:
    """A stream of stats events like the server's, with mixed line endings and UTF-8."""
    stats = golden("stats.json")
    out, events = bytearray(), []
    for i in range(rng.randint(1, 6)):
        stats["lab"] = rng.choice(["shaped", "é-lab", "lab→2", "x"])
        stats["pid"] = i
        data = json.dumps(stats)
        nl = rng.choice([b"\n", b"\r\n", b"\r"])
        if rng.random() < 0.3:
            out += b": keep-alive" + nl
        out += b"event: stats" + nl + b"data: " + data.encode() + nl + nl
        events.append(Event("stats", data))
    out += b"event: end\r\ndata: {}\r\n\r\n"
    events.append(Event("end", "{}"))
    return bytes(out), events


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *sorted(cuts), len(data)]
    return [data[a:b] for a, b in pairwise(bounds)]


@pytest.mark.parametrize("seed", range(200))
def test_any_chunking_gives_the_same_events(seed: int) -> None:
    rng = random.Random(seed)
    data, events = stream_and_events(rng)
    assert parse([data]) == events
    # Cuts anywhere (inside CRLF, inside multi-byte characters), empty chunks included.
    cuts = [rng.randint(0, len(data)) for _ in range(rng.randint(1, 40))]
    assert parse(split(data, cuts)) == events
    assert parse([data[i : i + 1] for i in range(len(data))]) == events


def test_every_single_cut_of_a_small_stream() -> None:
    data = "event: stats\r\ndata: é→\r\n\r\ndata: b\rdata: c\n\n".encode()
    whole = parse([data])
    assert whole == [Event("stats", "é→"), Event("message", "b\nc")]
    for i in range(len(data) + 1):
        for j in range(i, len(data) + 1):
            assert parse(split(data, [i, j])) == whole, (i, j)


@pytest.mark.parametrize("seed", range(50))
def test_the_servers_own_stream_survives_any_chunking(seed: int) -> None:
    data = (FIXTURES / "stats-stream.txt").read_bytes()
    whole = parse([data])
    assert [e.event for e in whole] == ["stats", "stats"]
    rng = random.Random(seed)
    cuts = [rng.randint(0, len(data)) for _ in range(rng.randint(1, 200))]
    assert parse(split(data, cuts)) == whole
