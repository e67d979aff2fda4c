"""`trainbridge run --transparent` start-up cost against the bare command.

Each variant is a fresh process tree, interleaved (medians). Three children:
- `python -c pass`: spawn -> exit, the wrapper's whole cost on the shortest Python run
  (its start, the client's imports, the worker's hello and bye with its ack, the report);
- `python -c "print('x', flush=True)"`: spawn -> the caller reading the first output byte
  (what a python-shell user waits for), then spawn -> exit;
- `/bin/echo x`: the wrapper alone, no worker in the child.
The Python child gets the zero-code worker (its import runs on the worker's own thread).
The target (+50 ms) is the start-up: the first byte.

Which trainbridge is measured, and said in every row:
- `--wheel`: as a user has it: the wheel built from this checkout (as tests/install does)
  and installed with the client extra, at the pinned versions, in a scratch venv outside
  the repository; the `trainbridge` console script runs from a scratch directory, and the
  bare child is that venv's python;
- otherwise the checkout: `python -m trainbridge` in the checkout with this venv (an
  EDITABLE install: its import finder costs ~12 ms of the wrapper's start a wheel has not).

    python -m benchmarks.bench_transparent [ROUNDS] [BASE_CHECKOUT] [--wheel]"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
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


PINNED = ("pyzmq", "msgpack", "psutil", "nvidia-ml-py", "rich")  # requirements-dev.txt


def wheel_install(tmp: str, checkout: str = ROOT) -> str:
    """Build the wheel of `checkout` (from a copy, as tests/install does) and install it
    with the client extra at the pinned versions in a fresh venv under `tmp`; the venv's
    directory."""
    src = os.path.join(tmp, "src")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "node_modules", "*.egg-info")
    for name in ("trainbridge", "protocol", "worker", "bridge"):
        shutil.copytree(os.path.join(checkout, name), os.path.join(src, name), ignore=ignore)
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(os.path.join(checkout, name), os.path.join(src, name))
    dist, venv = os.path.join(tmp, "dist"), os.path.join(tmp, "venv")
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    quiet = {"check": True, "cwd": tmp, "stdout": subprocess.DEVNULL}
    subprocess.run(pip + ["wheel", "--no-deps", "--no-build-isolation", "-w", dist, src], **quiet)
    (wheel,) = [os.path.join(dist, f) for f in os.listdir(dist) if f.endswith(".whl")]
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], **quiet)
    with open(os.path.join(checkout, "requirements-dev.txt")) as f:
        pins = [ln.split("#")[0].strip() for ln in f if ln.split("==")[0].strip() in PINNED]
    python = os.path.join(venv, "bin", "python")
    subprocess.run(pip + ["--python", python, "install", wheel + "[client]", *pins], **quiet)
    return venv


def run(rounds: int = 15, base: str = "", wheel: bool = False) -> list:
    """`base`: another checkout (say, main before a change) run beside this one, as rows
    of their own, so a before/after comparison shares the machine's load (with `wheel`,
    the base's wheel in a venv of its own). `wheel`: measure wheel installs, not the
    checkout (module docstring)."""
    env = child_env()
    cases = {"python -c pass": PASS_CHILD, "python print": PY_CHILD, "echo": ECHO_CHILD}
    trees = {"wrapped": ROOT, **({"base wrapped": base} if base else {})}
    tmp = tempfile.mkdtemp(prefix="tb-bench-wheel-") if wheel else ""
    try:
        wraps, pythons = {}, {}
        for tree, checkout in trees.items():
            if wheel:  # the console script, run outside any checkout
                venv = wheel_install(os.path.join(tmp, tree.replace(" ", "-")), checkout)
                wraps[tree] = ([os.path.join(venv, "bin", "trainbridge")] + WRAP[3:], tmp)
                pythons[tree] = os.path.join(venv, "bin", "python")
            else:  # `python -m trainbridge` runs the cwd's checkout
                wraps[tree], pythons[tree] = (WRAP, checkout), sys.executable

        def child(cmd: list, tree: str = "wrapped") -> list:
            return [pythons[tree], *cmd[1:]] if cmd[0] == sys.executable else cmd

        variants = {}
        for name, cmd in cases.items():
            bare_cmd = child(cmd)
            variants[f"{name} bare"] = lambda c=bare_cmd: _times(c, env, tmp or ROOT)
            for tree, (wrap, cwd) in wraps.items():
                wrapped = wrap + child(cmd, tree)
                variants[f"{name} {tree}"] = lambda c=wrapped, d=cwd: _times(c, env, d)
        interleave(variants, 1)  # warm-up: .pyc files written, page cache filled
        samples = interleave(variants, rounds)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    what_ran = "wheel install" if wheel else "checkout (editable)"
    rows = []
    for name, tree in [(n, t) for n in cases for t in trees]:
        bare, wrapped = samples[f"{name} bare"], samples[f"{name} {tree}"]
        label = f"{name} [{what_ran}]" if tree == "wrapped" else f"{name} [{base}, {what_ran}]"
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
                    note=f"absolute {w:.1f} ms, bare {b:.1f} ms, p90 +{p90 - b:.1f} ms"
                    f" (bare p90 {percentile([s[i] for s in bare], 90):.1f} ms)",
                )
            )
    return rows


if __name__ == "__main__":
    from benchmarks.harness import table

    argv = [a for a in sys.argv[1:] if a != "--wheel"]
    rows = run(
        int(argv[0]) if argv else 15,
        argv[1] if len(argv) > 1 else "",
        wheel="--wheel" in sys.argv[1:],
    )
    print(f"load average: {os.getloadavg()[0]:.2f}")
    print(table(rows))
    for row in rows:
        print(f"{row.metric}: {row.note}")
