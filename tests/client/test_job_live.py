"""bridge/job_live.py on its own: the live diagnosis of a stalled job over a real sleeping
process, how often it looks again, and a look that fails. The whole path (the "stalled"
events of a running job) is test_live_diagnosis.py's."""

from trainbridge.bridge import ranks
from trainbridge.bridge.job_live import LIVE_DIAGNOSIS_S, LiveDiagnosis

STACK = 'File "train.py", line 5 in <module>\n  time.sleep(60)'


def facts(**more):
    return {
        "heartbeat": {"stack": STACK, "stage": "train"},
        "stages": [{"name": "train", "status": "running"}],
        "hellos": {"0": {"pid": 1}},
        "progress": {"step": 3},
        "ranks": ranks.initial(),
        **more,
    }


def test_it_looks_when_forced_or_every_live_diagnosis_s():
    live = LiveDiagnosis()
    assert live.due(10.0)  # never looked
    live.t = 10.0
    assert not live.due(10.0 + LIVE_DIAGNOSIS_S / 2)
    assert live.due(10.0 + LIVE_DIAGNOSIS_S / 2, force=True)  # the job has just stalled
    assert live.due(10.0 + LIVE_DIAGNOSIS_S)
    # A look that took 0.4 s and was published then: the next is due 2 s after that.
    live.said(10.4)
    assert not live.due(10.0 + LIVE_DIAGNOSIS_S)
    assert live.due(10.4 + LIVE_DIAGNOSIS_S)


def test_a_sleeping_process_is_sleeping_where_its_heartbeat_was_and_a_gone_one_unknown(
    sleeping_python,
):
    child = sleeping_python
    live = LiveDiagnosis()
    found = live.refresh(child.pid, facts(), last_activity_t=100.0, now=130.0)
    assert found["kind"] == "sleeping", found
    assert found["frame"] == "train.py:5 <module>" and found["idle_s"] == 30.0
    assert live.current == found and live.t == 130.0
    child.kill()
    child.wait(10)
    found = live.refresh(child.pid, facts(), last_activity_t=100.0, now=131.0)
    assert found["kind"] == "unknown" and "cause not recognised" in found["summary"]


def test_a_look_that_fails_is_a_diagnosis_and_does_not_raise():
    live = LiveDiagnosis()
    broken = facts(stages=[{"name": "train"}])  # no status: the rules cannot read it
    found = live.refresh(1, broken, last_activity_t=None, now=5.0)
    assert found["kind"] == "unknown"
    assert found["summary"].startswith("live diagnosis failed: ")
    assert found["idle_s"] is None  # no activity seen and no heartbeat idle_s
