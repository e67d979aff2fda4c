"""Raw output of a job as byte chunks, for callers that keep their own protocol on the
child's stdout/stderr (launch(..., raw=True): job.stdout, job.stderr).

The I/O thread feeds each chunk exactly as read from the pipe, then None at EOF; the
caller's thread iterates. Nothing is dropped: a caller that asked for raw output and does
not read it keeps the bytes in memory (the line events, the log and the report do not
depend on it)."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Iterator
from typing import Optional


class ChunkStream:
    """An iterator of the bytes chunks one stream of the job wrote, ending at EOF."""

    def __init__(self, name: str):
        self.name = name
        self._chunks: collections.deque[Optional[bytes]] = collections.deque()
        self._cond = threading.Condition()
        self._eof = False

    def feed(self, chunk: Optional[bytes]) -> None:
        """I/O thread: a chunk, or None at EOF."""
        with self._cond:
            if self._eof:
                return
            self._eof = chunk is None
            self._chunks.append(chunk)
            self._cond.notify_all()

    def next_chunk(self, timeout: Optional[float] = None) -> Optional[bytes]:
        """The next chunk; b"" at EOF; None if none came within `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not self._chunks:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self._cond.wait(left)
            chunk = self._chunks[0]
            if chunk is None:
                return b""  # EOF stays in the queue: every later call sees it too
            self._chunks.popleft()
            return chunk

    def __iter__(self) -> Iterator[bytes]:
        while True:
            chunk = self.next_chunk()
            if not chunk:
                return
            yield chunk

    def read(self) -> bytes:
        """Everything until EOF."""
        return b"".join(self)
