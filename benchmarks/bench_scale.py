"""Scale: one client supervising 200 concurrent lightweight workers (heartbeat 1 Hz,
progress 10 Hz): the client's CPU as a share of one core, its RSS, and for Node the event
loop lag. The baseline is the same 200 children with nobody listening (plain `python`,
worker disabled), whose parent is idle: what a GUI pays without trainbridge."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import psutil

from benchmarks.harness import ROOT, Row, child_env

WORKERS = 200
CHILD = ("import sys, time, worker\n"
         "end = time.monotonic() + float(sys.argv[1])\n"
         "i = 0\n"
         "while time.monotonic() < end:\n"
         "    i += 1\n"
         "    worker.progress(i)\n"
         "    time.sleep(0.1)\n")
RUN_S, WARMUP_S, WINDOW_S = 40.0, 20.0, 10.0


def python_client() -> dict:
    import bridge

    me = psutil.Process()
    jobs = [bridge.launch([sys.executable, "-c", CHILD, str(RUN_S)], env=child_env(), cwd=ROOT,
                          startup_timeout=WARMUP_S, heartbeat_timeout=30) for _ in range(WORKERS)]
    deadline = time.monotonic() + WARMUP_S
    while time.monotonic() < deadline and not all(j.state == "running" for j in jobs):
        time.sleep(0.2)
    running = sum(j.state == "running" for j in jobs)
    c0, t0 = me.cpu_times(), time.monotonic()
    time.sleep(WINDOW_S)  # a measurement window, not synchronisation
    c1, t1 = me.cpu_times(), time.monotonic()
    rss = me.memory_info().rss
    for j in jobs:
        j.cancel(grace=0.5)
    for j in jobs:
        j.wait(60)
    cpu = (c1.user + c1.system - c0.user - c0.system) / (t1 - t0)
    return {"cpu_share": cpu, "rss_mib": rss / 2 ** 20, "running": running}


def node_client() -> dict:
    out = subprocess.run(["node", os.path.join(ROOT, "benchmarks", "node_scale.js"), sys.executable, CHILD,
                          str(WORKERS), str(RUN_S), str(WARMUP_S), str(WINDOW_S)],
                         capture_output=True, text=True, timeout=180, cwd=ROOT, env=child_env())
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def idle_parent() -> dict:
    """Baseline: the same children, unsupervised; the parent only waits."""
    me = psutil.Process()
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, str(WARMUP_S + WINDOW_S)], env=child_env(), cwd=ROOT)
             for _ in range(WORKERS)]
    time.sleep(WARMUP_S / 2)
    c0, t0 = me.cpu_times(), time.monotonic()
    time.sleep(WINDOW_S / 2)
    c1, t1 = me.cpu_times(), time.monotonic()
    for p in procs:
        p.kill()
        p.wait()
    return {"cpu_share": (c1.user + c1.system - c0.user - c0.system) / (t1 - t0),
            "rss_mib": me.memory_info().rss / 2 ** 20}


def run(rounds: int = 1) -> list:
    base = idle_parent()
    rows = []
    for name, fn in (("python client", python_client), ("node client", node_client)):
        if name == "node client" and not os.path.exists(os.path.join(ROOT, "benchmarks", "node_scale.js")):
            continue
        r = fn()
        rows.append(Row("scale", f"{name}, {WORKERS} workers: CPU (share of one core)", r["cpu_share"],
                        "idle parent of the same children", base["cpu_share"],
                        r["cpu_share"] / max(base["cpu_share"], 1e-3),
                        note=f"RSS {r['rss_mib']:.0f} MiB; {r.get('running', WORKERS)} running"
                             + (f"; event-loop lag p99 {r['lag_p99_ms']:.1f} ms" if "lag_p99_ms" in r else ""),
                        extra={k: v for k, v in r.items() if isinstance(v, (int, float))}))
    return rows
