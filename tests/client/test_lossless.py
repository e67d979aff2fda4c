"""Nothing is lost silently: 200,000 unpaced worker.log() calls reach the
client's listeners, all of them; what the worker had to drop (past its stated bound) is
counted in the report's `dropped` and said in its summary."""

import os
import re
import time

import psutil


def log_unpaced(run, n, env, after_each=None, pids=None):
    """(messages the listener saw, report) for a script that calls worker.log(str(i)) for i
    in range(n) as fast as it can; after_each(seen) runs in the listener after each record
    (`pids` gets the sender's pid before the first)."""
    seen = []

    def on_event(event):
        if event["event"] == "message" and event["kind"] == "log":
            if pids is not None and not seen:
                pids.append(event["sender"]["pid"])
            seen.append(event["body"]["message"])
            if after_each is not None:
                after_each(seen)

    code = f"""
        from trainbridge import worker
        for i in range({n}):
            worker.log(str(i))
    """
    _, report = run(code, on_event=on_event, env={**os.environ, **env}, moving=lambda: len(seen))
    return seen, report


def test_200000_unpaced_logs_all_reach_the_listener(run):
    # A log() call waits for room up to TRAINBRIDGE_LOG_WAIT_S (5 s by default), then drops
    # and counts (the next test). Beside two CPU-bound loops the beacon and this listener
    # were once slower than that (161,024 of 200,000 arrived, the rest counted): what this
    # test checks is that the pipe loses nothing while the bound holds, so the bound is one a
    # loaded machine meets.
    seen, r = log_unpaced(run, 200000, {"TRAINBRIDGE_LOG_WAIT_S": "120"})
    assert r["outcome"] == "succeeded"
    missing = sorted(set(range(200000)) - {int(x) for x in seen})
    where = f"{len(seen)} seen; dropped {r['dropped']}; missing {missing[:5]}..{missing[-5:]}"
    assert len(seen) == 200000 and seen == [str(i) for i in range(200000)], where
    assert r["dropped"] == {"log": 0} and "dropped" not in r["summary"]


def test_drops_past_the_bound_are_counted_in_the_report_and_its_summary(run):
    seen = []

    def on_event(event):
        if event["event"] == "message" and event["kind"] == "log":
            seen.append(event["body"]["message"])

    _, r = run(
        """
        import sys; from trainbridge import worker
        sys.setswitchinterval(30)  # the beacon cannot run: the queue stays full
        for i in range(30000):
            worker.log(str(i))
    """,
        on_event=on_event,
        env={**os.environ, "TRAINBRIDGE_LOG_WAIT_S": "0"},
    )
    assert r["outcome"] == "succeeded"
    dropped = r["dropped"]["log"]
    assert dropped > 0 and dropped + len(seen) == 30000, "every record delivered or counted"
    assert f"The worker dropped {dropped} log records" in r["summary"]


def test_a_slow_client_that_still_reads_gets_every_record_at_exit(run):
    """The script ends long before its client has read its logs: its last words wait while
    the client reads (PROTOCOL.md section 6), not a fixed TRAINBRIDGE_ACK_TIMEOUT_S from the
    end of the script (5 s by default). This client takes about 8 s to read what was sent
    in one; what libzmq still holds once the worker's own queue is empty (at most 128
    messages: 2.5 s of this client) it reads well inside the timeout."""

    def slow(seen):
        if len(seen) % 256 == 0:
            time.sleep(0.02)  # a listener that does real work: slower than the script

    seen, r = log_unpaced(run, 100000, {"TRAINBRIDGE_LOG_WAIT_S": "120"}, slow)
    assert r["outcome"] == "succeeded"
    assert seen == [str(i) for i in range(100000)], f"{len(seen)} of 100000 arrived"
    assert r["worker"]["bye"] is not None and "last words" not in r["summary"]


def test_a_client_that_takes_nothing_at_exit_is_given_up_on_and_the_loss_is_said(run):
    """A client that stops reading cannot hold the script's exit for ever: after
    TRAINBRIDGE_ACK_TIMEOUT_S without taking anything the process leaves, says on stderr how
    many records never left, and the report counts them (protocol.unsent) and says so. (Records the
    worker had no room for meanwhile are counted in `dropped`, the other test's subject.)"""

    def stop_reading(seen):
        if len(seen) == 1:  # the client stops reading until the child is gone
            child = psutil.Process(pids[-1])
            deadline = time.monotonic() + 60  # not wait(): that would reap the child
            while child.is_running() and child.status() != psutil.STATUS_ZOMBIE:
                assert time.monotonic() < deadline, "the child did not end"
                time.sleep(0.05)

    pids = []
    env = {"TRAINBRIDGE_LOG_WAIT_S": "0.5", "TRAINBRIDGE_ACK_TIMEOUT_S": "1"}
    seen, r = log_unpaced(run, 100000, env, stop_reading, pids)
    assert r["outcome"] == "succeeded"
    said = [line for line in r["log_tail"] if "were never sent" in line]
    assert said, (r["log_tail"][-5:], r["summary"], r["output"], len(seen))
    # "...; N queued records ... were never sent, and M log records were dropped ..."
    found = re.search(r"; (\d+) queued records .* (\d+) log records were dropped", said[0])
    assert found, said[0]
    unsent, dropped = int(found[1]), int(found[2])
    assert 0 < unsent and 0 < dropped and len(seen) + unsent + dropped <= 100000
    # The same number is a field of the report, not only a line of stderr.
    assert r["protocol"]["unsent"] == unsent, r["protocol"]
    assert f"{unsent} records the worker queued at exit" in r["summary"], r["summary"]
