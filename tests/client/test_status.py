"""vectors/status.json through bridge/status.py (the one tracker: every face renders its
snapshots), and Job.status() on a real job."""

import json
import os
import sys
import time

import pytest

from tests.client.conftest import WAIT_S
from trainbridge import bridge
from trainbridge.bridge.status import StatusTracker, sent_at

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
VECTORS = json.load(open(os.path.join(ROOT, "vectors", "status.json"), encoding="ascii"))
CASES = VECTORS["cases"]


@pytest.mark.parametrize("now, wall_now, ts, expected", VECTORS["sent_at"])
def test_sent_at_vectors(now, wall_now, ts, expected):
    """A backlog read at once (a paused keeper) showed 8,310 it/s; the judge
    times progress by when the worker sent it."""
    assert sent_at(now, wall_now, ts) == expected


def test_a_wait_on_the_shared_monotonic_clock_is_taken_over_the_wall_clocks():
    """A sender on this boot stamps its monotonic clock (the envelope's mt): the wait it
    gives is used as it is, so a wall clock set 600 s forward between the send and the read
    moves nothing; bounded as the wall clock's is (never ahead, at most MAX_BACKLOG_S)."""
    assert sent_at(100.0, 1600.0, 997.5, waited=2.5) == 97.5  # the wall's 602.5 s ignored
    assert sent_at(100.0, 1000.0, 997.5, waited=-0.1) == 100.0
    assert sent_at(5000.0, 10000.0, 1.0, waited=9000.0) == 1400.0


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_status_vectors(case):
    tracker = StatusTracker(case["t0"])
    for item in case["inputs"]:
        if item[0] == "stage":
            tracker.stage(item[1])
        elif item[0] == "progress":
            tracker.progress(item[1], item[2])
        else:
            _, state, pid, now, expected = item
            # Numbers are rounded by the tracker (3 or 6 decimals), so they compare exactly.
            assert tracker.snapshot(state, pid, now) == expected, item


def test_job_status_while_it_runs_and_after():
    # Ten steps over a second: the worker sends progress at most 4 times a second (latest
    # wins), so the client sees at least two of them, which a rate needs. (Over 0.2 s, steps
    # 1-10 could arrive as one message, and the test failed 3 runs in 5.)
    code = (
        "import sys, time\nfrom trainbridge import worker\n"
        "with worker.stage('fit'):\n"
        "    for i in range(1, 11):\n"
        "        worker.progress(i, 10); time.sleep(0.1)\n"
        "    print('at 10', flush=True); time.sleep(30)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    job = bridge.launch([sys.executable, "-c", code], env=env)
    for event in job.events():
        if (
            event["event"] == "message"
            and event["kind"] == "progress"
            and event["body"]["step"] == 10
        ):
            break
    status = job.status()
    assert status["state"] == "running" and status["pid"] == job.pid
    assert status["stages"] == ["main", "fit"] and status["script_stages"] == ["fit"]
    assert status["step"] == 10 and status["total"] == 10
    assert status["rate"] and status["rate"] > 1 and status["eta_s"] == 0
    assert 0 <= status["progress_age_s"] < 10
    job.cancel(grace=0)
    job.wait(WAIT_S)
    assert job.status()["state"] == "ended"


@pytest.mark.parametrize("step_s", [0, 600], ids=["steady clock", "clock set forward"])
def test_a_backlog_read_at_once_keeps_the_jobs_rate(step_s, monkeypatch):
    """A supervisor that read nothing for a while (a SIGSTOPped keeper, a busy
    machine) then read the backlog at once; every sample had the same receive time and the
    rate said 8,310 it/s. The judge times progress by when the worker sent it. With the wall
    clock set 600 s forward while the backlog waited (as the supervisor sees it), the wait
    was read from the wall clocks and the rate was wrong until 20 new samples came (79 it/s
    for this 20 it/s job, in a run with the clock stepped 4 s); the monotonic stamp of a
    sender on the same boot says it."""
    import threading

    from trainbridge.bridge import job_messages

    class SetForward:  # the supervisor's view of the time once the clock was set
        monotonic = staticmethod(time.monotonic)

        @staticmethod
        def time():
            return time.time() + step_s

    code = (
        "import time\nfrom trainbridge import worker\n"
        "for i in range(1, 100000):\n    worker.progress(i, None); time.sleep(0.05)\n"
    )
    job = bridge.launch([sys.executable, "-c", code], zero_code=False, stall_timeout=None)
    try:
        for event in job.events(timeout=WAIT_S):
            if event["event"] == "status" and event["status"]["rate"] is not None:
                break
        paused, released = threading.Event(), []

        def read_nothing():  # on the hub's I/O thread: it reads nothing for 7 s
            paused.set()
            threading.Event().wait(7)
            released.append(time.time())

        # About 28 progress messages wait meanwhile: more than the 20 samples of the rate.
        monkeypatch.setattr(job_messages, "time", SetForward)
        job.hub.call(read_nothing)
        assert paused.wait(WAIT_S)
        rates = []
        for event in job.events(timeout=WAIT_S):
            if not released or event["event"] != "status" or event["t"] < released[0]:
                continue
            if event["t"] > released[0] + 1.0:
                break
            rates.append(event["status"]["rate"])
        assert rates and None not in rates, rates
        # 20 steps/s, never a burst's thousands; while the backlog is being read the rate
        # recovers from what the 7 s of silence looked like, and ends at the job's own.
        assert max(rates) < 40 and 10 < rates[-1] < 40, rates
    finally:
        job.cancel(grace=0)
        job.wait(WAIT_S)


def test_time_the_supervisor_could_not_read_is_not_the_workers_silence():
    """A keeper SIGSTOPped past the job's heartbeat deadline declared the job hung
    (heartbeat, "GIL held") on waking, before it read what the worker had sent meanwhile.
    Here the hub's own thread is kept busy for 5 s (as a stopped or starved supervisor is)
    with a 3 s heartbeat deadline: the job goes on, and ends as cancelled, not hung."""
    import threading

    code = (
        "import time\nfrom trainbridge import worker\n"
        "for i in range(1, 100000):\n    worker.progress(i, None); time.sleep(0.05)\n"
    )
    job = bridge.launch(
        [sys.executable, "-c", code], zero_code=False, heartbeat_timeout=3, stall_timeout=None
    )
    try:
        for event in job.events(timeout=WAIT_S):
            if event["event"] == "status" and event["status"]["step"]:
                break
        done = threading.Event()
        job.hub.call(lambda: (threading.Event().wait(5), done.set()))  # the scenario: 5 s
        assert done.wait(WAIT_S)
        resumed, hang = job.status()["elapsed_s"], None
        for event in job.events(timeout=WAIT_S):  # then 2 s more of the job's life
            if event["event"] == "hang":
                hang = event
                break
            if event["event"] == "status" and event["status"]["elapsed_s"] >= resumed + 2:
                break
    finally:
        job.cancel(grace=0)
        report = job.wait(WAIT_S)
    assert hang is None, hang
    assert report["outcome"] == "cancelled" and report["hang"] is None, report["summary"]
