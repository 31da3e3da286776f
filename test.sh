#!/usr/bin/env bash
# Runs every test of rtemu: the quick ones first (the Python package's ruff and mypy --strict,
# the web page's unit tests with node's test runner), then the Rust workspace's, then the Python
# package's (its unit tests, the labs it drives through `rtemu serve`, and the web view in
# headless Chromium). The Python tools run in a virtual environment of their own (.venv), so
# that a distribution's Python, where PEP 668 refuses `pip install` outside one, runs them as it
# is.
#
# PYTHON picks the interpreter the environment is made from: by default the distribution's own
# (/usr/bin/python3), else the first python3 on PATH. RTEMU_VENV moves the environment.
# Tests that need root skip with a printed reason when not run as root; RTEMU_REQUIRE_ROOT=1
# (CI) makes them fail instead. Run ./install.sh first: it installs what the tests need.
set -euo pipefail
cd "$(dirname "$0")"

if [ -z "${PYTHON:-}" ]; then
    if [ -x /usr/bin/python3 ]; then PYTHON=/usr/bin/python3; else PYTHON=$(command -v python3); fi
fi
venv=${RTEMU_VENV:-$PWD/.venv}

# A new environment when there is none, or when it was made from another interpreter.
base=$("$PYTHON" -c 'import sys; print(sys.base_prefix)')
if [ ! -x "$venv/bin/python" ] || [ "$("$venv/bin/python" -c 'import sys; print(sys.base_prefix)')" != "$base" ]; then
    echo "test.sh: making the virtual environment $venv from $PYTHON" >&2
    rm -rf "$venv"
    "$PYTHON" -m venv "$venv"
fi
# Editable: the environment runs the package's source as it is now; what it needs is installed
# when missing.
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --editable './python[test]'

(cd python && "$venv/bin/python" -m ruff check src tests examples benchmarks \
    && "$venv/bin/python" -m ruff format --check src tests examples benchmarks && "$venv/bin/python" -m mypy)
node --test crates/rtemu-serve/web/test/

cargo build --release --workspace
cargo test --workspace --release

status=0
RTEMU_BIN=$PWD/target/release/rtemu RTEMU_TEST_PYTHON=$PYTHON "$venv/bin/python" -m pytest python/tests || status=$?
# pytest's 5 is "no tests collected": a run that tested nothing has not passed.
if [ "$status" -eq 5 ]; then
    echo "test.sh: pytest collected no tests from python/tests" >&2
    exit 1
fi
exit "$status"
