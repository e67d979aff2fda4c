"""`trainbridge run --transparent` start-up cost against the bare command (issue 14).

Each variant is a fresh process tree, interleaved (medians). Three children:
- `python -c pass`: spawn -> exit, the wrapper's whole cost on the shortest Python run
  (its start, the client's imports, the worker's hello and bye with its ack, the report);
- `python -c "print('x', flush=True)"`: spawn -> the caller reading the first output byte
  (what a python-shell user waits for), then spawn -> exit;
- `/bin/echo x`: the wrapper alone, no worker in the child.
The Python child gets the zero-code worker (its import runs on the worker's own thread).
The target (+50 ms) is the start-up: the first byte."""

from __future__ import annotations

import subprocess
import sys
import time

from benchmarks.harness import ROOT, Row, child_env, interleave, median, percentile

TARGET_MS = 50.0
WRAP = [sys.executable, "-m", "trainbridge", "run", "--transparent", "--"]
PASS_CHILD = [sys.executable, "-c", "pass"]
PY_CHILD = [sys.executable, "-c", "print('x', flush=True)"]
ECHO_CHILD = ["/bin/echo", "x"]


def _times(cmd, env, cwd=ROOT):
    """(ms to the first stdout byte, ms to the exit)."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=env, cwd=cwd)
    proc.stdout.read(1)
    first = time.perf_counter()
    proc.stdout.read()
    proc.wait(60)
    end = time.perf_counter()
    return (first - t) * 1000, (end - t) * 1000


def run(rounds: int = 15, base: str = "") -> list:
    """`base`: another checkout (say, main before a change) run beside this one, as rows
    of their own, so a before/after comparison shares the machine's load."""
    env = child_env()
    cases = {"python -c pass": PASS_CHILD, "python print": PY_CHILD, "echo": ECHO_CHILD}
    trees = {"wrapped": ROOT, **({"base wrapped": base} if base else {})}
    variants = {}
    for name, cmd in cases.items():
        variants[f"{name} bare"] = lambda c=cmd: _times(c, env)
        for tree, cwd in trees.items():  # `python -m trainbridge` runs the cwd's checkout
            variants[f"{name} {tree}"] = lambda c=cmd, d=cwd: _times(WRAP + c, env, d)
    samples = interleave(variants, rounds)
    rows = []
    for name, tree in [(n, t) for n in cases for t in trees]:
        bare, wrapped = samples[f"{name} bare"], samples[f"{name} {tree}"]
        label = name if tree == "wrapped" else f"{name} [{base}]"
        for i, what in enumerate(("first byte", "whole run")):
            if name == "python -c pass" and what == "first byte":
                continue  # no output: its exit is the figure
            b = median([s[i] for s in bare])
            w = median([s[i] for s in wrapped])
            p90 = percentile([s[i] for s in wrapped], 90)
            target = f"<= +{TARGET_MS:g} ms" if what == "first byte" else ""
            rows.append(
                Row(
                    "transparent",
                    f"{label} child: {what} (ms added over bare)",
                    w - b,
                    f"bare {name}",
                    b,
                    w / b if b else 0.0,
                    target=target,
                    met=(w - b <= TARGET_MS) if target else None,
                    note=f"absolute {w:.1f} ms, p90 +{p90 - b:.1f} ms",
                )
            )
    return rows


if __name__ == "__main__":
    from benchmarks.harness import table

    rows = run(
        int(sys.argv[1]) if len(sys.argv) > 1 else 15, sys.argv[2] if len(sys.argv) > 2 else ""
    )
    print(table(rows))
    for row in rows:
        print(f"{row.metric}: {row.note}")
