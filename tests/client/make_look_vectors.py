"""Writes vectors/look.json: the look before a hang is declared (bridge/look.py judge, the one
implementation): a reason and two samples of a job's tree in, the verdict out. The
expectations are written by the Python client and reviewed by hand; tests/client/test_look.py
runs them."""

import json
import os
import sys

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
sys.path.insert(0, ROOT)

from trainbridge.bridge import look  # noqa: E402 - after the path


def proc(pid, name, cpu_s=0.0, io_bytes=1000, threads=None):
    """A process; its threads [tid, state, run_delay_s, timeslices], by default its main thread
    asleep, having waited 0.5 s for a CPU over 1,000 timeslices."""
    return {
        "pid": pid,
        "name": name,
        "cpu_s": cpu_s,
        "io_bytes": io_bytes,
        "threads": [[pid, "S", 0.5, 1000]] if threads is None else threads,
    }


def waits(*threads):
    """Threads as (tid, state, run_delay_s, timeslices) tuples."""
    return {"threads": [list(t) for t in threads]}


def quota(seconds, parent=None):
    """A process's cgroups' time held back by their CPU quota: its own (and its parent's)."""
    out = {"/sys/fs/cgroup/job/train": seconds}
    if parent is not None:
        out["/sys/fs/cgroup/job"] = parent
    return {"throttled": out}


def sample(t, *procs, lines=0, lead=None):
    return {"t": t, "lines": lines, "lead": lead, "procs": list(procs)}


PY = proc(11, "python3.11", cpu_s=2.0, io_bytes=5_000_000)
STARTUP = [
    ("the process is gone", sample(0, PY), sample(1)),
    (
        "a shell script before its Python: no Python in the tree",
        sample(0, proc(10, "bash"), proc(12, "sleep")),
        sample(1, proc(10, "bash"), proc(12, "sleep")),
    ),
    (
        "many programs, none of them Python",
        sample(0),
        sample(
            1.0,
            proc(10, "bash"),
            proc(12, "make"),
            proc(13, "cc1"),
            proc(14, "as"),
            proc(15, "ld"),
        ),
    ),
    ("Python busy on the CPU", sample(0, PY), sample(1.0, {**PY, "cpu_s": 2.9})),
    (
        "Python that has just started counts its whole CPU",
        sample(0, proc(10, "bash")),
        sample(1.0, proc(10, "bash"), proc(11, "python3", cpu_s=0.4)),
    ),
    ("Python below a tenth of a core", sample(0, PY), sample(1.0, {**PY, "cpu_s": 2.05})),
    (
        "Python reading a file",
        sample(0, PY),
        sample(1.0, {**PY, "io_bytes": 5_000_000 + (3 << 20)}),
    ),
    ("Python printing", sample(0, PY), sample(1.25, PY, lines=2)),
    (
        "Python whose /proc/<pid>/io is not readable",
        sample(0, {**PY, "io_bytes": None}),
        sample(1.0, {**PY, "io_bytes": None}),
    ),
    ("pypy idle", sample(0, proc(20, "pypy3.10")), sample(1.0, proc(20, "pypy3.10"))),
    (
        "Python idle under bash: hung",
        sample(0, proc(10, "bash"), PY),
        sample(1.04, proc(10, "bash"), PY),
    ),
    (
        "Python below a tenth of a core that waited 60% of the window for one, in long waits "
        "(an import beside busy cores): starting",
        sample(0, PY),
        sample(1.0, {**PY, "cpu_s": 2.05, **waits((11, "R", 1.1, 1003))}),
    ),
    (
        "Python below a tenth of a core, waiting in short waits only: hung",
        sample(0, PY),
        sample(1.0, {**PY, "cpu_s": 2.05, **waits((11, "S", 0.7, 1080))}),
    ),
    (
        "Python below a tenth of a core under a CPU limit: its cgroup held it back 0.8 s of "
        "1.0 s and its main thread is runnable: starting",
        sample(0, {**PY, **quota(3.0)}),
        sample(1.0, {**PY, "cpu_s": 2.05, **waits((11, "R", 0.5, 1001)), **quota(3.8)}),
    ),
    (
        "a name like python-config is not an interpreter",
        sample(0, proc(30, "python-config")),
        sample(1.0, proc(30, "python-config")),
    ),
]


HEARTBEAT = [
    (
        "the lead waited 70% of the window for a CPU, in long waits: a busy machine",
        sample(0, PY, lead=11),
        sample(1.0, {**PY, **waits((11, "S", 1.2, 1003))}, lead=11),
    ),
    (
        "a GIL held in native code runs on the CPU: no wait, hung",
        sample(0, PY, lead=11),
        sample(1.0, {**PY, "cpu_s": 3.0, **waits((11, "R", 0.52, 1100))}, lead=11),
    ),
    (
        "a GIL held in native code on a loaded machine: its waiter queued 0.6 s in 80 short "
        "waits (8 ms each); given a CPU that often it could have beaten: hung",
        sample(0, {**PY, **waits((11, "S", 0.5, 1000), (14, "S", 2.0, 50000))}, lead=11),
        sample(1.0, {**PY, **waits((11, "S", 0.5, 1000), (14, "R", 2.6, 50080))}, lead=11),
    ),
    (
        "short waits beside a long one: only the long one counts, and it is enough",
        sample(0, {**PY, **waits((11, "S", 0.5, 1000), (14, "S", 2.0, 50000))}, lead=11),
        sample(1.0, {**PY, **waits((11, "R", 0.9, 1001), (14, "R", 2.6, 50080))}, lead=11),
    ),
    (
        "a thread born in the window with a long wait counts it",
        sample(0, PY, lead=11),
        sample(1.0, {**PY, **waits((11, "S", 0.5, 1000), (15, "S", 0.4, 2))}, lead=11),
    ),
    (
        "another process starved, not the lead: hung",
        sample(0, proc(10, "python3", threads=[[10, "S", 0.0, 10]]), PY, lead=11),
        sample(1.0, proc(10, "python3", threads=[[10, "S", 0.9, 11]]), PY, lead=11),
    ),
    (
        "queued the whole window (a CPU quota of 1 ms a second): no run_delay yet, but two "
        "threads runnable in both samples never ran between them: waiting",
        sample(0, {**PY, **waits((11, "R", 0.5, 900), (14, "R", 0.1, 31))}, lead=11),
        sample(
            1.0,
            {**PY, **waits((11, "R", 0.5, 900), (14, "R", 0.1, 31), (15, "R", 0.0, 2))},
            lead=11,
        ),
    ),
    (
        "runnable in both samples but it ran between them (a GIL held in native code on a "
        "loaded machine, its waiter caught runnable twice): short waits, hung",
        sample(0, {**PY, **waits((11, "R", 0.5, 900), (14, "R", 0.1, 31))}, lead=11),
        sample(
            1.0, {**PY, "cpu_s": 2.6, **waits((11, "R", 0.6, 1000), (14, "R", 0.2, 60))}, lead=11
        ),
    ),
    (
        "runnable in one sample only: the ended waits decide, hung",
        sample(0, {**PY, **waits((11, "S", 0.5, 900))}, lead=11),
        sample(1.0, {**PY, **waits((11, "R", 0.5, 900))}, lead=11),
    ),
    (
        "no schedstat: nothing is known of the waits, hung, as before the look",
        sample(0, {**PY, "threads": None}, lead=11),
        sample(1.0, {**PY, "threads": None}, lead=11),
    ),
    ("the lead is gone", sample(0, PY, lead=11), sample(1.0, lead=11)),
    (
        "it ran in the window and its cgroup's quota has held it back since (1 ms a second): "
        "its wait shows only when it runs again, but the cgroup was throttled 0.9 s of 1.0 s "
        "and its main thread is runnable: waiting",
        sample(0, {**PY, **waits((11, "S", 0.5, 1000), (14, "R", 0.1, 31)), **quota(5.0)}, lead=11),
        sample(
            1.0, {**PY, **waits((11, "S", 0.5, 1001), (14, "R", 0.101, 32)), **quota(5.9)}, lead=11
        ),
    ),
    (
        "throttled, but no thread of the lead wants a CPU (a deadlock in a container that "
        "others keep at its limit): hung",
        sample(0, {**PY, **waits((11, "S", 0.5, 1000), (14, "S", 0.1, 31)), **quota(5.0)}, lead=11),
        sample(
            1.0, {**PY, **waits((11, "S", 0.5, 1000), (14, "S", 0.1, 31)), **quota(5.9)}, lead=11
        ),
    ),
    (
        "the container's quota, above the process's own cgroup, counts: the most of its "
        "cgroups, 0.8 s of 1.0 s: waiting",
        sample(0, {**PY, **waits((11, "R", 0.5, 1000)), **quota(0.0, parent=7.0)}, lead=11),
        sample(1.0, {**PY, **waits((11, "R", 0.5, 1001)), **quota(0.0, parent=7.8)}, lead=11),
    ),
    (
        "throttled 0.1 s of 1.0 s, less than a quarter of the window: hung",
        sample(0, {**PY, **waits((11, "R", 0.5, 1000)), **quota(5.0)}, lead=11),
        sample(1.0, {**PY, **waits((11, "R", 0.5, 1001)), **quota(5.1)}, lead=11),
    ),
    (
        "the quota's count not read in one sample (the process's cgroup unreadable): the "
        "waits decide, hung",
        sample(0, {**PY, **waits((11, "R", 0.5, 1000)), "throttled": None}, lead=11),
        sample(1.0, {**PY, **waits((11, "R", 0.5, 1001)), **quota(5.9)}, lead=11),
    ),
]


def stall_sample(t, *procs, start=0.0, wheres=(), lead=11):
    return {**sample(t, *procs, lead=lead), "from": start, "wheres": [list(w) for w in wheres]}


TRAIN = (
    (-4.0, "main.py:train"),
    (3.0, "model.py:RNNModel.forward"),
    (9.5, "main.py:get_batch"),
    (17.0, "main.py:train"),
)
STALL = [
    (
        "busy, and its main thread moved through the script's functions: computing, since "
        "it last moved",
        sample(20.0, PY, lead=11),
        stall_sample(21.0, {**PY, "cpu_s": 2.9}, wheres=TRAIN),
    ),
    (
        "starved on a loaded machine still counts as busy: it wanted the CPU",
        sample(20.0, PY, lead=11),
        stall_sample(21.0, {**PY, "cpu_s": 2.2, **waits((11, "S", 1.0, 1100))}, wheres=TRAIN),
    ),
    (
        "queued the whole window with no run_delay yet (a thread runnable in both samples "
        "that never ran) still counts as busy",
        sample(20.0, {**PY, **waits((11, "R", 0.5, 70))}, lead=11),
        stall_sample(21.0, {**PY, "cpu_s": 2.05, **waits((11, "R", 0.5, 70))}, wheres=TRAIN),
    ),
    (
        "busy at 35% of a core, moving (a VM whose host gives a busy thread less than half a "
        "core, no steal shown): computing",
        sample(20.0, PY, lead=11),
        stall_sample(21.0, {**PY, "cpu_s": 2.35}, wheres=TRAIN),
    ),
    (
        "one place the whole window (a spin in one function): hung",
        sample(20.0, PY, lead=11),
        stall_sample(21.0, {**PY, "cpu_s": 3.0}, wheres=[(-4.0, "cpu_loop.py:spin")]),
    ),
    (
        "it moved once in the window (into a spin): computing since then; the next look decides",
        sample(20.0, PY, lead=11),
        stall_sample(
            21.0, {**PY, "cpu_s": 3.0}, wheres=[(-9.0, "a.py:<module>"), (1.0, "a.py:spin")]
        ),
    ),
    (
        "it moved only before the window began: hung",
        sample(20.0, PY, lead=11),
        stall_sample(
            21.0, {**PY, "cpu_s": 3.0}, wheres=[(-9.0, "a.py:train"), (-4.0, "a.py:spin")]
        ),
    ),
    (
        "moving but idle (a sleeping poll loop through two functions): hung",
        sample(20.0, PY, lead=11),
        stall_sample(21.0, {**PY, "cpu_s": 2.01}, wheres=TRAIN),
    ),
    (
        "no heartbeat said where: hung",
        sample(20.0, PY, lead=11),
        stall_sample(21.0, {**PY, "cpu_s": 3.0}),
    ),
    (
        "a busy DataLoader worker beside an idle lead: hung (the lead is judged)",
        sample(20.0, proc(12, "python3", cpu_s=1.0), PY, lead=11),
        stall_sample(21.0, proc(12, "python3", cpu_s=2.0), PY, wheres=TRAIN),
    ),
    (
        "more places than a verdict names",
        sample(20.0, PY, lead=11),
        stall_sample(
            21.0,
            {**PY, "cpu_s": 2.9},
            wheres=[(float(i), f"m.py:f{i}") for i in range(-1, 7)],
        ),
    ),
    ("the lead is gone: its exit decides", sample(20.0, PY, lead=11), stall_sample(21.0)),
]


# The lead's heartbeats folded into what the shell keeps (look.heard): work grows -> activity.
HEARD = [
    (
        "a growing backward() count is work; the first count, and a count that stays, are not",
        [(1.0, {"work": 0}), (2.0, {"work": 40}), (3.0, {"work": 40}), (4.0, {"work": 41})],
    ),
    (
        "a heartbeat without a count keeps the last one",
        [(1.0, {"work": 5}), (2.0, {}), (3.0, {"work": 9})],
    ),
    (
        "a count that is not an integer is not a count",
        [(1.0, {"work": 5}), (2.0, {"work": 7.5}), (3.0, {"work": True}), (4.0, {"work": 6})],
    ),
    (
        "places are kept at each change, not at each heartbeat",
        [
            (1.0, {"where": "main.py:train"}),
            (2.0, {"where": "main.py:train"}),
            (3.0, {"where": "model.py:Net.forward"}),
            (4.0, {"where": None}),
            (5.0, {"where": "main.py:train"}),
        ],
    ),
    (
        "only the last changes are kept",
        [(float(i), {"where": f"m.py:f{i % 70}"}) for i in range(70)],
    ),
]
STALL_WHERES = [
    ("none", [], 5.0),
    ("the place in effect at the start, and the changes after", TRAIN, 5.0),
    ("every change is after the start: all of them", TRAIN, -10.0),
    ("a change at the start itself is the place then", TRAIN, 3.0),
    ("the last change is before the start: that place alone", TRAIN, 30.0),
]


def heard_cases():
    out = []
    for name, beats in HEARD:
        track, worked = {}, []
        for t, body in beats:
            track, w = look.heard(track, body, t)
            worked.append(w)
        out.append(
            {"name": name, "beats": [list(b) for b in beats], "worked": worked, "track": track}
        )
    return out


def main():
    out = [
        {
            "name": name,
            "reason": reason,
            "before": before,
            "after": after,
            "verdict": look.judge(reason, before, after),
        }
        for reason, cases in (("startup", STARTUP), ("heartbeat", HEARTBEAT), ("stall", STALL))
        for name, before, after in cases
    ]
    path = os.path.join(ROOT, "vectors", "look.json")
    with open(path, "w", encoding="ascii") as fh:
        json.dump(
            {
                "about": "a reason and two samples of a job's tree in -> hung, or starting, "
                "or waiting for a CPU, or computing? (bridge/look.py); "
                "tests/client/make_look_vectors.py",
                "cases": out,
                "heard": heard_cases(),
                "stall_wheres": [
                    {
                        "name": name,
                        "wheres": [list(w) for w in wheres],
                        "start": start,
                        "out": look.stall_wheres([list(w) for w in wheres], start),
                    }
                    for name, wheres, start in STALL_WHERES
                ],
            },
            fh,
            indent=1,
            ensure_ascii=True,
        )
        fh.write("\n")
    print(f"wrote {os.path.normpath(path)}: {len(out)} cases")


if __name__ == "__main__":
    main()
