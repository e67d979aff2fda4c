"""bridge.Scheduler with real keepers and real training processes: a job runs under its
keeper and its report lands in the store; slots hold jobs back and the queue moves without
a running Scheduler; GPUs are assigned through CUDA_VISIBLE_DEVICES; failed attempts are
restarted with backoff and each attempt's report is kept; cancel works queued or running;
forget removes a job and its files."""

import os
import sys
import threading
import time

import pytest

from trainbridge import bridge
from trainbridge.bridge import procs, scheduler
from trainbridge.bridge.store import Store

from .conftest import WAIT_S, child, leftovers, wait_for


def sched(store_path, **slots):
    return bridge.Scheduler(store=store_path, slots={"jobs": 2, "gpus": [], **slots}, tick=0.1)


def test_a_submitted_job_runs_under_its_keeper_and_its_report_lands_in_the_store(store_path):
    with sched(store_path) as s:
        t0 = time.monotonic()
        job_id = s.submit(child("steps", 3), env={"PATH": os.environ["PATH"], "SECRET": "x"})
        job = s.attach(job_id)
        kinds = [e["event"] for e in job.events(timeout=WAIT_S)]
        report = job.report
        assert report.outcome == "succeeded" and report.exit_code == 0
        assert report.log_tail == ["step 1", "step 2", "step 3"]
        status = job.status()
        assert (status["state"], status["step"], status["total"], status["stages"]) == (
            "ended",
            3,
            3,
            [],
        )
        assert kinds[:2] == ["spawn", "state"] and kinds[-1] == "end" and "output" in kinds
        row = s.get(job_id)
        assert (row["state"], row["outcome"], row["exit_code"], row["signal"]) == (
            "ended",
            "succeeded",
            0,
            None,
        )
        assert row["env_names"] == ["PATH", "SECRET"]  # names only
        assert "x" not in open(store_path, "rb").read().decode("latin1").split("SECRET")[-1][:3]
        assert not os.path.exists(os.path.join(row["dir"], procs.ENV_FILE))
        assert row["stage"] == "train"
        assert (row["progress"]["step"], row["progress"]["total"]) == (3, 3), row["progress"]
        assert [a["outcome"] for a in row["attempts"]] == ["succeeded"]
        assert row["report"]["summary"] == report["summary"]
        logged = open(row["log_path"]).read().splitlines()
        assert logged[:3] == ["step 1", "step 2", "step 3"]
        assert logged[-1].startswith("[trainbridge] Job succeeded")
        assert time.monotonic() - t0 < WAIT_S


def test_slots_hold_jobs_back_and_the_queue_moves_without_a_scheduler(store_path):
    # jobs=1: the second waits; the first's keeper starts it after the Scheduler is gone.
    s = bridge.Scheduler(store=store_path, slots={"jobs": 1, "gpus": []}, tick=None)
    first = s.submit(child("steps", 5))
    second = s.submit(child("steps", 1))
    assert s.get(first)["state"] in ("starting", "running")
    assert s.get(second)["state"] == "queued"
    s.close()
    store = Store(store_path)
    try:
        row = wait_for(
            lambda: (lambda r: r if r["state"] == "ended" else None)(store.get(second)),
            what="the queued job to run and end",
        )
        assert row["outcome"] == "succeeded"
        assert store.get(first)["ended_at"] <= row["started_at"]
    finally:
        store.close()


def test_priority_orders_the_queue(store_path):
    s = bridge.Scheduler(store=store_path, slots={"jobs": 1, "gpus": []}, tick=None)
    try:
        blocker = s.submit(child("steps", 3))
        low = s.submit(child("steps", 1), priority=0)
        high = s.submit(child("steps", 1), priority=5)
        job = s.attach(low)
        assert job.wait(WAIT_S).outcome == "succeeded"
        rows = {r["id"]: r for r in s.jobs()}
        assert rows[blocker]["ended_at"] <= rows[high]["started_at"]
        assert rows[high]["started_at"] < rows[low]["started_at"]
    finally:
        s.close()


def test_gpus_are_assigned_through_cuda_visible_devices(store_path):
    with sched(store_path, gpus=[0, 1, 2]) as s:
        two = s.attach(s.submit(child("gpus"), resources={"gpus": 2}))
        none = s.attach(s.submit(child("gpus")))
        assert two.wait(WAIT_S).log_tail == ["CUDA_VISIBLE_DEVICES='0,1'"]
        assert none.wait(WAIT_S).log_tail == ["CUDA_VISIBLE_DEVICES=''"]
        with pytest.raises(ValueError, match="asks for 4 GPU"):
            s.submit(child("gpus"), resources={"gpus": 4})


def test_a_gpu_job_waits_for_its_gpus(store_path):
    with sched(store_path, gpus=[7], jobs=4) as s:
        first = s.submit(child("steps", 3), resources={"gpus": 1})
        second = s.submit(child("gpus"), resources={"gpus": 1})
        assert s.get(second)["state"] == "queued"
        report = s.attach(second).wait(WAIT_S)
        assert report.log_tail == ["CUDA_VISIBLE_DEVICES='7'"]
        assert s.get(first)["ended_at"] <= s.get(second)["started_at"]


def test_discover_gpus_from_nvml_or_cuda_visible_devices():
    class FakeNvml:
        def nvmlInit(self):
            pass

        def nvmlShutdown(self):
            pass

        def nvmlDeviceGetCount(self):
            return 3

    class NoDriver(FakeNvml):
        def nvmlInit(self):
            raise RuntimeError("NVML Shared Library Not Found")

    assert scheduler.discover_gpus({}, FakeNvml()) == [0, 1, 2]
    assert scheduler.discover_gpus({}, NoDriver()) == []
    assert scheduler.discover_gpus({"CUDA_VISIBLE_DEVICES": "2,3"}, FakeNvml()) == [2, 3]
    assert scheduler.discover_gpus({"CUDA_VISIBLE_DEVICES": ""}, FakeNvml()) == []


def test_a_failed_attempt_is_restarted_with_backoff_and_every_report_kept(store_path, tmp_path):
    with sched(store_path) as s:
        marker = tmp_path / "tried"
        job_id = s.submit(child("flaky", marker), max_restarts=2, restart_backoff=0.3)
        job = s.attach(job_id)
        events = list(job.events(timeout=WAIT_S))
        assert job.report.outcome == "succeeded"
        attempt = [e for e in events if e["event"] == "attempt"]
        assert [(e["attempt"], e["outcome"], e["restart_in"]) for e in attempt] == [
            (1, "failed", 0.3)
        ]
        row = s.get(job_id)
        assert [(a["attempt"], a["outcome"], a["exit_code"]) for a in row["attempts"]] == [
            (1, "failed", 3),
            (2, "succeeded", 0),
        ]
        gap = row["attempts"][1]["started_at"] - row["attempts"][0]["ended_at"]
        assert gap >= 0.3
        assert row["attempt"] == 2


def test_restarts_stop_at_max_restarts(store_path):
    with sched(store_path) as s:
        job_id = s.submit(child("exit", 4), max_restarts=1, restart_backoff=0.05)
        report = s.attach(job_id).wait(WAIT_S)
        assert (report.outcome, report.exit_code) == ("failed", 4)
        row = s.get(job_id)
        assert [a["exit_code"] for a in row["attempts"]] == [4, 4]
        assert (row["outcome"], row["exit_code"]) == ("failed", 4)


def test_cancel_a_queued_job_and_a_running_one(store_path):
    with sched(store_path, jobs=1) as s:
        running = s.submit(child("forever"))
        queued = s.submit(child("steps", 1))
        job = s.attach(running)
        wait_for(lambda: job.state == "running", what="the job to run")
        assert s.cancel(queued) is True
        assert s.get(queued)["outcome"] == "cancelled"
        assert s.attach(queued).wait(WAIT_S).outcome == "cancelled"
        t0 = time.monotonic()
        assert s.cancel(running) is True
        report = job.wait(WAIT_S)
        assert report.outcome == "cancelled"
        assert "through the job store" in report["cancel"]["reason"]
        assert time.monotonic() - t0 < 10
        assert leftovers(running) == []
        assert s.get(running)["outcome"] == "cancelled"
        assert s.cancel(running) is False  # already ended


def test_the_keeper_applies_the_deadlines_and_keeps_the_hang_evidence(store_path):
    with sched(store_path) as s:
        job_id = s.submit(child("stall"), timeouts={"stall_timeout": 1.0, "kill_grace": 1.0})
        job = s.attach(job_id)
        kinds = [e["event"] for e in job.events(timeout=WAIT_S)]
        assert "hang" in kinds
        row = s.get(job_id)
        assert row["outcome"] == "hung" and row["config"] == {
            "stall_timeout": 1.0,
            "kill_grace": 1.0,
        }
        report = row["report"]
        assert report["hang"]["reason"] == "stall"
        assert report["stacks"] and "child.py" in report["stacks"]
        assert report["diagnosis"] is not None
        assert leftovers(job_id) == []


def test_dump_stacks_through_the_keeper(store_path):
    with sched(store_path) as s:
        job = s.attach(s.submit(child("forever")))
        # In its loop, not still in `import worker` (whose frames are importlib's).
        wait_for(lambda: job.status()["step"], what="the job's first step")
        stacks = job.dump_stacks(timeout=5)
        assert stacks and "child.py" in stacks
        job.cancel()
        assert job.wait(WAIT_S).outcome == "cancelled"


def test_dump_stacks_through_the_keeper_waits_as_long_as_asked(store_path):
    """The keeper asked the worker with a 2 s timeout of its own, whatever the asker gave:
    a worker that answered after 2 s (its beacon waiting for the GIL on a busy machine) was
    "no answer", and the dashboard said "did not answer in time". The asker's timeout is
    the keeper's, and a timeout past the keeper's 60 s is refused in words."""
    with sched(store_path) as s:
        job = s.attach(s.submit(child("hold", "4")))
        holding = threading.Event()
        job.add_listener(
            lambda e: e["event"] == "output" and e["text"] == "holding the GIL" and holding.set()
        )
        wait_for(lambda: job.status()["step"], what="the job's first step")
        job.send("hold")
        assert holding.wait(WAIT_S), "the script never said it holds the GIL"
        asked = time.monotonic()
        stacks = job.dump_stacks(timeout=20)
        answered = time.monotonic() - asked
        assert stacks and "child.py" in stacks, f"no stacks after {answered:.1f} s"
        assert answered > 2.0, f"answered in {answered:.1f} s while the GIL was held for 4"
        with pytest.raises(ValueError, match="dump_stacks: timeout must be"):
            job.dump_stacks(timeout=61)
        job.send("stop")
        assert job.wait(WAIT_S).outcome == "succeeded"


def test_forget_removes_the_row_and_the_files_and_only_when_ended(store_path):
    with sched(store_path) as s:
        job_id = s.submit(child("steps", 1))
        assert s.forget(job_id) is False or s.get(job_id) is None
        report = s.attach(job_id).wait(WAIT_S)
        assert report.outcome == "succeeded"
        job_dir = s.get(job_id)["dir"]
        assert s.forget(job_id) is True
        assert s.get(job_id) is None and not os.path.exists(job_dir)


def test_retention_keeps_the_newest_ended_jobs(store_path):
    s = bridge.Scheduler(store=store_path, slots={"jobs": 1, "gpus": []}, tick=None, keep_ended=2)
    try:
        ids = [s.submit(child("exit", 0)) for _ in range(4)]
        s.attach(ids[-1]).wait(WAIT_S)
        s.tick()
        assert [r["id"] for r in s.jobs()] == ids[:-3:-1]
    finally:
        s.close()


def test_retention_names_a_job_before_its_row_goes(store_path, monkeypatch):
    """A watch that reads between a row's removal and the `retained` setting called a
    retained job "forgotten" (hunt on 0c7cf0d, under load): each id is named first."""
    from trainbridge.bridge import watch

    s = bridge.Scheduler(store=store_path, slots={"jobs": 1, "gpus": []}, tick=None)
    try:
        ids = [s.submit(child("exit", 0)) for _ in range(3)]
        s.attach(ids[-1]).wait(WAIT_S)
        s.tick()
        real, named = scheduler.forget, {}

        def forget(store, job_id):
            named[job_id] = job_id in (store.setting(watch.RETAINED) or {}).get("last", [])
            return real(store, job_id)

        monkeypatch.setattr(scheduler, "forget", forget)
        assert scheduler.retain(s._store, 1) == 2
        assert named == {ids[0]: True, ids[1]: True}, "named before its row went"
        assert s._store.setting(watch.RETAINED)["count"] == 2
    finally:
        s.close()


def test_bad_submissions_say_what_is_wrong(store_path):
    with sched(store_path) as s:
        with pytest.raises(ValueError, match="non-empty list"):
            s.submit("python train.py")
        with pytest.raises(ValueError, match="unknown timeouts"):
            s.submit(child("steps", 1), timeouts={"stall": 3})
        with pytest.raises(ValueError, match="gpus"):
            s.submit(child("steps", 1), resources={"gpus": -1})
        # The deadline values and the environment get launch()'s own check, before a row exists.
        with pytest.raises(ValueError, match="startup_timeout"):
            s.submit(child("steps", 1), timeouts={"startup_timeout": "30"})
        with pytest.raises(ValueError, match="stall_timeout"):
            s.submit(child("steps", 1), timeouts={"stall_timeout": float("nan")})
        with pytest.raises(ValueError, match="env"):
            s.submit(child("steps", 1), env={"A": None})
        # A misspelt option is refused as Python refuses one, and the known ones are listed.
        with pytest.raises(TypeError, match=r"\['timeout'\]; known: \['cwd', 'env', "):
            s.submit(child("steps", 1), timeout={"stall_timeout": 3})
        with pytest.raises(ValueError, match="max_restarts and restart_backoff"):
            s.submit(child("steps", 1), max_restarts=-1)
        assert s.jobs() == []


def test_a_command_that_cannot_start_ends_failed_with_the_reason(store_path):
    with sched(store_path) as s:
        job_id = s.submit(["/nonexistent/python", "x.py"])
        report = s.attach(job_id).wait(WAIT_S)
        assert report["outcome"] == "failed"
        assert "could not start '/nonexistent/python'" in report["note"]
        assert s.get(job_id)["outcome"] == "failed"


WORKER_LOADED = "import sys; print('worker' if 'trainbridge.worker' in sys.modules else 'none')"


def test_zero_code_off_leaves_the_worker_out_as_launch_does(store_path):
    """submit(zero_code=False) is launch()'s zero_code=False: the keeper does not load the
    worker into the job's Python processes (a script that imports it itself still says
    hello). The row's config says so; anything but a bool is refused at submit."""
    with sched(store_path) as s:
        on = s.submit([sys.executable, "-c", WORKER_LOADED])
        off = s.submit([sys.executable, "-c", WORKER_LOADED], zero_code=False)
        assert s.attach(on).wait(WAIT_S)["log_tail"] == ["worker"]
        report = s.attach(off).wait(WAIT_S)
        assert report["log_tail"] == ["none"] and report["outcome"] == "succeeded"
        assert s.get(off)["config"] == {"zero_code": False}
        assert s.get(on)["config"] == {}
        with pytest.raises(ValueError, match="zero_code must be True or False"):
            s.submit([sys.executable, "-c", "pass"], zero_code="no")


def test_a_job_keeps_its_name_tags_meta_and_its_own_log_path(store_path, tmp_path):
    """A GUI once had to keep its own id mapping (no name, tags or metadata on submit)
    and the log lived only in the store's folder (ai-toolkit writes training/<name>/log.txt).
    They go in the row, jobs(tag=) lists by tag, and the output log is written where asked."""
    log = tmp_path / "training" / "lora-1" / "log.txt"
    log.parent.mkdir(parents=True)
    with sched(store_path) as s:
        job_id = s.submit(
            child("steps", 2),
            name="lora-1",
            tags=["lora", "sdxl", "lora"],
            meta={"gui_id": 7, "dataset": "cats"},
            log_path=str(log),
        )
        other = s.submit(child("steps", 1), tags=["other"])
        assert s.attach(job_id).wait(WAIT_S)["outcome"] == "succeeded"
        assert s.attach(other).wait(WAIT_S)["outcome"] == "succeeded"
        row = s.get(job_id)
        assert (row["name"], row["tags"], row["meta"]) == (
            "lora-1",
            ["lora", "sdxl"],
            {"gui_id": 7, "dataset": "cats"},
        )
        assert row["log_path"] == str(log)
        assert log.read_text().splitlines()[:2] == ["step 1", "step 2"]
        assert [r["id"] for r in s.jobs(tag="sdxl")] == [job_id]
        assert [r["id"] for r in s.jobs(tag="other")] == [other]
        assert s.jobs(tag="none") == [] and len(s.jobs()) == 2
        for bad, words in (
            ({"name": ""}, "name must be"),
            ({"name": "x" * 201}, "name must be"),
            ({"tags": "lora"}, "tags must be a list"),
            ({"tags": ["ok", 3]}, "tags must be a list"),
            ({"meta": ["not", "a", "dict"]}, "meta must be a dict"),
            ({"meta": {"t": object()}}, "meta must be JSON"),
            ({"meta": {"big": "x" * 70000}}, "at most 65536"),
            ({"log_path": str(tmp_path / "nowhere" / "log.txt")}, "does not exist"),
        ):
            with pytest.raises(ValueError, match=words):
                s.submit(child("steps", 1), **bad)
        assert len(s.jobs()) == 2  # nothing stored for a refused submit


def test_a_paused_queue_starts_nothing_until_resumed_and_a_job_reruns_with_its_spec(store_path):
    """There was no queue pause and no re-run. A paused queue starts no queued job, neither
    at submit, nor at a tick, nor when a keeper's job ends (each reads the store's setting);
    resume starts them. rerun queues a new job with the old one's spec."""
    with sched(store_path, jobs=2) as s:
        first = s.submit(child("steps", 1), name="first", tags=["t"], meta={"n": 1})
        assert s.attach(first).wait(WAIT_S)["outcome"] == "succeeded"
        running = s.submit(child("steps", 3))
        s.pause()
        assert s.paused
        held = s.submit(child("steps", 1))
        again = s.rerun(first)
        # The running job's keeper runs a scheduling pass at its end: it starts nothing.
        assert s.attach(running).wait(WAIT_S)["outcome"] == "succeeded"
        row = s.get(running)
        wait_for(
            lambda: not procs.same_process(row["keeper_pid"], row["keeper_start"]),
            what="the running job's keeper to exit, after its scheduling pass",
        )
        s.tick()
        other = bridge.Scheduler(store=store_path, tick=None)  # another process's view
        try:
            assert other.paused and other.get(held)["state"] == "queued"
        finally:
            other.close()
        assert s.get(again)["state"] == "queued"
        s.resume()
        assert not s.paused
        assert s.attach(held).wait(WAIT_S)["outcome"] == "succeeded"
        assert s.attach(again).wait(WAIT_S)["outcome"] == "succeeded"
        old, new = s.get(first), s.get(again)
        for key in ("command", "cwd", "config", "name", "tags", "meta", "priority"):
            assert new[key] == old[key], key
        assert new["id"] != old["id"] and new["log_path"] != old["log_path"]
        with pytest.raises(KeyError):
            s.rerun("j-nope")


def test_a_failing_tick_is_said_once_and_its_recovery_too(store_path, capfd):
    """A tick that fails (a full disk: reconcile writes) printed "tick failed" twice a
    second for as long as it lasted. Now each cause is said once, `tick_error` holds it, and
    the recovery is said; the ticks go on."""
    import threading

    from trainbridge.bridge import store_errors

    calls, enough = [], threading.Event()

    class Flaky(bridge.Scheduler):
        def tick(self):
            calls.append(1)
            if len(calls) >= 12:
                enough.set()
            if 2 <= len(calls) <= 7:  # (call 1: the constructor's)
                raise store_errors.StoreFull("the disk holding the job store is full", "x")

    s = Flaky(store=store_path, slots={"jobs": 1, "gpus": []}, tick=0.01)
    try:
        assert enough.wait(WAIT_S)
    finally:
        s.close()
    err = capfd.readouterr().err
    assert err.count("tick failed") == 1, err
    assert "StoreFull: the disk holding the job store is full; trying again" in err, err
    assert err.count("ticks work again") == 1 and s.tick_error is None, err


def test_without_nvidia_ml_py_the_gpus_are_the_ones_nvidia_smi_lists(tmp_path, monkeypatch):
    smi = tmp_path / "nvidia-smi"
    smi.write_text(
        f"#!{sys.executable}\nimport sys\n"
        "assert sys.argv[1] == '--query-gpu=index', sys.argv\nprint('0'); print('1')\n"
    )
    smi.chmod(0o755)
    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` raises ImportError
    assert scheduler.discover_gpus({"TRAINBRIDGE_NVIDIA_SMI": str(smi)}) == [0, 1]
    gone = str(tmp_path / "no-such-program")
    assert scheduler.discover_gpus({"TRAINBRIDGE_NVIDIA_SMI": gone}) == []
