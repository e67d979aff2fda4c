"""The hang's evidence (bridge/evidence.py's collect: /proc, the kernel's stacks, sockets,
file locks, py-spy, for up to about a second) gathered on a thread of its own, so the I/O
thread keeps serving every job meanwhile. The thread writes only this part's `result`; the
job reads it on the I/O thread, when the thread says it is done (through Hub.call) or when
the job ends and joins it.

A part of bridge.job.Job that owns its state (the thread, its result)."""

from __future__ import annotations

import threading
from typing import Any, Callable, Optional

from trainbridge.bridge import evidence

JOIN_S = 3.0  # how long the job's end waits for a snapshot still being taken


class Snapshot:
    def __init__(self) -> None:
        self.thread: Optional[threading.Thread] = None
        self.result: Optional[dict[str, Any]] = None  # set by the thread, once

    def start(self, pid: int, done: Callable[[], None]) -> None:
        """Gather the evidence of `pid` on a thread of its own; `done()` is called there
        when `result` is set (a failure is a result too: its notes say what failed)."""

        def collect() -> None:
            try:
                found = evidence.collect(pid)
            except Exception as exc:  # noqa: BLE001 - evidence is best effort
                found = {"notes": [f"evidence failed: {type(exc).__name__}: {exc}"]}
            self.result = found
            done()

        self.thread = threading.Thread(target=collect, name="trainbridge-snapshot", daemon=True)
        self.thread.start()

    def join(self, timeout: float = JOIN_S) -> Optional[dict[str, Any]]:
        """The result, once the thread is done (waiting up to `timeout`); None when no
        snapshot was taken. One still being gathered then is said as such (its notes), not
        left out of the report unseen."""
        if self.thread is None:
            return None
        self.thread.join(timeout)
        if self.result is not None:
            return self.result
        return {
            "notes": [
                f"the hang's evidence was still being gathered {timeout:g} s after the job "
                "ended (a slow /proc, py-spy or NVML read): it is not in this report"
            ]
        }
