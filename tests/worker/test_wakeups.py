"""When the beacon wakes (beacon._sleep_s, runtime.nudge): with nothing to send it sleeps
until its next heartbeat, and what training code queues or records then wakes it at once;
after a send it waits out the event window, and progress leaves at most every
PROGRESS_EVERY_S. Every wake-up contends for the GIL with the training thread and wakes
libzmq's and the client's threads, so an idle or steadily training worker must wake rarely
without delaying anything it is given."""

from __future__ import annotations

import os
import random
import select
import sys
import textwrap

import pytest

from tests.worker.fakes import RefusingSocket
from tests.worker.receiver import read_line, release, start_python
from trainbridge.worker import beacon as beacon_module
from trainbridge.worker import runtime
from trainbridge.worker.runtime import SLOT, STATE, Final

WINDOW = beacon_module.EVENT_WINDOW_S
EVERY = beacon_module.PROGRESS_EVERY_S


@pytest.fixture
def idle_flags():
    saved = (STATE.idle, STATE.idle_progress, STATE.beacon)
    try:
        yield
    finally:
        STATE.idle, STATE.idle_progress, STATE.beacon = saved


def pipe_bytes(b) -> int:
    """How many wake-ups wait in the beacon's pipe (read out)."""
    n = 0
    while select.select([b.wake_r], [], [], 0)[0]:
        n += len(os.read(b.wake_r, 4096))
    return n


# --- the sleeping rule, step by step on a beacon that is never started ----------------------
def test_with_nothing_to_send_it_sleeps_until_the_heartbeat_and_asks_to_be_woken(
    beacon, idle_flags
):
    b, _ = beacon
    assert b._sleep_s(now=100.0, next_beat=100.8) == pytest.approx(0.8)
    assert STATE.idle and STATE.idle_progress


def test_after_sending_events_it_batches_what_follows_for_the_window(beacon, idle_flags):
    b, _ = beacon
    b.sock = RefusingSocket(random.Random(0), refuse=0.0)
    STATE.beacon = b
    runtime.enqueue_log({"level": "info", "message": "one"})
    assert not b._send_queued(100.0)
    # A log right after the send is not worth a wake-up of its own: it waits for the window.
    assert b._sleep_s(now=100.01, next_beat=101.0) == pytest.approx(WINDOW - 0.01)
    assert not STATE.idle
    assert STATE.idle_progress  # progress is not held back by the event window
    runtime.enqueue_log({"level": "info", "message": "two"})
    assert pipe_bytes(b) == 0
    # At the window's end it is sent; once nothing follows, the next one wakes it.
    assert not b._send_queued(100.0 + WINDOW)
    assert b._sleep_s(now=100.0 + 2 * WINDOW, next_beat=101.0) == pytest.approx(0.8)
    assert STATE.idle


def test_progress_leaves_at_most_every_period_and_only_new_progress_wakes_it(beacon, idle_flags):
    b, _ = beacon
    b.sock = RefusingSocket(random.Random(0), refuse=0.0)
    SLOT[0] = (1, None, {})
    assert not b._send_queued(100.0)  # sent: the first progress goes at once
    assert b.progress_sent is SLOT[0]
    SLOT[0] = (2, None, {})
    assert not b._send_queued(100.05)  # recorded too soon after: waits
    assert b.progress_sent[0] == 1
    # It wakes when step 2 is due; until then new steps do not wake it.
    assert b._sleep_s(now=100.05, next_beat=101.0) == pytest.approx(EVERY - 0.05)
    assert STATE.idle and not STATE.idle_progress
    assert not b._send_queued(100.0 + EVERY)
    assert b.progress_sent[0] == 2
    # Sent, and nothing newer: it looks once more when the next would be due, ...
    assert b._sleep_s(now=100.0 + EVERY, next_beat=101.0) == pytest.approx(EVERY)
    assert not STATE.idle_progress
    # ... and then sleeps until the heartbeat, woken by the next step.
    assert b._sleep_s(now=100.0 + 2 * EVERY, next_beat=101.0) == pytest.approx(0.5)
    assert STATE.idle_progress


def test_a_heartbeat_due_soon_goes_with_what_was_just_sent(beacon, idle_flags):
    b, _ = beacon
    b.sock = RefusingSocket(random.Random(0), refuse=0.0)

    def sent(now: float) -> bool:  # as the loop tells: did this turn send anything?
        seq = b.seq
        b._send_queued(now)
        return b.seq != seq

    assert b._beat_now(now=100.0, next_beat=100.0, sent_now=sent(100.0))  # due
    assert not b._beat_now(now=100.0, next_beat=100.1, sent_now=sent(100.0))  # nothing sent
    SLOT[0] = (1, None, {})
    went = sent(100.0)  # progress went now
    assert went
    assert b._beat_now(now=100.0, next_beat=100.0 + EVERY - 0.01, sent_now=went)
    # the next one will do
    assert not b._beat_now(now=100.0, next_beat=100.0 + EVERY + 0.01, sent_now=went)
    runtime.enqueue_log({"level": "info", "message": "x"})
    assert b._beat_now(now=101.0, next_beat=101.1, sent_now=sent(101.0))  # a log went now
    b.said_bye = True
    assert not b._beat_now(now=102.0, next_beat=101.0, sent_now=False)


def test_queued_while_it_looked_it_does_not_sleep(beacon, idle_flags):
    b, _ = beacon
    STATE.events.append(("log", {"level": "info", "message": "late"}, None))
    assert b._sleep_s(now=100.0, next_beat=101.0) == 0.0
    STATE.events.clear()
    b.progress_sent = SLOT[0] = (1, None, {})
    SLOT[0] = (2, None, {})  # recorded after the look (progress_sent is still step 1)
    assert b._sleep_s(now=100.0, next_beat=101.0) == 0.0


def test_last_words_the_watchdog_and_bye_set_the_wake_up(beacon, idle_flags):
    b, _ = beacon
    final = Final("bye", {})
    b.finals[7] = [final, [b"frames"], 100.0]
    assert b._sleep_s(now=100.1, next_beat=105.0) == pytest.approx(
        beacon_module.RESEND_EVERY_S - 0.1
    )
    b.finals[7][2] = 0.0  # libzmq refused it: retried soon, not in a busy loop
    assert b._sleep_s(now=100.1, next_beat=105.0) == pytest.approx(WINDOW)
    b.finals.clear()
    b.said_bye = True  # no heartbeat follows bye: nothing else to wake for
    assert b._sleep_s(now=100.0, next_beat=99.0) == beacon_module.MAX_SLEEP_S


def test_a_parent_watched_without_a_pidfd_is_polled(beacon, idle_flags):
    b, _ = beacon

    class NoPidfd:
        polls = True

    b.watch = NoPidfd()
    assert b._sleep_s(now=100.0, next_beat=101.0) == pytest.approx(beacon_module.PARENT_POLL_S)


def test_training_code_wakes_an_idle_beacon_once(beacon, idle_flags):
    b, _ = beacon
    STATE.beacon = b
    from trainbridge import worker  # off in this process; worker.log reads STATE.enabled

    STATE.idle = STATE.idle_progress = False
    worker.log("awake")
    runtime.enqueue_event("stage", {"event": "begin", "name": "x", "depth": 0, "budget_s": None})
    assert pipe_bytes(b) == 0  # awake (or in its window): no system call
    STATE.idle = STATE.idle_progress = True
    worker.log("asleep")
    runtime.enqueue_log({"level": "info", "message": "asleep too"})
    runtime.enqueue_event("stage", {"event": "end", "name": "x", "depth": 0, "status": "ok"})
    assert pipe_bytes(b) == 1 and not STATE.idle and not STATE.idle_progress
    STATE.idle_progress = True  # asleep for progress only (in its event window): logs wait
    runtime.enqueue_log({"level": "info", "message": "no wake"})
    assert pipe_bytes(b) == 0


# --- a real worker process -----------------------------------------------------------------
IDLE_SCRIPT = textwrap.dedent("""
    import sys, threading
    from trainbridge import worker
    beacon = [t for t in threading.enumerate() if t.name == "trainbridge-beacon"][0]
    print(beacon.native_id, flush=True)
    for line in sys.stdin:
        what = line.strip()
        if what == "progress":
            worker.progress(7, 10, loss=0.5)
        elif what == "log":
            worker.log("hello from an idle job")
        elif what == "stage":
            with worker.stage("short"):
                pass
        elif what == "end":
            break
""")


def _switches(pid: int, tid: int) -> int:
    """The thread's voluntary context switches: one per sleep it woke from."""
    with open(f"/proc/{pid}/task/{tid}/status") as f:
        for line in f:
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split()[1])
    raise AssertionError("no voluntary_ctxt_switches")


@pytest.mark.skipif(sys.platform != "linux", reason="counts a thread's switches in /proc")
def test_an_idle_worker_wakes_only_for_its_heartbeat(receiver, tmp_path):
    child = start_python(IDLE_SCRIPT, receiver.env(heartbeat_s="0.3", freeze_s="0"), str(tmp_path))
    try:
        tid = int(read_line(child.stdout, 20))
        receiver.wait_for(lambda r: r.kind == "heartbeat" and r.body["beat"] >= 2, timeout=20)
        before = _switches(child.pid, tid)
        receiver.wait_for(lambda r: r.kind == "heartbeat" and r.body["beat"] >= 8, timeout=20)
        woke = _switches(child.pid, tid) - before
        # 6 heartbeats: ~1 wake-up each (a few more for libzmq and the GIL). The beacon's
        # former 100 ms loop woke 18 times or more in the same 1.8 s.
        assert woke <= 14, woke
    finally:
        child.stdin.write(b"end\n")
        child.stdin.flush()
        assert release(child) == 0


def test_what_an_idle_worker_is_given_leaves_at_once(receiver, tmp_path):
    # Heartbeats 60 s apart and no watchdog: nothing but a nudge wakes the beacon in time.
    child = start_python(IDLE_SCRIPT, receiver.env(heartbeat_s="60", freeze_s="0"), str(tmp_path))
    try:
        read_line(child.stdout, 20)
        receiver.wait_for(lambda r: r.kind == "heartbeat", timeout=20)
        for what, kind in [("progress", "progress"), ("log", "log"), ("stage", "stage")]:
            child.stdin.write(f"{what}\n".encode())
            child.stdin.flush()
            got = receiver.wait_for(lambda r, kind=kind: r.kind == kind, timeout=10)
            if kind == "progress":
                assert got.body["step"] == 7
        receiver.wait_for(lambda r: r.kind == "stage" and r.body["event"] == "end", timeout=10)
        assert len(receiver.of_kind("heartbeat")) == 1
    finally:
        child.stdin.write(b"end\n")
        child.stdin.flush()
        assert release(child) == 0
