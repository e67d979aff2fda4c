"""Attached: a scheduled job seen from any process, with launch()'s Job API.

It tails the job's feed (the numbered events file its keeper writes, bridge/feed.py, docs/STORE.md
"Events file") from its first line, from now, or from event N, so an attacher gets the log so
far (or what it missed) and then the live events, and it
reads the store's row when the file has nothing new (a keeper that was lost writes no end:
reconcile() appends one, and the row says it too). What it judges beyond the lines (the keeper
not answering, the end from the row) is bridge/feed_judge.py's, as for Node's attached job.
Commands go to the keeper: cancel through
the store and SIGTERM; ping, dump_stacks and send as request files and SIGUSR2 (the answer
comes back as a "reply" event, to that request).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any, BinaryIO, Callable, Optional, Union

from trainbridge.bridge import feed, jsonform, scheduled
from trainbridge.bridge.feed_judge import FeedJudge
from trainbridge.bridge.job_events import EventQueue
from trainbridge.bridge.report import Report
from trainbridge.bridge.status import StatusTracker
from trainbridge.bridge.store import Store

POLL_S = 0.05  # how often the events file is read for new lines
REPLY_SLACK_S = 1.0  # a reply (ping, dump_stacks) may come this long after the keeper's own timeout
MAX_REPLIES = 256  # replies kept for a waiter: any face's requests are in the same feed
ROW_EVERY_S = 0.5  # how often the row is read while the file is quiet
# since="start": every event from the first; "now": the job's state and its supervisor's
# last `status` (the snapshot a face draws), then what comes next; an int N: every event
# numbered N or more (a face that saw up to `position` rejoins with position + 1). A job
# that printed 200,000 lines is a 35 MB feed: "now" reads its end only (feed.CATCH_UP_BYTES
# at most), N bisects it (bridge/feed.py).
SINCE = ("start", "now")
READ_BYTES = 1024 * 1024  # the events file is read this much at a time: the first event is
# published before the rest of a long file is read (a 35 MB file took 0.5 s to its first)


class Attached:
    def __init__(
        self,
        store_path: str,
        job_id: str,
        on_event: Optional[Callable[[dict[str, Any]], None]] = None,
        since: Union[str, int] = "start",
    ):
        if since not in SINCE and (
            isinstance(since, bool) or not isinstance(since, int) or since < 1
        ):
            raise ValueError(
                f"attach: since must be 'start', 'now' or an event number from 1, not {since!r}"
            )
        self.since = since
        self.id = job_id
        self.store_path = store_path
        self._store = Store(store_path)
        row = self._store.get(job_id)
        if row is None:
            raise KeyError(f"no job {job_id!r} in {store_path}")
        self.row = row
        self.cmd = row["command"]
        self.log_path = row["log_path"]
        self._state: str = row["state"]
        self.report: Optional[Report] = None
        self._callbacks: list[Callable[[dict[str, Any]], None]] = [on_event] if on_event else []
        # The events file holds every event, so nothing is dropped here: no bound.
        self._events = EventQueue(maxlen=None)
        self._cond = threading.Condition()  # guards _callbacks and _replies
        self._done = threading.Event()
        self._closed = threading.Event()
        self._replies: dict[str, dict[str, Any]] = {}  # request id -> the keeper's reply
        # False while the keeper is not answering (a `supervisor` event said so), else None
        # (not judged yet) or True.
        self.answering: Optional[bool] = None
        # status(): the keeper's latest `status` event, as its Job judged it (never judged
        # again here); before the first, what the row says.
        self._status: Optional[dict[str, Any]] = None
        # The feed number (`seq`) of the last event read from the job's feed: attach again
        # with since=position + 1 to go on from here without a gap or a repeat.
        self.position: Optional[int] = None
        # Lines of the feed that are not an event (a keeper killed mid-line, a damaged
        # file): counted and said (an `unreadable` event), never skipped silently.
        self.unreadable = 0
        self._start = 0
        if isinstance(since, int):  # checked here, so a bad number fails the caller
            self._start = feed.offset_of(row["events_path"], since)
        self._thread = threading.Thread(
            target=self._tail, daemon=True, name=f"trainbridge-attach-{job_id}"
        )
        self._thread.start()

    # --- Job's API ------------------------------------------------------------------------
    @property
    def state(self) -> str:
        return self._state

    @property
    def outcome(self) -> Optional[str]:
        return self.report.get("outcome") if self.report else None

    @property
    def pid(self) -> Optional[int]:
        return self.row.get("job_pid")

    def done(self) -> bool:
        return self._done.is_set()

    def status(self) -> dict[str, Any]:
        """launch()'s Job.status() snapshot (state, pid, elapsed_s, stages, script_stages,
        step, total, metrics, rate, eta_s, progress_age_s) as the keeper's Job published it
        last in the feed (`status` events, at least once a second while the job runs)."""
        status = self._status
        if status is None:
            status = StatusTracker(0.0).snapshot(self._state, self.pid, 0.0)
        return dict(status)

    def wait(self, timeout: Optional[float] = None) -> Optional[Report]:
        if not self._done.wait(timeout):
            return None
        return self.report

    def cancel(self, grace: Optional[float] = None, reason: Optional[str] = None) -> bool:
        """Cancel the job (queued or running) for everyone, as launch()'s Job.cancel(): the
        keeper's Job sends the in-band cancel with `reason` (else "cancelled through the job
        store") and SIGTERM after `grace` (else the job's cancel_grace)."""
        store = Store(self.store_path)
        try:
            return scheduled.cancel(store, self.id, reason=reason, grace=grace)
        finally:
            store.close()

    def dump_stacks(self, timeout: float = 2.0) -> Optional[str]:
        """Every thread's Python stack from the worker (through the keeper, which waits
        `timeout` for it), or None (no worker, no answer, no running keeper). ValueError for a
        timeout that is not more than 0 and at most 60 s (the keeper waits no longer)."""
        try:
            asked = self._request("dump_stacks", {"timeout": timeout})
        except RuntimeError:
            return None  # ended, or not started yet: nobody to ask
        reply = self._reply(asked, timeout + REPLY_SLACK_S)
        return reply.get("stacks") if reply and reply.get("ok") else None

    def ping(self, timeout: float = 2.0) -> Optional[float]:
        """As launch()'s Job.ping(): the round trip between the job's supervisor (its keeper)
        and the worker, in seconds, or None (no worker, no answer, no running keeper). The
        keeper pings and answers with a `reply` event in the feed. ValueError for a timeout
        that is not more than 0 and at most 60 s (the keeper waits no longer)."""
        try:
            asked = self._request("ping", {"timeout": timeout})
        except RuntimeError:
            return None  # ended, or not started yet: nobody to ask
        reply = self._reply(asked, timeout + REPLY_SLACK_S)
        return reply.get("rtt_s") if reply and reply.get("ok") else None

    def send(self, data: Any, timeout: float = 5.0) -> None:
        """As launch()'s Job.send(): pass `data` to the training script (worker.on_message()
        / worker.receive()), in order, through the keeper, which holds it until the worker's
        hello. Waits for the keeper's `reply`. ValueError when it cannot be sent (too large,
        not JSON-like); RuntimeError when the job ended, has no running keeper yet, or the
        keeper refused it or did not answer within `timeout` (then it may still arrive)."""
        asked = self._request("send", data)
        reply = self._reply(asked, timeout)
        if reply is None and self._done.is_set():
            raise RuntimeError(
                f"job.send: job {self.id} ended ({self.outcome}) before "
                "its keeper answered; the message may not have been delivered"
            )
        if reply is None:
            raise RuntimeError(
                f"job.send: the keeper of {self.id} did not answer in {timeout:g} s "
                "(stopped or starved?); the message may still be delivered"
            )
        if not reply.get("ok"):
            raise RuntimeError(f"job.send: {reply.get('error')}")

    def _request(self, op: str, data: Any) -> str:
        store = Store(self.store_path)
        try:
            return scheduled.request(store, self.id, op, data)
        finally:
            store.close()

    def _reply(self, request_id: str, timeout: float) -> Optional[dict[str, Any]]:
        """The keeper's `reply` to that request, or None (the timeout, or the job ended)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while request_id not in self._replies:
                left = deadline - time.monotonic()
                if left <= 0 or self._done.is_set() or self._closed.is_set():
                    return None
                self._cond.wait(min(left, 0.5))
            return self._replies.pop(request_id)

    def add_listener(self, callback: Callable[[dict[str, Any]], None]) -> None:
        with self._cond:
            self._callbacks.append(callback)

    def events(self, timeout: Optional[float] = None) -> Iterator[dict[str, Any]]:
        """As Job.events() (the same queue, bridge/job_events.py)."""
        return self._events.events(timeout)

    def next_event(self, timeout: Optional[float] = 0) -> Optional[dict[str, Any]]:
        return self._events.next_event(timeout)

    def close(self) -> None:
        """Stop following (the job goes on)."""
        self._closed.set()
        self._thread.join()

    def _say_unreadable(self, line: bytes, exc: ValueError) -> None:
        """The `unreadable` event: a line of the feed is not an event. What it held is lost
        to every face; the count and where it was are not."""
        self.unreadable += 1
        error = " ".join(str(exc).split())[:120].encode("ascii", "backslashreplace").decode()
        self._publish(
            {
                "event": "unreadable",
                "t": time.time(),
                "count": self.unreadable,
                "after_seq": self.position,
                "bytes": len(line),
                "error": error,
            }
        )

    def _say(self, said: Optional[dict[str, Any]]) -> None:
        """A `supervisor` event the judge made (bridge/feed_judge.py): the keeper stopped
        answering, or answers again."""
        if said is not None:
            self.answering = said["answering"]
            self._publish({**said, "t": time.time()})

    # --- the tail thread --------------------------------------------------------------------
    def _before(self, event: dict[str, Any]) -> bool:
        """Whether the event comes before the number asked for (since=N): the feed's end was
        before N when the tail began (a queued job has no feed yet), so the lines that came
        since start below N."""
        since, seq = self.since, event.get("seq")
        return isinstance(since, int) and isinstance(seq, int) and seq < since

    def _publish(self, event: dict[str, Any]) -> None:
        kind = event.get("event")
        if isinstance(event.get("seq"), int):
            self.position = event["seq"]
        if kind == "status":
            self._status = event.get("status") or None
        if kind == "state":
            self._state = event["state"]
        elif kind == "end":
            self._state = "ended"
            self.report = Report(event.get("report") or {"outcome": event.get("outcome")})
            event["report"] = self.report
        with self._cond:
            if kind == "reply" and event.get("request"):
                self._replies[event["request"]] = event
                while len(self._replies) > MAX_REPLIES:  # others' replies nobody waits for
                    self._replies.pop(next(iter(self._replies)))
                self._cond.notify_all()
            callbacks = list(self._callbacks)
        self._events.put_all([event])
        for callback in callbacks:
            try:
                callback(event)
            except Exception:  # noqa: BLE001 - a listener's bug must not stop the tail
                with self._cond:
                    if callback in self._callbacks:
                        self._callbacks.remove(callback)
        if kind == "end":
            self._done.set()

    def _tail(self) -> None:
        path = self.row["events_path"]
        buf = b""
        f = None
        start = self._start
        if self.since == "now":
            start, status = feed.last_status(path)
            self._publish({"event": "state", "state": self._state, "t": time.time()})
            if status is not None:
                self._publish(status)
        next_row = 0.0
        judge = FeedJudge()
        try:
            while not self._closed.is_set():
                if f is None:
                    f = _open_at(path, start)
                chunk = f.read(READ_BYTES) if f is not None else b""
                if chunk:
                    self._say(judge.grew(time.monotonic(), self.row))
                    buf, ended = self._take_lines(buf + chunk)
                    if ended:
                        return
                    continue
                now = time.monotonic()
                if now >= next_row:
                    next_row = now + ROW_EVERY_S
                    row = self._store.get(self.id)
                    if row is None or row["state"] == "ended":
                        # Read once more: the end line may have been written just before.
                        more = f.read() if f is not None else b""
                        if more:
                            buf, ended = self._take_lines(buf + more)
                            if ended:
                                return
                            continue
                        if not judge.end_from_row(now, row):
                            self._closed.wait(POLL_S)
                            continue
                        self._publish(row_end(row))
                        return
                    self.row = row
                self._say(judge.quiet(now, self.row))
                self._closed.wait(POLL_S)
        finally:
            if f is not None:
                f.close()
            self._store.close()

    def _take_lines(self, data: bytes) -> tuple[bytes, bool]:
        """Publish the whole lines of `data` (a torn line is said, never skipped); returns
        what is left of a line not yet whole, and whether the end line was among them."""
        *lines, rest = data.split(b"\n")
        lines = [line for line in lines if line.strip()]
        try:  # the whole chunk at once (a long feed's catch-up); a torn line: one by one
            events: list[Any] = jsonform.loads_lines(lines)
        except ValueError:
            events = []
            for line in lines:
                try:
                    events.append(jsonform.loads(line))
                except ValueError as exc:  # a keeper killed mid-line: its torn line
                    events.append((line, exc))
        for event in events:
            if isinstance(event, tuple):
                self._say_unreadable(*event)
                continue
            if self._before(event):
                continue
            self._publish(event)
            if event.get("event") == "end":
                return rest, True
        return rest, False


def _open_at(path: str, start: int) -> Optional[BinaryIO]:
    """The events file, read from `start`; None while it does not exist yet."""
    try:
        f = open(path, "rb")
    except OSError:
        return None
    f.seek(start)
    return f


def row_end(row: Optional[dict[str, Any]]) -> dict[str, Any]:
    """The `end` event made from the row (no line of the feed: no `seq`): the keeper is gone
    without writing the feed's end line, or the job was forgotten (row None). Its `t` is
    when the row says the job ended (a face's timeline; Node's store.js does the same),
    else now."""
    ended_at = row.get("ended_at") if row else None
    return {
        "event": "end",
        "t": ended_at if isinstance(ended_at, (int, float)) else time.time(),
        "outcome": row and row["outcome"],
        "report": (row and row["report"])
        or {
            "outcome": row and row["outcome"],
            "note": row["note"] if row else "the job was forgotten (its row left the store)",
        },
    }
