"""The connection to ``rtemu serve``: requests, error replies, and the default client."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from . import pin, server
from .errors import ConnectionFailed, ProtocolError, RtemuError, error_for
from .lab import Lab, LabSummary, segment
from .types import DownResult, parse_list

#: Seconds a control request may take (reading a lab, changing a link).
DEFAULT_TIMEOUT = 30.0
#: Seconds bringing a lab up or down may take (namespaces, an engine, start-up commands).
UP_DOWN_TIMEOUT = 300.0


class Client:
    """A connection to an rtemu server.

    ``Client()`` talks to the server on the Unix socket ``/run/rtemu/api.sock`` (root only),
    starting ``rtemu serve`` (``$RTEMU_BIN`` or ``rtemu`` on ``PATH``) when none answers; a
    server it started is stopped when the interpreter exits. ``Client(url="http://127.0.0.1:PORT")``
    talks TCP to a server started with ``--listen``, with the bearer ``token`` given or read
    from ``token_file`` (default ``/run/rtemu/api.token``); it never starts one. For a server
    serving TLS with a self-signed certificate (``--tls-dir``), give ``url="https://..."`` and
    the ``fingerprint`` the server printed: any other certificate is refused during the
    handshake, before the token is sent.

    Args:
        socket: the server's Unix socket (default ``/run/rtemu/api.sock``).
        url: the server's TCP address, instead of a socket.
        token: the bearer token for ``url``.
        token_file: where to read the token for ``url`` when ``token`` is not given.
        start_server: whether to start ``rtemu serve`` when nothing answers on ``socket``.
        timeout: seconds a control request may take.
        transport: an httpx transport to use instead of the socket or TCP one (for tests).
        fingerprint: the SHA-256 fingerprint of the certificate an ``https`` ``url`` must
            show (``AB:CD:...`` as ``rtemu serve --tls-dir`` prints it, ``sha256:`` in front
            allowed); without it, the certificate is checked against the system's CAs.

    Raises:
        ValueError: ``fingerprint`` is not one, or is given without an ``https`` ``url``.
    """

    def __init__(
        self,
        socket: str | os.PathLike[str] | None = None,
        url: str | None = None,
        token: str | None = None,
        token_file: str | os.PathLike[str] | None = None,
        start_server: bool = True,
        timeout: float = DEFAULT_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
        fingerprint: str | None = None,
    ) -> None:
        if url is not None and socket is not None:
            raise ValueError("give either socket or url, not both")
        pinned = None
        if fingerprint is not None:
            if url is None or not url.lower().startswith("https://"):
                raise ValueError("a fingerprint pins a TLS server's certificate: give an https url")
            pinned = pin.pinned_context(pin.parse_fingerprint(fingerprint))
        headers = {"Accept": "application/json"}
        # A server can only be started for the socket this client itself connects to.
        self._start_server = start_server and url is None and transport is None
        self.socket: str | None
        self.url: str
        if url is not None:
            if token is None:
                token = _read_token(Path(token_file or server.DEFAULT_TOKEN_FILE))
            headers["Authorization"] = f"Bearer {token}"
            transport = transport or httpx.HTTPTransport(verify=pinned or True)
            self.socket, self.url = None, url.rstrip("/")
        else:
            self.socket = os.fspath(socket or server.DEFAULT_SOCKET)
            transport = transport or httpx.HTTPTransport(uds=self.socket)
            # The host is not used to connect; it only fills the request's Host header.
            self.url = "http://rtemu"
        self.timeout = timeout
        self._http = httpx.Client(
            transport=transport, base_url=self.url, headers=headers, timeout=timeout
        )
        self._start_lock = threading.Lock()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = f"socket={self.socket!r}" if self.socket else f"url={self.url!r}"
        return f"Client({where})"

    def close(self) -> None:
        """Closes the connection (a server this process started keeps running until exit)."""
        self._http.close()

    # Labs

    def up(
        self,
        topology: str | os.PathLike[str],
        name: str | None = None,
        replace: bool = False,
    ) -> Lab:
        """Brings a lab up and returns it; use it in a ``with`` block to bring it down after.

        Args:
            topology: a topology file's path (a :class:`~pathlib.Path`, or a ``str`` without a
                newline), or a topology as TOML text (a ``str`` with a newline in it). A
                relative path is taken relative to this process's working directory.
            name: the lab's name, instead of the file's ``lab``.
            replace: bring an existing lab of that name down first, instead of raising
                :class:`~rtemu.Conflict`.
        """
        body: dict[str, Any]
        if isinstance(topology, str) and "\n" in topology:
            body = {"topology": topology}
        else:
            body = {"file": os.path.abspath(os.fspath(topology))}
        if name is not None:
            body["name"] = name
        if replace:
            body["replace"] = True
        reply = self.request("POST", "/v1/labs", json=body, timeout=UP_DOWN_TIMEOUT)
        return Lab.from_json(reply, self)

    def labs(self) -> list[LabSummary]:
        """Every lab that is up (or half up, or degraded), counted rather than listed: cheap
        however large the labs; :meth:`LabSummary.lab` reads one whole."""
        return parse_list(
            self.request("GET", "/v1/labs"),
            lambda v, where: LabSummary.from_json(v, self, where),
            "labs",
        )

    def lab(self, name: str) -> Lab:
        """The lab called ``name``; raises :class:`~rtemu.NotFound` when there is none."""
        return Lab.from_json(self.request("GET", f"/v1/labs/{segment(name)}"), self)

    def lab_unless(self, name: str, held: Lab) -> Lab | None:
        """The lab called ``name``, or ``None`` when it is still at ``held``'s revision (the
        server then sends nothing but that); raises :class:`~rtemu.NotFound` when there is
        none."""
        request = self._http.build_request(
            "GET",
            f"/v1/labs/{segment(name)}",
            headers={"If-None-Match": f'"{held.revision}"'},
            timeout=self.timeout,
        )
        response = self._send(request, stream=False)
        if response.status_code == 304:
            return None
        _check(response)
        return Lab.from_json(_json(response), self)

    def down(self, name: str) -> DownResult:
        """Brings lab ``name`` down: removes everything it made, returns the engine's report."""
        reply = self.request("DELETE", f"/v1/labs/{segment(name)}", timeout=UP_DOWN_TIMEOUT)
        return DownResult.from_json(reply)

    def openapi(self) -> dict[str, Any]:
        """The server's OpenAPI document."""
        doc = self.request("GET", "/openapi.json")
        if not isinstance(doc, dict):
            raise ProtocolError("/openapi.json: expected a JSON object")
        return doc

    # Requests

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Any = None,
        timeout: float | None = None,
    ) -> Any:
        """Sends one request and returns its JSON reply; an error reply raises.

        Raises:
            RtemuError: the subclass for the reply's status, with the server's error text.
            ConnectionFailed: no server answered (and none could be started).
        """
        request = self._http.build_request(
            method,
            path,
            json=json,
            params=params,
            timeout=self.timeout if timeout is None else timeout,
        )
        response = self._send(request, stream=False)
        _check(response)
        return _json(response)

    @contextmanager
    def stream(
        self,
        method: str,
        path: str,
        *,
        accept: str,
        params: Any = None,
        timeout: float | None = None,
    ) -> Iterator[httpx.Response]:
        """Sends one request and yields its response unread, for streaming; an error raises.

        ``accept`` is the media type wanted; ``timeout`` bounds each wait for more of the body
        (``None``: no bound).
        """
        request = self._http.build_request(
            method,
            path,
            params=params,
            headers={"Accept": accept},
            timeout=httpx.Timeout(self.timeout, read=timeout),
        )
        response = self._send(request, stream=True)
        try:
            if response.status_code >= 300:
                response.read()
                _check(response)
            yield response
        finally:
            response.close()

    def _send(self, request: httpx.Request, stream: bool) -> httpx.Response:
        try:
            return self._http.send(request, stream=stream)
        except httpx.ConnectError as e:
            refused = pin.mismatch(e)
            if refused is not None:
                raise ConnectionFailed(f"{self._where()}: {refused}") from e
            if not self._start_server or self.socket is None:
                raise ConnectionFailed(f"no rtemu server answers at {self._where()}: {e}") from e
        except httpx.TimeoutException as e:
            raise RtemuError(f"{request.method} {request.url.path}: no reply in time ({e})") from e
        except httpx.HTTPError as e:
            raise ConnectionFailed(f"{request.method} {request.url.path}: {e}") from e
        # Nothing answered on the socket, so the request was never sent: start a server, resend.
        with self._start_lock:
            if not self._answers():
                server.start(self.socket, self._answers)
        try:
            return self._http.send(request, stream=stream)
        except httpx.HTTPError as e:
            raise ConnectionFailed(f"{request.method} {request.url.path}: {e}") from e

    def _answers(self) -> bool:
        try:
            self._http.get("/openapi.json", timeout=2.0).close()
        except httpx.HTTPError:
            return False
        return True

    def _where(self) -> str:
        return self.socket if self.socket else self.url


def _read_token(path: Path) -> str:
    try:
        token = path.read_text().strip()
    except OSError as e:
        raise ConnectionFailed(f"reading the API token from {path}: {e.strerror}") from e
    if not token:
        raise ConnectionFailed(f"the API token file {path} is empty")
    return token


def _check(response: httpx.Response) -> None:
    """Raises the error a non-2xx ``response`` stands for, with the server's text."""
    if response.status_code < 300:
        return
    text = response.text
    try:
        message = json.loads(text)["error"]
        if not isinstance(message, str):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        message = text.strip() or response.reason_phrase
    raise error_for(response.status_code, message)


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError as e:
        raise ProtocolError(
            f"{response.request.method} {response.request.url.path}: the reply is not JSON "
            f"({e}): {response.text[:200]!r}"
        ) from e


_default: Client | None = None
_default_lock = threading.Lock()


def default_client() -> Client:
    """The client the module-level functions (``rtemu.up``, ``rtemu.labs``, ...) use."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Client()
        return _default
