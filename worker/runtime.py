"""Shared state between the training code's threads and the beacon thread.

Callers only append to deques, store into the progress slot or read plain attributes:
CPython makes each of those atomic, so the hot paths take no lock. The beacon thread
(worker/beacon.py) is the only reader of the queues and the only user of the socket.

Light on purpose: no zmq, msgpack, psutil or torch here (`import worker` must stay cheap).
"""

from __future__ import annotations

import os
import sys
import time

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (milliseconds)

try:  # the C type itself: `collections` costs a millisecond that scripts may not pay
    from _collections import deque as deque  # type: ignore[import-not-found]  # no stub
except ImportError:  # pragma: no cover - other Python implementations
    from collections import deque as deque

if TYPE_CHECKING:
    import threading
    from typing import Any, Optional, TextIO

    from trainbridge.worker.beacon import Beacon
    from trainbridge.worker.config import Config

LOG_QUEUE_LIMIT = 10_000
# A waiting log() call is woken when the queue is down to this: it then fills half the queue
# without waiting again (waking it for every free slot would hand the GIL over per record).
LOG_QUEUE_LOW = LOG_QUEUE_LIMIT // 2
# Backpressure (docs/WORKER.md): a log() call that finds LOG_QUEUE_LIMIT items waiting
# waits, as a write to a full pipe would, until the beacon has made room, for at most
# TRAINBRIDGE_LOG_WAIT_S (default 5 s). Only a record that found no room in that time is
# dropped and counted (`dropped.log`), and later calls then do not wait again until the
# queue has room: a client that stopped reading costs the script one wait, not one per call.

# The latest progress as (step, total, metrics): progress() replaces the tuple and the
# beacon notices the new identity. A one-item list so that the API module can keep a
# direct reference (one global lookup and one store on the hot path).
SLOT: list[Any] = [None]

# Every progress call's metrics since the last progress message (its SLOT tuple): the
# main thread appends, the beacon takes them all when it sends (PROTOCOL.md `points`), so a
# curve keeps a spike of one step that the coalesced latest value would skip. Bounded: past
# SERIES_CAP calls between two sends (250 ms: 4,096 steps a second), a call's metrics are
# counted (`dropped.points`), not kept; the count is one store, as cheap as the append.
SERIES: list[Any] = []
SERIES_CAP = 1024
SERIES_FULL = [0]  # calls whose metrics found SERIES full: sent as `dropped.points`


def add_point(value: Any) -> None:
    """A progress value with metrics, as a point of the next progress message; past
    SERIES_CAP, counted instead. worker.progress() does the same inline (a call is 55 ns of
    its ~440 ns with metrics)."""
    if len(SERIES) < SERIES_CAP:
        SERIES.append(value)
    else:
        SERIES_FULL[0] += 1


class Final:
    """An `error` or `bye` the caller waits on until the client acks it."""

    __slots__ = ("kind", "body", "acked", "progress")

    def __init__(self, kind: str, body: dict[str, Any]):
        import threading  # only ever needed when supervised

        self.kind = kind
        self.body = body
        self.acked = threading.Event()
        self.progress = SLOT[0]


class State:
    def __init__(self) -> None:
        self.enabled = False
        self.config: Optional[Config] = None
        self.beacon: Optional[Beacon] = None
        # Everything but progress and heartbeats, in the order it happened: (kind, body,
        # the progress recorded before it) or Final. Logs are refused (and counted) while
        # LOG_QUEUE_LIMIT items wait; stage, error and last words are never refused.
        self.events: deque[Any] = deque()
        self.dropped: dict[str, int] = {"log": 0}
        self.room: Optional[threading.Event] = None  # set by the beacon: the log queue has room
        self.log_waiting = False  # a log() call waits for room (the beacon sets `room`)
        self.log_gave_up = False  # a wait ran out: drop without waiting until there is room
        # Set by the beacon while it sleeps with nothing to send (beacon._sleep_s): the next
        # queued event (idle) or recorded progress (idle_progress) wakes it (nudge).
        self.idle = False
        self.idle_progress = False
        self.stages: list[str] = []
        self.activity = time.monotonic()  # last stage change on any thread
        # backward() calls the zero-code hook saw (worker/auto.py), None where none counts:
        # the heartbeat's `work`, training work the supervisor sees without any progress call.
        self.work: Optional[int] = None
        self.started = time.monotonic()
        self.dump_signal: Optional[str] = None
        self.native_dump_signal: Optional[str] = None  # faulthandler's C dump, main thread only
        self.crash_file: Optional[TextIO] = None  # the open file faulthandler writes to
        # Without a crash file (a rank of another host): the file of this host that SIGUSR1
        # dumps go to, this process's and its forks' (worker/fork_dumps.py).
        self.fork_dumps: Optional[TextIO] = None
        self.stage_box: Optional[int] = None  # fd of <crash file>.stages.<pid>
        self.forking = False  # the beacon must not arm the watchdog across a fork
        # Held by the beacon while it imports modules or arms the freeze watchdog, and by a
        # fork (hooks._before_fork) until it is done: a child forked in the middle of either
        # would inherit a module lock or a watchdog that nobody in it can ever release.
        self.fork_lock: Optional[threading.Lock] = None
        self.fork_held = False  # _before_fork got fork_lock; _after_fork_in_parent frees it
        # (the script's, ours) GIL switch intervals while the beacon starts on a short one
        # (beacon._prompt_start); restore_switch_interval() puts the script's back.
        self.start_switch: Optional[tuple[float, float]] = None
        # How the process is ending, filled in by hooks.py.
        self.exit_code: Optional[int] = None
        self.exit_reason: Optional[str] = None
        self.exit_error: Optional[dict[str, Any]] = None  # of a sys.exit("message")
        self.fatal_sent = False
        self.keyboard_interrupt = False
        self.cancelled = False
        self.last_words_deadline: Optional[float] = None
        self.internal_reported = False
        self.internal_count = 0
        self.unsent_said = False  # the loss at exit was said on stderr (send_final)


STATE = State()


# --- calls made by training code ---------------------------------------------------------
def enqueue_event(kind: str, body: dict[str, Any]) -> None:
    """Queue a never-dropped message. The progress recorded so far rides along, so the
    beacon can send it first and keep the order the script saw."""
    if STATE.enabled:
        STATE.events.append((kind, body, SLOT[0]))
        if STATE.idle:
            nudge()


def enqueue_log(body: dict[str, Any]) -> None:
    if not STATE.enabled:
        return
    if len(STATE.events) >= LOG_QUEUE_LIMIT and not _wait_for_room():
        STATE.dropped["log"] += 1
    else:
        STATE.log_gave_up = False
        STATE.events.append(("log", body, SLOT[0]))
        if STATE.idle:
            nudge()


def dropped() -> dict[str, int]:
    """What this process dropped so far, per kind (heartbeats and the bye carry it)."""
    counts = dict(STATE.dropped)
    if SERIES_FULL[0]:
        counts["points"] = SERIES_FULL[0]
    return counts


def nudge() -> None:
    """Wake the beacon sleeping with nothing to send (STATE.idle): what was just queued or
    recorded leaves now, not at its next heartbeat. Only the first call after it fell
    asleep writes to its pipe; the flags are read by the callers, one attribute each."""
    STATE.idle = STATE.idle_progress = False
    beacon = STATE.beacon
    if beacon is not None:
        beacon.wake()


def _wait_for_room() -> bool:
    """Wait (bounded) until the beacon has taken items out of the full queue; False when
    the record must be dropped: no room in time, or nobody who could make room."""
    config, beacon, room = STATE.config, STATE.beacon, STATE.room
    if (
        STATE.log_gave_up
        or config is None
        or beacon is None
        or room is None
        or config.log_wait_s <= 0
    ):
        return False
    import threading  # loaded with the beacon already

    if threading.current_thread() is beacon or not beacon.is_alive():
        return False  # the beacon's own logging (or a forked child's) cannot wait on itself
    deadline = time.monotonic() + config.log_wait_s
    while len(STATE.events) >= LOG_QUEUE_LIMIT:
        left = deadline - time.monotonic()
        if left <= 0 or not STATE.enabled:
            STATE.log_gave_up = True
            return False
        room.clear()
        STATE.log_waiting = True
        beacon.wake()
        if len(STATE.events) < LOG_QUEUE_LIMIT:  # made room between the check and clear()
            break
        room.wait(min(left, 0.05))
    return True


def restore_switch_interval() -> None:
    """Put back the script's GIL switch interval after the beacon's start, in the process or
    in a child forked meanwhile (which has no beacon to do it), unless the script changed it
    since (then its value stays)."""
    start, STATE.start_switch = STATE.start_switch, None
    if start is not None and sys.getswitchinterval() == start[1]:
        sys.setswitchinterval(start[0])


def stage_begin(name: str, budget: Optional[float]) -> Optional[int]:
    """Record an opened stage; returns its depth (None when the worker is off)."""
    if not STATE.enabled:
        return None
    depth = len(STATE.stages)
    STATE.stages.append(name)
    STATE.activity = time.monotonic()
    write_stage_box()
    enqueue_event("stage", {"event": "begin", "name": name, "depth": depth, "budget_s": budget})
    return depth


def stage_end(name: str, depth: int, status: str, duration_s: float) -> None:
    stages = STATE.stages
    if depth < len(stages) and stages[depth] == name:
        del stages[depth:]  # also closes inner stages left open by a generator or a thread
    elif name in stages:
        del stages[len(stages) - 1 - stages[::-1].index(name)]
    STATE.activity = time.monotonic()
    write_stage_box()
    enqueue_event(
        "stage",
        {"event": "end", "name": name, "depth": depth, "status": status, "duration_s": duration_s},
    )


# --- the stage box ------------------------------------------------------------------------
# Stage messages wait for the beacon (up to ~100 ms after its last send, at once when it
# was idle); a native crash right after a stage
# began would lose it and the report would name the stage before. So every stage change is
# also written, synchronously, to a small file beside the crash file (one pwrite of the open
# stages at offset 0: constant size, no growth), which the client reads after a death with
# no last words (docs/PROTOCOL.md section 2, "stage box").
def open_stage_box(crash_file: str) -> None:
    path = f"{crash_file}.stages.{os.getpid()}"
    STATE.stage_box = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    write_stage_box()


def write_stage_box() -> None:
    fd = STATE.stage_box
    if fd is None:
        return
    try:
        # The codec's escape (backslash doubled, non-ASCII as \x/\u/\U), one name a line,
        # and a "." line closing the list: what a longer earlier list left after it is ignored.
        lines = [
            n.replace("\\", "\\\\").replace("\n", " ").encode("ascii", "backslashreplace")
            for n in STATE.stages
        ]
        os.pwrite(fd, b"".join(line + b"\n" for line in lines) + b".\n", 0)
    except Exception as exc:  # noqa: BLE001 - a full disk must not stop the script
        STATE.stage_box = None
        internal_error("writing the stage box", exc)


def current_stage() -> Optional[str]:
    stages = STATE.stages
    return stages[-1] if stages else None


def send_final(kind: str, body: dict[str, Any]) -> bool:
    """Queue an error (fatal) or bye and wait until the client acks it. All last words of
    one process share one deadline: TRAINBRIDGE_ACK_TIMEOUT_S from the first of them."""
    beacon = STATE.beacon
    if not STATE.enabled or beacon is None or not beacon.is_alive() or STATE.config is None:
        return False
    final = Final(kind, body)
    now = time.monotonic()
    if STATE.last_words_deadline is None:
        STATE.last_words_deadline = now + STATE.config.ack_timeout_s
    STATE.events.append(final)
    beacon.wake()
    while not final.acked.wait(max(0.0, STATE.last_words_deadline - time.monotonic())):
        # A client that still reads gets everything, as a pipe's reader would: while what
        # waits ahead of these words moves into libzmq (which takes more only as the client
        # reads), the deadline moves with it. Only a client that took nothing for the whole
        # timeout is given up on, and what did not go is said on stderr.
        moved = beacon.moved_at + STATE.config.ack_timeout_s
        if moved <= STATE.last_words_deadline or not beacon.is_alive():
            _say_unsent(beacon)
            return False
        STATE.last_words_deadline = moved
    return True


def _say_unsent(beacon: Any) -> None:
    """Last words were not acked in time: say on stderr (which the client keeps) how many
    messages never left, and write that number to <crash file>.unsent.<pid>, which the
    client's report reads (protocol.unsent), so that a loss at exit is counted, not silent."""
    waiting = sum(1 for item in list(STATE.events) if not isinstance(item, Final))
    waiting += len(beacon.unsent)
    if STATE.unsent_said or not waiting or STATE.config is None:
        return
    STATE.unsent_said = True
    try:
        dropped = STATE.dropped["log"]  # its count went with heartbeats or bye only
        also = f", and {dropped} log records were dropped for want of room" if dropped else ""
        sys.stderr.write(
            f"[trainbridge] worker: the client took nothing for {STATE.config.ack_timeout_s:g} s "
            f"at exit; {waiting} queued records (logs, stages, messages) were never sent{also}. "
            "Set TRAINBRIDGE_ACK_TIMEOUT_S to wait longer.\n"
        )
        sys.stderr.flush()
    except (OSError, ValueError):  # stderr closed: nobody to tell
        pass
    crash_file = STATE.config.crash_file
    if crash_file:  # and for the report: a number beside the crash file (PROTOCOL.md 2)
        try:
            fd = os.open(
                f"{crash_file}.unsent.{os.getpid()}",
                os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC,
                0o600,
            )
            try:
                os.write(fd, f"{waiting}\n".encode("ascii"))
            finally:
                os.close(fd)
        except OSError:
            pass  # stderr said it


# --- failures of the worker itself --------------------------------------------------------
def report_error(exc_or_message: Any, fields: dict[str, Any], skip: int = 0) -> None:
    """Queue a non-fatal error event: an exception's, or a message's with the stack of the
    caller `skip` frames above this one standing in for a traceback (worker.error, and a
    worker.on_message handler that raised)."""
    import threading

    from trainbridge.worker import errors

    thread = threading.current_thread().name
    stage_name = current_stage()
    if isinstance(exc_or_message, BaseException):
        body = errors.error_body(exc_or_message, fatal=False, thread=thread, stage=stage_name)
    else:
        body = errors.message_body(
            str(exc_or_message), fatal=False, thread=thread, stage=stage_name, skip=1 + skip
        )
    if fields:
        body["fields"] = fields
    enqueue_event("error", body)


def internal_error(where: str, exc: BaseException) -> None:
    """Report a failure of the worker once (stderr, and to the client if possible): the
    training script must go on. But a KeyboardInterrupt that lands in the worker's code (a
    Ctrl-C, or job.cancel()'s SIGINT, arriving during worker.log() or a stage's enter) is the
    script's, not a failure of ours: it is raised on, as if the worker were not there (it was
    swallowed, and a cancelled job ran on until SIGTERM)."""
    if isinstance(exc, KeyboardInterrupt):
        raise exc
    try:
        STATE.internal_count += 1
        if STATE.internal_reported:
            return
        STATE.internal_reported = True
        text = f"{where}: {type(exc).__name__}: {exc}"
        text = text.encode("ascii", "backslashreplace").decode("ascii")
        sys.stderr.write(f"[trainbridge] worker internal error: {text}\n")
        sys.stderr.flush()
        if STATE.enabled:
            import threading

            from trainbridge.worker import errors

            body = errors.error_body(
                exc,
                fatal=False,
                thread=threading.current_thread().name,
                stage=current_stage(),
                kind="internal",
            )
            body["message"] = f"worker internal error in {where}: {body['message']}"
            enqueue_event("error", body)
    except BaseException:  # noqa: BLE001 - reporting must never break the script
        pass


def disable() -> None:
    """Turn the worker off for the rest of the process: API calls become no-ops and
    anyone waiting for an ack stops waiting."""
    STATE.enabled = False
    if STATE.room is not None:
        STATE.room.set()  # a log() call waiting for room stops waiting
    for item in list(STATE.events):
        if isinstance(item, Final):
            item.acked.set()
    STATE.events.clear()
