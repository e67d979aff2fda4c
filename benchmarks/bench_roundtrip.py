"""Command round trip: ping from the Python and the Node client to a worker and back
(signed, sequence-checked, answered by the beacon thread) vs a raw ZeroMQ ping-pong
between the same two kinds of process (parent ROUTER, child DEALER echoing), p50 and p99."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import zmq

from benchmarks.harness import ROOT, Row, child_env, median, percentile

PINGS = 500
ECHO = (
    "import sys, zmq\n"
    "s = zmq.Context().socket(zmq.DEALER); s.connect(sys.argv[1])\n"
    "s.send(b'ready')\n"
    "while True:\n"
    "    m = s.recv()\n"
    "    if m == b'stop': break\n"
    "    s.send(m)\n"
)
IDLE = "import time; from trainbridge import worker\ntime.sleep(120)\n"


def raw() -> list:
    ctx = zmq.Context.instance()
    router = ctx.socket(zmq.ROUTER)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    proc = subprocess.Popen(
        [sys.executable, "-c", ECHO, f"tcp://127.0.0.1:{port}"], env=child_env(), cwd=ROOT
    )
    peer, _ = router.recv_multipart()
    out = []
    for _ in range(PINGS):
        t = time.perf_counter()
        router.send_multipart([peer, b"ping"])
        router.recv_multipart()
        out.append(time.perf_counter() - t)
    router.send_multipart([peer, b"stop"])
    proc.wait(10)
    router.close()
    return out


def python_client() -> list:
    from trainbridge import bridge

    job = bridge.launch([sys.executable, "-c", IDLE], env=child_env(), cwd=ROOT)
    try:
        deadline = time.monotonic() + 30
        while job.state != "running" and time.monotonic() < deadline:
            time.sleep(0.01)
        out = []
        for _ in range(PINGS):
            rtt = job.ping(timeout=5)
            if rtt is None:
                raise RuntimeError("ping went unanswered")
            out.append(rtt)
        return out
    finally:
        job.cancel(grace=0.2)
        job.wait(30)


def node_client() -> list:
    out = subprocess.run(
        [
            "node",
            os.path.join(ROOT, "benchmarks", "node_roundtrip.js"),
            sys.executable,
            IDLE,
            str(PINGS),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=child_env(),
    )
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])["rtts_s"]


def run(rounds: int = 3) -> list:
    samples = {"raw": [], "python": [], "node": []}
    has_node = os.path.exists(os.path.join(ROOT, "benchmarks", "node_roundtrip.js"))
    for _ in range(rounds):
        samples["raw"] += raw()
        samples["python"] += python_client()
        if has_node:
            samples["node"] += node_client()
    us = {k: [x * 1e6 for x in v] for k, v in samples.items() if v}
    rows = []
    for who in [k for k in ("python", "node") if k in us]:
        for p in (50, 99):
            ours, base = percentile(us[who], p), percentile(us["raw"], p)
            limit = 1.5 if p == 50 else 3.0  # issue 19's targets
            rows.append(
                Row(
                    "ping round trip",
                    f"{who} client p{p} (us)",
                    ours,
                    f"raw zmq ping-pong p{p}",
                    base,
                    ours / base,
                    f"<= {limit:g}x raw",
                    ours / base <= limit,
                    note=f"median {median(us[who]):.0f} us over {len(us[who])} pings",
                )
            )
    return rows
