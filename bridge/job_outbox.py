"""A Job's outbox: what job.send() gave before the worker's lead said hello, held in order
(at most OUTBOX_LIMIT) and sent when it does; what is still held when the job ends is counted
as undelivered in the report, never dropped silently."""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainbridge.bridge.channel import Channel

OUTBOX_LIMIT = 1000  # job.send() messages held until the worker says hello


class Outbox:
    """job.outbox. hold() on any thread; send() and drop() on the I/O thread."""

    def __init__(self) -> None:
        self._held: collections.deque[Any] = collections.deque()

    def hold(self, data: Any, lead_present: bool) -> None:
        """Keep `data` until send(). RuntimeError when OUTBOX_LIMIT wait for a hello."""
        if not lead_present and len(self._held) >= OUTBOX_LIMIT:
            raise RuntimeError(
                f"job.send: {OUTBOX_LIMIT} messages wait for the worker's "
                "hello; does the script import trainbridge.worker?"
            )
        self._held.append(data)

    def send(self, channel: Channel, lead: bytes) -> None:
        """Everything held, in order, to the lead."""
        while self._held:
            channel.send_to(lead, "user", {"data": self._held.popleft()})

    def drop(self) -> int:
        """The job ended: how many were never sent (no hello came); none is held after."""
        count = len(self._held)
        self._held.clear()
        return count
