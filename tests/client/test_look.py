"""The look before a hang is declared, the pure part: vectors/look.json (real processes:
test_deadlines.py)."""

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
    "code, ok",
    [
        ("while True: pass", lambda s: _states(s).count("R") >= 1 and s["cpu_s"] >= 0.2),
        ("import time; time.sleep(60)", lambda s: "R" not in _states(s)),
    ],
    ids=["a spinning process is runnable", "a sleeping one is not"],
)
def test_a_sample_has_each_threads_state_wait_and_timeslices(code, ok):
    # A thread queued for a CPU past the look's window shows no run_delay yet: its state
    # says it wants one (look._waited)
    child = subprocess.Popen([sys.executable, "-c", code])
    try:
        sample = _sample_until(child.pid, ok, "threads as the process's state says")
        assert sample["pid"] == child.pid and sample["name"].startswith("python")
        tids = set(os.listdir(f"/proc/{child.pid}/task"))
        for tid, _state, waited, slices in sample["threads"]:
            assert str(tid) in tids and waited >= 0 and slices >= 0, sample["threads"]
    finally:
        child.kill()
        child.wait()
    assert procfs.threads(child.pid) is None  # gone: nothing to count


def _states(sample):
    return [t[1] for t in sample["threads"] or []]


GIL_HELD = """
import ctypes, sys, threading, time
threading.Thread(target=lambda: [time.sleep(0.2) for _ in iter(int, 1)], daemon=True).start()
time.sleep(0.3)
print("holding", flush=True)
ctypes.PyDLL(None).sleep(60)  # native code with the GIL held: the thread above waits for it
"""


def test_a_gil_held_on_a_loaded_machine_is_silent_not_starved():
    # The waiter wakes every 5 ms and queues a little each time beside CPU hogs: short waits,
    # which summed to 0.4-0.9 s of a second on 2 cores (and judged it starved, CI on 55044f2)
    hogs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(2 * (os.cpu_count() or 1))
    ]
    child = subprocess.Popen([sys.executable, "-c", GIL_HELD], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"holding\n"
        before = procfs.tree_sample(child.pid, 1, time.monotonic())
        time.sleep(1.0)  # the look's window
        after = procfs.tree_sample(child.pid, 1, time.monotonic())
        verdict = look.judge("heartbeat", before, after)
        assert verdict["working"] is False, (verdict, before, after)
        assert verdict["why"].startswith("silent, and not for want of a CPU"), verdict
    finally:
        for p in [child, *hogs]:
            p.kill()
            p.wait()
