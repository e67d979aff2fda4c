"""The look before a hang is declared, the pure part: vectors/look.json, which
node-client/test/look.test.js runs too (real processes: test_deadlines.py)."""

import json
import os
import subprocess
import sys
import time

import pytest

from trainbridge.bridge import look, procfs

from .conftest import WAIT_S

CASES = json.load(
    open(
        os.path.join(os.path.dirname(__file__), "..", "..", "vectors", "look.json"),
        encoding="ascii",
    )
)["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_two_samples_in_a_verdict_out(case):
    assert look.judge(case["reason"], case["before"], case["after"]) == case["verdict"]


def test_an_unknown_reason_is_refused():
    with pytest.raises(ValueError, match="unknown look reason 'stage_budget'"):
        look.judge("stage_budget", {"t": 0}, {"t": 1, "procs": []})


VECTORS = json.load(
    open(
        os.path.join(os.path.dirname(__file__), "..", "..", "vectors", "look.json"),
        encoding="ascii",
    )
)


@pytest.mark.parametrize("case", VECTORS["heard"], ids=[c["name"] for c in VECTORS["heard"]])
def test_the_leads_heartbeats_folded_in(case):
    track, worked = {}, []
    for t, body in case["beats"]:
        track, w = look.heard(track, body, t)
        worked.append(w)
    assert worked == case["worked"]
    assert track == case["track"]


@pytest.mark.parametrize(
    "case", VECTORS["stall_wheres"], ids=[c["name"] for c in VECTORS["stall_wheres"]]
)
def test_the_places_of_a_stall_window(case):
    assert look.stall_wheres(case["wheres"], case["start"]) == case["out"]


def _sample_until(pid, ok, what):
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        sample = procfs.process_sample(pid)
        if sample is not None and ok(sample):
            return sample
        time.sleep(0.05)  # polling /proc: nothing to wait on
    raise AssertionError(f"{what}: last sample {procfs.process_sample(pid)}")


@pytest.mark.parametrize(
    "code, runnable",
    [
        ("while True: pass", lambda s: len(s["runnable"]) >= 1 and s["cpu_s"] >= 0.2),
        ("import time; time.sleep(60)", lambda s: s["runnable"] == []),
    ],
    ids=["a spinning process is runnable", "a sleeping one is not"],
)
def test_a_sample_counts_the_threads_that_are_runnable_now(code, runnable):
    # A thread queued for a CPU past the look's window shows no run_delay yet: its state
    # says it wants one (look._waited)
    child = subprocess.Popen([sys.executable, "-c", code])
    try:
        sample = _sample_until(
            child.pid,
            runnable,
            "runnable threads as the process's state says",
        )
        assert sample["pid"] == child.pid and sample["name"].startswith("python")
        tids = set(os.listdir(f"/proc/{child.pid}/task"))
        assert all(str(tid) in tids and slices >= 0 for tid, slices in sample["runnable"])
    finally:
        child.kill()
        child.wait()
    assert procfs.runnable(child.pid) is None  # gone: nothing to count
