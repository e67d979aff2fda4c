"""The job list's change feed (bridge/watch.py): a GUI's list without polling. Every
row first ("added", initial), then each row any process writes, a forgotten job's removal
and why (forget() or the store's retention, which the Scheduler also says), and a quiet
store costs the watch one PRAGMA per look, never a query of the rows."""

import sys
import threading

from trainbridge import bridge
from trainbridge.bridge import watch

from .conftest import WAIT_S, child


def changes_until(w, done, what):
    """The watch's changes until done(change) is true for one; fails after WAIT_S."""
    got = []
    while True:
        change = w.next(WAIT_S)
        assert change is not None, f"no change for {WAIT_S} s waiting for {what}; got {got}"
        got.append(change)
        if done(change):
            return got


def test_the_list_as_changes_from_every_process_with_why_a_job_left(store_path, capfd):
    s = bridge.Scheduler(store=store_path, slots={"jobs": 2, "gpus": []}, tick=0.1, keep_ended=2)
    try:
        first = s.submit(child("steps", 1))
        assert s.attach(first).wait(WAIT_S).outcome == "succeeded"
        with s.watch() as w:
            # The queue's state, then the list so far, at once: every row "added", initial.
            queue = w.next(0)
            assert (queue["event"], queue["paused"], queue["initial"]) == ("queue", False, True)
            initial = w.next(0)
            assert (initial["change"], initial["id"], initial["initial"]) == ("added", first, True)
            assert initial["row"]["state"] == "ended" and w.next(0) is None
            # A job submitted by another process (the CLI), then each of its rows' states.
            other = bridge.Scheduler(store=store_path, tick=None)
            second = other.submit(child("steps", 2))
            other.close()
            got = changes_until(
                w,
                lambda c: c.get("id") == second and (c["row"] or {}).get("state") == "ended",
                "the second job to end",
            )
            assert (
                got[0]["change"] == "added" and got[0]["id"] == second and "initial" not in got[0]
            )
            # Each commit's state, in the lifecycle's order. A two-step job's "running" may
            # share a commit with its end on a loaded machine (hunt run 2 on 7c1dc5c:
            # starting x3, ended): the keeper writes the row's state at once, but it may
            # already be the end's.
            states = [c["row"]["state"] for c in got if c.get("id") == second]
            lifecycle = ["queued", "starting", "running", "ended"]
            assert states == sorted(states, key=lifecycle.index) and states[-1] == "ended", states
            assert got[-1]["row"]["outcome"] == "succeeded"
            # forget(): removed, and why.
            assert s.forget(first)
            gone = changes_until(w, lambda c: c.get("change") == "removed", "the forgotten job")
            assert (gone[-1]["id"], gone[-1]["row"], gone[-1]["why"]) == (first, None, "forgotten")
            # Retention (keep_ended=2): the third ended job makes the oldest go, said so.
            third, fourth = s.submit(child("steps", 1)), s.submit(child("steps", 1))
            for job_id in (third, fourth):
                assert s.attach(job_id).wait(WAIT_S).outcome == "succeeded"
            gone = changes_until(w, lambda c: c.get("change") == "removed", "retention")
            # Pausing the queue, from another process too, is a change.
            s.pause()
            paused = changes_until(w, lambda c: c["event"] == "queue", "the pause")
            assert paused[-1]["paused"] is True and "initial" not in paused[-1]
            assert gone[-1]["id"] == second and gone[-1]["why"] == "retention (keep_ended=2)"
        assert w.next(None) is None  # closed: an iteration ends
        assert list(w) == []
    finally:
        s.close()
    err = capfd.readouterr().err
    assert "forgot 1 ended job(s) beyond the newest 2 (keep_ended)" in err, err


def test_a_quiet_store_costs_the_watch_no_query_of_its_rows(store_path):
    """While nothing is written, the watch asks only SQLite's data_version (the WAL's shared
    memory); the rows are read once a commit changed it."""
    s = bridge.Scheduler(store=store_path, slots={"jobs": 1, "gpus": []}, tick=None)
    try:
        assert s.attach(s.submit([sys.executable, "-c", "pass"])).wait(WAIT_S) is not None
        statements, looked = [], threading.Event()

        def traced(sql):
            statements.append(sql)
            if len([x for x in statements if "data_version" in x]) >= 10:
                looked.set()

        with watch.Watch(store_path, every=0.01) as w:
            w._store.db._db.set_trace_callback(traced)
            assert looked.wait(WAIT_S)
            quiet = list(statements)
            assert quiet and all(sql.strip() == "PRAGMA data_version" for sql in quiet), quiet
    finally:
        s.close()


def test_diff_is_pure():
    known = {"a": 1.0, "b": 2.0, "c": 3.0}
    now = [("a", 1.0), ("c", 3.5), ("d", 4.0)]
    assert watch.diff(known, now) == (["d"], ["c"], ["b"])
    assert watch.removal_reason("b", {"last": ["b"], "keep_ended": 5}) == "retention (keep_ended=5)"
    assert watch.removal_reason("b", None) == "forgotten"


def test_a_listener_that_raises_is_said_and_the_feed_goes_on(store_path, capfd):
    """A GUI's on_change bug stopped its callbacks without a word; now it is said on stderr,
    and the changes still come from next()."""

    def broken(change):
        raise ValueError("a GUI bug")

    s = bridge.Scheduler(store=store_path, slots={"jobs": 1, "gpus": []}, tick=None)
    try:
        with s.watch(on_change=broken) as w:
            assert w.next(0)["event"] == "queue"
    finally:
        s.close()
    err = capfd.readouterr().err
    assert "on_change raised ValueError: a GUI bug; it is not called again" in err, err
