"""The per-rank faulthandler fallback at hang time: a rank whose beacon
did not answer the hang's dump_stacks (native code holds its GIL, say) still gets its stack
into `ranks`, as a single-process job does: from its SIGUSR1 dump in the crash file when its
main thread ran Python, else from SIGUSR2, faulthandler's C handler for the main thread.

Every process of a job writes to the one crash file, and a SIGUSR2 dump carries no pid, so
SIGUSR2 goes to one rank at a time and its dump is what the file grew by after it."""

from __future__ import annotations

import os
import time
from typing import Callable, Optional

__all__ = ["native_dump", "read_from", "size"]

NATIVE_WAIT_S = 0.5  # the longest to wait for one rank's SIGUSR2 dump to appear
_SETTLE_S = 0.02  # the file has stopped growing: faulthandler wrote the whole stack


def read_from(path: str, offset: int, limit: int = 1 << 20) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read(limit).decode("ascii", "replace")
    except OSError:
        return ""


def size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def native_dump(path: str, pid: int, send: Callable[[int], None]) -> Optional[str]:
    """Send SIGUSR2 to `pid` (through `send`) and return what faulthandler wrote for it:
    the crash file's growth once it stops growing, within NATIVE_WAIT_S. None when nothing
    came (the handler is not there, or the process is gone)."""
    start = size(path)
    send(pid)
    deadline = time.monotonic() + NATIVE_WAIT_S
    seen, since = start, time.monotonic()
    while time.monotonic() < deadline:
        now_size = size(path)
        if now_size != seen:
            seen, since = now_size, time.monotonic()
        elif seen > start and time.monotonic() - since >= _SETTLE_S:
            break
        time.sleep(0.005)
    return read_from(path, start, seen - start) if seen > start else None
