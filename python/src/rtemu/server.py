"""Starting ``rtemu serve`` when no server answers, and stopping it at interpreter exit."""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable

from .errors import ConnectionFailed

#: Where ``rtemu serve`` listens by default.
DEFAULT_SOCKET = "/run/rtemu/api.sock"
#: Where ``rtemu serve --listen`` writes its bearer token by default.
DEFAULT_TOKEN_FILE = "/run/rtemu/api.token"
#: How long a started server may take to answer.
START_TIMEOUT = 15.0

_started: list[subprocess.Popen[bytes]] = []


def rtemu_binary() -> str:
    """The ``rtemu`` executable: ``$RTEMU_BIN``, else ``rtemu`` on ``PATH``."""
    env = os.environ.get("RTEMU_BIN")
    if env:
        if not os.access(env, os.X_OK):
            raise ConnectionFailed(f"RTEMU_BIN={env} is not an executable file")
        return env
    found = shutil.which("rtemu")
    if found is None:
        raise ConnectionFailed(
            "no rtemu server answers and no rtemu binary to start one: put rtemu on PATH or "
            "set RTEMU_BIN to its path"
        )
    return found


def start(socket: str, answers: Callable[[], bool]) -> None:
    """Starts ``rtemu serve`` on ``socket`` and waits until ``answers()`` is true.

    The server runs in its own session (a Ctrl-C meant for the script leaves it alone) and is
    stopped when the interpreter exits. Raises :class:`ConnectionFailed` with the server's own
    output when it exits first or does not answer within :data:`START_TIMEOUT` seconds.
    """
    argv = [rtemu_binary(), "serve"]
    if socket != DEFAULT_SOCKET:
        argv += ["--socket", socket]
    log = tempfile.TemporaryFile(prefix="rtemu-serve-")
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
    )
    deadline = time.monotonic() + START_TIMEOUT
    delay = 0.01
    while True:
        if answers():
            _started.append(proc)
            if len(_started) == 1:
                atexit.register(stop_started)
            log.close()
            return
        code = proc.poll()
        # Another process may have started a server at the same time: use it if it answers.
        if code is not None and answers():
            log.close()
            return
        if code is not None or time.monotonic() > deadline:
            if code is None:
                _stop(proc)
            log.seek(0)
            output = log.read().decode("utf-8", errors="replace").strip()
            log.close()
            how = (
                f"exited with status {code}"
                if code is not None
                else f"did not answer on {socket} within {START_TIMEOUT:g} s"
            )
            raise ConnectionFailed(
                f"started `{' '.join(argv)}`, but it {how}"
                + (f"; it said: {output}" if output else "")
            )
        time.sleep(delay)
        delay = min(delay * 2, 0.2)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def stop_started() -> None:
    """Stops every server this interpreter started (never one someone else started)."""
    while _started:
        _stop(_started.pop())
