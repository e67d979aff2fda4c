"""Fixtures for worker tests: a receiver playing the client, a scratch directory, and a
beacon that is never started (driven step by step)."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

from tests.worker.fakes import FakeZmq
from tests.worker.receiver import Receiver
from trainbridge.protocol import codec
from trainbridge.worker import runtime
from trainbridge.worker.beacon import Beacon
from trainbridge.worker.config import Config
from trainbridge.worker.runtime import SLOT, STATE


@pytest.fixture
def receiver():
    # ipc paths are limited to about 100 bytes, so the socket lives in a short /tmp dir.
    directory = tempfile.mkdtemp(prefix="tbw-", dir="/tmp")
    recv = Receiver(directory)
    try:
        yield recv
    finally:
        recv.close()
        shutil.rmtree(directory, ignore_errors=True)


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
