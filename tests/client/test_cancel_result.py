"""A user's cancel: its reason is echoed in the report, the worker's answer is an
event, a refusal (SIGINT ignored) escalates at once instead of after the grace, and the stop
is not reported as an error. node-client/test/api.test.js checks the same for Node."""

import os
import sys
import time

import psutil

from tests.client.conftest import WAIT_S, validate_report
from trainbridge import bridge

LOOP = (
    "import time\nfrom trainbridge import worker\nfor i in range(100000):\n"
    "    worker.progress(i + 1)\n    time.sleep(0.02)\n"
)
IGNORES_SIGINT = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n" + LOOP


def cancel_after_progress(code, **cancel):
    events = []
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    job = bridge.launch([sys.executable, "-c", code], env=env, on_event=events.append)
    for event in job.events():
        if event["event"] == "message" and event["kind"] == "progress":
            break
    asked = time.monotonic()
    job.cancel(**cancel)
    report = job.wait(WAIT_S)
    took = time.monotonic() - asked
    validate_report(report)
    assert not psutil.Process().children(recursive=True)
    return report, events, took


def test_an_accepted_cancel_echoes_the_reason_and_is_not_an_error():
    report, events, took = cancel_after_progress(LOOP, reason="user pressed Stop")
    assert report["outcome"] == "cancelled"
    assert report["error"] is None and "Error" not in report["summary"], report["summary"]
    cancel = report["cancel"]
    assert cancel["reason"] == "user pressed Stop" and cancel["accepted"] is True
    assert cancel["refused"] is None and "KeyboardInterrupt" in cancel["traceback"]
    answers = [e for e in events if e["event"] == "cancel"]
    assert [(e["accepted"], e["reason"]) for e in answers] == [(True, "user pressed Stop")]
    assert report["signals_sent"] == [] and took < 5


def test_a_refused_cancel_says_why_and_sigterm_follows_at_once():
    # cancel_grace is 5 s: waiting it out would take >= 5 s; the refusal cuts it short.
    report, events, took = cancel_after_progress(IGNORES_SIGINT)
    assert report["outcome"] == "cancelled" and report["error"] is None
    cancel = report["cancel"]
    assert cancel["accepted"] is False and "SIGINT is not handled by Python" in cancel["refused"]
    assert cancel["reason"] == "cancelled by the client"
    assert report["signals_sent"][0] == "SIGTERM" and report["signal"] == "SIGTERM"
    assert [e["accepted"] for e in events if e["event"] == "cancel"] == [False]
    assert took < 3, f"{took:.2f} s: the grace was waited out"


def test_no_cancel_no_cancel_field():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    report = bridge.launch([sys.executable, "-c", "pass"], env=env).wait(WAIT_S)
    assert report["cancel"] is None


STAGED = (
    "import time\nfrom trainbridge import worker\nwith worker.stage('train'):\n"
    "    for i in range(100000):\n        worker.progress(i + 1)\n        time.sleep(0.02)\n"
)


def test_the_stages_a_cancel_ended_say_cancelled_not_error():
    """A user's cancel once painted the stage bars red ("error"), as a failure. The worker
    knows the KeyboardInterrupt is its cancel's: the stages it ends say "cancelled"."""
    report, _, _ = cancel_after_progress(STAGED, reason="user pressed Stop")
    statuses = {s["name"]: s["status"] for s in report["stages"]}
    assert statuses["train"] == "cancelled" and statuses["main"] == "cancelled", report["stages"]
    assert "error" not in statuses.values(), report["stages"]
    # A Ctrl-C of the script's own (no cancel asked) is still an error of the stage.
    raised = bridge.launch(
        [
            sys.executable,
            "-c",
            "from trainbridge import worker\nwith worker.stage('train'):\n"
            "    raise KeyboardInterrupt",
        ]
    ).wait(WAIT_S)
    assert {s["name"]: s["status"] for s in raised["stages"]}["train"] == "error"
