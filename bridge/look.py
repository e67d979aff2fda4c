"""The look before a hang is declared: at the startup, heartbeat
and stall deadlines, is the job hung, or starting, or waiting for a free core, or computing?
Pure: two samples of the job's process tree in, a verdict out. The shell
(bridge/job_actions.py) takes the samples machine.LOOK_S apart when the machine asks ("look"
action) and answers with a "looked" event. The one implementation; vectors/look.json pins
it.

A sample: {"t": seconds, "lines": output lines so far, "lead": the pid that speaks (or would)
for the job, "procs": [{"pid", "name", "cpu_s", "io_bytes", "threads"}]}
(bridge/procfs.py tree_sample; io_bytes None where /proc/<pid>/io cannot be read; threads:
each [tid, state letter, run_delay_s, timeslices], from /proc/<pid>/task/*/stat and schedstat:
the seconds it has waited on a CPU run queue and the timeslices it has run; None without
schedstat).

How long a thread waited for a CPU over the window: its run_delay, which the kernel adds only
when a wait ends. A thread queued for the whole window (a CPU quota of 1 ms a second) has none
yet: a thread runnable (R) in both samples with the same timeslices never ran between them,
so it waited the whole window. (Runnable in both alone is not enough: a thread waiting for a
GIL another thread holds wakes every 5 ms, and on a loaded machine is often caught runnable
twice while it mostly slept.)

startup (no hello yet), starting when, in this order:
- no process is left: its exit is on the way and decides;
- no Python in the tree: a shell script, make, a downloader. It cannot say hello; a Python it
  starts later will (`bash train.sh` that prepares data for three minutes is not hung);
- the tree used at least BUSY_CPU of a core, read or wrote bytes, or printed, over the window.
Otherwise a Python process started and does nothing: the startup hang.

heartbeat (the beacon went silent), waiting when the lead's threads waited STARVED of the
window on a run queue in long waits: the machine is busy (a CPU quota, a laptop compiling
beside the job), and a process starved of CPU is slow, not hung. A long wait: a thread whose
waits in the window average LONG_WAIT_S or more per timeslice it then ran, or that was queued
the whole window. Short waits do not count: a thread given a CPU every few milliseconds could
have beaten, so something else kept it. That is a GIL held in native code: the beacon, waiting
for the GIL, wakes every 5 ms, and on a loaded machine queues a little each time (measured on
2 cores at a load of 12: 0.4 to 0.9 s of a second, 3 to 33 ms a timeslice; under a quota of
1 ms a second a thread waits about 1 s a timeslice). A stopped or deadlocked process does not
queue at all: hung. A thread's wait shows only once it runs again, so a lead throttled by its
cgroup's CPU quota since it last ran shows none: waiting too when one of its cgroups was held
back by its quota STARVED of the window (cpu.stat, `throttled`) and a thread of the lead is
runnable now (a sleeping, stopped or deadlocked one is not; the same for a starting tree).

stall (no progress for stall_timeout), computing when the lead was busy (it ran, or queued for
a CPU, BUSY_LEAD of the window) and its main thread moved: the places its heartbeats named
(`where`: the innermost frame of the script's own code, "file.py:function") changed (MOVES)
since the last activity: cpu_bound needs the same place for the whole window. The
after-sample carries them: "from" (when the stall window began) and "wheres" ([t, place] each
time the place changed, the first being the place at "from"; look.heard and stall_wheres keep
and cut them). The verdict's "since" is when it last moved: the stall deadline counts from
there. A loop that spins in one function of the script (`while not ready: pass`, a wait in a
library it calls) stays in one place: hung, cpu_bound. One that spins through two of the
script's own functions looks like work: a stage budget names it (docs/CLIENT.md).
"""

from __future__ import annotations

import math
import re
from typing import Any

from trainbridge.bridge.diagnosis_end import size

REASONS = ("startup", "heartbeat", "stall")
BUSY_CPU = 0.10  # of one core, over the window
STARVED = 0.25  # of the window, spent waiting for a CPU in long waits
LONG_WAIT_S = 0.1  # a thread's waits in the window, per timeslice it ran: a long wait
BUSY_LEAD = 0.25  # of the window, the lead ran or waited for a CPU: a busy process (a VM whose
# host gives a busy thread 0.4 to 0.9 of a core, no steal shown, made 0.5 judge computing as hung)
PLACES_SAID = 4  # places named in a verdict
MOVES = 1  # changes of place in the window that make a busy main thread one that computes
WHERES_KEPT = 64  # changes of place a shell keeps of its lead's heartbeats
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


def _waited(
    lead: list[dict[str, Any]], old: dict[Any, dict[str, Any]], window: float
) -> tuple[float, float]:
    """Seconds the lead's threads waited for a CPU over the window, as (in long waits, in
    short ones): see the module's doc. A thread queued the whole window counts the window."""
    long_s = short_s = 0.0
    for p in lead:
        was = {t[0]: t for t in old.get(p["pid"], {}).get("threads") or [] if _is_thread(t)}
        for t in p.get("threads") or []:
            if not _is_thread(t):
                continue
            tid, state, delay, slices = t
            before = was.get(tid)
            if before is None:  # born in the window: all its waits are in it
                waited, ran = delay, slices
            else:
                waited, ran = max(0.0, delay - before[2]), max(0, slices - before[3])
                if state == "R" and before[1] == "R" and ran == 0:
                    long_s += window  # queued throughout: no run_delay shows it yet
                    continue
            if waited and waited / max(ran, 1) >= LONG_WAIT_S:
                long_s += waited
            else:
                short_s += waited
    return long_s, short_s


def _throttled(lead: list[dict[str, Any]], old: dict[Any, dict[str, Any]]) -> float:
    """Seconds the lead's cgroups held it back by their CPU quota over the window (the most of
    any one of its cgroups; 0 where no sample says it)."""
    most = 0.0
    for p in lead:
        now, was = p.get("throttled"), old.get(p["pid"], {}).get("throttled")
        if not isinstance(now, dict) or not isinstance(was, dict):
            continue
        for where, seconds in now.items():
            before = was.get(where)
            if isinstance(seconds, (int, float)) and isinstance(before, (int, float)):
                most = max(most, float(seconds) - float(before))
    return most


def _runnable(lead: list[dict[str, Any]]) -> bool:
    """Some thread of the lead wants a CPU now (state R)."""
    return any(_is_thread(t) and t[1] == "R" for p in lead for t in p.get("threads") or [])


def _held_by_quota(
    procs: list[dict[str, Any]], old: dict[Any, dict[str, Any]], window: float
) -> str | None:
    """Words for a tree its cgroup's CPU quota held back STARVED of the window while one of its
    threads wants a CPU; None otherwise. A thread that ran in the window and has been throttled
    since shows no wait until it runs again, so the cgroup's own count says it."""
    throttled = _throttled(procs, old)
    if throttled / window < STARVED or not _runnable(procs):
        return None
    return (
        f"its cgroup's CPU quota held it back {_span(min(throttled, window))} of the last "
        f"{_span(window)} (a container's or a slice's CPU limit)"
    )


def _is_thread(t: Any) -> bool:
    return (
        isinstance(t, list)
        and len(t) == 4
        and isinstance(t[2], (int, float))
        and isinstance(t[3], int)
    )


def judge(reason: str, before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """{"working": bool, "why": str} for the window from `before` to `after`."""
    if reason not in REASONS:
        raise ValueError(f"unknown look reason {reason!r}; known: {', '.join(REASONS)}")
    procs = after.get("procs") or []
    window = max(0.001, float(after["t"]) - float(before["t"]))
    old = {p["pid"]: p for p in before.get("procs") or []}
    if not procs:
        return {
            "working": True,
            "why": "no process of the job is left: its exit decides",
            **({"since": float(after["t"])} if reason == "stall" else {}),
        }
    if reason == "stall":
        return _stall(before, after, window, old)
    if reason == "heartbeat":
        lead = [p for p in procs if p["pid"] == after.get("lead")] or procs[:1]
        waited, short = _waited(lead, old, window)
        # Seconds, summed over its threads (three threads queued the whole window: 3.0 s)
        if waited / window >= STARVED:
            return {
                "working": True,
                "why": f"waiting for a free core: its threads waited {_span(waited)} for a CPU "
                f"in the last {_span(window)} (the machine is busy, the job is not hung)",
            }
        held = _held_by_quota(lead, old, window)
        if held:
            return {"working": True, "why": f"waiting for a free core: {held}; slow, not hung"}
        given = (
            f", and {_span(short)} in short waits: given a CPU that often, it could have beaten"
            if short >= 0.05
            else ""
        )
        return {
            "working": False,
            "why": f"silent, and not for want of a CPU: its threads waited {_span(waited)} "
            f"for one in {_span(window)}{given}",
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
    waited, _ = _waited(procs, old, window)
    if waited / window >= STARVED:  # an import on a machine whose cores are all taken
        return {
            "working": True,
            "why": f"starting on a busy machine: its threads waited {_span(waited)} for a CPU "
            f"in the last {_span(window)} (slow, not hung)",
        }
    held = _held_by_quota(procs, old, window)
    if held:
        return {"working": True, "why": f"starting under a CPU limit: {held}; slow, not hung"}
    python = next(p for p in procs if is_python(p.get("name")))
    return {
        "working": False,
        "why": f"{python['name']} (pid {python['pid']}) started and then did nothing in "
        f"{_span(window)}: {share}% of a core, no bytes read or written, no output",
    }


def heard(track: dict[str, Any], body: dict[str, Any], t: float) -> tuple[dict[str, Any], bool]:
    """The lead's heartbeat `body`, heard at `t`, folded into what the shell keeps of its
    heartbeats ({"work": the last `work` count, "wheres": [t, place] at each change of place,
    the last WHERES_KEPT}; {} for a new lead): the new track, and whether this heartbeat
    counted more work than the last one did (the machine's `beat` with work)."""
    work, where, last = body.get("work"), body.get("where"), track.get("work")
    worked = type(work) is int and type(last) is int and work > last
    wheres = track.get("wheres") or []
    if isinstance(where, str) and (not wheres or wheres[-1][1] != where):
        wheres = (wheres + [[t, where]])[-WHERES_KEPT:]
    return {"work": work if type(work) is int else last, "wheres": wheres}, worked


def stall_wheres(wheres: list[list[Any]], start: float) -> list[list[Any]]:
    """The places of a stall window that began at `start`: the one in effect then, and each
    change after it (the after-sample's "wheres")."""
    first = 0
    for i, (t, _) in enumerate(wheres):
        if t <= start:
            first = i
    return [list(w) for w in wheres[first:]]


def _stall(
    before: dict[str, Any], after: dict[str, Any], window: float, old: dict[Any, dict[str, Any]]
) -> dict[str, Any]:
    procs = after.get("procs") or []
    lead = [p for p in procs if p["pid"] == after.get("lead")] or procs[:1]
    busy = _delta(lead, old, "cpu_s") + sum(_waited(lead, old, window))
    share = math.floor(busy / window * 100 + 0.5)
    start = after.get("from")
    wheres = [w for w in after.get("wheres") or [] if isinstance(w, list) and len(w) == 2]
    moves = [
        wheres[i][0]
        for i in range(1, len(wheres))
        if wheres[i][1] != wheres[i - 1][1] and (start is None or wheres[i][0] > start)
    ]
    places: list[str] = []
    for _, place in wheres:
        if isinstance(place, str) and place not in places:
            places.append(place)
    stall_s = _span(float(after["t"]) - float(start)) if isinstance(start, (int, float)) else ""
    over = f" over the last {stall_s}" if stall_s else ""
    if busy / window < BUSY_LEAD:
        return {
            "working": False,
            "why": f"no progress{over}, and it is not busy ({share}% of a core over "
            f"{_span(window)}, running or waiting for one)",
        }
    if len(moves) < MOVES:
        at = f"in {places[-1]}" if places else "in one place (no heartbeat said where)"
        if moves:
            at += " after it moved there"
        return {
            "working": False,
            "why": f"busy ({share}% of a core, running or waiting for one) but its main "
            f"thread stayed {at}{over}",
        }
    said = ", ".join(places[-PLACES_SAID:]) + (", ..." if len(places) > PLACES_SAID else "")
    return {
        "working": True,
        "since": float(moves[-1]),
        "why": f"computing, not hung: busy ({share}% of a core, running or waiting for "
        f"one), its main thread moved through {len(places)} of the script's functions"
        f"{over} without progress ({said})",
    }
