"""Stopping a busy worker-bearing process, many times, at random points: it dies of the
signal it was sent and of nothing else (a hung job's child once died of SIGSEGV).

That SIGSEGV was faulthandler's SIGUSR1 dump reading the frames of a thread that was running
Python meanwhile (CPython gh-116008); the worker now dumps from a Python-level handler. Each
child below keeps two threads busy with Python code that native code calls back into (the
frame changes the old dump tripped over): with faulthandler.register(all_threads=True) most
runs of this test saw a SIGSEGV within its few hundred SIGUSR1s.

The plans are drawn from a seeded random generator; a failure names the seed and the plan.
TB_STOP_SEED=<seed> replays one run; TB_STOP_CHILDREN=<n> runs more children
(scripts/stress runs it with many).
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.worker.receiver import Receiver

BUSY_CHILD = """
import json, sys, threading, time
from trainbridge import worker

ROWS = json.dumps([{"a": i, "b": [i, i + 1]} for i in range(40)])

class Row:
    def __init__(self, d):
        self.d = d

def churn():
    # json calls Row (a Python class) from C, sorted calls the key from C: Python frames
    # are entered and left from native code all the time, as in a data loader thread.
    json.loads(ROWS, object_hook=Row)
    sorted(range(100), key=lambda v: -v)

def loader():
    while True:
        churn()

threading.Thread(target=loader, name="loader", daemon=True).start()
with worker.stage("train"):
    step = 0
    while True:
        step += 1
        churn()
        worker.progress(step)
        time.sleep(0.02)  # the main thread mostly waits (GIL released), as in a hang
"""

CHILDREN = int(os.environ.get("TB_STOP_CHILDREN", "60"))
PLANS = (
    "term",
    "usr1-then-term",
    "usr1-flood-then-term",
    "usr1-during-inband-dump",
    "usr1-dump-read-then-term",
)


def _run_one(plan: str, rng: random.Random) -> tuple[str, int, bool, str]:
    """Start a child, signal it as `plan` says; (plan details, returncode, saw hello before
    the first SIGUSR1, crash file text)."""
    directory = tempfile.mkdtemp(prefix="tbst-", dir="/tmp")
    receiver = Receiver(directory)
    crash = Path(directory) / "crash.txt"
    script = Path(directory) / "busy.py"
    script.write_text(BUSY_CHILD)
    env = receiver.env(crash_file=str(crash), heartbeat_s="0.05")
    child = subprocess.Popen(
        [sys.executable, str(script)],
        env=env,
        cwd=directory,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    steps: list[str] = []
    hello_first = True

    def hello_seen() -> bool:
        return "hello" in receiver.kinds()

    def pause(low: float, high: float) -> None:
        delay = rng.uniform(low, high)
        steps.append(f"sleep {delay:.3f}")
        time.sleep(delay)  # a random point in the child's life, not a synchronisation

    def usr1() -> None:
        nonlocal hello_first
        if not any("SIGUSR1" in s for s in steps):
            hello_first = hello_seen()
        steps.append("SIGUSR1")
        child.send_signal(signal.SIGUSR1)

    try:
        if plan == "term":
            pause(0.0, 0.6)  # from before the interpreter runs to well into training
        elif plan in ("usr1-then-term", "usr1-flood-then-term"):
            pause(0.0, 0.6)
            for _ in range(1 if plan == "usr1-then-term" else rng.randint(20, 80)):
                usr1()
                pause(0.0, 0.01)
            pause(0.0, 0.05)  # often while a dump is being written
        elif plan == "usr1-during-inband-dump":
            receiver.wait_for(lambda r: r.kind == "progress", timeout=20)
            steps.append("dump_stacks")
            receiver.command("dump_stacks")
            pause(0.0, 0.02)
            for _ in range(rng.randint(1, 10)):
                usr1()
                pause(0.0, 0.005)
        elif plan == "usr1-dump-read-then-term":
            receiver.wait_for(lambda r: r.kind == "progress", timeout=20)
            usr1()
            deadline = time.monotonic() + 10
            while "in loader" not in _text(crash) or "Current thread" not in _text(crash):
                assert time.monotonic() < deadline, f"no SIGUSR1 dump: {_text(crash)!r}"
                time.sleep(0.01)  # polling a file for a condition, with a deadline
        steps.append("SIGTERM")
        child.send_signal(signal.SIGTERM)
        code = child.wait(timeout=20)
        stderr = child.stderr.read().decode("ascii", "replace")
        return (
            " -> ".join(steps) + (f"; stderr {stderr[-400:]!r}" if stderr else ""),
            code,
            hello_first,
            _text(crash),
        )
    finally:
        child.kill()
        child.wait()
        child.stderr.close()
        receiver.close()
        shutil.rmtree(directory, ignore_errors=True)


def _text(path: Path) -> str:
    try:
        return path.read_text("ascii", "replace")
    except OSError:
        return ""


def test_a_busy_worker_process_dies_only_of_the_signal_it_was_sent():
    seed = int(os.environ.get("TB_STOP_SEED", time.time_ns() % 1_000_000_007))
    rng = random.Random(seed)
    plans = [(PLANS[i % len(PLANS)], random.Random(rng.random())) for i in range(CHILDREN)]
    with ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(lambda p: (p[0],) + _run_one(*p), plans))
    wrong: list[str] = []
    seen: dict[str, int] = {}
    for plan, steps, code, hello_first, crash in results:
        # SIGUSR1 before the worker registered its handler kills, as in any unprepared
        # process; clients send it only after hello said "dump_signal": "SIGUSR1".
        allowed = {-signal.SIGTERM} | (set() if hello_first else {-signal.SIGUSR1})
        if code not in allowed:
            name = signal.Signals(-code).name if code < 0 else f"exit {code}"
            wrong.append(f"{plan}: died of {name} after {steps}\n{crash[-1500:]}")
        seen[plan] = seen.get(plan, 0) + 1
        if plan == "usr1-dump-read-then-term":
            # every thread, the main one last, in faulthandler's format
            assert "Fatal Python error" not in crash, crash
            # (the loader thread may be caught between two churn() calls: "in loader" is
            # always there, "in churn" only mostly: hunt 10)
            assert "in loader" in crash, crash
            current = crash.rsplit("Current thread 0x", 1)[-1]
            assert 'File "' in current and "busy.py" in current, crash
            assert "_dump_stacks_on_signal" not in crash, crash
    assert not wrong, f"seed {seed} (TB_STOP_SEED={seed} replays it):\n" + "\n\n".join(wrong)
    assert set(seen) == set(PLANS[: min(CHILDREN, len(PLANS))])


GIL_HELD_CHILD = """
import ctypes, os, threading, time
from trainbridge import worker

def loader():
    while True:  # would run Python if it could get the GIL
        sorted(range(100), key=lambda v: -v)

def hold_gil():
    libc = ctypes.PyDLL(None)
    mutex = ctypes.create_string_buffer(64)  # zeroed: PTHREAD_MUTEX_INITIALIZER
    libc.pthread_mutex_lock(mutex)
    libc.pthread_mutex_lock(mutex)  # PyDLL keeps the GIL; no signal ends this wait

threading.Thread(target=loader, name="loader", daemon=True).start()
with worker.stage("train"):
    while not os.path.exists("go"):
        time.sleep(0.01)
    hold_gil()
"""


def test_sigusr2_dumps_the_main_thread_of_a_process_that_runs_no_python():
    """What the clients do when neither dump_stacks nor SIGUSR1 is answered: SIGUSR2, whose
    C handler (faulthandler, main thread only) writes the frame native code holds the GIL
    in; a flood of them does not crash the process, which then dies of SIGTERM."""
    directory = tempfile.mkdtemp(prefix="tbst-", dir="/tmp")
    receiver = Receiver(directory)
    crash = Path(directory) / "crash.txt"
    script = Path(directory) / "gil.py"
    script.write_text(GIL_HELD_CHILD)
    child = subprocess.Popen(
        [sys.executable, str(script)],
        cwd=directory,
        env=receiver.env(crash_file=str(crash), heartbeat_s="0.05"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        hello = receiver.wait_for(lambda r: r.kind == "hello", timeout=20).body
        assert hello["dump_signal"] == "SIGUSR1" and hello["native_dump_signal"] == "SIGUSR2"
        (Path(directory) / "go").touch()
        # In hold_gil once the beacon (a heartbeat every 0.05 s) has been silent for 0.5 s.
        deadline = time.monotonic() + 20
        while time.monotonic() - receiver.messages[-1].at < 0.5:
            assert time.monotonic() < deadline, "the beacon never went silent"
            time.sleep(0.05)  # polling for a condition, with a deadline
        child.send_signal(signal.SIGUSR1)
        # The SIGUSR1 handler cannot run; the clients wait signal_dump_wait (0.2 s) for it,
        # then send one SIGUSR2. A process-directed signal goes to the main thread when it
        # has none pending, so this one dump is the main thread's.
        deadline = time.monotonic() + 0.3
        while time.monotonic() < deadline:
            time.sleep(0.05)  # the clients' wait for the SIGUSR1 dump, which never comes
        child.send_signal(signal.SIGUSR2)
        start = time.monotonic()
        while "in hold_gil" not in _text(crash):
            assert time.monotonic() - start < 10, f"no SIGUSR2 dump: {_text(crash)!r}"
            time.sleep(0.05)  # polling a file for a condition, with a deadline
        first = _text(crash)
        assert "stacks on SIGUSR1" not in first  # no Python ran: the Python handler never did
        assert "Fatal Python error" not in first and "in loader" not in first, first
        assert 'gil.py", line 13 in hold_gil' in first, first
        # A flood: while the main thread has one pending, the kernel hands the next to another
        # thread, whose handler dumps its own (stopped) stack; none of it may crash.
        for _ in range(50):
            child.send_signal(signal.SIGUSR2)
        assert "Fatal Python error" not in _text(crash)
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=20) == -signal.SIGTERM
    finally:
        child.kill()
        child.wait()
        child.stderr.close()
        receiver.close()
        shutil.rmtree(directory, ignore_errors=True)
