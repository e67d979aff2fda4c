"""Unpaced logs: a child calls worker.log() 200,000 times as fast
as it can, and the clock runs from spawn until the parent holds the last record; nothing may
be lost (the worker's log() waits for room instead of dropping). Baseline: python-shell
itself (pinned in benchmarks/package.json, `mode: 'json'`), the child printing the same
records as NDJSON, in the same run. Also raw pyzmq PUSH/PULL (bench_throughput's) for the
Python client."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from benchmarks.bench_throughput import MESSAGE, RAW_CHILD
from benchmarks.harness import ROOT, Row, child_env, interleave, median

N = 200_000
NODE = os.path.join(ROOT, "benchmarks", "node_unpaced.js")
SHELL = os.path.join(ROOT, "benchmarks", "node_modules", "python-shell")
WORKER_CHILD = r"""
import sys
from trainbridge import worker
msg = sys.argv[2]
for i in range(int(sys.argv[1])):
    worker.log(msg)
"""
seen = {}  # variant -> [delivered, dropped] of its last run


def node(mode: str) -> float:
    out = subprocess.run(
        ["node", NODE, mode, sys.executable, str(N), MESSAGE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=child_env(),
    )
    if out.returncode != 0:
        raise RuntimeError(f"node_unpaced {mode} failed: {out.stderr[-2000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    seen[mode] = [result["delivered"], result["dropped"]]
    return float(result["per_s"])


def python_client() -> float:
    from trainbridge import bridge

    received, done = [0], []

    def on_event(event):
        if event.get("event") == "message" and event.get("kind") == "log":
            received[0] += 1
            if received[0] == N:
                done.append(time.perf_counter())

    t = time.perf_counter()
    job = bridge.launch(
        [sys.executable, "-c", WORKER_CHILD, str(N), MESSAGE],
        env=child_env(),
        on_event=on_event,
        cwd=ROOT,
    )
    report = job.wait(timeout=600)
    assert report["outcome"] == "succeeded", report["summary"]
    seen["python"] = [received[0], report["dropped"].get("log", 0)]
    return received[0] / ((done[0] if done else time.perf_counter()) - t)


def raw_pyzmq() -> float:
    import msgpack
    import zmq

    ctx = zmq.Context.instance()
    pull = ctx.socket(zmq.PULL)
    pull.setsockopt(zmq.RCVHWM, 0)
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    t = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", RAW_CHILD, f"tcp://127.0.0.1:{port}", str(N), MESSAGE],
        env=child_env(),
        cwd=ROOT,
    )
    for _ in range(N):
        msgpack.unpackb(pull.recv())
    elapsed = time.perf_counter() - t
    proc.wait()
    pull.close()
    return N / elapsed


def run(rounds: int = 5) -> list:
    if not os.path.isdir(SHELL):
        raise RuntimeError("python-shell is missing: run scripts/setup (npm ci in benchmarks/)")
    variants = {
        "python-shell": lambda: node("shell"),
        "node client": lambda: node("client"),
        "python client": python_client,
        "raw pyzmq": raw_pyzmq,
    }
    s = {k: median(v) for k, v in interleave(variants, rounds).items()}
    rows = []
    for ours, key, base in (
        ("node client", "client", "python-shell"),
        ("python client", "python", "raw pyzmq"),
    ):
        delivered, dropped = seen[key]
        factor = 1.0 if base == "python-shell" else 0.5
        base_name = (
            "python-shell NDJSON (mode 'json')" if base == "python-shell" else "raw pyzmq PUSH/PULL"
        )
        rows.append(
            Row(
                "unpaced",
                f"{N:,} unpaced worker.log() -> {ours} (records/s)",
                s[ours],
                base_name,
                s[base],
                s[ours] / s[base],
                f"0 lost, >= {factor:g}x {base}",
                delivered == N and dropped == 0 and s[ours] >= factor * s[base],
                note=f"delivered {delivered:,} of {N:,}, dropped {dropped:,} (last run)",
            )
        )
    return rows
