"""The API's replies as dataclasses, and the parsing of its JSON into them.

Parsing is strict about what the API (version 1) promises, so a server that breaks the contract
fails here with a :class:`~rtemu.ProtocolError` naming the field, rather than later with a
``KeyError``; fields this version does not know are ignored, so a newer server still works.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .errors import ProtocolError

T = TypeVar("T")

Json = dict[str, Any]


def _field(obj: Json, key: str, kind: type[T] | tuple[type, ...], where: str) -> T:
    """``obj[key]``, checked to be of ``kind`` (``bool`` is never taken for an ``int``)."""
    if key not in obj:
        raise ProtocolError(f"{where}: the reply has no {key!r}")
    value = obj[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool) and bool not in kinds:
        raise ProtocolError(f"{where}: {key!r} is {value!r}, expected {_names(kinds)}")
    if not isinstance(value, kinds):
        raise ProtocolError(f"{where}: {key!r} is {value!r}, expected {_names(kinds)}")
    return value  # type: ignore[return-value]


def _names(kinds: tuple[type, ...]) -> str:
    return " or ".join("null" if k is type(None) else k.__name__ for k in kinds)


def _obj(value: Any, where: str) -> Json:
    if not isinstance(value, dict):
        raise ProtocolError(f"{where}: expected a JSON object, got {type(value).__name__}")
    return value


def _list(obj: Json, key: str, where: str) -> list[Any]:
    return _field(obj, key, list, where)


def _strs(obj: Json, key: str, where: str) -> list[str]:
    values = _list(obj, key, where)
    if not all(isinstance(v, str) for v in values):
        raise ProtocolError(f"{where}: {key!r} must be a list of strings, got {values!r}")
    return values


def _int(obj: Json, key: str, where: str) -> int:
    return _field(obj, key, int, where)


def _ints(obj: Json, key: str, where: str) -> list[int]:
    values = _list(obj, key, where)
    if not all(type(v) is int for v in values):
        raise ProtocolError(f"{where}: {key!r} must be a list of integers, got {values!r}")
    return values


def _int_fields(obj: Json, keys: tuple[str, ...], where: str) -> Json:
    """The integer fields ``keys`` of ``obj`` by name, for a dataclass whose fields are named as
    the API's."""
    return {key: _int(obj, key, where) for key in keys}


def _opt_int(obj: Json, key: str, where: str) -> int | None:
    return _field(obj, key, (int, type(None)), where)


def _str(obj: Json, key: str, where: str) -> str:
    return _field(obj, key, str, where)


def _opt_str(obj: Json, key: str, where: str) -> str | None:
    return _field(obj, key, (str, type(None)), where)


@dataclass(frozen=True)
class Percentiles:
    """Percentiles of one timing error, in nanoseconds."""

    p50_ns: int
    p99_ns: int
    p999_ns: int
    max_ns: int

    @classmethod
    def from_json(cls, value: Any, where: str) -> Percentiles:
        """Parses the API's ``Pct`` object."""
        keys = ("p50_ns", "p99_ns", "p999_ns", "max_ns")
        return cls(**_int_fields(_obj(value, where), keys, where))


@dataclass(frozen=True)
class Histogram:
    """A coarse histogram of an error: copies counted between fixed, log-spaced edges.

    ``counts`` has one more entry than ``edges_ns``: ``counts[0]`` below the first edge,
    ``counts[i]`` from ``edges_ns[i - 1]`` up to (not including) ``edges_ns[i]``, the last at or
    above the last edge (1-2-5 steps from 1 µs to 100 ms). They sum to the fidelity's ``count``.
    """

    edges_ns: list[int]
    counts: list[int]

    def buckets(self) -> list[tuple[int, int | None, int]]:
        """Each bucket as ``(from_ns, to_ns, count)``; ``to_ns`` is ``None`` for the last."""
        lows = [0, *self.edges_ns]
        highs: list[int | None] = [*self.edges_ns, None]
        return list(zip(lows, highs, self.counts, strict=True))

    @classmethod
    def from_json(cls, value: Any, where: str) -> Histogram:
        """Parses the API's ``Histogram`` object."""
        o = _obj(value, where)
        edges = _ints(o, "edges_ns", where)
        counts = _ints(o, "counts", where)
        if len(counts) != len(edges) + 1:
            raise ProtocolError(
                f"{where}: {len(counts)} counts for {len(edges)} edges, expected one more"
            )
        if any(a >= b for a, b in zip(edges, edges[1:], strict=False)):
            raise ProtocolError(f"{where}: 'edges_ns' must increase, got {edges!r}")
        return cls(edges, counts)


@dataclass(frozen=True)
class Fidelity:
    """How precisely the engine released one direction's frames at their intended times.

    Attributes:
        count: frames whose release error was measured.
        late: frames released more than ``late_after_ns`` after their intended time.
        early: sends started before the intended time (always 0 for a correct engine).
        late_after_ns: the lateness threshold.
        lost: measurements lost (the engine's recorder was full).
        released: when the send returned minus the intended time.
        released_histogram: the same error's distribution, coarsely.
        started: when the send started minus the intended time.
        arrival_lag: how long frames waited between the kernel's receive stamp and the engine.
    """

    count: int
    late: int
    early: int
    late_after_ns: int
    lost: int
    released: Percentiles
    released_histogram: Histogram
    started: Percentiles
    arrival_lag: Percentiles

    @classmethod
    def from_json(cls, value: Any, where: str) -> Fidelity:
        """Parses the API's ``fidelity`` object."""
        o = _obj(value, where)

        def pct(key: str) -> Percentiles:
            return Percentiles.from_json(o.get(key), f"{where}.{key}")

        return cls(
            **_int_fields(o, ("count", "late", "early", "late_after_ns", "lost"), where),
            released=pct("released"),
            released_histogram=Histogram.from_json(
                o.get("released_histogram"), f"{where}.released_histogram"
            ),
            started=pct("started"),
            arrival_lag=pct("arrival_lag"),
        )


@dataclass(frozen=True)
class Underlay:
    """The underlay a link between hosts crosses besides its model: its frames take the
    underlay's own delay on top of the model's.

    Attributes:
        host: this part's host.
        peer: the host at the link's other end.
        rtt_ns: the round trip between them across the underlay, measured when the part came
            up (``None``: the peer did not answer then).
    """

    host: str
    peer: str
    rtt_ns: int | None

    @classmethod
    def from_json(cls, value: Any, where: str) -> Underlay:
        """Parses the API's ``Underlay`` object."""
        o = _obj(value, where)
        return cls(
            host=_str(o, "host", where),
            peer=_str(o, "peer", where),
            rtt_ns=_opt_int(o, "rtt_ns", where),
        )


@dataclass(frozen=True)
class EngineThread:
    """One release thread of a lab's engine: the links it serves, where and how it runs.

    Attributes:
        index: its index, which :attr:`Direction.thread` names.
        links: the impaired links it serves.
        cpu: the CPU it is pinned to (``None``: not pinned).
        priority: the ``SCHED_FIFO`` priority asked for (``None``: real time turned off).
        policy: its class now (``"SCHED_FIFO:40"``, or ``"SCHED_OTHER"`` when real time was
            refused or while it has stepped down for the rest of a 10 ms window).
        stepped_down: windows in which it spent its real-time share (9 ms of 10 ms).
        margin_ns: how long before a release it stops sleeping and spins.
        stalls: times the thread was away more than 1 ms with work (a loop turn, a
            wake-up past its release, a frame's wait for it); ``max_stall_ns`` the longest.
        timer_slack_ns: its timer slack.
        cpu_ns: CPU time it used so far, when the kernel tells.
    """

    index: int
    links: list[str]
    cpu: int | None
    priority: int | None
    policy: str
    stepped_down: int
    margin_ns: int
    stalls: int
    max_stall_ns: int
    timer_slack_ns: int | None
    cpu_ns: int | None

    @classmethod
    def from_json(cls, value: Any, where: str) -> EngineThread:
        """Parses the API's ``EngineThread`` object."""
        o = _obj(value, where)
        return cls(
            index=_int(o, "index", where),
            links=_strs(o, "links", where),
            cpu=_opt_int(o, "cpu", where),
            priority=_opt_int(o, "priority", where),
            policy=_str(o, "policy", where),
            stepped_down=_int(o, "stepped_down", where),
            margin_ns=_int(o, "margin_ns", where),
            stalls=_int(o, "stalls", where),
            max_stall_ns=_int(o, "max_stall_ns", where),
            timer_slack_ns=_opt_int(o, "timer_slack_ns", where),
            cpu_ns=_opt_int(o, "cpu_ns", where),
        )


def _threads(o: Json, where: str) -> list[EngineThread]:
    """An engine's release threads (none from an engine older than them)."""
    return parse_list(o.get("threads", []), EngineThread.from_json, f"{where}.threads")


@dataclass(frozen=True)
class HostEngine:
    """The engine of one host: of a lab across hosts, or of a lab on one machine.

    Attributes:
        host: its host (its ``[hosts]`` name across hosts, else the machine's host name).
        io: its packet I/O.
        pid: its process id on its host.
        monotonic_ns: when it read its counters, on its host's monotonic clock.
        process_cpu_ns: CPU time it used so far, when readable.
        threads: its release threads.
    """

    host: str
    io: str
    pid: int
    monotonic_ns: int
    process_cpu_ns: int | None
    threads: list[EngineThread]

    @classmethod
    def from_json(cls, value: Any, where: str = "engine") -> HostEngine:
        """Parses the API's ``HostEngine`` object."""
        o = _obj(value, where)
        return cls(
            host=_str(o, "host", where),
            io=_str(o, "io", where),
            pid=_int(o, "pid", where),
            monotonic_ns=_int(o, "monotonic_ns", where),
            process_cpu_ns=_opt_int(o, "process_cpu_ns", where),
            threads=_threads(o, where),
        )


@dataclass(frozen=True)
class MissingStats:
    """An engine host of a lab across hosts whose stats could not be read.

    Attributes:
        host: the host.
        links: the impaired links its engine carries, which the snapshot lacks.
        problem: why.
    """

    host: str
    links: list[str]
    problem: str

    @classmethod
    def from_json(cls, value: Any, where: str = "missing") -> MissingStats:
        """Parses the API's ``MissingStats`` object."""
        o = _obj(value, where)
        links = o.get("links")
        if not isinstance(links, list) or not all(isinstance(x, str) for x in links):
            raise ValueError(f"{where}.links: expected a list of strings")
        return cls(
            host=_str(o, "host", where), links=list(links), problem=_str(o, "problem", where)
        )


@dataclass(frozen=True)
class Direction:
    """The engine's counters for one direction of one impaired link.

    Attributes:
        link: the link's name.
        dir: ``"a-b"`` (first endpoint to second) or ``"b-a"``.
        from_node: the node frames come from (``from`` in the JSON).
        to_node: the node frames go to (``to`` in the JSON).
        dropped: drops by kind (``loss``, ``queue-full``, ``link-down``, ...).
        corrupted: copies queued with bits the model flipped (``corrupt``, ``ber``).
        marked: copies queued with their ECN field set to CE instead of being dropped (by an
            AQM such as ``codel``, or netem's ``ecn`` loss).
        cut: whether the direction is cut (``link down``).
        netem: the netem text of the model the direction runs now (``None``: a trace alone
            decides).
        conserved: whether received + duplicates = delivered + dropped + in flight.
        buffers: the direction's frame buffers, when known.
        underlay: for a link between hosts, the underlay it crosses (``None`` on one machine).
        thread: the engine's release thread that serves it (an :attr:`EngineThread.index`).
    """

    link: str
    dir: str
    from_node: str
    to_node: str
    received: int
    received_bytes: int
    duplicates: int
    corrupted: int
    marked: int
    cut: bool
    netem: str | None
    resolution_passed: int
    delivered: int
    delivered_bytes: int
    dropped: dict[str, int]
    in_flight: int
    conserved: bool
    kernel_drops: int | None
    tx_busy: int
    trace_underruns: int
    buffers: int | None
    fidelity: Fidelity
    underlay: Underlay | None = None
    thread: int | None = None

    @property
    def dropped_total(self) -> int:
        """Frames dropped for any reason."""
        return sum(self.dropped.values())

    @classmethod
    def from_json(cls, value: Any, where: str) -> Direction:
        """Parses the API's ``Direction`` object."""
        o = _obj(value, where)
        dropped = _field(o, "dropped", dict, where)
        if not all(isinstance(k, str) and type(v) is int for k, v in dropped.items()):
            raise ProtocolError(f"{where}: 'dropped' must map kinds to counts, got {dropped!r}")
        direction = _str(o, "dir", where)
        if direction not in ("a-b", "b-a"):
            raise ProtocolError(f"{where}: 'dir' is {direction!r}, expected 'a-b' or 'b-a'")
        counters = (
            "received",
            "received_bytes",
            "duplicates",
            "corrupted",
            "marked",
            "resolution_passed",
            "delivered",
            "delivered_bytes",
            "in_flight",
            "tx_busy",
            "trace_underruns",
        )
        return cls(
            link=_str(o, "link", where),
            dir=direction,
            from_node=_str(o, "from", where),
            to_node=_str(o, "to", where),
            **_int_fields(o, counters, where),
            cut=_field(o, "cut", bool, where),
            netem=_opt_str(o, "netem", where),
            dropped=dict(dropped),
            conserved=_field(o, "conserved", bool, where),
            kernel_drops=_opt_int(o, "kernel_drops", where),
            buffers=_opt_int(o, "buffers", where),
            fidelity=Fidelity.from_json(o.get("fidelity"), f"{where}.fidelity"),
            underlay=(
                Underlay.from_json(o["underlay"], f"{where}.underlay") if "underlay" in o else None
            ),
            thread=_opt_int(o, "thread", where) if "thread" in o else None,
        )


def parse_list(value: Any, parse: Callable[[Any, str], T], where: str) -> list[T]:
    """Parses a JSON array with ``parse(item, where)`` for each item."""
    if not isinstance(value, list):
        raise ProtocolError(f"{where}: expected a JSON array, got {type(value).__name__}")
    return [parse(v, f"{where}[{i}]") for i, v in enumerate(value)]


def _directions(o: Json, where: str) -> Json:
    """The ``directions`` of a stats snapshot or a final report, and the same as ``links``: the
    fields both replies share."""
    directions = parse_list(o.get("directions"), Direction.from_json, f"{where}.directions")
    return {"directions": directions, "links": _by_link(directions, where)}


@dataclass(frozen=True)
class LinkStats:
    """Both directions of one impaired link."""

    name: str
    a_to_b: Direction
    b_to_a: Direction


def _by_link(directions: list[Direction], where: str) -> dict[str, LinkStats]:
    ways: dict[str, dict[str, Direction]] = {}
    for d in directions:
        if d.dir in ways.setdefault(d.link, {}):
            raise ProtocolError(f"{where}: link {d.link!r} has direction {d.dir} twice")
        ways[d.link][d.dir] = d
    links = {}
    for name, w in ways.items():
        if set(w) != {"a-b", "b-a"}:
            raise ProtocolError(
                f"{where}: link {name!r} has directions {sorted(w)}, expected both a-b and b-a"
            )
        links[name] = LinkStats(name, w["a-b"], w["b-a"])
    return links


@dataclass(frozen=True)
class Stats:
    """One snapshot of a lab's impaired links.

    A lab without impaired links has no engine: ``directions`` is empty and ``io``/``pid`` are
    ``None``.

    Attributes:
        lab: the lab's name.
        io: the engine's packet I/O (``af-packet`` or ``af-xdp``).
        pid: the engine's process id.
        monotonic_ns: when the counters were read, on the engine's monotonic clock (for rates
            between snapshots).
        process_cpu_ns: CPU time the engine used so far, when readable.
        directions: every direction of every impaired link, as the API lists them.
        links: the same directions by link name, each with ``a_to_b`` and ``b_to_a``.
        threads: the engine's release threads.
        engines: for a lab across hosts, the engine of each engine host (``io``, ``pid`` and
            ``monotonic_ns`` are then ``None``); else empty.
        missing: for a lab across hosts, the engine hosts whose stats could not be read.
    """

    lab: str
    io: str | None
    pid: int | None
    monotonic_ns: int | None
    process_cpu_ns: int | None
    directions: list[Direction]
    links: dict[str, LinkStats]
    threads: list[EngineThread]
    engines: list[HostEngine] = field(default_factory=list)
    missing: list[MissingStats] = field(default_factory=list)

    @classmethod
    def from_json(cls, value: Any, where: str = "stats") -> Stats:
        """Parses the API's ``Stats`` object."""
        o = _obj(value, where)
        if "engines" in o:
            # A lab across hosts (the API's SpreadStats): each engine says what one would.
            return cls(
                **_directions(o, where),
                lab=_str(o, "lab", where),
                io=None,
                pid=None,
                monotonic_ns=None,
                process_cpu_ns=None,
                threads=[],
                engines=parse_list(o["engines"], HostEngine.from_json, f"{where}.engines"),
                missing=parse_list(o.get("missing"), MissingStats.from_json, f"{where}.missing"),
            )
        return cls(
            **_directions(o, where),
            lab=_str(o, "lab", where),
            io=_opt_str(o, "io", where),
            pid=_opt_int(o, "pid", where),
            monotonic_ns=_opt_int(o, "monotonic_ns", where),
            process_cpu_ns=_opt_int(o, "process_cpu_ns", where),
            threads=_threads(o, where),
        )


@dataclass(frozen=True)
class FinalReport:
    """The engine's report when its lab went down.

    ``error`` is set (and the counters empty) when the engine could not report.
    """

    lab: str
    notices: list[str]
    cpu_ns: int | None
    wall_ns: int | None
    directions: list[Direction]
    links: dict[str, LinkStats]
    error: str | None = None
    threads: list[EngineThread] | None = None

    @classmethod
    def from_json(cls, value: Any, where: str = "report") -> FinalReport:
        """Parses the API's ``FinalReport`` object."""
        o = _obj(value, where)
        lab = _str(o, "lab", where)
        if "error" in o:
            return cls(lab, [], None, None, [], {}, _str(o, "error", where))
        return cls(
            **_directions(o, where),
            lab=lab,
            notices=_strs(o, "notices", where),
            cpu_ns=_int(o, "cpu_ns", where),
            wall_ns=_int(o, "wall_ns", where),
            threads=_threads(o, where),
        )


@dataclass(frozen=True)
class DownResult:
    """What ``down`` did: whether it removed anything, and the engine's final report."""

    lab: str
    removed: bool
    report: FinalReport | None

    @classmethod
    def from_json(cls, value: Any, where: str = "down") -> DownResult:
        """Parses the API's ``DownReply`` object."""
        o = _obj(value, where)
        report = o.get("report")
        return cls(
            lab=_str(o, "lab", where),
            removed=_field(o, "removed", bool, where),
            report=None if report is None else FinalReport.from_json(report, f"{where}.report"),
        )


@dataclass(frozen=True)
class ExecResult:
    """How a command run in a node ended, and what it printed.

    Attributes:
        node: the node it ran in.
        argv: the command.
        status: its exit status, ``None`` when a signal or the timeout ended it.
        signal: the signal that ended it, if one did.
        stdout: its standard output (lossy UTF-8, capped at 16 MiB).
        stderr: its standard error (likewise).
        timed_out: whether the timeout ended it (its process group was killed).
        duration: how long it ran, seconds.
    """

    node: str
    argv: list[str]
    status: int | None
    signal: int | None
    stdout: str
    stderr: str
    timed_out: bool
    duration: float

    @property
    def ok(self) -> bool:
        """Whether the command exited with status 0."""
        return self.status == 0

    def describe(self) -> str:
        """How it ended, in words: ``exited with status 2``, ``killed by signal 9``, ..."""
        if self.timed_out:
            return f"timed out after {self.duration:.3g} s"
        if self.signal is not None:
            return f"killed by signal {self.signal}"
        return f"exited with status {self.status}"

    @classmethod
    def from_json(cls, value: Any, node: str, argv: list[str], where: str = "exec") -> ExecResult:
        """Parses the API's ``ExecReply`` object for ``argv`` run in ``node``."""
        o = _obj(value, where)
        return cls(
            node=node,
            argv=list(argv),
            status=_opt_int(o, "status", where),
            signal=_opt_int(o, "signal", where),
            stdout=_str(o, "stdout", where),
            stderr=_str(o, "stderr", where),
            timed_out=_field(o, "timed_out", bool, where),
            duration=float(_field(o, "duration", (int, float), where)),
        )


@dataclass(frozen=True)
class Interface:
    """One interface of a node: its name, MAC, addresses (CIDR) and the link or LAN it is on."""

    name: str
    mac: str
    addresses: list[str]
    segment: str

    @classmethod
    def from_json(cls, value: Any, where: str) -> Interface:
        """Parses one of the API's ``Node.interfaces``."""
        o = _obj(value, where)
        return cls(
            _str(o, "name", where),
            _str(o, "mac", where),
            _strs(o, "addresses", where),
            _str(o, "segment", where),
        )


@dataclass(frozen=True)
class Container:
    """The container a node runs: its image, and ``state`` (``created``, ``running``,
    ``healthy``, ``unhealthy``, ``exited``, ``missing``, or the runtime's own word) with
    ``exit_code`` once it exited."""

    image: str
    state: str
    exit_code: int | None = None

    @classmethod
    def from_json(cls, value: Any, where: str) -> Container:
        """Parses the API's ``NodeContainer``."""
        o = _obj(value, where)
        return cls(
            _str(o, "image", where),
            _str(o, "state", where),
            _opt_int(o, "exit_code", where) if "exit_code" in o else None,
        )


@dataclass(frozen=True)
class External:
    """A host interface handed to a node (``[[externals]]``): ``mode`` is ``"move"`` or
    ``"macvlan"``; ``name`` is the segment the node's interface on it names."""

    name: str
    node: str
    host: str
    mode: str

    @classmethod
    def from_json(cls, value: Any, where: str) -> External:
        """Parses the API's ``External`` object."""
        o = _obj(value, where)
        return cls(
            _str(o, "name", where),
            _str(o, "node", where),
            _str(o, "host", where),
            _str(o, "mode", where),
        )


@dataclass(frozen=True)
class InterfaceCounters:
    """One node interface's packet counters, as the kernel keeps them.

    The only counters of ideal links and LANs (the engine does not carry them).
    """

    node: str
    interface: str
    segment: str
    rx_bytes: int
    rx_packets: int
    rx_dropped: int
    tx_bytes: int
    tx_packets: int
    tx_dropped: int

    @classmethod
    def from_json(cls, value: Any, where: str) -> InterfaceCounters:
        """Parses the API's ``InterfaceCounters`` object."""
        o = _obj(value, where)
        return cls(
            node=_str(o, "node", where),
            interface=_str(o, "interface", where),
            segment=_str(o, "segment", where),
            **{
                k: _int(o, k, where)
                for k in (
                    "rx_bytes",
                    "rx_packets",
                    "rx_dropped",
                    "tx_bytes",
                    "tx_packets",
                    "tx_dropped",
                )
            },
        )


@dataclass(frozen=True)
class Detached:
    """A process started in a node in the background (``rtemu exec --detach``)."""

    pid: int
    node: str
    command: list[str]
    running: bool
    log: str

    @classmethod
    def from_json(cls, value: Any, where: str) -> Detached:
        """Parses the API's ``Detached`` object."""
        o = _obj(value, where)
        return cls(
            _int(o, "pid", where),
            _str(o, "node", where),
            _strs(o, "command", where),
            _field(o, "running", bool, where),
            _str(o, "log", where),
        )


@dataclass(frozen=True)
class HostPart:
    """One host of a lab across hosts, as the server that coordinates it shows it.

    Attributes:
        host: the host's name in ``[hosts]``.
        agent: where its agent listens (``IP:PORT``).
        status: ``"up"``, ``"incomplete"``, ``"degraded"``, ``"missing"`` (the agent holds no
            part) or ``"unreachable"``.
        problem: why it is not up, naming the host; else ``None``.
        programs_cpus: the CPUs the processes started in its nodes run on (``"0"``), when
            they are kept off its engine's; else ``None``.
    """

    host: str
    agent: str
    status: str
    problem: str | None = None
    programs_cpus: str | None = None

    @classmethod
    def from_json(cls, value: Any, where: str = "host") -> HostPart:
        """Parses the API's ``HostPart`` object."""
        o = _obj(value, where)
        return cls(
            host=_str(o, "host", where),
            agent=_str(o, "agent", where),
            status=_str(o, "status", where),
            problem=_opt_str(o, "problem", where) if "problem" in o else None,
            programs_cpus=_opt_str(o, "programs_cpus", where) if "programs_cpus" in o else None,
        )
