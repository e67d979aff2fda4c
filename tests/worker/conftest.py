"""Fixtures for worker tests: a receiver playing the client, and a scratch directory."""

from __future__ import annotations

import shutil
import tempfile

import pytest

from tests.worker.receiver import Receiver


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
