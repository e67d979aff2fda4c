"""The job list's change feed: what a GUI's list needs, with no polling by the GUI.

    with Scheduler().watch() as changes:       # or watch.Watch(store_path)
        for change in changes:                  # blocks; changes.next(timeout) to wait less
            ...  # {"event": "job", "change": "added" | "changed" | "removed", "id", "row", "t"}

The first changes are every row, oldest first, "added" with `initial: True`, so a face draws
its list from the feed alone; then one change per row written by anyone (a submit, a
keeper's progress, an end, a cancel): `changed` carries the whole row as it is now, `removed`
has `row: None` and `why` ("retention (keep_ended=N)" when the store's retention forgot it,
else "forgotten"). The queue's pause is a change too: {"event": "queue", "paused", "t"} (first
with `initial: True`, then whenever any process pauses or resumes it). Node:
`openStore().watch()` (the same changes, from the store helper).

How it knows: one thread per watch holds its own connection and asks SQLite's
`PRAGMA data_version` every WATCH_EVERY_S: a number in the WAL's shared memory that changes
when another connection commits, so a quiet store costs no query and no file read. When it
changed, the watch reads each row's (id, updated_at) and then the rows that are new or
newer. `diff` is the pure part.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from typing import Any, Callable, Optional

from trainbridge.bridge.job_events import EventQueue
from trainbridge.bridge.store import Store
from trainbridge.bridge.store_errors import StoreError

WATCH_EVERY_S = 0.1  # how soon a committed change is seen
RETAINED = "retained"  # the store setting retention writes: {keep_ended, count, at, last: ids}


def diff(
    known: dict[str, float], now: list[tuple[str, float]]
) -> tuple[list[str], list[str], list[str]]:
    """(added, changed, removed) ids between the rows known (id -> updated_at) and the rows
    now ((id, updated_at), oldest first); added and changed in the order of `now`."""
    seen = set()
    added, changed = [], []
    for job_id, updated in now:
        seen.add(job_id)
        if job_id not in known:
            added.append(job_id)
        elif known[job_id] != updated:
            changed.append(job_id)
    return added, changed, [job_id for job_id in known if job_id not in seen]


def removal_reason(job_id: str, retained: Optional[dict[str, Any]]) -> str:
    """Why a row is gone: the store's retention (its setting names the ids it forgot last)
    or a forget()."""
    if retained and job_id in (retained.get("last") or []):
        return f"retention (keep_ended={retained.get('keep_ended')})"
    return "forgotten"


class Watch:
    """The store's job list as changes (module docstring). Iterate it, or next(timeout);
    on_change(change) is called on the watch's thread as each comes. close() ends it (an
    iteration then stops). A store that fails while watched gives one change `error`
    ({"event": "error", "message", "kind"}) per new cause, and the watch goes on."""

    def __init__(
        self,
        store_path: Optional[str] = None,
        every: float = WATCH_EVERY_S,
        on_change: Optional[Callable[[dict[str, Any]], None]] = None,
    ):
        self._store = Store(store_path, create=False)
        self.path = self._store.path
        self._every = every
        self._on_change = on_change
        self._queue = EventQueue(maxlen=None)  # a GUI's list: every change, none dropped
        self._known: dict[str, float] = {}
        self._paused: Optional[bool] = None
        self._closed = threading.Event()
        self._ended = False  # the consumer has seen the close
        self._version = self._data_version()
        self._look(initial=True)  # before the thread: the first rows are there at once
        self._thread = threading.Thread(target=self._run, name="trainbridge-watch", daemon=True)
        self._thread.start()

    def __iter__(self) -> Iterator[dict[str, Any]]:
        while True:
            change = self.next(None)
            if change is None:
                return
            yield change

    def next(self, timeout: Optional[float] = 0) -> Optional[dict[str, Any]]:
        """The next change, waiting up to `timeout` seconds (None: until one comes or the
        watch is closed); None when none came, and always once the watch is closed."""
        if self._ended:
            return None
        change = self._queue.next_event(timeout)
        if change is not None and change["event"] == "closed":
            self._ended = True
            return None
        return change

    def close(self) -> None:
        if not self._closed.is_set():
            self._closed.set()
            self._thread.join()
            self._store.close()
            self._queue.put_all([{"event": "closed", "t": time.time()}])

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _data_version(self) -> int:
        return int(self._store.db.execute("PRAGMA data_version").fetchone()[0])

    def _run(self) -> None:
        said: Optional[str] = None
        while not self._closed.wait(self._every):
            try:
                version = self._data_version()
                if version != self._version:
                    self._version = version
                    self._look()
            except StoreError as exc:
                if str(exc) != said:
                    said = str(exc)
                    self._put({"event": "error", "message": str(exc), "kind": exc.kind})
            else:
                said = None

    def _look(self, initial: bool = False) -> None:
        db = self._store.db
        now = [(r[0], r[1]) for r in db.execute("SELECT id, updated_at FROM jobs ORDER BY seq")]
        added, changed, removed = diff(self._known, now)
        paused = bool(self._store.setting("paused"))
        if paused != self._paused:
            self._paused = paused
            event = {"event": "queue", "paused": paused, "t": time.time()}
            self._put({**event, "initial": True} if initial else event)
        retained = self._store.setting(RETAINED) if removed else None
        t = time.time()
        for change, ids in (("added", added), ("changed", changed)):
            for job_id in ids:
                row = self._store.get(job_id)
                if row is None:  # removed between the two reads: the next look says so
                    continue
                self._known[job_id] = row["updated_at"]
                event = {"event": "job", "change": change, "id": job_id, "row": row, "t": t}
                if initial:
                    event["initial"] = True
                self._put(event)
        for job_id in removed:
            del self._known[job_id]
            why = removal_reason(job_id, retained)
            self._put(
                {"event": "job", "change": "removed", "id": job_id, "row": None, "why": why, "t": t}
            )

    def _put(self, change: dict[str, Any]) -> None:
        self._queue.put_all([change])
        if self._on_change is not None:
            try:
                self._on_change(change)
            except Exception as exc:  # noqa: BLE001 - a listener's bug must not end the watch
                self._on_change = None  # the changes still queue for next() / iteration
                print(
                    f"trainbridge watch: on_change raised {type(exc).__name__}: {exc}; it is "
                    "not called again (the changes still come from next() and iteration)",
                    file=sys.stderr,
                    flush=True,
                )
