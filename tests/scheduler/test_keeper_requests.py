"""The keeper's signals and requests. A burst of signals never stops it (its handlers take
no lock). Its end answers what was asked and never answered (bridge/keeper.py
_answer_the_rest): a request file it never read (written after its last look) and a ping
or dump still waiting for the worker each get a `reply` error ahead of the `end`, so no
asker waits for an answer that cannot come. The end of a real job with a ping and a dump
waiting is test_one_feed.py's; a file written in the last moment cannot be timed from
outside, so this calls the end's step on a real keeper of a queued job."""

import json
import os
import signal
import sys

from trainbridge import bridge
from trainbridge.bridge import keeper, procs, scheduler
from trainbridge.bridge.store import Store

from .conftest import WAIT_S, child, leftovers, until_progress


def test_a_burst_of_dump_and_request_signals_never_stops_the_keeper_from_cancelling(
    store_path,
):
    """A Python signal handler runs in the main thread, nested in another when a second
    signal comes while the first runs. The keeper's set an Event and started threads (both
    take a lock): a burst of SIGUSR1 and SIGUSR2 (dumps and requests asked at once)
    deadlocked its main thread, 1 burst of 2,000 pairs in 3, and the job's cancel was never
    carried out. The signals are handled on a thread of their own now
    (bridge/signal_thread.py), and a burst of dumps is answered without a thread each."""
    s = bridge.Scheduler(store=store_path, slots={"jobs": 1, "gpus": []}, tick=0.1)
    try:
        job_id = s.submit(child("forever"))
        job = s.attach(job_id)
        until_progress(job)
        keeper_pid = s.get(job_id)["keeper_pid"]
        for _ in range(5):
            for _ in range(2000):
                os.kill(keeper_pid, signal.SIGUSR1)
                os.kill(keeper_pid, signal.SIGUSR2)
        assert s.cancel(job_id)
        report = job.wait(WAIT_S)
        assert report is not None and report["outcome"] == "cancelled", report
        events = list(s.attach(job_id).events(timeout=WAIT_S))
        stacks = [e for e in events if e["event"] == "stacks"]
        assert stacks and all("MainThread" in (e["stacks"] or "") for e in stacks[:1]), stacks
        assert not leftovers(job_id)
    finally:
        s.close()


def test_a_request_never_read_and_asks_still_waiting_are_answered_at_the_end(tmp_path):
    store = Store(str(tmp_path / "jobs.db"))
    try:
        job_id = scheduler.submit(store, [sys.executable, "-c", "pass"])
    finally:
        store.close()
    k = keeper.Keeper(str(tmp_path / "jobs.db"), job_id)
    requests = os.path.join(k.row["dir"], procs.REQUESTS_DIR)
    os.makedirs(requests)
    unread = os.path.join(requests, "00000000000000000001-1-000000.json")
    with open(unread, "w") as f:
        json.dump({"id": "00000000000000000001-1-000000", "op": "send", "data": "late"}, f)
    k._asking["p"] = {"id": "p", "op": "ping"}
    k._asking["d"] = {"id": "d", "op": "dump_stacks"}
    k._answer_the_rest()
    k.events.close()
    k.store.close()
    with open(k.row["events_path"]) as f:
        replies = {e["request"]: e for e in map(json.loads, f) if e["event"] == "reply"}
    assert sorted(replies) == ["00000000000000000001-1-000000", "d", "p"], replies
    send = replies["00000000000000000001-1-000000"]
    assert send["op"] == "send" and not send["ok"], send
    assert "ended before its keeper read this request" in send["error"], send
    assert "not delivered" in send["error"], send
    for asked, op in (("p", "ping"), ("d", "dump_stacks")):
        assert replies[asked]["op"] == op and not replies[asked]["ok"], replies[asked]
        assert "ended before the worker answered" in replies[asked]["error"], replies[asked]
    assert not os.path.exists(unread)  # answered once
    assert k._asking == {}
