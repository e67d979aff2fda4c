"""Scale: one client supervising 200 concurrent lightweight workers (heartbeat 1 Hz;
progress recorded 10 times a second, which the beacon sends at most 4 times a second): the
client's CPU as a share of one core, its RSS, and for Node the event loop lag. An
unsupervised parent of the same children is idle (0% CPU), so CPU is reported as a share of
one core, RSS against the client before it launched anything."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import psutil

from benchmarks.harness import ROOT, Row, child_env

WORKERS = 200
CHILD = (
    "import sys, time; from trainbridge import worker\n"
    "end = time.monotonic() + float(sys.argv[1])\n"
    "i = 0\n"
    "while time.monotonic() < end:\n"
    "    i += 1\n"
    "    worker.progress(i)\n"
    "    time.sleep(0.1)\n"
)
# Children run until cancelled (RUN_S is a backstop): launching 200 takes the Python client
# over a minute here, and every child must still be running in the window.
RUN_S, WARMUP_S, WINDOW_S = 600.0, 20.0, 6.0


_T0 = [time.monotonic()]


def _phase(what: str) -> None:
    print(
        f"[bench] scale: {what} at {time.monotonic() - _T0[0]:.1f} s", file=sys.stderr, flush=True
    )


def python_client() -> dict:
    _T0[0] = time.monotonic()
    from trainbridge import bridge

    me = psutil.Process()
    rss_before = me.memory_info().rss
    jobs = [
        bridge.launch(
            [sys.executable, "-c", CHILD, str(RUN_S)],
            env=child_env(),
            cwd=ROOT,
            startup_timeout=WARMUP_S,
            heartbeat_timeout=30,
        )
        for _ in range(WORKERS)
    ]
    deadline = time.monotonic() + WARMUP_S
    while time.monotonic() < deadline and not all(j.state == "running" for j in jobs):
        time.sleep(0.2)
    running = sum(j.state == "running" for j in jobs)
    _phase("python client: launched, all running")
    c0, t0 = me.cpu_times(), time.monotonic()
    time.sleep(WINDOW_S)  # a measurement window, not synchronisation
    c1, t1 = me.cpu_times(), time.monotonic()
    rss = me.memory_info().rss
    for j in jobs:
        j.cancel(grace=0.5)
    _phase("python client: window over, cancelled")
    for j in jobs:
        j.wait(60)
    _phase("python client: every job ended")
    cpu = (c1.user + c1.system - c0.user - c0.system) / (t1 - t0)
    return {
        "cpu_share": cpu,
        "rss_mib": rss / 2**20,
        "rss_before_mib": rss_before / 2**20,
        "running": running,
    }


def node_client() -> dict:
    out = subprocess.run(
        [
            "node",
            os.path.join(ROOT, "benchmarks", "node_scale.js"),
            sys.executable,
            CHILD,
            str(WORKERS),
            str(RUN_S),
            str(WARMUP_S),
            str(WINDOW_S),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
        env=child_env(),
    )
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(rounds: int = 1) -> list:
    """No interleaving here: one pass per client is already 200 processes on this machine.
    The ratios are against one core (CPU) and against the client process before it launched
    anything (RSS); Node's lag is the event loop's delay p99 over the window."""
    rows = []
    for name, fn in (("python client", python_client), ("node client", node_client)):
        if name == "node client" and not os.path.exists(
            os.path.join(ROOT, "benchmarks", "node_scale.js")
        ):
            continue
        t = time.monotonic()
        r = fn()
        print(
            f"[bench] scale: {name} took {time.monotonic() - t:.1f} s", file=sys.stderr, flush=True
        )
        note = f"{r.get('running', WORKERS)} of {WORKERS} running in the window"
        extra = {k: v for k, v in r.items() if isinstance(v, (int, float))}
        rows.append(
            Row(
                "scale",
                f"{name}, {WORKERS} workers: CPU (share of one core)",
                r["cpu_share"],
                "one core",
                1.0,
                r["cpu_share"],
                "<= 0.25 of a core",
                r["cpu_share"] <= 0.25,
                note=note,
                extra=extra,
            )
        )
        rows.append(
            Row(
                "scale",
                f"{name}, {WORKERS} workers: RSS (MiB)",
                r["rss_mib"],
                "the client before launching (MiB)",
                r["rss_before_mib"],
                r["rss_mib"] / r["rss_before_mib"],
                *(
                    ("<= 2x idle", r["rss_mib"] <= 2 * r["rss_before_mib"])
                    if "node" in name
                    else ()
                ),
                note=note,
            )
        )
        if "lag_p99_ms" in r:
            rows.append(
                Row(
                    "scale",
                    f"{name}, {WORKERS} workers: event-loop lag p99 (ms)",
                    r["lag_p99_ms"],
                    "the same loop before launching (ms)",
                    r["lag_idle_p99_ms"],
                    r["lag_p99_ms"] / max(r["lag_idle_p99_ms"], 1e-3),
                    "<= 20 ms",
                    r["lag_p99_ms"] <= 20,
                    note=note,
                )
            )
    return rows
