"""Helpers for the scheduler tests: a store in tmp_path, the fixture child, deadlines.

Every test uses real keepers and real training processes, waits on conditions with
deadlines (never a sleep as synchronisation) and checks that nothing is left running."""

import os
import sys
import time

import pytest

from trainbridge.bridge import procs

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = os.path.join(HERE, "child.py")
GUI = os.path.join(HERE, "gui.py")
WAIT_S = 30  # generous: a test that needs it has failed anyway


def child(*args):
    return [sys.executable, CHILD, *map(str, args)]


def user_env(**extra):
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)
    env.update(extra)
    return env


def wait_for(predicate, timeout=WAIT_S, what="the condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)  # polling interval of the wait, not a synchronisation


def until_progress(job, timeout=WAIT_S):
    """Read a job's events (launched or attached) until its judge's status has a step."""
    for event in job.events(timeout=timeout):
        if event["event"] == "status" and event["status"]["step"]:
            return event
    raise AssertionError(f"no progress in the job's status within {timeout} s")


def leftovers(job_id):
    """Live processes of a scheduled job (its training process and their children)."""
    return procs.processes_of(job_id)


def runtime_dir_left(row):
    """The keeper's runtime directory (from its ipc endpoint) when it still exists, else None.
    A keeper that exits removes it; the reconciliation that finds it killed removes it."""
    endpoint = row["endpoint"] or ""
    if not endpoint.startswith("ipc://"):
        return None
    path = os.path.dirname(endpoint[len("ipc://") :])
    return path if os.path.exists(path) else None


@pytest.fixture
def store_path(tmp_path):
    path = str(tmp_path / "jobs.db")
    yield path
    # Nothing of any job of this store may outlive the test.
    from trainbridge.bridge.store import Store

    store = Store(path)
    try:
        ended_keepers = [row["keeper_pid"] for row in store.jobs() if row["keeper_pid"]]
        left = {row["id"]: leftovers(row["id"]) for row in store.jobs()}
        keepers = [
            row["keeper_pid"]
            for row in store.jobs(state="active")
            if procs.same_process(row["keeper_pid"], row["keeper_start"])
        ]
        ended = store.jobs(state="ended")
    finally:
        store.close()
    for pids in left.values():
        for pid in pids:
            os.kill(pid, 9)
    for pid in keepers:
        os.kill(pid, 9)
    assert not any(left.values()), f"processes left running: {left}"
    assert not keepers, f"keepers left running: {keepers}"
    # A keeper whose job ended exits on its own (it may still be starting queued jobs): wait
    # for that, and reap the ones this process started, so later tests see no child of ours.
    wait_for(
        lambda: all(_gone(pid) for pid in ended_keepers),
        timeout=15,
        what=f"the keepers {ended_keepers} to exit",
    )
    # Each exited keeper removed its runtime directory; a killed one's, the reconciliation.
    dirs = [runtime_dir_left(row) for row in ended]
    assert not any(dirs), f"runtime directories of ended jobs' keepers left: {dirs}"


def _gone(pid):
    """True once pid has exited (reaping it if it is a child of this process)."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            return True
    except ChildProcessError:
        pass  # not our child: a GUI or scheduler subprocess started it
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False
