"""A Job's live status: the lead's stages and progress judged as status snapshots
(bridge/status.py's StatusTracker), which job.status() reads from any thread while the hub's
I/O thread feeds them, and when the feed's next `status` event is due. A part the Job holds
(job.live_status); the `status` event itself is published by the Job (job_actions)."""

from __future__ import annotations

import threading
from typing import Any, Optional

from trainbridge.bridge.status import StatusTracker

# The feed's `status` event goes out on every lead stage, progress and state change, and at
# least this often while the process lives: a stall's falling rate reaches the faces, and
# its coming is the supervisor's own heartbeat (docs/CLIENT.md "The status event").
STATUS_EVERY_S = 1.0


class LiveStatus:
    def __init__(self, t0: float):
        self._tracker = StatusTracker(t0)
        self._lock = threading.Lock()  # snapshot() may come from any thread
        self.next_at = 0.0  # monotonic time the next `status` event is due

    def track(self, kind: str, body: dict[str, Any], sent_at: float) -> None:
        """I/O thread: the lead's stage or progress message, at the time it was sent."""
        with self._lock:
            if kind == "stage":
                self._tracker.stage(body)
            else:
                self._tracker.progress(body, sent_at)

    def snapshot(self, state: str, pid: Optional[int], now: float) -> dict[str, Any]:
        """Any thread: the judged status now (bridge/status.py snapshot)."""
        with self._lock:
            return self._tracker.snapshot(state, pid, now)

    def published(self, now: float) -> None:
        """A `status` event went out at `now`: the next is due STATUS_EVERY_S later."""
        self.next_at = now + STATUS_EVERY_S
