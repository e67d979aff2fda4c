"""Log records travel in `logs` batches (PROTOCOL.md): consecutive records only, so the
order of logs, stages, errors and progress is the script's; nothing is lost to batching."""

from __future__ import annotations

import os
import random
import textwrap

import pytest

from tests.worker.fakes import RefusingSocket, expand
from tests.worker.receiver import run_python
from trainbridge.protocol import codec
from trainbridge.worker import beacon as beacon_module
from trainbridge.worker import runtime
from trainbridge.worker.runtime import SLOT


def test_batches_keep_the_order_of_logs_stages_and_errors(receiver, tmp_path):
    proc = run_python(
        textwrap.dedent("""
        from trainbridge import worker
        for i in range(300):
            worker.log(f"before {i}", i=i)
        with worker.stage("middle"):
            for i in range(300):
                worker.log(f"inside {i}")
            worker.error("not fatal")
        worker.log("after")
    """),
        receiver.env(heartbeat_s="0.2"),
        str(tmp_path),
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    receiver.wait_for(lambda r: r.kind == "bye")
    seen = []
    for r in receiver.messages:
        if r.kind == "log":
            seen.append(r.body["message"])
        elif r.kind == "stage":
            seen.append(f"{r.body['event']} {r.body['name']}")
        elif r.kind == "error":
            seen.append(f"error {r.body['message']}")
    assert seen == (
        [f"before {i}" for i in range(300)]
        + ["begin middle"]
        + [f"inside {i}" for i in range(300)]
        + ["error not fatal", "end middle", "after"]
    )
    first = next(r.body for r in receiver.of_kind("log"))
    assert first["fields"] == {"i": 0} and first["level"] == "info" and "created" in first
    assert receiver.batches, "consecutive records went as logs batches"
    assert max(receiver.batches) <= beacon_module.LOG_BATCH


def test_a_50000_record_flood_arrives_complete_and_in_order(receiver, tmp_path):
    # The script keeps under the worker's 10,000-record queue (as a real one logging at its
    # own pace would): then batching must deliver every record, none dropped.
    proc = run_python(
        textwrap.dedent("""
        import time; from trainbridge import worker
        from trainbridge.worker.runtime import STATE
        for i in range(50000):
            while len(STATE.events) > 8000:
                time.sleep(0.0005)
            worker.log(f"flood {i}")
    """),
        receiver.env(heartbeat_s="0.2"),
        str(tmp_path),
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    receiver.wait_for(lambda r: r.kind == "bye", timeout=30)
    logs = [r.body["message"] for r in receiver.of_kind("log")]
    assert logs == [f"flood {i}" for i in range(50000)]
    assert all(r.body["dropped"]["log"] == 0 for r in receiver.of_kind("heartbeat"))
    assert len(receiver.batches) < 50000 // 10, "most records shared a message"


def test_a_batch_too_big_for_one_message_is_split_and_nothing_is_lost(beacon, monkeypatch):
    b, key = beacon
    b.sock = RefusingSocket(random.Random(0), refuse=0.0)
    # Let the cheap size estimate allow far more than fits, so the encoder says oversize.
    monkeypatch.setattr(beacon_module, "LOG_BATCH_BYTES", 1 << 40)
    for i in range(100):
        runtime.enqueue_log({"level": "info", "message": f"{i:03d}" + "x" * 16000})
    while b._send_queued(1.0):
        pass
    messages = [codec.decode(f, key, expect="worker") for f in b.sock.sent]
    assert all(len(f[0]) <= codec.MAX_MESSAGE_BYTES for f in b.sock.sent)
    assert len(messages) > 1 and [m.seq for m in messages] == list(range(1, len(messages) + 1))
    assert [m.body["message"][:3] for m in expand(messages)] == [f"{i:03d}" for i in range(100)]


def test_progress_between_logs_ends_a_batch(beacon):
    b, key = beacon
    b.sock = RefusingSocket(random.Random(0), refuse=0.0)
    for step in range(1, 4):
        SLOT[0] = (step, None, {})
        for i in range(3):
            runtime.enqueue_log({"level": "info", "message": f"{step}.{i}"})
    now = 1.0
    while b._send_queued(now) or SLOT[0] is not b.progress_sent:
        now += 1.0
    messages = [codec.decode(f, key, expect="worker") for f in b.sock.sent]
    assert [m.kind for m in messages] == ["progress", "logs"] * 3
    order = [
        m.body["step"] if m.kind == "progress" else m.body["message"] for m in expand(messages)
    ]
    assert order == [1, "1.0", "1.1", "1.2", 2, "2.0", "2.1", "2.2", 3, "3.0", "3.1", "3.2"]


@pytest.mark.parametrize("bad", ["missing", "not a map"])
def test_clients_reject_a_batch_with_a_record_that_is_not_a_log(bad):
    key = os.urandom(32)
    record = {"level": "info"} if bad == "missing" else "just text"
    frames = codec.encode(
        "logs", 1, {"records": [{"level": "info", "message": "ok"}, record]}, key, "j"
    )
    with pytest.raises(codec.ProtocolError) as info:
        codec.decode(frames, key, expect="worker")
    assert info.value.reason == "bad_field"
