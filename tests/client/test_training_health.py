"""Training health end to end (docs/CLIENT.md "Training health"): a real child whose loss
becomes NaN. The supervisor says it once, in a `health` event and the report; the job goes on
unless stop_on_nan names the metric, and then it is cancelled and says why. Every JSON face
(the report file, `run --json`, the feed) writes NaN in strict JSON that a Node GUI can parse.
The rule itself is pinned by vectors/health.json (test_health.py)."""

import json
import math
import os
import re
import subprocess
import sys

import pytest

from trainbridge import bridge
from trainbridge.bridge.report_text import to_json

from .conftest import WAIT_S, assert_tree_gone, opens_gate, validate_report

# Steps 1-5 finite; the gate opens once the supervisor has seen step 5, so step 6 is the first
# report of NaN and follows the last finite one ("at step 6"). The second gate opens on the
# health event; then NaN again (said once only) and a finite loss, and the script ends 0.
DIVERGES = """
    import threading
    from trainbridge import worker
    for step in range(1, 6):
        worker.progress(step, 8, loss=1.0 / step)
    wait_go()
    worker.progress(6, 8, loss=float("nan"), lr=0.5)
    _os.environ["TB_TEST_GO"] += ".health"
    wait_go()
    if _os.environ.get("TB_HOLD"):
        threading.Event().wait(120)  # only a cancel ends it
    worker.progress(7, 8, loss=float("inf"))
    worker.progress(8, 8, loss=0.5)
"""


def _gates(tmp_path):
    go = str(tmp_path / "go")
    seen = opens_gate(go, lambda e: e["event"] == "status" and e["status"].get("step") == 5)
    said = opens_gate(go + ".health", lambda e: e["event"] == "health")
    return go, lambda event: (seen(event), said(event))


def _strict(text):
    """Parsed as strict JSON: a bare NaN or Infinity token fails the test."""
    return json.loads(text, parse_constant=lambda token: pytest.fail(f"bare {token}: {text}"))


def test_a_loss_that_becomes_nan_is_said_once_and_the_job_goes_on(script, tmp_path):
    go, on_event = _gates(tmp_path)
    events = []
    job = bridge.launch(
        [sys.executable, script(DIVERGES)],
        env=dict(os.environ, TB_TEST_GO=go),
        on_event=lambda e: (events.append(e), on_event(e)),
    )
    report = job.wait(WAIT_S)
    assert report is not None and report.outcome == "succeeded"
    said = [e for e in events if e["event"] == "health"]
    assert len(said) == 1, said  # inf at step 7 is the same metric: said once
    entry = said[0]
    assert entry["metric"] == "loss" and math.isnan(entry["value"]) and entry["step"] == 6
    assert entry["last_finite"] == 0.2 and entry["last_finite_step"] == 5
    assert entry["text"] == "loss became NaN at step 6 (it was 0.2 at step 5)"
    assert entry["sender"]["lead"] is True
    assert [h["text"] for h in report["health"]] == [entry["text"]]
    assert "Training health: loss became NaN at step 6 (it was 0.2 at step 5)." in report.summary
    assert report["progress"]["metrics"]["loss"] == 0.5
    assert report["cancel"] is None
    validate_report(report)
    text = to_json(report)
    assert _strict(text)["health"][0]["value"] == "NaN"
    assert_tree_gone(job)


ONE_NAN_STEP = """
    import time
    from trainbridge import worker
    for step in range(1, 3001):
        worker.progress(step, 3000, loss=float("nan") if step == 1500 else 1.0 / step)
        time.sleep(PAUSE)
"""


def test_a_nan_of_one_step_between_two_sends_is_said(script):
    """3,000 steps in about 3 s: the worker sends the latest value a few times a second,
    so the one NaN step was never seen; every call's metrics now ride along (`points`)."""
    # (1 ms a step: a worker keeps 1,024 calls between two sends, so its beacon may wait a
    # whole second for a CPU on a loaded machine before a call's metrics are only counted)
    job = bridge.launch([sys.executable, script(ONE_NAN_STEP.replace("PAUSE", "0.001"))])
    report = job.wait(WAIT_S)
    assert report is not None and report.outcome == "succeeded", report.summary
    [entry] = report["health"]
    assert entry["metric"] == "loss" and entry["step"] == 1500, entry
    # "by step" when the steps just before were thinned away (a message keeps 512 points)
    assert re.match(r"loss became NaN (at|by) step 1500 \(", entry["text"]), entry["text"]
    assert report["progress"] == {"step": 3000, "total": 3000, "metrics": {"loss": 1 / 3000}}
    assert_tree_gone(job)


def test_more_calls_between_two_sends_than_are_kept_are_counted_and_said(script):
    job = bridge.launch(
        [
            sys.executable,
            script(
                ONE_NAN_STEP.replace("3001", "30001")
                .replace("3000,", "30000,")
                .replace("time.sleep(PAUSE)", "pass  # as fast as it goes")
            ),
        ]
    )
    report = job.wait(WAIT_S)
    assert report is not None and report.outcome == "succeeded", report.summary
    assert report["dropped"]["points"] > 0, report["dropped"]
    assert "progress() calls were not kept for the curves" in report.summary, report.summary
    assert report["progress"]["step"] == 30000  # the latest value is never one of them
    assert_tree_gone(job)


def test_stop_on_nan_cancels_the_job_and_says_why(script, tmp_path):
    go, on_event = _gates(tmp_path)
    job = bridge.launch(
        [sys.executable, script(DIVERGES)],
        env=dict(os.environ, TB_TEST_GO=go, TB_HOLD="1"),
        on_event=on_event,
        stop_on_nan=["acc", "loss"],
    )
    report = job.wait(WAIT_S)
    assert report is not None and report.outcome == "cancelled"
    assert report["cancel"]["by"] == "health"
    assert report["cancel"]["reason"] == (
        "loss became NaN at step 6 (it was 0.2 at step 5): stopped, as stop_on_nan asks"
    )
    assert report["health"][0]["metric"] == "loss"
    validate_report(report)
    assert_tree_gone(job)


@pytest.mark.parametrize("bad", [3, [""], ["loss", 1], {"loss": True}])
def test_a_bad_stop_on_nan_is_refused_before_anything_starts(bad):
    with pytest.raises(bridge.LaunchError, match="stop_on_nan must be a metric name"):
        bridge.launch([sys.executable, "-c", "pass"], stop_on_nan=bad)


def test_run_json_and_the_report_file_are_strict_json(script, tmp_path):
    """`trainbridge run --json --stop-on-nan loss`: every line parses as strict JSON, the health
    event and the end say NaN as "NaN", and the job is cancelled by the flag."""
    path = script("""
        import threading
        from trainbridge import worker
        worker.progress(1, 2, loss=2.5)
        worker.progress(2, 2, loss=float("nan"))
        threading.Event().wait(120)  # only a cancel ends it
    """)
    out = tmp_path / "report.json"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainbridge",
            "run",
            "--json",
            "--report",
            str(out),
            "--stop-on-nan",
            "loss",
            "--",
            sys.executable,
            path,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=WAIT_S * 2,
    )
    lines = [_strict(line) for line in done.stdout.splitlines()]
    health = [e for e in lines if e["event"] == "health"]
    assert len(health) == 1 and health[0]["value"] == "NaN", done.stdout[-2000:]
    assert health[0]["metric"] == "loss" and "NaN" in health[0]["text"]  # step 1 may be coalesced
    end = lines[-1]
    assert end["event"] == "end" and end["report"]["outcome"] == "cancelled"
    assert end["report"]["progress"]["metrics"]["loss"] == "NaN"
    assert _strict(out.read_text(encoding="ascii"))["cancel"]["by"] == "health"


def test_the_plain_cli_says_it_as_it_happens_and_in_the_summary(script):
    path = script("""
        from trainbridge import worker
        worker.progress(1, 2, loss=2.5)
        worker.progress(2, 2, loss=float("inf"))
    """)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    done = subprocess.run(
        [sys.executable, "-m", "trainbridge", "run", "--", sys.executable, path],
        capture_output=True,
        text=True,
        env=env,
        timeout=WAIT_S * 2,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    notes = [line for line in done.stderr.splitlines() if "training health:" in line]
    assert len(notes) == 1 and notes[0].startswith("[trainbridge] training health: loss "), notes
    assert "Infinity" in notes[0]
    assert "Training health: loss " in done.stdout + done.stderr
