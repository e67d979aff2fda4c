"""report.build's verdict rules one at a time (bridge/report.py VERDICT_RULES): each over
the first verdict (bridge.diagnosis's), on the smallest Ending that makes it speak, and on
one it must pass over; then their order. Whole reports are the vectors' (test_report_vectors.py)."""

from trainbridge.bridge import report

FIRST = {"kind": "python_exception", "summary": "ValueError: x", "hint": "fix it",
         "evidence": {"frame": "train.py:3"}}  # fmt: skip
TORCHRUN = {"pid": 10, "argv": ["torchrun", "--nnodes=2", "train.py"], "host": "h1"}


def facts(**kw):
    base = {"machine": {"hang": None}, "internal_error": None, "hellos": {}, "started": 0.0}
    return {**base, **kw}


def ending(outcome="failed", cause=None, stuck=None, stacks=None, **kw):
    return report.Ending(
        facts=facts(**kw), outcome=outcome, tail=[], crash_text=None, stacks=stacks, rows=[],
        cause=cause, cause_error=None, stuck=stuck,
    )  # fmt: skip


def rule(name):
    return next(r for r in report.VERDICT_RULES if r.__name__ == name)


def test_root_cause_rank_says_a_failed_job_by_its_first_failed_rank():
    cause = {"rank": 1, "summary": "rank 1 failed first: ValueError", "error": {"type": "x"}}
    said = rule("root_cause_rank")(ending(cause=cause), FIRST)
    assert said["summary"] == cause["summary"] and said["kind"] == "python_exception"
    # a rank killed by a signal raised nothing: the verdict is a kill, with its hint
    killed = {"rank": 1, "summary": "rank 1 killed", "error": {"type": "SIGKILL",
              "source": "signal"}}  # fmt: skip
    said = rule("root_cause_rank")(ending(cause=killed), FIRST)
    assert said["kind"] == "killed" and said["hint"].startswith("rank 1 was killed by SIGKILL")
    # not for a job that did not fail, nor over no verdict
    assert rule("root_cause_rank")(ending(outcome="hung", cause=cause), FIRST) is None
    assert rule("root_cause_rank")(ending(cause=cause), None) is None


def test_rendezvous_says_a_launcher_that_waits_for_nodes():
    hang = {"reason": "startup", "t": 120.0, "stage": None}
    waiting = ending(
        outcome="hung", stacks="File rendezvous.py", machine={"hang": hang},
        hellos={"10": TORCHRUN},
    )  # fmt: skip
    said = rule("rendezvous")(waiting, FIRST)
    assert said is not None and "waited 120 s for nodes that never came" in said["summary"]
    # a rank said hello: the job started, the launcher waits for nothing
    started = ending(
        outcome="hung", stacks="File rendezvous.py", machine={"hang": hang},
        hellos={"10": TORCHRUN, "11": {"pid": 11, "world_size": 2}},
    )  # fmt: skip
    assert rule("rendezvous")(started, FIRST) is None
    assert rule("rendezvous")(ending(outcome="failed", hellos={"10": TORCHRUN}), FIRST) is None


def test_hung_rank_says_a_hung_job_by_its_stuck_rank_and_keeps_the_evidence():
    stuck = {"kind": "network_wait", "summary": "rank 1 is stuck", "hint": "look at rank 1"}
    said = rule("hung_rank")(ending(outcome="hung", stuck=stuck), FIRST)
    assert said["kind"] == "network_wait" and said["summary"] == "rank 1 is stuck"
    assert said["evidence"] == {"frame": "train.py:3", "hung_rank": stuck}
    assert rule("hung_rank")(ending(outcome="hung"), FIRST) is None


def test_internal_says_a_bug_in_trainbridge_whatever_else_was_seen():
    bug = {"type": "KeyError", "message": "boom", "traceback": "Traceback ...\nKeyError"}
    said = rule("internal")(ending(internal_error=bug), FIRST)
    assert said["kind"] == "internal" and said["summary"].startswith("boom (KeyError)")
    assert rule("internal")(ending(), FIRST) is None


def test_the_last_rule_that_speaks_is_the_reports_verdict():
    assert [r.__name__ for r in report.VERDICT_RULES] == [
        "root_cause_rank", "rendezvous", "hung_rank", "internal"]  # fmt: skip
    stuck = {"kind": "network_wait", "summary": "rank 1 is stuck", "hint": "h"}
    bug = {"type": "KeyError", "message": "boom", "traceback": ""}
    e = ending(outcome="hung", stuck=stuck, internal_error=bug)
    verdict = FIRST
    for r in report.VERDICT_RULES:
        verdict = r(e, verdict) or verdict
    assert verdict["kind"] == "internal"


def test_an_owed_end_line_is_said_once_and_unsaid_once_written():
    """A job whose feed could not take its end line: the report a face reads from the store
    says so (end_line_owed and one sentence in the summary); a retry that fails again says
    the newer error instead of a second sentence; once written, the report is as before."""
    from trainbridge.bridge import report_text

    base = {"outcome": "lost", "summary": "Job lost: its keeper was gone.", "note": "n"}
    owed = report_text.owe_end_line(base, "No space left on device (ENOSPC), writing /f")
    assert owed["end_line_owed"].startswith("No space left")
    assert owed["summary"].startswith("Job lost: its keeper was gone. The feed's end line")
    assert "(No space left on device (ENOSPC), writing /f)" in owed["summary"]
    again = report_text.owe_end_line(owed, "Is a directory (EISDIR), writing /f")
    assert again["summary"].count("end line could not be written") == 1, again["summary"]
    assert "EISDIR" in again["summary"] and "ENOSPC" not in again["summary"]
    assert report_text.end_line_paid(again) == base
    assert report_text.end_line_paid(base) is base


def test_the_summary_says_what_the_feed_missed():
    from trainbridge.bridge import report_text

    said = report_text.losses(
        {"outcome": "succeeded", "events_failed": 3, "feed_error": "ENOSPC, writing /e"}
    )
    assert said == [
        "3 events of the job's feed could not be written (ENOSPC, writing /e): attached "
        "faces and the dashboard missed them; the log file keeps the output (report "
        "'events_failed')."
    ]
