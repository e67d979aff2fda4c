"""job.ping() / job.dump_stacks(): the caller waits for the worker's reply on a lock the
I/O thread releases (cheaper than an Event on the ping's path). A reply that comes
after the caller gave up must neither break nor answer a later ask."""

import os
import signal
import sys
import time

from trainbridge import bridge

WAIT_S = 30


def _running(job):
    for event in job.events(timeout=WAIT_S):
        if event["event"] == "message" and event["kind"] == "progress":
            return
    raise AssertionError("the worker never reported progress")


def _all_threads_stopped(pid, deadline_s=WAIT_S):
    """Wait until every thread of pid is in the stopped state (a SIGSTOP takes effect on
    each thread as it is next scheduled, not when kill() returns)."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        states = []
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            states.append(stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3])
        if states and all(state in (b"T", b"t") for state in states):
            return
        time.sleep(0.001)
    raise AssertionError(f"pid {pid} did not stop")


def test_a_late_reply_does_not_answer_the_next_ping(script):
    path = script("""
        import threading; from trainbridge import worker
        worker.progress(1, 2)
        threading.Event().wait(60)
    """)
    job = bridge.launch([sys.executable, path], zero_code=False, startup_timeout=WAIT_S)
    try:
        _running(job)
        assert job.ping(timeout=5) is not None
        os.kill(job.pid, signal.SIGSTOP)
        try:
            _all_threads_stopped(job.pid)
            assert job.ping(timeout=0.3) is None  # nobody answers a stopped worker
        finally:
            os.kill(job.pid, signal.SIGCONT)
        # The stopped ping's reply arrives late (its waiter is gone); these get their own.
        for _ in range(3):
            assert job.ping(timeout=5) is not None
        stacks = job.dump_stacks(timeout=5)
        assert stacks is not None and "MainThread" in stacks
    finally:
        job.cancel(grace=1)
    assert job.wait(WAIT_S)["outcome"] == "cancelled"


def test_ping_without_a_worker_is_none(script):
    path = script("""
        import sys
        sys.stdin.readline()
    """)
    job = bridge.launch([sys.executable, path], zero_code=False, startup_timeout=WAIT_S)
    try:
        assert job.ping(timeout=5) is None  # no hello: nobody to ask
        assert job.dump_stacks(timeout=5) is None
    finally:
        job.cancel(grace=1)
    job.wait(WAIT_S)


def test_dumped_stacks_show_the_main_thread_first_and_trainbridges_own_last(script):
    """The Stacks box once opened on the internal `trainbridge-beacon` thread, the main
    thread below the fold. The worker orders them: main, the script's own, trainbridge's."""
    path = script("""
        import threading; from trainbridge import worker
        threading.Thread(target=threading.Event().wait, name="loader", daemon=True).start()
        worker.progress(1, 2)
        threading.Event().wait(60)
    """)
    job = bridge.launch([sys.executable, path], zero_code=False, startup_timeout=WAIT_S)
    try:
        _running(job)
        stacks = job.dump_stacks(timeout=5)
        assert stacks is not None
        names = [line.split('"')[1] for line in stacks.splitlines() if line.startswith("Thread 0x")]
        assert names[0] == "MainThread" and names[1] == "loader", names
        assert names[2:] and all(n.startswith("trainbridge-") for n in names[2:]), names
    finally:
        job.cancel(grace=1)
    assert job.wait(WAIT_S)["outcome"] == "cancelled"
