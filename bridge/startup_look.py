"""The look at the startup deadline (issue 32 item 2): is a job that has not said hello hung,
or still starting? Pure: two samples of the job's process tree in, a verdict out. The shell
(bridge/job_actions.py) takes the samples machine.LOOK_S apart when the machine asks
("look" action) and answers with a "looked" event. node-client/src/startup_look.js is the
twin; vectors/startup_look.json holds cases both run.

A sample: {"t": seconds, "lines": output lines so far, "procs": [{"pid", "name", "cpu_s",
"io_bytes"}]} (bridge/procfs.py tree_sample; io_bytes None where /proc/<pid>/io cannot be
read). Starting, in this order:

- no process left: its exit is on the way and decides;
- no Python in the tree: a shell script, make, a downloader. It cannot say hello; a Python it
  starts later will, and its own deadline starts then (`bash train.sh` that prepares data for
  three minutes is not hung);
- the tree used at least BUSY_CPU of a core, read or wrote bytes, or printed, over the window.

Otherwise a Python process started and does nothing: the startup hang, whose stack the
snapshot then names.
"""

from __future__ import annotations

import math
import re
from typing import Any

from trainbridge.bridge.diagnosis_end import size

BUSY_CPU = 0.10  # of one core, over the window
PYTHON = re.compile(r"^(python|pypy)[0-9.]*(-dbg)?$")


def is_python(name: Any) -> bool:
    return isinstance(name, str) and bool(PYTHON.match(name))


def _names(procs: list[dict[str, Any]]) -> str:
    names = []
    for p in procs:
        if p.get("name") and p["name"] not in names:
            names.append(str(p["name"]))
    return ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")


def judge(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """{"working": bool, "why": str} for the window from `before` to `after`."""
    procs = after.get("procs") or []
    window = max(0.001, float(after["t"]) - float(before["t"]))
    span = f"{math.floor(window * 10 + 0.5) / 10:.1f} s"
    if not procs:
        return {"working": True, "why": "no process of the job is left: its exit decides"}
    if not any(is_python(p.get("name")) for p in procs):
        return {
            "working": True,
            "why": f"no Python in the job's process tree yet ({_names(procs)}): it is starting, "
            "not hung; a Python it starts later says hello",
        }
    old = {p["pid"]: p for p in before.get("procs") or []}
    cpu = 0.0
    moved = 0
    for p in procs:
        was = old.get(p["pid"], {})
        cpu += max(0.0, float(p.get("cpu_s") or 0) - float(was.get("cpu_s") or 0))
        if isinstance(p.get("io_bytes"), int) and isinstance(was.get("io_bytes"), int):
            moved += max(0, p["io_bytes"] - was["io_bytes"])
    share = math.floor(cpu / window * 100 + 0.5)
    if cpu / window >= BUSY_CPU:
        return {"working": True, "why": f"its processes used {share}% of a core over {span}"}
    if moved > 0:
        return {"working": True, "why": f"its processes read or wrote {size(moved)} in {span}"}
    lines = int(after.get("lines") or 0) - int(before.get("lines") or 0)
    if lines > 0:
        return {
            "working": True,
            "why": f"it printed {lines} line{'s' if lines != 1 else ''} in {span}",
        }
    python = next(p for p in procs if is_python(p.get("name")))
    return {
        "working": False,
        "why": f"{python['name']} (pid {python['pid']}) started and then did nothing in "
        f"{span}: {share}% of a core, no bytes read or written, no output",
    }
