"""bridge/job_look.py on its own: the look a deadline starts and ends, and the lead's
heartbeats it keeps for a stall's verdict. The verdicts themselves are vectors/look.json's
(test_look.py); the whole path is test_deadlines.py's."""

from trainbridge.bridge import machine
from trainbridge.bridge.job_look import Look


def sample(t, cpu_s, lines=0):
    proc = {"pid": 5, "name": "python", "cpu_s": cpu_s, "io_bytes": 0, "threads": None}
    return {"t": t, "lines": lines, "lead": 5, "procs": [proc]}


def test_a_look_is_due_look_s_after_its_first_sample_and_taken_once():
    look = Look()
    assert look.take() is None and look.due is None
    look.start("startup", sample(10.0, 1.0), 10.0)
    assert look.due == 10.0 + machine.LOOK_S
    asked = look.take()
    assert asked["reason"] == "startup" and asked["sample"]["t"] == 10.0
    assert look.take() is None and look.due is None


def test_a_busy_start_is_starting_and_an_idle_one_hung():
    look = Look()
    look.start("startup", sample(10.0, 1.0), 10.0)
    asked = look.take()
    assert look.judge(asked, sample(11.0, 2.0), None)["working"]  # a core for a second
    assert not look.judge(asked, sample(11.0, 1.0), None)["working"]


def test_heartbeats_count_work_per_lead_and_a_stall_reads_where_the_lead_was():
    look = Look()
    assert not look.heartbeat({"work": 3, "where": "train.py:10"}, 1.0)  # a first count
    assert look.heartbeat({"work": 4, "where": "train.py:20"}, 2.0)
    assert not look.heartbeat({"work": 4, "where": "train.py:20"}, 3.0)
    look.start("stall", sample(5.0, 1.0), 5.0)
    asked = look.take()
    # busy (a core for the second) in the place it was in when the stall began
    verdict = look.judge(asked, sample(6.0, 2.0), last_activity_t=2.5)
    assert not verdict["working"]
    assert "stayed in train.py:20 over the last 3.5 s" in verdict["why"], verdict
    look.new_lead()
    assert look.heard == {}
    assert not look.heartbeat({"work": 9}, 7.0)  # the new lead's first count
