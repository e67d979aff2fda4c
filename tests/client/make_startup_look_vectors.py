"""Writes vectors/startup_look.json: the look at the startup deadline (bridge/startup_look.py
judge, and its twin node-client/src/startup_look.js): two samples of a job's tree in, the
verdict out. The expectations are written by the Python client and reviewed by hand;
tests/client/test_startup_look.py and node-client/test/startup_look.test.js run them."""

import json
import os
import sys

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
sys.path.insert(0, ROOT)

from trainbridge.bridge import startup_look  # noqa: E402 - after the path


def proc(pid, name, cpu_s=0.0, io_bytes=1000):
    return {"pid": pid, "name": name, "cpu_s": cpu_s, "io_bytes": io_bytes}


def sample(t, *procs, lines=0):
    return {"t": t, "lines": lines, "procs": list(procs)}


PY = proc(11, "python3.11", cpu_s=2.0, io_bytes=5_000_000)
CASES = [
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


def main():
    out = [
        {
            "name": name,
            "before": before,
            "after": after,
            "verdict": startup_look.judge(before, after),
        }
        for name, before, after in CASES
    ]
    path = os.path.join(ROOT, "vectors", "startup_look.json")
    with open(path, "w", encoding="ascii") as fh:
        json.dump(
            {
                "about": "two samples of a job's tree in -> is it starting or hung? "
                "(bridge/startup_look.py, node-client/src/startup_look.js); "
                "tests/client/make_startup_look_vectors.py",
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
