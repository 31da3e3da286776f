"""Starting `rtemu serve` when nothing answers, and stopping only a server this process started.

A stand-in `rtemu` (a small Python HTTP server on the Unix socket given with --socket) plays the
server, so these run without root and without the real binary.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

FAKE = textwrap.dedent("""\
    #!{python}
    import http.server, json, os, socketserver, sys
    args = sys.argv[1:]
    assert args[0] == "serve", args
    path = args[args.index("--socket") + 1]
    if os.environ.get("FAKE_FAIL"):
        sys.exit("rtemu: error: " + os.environ["FAKE_FAIL"])
    with open(os.environ["FAKE_PIDS"], "a") as f:
        f.write(f"{os.getpid()}\\n")

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({} if self.path == "/openapi.json" else []).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
        daemon_threads = True

    Server(path, Handler).serve_forever()
""")

USE = (
    "import rtemu; c = rtemu.Client(socket={sock!r}); print(c.labs()); "
    "print(len(__import__('rtemu.server').server._started))"
)


@pytest.fixture()
def fake_bin(tmp_path: Path) -> Path:
    path = tmp_path / "rtemu"
    path.write_text(FAKE.replace("{python}", sys.executable))
    path.chmod(0o755)
    return path


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purposes; it only waits for its parent.
    return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"


def run(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_starts_a_server_and_stops_it_at_exit(tmp_path: Path, fake_bin: Path) -> None:
    sock, pids = tmp_path / "api.sock", tmp_path / "pids"
    out = run(USE.format(sock=str(sock)), {"RTEMU_BIN": str(fake_bin), "FAKE_PIDS": str(pids)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[]", "1"]
    started = [int(p) for p in pids.read_text().split()]
    assert len(started) == 1
    deadline = time.monotonic() + 10
    while alive(started[0]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(started[0]), "the server this process started outlived it"


def test_leaves_a_server_it_did_not_start_alone(tmp_path: Path, fake_bin: Path) -> None:
    sock, pids = tmp_path / "api.sock", tmp_path / "pids"
    env = {**os.environ, "FAKE_PIDS": str(pids)}
    theirs = subprocess.Popen([str(fake_bin), "serve", "--socket", str(sock)], env=env)
    try:
        deadline = time.monotonic() + 10
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        out = run(USE.format(sock=str(sock)), {"RTEMU_BIN": str(fake_bin), "FAKE_PIDS": str(pids)})
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == ["[]", "0"]
        assert pids.read_text().split() == [str(theirs.pid)]
        assert theirs.poll() is None, "a server someone else started was stopped"
    finally:
        theirs.send_signal(signal.SIGTERM)
        theirs.wait(timeout=10)


def test_a_server_that_fails_to_start_says_why(tmp_path: Path, fake_bin: Path) -> None:
    out = run(
        USE.format(sock=str(tmp_path / "api.sock")),
        {
            "RTEMU_BIN": str(fake_bin),
            "FAKE_PIDS": str(tmp_path / "pids"),
            "FAKE_FAIL": "/run/rtemu is not owned by root",
        },
    )
    assert out.returncode != 0
    assert "rtemu.errors.ConnectionFailed" in out.stderr
    assert (
        "exited with status 1; it said: rtemu: error: /run/rtemu is not owned by root" in out.stderr
    )


def test_no_binary_says_how_to_name_one(tmp_path: Path) -> None:
    env = {"RTEMU_BIN": "", "PATH": str(tmp_path)}
    out = run(USE.format(sock=str(tmp_path / "api.sock")), env)
    assert "no rtemu server answers and no rtemu binary to start one" in out.stderr
    out = run(USE.format(sock=str(tmp_path / "api.sock")), {"RTEMU_BIN": str(tmp_path / "no")})
    assert f"RTEMU_BIN={tmp_path / 'no'} is not an executable file" in out.stderr
