"""When the supervising client dies, the job's whole tree ends within kill_grace (+ a little).
(A job that must outlive its client is a scheduled one: tests/scheduler/test_reattach.py.)
Real processes: a client script (bridge.launch) that the test SIGKILLs, a job that starts
a grandchild without a worker, psutil to check.
"""

import json
import os
import signal
import subprocess
import sys
import time

import psutil

HERE = os.path.dirname(os.path.abspath(__file__))
KILL_GRACE = 1.0
STARTUP_S = 30  # generous: a test that needs it has failed anyway


def wait_for(condition, timeout, what):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.01)  # polling interval of a condition with a deadline, not a sync sleep


def live(pids):
    """Pids still running (zombies waiting for a reaper count as gone)."""
    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.Error:
            pass
    return out


def job_processes(job_id):
    """Every live process that inherited the job's id (the whole tree, escapees too)."""
    found = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.environ().get("TRAINBRIDGE_JOB_ID") == job_id:
                found.append(proc.pid)
        except (psutil.Error, OSError):
            continue
    return live(found)


def read_json(path):
    try:
        with open(path, encoding="ascii") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def start_client(tmp_path, detached=False, *child_options):
    pids_file = str(tmp_path / "pids.json")
    client = subprocess.Popen(
        [
            sys.executable,
            os.path.join(HERE, "client.py"),
            pids_file,
            repr(KILL_GRACE),
            "1" if detached else "0",
            *child_options,
        ],
        stdin=subprocess.DEVNULL,
    )
    info = wait_for(
        lambda: read_json(pids_file) or client.poll() is not None, STARTUP_S, "the job's pids"
    )
    assert client.poll() is None, f"the client ended early ({client.returncode})"
    return client, info, pids_file


def kill_client(client):
    client.send_signal(signal.SIGKILL)
    client.wait(timeout=5)
    return time.monotonic()


def assert_tree_ends(info, killed_at):
    pids, job_id = info["pids"], info["job_id"]
    try:
        wait_for(
            lambda: not live(pids) and not job_processes(job_id),
            KILL_GRACE + 2,
            f"the job's tree {pids} to end",
        )
    finally:  # a failed test must not leave its job running
        for pid in live(pids) + job_processes(job_id):
            os.kill(pid, signal.SIGKILL)
    return time.monotonic() - killed_at


def test_client_killed_ends_the_job_tree(tmp_path):
    client, info, _ = start_client(tmp_path)
    assert len(live(info["pids"])) == 2
    took = assert_tree_ends(info, kill_client(client))
    # Both processes die of the SIGTERM: no need to wait out the grace.
    assert took < KILL_GRACE + 2


def test_a_job_that_ignores_sigterm_is_killed_after_the_grace(tmp_path):
    client, info, _ = start_client(tmp_path, False, "ignore_term")
    killed_at = kill_client(client)
    assert_tree_ends(info, killed_at)


def test_a_worker_below_the_top_process_ends_the_job(tmp_path):
    # The top process is a shell (no worker); its Python child watches the client through
    # a pidfd and ends the whole group, the shell included.
    client, info, _ = start_client(tmp_path, False, "via_shell")
    shell = psutil.Process(info["pids"][0]).ppid()
    assert psutil.Process(shell).name() in ("sh", "dash", "bash")
    info["pids"].append(shell)
    assert_tree_ends(info, kill_client(client))
