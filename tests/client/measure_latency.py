"""Measures how fast the client knows: (1) from a child's death to its final report,
(2) from a stall deadline to `hung` and to the final report. Not a test (no timed
assertions in tests); run it by hand:  .venv/bin/python tests/client/measure_latency.py
"""

import statistics
import sys
import time

from trainbridge import bridge

RUNS = 20
DIES = """
import os, signal, sys, time{imports}
print(repr(time.time()), flush=True)  # the moment of death, as the child saw it
{death}
"""
STALLS = """
import threading; from trainbridge import worker
worker.progress(1, 2)
threading.Event().wait()
"""


def death_to_report(imports, death, zero_code=False):
    times = []
    for _ in range(RUNS):
        ended = {}

        def on_event(event, ended=ended):
            if event["event"] == "end":
                ended["t"] = time.time()

        job = bridge.launch(
            [sys.executable, "-c", DIES.format(imports=imports, death=death)],
            on_event=on_event,
            zero_code=zero_code,
        )
        report = job.wait(30)
        waited = time.time()
        died = float(report["log_tail"][0])
        times.append(((ended["t"] - died) * 1000, (waited - died) * 1000))
    return times


def stall_to_hung(stall_s=0.5):
    rows = []
    for _ in range(RUNS // 2):
        seen = {}

        def on_event(event, seen=seen):
            if event["event"] == "message" and event["kind"] == "progress":
                seen["progress"] = event["t"]
            elif event["event"] == "hang":
                seen["hang"] = event["t"]
            elif event["event"] == "end":
                seen["end"] = event["t"]

        job = bridge.launch(
            [sys.executable, "-c", STALLS],
            stall_timeout=stall_s,
            kill_grace=1,
            on_event=on_event,
            zero_code=False,
        )
        report = job.wait(30)
        assert report["outcome"] == "hung", report["summary"]
        deadline = seen["progress"] + stall_s
        rows.append(((seen["hang"] - deadline) * 1000, (seen["end"] - seen["hang"]) * 1000))
    return rows


def show(name, rows, labels):
    for i, label in enumerate(labels):
        values = sorted(r[i] for r in rows)
        print(
            f"{name}: {label}: median {statistics.median(values):.1f} ms, "
            f"min {values[0]:.1f}, max {values[-1]:.1f} (n={len(values)})"
        )


if __name__ == "__main__":
    labels = ("death -> end event (report built)", "death -> wait() returned")
    show(
        "SIGKILL, worker imported",
        death_to_report(", worker", "os.kill(os.getpid(), signal.SIGKILL)"),
        labels,
    )
    show("SIGSEGV, plain command", death_to_report(", ctypes", "ctypes.string_at(0)"), labels)
    show("os._exit(3), plain command", death_to_report("", "os._exit(3)"), labels)
    show(
        "stall",
        stall_to_hung(),
        (
            "stall deadline -> hang declared",
            "hang declared -> final report (snapshot, dumps, SIGTERM)",
        ),
    )
