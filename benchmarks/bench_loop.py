"""Overhead on a real loop: the demo's model for a fixed number of steps, supervised vs
unsupervised, for the explicit API and for zero-code mode (loop time only, not start-up).

Two controls beside them, for the unmodified script: supervised with zero-code off (no
worker in the process: what the client's own work on this machine costs the loop), and
unsupervised after importing, before the script, the modules a zero-code child has loaded
by the time its loop runs (the worker's, pyzmq, msgpack), starting nothing: where torch's
memory and code land after those imports. What zero-code adds beyond both is the worker's
and its hooks' work."""

from __future__ import annotations

import os
import subprocess
import sys

from benchmarks.harness import ROOT, Row, child_env, interleave, median, paired

SCRIPT = os.path.join(ROOT, "benchmarks", "loop_train.py")
STEPS = 1500


def _loop_s(lines) -> float:
    for line in lines:
        if line.startswith("LOOP_S="):
            return float(line[len("LOOP_S=") :])
    raise RuntimeError(f"no LOOP_S line in {lines[-5:]}")


# What a zero-code child has imported of ours, pyzmq and msgpack once `import torch` is
# done (sitecustomize loads the worker; its beacon thread imports the rest meanwhile).
# test_benchmarks.py checks that the list still covers them.
PRELOADED = (
    "zmq",
    "msgpack",
    "trainbridge.protocol.codec",
    "trainbridge.worker.auto",
    "trainbridge.worker.beacon",
    "trainbridge.worker.elastic",
    "trainbridge.worker.errors",
    "trainbridge.worker.facts",
    "trainbridge.worker.hooks",
    "trainbridge.worker.messages",
)
PRELOAD = (
    f"import {', '.join(PRELOADED)}, runpy, sys; "
    "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
)


def plain(*flags: str, preload: bool = False) -> float:
    """Unsupervised; with `preload`, after importing what zero-code mode loads first."""
    out = subprocess.run(
        [sys.executable, *(("-c", PRELOAD) if preload else ()), SCRIPT, str(STEPS), *flags],
        env=child_env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return _loop_s(out.stdout.splitlines())


def supervised(zero_code: bool, *flags) -> float:
    from trainbridge import bridge

    job = bridge.launch(
        [sys.executable, SCRIPT, str(STEPS), *flags], env=child_env(), cwd=ROOT, zero_code=zero_code
    )
    report = job.wait(300)
    assert report["outcome"] == "succeeded", report["outcome"]
    return _loop_s(report["log_tail"])


def run(rounds: int = 9) -> list:
    s = interleave(
        {
            "unsupervised, api": lambda: plain("--api"),
            "supervised, api": lambda: supervised(False, "--api"),
            "unsupervised, unmodified": lambda: plain(),
            "supervised, zero-code": lambda: supervised(True),
            "unsupervised, worker's modules imported first": lambda: plain(preload=True),
            "supervised, no worker": lambda: supervised(False),
        },
        rounds,
    )
    m = {k: median(v) * 1000 for k, v in s.items()}
    rows = []
    for ours, base, label in (
        ("supervised, api", "unsupervised, api", "explicit API"),
        ("supervised, zero-code", "unsupervised, unmodified", "zero-code"),
    ):
        ratio = m[ours] / m[base]
        rows.append(
            Row(
                "real loop",
                f"{STEPS} demo-model steps, {label}, supervised (ms)",
                m[ours],
                f"{base} (ms)",
                m[base],
                ratio,
                "<= 1.005x",
                ratio <= 1.005,
                note=f"overhead {100 * (ratio - 1):+.2f}%; {paired(s[ours], s[base])}",
            )
        )
    base = "unsupervised, unmodified"
    first = "unsupervised, worker's modules imported first"
    for ours, label in (
        ("supervised, no worker", "supervised with zero-code off (no worker: the client alone)"),
        (first, first),
    ):
        ratio = m[ours] / m[base]
        rows.append(
            Row(
                "real loop",
                f"{STEPS} steps, unmodified, {label} (ms)",
                m[ours],
                f"{base} (ms)",
                m[base],
                ratio,
                "control: no target",
                None,
                note=f"{100 * (ratio - 1):+.2f}%; {paired(s[ours], s[base])}",
            )
        )
    return rows
