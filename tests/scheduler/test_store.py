"""The store file: a versioned schema, migrated on open, refused when newer than the code;
many processes writing at once lose nothing and corrupt nothing."""

import sqlite3
import subprocess
import sys
import time

import pytest

from trainbridge.bridge import store as stores
from trainbridge.bridge.store import SCHEMA_VERSION, Store, StoreError


def row(job_id, tmp_path, **extra):
    return {
        "id": job_id,
        "command": ["python", "x.py"],
        "config": {},
        "resources": {},
        "state": "queued",
        "submitted_at": time.time(),
        "dir": str(tmp_path),
        "log_path": "o",
        "events_path": "e",
        **extra,
    }


def test_a_new_store_has_the_current_schema_in_wal_mode(tmp_path):
    s = Store(str(tmp_path / "jobs.db"))
    try:
        assert s.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert s.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {r[0] for r in s.db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert {"jobs", "attempts", "settings"} <= tables
    finally:
        s.close()


def test_a_store_from_a_newer_trainbridge_is_refused_with_what_to_do(tmp_path):
    path = str(tmp_path / "jobs.db")
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(StoreError, match="upgrade trainbridge"):
        Store(path)


def test_migrations_run_once_and_keep_rows(tmp_path, monkeypatch):
    path = str(tmp_path / "jobs.db")
    s = Store(path)
    s.insert_job(row("a", tmp_path))
    s.close()
    # A (test-only) version 2 adds a column: opening migrates, the row is still there.
    monkeypatch.setattr(
        stores, "MIGRATIONS", stores.MIGRATIONS + ["ALTER TABLE jobs ADD COLUMN owner TEXT"]
    )
    monkeypatch.setattr(stores, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    s = Store(path)
    try:
        assert s.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION + 1
        assert s.get("a")["owner"] is None and s.get("a")["command"] == ["python", "x.py"]
    finally:
        s.close()
    Store(path).close()  # opening again migrates nothing


HAMMER = """
import sys
from trainbridge.bridge.store import Store
path, job_id, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = Store(path)
for i in range(count):
    s.update(job_id, progress={"step": i + 1, "total": count}, stage=f"s{i}")
    s.put_attempt(job_id, i + 1, outcome="failed")
s.close()
"""


def test_many_writers_at_once_lose_nothing(tmp_path):
    # Six processes write at once (plain subprocesses: no multiprocessing helper process
    # outlives the test). None may fail on a locked database, and nothing may be lost.
    path = str(tmp_path / "jobs.db")
    s = Store(path)
    ids = [f"j{i}" for i in range(6)]
    for job_id in ids:
        s.insert_job(row(job_id, tmp_path))
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", HAMMER, path, job_id, "150"], stderr=subprocess.PIPE
        )
        for job_id in ids
    ]
    for w in writers:
        _, err = w.communicate(timeout=120)
        assert w.returncode == 0, err.decode(errors="replace")
    try:
        assert s.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        for job_id in ids:
            assert s.get(job_id)["progress"] == {"step": 150, "total": 150}
            assert len(s.attempts(job_id)) == 150
    finally:
        s.close()


def test_default_path_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("TRAINBRIDGE_STORE", str(tmp_path / "x.db"))
    assert stores.default_path() == str(tmp_path / "x.db")
    monkeypatch.delenv("TRAINBRIDGE_STORE")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert stores.default_path() == str(tmp_path / "trainbridge" / "jobs.db")


def test_a_store_that_cannot_be_made_says_why_without_a_permissions_hint(tmp_path):
    """A refusal of modes names the chmod that fixes it (tests/security); any other failure
    (here the store's directory would be inside a file) says what happened, nothing more."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    with pytest.raises(StoreError) as err:
        Store(str(blocker / "jobs.db"))
    text = str(err.value)
    assert "not-a-dir/jobs.db: File exists (EEXIST)" in text and "chmod" not in text, text
