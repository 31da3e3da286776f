"""Labs, nodes, links and LANs: what the API describes, with what can be done to each."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypedDict, TypeVar, overload
from urllib.parse import quote

from .errors import CommandFailed, NotFound, ProtocolError
from .sse import SSEParser
from .types import (
    Container,
    Detached,
    DownResult,
    ExecResult,
    External,
    HostEngine,
    HostPart,
    Interface,
    InterfaceCounters,
    Stats,
    Underlay,
    _field,
    _int_fields,
    _obj,
    _opt_str,
    _str,
    _strs,
    parse_list,
)

if TYPE_CHECKING:
    from .client import Client

#: A link direction as the API names it: both ways, first endpoint to second, or back.
Dir = Literal["both", "a-b", "b-a"]

#: Seconds beyond a command's own timeout that its HTTP request may take.
EXEC_MARGIN = 30.0


def segment(name: str) -> str:
    """``name`` as one path segment: a ``/`` or ``..`` in it cannot reach another resource."""
    return quote(name, safe="")


def _path(lab: str, *rest: str) -> str:
    return "/".join(["/v1/labs", segment(lab), *(segment(r) for r in rest)])


@dataclass(frozen=True)
class Node:
    """A node of a lab: its network namespace, loopback addresses and interfaces, in a lab
    across several machines the host it runs on (``None`` on one machine), and the container it
    runs when it has an image (``None`` for a bare namespace)."""

    lab: str
    name: str
    netns: str
    loopback: list[str]
    interfaces: list[Interface]
    _client: Client = field(repr=False, compare=False)
    host: str | None = None
    container: Container | None = None

    @classmethod
    def from_json(cls, value: Any, client: Client, lab: str, where: str) -> Node:
        """Parses the API's ``Node`` object of lab ``lab``."""
        o = _obj(value, where)
        return cls(
            lab=lab,
            name=_str(o, "name", where),
            netns=_str(o, "netns", where),
            loopback=_strs(o, "loopback", where),
            interfaces=parse_list(o.get("interfaces"), Interface.from_json, f"{where}.interfaces"),
            _client=client,
            # Only a multi-host lab's nodes say it.
            host=_opt_str(o, "host", where) if "host" in o else None,
            container=(
                Container.from_json(o["container"], f"{where}.container")
                if o.get("container") is not None
                else None
            ),
        )

    def exec(
        self,
        argv: Sequence[str | os.PathLike[str]],
        timeout: float = 60.0,
        check: bool = False,
        netns: bool = False,
    ) -> ExecResult:
        """Runs ``argv`` in this node and waits for it to end: in its container when it has
        one (its file system and environment), else in its network namespace.

        Args:
            argv: the program and its arguments, as a list (never a shell string: to use a
                shell, run ``["sh", "-c", "..."]``).
            timeout: seconds after which its process group is killed, in (0, 3600].
            check: raise :class:`~rtemu.CommandFailed` unless it exits with status 0.
            netns: in a node with a container, run in its network namespace outside the
                container.
        """
        if isinstance(argv, (str, bytes)):
            raise TypeError(
                "argv is a list of arguments, not a string: write "
                '["ping", "-c", "3", "server"], or ["sh", "-c", "..."] for a shell'
            )
        args = [os.fspath(a) for a in argv]
        if not all(isinstance(a, str) for a in args):
            raise TypeError(f"argv must hold strings, got {args!r}")
        reply = self._client.request(
            "POST",
            _path(self.lab, "nodes", self.name, "exec"),
            # Sent only when asked, so a server without containers understands the rest.
            json={"argv": args, "timeout": timeout, **({"netns": True} if netns else {})},
            timeout=timeout + EXEC_MARGIN,
        )
        result = ExecResult.from_json(reply, self.name, args)
        if check and not result.ok:
            detail = result.stderr.strip()[-2000:]
            raise CommandFailed(
                f"`{' '.join(args)}` in node {self.name} {result.describe()}"
                + (f": {detail}" if detail else ""),
                result,
            )
        return result

    def logs(self, tail: int | None = None) -> ExecResult:
        """This node's output: its container's, or its start-up commands' (the last ``tail``
        lines when given), in ``stdout`` and ``stderr`` of the result."""
        path = _path(self.lab, "nodes", self.name, "logs")
        if tail is not None:
            path += f"?tail={int(tail)}"
        reply = self._client.request("GET", path)
        return ExecResult.from_json(reply, self.name, ["logs"])


@dataclass(frozen=True)
class Change:
    """One scheduled change of a link: at ``at`` after the request, apply ``netem``.

    ``at`` is a time as a topology file writes it (``"10s"``, ``"1.5s"``, ``"250ms"``) or a
    number of seconds.
    """

    at: str | float
    netem: str
    dir: Dir = "both"

    def to_json(self) -> dict[str, str]:
        """The API's form of the change."""
        at = self.at
        if not isinstance(at, str):
            if isinstance(at, bool) or not at >= 0:
                raise ValueError(f"a change's time must be at least 0 s, got {at!r}")
            at = f"{round(at * 1e6)}us"
        return {"at": at, "netem": self.netem, "dir": self.dir}


@dataclass(frozen=True)
class Link:
    """A point-to-point link between nodes ``a`` and ``b``.

    ``a_to_b``/``b_to_a`` are each direction's netem text when the link is impaired, as they
    were when this object was read. ``underlay`` is, for a link between hosts, the underlay it
    crosses besides its model (``None`` on one machine).
    """

    lab: str
    name: str
    a: str
    b: str
    impaired: bool
    a_to_b: str | None
    b_to_a: str | None
    _client: Client = field(repr=False, compare=False)
    underlay: Underlay | None = None

    @classmethod
    def from_json(cls, value: Any, client: Client, lab: str, where: str) -> Link:
        """Parses the API's ``Link`` object of lab ``lab``."""
        o = _obj(value, where)
        return cls(
            lab=lab,
            name=_str(o, "name", where),
            a=_str(o, "a", where),
            b=_str(o, "b", where),
            impaired=_field(o, "impaired", bool, where),
            a_to_b=_opt_str(o, "a_to_b", where),
            b_to_a=_opt_str(o, "b_to_a", where),
            _client=client,
            underlay=(
                Underlay.from_json(o["underlay"], f"{where}.underlay") if "underlay" in o else None
            ),
        )

    def _post(self, action: str, body: Any = None) -> None:
        self._client.request("POST", _path(self.lab, "links", self.name, action), json=body)

    def set(self, netem: str, dir: Dir = "both") -> None:
        """Replaces the link's model with ``netem`` (netem's syntax), now, in ``dir``."""
        self._post("set", {"netem": netem, "dir": dir})

    def down(self) -> None:
        """Cuts the link: it carries nothing until :meth:`up`."""
        self._post("down")

    def up(self) -> None:
        """Restores a link cut by :meth:`down`."""
        self._post("up")

    def schedule(self, changes: Iterable[Change | tuple[str | float, str]]) -> None:
        """Has the engine apply each change at its time after now.

        Each change is a :class:`Change` or an ``(at, netem)`` pair (both directions).
        """
        body = [(c if isinstance(c, Change) else Change(*c)).to_json() for c in changes]
        self._post("schedule", {"changes": body})


@dataclass(frozen=True)
class Lan:
    """A LAN (a bridge) of a lab: its members and subnets."""

    lab: str
    name: str
    members: list[str]
    ipv4: str | None
    ipv6: str | None

    @classmethod
    def from_json(cls, value: Any, lab: str, where: str) -> Lan:
        """Parses the API's ``Lan`` object of lab ``lab``."""
        o = _obj(value, where)
        return cls(
            lab,
            _str(o, "name", where),
            _strs(o, "members", where),
            _opt_str(o, "ipv4", where),
            _opt_str(o, "ipv6", where),
        )


class _LabFields(TypedDict):
    """The fields :class:`Lab` and :class:`LabSummary` share, as the API's ``Lab`` and
    ``LabSummary`` objects both hold them."""

    name: str
    file: str
    status: str
    revision: str
    error: str | None
    hosts: list[HostPart]
    programs_cpus: str | None


def _lab_fields(o: dict[str, Any], where: str) -> _LabFields:
    """Parses the fields a lab's view and its list entry share: one reading for both."""
    return _LabFields(
        name=_str(o, "name", where),
        file=_str(o, "file", where),
        status=_str(o, "status", where),
        revision=_str(o, "revision", where),
        # Only an unreadable lab's entry says it.
        error=_opt_str(o, "error", where) if "error" in o else None,
        # Only a lab across hosts has them.
        hosts=parse_list(o.get("hosts", []), HostPart.from_json, f"{where}.hosts"),
        # Only a lab whose programs are kept off its engine's CPUs says it.
        programs_cpus=_opt_str(o, "programs_cpus", where) if "programs_cpus" in o else None,
    )


@dataclass(frozen=True)
class LabSummary:
    """A lab as the lab list (:meth:`Client.labs`) shows it: its topology counted rather than
    listed, so listing stays cheap however large the labs are; :meth:`lab` reads it whole.

    Attributes:
        status: as :attr:`Lab.status`.
        error: as :attr:`Lab.error`.
        file: the topology file it came from (``<request>`` for inline TOML).
        nodes: how many nodes it has (of one host's part: that host's); ``links``, ``lans``,
            ``externals`` and ``detached`` count those of :class:`Lab` likewise.
        hosts: as :attr:`Lab.hosts`.
        programs_cpus: as :attr:`Lab.programs_cpus`.
        revision: the lab's :attr:`Lab.revision` now: a :class:`Lab` of that revision is
            the lab as it stands.
    """

    name: str
    file: str
    status: str
    nodes: int
    links: int
    lans: int
    externals: int
    detached: int
    revision: str
    _client: Client = field(repr=False, compare=False)
    error: str | None = None
    hosts: list[HostPart] = field(default_factory=list)
    programs_cpus: str | None = None

    @classmethod
    def from_json(cls, value: Any, client: Client, where: str = "lab") -> LabSummary:
        """Parses the API's ``LabSummary`` object."""
        o = _obj(value, where)
        counts = _int_fields(o, ("nodes", "links", "lans", "externals", "detached"), where)
        return cls(**_lab_fields(o, where), _client=client, **counts)

    def lab(self) -> Lab:
        """The lab whole, as the server describes it now."""
        return self._client.lab(self.name)

    def down(self) -> DownResult:
        """Brings the lab down and returns the engine's final report."""
        return self._client.down(self.name)


@dataclass(frozen=True)
class Lab:
    """A lab as read from the server, and what can be done to it.

    Used in a ``with`` block, the lab goes down when the block ends, even on an error.
    ``nodes``, ``links`` and ``lans`` are as they were when the lab was read; :meth:`node`,
    :meth:`link` and :meth:`lan` read the server's current ones.

    Attributes:
        status: ``"up"``, ``"incomplete"`` (its ``up`` did not finish), ``"degraded"`` (its
            engine is not running) or ``"unreadable"`` (its state directory holds no state rtemu
            can read: ``error`` says why, and the lab has no nodes or links).
        error: why its state cannot be read, for an ``"unreadable"`` lab; else ``None``.
        file: the topology file it came from (``<request>`` for inline TOML).
        hosts: for a lab across hosts (on the server that coordinates it), each host's part;
            else empty.
        engines: its engines with their release threads (which links each serves, its class
            and CPU) as they were when the lab was read (:meth:`stats` reads them live): on one
            machine its engine, named by the machine's host name; across hosts the engine of
            each engine host. Empty without impaired links, and without an engine that answers
            (``status`` says so).
        programs_cpus: the CPUs the processes started in its nodes run on (``"0"``), when
            they are kept off its engine's (``programs_cpus = "off-engine"``); else ``None``.
        revision: changes whenever anything above does, the engines' readings aside:
            :meth:`refresh` reads the lab again only when the server's differs, and
            :attr:`LabSummary.revision` says it.
    """

    name: str
    file: str
    status: str
    revision: str
    nodes: list[Node]
    links: list[Link]
    lans: list[Lan]
    externals: list[External]
    detached: list[Detached]
    _client: Client = field(repr=False, compare=False)
    error: str | None = None
    hosts: list[HostPart] = field(default_factory=list)
    engines: list[HostEngine] = field(default_factory=list)
    programs_cpus: str | None = None

    @classmethod
    def from_json(cls, value: Any, client: Client, where: str = "lab") -> Lab:
        """Parses the API's ``Lab`` object."""
        o = _obj(value, where)
        fields = _lab_fields(o, where)
        name = fields["name"]
        return cls(
            **fields,
            nodes=parse_list(
                o.get("nodes"), lambda v, w: Node.from_json(v, client, name, w), f"{where}.nodes"
            ),
            links=parse_list(
                o.get("links"), lambda v, w: Link.from_json(v, client, name, w), f"{where}.links"
            ),
            lans=parse_list(o.get("lans"), lambda v, w: Lan.from_json(v, name, w), f"{where}.lans"),
            externals=parse_list(o.get("externals"), External.from_json, f"{where}.externals"),
            detached=parse_list(o.get("detached"), Detached.from_json, f"{where}.detached"),
            _client=client,
            # None without an engine that answers.
            engines=parse_list(o.get("engines", []), HostEngine.from_json, f"{where}.engines"),
        )

    def __enter__(self) -> Lab:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            self.down()
        except NotFound:
            pass
        except Exception as down_error:
            if exc is None:
                raise
            # The block's own error is the one to see; say that the lab may still be up.
            exc.add_note(f"and bringing lab {self.name} down failed: {down_error}")

    def refresh(self) -> Lab:
        """The lab as the server describes it now: this same object when it has not changed
        (the server answers so without sending the lab again)."""
        return self._client.lab_unless(self.name, self) or self

    def down(self) -> DownResult:
        """Brings the lab down and returns the engine's final report."""
        return self._client.down(self.name)

    def node(self, name: str) -> Node:
        """The node called ``name``; raises :class:`~rtemu.NotFound` when there is none."""
        return _named(self._list("nodes", Node.from_json), name, "node", self.name)

    def link(self, name: str) -> Link:
        """The point-to-point link called ``name``; raises :class:`~rtemu.NotFound`."""
        return _named(self._list("links", Link.from_json), name, "link", self.name)

    def lan(self, name: str) -> Lan:
        """The LAN called ``name``; raises :class:`~rtemu.NotFound` when there is none."""
        lans = parse_list(
            self._client.request("GET", _path(self.name, "lans")),
            lambda v, w: Lan.from_json(v, self.name, w),
            "lans",
        )
        return _named(lans, name, "LAN", self.name)

    def _list(self, what: str, parse: Callable[[Any, Client, str, str], N]) -> list[N]:
        reply = self._client.request("GET", _path(self.name, what))
        return parse_list(reply, lambda v, w: parse(v, self._client, self.name, w), what)

    @overload
    def stats(self, stream: Literal[False] = False) -> Stats: ...

    @overload
    def stats(
        self, stream: Literal[True], interval: float = 1.0, count: int | None = None
    ) -> Iterator[Stats]: ...

    def stats(
        self, stream: bool = False, interval: float = 1.0, count: int | None = None
    ) -> Stats | Iterator[Stats]:
        """The counters and fidelity of the lab's impaired links.

        With ``stream=False``, one snapshot. With ``stream=True``, an iterator of snapshots
        every ``interval`` seconds (0.05 to 3600), ``count`` of them or, with ``count=None``,
        until the lab goes down or the iterator is closed (leaving a ``for`` loop early closes
        it). Errors in the arguments raise when the stream starts.
        """
        if not stream:
            return Stats.from_json(self._client.request("GET", _path(self.name, "stats")))
        params: dict[str, Any] = {"interval": interval}
        if count is not None:
            params["count"] = count
        return self._stream_stats(params, interval)

    def _stream_stats(self, params: dict[str, Any], interval: float) -> Iterator[Stats]:
        # Bounded waits: a server that stops sending mid-stream raises instead of hanging.
        wait = interval + self._client.timeout
        path = _path(self.name, "stats", "stream")
        with self._client.stream(
            "GET", path, accept="text/event-stream", params=params, timeout=wait
        ) as response:
            parser = SSEParser()
            for chunk in response.iter_bytes():
                for event in parser.feed(chunk):
                    if event.event == "end":
                        return
                    if event.event == "stats":
                        yield Stats.from_json(_load(event.data), "stats event")

    def counters(self, nodes: Sequence[str] = ()) -> list[InterfaceCounters]:
        """The kernel's packet counters of every interface of the lab's nodes, or only of
        ``nodes`` (a large lab's every node is slow to read: 2 s for 10,000). A name the lab
        has no node of raises :class:`~rtemu.NotFound`."""
        params = [("node", n) for n in nodes]
        reply = self._client.request("GET", _path(self.name, "counters"), params=params)
        return parse_list(reply, InterfaceCounters.from_json, "counters")

    def capture(
        self,
        targets: str | Sequence[str],
        path: str | os.PathLike[str],
        count: int | None = None,
        duration: float | None = None,
        timeout: float | None = None,
    ) -> Path:
        """Captures frames into the pcapng file ``path`` and returns its path.

        Args:
            targets: what ``rtemu capture`` takes: a link (each frame before and after the
                engine), ``node:ifname``, or a list of them.
            path: the pcapng file to write.
            count: stop after this many frames (1 to 10,000,000).
            duration: stop after this many seconds (over 0, at most 3600).
            timeout: seconds to wait for more data before giving up (default: ``duration``
                plus the client's timeout, or no bound when only ``count`` is given).

        At least one of ``count`` and ``duration`` is required. The file is written as the
        frames arrive; it is complete when this returns.
        """
        if count is None and duration is None:
            raise ValueError("capture needs count=, duration= or both, so that it ends")
        names = [targets] if isinstance(targets, str) else list(targets)
        params: list[tuple[str, str | int | float]] = [("target", t) for t in names]
        if count is not None:
            params.append(("count", count))
        if duration is not None:
            params.append(("duration", duration))
        if timeout is None and duration is not None:
            timeout = duration + self._client.timeout
        out = Path(path)
        api_path = _path(self.name, "capture")
        with self._client.stream(
            "GET", api_path, accept="application/x-pcapng", params=params, timeout=timeout
        ) as response:
            with out.open("wb") as f:
                for chunk in response.iter_bytes():
                    f.write(chunk)
        return out


def _load(data: str) -> Any:
    try:
        return json.loads(data)
    except ValueError as e:
        raise ProtocolError(f"a stats event's data is not JSON ({e}): {data[:200]!r}") from e


class _Named(Protocol):
    @property
    def name(self) -> str: ...


N = TypeVar("N", bound=_Named)


def _named(items: list[N], name: str, what: str, lab: str) -> N:
    for item in items:
        if item.name == name:
            return item
    names = ", ".join(i.name for i in items) or "none"
    raise NotFound(f"lab {lab} has no {what} {name!r} (its {what}s: {names})", 404)
