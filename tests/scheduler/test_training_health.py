"""Training health under a keeper (docs/CLIENT.md "Training health"): a scheduled job whose loss
becomes NaN. The keeper's Job says it in the feed (`health`), the attached face and the row read
NaN back as a number, every line of the feed is strict JSON (a Node GUI parses it; the Node
twin is node-client/test/store.test.js), and stop_on_nan given at submit cancels the job."""

import json
import math

import pytest

from trainbridge import bridge

from .conftest import WAIT_S, child, leftovers, user_env


def test_a_scheduled_job_says_nan_on_every_face_and_stop_on_nan_cancels_it(store_path):
    s = bridge.Scheduler(store=store_path, slots={"jobs": 1, "gpus": []}, tick=0.1)
    try:
        job_id = s.submit(child("diverge", 3), env=user_env(), stop_on_nan="loss")
        job = s.attach(job_id)
        events = list(job.events(timeout=WAIT_S))
        assert events and events[-1]["event"] == "end", "no end within the deadline"
        said = [e for e in events if e["event"] == "health"]
        assert len(said) == 1, said
        assert said[0]["metric"] == "loss" and math.isnan(said[0]["value"])
        assert said[0]["text"].startswith("loss became NaN "), said[0]  # step 1 is finite
        report = job.report
        assert report["outcome"] == "cancelled", report["summary"]
        assert report["cancel"]["by"] == "health"
        assert report["cancel"]["reason"].startswith(said[0]["text"])
        assert math.isnan(report["health"][0]["value"])
        assert math.isnan(job.status()["metrics"]["loss"])

        row = s.get(job_id)
        assert row["outcome"] == "cancelled"
        assert math.isnan(row["progress"]["metrics"]["loss"])
        assert math.isnan(row["report"]["health"][0]["value"])
        with open(row["events_path"], encoding="ascii") as feed:
            text = feed.read()
        for line in text.splitlines():  # a bare NaN token fails: Node's JSON.parse throws on it
            json.loads(line, parse_constant=lambda token: pytest.fail(f"bare {token} in the feed"))
        assert not leftovers(job_id)
    finally:
        s.close()


def test_a_bad_stop_on_nan_is_refused_at_submit(store_path):
    s = bridge.Scheduler(store=store_path, slots={"jobs": 1, "gpus": []}, tick=None)
    try:
        with pytest.raises(ValueError, match="stop_on_nan must be a metric name"):
            s.submit(child("steps", 1), stop_on_nan=[3])
        assert s.jobs() == []
    finally:
        s.close()
