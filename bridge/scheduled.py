"""One scheduled job, asked from outside its keeper (bridge.Scheduler, an attached job,
the CLI, the store server): cancel it (a queued one ends here; an active one's keeper stops
it), request a ping, a send or a stack dump through its keeper (a file in its requests/
directory, then SIGUSR2), and the end event written for a job whose keeper is gone.
Transactions on the store (bridge/store.py) and signals to keepers; below bridge/scheduler.py
and bridge/attach.py, which both ask through it."""

from __future__ import annotations

import itertools
import json
import os
import signal
import time
from typing import Any, Optional

from trainbridge.bridge import feed, jsonform, private_files, procs, report_text
from trainbridge.bridge.store import Store


def short_report(row: dict[str, Any], outcome: str, note: str) -> dict[str, Any]:
    """The report of a job whose keeper could not write one: what the store knows."""
    report = {
        "outcome": outcome,
        "exit_code": None,
        "signal": None,
        "stage": row["stage"],
        "progress": row["progress"],
        "note": note,
        "summary": f"Job {outcome}: {note}.",
    }
    report["reason"] = report_text.reason(report)
    return report


def append_end_event(row: dict[str, Any], report: dict[str, Any]) -> Optional[str]:
    """Attached clients learn the end from the feed, like any other end: the next number
    after the keeper's last line (the keeper is gone, so nobody else writes). Called inside
    the transaction that writes the row's end, so a face that reads the row ended finds the
    line; a feed that has its end already gets no second one. None when the line is in the
    feed; else why it could not be written (the caller leaves end_pending set and says so in
    the row's report, report_text.owe_end_line, and reconcile() tries again)."""
    path = row["events_path"]
    event = {"event": "end", "t": time.time(), "outcome": report["outcome"], "report": report}
    try:
        if feed.ends(path):
            return None
        torn = feed.torn(path)  # a keeper killed mid-write: end its half line first
        try:
            line = ("\n" if torn else "") + feed.encode(feed.last_seq(path, torn) + 1, event)
        except feed.FeedError:  # written by an older release: its lines carry no number
            line = jsonform.dumps(event) + "\n"
        with os.fdopen(private_files.open_append(path), "a", encoding="ascii") as f:
            f.write(line)
    except OSError as exc:
        return f"{private_files.error_text(exc)}, writing {path}"
    return None


CANCEL_REASON_MAX = 1000  # characters of a cancel's reason


def check_cancel(reason: Any, grace: Any) -> None:
    """A cancel's reason (None or a string) and grace (None or seconds >= 0), as launch()'s
    Job.cancel() takes them; ValueError / TypeError saying what is wrong."""
    if reason is not None and not isinstance(reason, str):
        raise TypeError(f"cancel: reason must be a string or None, not {type(reason).__name__}")
    if reason is not None and len(reason) > CANCEL_REASON_MAX:
        raise ValueError(f"cancel: reason is {len(reason)} characters; at most {CANCEL_REASON_MAX}")
    if grace is not None and (
        isinstance(grace, bool) or not isinstance(grace, (int, float)) or not 0 <= grace < 1e9
    ):
        raise ValueError(f"cancel: grace must be None or seconds >= 0, not {grace!r}")


def signal_keeper(row: Optional[dict[str, Any]], signum: int) -> bool:
    """Send the job's keeper `signum` (SIGUSR1: dump stacks; SIGUSR2: read the requests)
    when it can take it: it is alive (pid and start time) and its job has a process. The
    row names a keeper at spawn, before it installs its handlers (whose default action ends
    it); it sets job_pid after. False when the signal was not sent."""
    if not row or row["job_pid"] is None:
        return False
    if not procs.same_process(row["keeper_pid"], row["keeper_start"]):
        return False
    os.kill(row["keeper_pid"], signum)
    return True


REQUEST_OPS = ("ping", "send", "dump_stacks")


_request_count = itertools.count()


PING_TIMEOUT_S = 2.0  # an attached ping waits this long for the worker, as Job.ping()'s default


PING_TIMEOUT_MAX_S = 60.0  # and at most this long: the keeper holds a thread while it waits


def check_ping_timeout(timeout: Any, op: str = "ping") -> None:
    """An attached ping's or dump_stacks' timeout: seconds, more than 0 and at most
    PING_TIMEOUT_MAX_S (refused here rather than cut short by the keeper without a word)."""
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise ValueError(f"{op}: timeout must be a number of seconds, not {timeout!r}")
    if not 0 < timeout <= PING_TIMEOUT_MAX_S:
        raise ValueError(
            f"{op}: timeout must be more than 0 and at most {PING_TIMEOUT_MAX_S:g} s for a "
            f"scheduled job (its keeper waits no longer), got {timeout!r}"
        )


def request(store: Store, job_id: str, op: str, data: Any = None) -> str:
    """Ask a running job's keeper to ping its worker (`ping`), to ask it for every thread's
    stack (`dump_stacks`) or to pass `data` to the training script (`send`, as launch()'s
    Job.send). The request is a file in the job's `requests/` directory (0600; named so that
    one asker's requests sort in the order asked), then SIGUSR2 wakes the keeper; it answers
    with a `reply` event in the feed: {"request": id, "op", "ok", "rtt_s" (ping), "stacks"
    (dump_stacks), "error"}. Returns the request id. ValueError for a bad op, a message that
    cannot be sent or a timeout out of range (data {"timeout": s}, ping and dump_stacks);
    RuntimeError when the job has no live keeper."""
    if op not in REQUEST_OPS:
        raise ValueError(f"request: op must be one of {', '.join(REQUEST_OPS)}, not {op!r}")
    if op == "send":
        from trainbridge.bridge.job import check_message

        check_message(data)  # what launch()'s Job.send() accepts
    else:
        check_ping_timeout((data or {}).get("timeout", PING_TIMEOUT_S), op)
    row = store.get(job_id)
    if row is None:
        raise KeyError(f"no job {job_id!r} in {store.path}")
    if row["state"] == "ended":
        raise RuntimeError(f"job {job_id} has ended ({row['outcome']})")
    if row["job_pid"] is None or not procs.same_process(row["keeper_pid"], row["keeper_start"]):
        raise RuntimeError(
            f"job {job_id} has no running process (state {row['state']}): ping, dump_stacks "
            "and send reach a job once it runs"
        )
    request_id = f"{time.time_ns():020d}-{os.getpid()}-{next(_request_count):06d}"
    directory = os.path.join(row["dir"], procs.REQUESTS_DIR)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    body = json.dumps({"id": request_id, "op": op, "data": data}, ensure_ascii=True)
    private_files.write_atomic(os.path.join(directory, request_id + ".json"), body.encode())
    if not signal_keeper(row, signal.SIGUSR2):
        raise RuntimeError(f"job {job_id}: its keeper ended while it was asked")
    return request_id


def cancel(
    store: Store, job_id: str, reason: Optional[str] = None, grace: Optional[float] = None
) -> bool:
    """Cancel a queued job (it never runs) or an active one (its keeper stops it: in-band
    cancel with `reason`, SIGTERM after `grace` (the job's cancel_grace when None), SIGKILL).
    False when the job is unknown or already ended."""
    check_cancel(reason, grace)
    report = short_report(
        {"stage": None, "progress": None}, "cancelled", "cancelled while queued, it never ran"
    )
    with store.transaction() as db:
        row = db.execute(
            "SELECT state, keeper_pid, keeper_start, events_path FROM jobs WHERE id = ?", (job_id,)
        ).fetchone()
        if row is None or row[0] == "ended":
            return False
        if row[0] == "queued":
            now = time.time()
            error = append_end_event({"events_path": row[3]}, report)
            if error:
                report = report_text.owe_end_line(report, error)
            db.execute(
                "UPDATE jobs SET state = 'ended', outcome = 'cancelled', ended_at = ?, "
                "updated_at = ?, cancel_requested = 1, note = ?, report = ?, end_pending = ? "
                "WHERE id = ?",
                (now, now, report["note"], jsonform.dumps(report), 1 if error else None, job_id),
            )
            queued = True
        else:
            db.execute(
                "UPDATE jobs SET cancel_requested = 1, cancel_reason = ?, cancel_grace = ?, "
                "updated_at = ? WHERE id = ?",
                (reason, grace, time.time(), job_id),
            )
            queued = False
    if queued:
        return True
    if procs.same_process(row[1], row[2]):
        os.kill(row[1], signal.SIGTERM)
    return True
