"""bridge/job_status.py's LiveStatus on its own: the judged status fed by the lead's
messages, read from any thread, and when the feed's next `status` event is due."""

import threading

from trainbridge.bridge.job_status import STATUS_EVERY_S, LiveStatus


def test_stages_and_progress_become_the_judged_snapshot():
    live = LiveStatus(t0=100.0)
    live.track("stage", {"event": "begin", "name": "fit", "depth": 1}, 100.5)
    live.track("progress", {"step": 10, "total": 100, "metrics": {}}, 101.0)
    live.track("progress", {"step": 20, "total": 100, "metrics": {}}, 102.0)
    snap = live.snapshot("running", 42, 102.0)
    assert (snap["state"], snap["pid"], snap["step"], snap["total"]) == ("running", 42, 20, 100)
    assert snap["stages"] == ["fit"]
    assert snap["rate"] == 10.0 and snap["eta_s"] == 8.0


def test_a_status_event_is_due_a_period_after_the_last():
    live = LiveStatus(t0=0.0)
    assert live.next_at == 0.0  # the first is due at once
    live.published(50.0)
    assert live.next_at == 50.0 + STATUS_EVERY_S


def test_snapshots_from_other_threads_while_progress_comes_are_whole():
    live = LiveStatus(t0=0.0)
    stop = threading.Event()
    seen = []

    def reader():
        while not stop.is_set():
            snap = live.snapshot("running", 1, 1000.0)
            seen.append((snap["step"], snap["total"]))

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for step in range(1, 5001):
            live.track("progress", {"step": step, "total": step * 2, "metrics": {}}, step / 100)
    finally:
        stop.set()
        thread.join(20)
    # Each snapshot is one progress message's, never a step of one and a total of another.
    assert seen and all(total == (step or 0) * 2 or step is None for step, total in seen), seen[:5]
