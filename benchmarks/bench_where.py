"""The heartbeat's `where` (worker/facts.main_where, once per heartbeat): the innermost frame
of the script's own code in the main thread's stack, looked up from the beacon thread. Side
by side in one child: `traceback.extract_stack` of the same stack (the standard library's way
to say where a thread is) and `sys._current_frames()` alone (the read both need).

The child's main thread sits as a training step would: 30 frames of the script's own
functions, then a wait inside the standard library (threading.Event.wait), so where() steps
over library frames and stops at the script's frame."""

from __future__ import annotations

import json

from benchmarks.harness import Row, child_env, median, run_py

CHILD = r"""
import json, sys, threading, time, traceback
from trainbridge.worker import facts
ready, release = threading.Event(), threading.Event()
def step(depth):
    if depth:
        return step(depth - 1)
    ready.set()
    release.wait()
main = threading.main_thread().ident
N = 2000
def current():
    t = time.perf_counter()
    for _ in range(N):
        sys._current_frames().get(main)
    return (time.perf_counter() - t) / N * 1e6
def where():
    t = time.perf_counter()
    for _ in range(N):
        facts.main_where()
    return (time.perf_counter() - t) / N * 1e6
def extract():
    t = time.perf_counter()
    for _ in range(N):
        traceback.extract_stack(sys._current_frames().get(main))
    return (time.perf_counter() - t) / N * 1e6
out = {}
def measure():
    ready.wait()
    out["where"] = facts.main_where()
    variants = {"current": current, "where": where, "extract": extract}
    samples = {k: [] for k in variants}
    names = list(variants)
    for r in range(ROUNDS):
        for name in names[r % 3:] + names[:r % 3]:
            samples[name].append(variants[name]())
    out["samples"] = samples
    out["cached_files"] = len(facts._library_files)
    release.set()
threading.Thread(target=measure).start()
step(30)
print(json.dumps(out))
"""


def run(rounds: int = 9) -> list:
    result = json.loads(run_py(CHILD.replace("ROUNDS", str(rounds)), env=child_env()))
    assert result["where"] == "<string>:step", result["where"]  # the script's frame, named
    m = {k: median(v) for k, v in result["samples"].items()}
    return [
        Row(
            "where",
            "main_where() per heartbeat, 31-frame stack (us)",
            m["where"],
            "traceback.extract_stack",
            m["extract"],
            m["where"] / m["extract"],
            "<= 1x extract_stack",
            m["where"] <= m["extract"],
            note=(
                f"sys._current_frames() alone {m['current']:.1f} us; at one heartbeat a "
                f"second, {m['where'] / 1e4:.4f}% of a core; files cached "
                f"{result['cached_files']}"
            ),
            extra={"current_frames_us": m["current"]},
        )
    ]
