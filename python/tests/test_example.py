"""The experiment of docs/python.md runs, and the page shows the script as it is."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from conftest import namespaces, require_root, unique_lab

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "python" / "examples" / "delay_step.py"
PAGE = ROOT / "docs" / "python.md"


def test_the_page_shows_the_script_verbatim() -> None:
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)
    assert SCRIPT.read_text() in blocks, f"{PAGE} does not show {SCRIPT} as it is"


def test_delay_step_experiment_runs(tmp_path: Path) -> None:
    require_root()
    name = unique_lab("x")
    plot = tmp_path / "plot.svg"
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--lab", name, "--plot", str(plot)],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ,
    )
    assert run.returncode == 0, run.stderr
    assert not {f"rtemu-{name}", f"rtemu-{name}.client"} & namespaces()
    rows = [line.split() for line in run.stdout.splitlines() if re.match(r"\s*\d+\.\d\s", line)]
    times = [float(r[0]) for r in rows]
    mbps = [float(r[1]) for r in rows]
    rtt = [float(r[2]) for r in rows]
    assert len(rows) >= 18, run.stdout
    # Before the step the path's round trip is 10 ms plus queueing; after it, 200 ms and more.
    before = [r for t, r in zip(times, rtt, strict=True) if t <= 3.5]
    after = [r for t, r in zip(times, rtt, strict=True) if t >= 5.5]
    assert max(before) < 150 and min(after) > 190, run.stdout
    assert max(m for t, m in zip(times, mbps, strict=True) if t <= 3.5) > 10, run.stdout
    svg = ET.parse(plot).getroot()
    line = svg.find("{http://www.w3.org/2000/svg}polyline")
    assert line is not None and len(line.attrib["points"].split()) == len(rows)
