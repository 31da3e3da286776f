"""Shared test helpers: golden files, unique lab names, and the rule that skips a test that
cannot run here (not root, no browser) but fails it in CI."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import count
from pathlib import Path
from typing import Any

import pytest

import rtemu

FIXTURES = Path(__file__).parent / "fixtures"
_names = count()


def golden(name: str) -> Any:
    """The JSON of golden file ``fixtures/NAME``."""
    return json.loads((FIXTURES / name).read_text())


def unique_lab(tag: str) -> str:
    """A lab name no other test run uses at the same time (pid-based, at most 12 chars)."""
    name = f"py{os.getpid() % 0x100000:05x}{tag}{next(_names)}"
    assert len(name) <= 12, name
    return name


def skip_or_fail(reason: str) -> None:
    """Skips the test with ``reason``; fails instead under RTEMU_REQUIRE_ROOT=1 (CI), where
    every test must run."""
    if os.environ.get("RTEMU_REQUIRE_ROOT") == "1":
        pytest.fail(f"RTEMU_REQUIRE_ROOT=1 but {reason}")
    pytest.skip(reason)


def require_root() -> None:
    """Skips the test when not root, with the reason; fails instead under RTEMU_REQUIRE_ROOT=1."""
    if os.geteuid() != 0:
        skip_or_fail("needs root (labs are network namespaces); run as root to include it")


def rtt_ms(ping: rtemu.ExecResult) -> float:
    """The average round trip `ping` printed."""
    m = re.search(r"= [\d.]+/([\d.]+)/", ping.stdout)
    assert m, f"no rtt in ping's output: {ping.stdout!r} {ping.stderr!r}"
    return float(m.group(1))


@contextmanager
def lab_up(client: rtemu.Client, topology: str) -> Iterator[rtemu.Lab]:
    """The lab of ``topology``, brought down on the way out, even on an error; then none of its
    namespaces may be left."""
    with client.up(topology) as lab:
        yield lab
    left = {n.netns for n in lab.nodes} | {f"rtemu-{lab.name}"}
    assert not left & namespaces(), "namespaces left after down"


def namespaces() -> set[str]:
    """The named network namespaces of this machine."""
    try:
        return set(os.listdir("/run/netns"))
    except FileNotFoundError:
        return set()


@pytest.fixture(scope="session")
def client() -> Iterator[rtemu.Client]:
    """The client of the real server (started from RTEMU_BIN when none answers); root only."""
    require_root()
    with rtemu.Client() as c:
        yield c
