"""A TCP transfer over a link whose delay steps up mid-run, and its throughput against time.

Run as root: python3 delay_step.py [--lab NAME] [--plot FILE.svg]
"""

import argparse
import json
import math

import rtemu

TOPOLOGY = """
lab = "delaystep"
neighbours = "static"

[nodes.client]
[nodes.server]
run = ["iperf3 --server --daemon --one-off"]

[[links]]
name = "path"
endpoints = ["client", "server"]
netem = "delay 5ms rate 20mbit limit 1000"
"""

SECONDS = 10  # length of the transfer
STEP_AT = 4.0  # when the delay steps up, seconds after the transfer starts
STEP_TO = "delay 100ms rate 20mbit limit 1000"


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__)
    args.add_argument("--lab", default="delaystep", help="the lab's name")
    args.add_argument("--plot", default="delay-step.svg", help="where to write the plot")
    opts = args.parse_args()

    with rtemu.up(TOPOLOGY, name=opts.lab, replace=True) as lab:
        client = lab.node("client")
        # The server was started by the topology; wait until it listens.
        lab.node("server").exec(
            [
                "sh",
                "-c",
                "for i in $(seq 50); do ss -Hltn sport = :5201 "
                "| grep -q . && exit 0; sleep 0.1; done; exit 1",
            ],
            timeout=10,
            check=True,
        )
        # The engine applies the step itself, STEP_AT seconds from now, while iperf3 runs.
        lab.link("path").schedule([(STEP_AT, STEP_TO)])
        run = client.exec(
            ["iperf3", "--client", "server", "--time", str(SECONDS), "--interval", "0.5", "--json"],
            timeout=SECONDS + 20,
            check=True,
        )
        stats = lab.stats()
        report = json.loads(run.stdout)

    points = [(i["sum"]["end"], i["sum"]["bits_per_second"] / 1e6) for i in report["intervals"]]
    rtts = [i["streams"][0]["rtt"] / 1000 for i in report["intervals"]]
    print(f"{'time s':>7} {'Mbit/s':>7} {'rtt ms':>7}")
    for (t, mbps), rtt in zip(points, rtts, strict=True):
        print(f"{t:7.1f} {mbps:7.2f} {rtt:7.1f}")
    sent = stats.links["path"].a_to_b
    print(
        f"engine: {sent.delivered} frames delivered client → server, "
        f"{sent.dropped_total} dropped, release p99 {sent.fidelity.released.p99_ns / 1e3:.1f} µs"
    )
    write_svg(opts.plot, points, STEP_AT, f"delay 5 ms → 100 ms at {STEP_AT:g} s")
    print(f"plot: {opts.plot}")


def write_svg(path: str, points: list[tuple[float, float]], mark: float, label: str) -> None:
    """A line plot of throughput (Mbit/s) against time (s), with a marker line at ``mark``."""
    w, h, left, bottom, pad = 640, 360, 60, 40, 20
    t_max = max(t for t, _ in points)
    y_max = 5.0 * max(1, math.ceil(max(v for _, v in points) * 1.1 / 5))  # ticks at whole numbers

    def x(t: float) -> float:
        return left + (w - left - pad) * t / t_max

    def y(v: float) -> float:
        return h - bottom - (h - bottom - pad) * v / y_max

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{w}" height="{h}" fill="white"/>',
        f'<line x1="{left}" y1="{y(0)}" x2="{w - pad}" y2="{y(0)}" stroke="black"/>',
        f'<line x1="{left}" y1="{y(0)}" x2="{left}" y2="{pad}" stroke="black"/>',
    ]
    for i in range(6):
        v, t = y_max * i / 5, t_max * i / 5
        parts.append(f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:.0f}</text>')
        parts.append(
            f'<text x="{x(t):.1f}" y="{h - bottom + 16}" text-anchor="middle">{t:.0f}</text>'
        )
    parts += [
        f'<text x="{(left + w) / 2}" y="{h - 6}" text-anchor="middle">time (s)</text>',
        f'<text transform="translate(14 {h / 2}) rotate(-90)" '
        'text-anchor="middle">throughput (Mbit/s)</text>',
        f'<line x1="{x(mark):.1f}" y1="{y(0)}" x2="{x(mark):.1f}" y2="{pad}" stroke="grey" '
        'stroke-dasharray="4 3"/>',
        f'<text x="{x(mark) + 4:.1f}" y="{pad + 12}" fill="grey">{label}</text>',
        '<polyline fill="none" stroke="steelblue" stroke-width="2" points="'
        + " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in points)
        + '"/>',
        "</svg>",
    ]
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")


if __name__ == "__main__":
    main()
