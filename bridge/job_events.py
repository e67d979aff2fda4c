"""The event queue behind Job.events() and Job.next_event(): a bounded, thread-safe queue
whose consumer, when it falls behind, gets one "dropped" event saying exactly what it missed
(how many events, of which kinds, which output lines). The publisher is the hub's I/O thread;
the consumer any other thread. The Node twin is node-client/src/job_events.js."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Iterator
from typing import Any, Optional

EVENT_QUEUE = 10_000  # events kept for events(); the oldest go first when it is full


class EventQueue:
    """Events in order for one consumer; at most `maxlen` held (None: no bound)."""

    def __init__(self, maxlen: Optional[int] = EVENT_QUEUE) -> None:
        self._queue: collections.deque[dict[str, Any]] = collections.deque(maxlen=maxlen)
        self._queue_cond = threading.Condition()
        self._queue_dropped = 0
        self._dropped_kinds: dict[str, int] = {}  # of _queue_dropped, per event kind
        self._dropped_lines: dict[str, list[int]] = {}  # stream -> [first, last] line missed
        self._queue_waiting = 0  # threads in next_event's wait (guarded by _queue_cond)

    def put_all(self, events: list[dict[str, Any]]) -> None:
        """Queue the events, with one lock for the lot; the oldest go when it is full."""
        queue = self._queue
        with self._queue_cond:
            for event in events:
                if len(queue) == queue.maxlen:
                    self._note_dropped(queue[0])
                queue.append(event)
            if self._queue_waiting:  # notify costs more than the rest of a publish
                self._queue_cond.notify_all()

    def events(self, timeout: Optional[float] = None) -> Iterator[dict[str, Any]]:
        """Events since the job started, in order, until "end". One consumer at a time; a
        consumer that falls EVENT_QUEUE behind gets a "dropped" event instead of the oldest.
        With a timeout, the iteration stops when no event came for that long."""
        while True:
            event = self.next_event(timeout)
            if event is None:
                return
            yield event
            if event["event"] == "end":
                return

    def next_event(self, timeout: Optional[float] = 0) -> Optional[dict[str, Any]]:
        """The next event from the job's queue, waiting up to `timeout` (None: forever)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._queue_cond:
            while not self._queue:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self._queue_waiting += 1
                try:
                    self._queue_cond.wait(left)
                finally:
                    self._queue_waiting -= 1
            if self._queue_dropped:
                event = {
                    "event": "dropped",
                    "t": self._queue[0]["t"],
                    "count": self._queue_dropped,
                    "kinds": self._dropped_kinds,
                    "lines": self._dropped_lines,
                }
                self._queue_dropped, self._dropped_kinds, self._dropped_lines = 0, {}, {}
                return event
            return self._queue.popleft()

    def _note_dropped(self, event: dict[str, Any]) -> None:
        """Count an event the queue lets go, by kind, and the output lines it spans, so the
        `dropped` event can say exactly what a slow consumer missed."""
        self._queue_dropped += 1
        kinds = self._dropped_kinds
        kinds[event["event"]] = kinds.get(event["event"], 0) + 1
        if event["event"] == "output":
            span = self._dropped_lines.setdefault(event["stream"], [event["line"], 0])
            span[1] = event["line"]
