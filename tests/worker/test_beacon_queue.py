"""The beacon's sending rules, driven step by step against a socket that refuses sends
(libzmq's queue full): nothing lost, no seq gap, order kept, progress never goes back."""

from __future__ import annotations

import random

import pytest

from tests.worker.fakes import RefusingSocket, expand
from trainbridge.protocol import codec
from trainbridge.worker import runtime
from trainbridge.worker.runtime import SLOT


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
