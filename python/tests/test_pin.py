"""TLS with a pinned certificate: the client talks to a `rtemu serve --tls-dir` whose
fingerprint it was given, refuses any other certificate in the handshake, and sends nothing
(no token) to a server that shows one."""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import threading
from pathlib import Path

import pytest
from conftest import free_port, printing, require_root

import rtemu
from rtemu.pin import parse_fingerprint

FINGERPRINT = ":".join(["AB"] * 32)


def test_a_fingerprint_is_read_as_rtemu_prints_it() -> None:
    want = bytes([0xAB] * 32)
    for form in [
        FINGERPRINT,
        FINGERPRINT.lower(),
        "ab" * 32,
        f"sha256:{FINGERPRINT}",
        f"SHA256:{'AB' * 32}",
    ]:
        assert parse_fingerprint(form) == want, form
    for bad in [
        "",
        "AB",
        FINGERPRINT + ":AB",
        "sha1:" + FINGERPRINT,
        FINGERPRINT.replace("A", "G"),
    ]:
        with pytest.raises(ValueError, match="64 digits"):
            parse_fingerprint(bad)
    with pytest.raises(ValueError, match="https"):
        rtemu.Client(url="http://127.0.0.1:1", token="t", fingerprint=FINGERPRINT)


class Recorder:
    """A TLS server with a given certificate that keeps whatever its one client sends."""

    def __init__(self, cert: Path, key: Path) -> None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.received = b""
        self.thread = threading.Thread(target=self._serve, args=(context,))
        self.thread.start()

    def _serve(self, context: ssl.SSLContext) -> None:
        self.listener.settimeout(10)
        conn, _ = self.listener.accept()
        conn.settimeout(2)
        try:
            with context.wrap_socket(conn, server_side=True) as tls:
                while chunk := tls.recv(4096):
                    self.received += chunk
                    if b"\r\n\r\n" in self.received:
                        break
        except (OSError, ssl.SSLError):
            pass

    def close(self) -> bytes:
        self.thread.join(timeout=15)
        self.listener.close()
        return self.received


def test_a_pinned_client_talks_to_its_server_only(tmp_path: Path) -> None:
    require_root()
    binary = os.environ.get("RTEMU_BIN") or shutil.which("rtemu")
    assert binary, "set RTEMU_BIN to the rtemu binary"
    tls, token = tmp_path / "tls", tmp_path / "api.token"
    port = free_port()
    argv = [binary, "serve", "--socket", str(tmp_path / "api.sock")]
    argv += ["--listen", f"127.0.0.1:{port}", "--token-file", str(token), "--tls-dir", str(tls)]
    url = f"https://127.0.0.1:{port}"
    with printing(
        argv, tmp_path / "serve.log", r"fingerprint ((?:[0-9A-F]{2}:){31}[0-9A-F]{2})", 15
    ) as m:
        printed = m.group(1)
        secret = token.read_text().strip()
        for given in [printed, f"sha256:{printed.lower()}"]:
            with rtemu.Client(url=url, token_file=token, fingerprint=given) as pinned:
                assert isinstance(pinned.labs(), list)
        other = ("00" if not printed.startswith("00") else "11") + printed[2:]
        with rtemu.Client(url=url, token_file=token, fingerprint=other) as wrong:
            with pytest.raises(rtemu.ConnectionFailed, match="not the pinned") as e:
                wrong.labs()
            assert printed in e.value.message and other in e.value.message
        # Without a pin, the self-signed certificate is checked against the system's CAs.
        with rtemu.Client(url=url, token_file=token) as unpinned:
            with pytest.raises(rtemu.ConnectionFailed):
                unpinned.labs()
    # A server with the same key the pin names gets the request; with another pin, nothing.
    for given, sent in [(printed, True), (other, False)]:
        recorder = Recorder(tls / "agent.crt", tls / "agent.key")
        client = rtemu.Client(
            url=f"https://127.0.0.1:{recorder.port}", token=secret, fingerprint=given, timeout=3
        )
        with pytest.raises(rtemu.RtemuError):
            client.labs()
        client.close()
        received = recorder.close()
        assert (secret.encode() in received) == sent, received[:200]
        if not sent:
            assert received == b"", "bytes sent to a server that failed the pin"
