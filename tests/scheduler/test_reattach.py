"""Reattach, with real processes: SIGKILL the process that owns the
Scheduler mid-job, and a new Scheduler on the same store sees the job running, attaches
within 1 s with live stages, progress and output, and finds the right end in the store.
SIGKILL a keeper, and the store says the job is lost, and its training process is gone."""

import os
import signal
import subprocess
import sys
import time

import pytest

from trainbridge import bridge
from trainbridge.bridge import procs

from .conftest import GUI, WAIT_S, child, leftovers, runtime_dir_left, user_env, wait_for


def start_gui(store_path, cmd):
    gui = subprocess.Popen(
        [sys.executable, GUI, store_path, "--", *cmd],
        stdout=subprocess.PIPE,
        text=True,
        env=user_env(),
    )
    job_id = gui.stdout.readline().strip()
    assert job_id.startswith("j-"), job_id
    # The GUI follows the job: once it printed output, the job is running mid-way.
    wait_for(lambda: gui.stdout.readline().strip() == "output", what="the GUI to see output")
    return gui, job_id


@pytest.mark.parametrize(
    "mode, outcome, exit_code, sig",
    [
        (("steps", 25), "succeeded", 0, None),
        (("die", 25, "SIGSEGV"), "crashed", None, "SIGSEGV"),
    ],
)
def test_kill_the_gui_mid_job_and_a_new_scheduler_reattaches(
    store_path, mode, outcome, exit_code, sig
):
    gui, job_id = start_gui(store_path, child(*mode))
    gui.kill()  # SIGKILL: no cleanup of any kind
    gui.wait()
    gui.stdout.close()
    t0 = time.monotonic()
    s = bridge.Scheduler(store=store_path, tick=0.1)
    try:
        row = s.get(job_id)
        assert row["state"] in ("starting", "running")  # the row's state trails by ms
        assert procs.same_process(row["keeper_pid"], row["keeper_start"])
        job = s.attach(job_id)
        first = job.next_event(timeout=1.0)
        attached_s = time.monotonic() - t0
        assert first is not None and attached_s < 1.0, attached_s
        events = [first] + list(job.events(timeout=WAIT_S))
        # The log so far and then live events: stage, progress and output, in order.
        steps = [
            e["body"]["step"] for e in events if e["event"] == "message" and e["kind"] == "progress"
        ]
        # Progress is coalesced by the worker (latest wins, at most 4 a second): increasing,
        # up to the last the worker sent; 25 steps 0.1 s apart give about 10. A clean exit's
        # bye carries the last step; a crash 0.1 s after it can beat the beacon to it on a
        # loaded machine (seen once in 10 runs beside two busy loops), and then the report
        # says the step the GUI saw.
        assert steps == sorted(set(steps)) and len(steps) >= 6, steps
        lines = [e["text"] for e in events if e["event"] == "output"]
        assert lines == [f"step {i}" for i in range(1, 26)]
        assert any(
            e["event"] == "message" and e["kind"] == "stage" and e["body"]["name"] == "train"
            for e in events
        )
        live = [e for e in events if e["t"] > time.time() - (time.monotonic() - t0)]
        assert live, "no event arrived after the attach"
        report = job.report
        assert (report["outcome"], report["exit_code"], report["signal"]) == (
            outcome,
            exit_code,
            sig,
        )
        assert report["progress"]["step"] == steps[-1]
        if outcome == "succeeded":
            assert steps[-1] == 25
        row = wait_for(
            lambda: (lambda r: r if r["state"] == "ended" else None)(s.get(job_id)),
            what="the row to end",
        )
        assert (row["outcome"], row["exit_code"], row["signal"]) == (outcome, exit_code, sig)
        assert row["report"]["outcome"] == outcome
        assert leftovers(job_id) == []
        wait_for(
            lambda: not procs.same_process(row["keeper_pid"], row["keeper_start"]),
            timeout=5,
            what="the keeper to exit",
        )
    finally:
        s.close()


def test_kill_a_keeper_and_the_store_says_lost_and_nothing_runs_on(store_path):
    s = bridge.Scheduler(store=store_path, slots={"jobs": 2, "gpus": []}, tick=0.1)
    try:
        job_id = s.submit(child("forever"))
        job = s.attach(job_id)
        wait_for(lambda: job.state == "running", what="the job to run")
        row = wait_for(
            lambda: (lambda r: r if r["job_pid"] and r["progress"] else None)(s.get(job_id)),
            what="the keeper to record the job's pid and progress",
        )
        t0 = time.monotonic()
        os.kill(row["keeper_pid"], signal.SIGKILL)
        report = job.wait(WAIT_S)
        known_s = time.monotonic() - t0
        assert report["outcome"] == "lost"
        assert f"keeper (pid {row['keeper_pid']}) is gone" in report["note"]
        # In words, as a GUI shows it: no Python repr of the row's progress.
        assert "Last known: state running, stage 'train', step " in report["note"], report["note"]
        assert "{" not in report["note"], report["note"]
        assert known_s < 3.0, known_s
        ended = s.get(job_id)
        assert (ended["state"], ended["outcome"]) == ("ended", "lost")
        assert ended["stage"] == "train" and ended["progress"]["step"] >= 1
        wait_for(lambda: leftovers(job_id) == [], timeout=5, what="the job's processes to end")
        assert not procs.same_process(row["job_pid"], row["job_start"])
        assert row["endpoint"].startswith("ipc://") and runtime_dir_left(row) is None
    finally:
        s.close()


def test_a_keeper_killed_before_anyone_reconciles_takes_its_job_with_it(store_path):
    # No Scheduler runs: the worker in the job sees its keeper gone and ends the tree.
    s = bridge.Scheduler(store=store_path, slots={"jobs": 2, "gpus": []}, tick=None)
    job_id = s.submit(child("forever"))
    row = wait_for(
        lambda: (lambda r: r if r["job_pid"] else None)(s.get(job_id)), what="the job's pid"
    )
    s.close()
    os.kill(row["keeper_pid"], signal.SIGKILL)
    wait_for(lambda: leftovers(job_id) == [], timeout=10, what="the job's processes to end")
    assert runtime_dir_left(row)  # nobody has cleaned up after the keeper yet
    s = bridge.Scheduler(store=store_path, tick=None)  # a later start reconciles
    try:
        assert s.get(job_id)["outcome"] == "lost"
        assert runtime_dir_left(row) is None
    finally:
        s.close()
