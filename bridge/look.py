"""The look before a hang is declared (issue 32 items 2 and 3): at the startup and heartbeat
deadlines, is the job hung, or starting, or only waiting for a free core? Pure: two samples of
the job's process tree in, a verdict out. The shell (bridge/job_actions.py) takes the samples
machine.LOOK_S apart when the machine asks ("look" action) and answers with a "looked"
event. node-client/src/look.js is the twin; vectors/look.json holds cases both run.

A sample: {"t": seconds, "lines": output lines so far, "lead": the pid that speaks (or would)
for the job, "procs": [{"pid", "name", "cpu_s", "io_bytes", "run_delay_s"}]}
(bridge/procfs.py tree_sample; io_bytes None where /proc/<pid>/io cannot be read;
run_delay_s: the time its threads waited on a CPU run queue, /proc/<pid>/task/*/schedstat).

startup (no hello yet), starting when, in this order:
- no process is left: its exit is on the way and decides;
- no Python in the tree: a shell script, make, a downloader. It cannot say hello; a Python it
  starts later will (`bash train.sh` that prepares data for three minutes is not hung);
- the tree used at least BUSY_CPU of a core, read or wrote bytes, or printed, over the window.
Otherwise a Python process started and does nothing: the startup hang.

heartbeat (the beacon went silent), waiting when the lead's threads waited STARVED of the
window on a run queue: the machine is busy (a laptop compiling beside the job, the load at 4x
the cores), and a runnable process starved of CPU is slow, not hung. A GIL held in native code
runs on the CPU (no queue); a stopped or deadlocked process does not queue at all: hung.
"""

from __future__ import annotations

import math
import re
from typing import Any

from trainbridge.bridge.diagnosis_end import size

REASONS = ("startup", "heartbeat")
BUSY_CPU = 0.10  # of one core, over the window
STARVED = 0.25  # of the window, spent waiting for a CPU
PYTHON = re.compile(r"^(python|pypy)[0-9.]*(-dbg)?$")


def is_python(name: Any) -> bool:
    return isinstance(name, str) and bool(PYTHON.match(name))


def _names(procs: list[dict[str, Any]]) -> str:
    names = []
    for p in procs:
        if p.get("name") and p["name"] not in names:
            names.append(str(p["name"]))
    return ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")


def _span(window: float) -> str:
    return f"{math.floor(window * 10 + 0.5) / 10:.1f} s"


def _delta(procs: list[dict[str, Any]], old: dict[Any, dict[str, Any]], key: str) -> float:
    total = 0.0
    for p in procs:
        now, was = p.get(key), old.get(p["pid"], {}).get(key)
        if isinstance(now, (int, float)) and isinstance(was, (int, float)):
            total += max(0.0, float(now) - float(was))
        elif key == "cpu_s" and isinstance(now, (int, float)):
            total += float(now)  # a process born in the window: all its CPU is in it
    return total


def judge(reason: str, before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """{"working": bool, "why": str} for the window from `before` to `after`."""
    if reason not in REASONS:
        raise ValueError(f"unknown look reason {reason!r}; known: {', '.join(REASONS)}")
    procs = after.get("procs") or []
    window = max(0.001, float(after["t"]) - float(before["t"]))
    old = {p["pid"]: p for p in before.get("procs") or []}
    if not procs:
        return {"working": True, "why": "no process of the job is left: its exit decides"}
    if reason == "heartbeat":
        lead = [p for p in procs if p["pid"] == after.get("lead")] or procs[:1]
        waited = _delta(lead, old, "run_delay_s")
        share = math.floor(waited / window * 100 + 0.5)
        if waited / window >= STARVED:
            return {
                "working": True,
                "why": f"waiting for a free core: its threads waited {share}% of the last "
                f"{_span(window)} for a CPU (the machine is busy, the job is not hung)",
            }
        return {
            "working": False,
            "why": f"silent, and not for want of a CPU: its threads waited {share}% of "
            f"{_span(window)} for one",
        }
    if not any(is_python(p.get("name")) for p in procs):
        return {
            "working": True,
            "why": f"no Python in the job's process tree yet ({_names(procs)}): it is starting, "
            "not hung; a Python it starts later says hello",
        }
    cpu = _delta(procs, old, "cpu_s")
    moved = _delta([p for p in procs if p["pid"] in old], old, "io_bytes")
    share = math.floor(cpu / window * 100 + 0.5)
    if cpu / window >= BUSY_CPU:
        return {
            "working": True,
            "why": f"its processes used {share}% of a core over {_span(window)}",
        }
    if moved > 0:
        return {
            "working": True,
            "why": f"its processes read or wrote {size(int(moved))} in {_span(window)}",
        }
    lines = int(after.get("lines") or 0) - int(before.get("lines") or 0)
    if lines > 0:
        return {
            "working": True,
            "why": f"it printed {lines} line{'s' if lines != 1 else ''} in {_span(window)}",
        }
    python = next(p for p in procs if is_python(p.get("name")))
    return {
        "working": False,
        "why": f"{python['name']} (pid {python['pid']}) started and then did nothing in "
        f"{_span(window)}: {share}% of a core, no bytes read or written, no output",
    }
