"""Throughput: worker -> Python client and worker -> Node client (messages/s, signed and
ASCII-checked end to end) vs raw pyzmq PUSH/PULL of the same msgpack payload, and vs
newline-delimited JSON over a stdout pipe (how python-shell works), in the same run.

Every variant moves the same N log records (`{"level": "info", "message": ...}`) from a
child process to the parent and decodes each one; the clock runs from spawn until the
parent holds the last record, so process start is included equally in all of them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import msgpack
import zmq

from benchmarks.harness import ROOT, Row, child_env, interleave, median

N = 50_000
MESSAGE = "step 123 loss=0.4321 lr=3e-4 \u4e2d\u6587"  # some non-ASCII, as real logs have

RAW_CHILD = r"""
import sys, msgpack, zmq
ctx = zmq.Context()
s = ctx.socket(zmq.PUSH); s.setsockopt(zmq.SNDHWM, 0); s.connect(sys.argv[1])
body = {"level": "info", "message": sys.argv[3]}
for i in range(int(sys.argv[2])):
    s.send(msgpack.packb(body))
s.close(linger=-1); ctx.term()
"""

JSON_CHILD = r"""
import json, sys
body = {"level": "info", "message": sys.argv[2]}
w = sys.stdout.write
for i in range(int(sys.argv[1])):
    w(json.dumps(body) + "\n")
sys.stdout.flush()
"""

# The worker's log queue holds 10,000 records; the child keeps under it instead of
# counting drops, so every record is delivered.
WORKER_CHILD = r"""
import sys, time; from trainbridge import worker
from trainbridge.worker.runtime import STATE
msg = sys.argv[2]
for i in range(int(sys.argv[1])):
    while len(STATE.events) > 8000:
        time.sleep(0.0002)
    worker.log(msg)
"""


def raw_pyzmq() -> float:
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


def newline_json() -> float:
    t = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", JSON_CHILD, str(N), MESSAGE],
        env=child_env(),
        cwd=ROOT,
        stdout=subprocess.PIPE,
    )
    count = 0
    for line in proc.stdout:
        json.loads(line)
        count += 1
    elapsed = time.perf_counter() - t
    proc.wait()
    assert count == N, count
    return N / elapsed


def python_client() -> float:
    from trainbridge import bridge

    received = 0
    done = []

    def on_event(event):
        nonlocal received
        if event.get("event") == "message" and event.get("kind") == "log":
            received += 1
            if received == N:
                done.append(time.perf_counter())

    t = time.perf_counter()
    job = bridge.launch(
        [sys.executable, "-c", WORKER_CHILD, str(N), MESSAGE],
        env=child_env(),
        on_event=on_event,
        cwd=ROOT,
    )
    report = job.wait(timeout=300)
    assert received == N and report["outcome"] == "succeeded", (received, report["outcome"])
    return N / (done[0] - t)


def node_client() -> float:
    script = os.path.join(ROOT, "benchmarks", "node_throughput.js")
    out = subprocess.run(
        ["node", script, sys.executable, str(N), MESSAGE, WORKER_CHILD],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=child_env(),
    )
    if out.returncode != 0:
        raise RuntimeError(f"node throughput failed: {out.stderr[-2000:]}")
    return float(json.loads(out.stdout.strip().splitlines()[-1])["per_s"])


def run(rounds: int = 5) -> list:
    variants = {
        "raw pyzmq": raw_pyzmq,
        "newline JSON": newline_json,
        "python client": python_client,
    }
    if os.path.exists(os.path.join(ROOT, "benchmarks", "node_throughput.js")):
        variants["node client"] = node_client
    s = {k: median(v) for k, v in interleave(variants, rounds).items()}
    rows = []
    for ours in [k for k in ("python client", "node client") if k in s]:
        rows.append(
            Row(
                "throughput",
                f"worker -> {ours} (msg/s)",
                s[ours],
                "raw pyzmq PUSH/PULL",
                s["raw pyzmq"],
                s[ours] / s["raw pyzmq"],
                ">= 0.5x raw pyzmq",
                s[ours] >= 0.5 * s["raw pyzmq"],
            )
        )
        rows.append(
            Row(
                "throughput",
                f"worker -> {ours} (msg/s)",
                s[ours],
                "newline JSON over stdout",
                s["newline JSON"],
                s[ours] / s["newline JSON"],
                ">= 2x newline JSON",
                s[ours] >= 2 * s["newline JSON"],
            )
        )
    return rows
