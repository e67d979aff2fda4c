"""Hot path: worker.progress() per call vs one tqdm iteration vs a bare loop (ns/iteration).

Each variant runs in the same child process, interleaved, so they share one CPU state; the
worker is enabled (a live beacon connected to a receiver) as in a supervised job."""

from __future__ import annotations

import json

from benchmarks.harness import Row, child_env, median, run_py
from benchmarks.receiver import Receiver

CHILD = r"""
import json, os, time
from tqdm import tqdm
from trainbridge import worker
deadline = time.monotonic() + 10
rt = __import__("trainbridge.worker.runtime").worker.runtime
while worker.enabled() and not getattr(rt.STATE, "beacon", None) and time.monotonic() < deadline:
    time.sleep(0.01)
N = 300_000
def bare():
    t = time.perf_counter()
    for i in range(N):
        pass
    return (time.perf_counter() - t) / N * 1e9
def tq():
    devnull = open(os.devnull, "w")
    t = time.perf_counter()
    for i in tqdm(range(N), file=devnull, mininterval=0.1):
        pass
    return (time.perf_counter() - t) / N * 1e9
progress = worker.progress
def step_only():
    t = time.perf_counter()
    for i in range(N):
        progress(i)
    return (time.perf_counter() - t) / N * 1e9
def with_metrics():
    t = time.perf_counter()
    for i in range(N):
        progress(i, N, loss=0.5)
    return (time.perf_counter() - t) / N * 1e9
def empty_call():  # a Python function with progress()'s signature that does nothing
    def f(step, total=None, **metrics):
        pass
    t = time.perf_counter()
    for i in range(N):
        f(i, N, loss=0.5)
    return (time.perf_counter() - t) / N * 1e9
variants = {"bare": bare, "tqdm": tq, "progress(step)": step_only,
            "progress(step, total, loss=)": with_metrics, "empty call, same signature": empty_call}
out = {k: [] for k in variants}
names = list(variants)
for r in range(ROUNDS):
    for name in names[r % len(names):] + names[:r % len(names)]:
        out[name].append(variants[name]())
print(json.dumps({"enabled": worker.enabled(), "samples": out}))
"""


def run(rounds: int = 9) -> list:
    rows = []
    receiver = Receiver()
    try:
        for mode, env in (("enabled", child_env(**receiver.env())), ("disabled", child_env())):
            result = json.loads(run_py(CHILD.replace("ROUNDS", str(rounds)), env=env))
            assert result["enabled"] == (mode == "enabled"), result["enabled"]
            m = {k: median(v) for k, v in result["samples"].items()}
            bare = m["bare"]
            tqdm_cost = m["tqdm"] - bare
            for name in ("progress(step)", "progress(step, total, loss=)"):
                cost = m[name] - bare
                rows.append(
                    Row(
                        "hot path",
                        f"{name}, worker {mode} (ns/call over bare loop)",
                        cost,
                        "tqdm iteration",
                        tqdm_cost,
                        cost / tqdm_cost,
                        "<= 0.5x tqdm",
                        cost <= 0.5 * tqdm_cost,
                        note=f"bare loop {bare:.1f} ns/iter; "
                        "an empty call with this signature costs "
                        f"{m['empty call, same signature'] - bare:.1f} ns",
                        extra={
                            "bare_ns": bare,
                            "empty_call_ns": m["empty call, same signature"] - bare,
                        },
                    )
                )
    finally:
        receiver.close()
    return rows
