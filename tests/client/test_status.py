"""vectors/status.json through bridge/status.py (node-client/test/status.test.js runs the
same cases), and Job.status() on a real job."""

import json
import os
import sys

import pytest

from tests.client.conftest import WAIT_S
from trainbridge import bridge
from trainbridge.bridge.status import StatusTracker

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CASES = json.load(open(os.path.join(ROOT, "vectors", "status.json"), encoding="ascii"))["cases"]


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
