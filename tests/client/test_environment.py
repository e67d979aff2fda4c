"""Each report says what the job ran on (report.environment, from rank 0's hello), and
the child's environment tells the worker whom to watch (TRAINBRIDGE_CLIENT_PID) or that
the job is detached."""

import os
import sys

import pytest

from tests.client.conftest import ROOT, WAIT_S, validate_report
from trainbridge import bridge
from trainbridge.bridge import report as reports


def test_the_report_says_what_the_job_ran_on(run):
    _, report = run(
        """
        from trainbridge import worker
        wait_go()
    """,
        env={"CUDA_VISIBLE_DEVICES": "0"},
    )
    env = report["environment"]
    from importlib import metadata

    assert env["python"] == sys.version.split()[0]
    assert env["python_executable"] == sys.executable
    assert env["venv"] == (sys.prefix != sys.base_prefix)
    assert env["torch"] == metadata.version("torch")
    assert env["cuda_visible_devices"] == "0"
    assert env["cpu_count"] == os.cpu_count()
    assert env["host"] == os.uname().nodename
    assert env["platform"].startswith(os.uname().sysname + "-")
    # The client's settings: UTF-8 output, not held back in blocks.
    assert (env["stdout_encoding"], env["utf8_mode"], env["stdout_buffered"]) == (
        "utf-8",
        True,
        False,
    )
    from trainbridge.worker import facts

    driver = facts.nvidia_driver()
    assert env["gpu_driver"] == (driver and driver["driver"])


def test_a_command_without_a_worker_has_no_environment():
    job = bridge.launch(["sh", "-c", "echo plain"], cwd=ROOT, startup_timeout=None)
    report = job.wait(WAIT_S)
    assert report["outcome"] == "succeeded"
    assert report["environment"] is None
    validate_report(report)


def test_environment_takes_the_lowest_rank_and_tolerates_old_workers():
    old = {"pid": 7, "host": "h", "python": {"version": "3.10.1"}, "packages": {}, "env": {}}
    rank1 = dict(old, host="other")
    env = reports.environment({1: rank1, 0: old})
    assert env["host"] == "h" and env["python"] == "3.10.1"
    assert env["gpu_driver"] is None and env["stdout_buffered"] is None and env["venv"] is None


def test_the_child_is_told_whom_to_watch():
    job = bridge.launch(
        [sys.executable, "-c", "pass"],
        cwd=ROOT,
        kill_grace=2.5,
        env={**os.environ, "TRAINBRIDGE_DETACHED": "1"},
    )
    assert job.env["TRAINBRIDGE_CLIENT_PID"] == str(os.getpid())
    assert job.env["TRAINBRIDGE_KILL_GRACE_S"] == "2.5"
    assert "TRAINBRIDGE_DETACHED" not in job.env  # an outer job's setting does not leak in
    assert job.wait(WAIT_S)["outcome"] == "succeeded"
    # A job cannot outlive its client through launch(): the Scheduler's keeper does that.
    with pytest.raises(TypeError, match=r"detached=True\) was removed.*bridge.Scheduler"):
        bridge.launch([sys.executable, "-c", "pass"], cwd=ROOT, detached=True)
