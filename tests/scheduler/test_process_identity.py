"""A process is named by its pid and its start, so that a reused pid is never taken for it:
the store's keeper_start and job_start, a job's process tree. The start was psutil's
create_time, /proc/stat's btime plus the start after boot, and btime moves whenever the wall
clock is set (NTP at a laptop's wake, a VM restored from a snapshot, `date -s`): a running
job's keeper was then "gone", the job reconciled lost and its processes killed, or its
training process "crashed" (CI saw three dashboard jobs lost that way). The start is now the
start after boot, which no clock setting moves; a restart of the machine, which makes that
ambiguous, is told by its boot id. Real keepers and processes."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from trainbridge import bridge
from trainbridge.bridge import procs, scheduler
from trainbridge.bridge.store import Store

from .conftest import HERE, WAIT_S, user_env


def test_a_clock_set_forward_while_a_job_runs_changes_no_verdict(store_path, tmp_path):
    """In a mount namespace whose /proc/stat says the clock was set 5 s forward once the job
    said hello (tests/scheduler/clock_step.py): the scheduler's next looks still find its
    keeper, the keeper still answers, and the job, told to stop, succeeds."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) for a private mount namespace (CI has both)")
    stat_copy = tmp_path / "stat"
    shutil.copyfile("/proc/stat", stat_copy)
    done = subprocess.run(
        [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            sys.executable,
            os.path.join(HERE, "clock_step.py"),
            store_path,
            str(stat_copy),
        ],
        env=user_env(),
        capture_output=True,
        text=True,
        timeout=WAIT_S * 3,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["state_after_step"] == "running", seen
    assert isinstance(seen["ping"], float), seen  # a round trip, not an error
    assert seen["outcome"] == "succeeded", seen


def test_a_process_of_a_new_boot_with_a_keepers_pid_and_start_is_not_taken_for_it(store_path):
    """After a restart, a process may have the pid of a keeper of the last boot and the same
    start after boot. The store remembers its boot: the first look after the restart ends
    that job lost, saying why, and signals nothing (the process is not the job's). On the
    same boot, the same pid and start are the keeper, as before."""
    store = Store(store_path)
    stand_in = subprocess.Popen(["sleep", "120"])  # the pid and start a restart gave again
    try:
        start = procs.process_start(stand_in.pid)
        job_id = scheduler.submit(store, [sys.executable, "-c", "pass"])
        store.update(
            job_id,
            state="running",
            keeper_pid=stand_in.pid,
            keeper_start=start,
            job_pid=stand_in.pid,
            job_start=start,
        )
        assert scheduler.reconcile(store) == []  # this boot: its keeper, running
        assert store.get(job_id)["state"] == "running"
        store.set_setting("boot", "the boot before this one")
        assert scheduler.reconcile(store) == [job_id]
        row = store.get(job_id)
        assert (row["state"], row["outcome"]) == ("ended", "lost"), row
        assert f"keeper (pid {stand_in.pid}) ran before the machine restarted" in row["note"]
        assert stand_in.poll() is None, "the process that reused the job's pid was killed"
        assert scheduler.reconcile(store) == []  # told once: the store knows this boot now
        with bridge.Scheduler(store=store_path, tick=None) as s:  # and so does every process
            assert s.get(job_id)["outcome"] == "lost"
    finally:
        stand_in.kill()
        stand_in.wait()
        store.close()
