"""bridge/feed_judge.py on its own: what a follower of a scheduled job's feed judges beyond
its lines, for Python's attach() and Node's attached job (through the store helper). The
real keepers are tests/scheduler/test_one_feed.py's and node-client/test/store.test.js's."""

from trainbridge.bridge.feed_judge import END_LINE_WAIT_S, SUPERVISOR_SILENT_S, FeedJudge

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
