"""Exceptions raised by the rtemu package.

Every error the server reports becomes an instance of a :class:`RtemuError` subclass chosen by
the HTTP status, carrying the server's own error text (the text the CLI prints after
``rtemu: error:``) and the status.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .types import ExecResult


class RtemuError(Exception):
    """Base of every error this package raises.

    Attributes:
        message: the server's error text (or this package's, for errors found client-side).
        status: the HTTP status of the reply, or ``None`` when no reply was had.
    """

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status

    def __str__(self) -> str:
        return self.message


class BadRequest(RtemuError):
    """400: bad input (bad TOML, bad netem text, bad name, bad argv, value out of range)."""


class Unauthorized(RtemuError):
    """401: a TCP request without the right bearer token."""


class NotFound(RtemuError):
    """404: no such lab, node or link."""


class Conflict(RtemuError):
    """409: a lab of that name is already up (pass ``replace=True`` to replace it)."""


class InvalidTopology(BadRequest):
    """422: the topology parsed but does not validate; the text names file:line:column."""


class EngineNotRunning(RtemuError):
    """503: the lab's engine is not running (stats and link changes need it)."""


class ServerError(RtemuError):
    """500, or any other status this package does not know."""


class ConnectionFailed(RtemuError):
    """No server answered, or the server could not be started."""


class ProtocolError(RtemuError):
    """The server's reply is not what the API (version 1) says it is."""


class CommandFailed(RtemuError):
    """``Node.exec(..., check=True)`` ran a command that did not exit with status 0.

    Attributes:
        result: the command's :class:`~rtemu.ExecResult` (its output, status and signal).
    """

    def __init__(self, message: str, result: ExecResult) -> None:
        super().__init__(message)
        self.result = result


_BY_STATUS: dict[int, type[RtemuError]] = {
    400: BadRequest,
    401: Unauthorized,
    404: NotFound,
    409: Conflict,
    422: InvalidTopology,
    503: EngineNotRunning,
}


def error_for(status: int, message: str) -> RtemuError:
    """The exception for a reply of HTTP status ``status`` whose error text is ``message``."""
    return _BY_STATUS.get(status, ServerError)(message, status)
