"""Command round trip: ping from the Python and the Node client to a worker and back
(signed, sequence-checked, answered by the beacon thread) vs a raw ZeroMQ ping-pong
between the same two kinds of process (parent ROUTER, child DEALER echoing), p50 and p99.

Each client is compared with the raw ping-pong of its own language's binding (pyzmq for
the Python client, zeromq.js for the Node client), over ipc like the hub, all interleaved
round by round. Ours is the caller's wall time around `job.ping()`: what a user waits."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
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
    folder = tempfile.mkdtemp(prefix="tb-rtt-")
    endpoint = f"ipc://{folder}/raw.sock"  # the hub's transport
    router.bind(endpoint)
    proc = subprocess.Popen([sys.executable, "-c", ECHO, endpoint], env=child_env(), cwd=ROOT)
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
    os.rmdir(folder) if not os.listdir(folder) else None
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
            t = time.perf_counter()
            if job.ping(timeout=5) is None:
                raise RuntimeError("ping went unanswered")
            out.append(time.perf_counter() - t)  # the caller's wall time
        return out
    finally:
        job.cancel(grace=0.2)
        job.wait(30)


def node_client(raw_zmq: bool = False) -> list:
    out = subprocess.run(
        [
            "node",
            os.path.join(ROOT, "benchmarks", "node_roundtrip.js"),
            *(["--raw"] if raw_zmq else []),
            sys.executable,
            ECHO if raw_zmq else IDLE,
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


def _fresh(name: str) -> list:
    code = (
        f"import json\nfrom benchmarks import bench_roundtrip as b\nprint(json.dumps(b.{name}()))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=child_env(),
    )
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(rounds: int = 8) -> list:
    samples: dict[str, list] = {"raw": [], "python": [], "raw_js": [], "node": []}
    has_node = os.path.exists(os.path.join(ROOT, "benchmarks", "node_roundtrip.js"))
    # Every variant in a fresh process: the Python client's hub (an I/O thread that lives
    # as long as its process) must not share the GIL with a later raw run.
    variants = [("raw", lambda: _fresh("raw")), ("python", lambda: _fresh("python_client"))]
    if has_node:
        variants += [("raw_js", lambda: node_client(raw_zmq=True)), ("node", node_client)]
    for i in range(rounds):
        for name, fn in variants[i % len(variants) :] + variants[: i % len(variants)]:
            samples[name] += fn()
    us = {k: [x * 1e6 for x in v] for k, v in samples.items() if v}
    rows = []
    baselines = {"python": ("raw", "raw pyzmq"), "node": ("raw_js", "raw zeromq.js")}
    for who in [k for k in ("python", "node") if k in us]:
        base_key, base_name = baselines[who]
        for p in (50, 99):
            ours, base = percentile(us[who], p), percentile(us[base_key], p)
            limit = 1.5 if p == 50 else 3.0  # the targets, as multiples of the raw ping-pong
            rows.append(
                Row(
                    "ping round trip",
                    f"{who} client p{p} (us)",
                    ours,
                    f"{base_name} ping-pong p{p}",
                    base,
                    ours / base,
                    f"<= {limit:g}x raw",
                    ours / base <= limit,
                    note=f"median {median(us[who]):.0f} us over {len(us[who])} pings",
                )
            )
    return rows
