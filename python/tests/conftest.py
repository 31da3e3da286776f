"""Shared test helpers: golden files, unique lab names, the rule that skips a test that
cannot run here (not root, no browser) but fails it in CI, and processes in nodes and beside
the tests."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import count
from pathlib import Path
from typing import Any, TypeVar

import pytest

import rtemu

FIXTURES = Path(__file__).parent / "fixtures"
_names = count()
T = TypeVar("T")


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


def free_port() -> int:
    """A TCP port of 127.0.0.1 free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


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


def wait_for(
    check: Callable[[], T | None],
    timeout: float,
    what: str,
    retry: tuple[type[Exception], ...] = (),
) -> T:
    """The first true value of ``check()`` polled until ``timeout`` seconds; fails with ``what``.
    A ``retry`` exception raised by ``check`` counts as not yet."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = check()
        except retry:
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"after {timeout} s: {what}")
        time.sleep(0.05)


def address(lab: rtemu.Lab, node: str, segment: str) -> str:
    """The IPv4 address of ``node``'s interface on ``segment``."""
    (iface,) = [
        i for n in lab.nodes if n.name == node for i in n.interfaces if i.segment == segment
    ]
    return iface.addresses[0].split("/")[0]


@contextmanager
def in_node(
    lab: rtemu.Lab, node: str, argv: list[str], log: Path
) -> Iterator[subprocess.Popen[bytes]]:
    """``argv`` running in ``node`` (output to ``log``), killed on the way out."""
    (netns,) = [n.netns for n in lab.nodes if n.name == node]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            ["ip", "netns", "exec", netns, *argv], stdout=out, stderr=subprocess.STDOUT
        )
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


@contextmanager
def printing(argv: list[str], log: Path, pattern: str, timeout: float) -> Iterator[re.Match[str]]:
    """``argv`` started (output to ``log``) and running once it printed ``pattern``: the match;
    a failure when it ends first or prints nothing of the kind in ``timeout`` seconds. It gets
    SIGINT on the way out, and SIGKILL 10 s later."""
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
    deadline = time.monotonic() + timeout
    try:
        while (found := re.search(pattern, log.read_text())) is None:
            if proc.poll() is not None or time.monotonic() > deadline:
                how = "ended" if proc.poll() is not None else f"ran {timeout} s"
                pytest.fail(
                    f"`{' '.join(argv)}` {how} without printing {pattern!r}: {log.read_text()}"
                )
            time.sleep(0.05)
        yield found
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
