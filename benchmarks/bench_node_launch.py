"""Node launch() start-up: the call to the child's first output line, supervised by
the Python job server, against child_process.spawn of the same child (no supervision), and the
Python client's launch() to its first output event. A cold launch starts the job server too
(the first launch of a Node process); a warm one finds it running; a prepared one is the first
launch of a Node process that called prepare() at its start (not timed). Rounds interleave."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

from benchmarks.harness import ROOT, Row, child_env, interleave, median, percentile

NODE = shutil.which("node")
SCRIPT = os.path.join(ROOT, "benchmarks", "node_launch.js")
CODE = 'print("first", flush=True)'


def _node(mode: str, rounds: int) -> list[float]:
    env = child_env()  # as a user's: .pyc files written and used (the job server's imports)
    out = subprocess.run(
        [NODE or "node", SCRIPT, mode, sys.executable, str(rounds)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return json.loads(out.stdout.splitlines()[-1])


def _python_launch() -> float:
    from trainbridge import bridge

    t0 = time.perf_counter()
    first: list[float] = []

    def on_event(event):
        if not first and event.get("event") == "output":
            first.append((time.perf_counter() - t0) * 1000)

    env = child_env()
    job = bridge.launch([sys.executable, "-c", CODE], env=env, on_event=on_event)
    job.wait(60)
    return first[0]


def run(rounds: int = 15) -> list:
    if not NODE:
        return []
    samples = interleave(
        {
            "spawn": lambda: _node("spawn", 1)[0],
            "cold": lambda: _node("cold", 1)[0],
            "prepared": lambda: _node("prepared", 1)[0],
            "python": _python_launch,
        },
        rounds,
    )
    warm = _node("warm", rounds)
    base = median(samples["spawn"])
    rows = []
    for name, values, what in (
        ("cold", samples["cold"], "launch(), cold (its job server starts)"),
        ("prepared", samples["prepared"], "launch() after prepare() (a GUI's start-up)"),
        ("warm", warm, "launch(), warm (job server running)"),
        ("python", samples["python"], "Python bridge.launch()"),
    ):
        m = median(values)
        rows.append(
            Row(
                "node launch",
                f"{what}: to the first line (ms, over spawn)",
                m - base,
                "child_process.spawn, no supervision (ms)",
                base,
                m / base,
                target="<= +150 ms" if name != "python" else "",
                met=(m - base) <= 150 if name != "python" else None,
                note=f"median {m:.1f} ms, p90 {percentile(values, 90):.1f} ms",
            )
        )
    return rows
