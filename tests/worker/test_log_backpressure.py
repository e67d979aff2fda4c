"""worker.log() applies backpressure (docs/WORKER.md): when its queue is full a call waits,
bounded, until the beacon has made room, so a script logging faster than the beacon sends
loses nothing; only a record that found no room within TRAINBRIDGE_LOG_WAIT_S is dropped,
and the final count travels in the `bye` as well as in heartbeats."""

from __future__ import annotations

import textwrap

from tests.worker.receiver import run_python


def test_200000_unpaced_logs_all_arrive_in_order(receiver, tmp_path):
    proc = run_python(
        textwrap.dedent("""
        from trainbridge import worker
        for i in range(200000):
            worker.log(f"record {i}")
    """),
        # What is tested is the wait for room, not its bound: the receiver here is a thread
        # of the test process, which a loaded machine (and coverage's tracing of it) slowed
        # past the default 5 s once (195,389 of 200,000, the rest counted as dropped).
        receiver.env(heartbeat_s="0.2", log_wait_s="60"),
        str(tmp_path),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    bye = receiver.wait_for(lambda r: r.kind == "bye", timeout=60).body
    logs = [r.body["message"] for r in receiver.of_kind("log")]
    assert len(logs) == 200000 and logs == [f"record {i}" for i in range(200000)]
    assert "dropped" not in bye  # the bye carries a count only when something was dropped


def test_a_starved_beacon_still_gets_to_drain_the_queue(receiver, tmp_path):
    # With a 30 s switch interval the beacon only runs when the logging thread blocks: the
    # wait for room must release the GIL (it is a wait, not a spin) or records are lost.
    proc = run_python(
        textwrap.dedent("""
        import sys; from trainbridge import worker
        sys.setswitchinterval(30)
        for i in range(50000):
            worker.log(f"flood {i}")
        sys.setswitchinterval(0.005)
    """),
        receiver.env(heartbeat_s="0.2", log_wait_s="2"),
        str(tmp_path),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    bye = receiver.wait_for(lambda r: r.kind == "bye", timeout=60).body
    assert len(receiver.of_kind("log")) == 50000 and "dropped" not in bye
