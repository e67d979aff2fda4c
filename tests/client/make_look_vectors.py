"""Writes vectors/look.json: the look before a hang is declared (bridge/look.py judge, and its
twin node-client/src/look.js): a reason and two samples of a job's tree in, the verdict out.
The expectations are written by the Python client and reviewed by hand; tests/client/test_look.py
and node-client/test/look.test.js run them."""

import json
import os
import sys

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
sys.path.insert(0, ROOT)

from trainbridge.bridge import look  # noqa: E402 - after the path


def proc(pid, name, cpu_s=0.0, io_bytes=1000, run_delay_s=0.5):
    return {
        "pid": pid,
        "name": name,
        "cpu_s": cpu_s,
        "io_bytes": io_bytes,
        "run_delay_s": run_delay_s,
    }


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
        "a name like python-config is not an interpreter",
        sample(0, proc(30, "python-config")),
        sample(1.0, proc(30, "python-config")),
    ),
]


HEARTBEAT = [
    (
        "the lead waited 70% of the window for a CPU: a busy machine",
        sample(0, PY, lead=11),
        sample(1.0, {**PY, "run_delay_s": 1.2}, lead=11),
    ),
    (
        "a GIL held in native code runs on the CPU: no wait, hung",
        sample(0, PY, lead=11),
        sample(1.0, {**PY, "cpu_s": 3.0, "run_delay_s": 0.52}, lead=11),
    ),
    (
        "another process starved, not the lead: hung",
        sample(0, proc(10, "python3", run_delay_s=0.0), PY, lead=11),
        sample(1.0, proc(10, "python3", run_delay_s=0.9), PY, lead=11),
    ),
    (
        "a kernel without schedstat says nothing: hung, as before the look",
        sample(0, {**PY, "run_delay_s": None}, lead=11),
        sample(1.0, {**PY, "run_delay_s": None}, lead=11),
    ),
    ("the lead is gone", sample(0, PY, lead=11), sample(1.0, lead=11)),
]


def main():
    out = [
        {
            "name": name,
            "reason": reason,
            "before": before,
            "after": after,
            "verdict": look.judge(reason, before, after),
        }
        for reason, cases in (("startup", STARTUP), ("heartbeat", HEARTBEAT))
        for name, before, after in cases
    ]
    path = os.path.join(ROOT, "vectors", "look.json")
    with open(path, "w", encoding="ascii") as fh:
        json.dump(
            {
                "about": "a reason and two samples of a job's tree in -> hung, or starting, "
                "or waiting for a CPU? (bridge/look.py, node-client/src/look.js); "
                "tests/client/make_look_vectors.py",
                "cases": out,
            },
            fh,
            indent=1,
            ensure_ascii=True,
        )
        fh.write("\n")
    print(f"wrote {os.path.normpath(path)}: {len(out)} cases")


if __name__ == "__main__":
    main()
