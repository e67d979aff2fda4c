"""A store the previous release wrote (schema 1, feed lines without numbers) opened by this
one: migrated in place, its old jobs still attachable from the start and from now (and
"from event N" refused with what to do instead), and new jobs on it cancelled with a reason
and a grace. Real keepers, real processes."""

import json
import os
import sqlite3
import subprocess
import sys
import time

import pytest

from trainbridge import bridge
from trainbridge.bridge import feed, store

from .conftest import WAIT_S, child, leftovers, until_progress


def _release_1_store(path):
    """The store as release 1 left it: schema 1 and one job it ran, whose events file has
    no feed numbers (release 1's keeper wrote plain JSON lines)."""
    db = sqlite3.connect(path)
    db.executescript(store.MIGRATIONS[0])  # migrations only grow: [0] is release 1's schema
    db.execute("PRAGMA user_version = 1")
    job_dir = os.path.join(os.path.dirname(path), "jobs", "j-20261101-0a0a0a0a")
    os.makedirs(job_dir, mode=0o700)
    now = time.time()
    report = {"outcome": "succeeded", "exit_code": 0, "signal": None, "summary": "Job succeeded."}
    lines = [
        {"event": "state", "t": now - 9, "state": "running"},
        {"event": "output", "t": now - 8, "stream": "stdout", "text": "step 1", "end": "lf"},
        {"event": "status", "t": now - 7, "status": {"state": "running", "step": 1}},
        {"event": "state", "t": now - 6, "state": "ended"},
        {"event": "end", "t": now - 5, "outcome": "succeeded", "report": report},
    ]
    events = os.path.join(job_dir, "events.jsonl")
    with open(events, "w", encoding="ascii") as f:
        f.writelines(json.dumps(line) + "\n" for line in lines)
    db.execute(
        "INSERT INTO jobs (id, seq, command, config, resources, state, outcome, exit_code, "
        "submitted_at, started_at, ended_at, updated_at, attempt, dir, log_path, events_path, "
        "report) VALUES (?, 1, ?, '{}', '{}', 'ended', 'succeeded', 0, ?, ?, ?, ?, 1, ?, ?, ?, ?)",
        (
            "j-20261101-0a0a0a0a",
            json.dumps([sys.executable, "train.py"]),
            now - 10,
            now - 9,
            now - 5,
            now - 5,
            job_dir,
            os.path.join(job_dir, "output.log"),
            events,
            json.dumps(report),
        ),
    )
    db.commit()
    db.close()
    return "j-20261101-0a0a0a0a"


def test_a_release_1_store_is_migrated_and_its_jobs_still_attach(store_path):
    old = _release_1_store(store_path)
    s = bridge.Scheduler(store=store_path, slots={"jobs": 1, "gpus": []}, tick=0.1)
    try:
        db = sqlite3.connect(store_path)
        assert db.execute("PRAGMA user_version").fetchone()[0] == store.SCHEMA_VERSION
        db.close()
        row = s.get(old)
        assert (row["state"], row["outcome"], row["cancel_reason"]) == ("ended", "succeeded", None)

        events = list(s.attach(old).events(timeout=WAIT_S))
        assert [e["event"] for e in events] == ["state", "output", "status", "state", "end"]
        assert events[-1]["report"] == row["report"]
        now = s.attach(old, since="now")
        first, second = now.next_event(WAIT_S), now.next_event(WAIT_S)
        assert (first["event"], first["state"]) == ("state", "ended")
        assert second["event"] == "status" and now.status()["step"] == 1
        with pytest.raises(feed.FeedError, match="attach from the start or from now"):
            s.attach(old, since=2)
        cli = subprocess.run(
            [
                sys.executable,
                "-m",
                "trainbridge",
                "attach",
                old,
                "--from",
                "2",
                "--store",
                store_path,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert cli.returncode == 2 and "attach from the start or from now" in cli.stderr

        # A new job on the migrated store: a numbered feed, and cancel with reason and grace.
        job_id = s.submit(child("forever"))
        job = s.attach(job_id)
        until_progress(job)
        assert job.cancel(grace=0, reason="upgraded and stopped")
        report = job.wait(WAIT_S)
        assert report["outcome"] == "cancelled" and report["cancel"]["reason"] == (
            "upgraded and stopped"
        )
        assert feed.last_seq(s.get(job_id)["events_path"]) == job.position
        assert not leftovers(job_id)
    finally:
        s.close()
