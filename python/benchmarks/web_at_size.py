"""How the web view copes with a large lab: a chain of ideal links brought up, its page opened
in headless Chromium, the time until the page says "live", then the browser's long tasks and
frames over a window while the figures stream in, and the CPU the server behind it used.

Run as root from the repository, with the test environment's Python (it has selenium)::

    .venv/bin/python python/benchmarks/web_at_size.py --nodes 10000 --seconds 20

It needs Debian's chromium and chromedriver, like the browser tests. It prints one line of
figures (docs/benchmarks.md, "The web view at size", quotes them), and takes the lab down
again, also when it fails.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"

# Long tasks and frames over `seconds`, from inside the page.
MEASURE = """
const done = arguments[arguments.length - 1];
const seconds = arguments[0];
const tasks = [];
new PerformanceObserver((l) => { for (const e of l.getEntries()) tasks.push(e.duration); })
  .observe({ type: 'longtask' });
const t0 = performance.now();
let frames = 0, worst = 0, last = t0;
function frame(t) {
  frames++; worst = Math.max(worst, t - last); last = t;
  if (t - t0 < seconds * 1000) requestAnimationFrame(frame); else done({ tasks, frames, worst });
}
requestAnimationFrame(frame);
"""


def chain(lab: str, nodes: int) -> str:
    """A topology file: `nodes` nodes in a chain of ideal links, IPv4 only, no routes."""
    lines = [f'lab = "{lab}"', 'routing = "none"', 'ip = "ipv4"', "[pool]", "ipv4_prefix = 30"]
    lines += [f"[nodes.n{i}]" for i in range(nodes)]
    lines += [f'[[links]]\nendpoints = ["n{i}", "n{i + 1}"]' for i in range(nodes - 1)]
    return "\n".join(lines) + "\n"


def cpu_seconds(pid: int) -> float:
    """The CPU time process `pid` used so far (user and system), seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(rtemu: str, lab: str, seconds: float) -> str:
    """Opens lab `lab`'s web view and measures it; the figures as one line."""
    view = subprocess.Popen(
        [rtemu, "view", lab, "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    driver: Any = None
    try:
        assert view.stdout is not None
        url = next(m.group(1) for line in view.stdout if (m := re.search(r"at (http\S+)", line)))
        opts = webdriver.ChromeOptions()
        opts.binary_location = CHROMIUM
        for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,720"):
            opts.add_argument(flag)
        driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)
        driver.set_script_timeout(seconds + 600)
        start = time.monotonic()
        driver.get(url)
        while "live" not in driver.find_element("id", "status").text:
            if time.monotonic() - start > 300:
                return "the page was not live after 300 s"
            time.sleep(0.05)
        live = time.monotonic() - start
        rows = driver.execute_script(
            "return document.querySelectorAll('#links-table tr[data-link]').length"
        )
        served = cpu_seconds(view.pid)
        got = driver.execute_async_script(MEASURE, seconds)
        served = cpu_seconds(view.pid) - served
        tasks = sorted(got["tasks"])
        busy = sum(tasks) / 1000
        return (
            f"live after {live:.1f} s, {rows} table rows; over {seconds:.0f} s: "
            f"{len(tasks)} long tasks, busy {busy:.1f} s ({100 * busy / seconds:.0f} %), "
            f"longest {tasks[-1] if tasks else 0:.0f} ms, {got['frames']} frames, "
            f"worst frame gap {got['worst']:.0f} ms; `rtemu view` used "
            f"{100 * served / seconds:.0f} % of a CPU"
        )
    finally:
        if driver is not None:
            driver.quit()
        view.kill()
        view.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10000, help="nodes in the chain")
    parser.add_argument("--seconds", type=float, default=20.0, help="the measuring window")
    parser.add_argument("--rtemu", default="target/release/rtemu", help="the rtemu binary")
    parser.add_argument("--lab", default="webbench", help="the lab's name")
    args = parser.parse_args()
    if args.nodes < 2 or args.seconds <= 0:
        parser.error("--nodes must be at least 2 and --seconds above 0")
    with tempfile.TemporaryDirectory() as tmp:
        file = Path(tmp) / f"{args.lab}.toml"
        file.write_text(chain(args.lab, args.nodes))
        subprocess.run([args.rtemu, "up", str(file)], check=True, stdout=subprocess.DEVNULL)
        try:
            print(f"{args.nodes} nodes: {measure(args.rtemu, args.lab, args.seconds)}")
        finally:
            subprocess.run([args.rtemu, "down", args.lab], check=True, stdout=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
