"""bridge/job_snapshot.py on its own: the hang's evidence of a real sleeping process,
gathered on a thread of its own that writes only the part's result and says when it is
done; and a failure to gather it, which is a result too. The whole path (a hang's report
and its evidence) is the fault matrix's."""

import threading

from trainbridge.bridge import job_snapshot
from trainbridge.bridge.job_snapshot import Snapshot


def test_the_evidence_of_a_sleeping_process_comes_from_another_thread(sleeping_python):
    child = sleeping_python
    done, on = threading.Event(), []
    snapshot = Snapshot()
    assert snapshot.join() is None  # none taken
    snapshot.start(child.pid, lambda: (on.append(threading.current_thread().name), done.set()))
    assert done.wait(30), "no snapshot within 30 s"
    assert on == ["trainbridge-snapshot"]
    result = snapshot.join()
    assert result is snapshot.result and result["pid"] == child.pid
    assert result["alive"] is True and result["main_thread"]["state"] == "S", result


def test_a_failure_to_gather_is_a_result_that_says_so(monkeypatch):
    def broken(pid):
        raise RuntimeError("no /proc here")

    monkeypatch.setattr(job_snapshot.evidence, "collect", broken)
    done = threading.Event()
    snapshot = Snapshot()
    snapshot.start(1, done.set)
    assert done.wait(30)
    assert snapshot.join() == {"notes": ["evidence failed: RuntimeError: no /proc here"]}


def test_a_snapshot_not_done_when_the_job_ends_is_said_not_left_out(monkeypatch):
    release = threading.Event()

    def slow(pid):
        release.wait(30)  # a /proc or py-spy read that takes its time
        return {"pid": pid}

    monkeypatch.setattr(job_snapshot.evidence, "collect", slow)
    snapshot = Snapshot()
    snapshot.start(1, lambda: None)
    try:
        late = snapshot.join(timeout=0.05)
        assert late == {
            "notes": [
                "the hang's evidence was still being gathered 0.05 s after the job ended "
                "(a slow /proc, py-spy or NVML read): it is not in this report"
            ]
        }
    finally:
        release.set()
    assert snapshot.join() == {"pid": 1}  # done since: the result itself
