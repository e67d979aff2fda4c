"""bridge/feed_judge.py on its own: what a follower of a scheduled job's feed judges beyond
its lines, for Python's attach() and Node's attached job (through the store helper). The
real keepers are tests/scheduler/test_one_feed.py's and node-client/test/store.test.js's."""

import io
import json

import pytest

from trainbridge import bridge
from trainbridge.bridge import storeserve
from trainbridge.bridge.feed_judge import END_LINE_WAIT_S, SUPERVISOR_SILENT_S, FeedJudge

from .conftest import WAIT_S, child

RUNNING = {"state": "running", "keeper_pid": 41}


def test_silence_is_said_once_past_the_wait_and_the_answer_again_when_the_feed_grows():
    judge = FeedJudge()
    assert judge.quiet(100.0, RUNNING) is None  # nothing heard yet: nothing to judge
    assert judge.grew(0.0, RUNNING) is None and judge.answering is None
    assert judge.quiet(SUPERVISOR_SILENT_S, RUNNING) is None  # not past it
    said = judge.quiet(SUPERVISOR_SILENT_S + 0.25, RUNNING)
    assert said == {"event": "supervisor", "answering": False, "silent_s": 5.2, "keeper_pid": 41}
    assert judge.answering is False and judge.quiet(30.0, RUNNING) is None  # said once
    again = judge.grew(31.0, RUNNING)
    assert again == {"event": "supervisor", "answering": True, "silent_s": 31.0, "keeper_pid": 41}
    assert judge.grew(31.5, RUNNING) is None and judge.answering is True


def test_no_silence_while_queued_or_once_the_row_has_ended():
    judge = FeedJudge()
    judge.grew(0.0, RUNNING)
    assert judge.quiet(60.0, {"state": "queued"}) is None  # no keeper writes for it yet
    judge.end_from_row(60.0, {"state": "ended", "end_pending": 1})
    assert judge.quiet(120.0, RUNNING) is None  # the keeper is ending: its silence is no news


def test_the_end_line_is_waited_for_while_the_keeper_says_it_is_coming():
    judge = FeedJudge()
    pending = {"state": "ended", "end_pending": 1}
    assert judge.end_from_row(10.0, pending) is False
    assert judge.end_from_row(10.0 + END_LINE_WAIT_S - 0.1, pending) is False
    assert judge.end_from_row(10.0 + END_LINE_WAIT_S, pending) is True  # waited long enough
    assert FeedJudge().end_from_row(0.0, {"state": "ended", "end_pending": 0}) is True
    assert FeedJudge().end_from_row(0.0, None) is True  # forgotten: nothing will come


def test_the_store_helper_judges_a_row_end_once_and_forgets_the_job_when_asked(store_path):
    """storeserve's `judge` op on a real store: an ended job whose feed lost its end line gets
    the end made from the row, once, as the Node face's line; stopping it (Node's close()
    after that end) leaves nothing open in the helper; a job that does not exist is refused."""
    s = bridge.Scheduler(store=store_path, slots={"jobs": 1, "gpus": []}, tick=0.1)
    try:
        job_id = s.submit(child("steps", 2))
        assert s.attach(job_id).wait(WAIT_S) is not None
        row = s.get(job_id)
        with open(row["events_path"], "rb") as f:
            lines = f.read().splitlines()
        with open(row["events_path"], "wb") as f:
            f.write(b"\n".join(lines[:-1]) + b"\n")  # the end line never written
        out = io.StringIO()
        judged = storeserve.Judged(storeserve.Out(out))
        assert judged.start(store_path, {"id": job_id, "judge": 7}) is True
        judged.open[7].thread.join(WAIT_S)
        said = [json.loads(line) for line in out.getvalue().splitlines()]
        assert [(x["judge"], x["event"]["event"]) for x in said] == [(7, "end")], said
        assert said[0]["event"]["t"] == row["ended_at"]
        assert said[0]["event"]["report"]["outcome"] == "succeeded"
        watch = judged.open[7]
        assert judged.stop(7) is True and judged.open == {} and judged.stop(7) is False
        assert watch.closed.is_set() and not watch.thread.is_alive()
        with pytest.raises(LookupError, match="no job 'nope'"):
            judged.start(store_path, {"id": "nope", "judge": 8})
        with pytest.raises(ValueError, match="a new number is needed"):
            judged.start(store_path, {"id": job_id, "judge": True})
    finally:
        s.close()
