"""Drive rtemu labs from Python: bring a lab up, change its links, run programs in its nodes,
read its engine's counters, capture its frames, bring it down.

::

    import rtemu

    with rtemu.up("examples/shaped-path.toml") as lab:       # down on exit, even on error
        lab.link("uplink").set("delay 50ms loss 1%")
        out = lab.node("client").exec(["ping", "-c", "5", "server"])
        for s in lab.stats(stream=True, interval=0.5, count=4):
            print(s.links["uplink"].a_to_b.delivered)

The package talks to ``rtemu serve`` over its HTTP API (on ``/run/rtemu/api.sock``, so as
root), starting one when none answers. :class:`Client` connects explicitly, also over TCP.
"""

from __future__ import annotations

import os

from .client import Client, default_client
from .errors import (
    BadRequest,
    CommandFailed,
    Conflict,
    ConnectionFailed,
    EngineNotRunning,
    InvalidTopology,
    NotFound,
    ProtocolError,
    RtemuError,
    ServerError,
    Unauthorized,
)
from .lab import Change, Lab, LabSummary, Lan, Link, Node
from .types import (
    Container,
    Detached,
    Direction,
    DownResult,
    EngineThread,
    ExecResult,
    External,
    Fidelity,
    FinalReport,
    Histogram,
    Interface,
    InterfaceCounters,
    LinkStats,
    Percentiles,
    Stats,
    Underlay,
)

__version__ = "0.1.0"


def up(topology: str | os.PathLike[str], name: str | None = None, replace: bool = False) -> Lab:
    """Brings a lab up through the default client; see :meth:`Client.up`."""
    return default_client().up(topology, name=name, replace=replace)


def labs() -> list[LabSummary]:
    """Every lab that is up, counted, through the default client; see :meth:`Client.labs`."""
    return default_client().labs()


def lab(name: str) -> Lab:
    """The lab called ``name``, through the default client."""
    return default_client().lab(name)


__all__ = [
    "BadRequest",
    "Change",
    "Client",
    "CommandFailed",
    "Conflict",
    "ConnectionFailed",
    "Detached",
    "Direction",
    "DownResult",
    "EngineNotRunning",
    "EngineThread",
    "ExecResult",
    "External",
    "Fidelity",
    "FinalReport",
    "Histogram",
    "Container",
    "Interface",
    "InterfaceCounters",
    "InvalidTopology",
    "Lab",
    "LabSummary",
    "Lan",
    "Link",
    "LinkStats",
    "Node",
    "NotFound",
    "Percentiles",
    "ProtocolError",
    "RtemuError",
    "ServerError",
    "Stats",
    "Underlay",
    "Unauthorized",
    "default_client",
    "lab",
    "labs",
    "up",
]
