"""Where the suite runs: ./test.sh makes a virtual environment from the distribution's own
Python, which PEP 668 keeps from `pip install` outside one (Debian 12, Ubuntu 24.04). These
tests show both halves on this machine: the suite runs inside that environment, and pip run by
the same interpreter outside it refuses to install the package.

They skip when the suite was not started by ./test.sh, or when its interpreter is not
externally managed; RTEMU_REQUIRE_PEP668=1 (CI) makes that a failure.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent


def base_python() -> str:
    """The interpreter ./test.sh made the environment from (RTEMU_TEST_PYTHON), or skips."""
    python = os.environ.get("RTEMU_TEST_PYTHON")
    if not python:
        reason = "not started by ./test.sh (RTEMU_TEST_PYTHON is unset)"
        if os.environ.get("RTEMU_REQUIRE_PEP668") == "1":
            pytest.fail(f"RTEMU_REQUIRE_PEP668=1 but {reason}")
        pytest.skip(reason)
    return python


def ask(python: str, code: str) -> str:
    """What ``python -c code`` prints, stripped."""
    run = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    return run.stdout.strip()


def marker(python: str) -> Path:
    """PEP 668's marker file of ``python``: EXTERNALLY-MANAGED in its standard library."""
    stdlib = ask(python, "import sysconfig; print(sysconfig.get_path('stdlib'))")
    return Path(stdlib) / "EXTERNALLY-MANAGED"


def require_managed(python: str) -> None:
    """Skips unless ``python`` is externally managed; fails instead under RTEMU_REQUIRE_PEP668=1."""
    if not marker(python).exists():
        reason = f"{python} is not externally managed ({marker(python)} is missing)"
        if os.environ.get("RTEMU_REQUIRE_PEP668") == "1":
            pytest.fail(f"RTEMU_REQUIRE_PEP668=1 but {reason}")
        pytest.skip(reason)


def test_the_suite_runs_in_a_venv_of_that_python() -> None:
    python = base_python()
    assert sys.prefix != sys.base_prefix, f"not in a virtual environment: {sys.prefix}"
    assert sys.base_prefix == ask(python, "import sys; print(sys.base_prefix)")
    # In the environment the stdlib is the base's, marker and all; pip ignores it there.
    assert Path(sysconfig.get_path("stdlib")) == marker(python).parent


def test_pip_outside_the_venv_refuses_the_package() -> None:
    python = base_python()
    require_managed(python)
    # The environment's pip, run by the base interpreter outside the environment: what `python3
    # -m pip install` does on a stock system that has pip (a system without pip cannot install
    # at all). --dry-run: nothing would be installed even if pip agreed.
    site = sysconfig.get_path("purelib")
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"} | {"PYTHONPATH": site}
    refused = subprocess.run(
        [python, "-m", "pip", "install", "--dry-run", "--no-deps", "--no-index", str(PACKAGE)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert refused.returncode != 0, refused.stdout
    assert "externally-managed-environment" in refused.stderr, refused.stderr
