"""A Job's publisher: every event the job publishes goes to its listeners (on_event,
add_listener) and to its queue for events() / next_event(), in order, on the hub's I/O thread.
A listener that raises is removed and said in the job's log, never the end of supervision."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable, Optional

from trainbridge.bridge.job_events import EVENT_QUEUE, EventQueue

if TYPE_CHECKING:
    from trainbridge.bridge.hub import Hub

Listener = Callable[[dict[str, Any]], None]


class Publisher:
    """job.publisher. `events`: keep a queue for events() (False: nobody will read it, so no
    event is kept); `log`: where a failed listener is said (the job's log)."""

    def __init__(
        self, hub: Hub, events: bool, on_event: Optional[Listener], log: Callable[[str], None]
    ) -> None:
        self._hub = hub
        self._log = log
        self._listeners: list[Listener] = [on_event] if on_event else []
        self._queue: Optional[EventQueue] = EventQueue(EVENT_QUEUE) if events else None

    def add(self, listener: Listener) -> None:
        """I/O thread: `listener(event)` for every later event."""
        self._listeners.append(listener)

    def wanted(self) -> bool:
        """Whether anybody hears an event: an output line with no listener makes none."""
        return self._queue is not None or bool(self._listeners)

    def queue(self) -> EventQueue:
        """The queue behind events() / next_event(); RuntimeError when none is kept."""
        if self._queue is None:
            raise RuntimeError(
                "this Job was made with events=False, so it keeps no events: make it with "
                "events=True (the default) to read events() / next_event(), or pass on_event"
            )
        return self._queue

    def publish(self, event: dict[str, Any]) -> None:
        event.setdefault("t", time.time())
        self.publish_all([event])

    def publish_all(self, events: list[dict[str, Any]]) -> None:
        """Queue the events for events() and hand each to every listener, in order, with one
        lock for the lot (a `logs` batch holds up to 256 records)."""
        self._hub.io_only("a job's publish")
        if self._queue is not None:
            self._queue.put_all(events)
        for event in events:  # each event to every listener before the next event
            for listener in list(self._listeners):
                try:
                    listener(event)
                except Exception as exc:  # noqa: BLE001 - a listener's bug must not kill supervision
                    self._listeners.remove(listener)
                    self._log(
                        f"[trainbridge] event listener {listener!r} failed and was "
                        f"removed: {type(exc).__name__}: {exc}"
                    )

    def publish_records(
        self, rank: int, records: list[dict[str, Any]], sender: dict[str, Any]
    ) -> None:
        """Each record of a `logs` batch as its own `log` message event, with one clock read
        and one lock for the batch (a batch holds up to 256 records)."""
        t = time.time()
        events = [
            {
                "event": "message",
                "kind": "log",
                "rank": rank,
                "body": record,
                "t": t,
                "sender": sender,
            }
            for record in records
        ]
        self.publish_all(events)
