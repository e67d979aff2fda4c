"""`trainbridge run --transparent` start-up cost against the bare command (issue 14).

Each variant is a fresh process tree, interleaved. "first byte" is spawn -> the caller
reading the child's first output byte (what a python-shell user waits for); "whole run"
is spawn -> exit, including the worker's bye and its ack. The Python child gets the
zero-code worker (its import runs on the worker's own thread); /bin/echo shows the
wrapper's own cost with no worker in the child."""

from __future__ import annotations

import subprocess
import sys
import time

from benchmarks.harness import ROOT, Row, child_env, interleave, median

TARGET_MS = 50.0
WRAP = [sys.executable, "-m", "trainbridge", "run", "--transparent", "--"]
PY_CHILD = [sys.executable, "-c", "print('x', flush=True)"]
ECHO_CHILD = ["/bin/echo", "x"]


def _times(cmd, env):
    """(ms to the first stdout byte, ms to the exit)."""
    t = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=env, cwd=ROOT
    )
    proc.stdout.read(1)
    first = time.perf_counter()
    proc.stdout.read()
    proc.wait(60)
    end = time.perf_counter()
    return (first - t) * 1000, (end - t) * 1000


def run(rounds: int = 15) -> list:
    env = child_env()
    cases = {"python": PY_CHILD, "echo": ECHO_CHILD}
    variants = {}
    for name, cmd in cases.items():
        variants[f"{name} bare"] = lambda c=cmd: _times(c, env)
        variants[f"{name} wrapped"] = lambda c=cmd: _times(WRAP + c, env)
    samples = interleave(variants, rounds)
    rows = []
    for name in cases:
        bare, wrapped = samples[f"{name} bare"], samples[f"{name} wrapped"]
        for i, what in enumerate(("first byte", "whole run")):
            b = median([s[i] for s in bare])
            w = median([s[i] for s in wrapped])
            target = f"<= +{TARGET_MS:g} ms" if what == "first byte" else ""
            rows.append(
                Row(
                    "transparent",
                    f"{name} child: {what} (ms added over bare)",
                    w - b,
                    f"bare {name}",
                    b,
                    w / b if b else 0.0,
                    target=target,
                    met=(w - b <= TARGET_MS) if target else None,
                    note=f"absolute {w:.1f} ms",
                )
            )
    return rows


if __name__ == "__main__":
    from benchmarks.harness import table

    print(table(run(int(sys.argv[1]) if len(sys.argv) > 1 else 15)))
