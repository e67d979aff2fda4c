"""The beacon's sending rules, driven step by step against a socket that refuses sends
(libzmq's queue full): nothing lost, no seq gap, order kept, progress never goes back."""

from __future__ import annotations

import os
import random

import pytest

from trainbridge.protocol import codec
from trainbridge.worker import runtime
from trainbridge.worker.beacon import Beacon
from trainbridge.worker.config import Config
from trainbridge.worker.runtime import SLOT, STATE


class Again(Exception):
    pass


class FakeZmq:
    NOBLOCK = 1
    Again = Again


class RefusingSocket:
    """Refuses each send with probability `refuse`; keeps what it accepted."""

    def __init__(self, rng: random.Random, refuse: float):
        self.rng, self.refuse, self.sent = rng, refuse, []

    def send_multipart(self, frames, flags=0, copy=True):
        if self.rng.random() < self.refuse:
            raise Again()
        self.sent.append(frames)


def expand(messages):
    """`logs` batches as the clients see them: one `log` message per record, in order."""
    out = []
    for m in messages:
        if m.kind == "logs":
            out += [m._replace(kind="log", body=record) for record in m.body["records"]]
        else:
            out.append(m)
    return out


@pytest.fixture
def beacon():
    """A Beacon that is never started, on this test process's (normally off) worker."""
    key = os.urandom(32)
    config = Config("ipc:///unused", "job", key, 0, None, 1.0, 10.0, 0.0, 5.0)
    saved = (STATE.enabled, STATE.events, SLOT[0])
    STATE.enabled, STATE.events, SLOT[0] = True, runtime.deque(), None
    b = Beacon(config)
    b.zmq, b.codec = FakeZmq, codec
    try:
        yield b, key
    finally:
        STATE.enabled, STATE.events, SLOT[0] = saved
        os.close(b.wake_r)
        os.close(b.wake_w)


@pytest.mark.parametrize("refuse", [0.0, 0.3])
@pytest.mark.parametrize("seed", range(4))
def test_refused_sends_lose_nothing_and_keep_order(beacon, seed, refuse):
    b, key = beacon
    rng = random.Random(seed)
    b.sock = RefusingSocket(rng, refuse=refuse)
    expected, step, now = [], 0, 0.0
    for i in range(6000):
        action = rng.random()
        if action < 0.5:
            step += 1
            SLOT[0] = (step, None, {})
        elif action < 0.8:
            runtime.enqueue_log({"level": "info", "message": f"log {i}"})
            expected.append(f"log {i}")
        else:
            depth = runtime.stage_begin(f"stage {i}", None)
            runtime.stage_end(f"stage {i}", depth, "ok", 0.0)
            expected += [f"begin stage {i}", f"end stage {i}"]
        if rng.random() < 0.0005:  # rarely: more than a batch (512) piles up in between
            now += rng.choice([0.01, 0.06])
            b._send_queued(now)
    while b._send_queued(now) or SLOT[0] is not b.progress_sent:
        now += 0.06
    messages = [codec.decode(f, key, expect="worker") for f in b.sock.sent]
    assert [m.seq for m in messages] == list(range(1, len(messages) + 1))
    messages = expand(messages)
    seen = [
        m.body["message"] if m.kind == "log" else f"{m.body['event']} {m.body['name']}"
        for m in messages
        if m.kind in ("log", "stage")
    ]
    assert seen == expected
    steps = [m.body["step"] for m in messages if m.kind == "progress"]
    assert steps == sorted(set(steps)) and steps[-1] == step


def test_progress_never_goes_back_when_more_than_a_batch_is_queued(beacon):
    b, key = beacon
    b.sock = RefusingSocket(random.Random(0), refuse=0.0)
    SLOT[0] = (1, None, {})
    b._send_queued(1.0)  # step 1 is sent
    for i in range(600):  # more than one loop's batch, all recorded at step 1
        runtime.enqueue_log({"level": "info", "message": f"log {i}"})
    SLOT[0] = (2, None, {})
    runtime.enqueue_log({"level": "info", "message": "at step 2"})
    SLOT[0] = (3, None, {})
    now = 2.0
    while b._send_queued(now) or SLOT[0] is not b.progress_sent:
        now += 1.0
    messages = expand(codec.decode(f, key, expect="worker") for f in b.sock.sent)
    order = [
        m.body["step"] if m.kind == "progress" else m.body["message"]
        for m in messages
        if m.kind == "progress" or m.body["message"] in ("log 599", "at step 2")
    ]
    assert order == [1, "log 599", 2, "at step 2", 3]
