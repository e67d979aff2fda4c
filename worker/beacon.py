"""The beacon thread: the only owner of the worker's socket.

It imports zmq and the codec itself, so `import worker` never waits for them; connects a
DEALER; sends hello first; then loops: answer client commands, send queued stages, logs
and errors in the order they happened, the latest progress (coalesced), heartbeats, and
resend last words until they are acked. It also re-arms the GIL-freeze watchdog: if this
thread cannot run for TRAINBRIDGE_FREEZE_S, faulthandler dumps every stack to the crash
file. And it watches the supervising client (ParentWatch): when the client is gone, it ends
the job's process group, so a GUI that crashes never leaves a training job running unsupervised.

Its length (about 600 lines): sending in order, the commands, heartbeats, the watchdog and
shutdown all touch the one socket and the thread's own state (seq, unsent frames, last
words waiting for their ack), so they stay in the thread's class. What does not touch the
socket has its own room: runtime.py (the queue), messages.py, facts.py, errors.py, and
orphan.py (the client gone).
"""

from __future__ import annotations

import faulthandler
import math
import os
import signal
import sys
import threading
import time

from trainbridge.worker import runtime
from trainbridge.worker.config import Config
from trainbridge.worker.orphan import ParentWatch, end_process_group
from trainbridge.worker.runtime import SLOT, STATE, Final, deque

TYPE_CHECKING = False  # typing costs milliseconds at `import worker`
if TYPE_CHECKING:
    from typing import Any, Optional

VERSION = "0.1.0"
# When to wake. With nothing to send the beacon sleeps until its next heartbeat (1 s by
# default): an event queued or progress recorded then wakes it at once (runtime.nudge). After
# it sent events it waits EVENT_WINDOW_S before looking again, so a script that logs on every
# step costs ~10 wake-ups a second, not one per record; progress leaves at most every
# PROGRESS_EVERY_S. Every wake-up contends for the GIL with the training thread and wakes
# libzmq's and the client's threads (each ~50-150 us of CPU on a small VM): a loop that woke
# every 25 ms cost training 1.5-3%, every 100 ms with progress at each ~1-2% (the client's
# and the workers' CPU together, torchrun DDP on 2 vCPUs). A crash in an event window still
# finds its stage in the stage box (runtime.write_stage_box).
EVENT_WINDOW_S = 0.1
PROGRESS_EVERY_S = 0.25  # progress leaves at most 4 times a second
PARENT_POLL_S = 0.1  # how often os.getppid() is checked where there is no pidfd (orphan.py)
MAX_SLEEP_S = 60.0  # a bound on any sleep (a heartbeat interval may be set very long)
RESEND_EVERY_S = 0.5  # last words are resent until acked (PROTOCOL.md section 6)
EVENT_BATCH = 512  # queued messages sent per loop, so commands stay prompt
LOG_BATCH = 256  # log records in one `logs` message at most
LOG_BATCH_BYTES = 256 * 1024  # estimated size of one `logs` message, well under 1 MiB
LINGER_MS = 1000
# libzmq's own send queue, in messages (a `logs` message carries up to LOG_BATCH records).
# Small on purpose: past it the beacon keeps what waits in its own bounded queue, so a slow
# client makes log() wait (backpressure, not memory), and at exit the queue shrinking is
# the sign that the client still reads (runtime.send_final waits while it does).
SNDHWM = 128
# `run --transparent` spawns before its hub binds: the first connect finds no socket. libzmq
# retries after RECONNECT_IVL (100 ms by default), doubling up to the max: start at 5 ms so
# a short run does not wait 100 ms for its first hello.
RECONNECT_IVL_MS = 5
RECONNECT_IVL_MAX_MS = 200
# A progress message's `points`: at most this many, of at most this many metrics.
POINTS_MAX = 512
POINTS_METRICS_MAX = 64
# The GIL switch interval while the beacon starts (see _prompt_start).
START_SWITCH_S = 0.0005


def _clean_metric(value: Any) -> Any:
    """Numbers and strings as they are; anything else by type name only. str() of a CUDA
    tensor would synchronise the GPU from this thread, so it is never called here."""
    if value is None or type(value) in (int, float, str, bool):
        return value
    import numbers

    if isinstance(value, numbers.Number) and not isinstance(value, complex):
        number: Any = value  # a Number: int() takes what its type defines
        try:
            return float(number) if isinstance(number, numbers.Real) else int(number)
        except Exception:  # noqa: BLE001 - a user's Number type may raise anything: send its name
            pass
    return f"<{type(value).__name__}>"


def _clean_map(values: dict[str, Any]) -> dict[str, Any]:
    return {str(k): _clean_metric(v) for k, v in values.items()}


def _points(taken: list[Any]) -> dict[str, Any]:
    """The progress message's `points` (PROTOCOL.md): every call's numeric metrics since the
    last message, as {"steps": [...], "metrics": {name: [value or nil, ...]}}; past
    POINTS_MAX, the points protocol/points.py keeps (a spike of one step among them)."""
    from trainbridge.protocol import points  # on the beacon's thread, not at import

    steps = [_clean_metric(step) for step, _, _ in taken]
    columns: dict[str, list[Any]] = {}
    for i, (_, _, metrics) in enumerate(taken):
        for name, value in metrics.items():
            value = _clean_metric(value)
            if type(value) not in (int, float):
                continue  # strings and flags are not points of a curve
            column = columns.get(str(name))
            if column is None:
                if len(columns) >= POINTS_METRICS_MAX:
                    continue
                column = columns[str(name)] = [None] * len(taken)
            column[i] = value
    kept = points.keep(len(taken), columns, POINTS_MAX)
    if len(kept) < len(taken):
        steps = [steps[i] for i in kept]
        columns = {name: [column[i] for i in kept] for name, column in columns.items()}
    return {"steps": steps, "metrics": columns}


class Beacon(threading.Thread):
    def __init__(self, config: Config):
        super().__init__(name="trainbridge-beacon", daemon=True)
        self.config = config
        self.stop = False
        self.seq = 0
        self.sender: Optional[str] = None  # our routing id, once connected (signed as "from")
        self.beat = 0
        # Encoded messages libzmq refused (send queue full), sent first and in order, so a
        # refusal loses nothing and leaves no gap in the sequence numbers.
        self.unsent: deque[Any] = deque()
        self.said_bye = False
        # When the beacon last handed a queued message to libzmq: while libzmq is full that
        # happens only as the client reads (runtime.send_final waits while it moves).
        self.moved_at = time.monotonic()
        self.finals: dict[int, list[Any]] = {}  # seq -> [Final, frames, last_sent]
        self.last_slot: Any = None
        self.progress_sent: Any = None
        self.progress_seen_at: Optional[float] = None
        self.progress_sent_at = 0.0
        self.events_sent_at = 0.0  # opens an EVENT_WINDOW_S batching window
        self.armed_at = time.monotonic()  # hooks.install armed the watchdog already
        self.refused = False
        self.orphaned = False  # the client is gone: nothing will ack, close at once
        self.watch: Optional[ParentWatch] = None
        self.client_seq = 0
        self.sock: Any = None  # zmq's, imported on this thread (_import)
        self.ctx: Any = None
        self.go = threading.Event()
        STATE.room = threading.Event()  # log() waits on it when its queue is full
        STATE.fork_lock = threading.Lock()  # a fork waits while we import (runtime.State)
        # Written to by wake(): last words and shutdown must not wait out a poll timeout.
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)

    # --- thread body ---------------------------------------------------------------------
    def run(self) -> None:
        # SIGUSR1 must land on the main thread: there it interrupts a blocking call, so that
        # the dump handler (hooks.py) runs at once. SIGUSR2 too: faulthandler's C handler
        # dumps the thread it lands on. Threads started from here (libzmq's, the freeze
        # watchdog's) inherit the mask.
        if hasattr(signal, "pthread_sigmask") and hasattr(signal, "SIGUSR1"):
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1, signal.SIGUSR2})
        # Wait until Thread.start() has returned to the importing thread: importing zmq
        # right away would hold the GIL that start() needs to return (up to the 5 ms
        # switch interval, at every `import worker`).
        self.go.wait(5.0)
        try:
            with _prompt_start():
                self._load()
                if self.config.client_pid is not None:
                    self.watch = ParentWatch(self.config.client_pid)
                self._connect()
                self._send_now("hello", self._hello())
            self._loop()
        except BaseException as exc:  # noqa: BLE001 - the script goes on without us
            runtime.internal_error("beacon", exc)
            runtime.disable()
        finally:
            self._close()

    def _load(self) -> None:
        """Import every module this thread uses, at once, holding STATE.fork_lock. A fork
        in the middle of an import leaves that module's lock held in the child for ever;
        a DataLoader worker forked then hung on its first import of the same module
        (numpy seeding imports hmac, as the codec does). The fork waits instead, once, for
        the few milliseconds these take; later imports here find them loaded."""
        assert STATE.fork_lock is not None
        with STATE.fork_lock:
            import numbers  # noqa: F401 - for _clean_metric
            import select  # noqa: F401 - for ParentWatch
            import socket  # noqa: F401 - for route_address
            import traceback  # noqa: F401 - for errors.all_stacks

            import zmq

            from trainbridge.protocol import codec
            from trainbridge.worker import errors, facts, messages  # noqa: F401

            self.zmq, self.codec = zmq, codec

    def _connect(self) -> None:
        zmq, codec = self.zmq, self.codec
        # A private context: the global instance may be shared with the script's own zmq.
        self.ctx = zmq.Context()
        sock = self.ctx.socket(zmq.DEALER)
        routing_id = self.config.routing_id
        self.sender = routing_id.decode("ascii")  # signed into every message (PROTOCOL.md 1)
        sock.setsockopt(zmq.ROUTING_ID, routing_id)
        sock.setsockopt(zmq.MAXMSGSIZE, codec.MAX_MESSAGE_BYTES + 64)
        sock.setsockopt(zmq.LINGER, LINGER_MS)
        sock.setsockopt(zmq.SNDHWM, SNDHWM)
        sock.setsockopt(zmq.RECONNECT_IVL, RECONNECT_IVL_MS)
        sock.setsockopt(zmq.RECONNECT_IVL_MAX, RECONNECT_IVL_MAX_MS)
        if self.config.server_key:  # the client's tcp fallback authenticates (CurveZMQ)
            public, secret = zmq.curve_keypair()
            sock.setsockopt(zmq.CURVE_SERVERKEY, self.config.server_key)
            sock.setsockopt(zmq.CURVE_PUBLICKEY, public)
            sock.setsockopt(zmq.CURVE_SECRETKEY, secret)
        sock.connect(self.config.endpoint)
        self.sock = sock

    def _hello(self) -> dict[str, Any]:
        from trainbridge.worker import facts

        body = facts.hello(self.config.heartbeat_s, VERSION, self.codec.PROTOCOL_VERSION)
        body["dump_signal"] = STATE.dump_signal
        body["native_dump_signal"] = STATE.native_dump_signal
        body["crash_file"] = self.config.crash_file if STATE.crash_file is not None else None
        body["detached"] = self.config.detached
        if self.config.server_key:  # tcp: the address this host reaches the client from
            addr = route_address(self.config.endpoint)
            if addr is not None:
                body["addr"] = addr
        return body

    def wake(self) -> None:
        try:
            os.write(self.wake_w, b"!")
        except OSError:  # full (it is already awake) or closed
            pass

    def _loop(self) -> None:
        poller = self.zmq.Poller()
        poller.register(self.sock, self.zmq.POLLIN)
        poller.register(self.wake_r, self.zmq.POLLIN)
        watch = self.watch
        if watch is not None and watch.fd is not None:
            poller.register(watch.fd, self.zmq.POLLIN)  # readable when the client exits
        next_beat = time.monotonic()
        ready: dict[Any, int] = {}
        writable_wait = False  # POLLOUT is watched while libzmq refuses what we send
        while not self.stop and STATE.enabled:
            if watch is not None and (watch.fd is None or watch.fd in ready) and watch.gone():
                self._client_gone(watch)
                return
            now = time.monotonic()
            seq = self.seq
            busy = self._send_queued(now)
            if STATE.log_waiting and len(STATE.events) <= runtime.LOG_QUEUE_LOW:
                STATE.log_waiting = False
                room = STATE.room
                if room is not None:  # made in __init__
                    room.set()  # a log() call waits for room: there is some now
            self._resend_finals(now)
            beat = self._beat_now(now, next_beat, sent_now=self.seq != seq)
            self._arm_watchdog(now, beat)
            if beat:
                self._heartbeat(now)
                next_beat = now + self.config.heartbeat_s
            blocked = bool(self.unsent)
            if blocked != writable_wait:
                writable_wait = blocked
                mask = self.zmq.POLLIN | (self.zmq.POLLOUT if blocked else 0)
                poller.modify(self.sock, mask)
            # libzmq full: sleep until it has room (the client read), not in a busy loop.
            timeout = 0.0 if busy and not blocked else self._sleep_s(now, next_beat, blocked)
            ready = dict(poller.poll(int(timeout * 1000) + (1 if timeout > 0 else 0)))
            STATE.idle = STATE.idle_progress = False
            if self.wake_r in ready:
                os.read(self.wake_r, 4096)
            if ready.get(self.sock, 0) & self.zmq.POLLIN:
                self._read_commands()

    def _beat_now(self, now: float, next_beat: float, sent_now: bool) -> bool:
        """A heartbeat is due, or due before the next progress could go and something went
        on this turn (`sent_now`): it goes with that, in one wake-up (the beacon's,
        libzmq's, the client's). Nothing follows bye but resends."""
        if self.said_bye:
            return False
        return now >= next_beat or (sent_now and next_beat - now < PROGRESS_EVERY_S)

    def _sleep_s(self, now: float, next_beat: float, blocked: bool = False) -> float:
        """How long the loop may sleep: until the first of the next heartbeat, a resend of
        last words, the watchdog's re-arming, the end of the event window and progress
        being due. Where nothing but a heartbeat is ahead, the idle flags are set so that
        training code wakes the beacon (runtime.nudge) when it has something to send."""
        wake_at = math.inf if self.said_bye else next_beat
        for entry in self.finals.values():  # one libzmq refused is retried 100 ms on
            wake_at = min(wake_at, max(entry[2] + RESEND_EVERY_S, now + EVENT_WINDOW_S))
        if self._watchdog_on() and not STATE.forking:  # after a fork, hooks.py wakes us
            wake_at = min(wake_at, self.armed_at + self._rearm_s())
        if self.watch is not None and self.watch.polls:
            wake_at = min(wake_at, now + PARENT_POLL_S)
        if blocked:  # nothing more can go until libzmq has room: POLLOUT wakes the loop
            STATE.idle = STATE.idle_progress = False
            return min(max(0.0, wake_at - now), MAX_SLEEP_S)
        idle_events = now >= self.events_sent_at + EVENT_WINDOW_S
        if not idle_events:  # batching: what is queued meanwhile waits for the window's end
            wake_at = min(wake_at, self.events_sent_at + EVENT_WINDOW_S)
        progress_due = self.progress_sent_at + PROGRESS_EVERY_S
        latest = SLOT[0]
        idle_progress = now >= progress_due and latest is self.progress_sent
        if not idle_progress:  # sent lately (look again when due) or waiting to be sent
            wake_at = min(wake_at, max(progress_due, now))
        STATE.idle, STATE.idle_progress = idle_events, idle_progress
        # Queued between our look and the flags: the caller saw no flag, so do not sleep.
        if (idle_events and STATE.events) or (idle_progress and SLOT[0] is not latest):
            return 0.0
        return min(max(0.0, wake_at - now), MAX_SLEEP_S)

    # --- sending ---------------------------------------------------------------------------
    def _encode(
        self, kind: str, body: dict[str, Any], shrunk: bool = False
    ) -> Optional[list[bytes]]:
        try:
            frames = self.codec.encode(
                kind, self.seq + 1, body, self.config.key, self.config.job, sender=self.sender
            )
        except Exception as exc:  # noqa: BLE001 - e.g. an integer beyond 64 bits
            if kind == "error" and not shrunk and getattr(exc, "reason", "") == "oversize":
                return self._encode(kind, _shrunk_error(body), shrunk=True)
            runtime.internal_error(f"encoding a {kind} message", exc)
            return None
        self.seq += 1
        return frames

    def _push(self, frames: list[bytes]) -> bool:
        """Hand frames to libzmq without blocking; False if its queue is full."""
        try:
            self.sock.send_multipart(frames, flags=self.zmq.NOBLOCK, copy=True)
            return True
        except self.zmq.Again:
            return False

    def _send_now(self, kind: str, body: dict[str, Any]) -> None:
        """Encode and send, keeping the frames if libzmq is full (never lost, seq kept)."""
        frames = self._encode(kind, body)
        if frames is not None and (self.unsent or not self._push(frames)):
            self.unsent.append(frames)

    def _send_unsent(self) -> bool:
        """Retry what libzmq refused; True when nothing is left waiting."""
        while self.unsent:
            if not self._push(self.unsent[0]):
                return False
            self.unsent.popleft()
            self.moved_at = time.monotonic()
        return True

    def _send_queued(self, now: float) -> bool:
        """Send what training code queued; True if more is waiting."""
        if not self._send_unsent():
            return True
        events = STATE.events
        budget = EVENT_BATCH
        while budget > 0:
            if not events or self.unsent:
                break
            item = events[0]  # only this thread takes items out
            final = item if isinstance(item, Final) else None
            # Progress recorded before this item goes first; if libzmq is full it waits.
            self._flush_progress(now, final.progress if final else item[2])
            if self.unsent:
                break
            events.popleft()
            budget -= 1
            self.events_sent_at = self.moved_at = now
            if final is None:
                kind, body, progress = item
                if kind == "log":
                    budget -= self._send_logs(events, _with_clean_fields(body), progress, budget)
                else:
                    self._send_now(kind, _with_clean_fields(body) if kind == "error" else body)
                    if kind == "user":
                        from trainbridge.worker import messages

                        messages.sent_one()
                continue
            if final.kind == "bye" and any(runtime.dropped().values()):
                # The final count, drops after the last heartbeat included (PROTOCOL.md).
                final.body.setdefault("dropped", runtime.dropped())
            frames = self._encode(final.kind, final.body)
            if frames is None:
                final.acked.set()  # cannot be sent at all: do not hold the exit
                continue
            self.finals[self.seq] = [final, frames, now]
            self.said_bye = self.said_bye or final.kind == "bye"
            if not self._push(frames):
                self.finals[self.seq][2] = 0.0  # resend at the next loop
        self._send_progress(now)
        return bool(events or self.unsent)

    def _send_logs(self, events: Any, first: dict[str, Any], progress: Any, room: int) -> int:
        """Send `first` with the log records queued right after it as one `logs` message
        (PROTOCOL.md): only consecutive logs between which no progress was recorded, so the
        order of logs, stages, errors and progress is the script's. Returns how many more
        queue items it took (at most `room`)."""
        records = [first]
        append = records.append
        size = _record_size(first)
        limit = min(LOG_BATCH, room + 1)
        taken = 1
        while events and taken < limit and size < LOG_BATCH_BYTES:
            item = events[0]
            if type(item) is not tuple or item[0] != "log" or item[2] is not progress:
                break
            events.popleft()
            taken += 1
            body = item[1]
            message = body.get("message")
            # The record worker.log() makes without fields: _record_size() inline.
            if "fields" not in body and "logger" not in body and type(message) is str:
                append(body)
                size += 64 + (len(message) if message.isascii() else min(10 * len(message), 16_400))
                continue
            body = _with_clean_fields(body)
            append(body)
            size += _record_size(body)
        self._send_records(records)
        return taken - 1

    def _send_records(self, records: list[dict[str, Any]]) -> None:
        if len(records) == 1:
            self._send_now("log", records[0])
            return
        codec = self.codec
        try:
            frames = codec.encode(
                "logs",
                self.seq + 1,
                {"records": records},
                self.config.key,
                self.config.job,
                sender=self.sender,
            )
        except codec.ProtocolError as exc:
            # Too big after all (the size estimate is cheap, not exact): halve it. Anything
            # else (an integer beyond 64 bits in a field) costs only its own record.
            if exc.reason == "oversize":
                half = len(records) // 2
                self._send_records(records[:half])
                self._send_records(records[half:])
            else:
                for record in records:
                    self._send_now("log", record)
            return
        self.seq += 1
        if self.unsent or not self._push(frames):
            self.unsent.append(frames)

    def _send_progress(self, now: float) -> None:
        latest = SLOT[0]
        if latest is not self.last_slot:
            self.last_slot, self.progress_seen_at = latest, now
        # Read the slot, then look at the queue: a queued event carries the progress made
        # before it, and everything queued later carries this value or a newer one, so
        # sending only when the queue is empty never sends progress out of order.
        if STATE.events or latest is self.progress_sent:
            return
        if now - self.progress_sent_at >= PROGRESS_EVERY_S:
            self._flush_progress(now, latest)

    def _flush_progress(self, now: float, value: Any) -> None:
        """Send `value` (a progress tuple) unless it was already sent."""
        if value is None or value is self.progress_sent or self.unsent:
            return
        step, total, metrics = value
        self.progress_sent, self.progress_sent_at = value, now
        body = {
            "step": _clean_metric(step),
            "total": _clean_metric(total),
            "metrics": _clean_map(metrics),
        }
        taken = runtime.SERIES[:]  # the main thread appends at the end only
        del runtime.SERIES[: len(taken)]
        if len(taken) > 1:  # one point is the latest value itself
            body["points"] = _points(taken)
        self._send_now("progress", body)

    def _resend_finals(self, now: float) -> None:
        for entry in self.finals.values():
            if now - entry[2] >= RESEND_EVERY_S and self._push(entry[1]):
                entry[2] = now

    def _heartbeat(self, now: float) -> None:
        from trainbridge.worker import errors, facts

        self._send_progress(now)
        self.beat += 1
        idle_since = max(STATE.activity, self.progress_seen_at or STATE.started)
        idle_s = max(0.0, now - idle_since)
        body: dict[str, Any] = {
            "beat": self.beat,
            "stage": runtime.current_stage(),
            "stages": list(STATE.stages),
            "idle_s": round(idle_s, 3),
            "progress_age_s": (
                None if self.progress_seen_at is None else round(now - self.progress_seen_at, 3)
            ),
            "stack": None,
            "dropped": runtime.dropped(),
            "where": facts.main_where(),
        }
        if STATE.work is not None:
            body["work"] = STATE.work
        if idle_s > self.config.stall_s:
            main = threading.main_thread().ident
            frame = sys._current_frames().get(main) if main is not None else None
            body["stack"] = errors.format_stack(frame)
        body.update(facts.resources())
        if not self.unsent:  # a heartbeat that does not fit now is simply skipped
            frames = self._encode("heartbeat", body)
            if frames is not None and not self._push(frames):
                self.unsent.append(frames)  # its seq is taken: it must still go out

    # --- commands --------------------------------------------------------------------------
    def _read_commands(self) -> None:
        zmq, codec = self.zmq, self.codec
        while True:
            try:
                frames = self.sock.recv_multipart(flags=zmq.NOBLOCK, copy=True)
            except zmq.Again:
                return
            try:
                msg = codec.decode(frames, self.config.key, expect="client")
            except codec.ProtocolError:
                continue  # not from our client, or corrupt: nothing to answer
            verdict, self.client_seq = codec.check_seq(self.client_seq, msg.seq)
            if verdict == "replay":
                continue  # a command is carried out once
            self._command(msg)
            if self.stop or not STATE.enabled:
                return

    def _command(self, msg: Any) -> None:
        kind, body = msg.kind, msg.body
        if kind == "ack":
            entry = self.finals.pop(body["to"], None)
            if entry is not None:
                entry[0].acked.set()
        elif kind == "ping":
            self._send_now("reply", {"to": msg.seq, "ok": True})
        elif kind == "dump_stacks":
            from trainbridge.worker import errors, facts

            stacks = errors.all_stacks()
            children = facts.children()
            if STATE.fork_dumps is not None:  # no crash file here: their stacks come with us
                from trainbridge.worker import fork_dumps

                fork_dumps.add_stacks(children)
            self._send_now(
                "reply", {"to": msg.seq, "ok": True, "stacks": stacks, "children": children}
            )
        elif kind == "cancel":
            STATE.cancelled = True  # before the signal: the main thread may end at once
            error = _interrupt_main()
            reply = {"to": msg.seq, "ok": error is None}
            if error is not None:
                STATE.cancelled = False
                reply["error"] = error
            self._send_now("reply", reply)
        elif kind == "user":
            from trainbridge.worker import messages

            messages.deliver(body.get("data"))
        elif kind == "refuse":
            self.refused = True
            runtime.disable()
            reason = str(body.get("reason")).encode("ascii", "backslashreplace").decode("ascii")
            os.write(
                2,
                f"[trainbridge] the client refused this worker: {reason}; "
                f"continuing without supervision\n".encode("ascii"),
            )

    # --- the client going away -------------------------------------------------------------
    def _client_gone(self, watch: ParentWatch) -> None:
        """End the whole process group: SIGTERM now (the script may save a checkpoint),
        SIGKILL after the grace. Nobody is listening any more, so the worker turns off
        first: last words are not waited for and API calls become no-ops."""
        self.orphaned = True
        runtime.disable()
        end_process_group(
            os.getpgrp(),
            self.config.kill_grace_s,
            f"[trainbridge] the supervising client (pid {watch.client_pid}) is "
            f"gone; ending the job",
        )

    # --- watchdog and shutdown -------------------------------------------------------------
    def _watchdog_on(self) -> bool:
        return bool(self.config.freeze_s) and STATE.crash_file is not None

    def _rearm_s(self) -> float:
        return min(1.0, self.config.freeze_s / 4)

    def _arm_watchdog(self, now: float, beat: bool) -> None:
        """Re-arm at every heartbeat and whenever due, so both share a wake-up."""
        crash = STATE.crash_file
        if not self._watchdog_on() or crash is None or STATE.forking:
            return
        # Re-arming starts a native thread each time, so not on every loop.
        if beat or now - self.armed_at >= self._rearm_s():
            # Under the fork lock: a child forked while the watchdog thread was starting
            # would inherit a watchdog that is running with no thread to end it.
            with STATE.fork_lock:  # type: ignore[union-attr] # made in __init__
                if not STATE.forking:
                    faulthandler.dump_traceback_later(
                        self.config.freeze_s, repeat=False, file=crash, exit=False
                    )
            self.armed_at = now

    def _close(self) -> None:
        try:
            if STATE.crash_file is not None:
                with STATE.fork_lock:  # type: ignore[union-attr] # made in __init__
                    if not STATE.forking:
                        faulthandler.cancel_dump_traceback_later()
            if self.sock is not None:
                delivered = not self.finals and not self.unsent
                quick = delivered or self.refused or self.orphaned
                self.sock.close(linger=0 if quick else LINGER_MS)
            if self.ctx is not None:
                self.ctx.term()
            # The wake pipe stays open until the process ends: closing it here would let
            # a late wake() write into whatever file reuses the descriptor number.
        except Exception as exc:  # noqa: BLE001 - shutting down: report it, finish the rest
            runtime.internal_error("closing the socket", exc)


def _with_clean_fields(entry: dict[str, Any]) -> dict[str, Any]:
    """The `fields` of worker.log() and worker.error() as _clean_metric sends them: an object
    the codec cannot carry must not cost the whole message."""
    fields = entry.get("fields")
    if fields:
        entry = dict(entry, fields=_clean_map(fields))
    return entry


def _record_size(record: dict[str, Any]) -> int:
    """A cheap upper-ish estimate of a log record's packed size: non-ASCII text travels as
    escapes of up to 10 chars per code point, but long text is cut at 16 KiB anyway."""
    message = record.get("message")
    size = 64 + len(record.get("logger") or "")
    if type(message) is str:
        size += len(message) if message.isascii() else min(10 * len(message), 16_400)
    fields = record.get("fields")
    if fields:
        for key, value in fields.items():
            size += 16 + len(key) + (len(value) * 2 if type(value) is str else 8)
    return size


def _shrunk_error(body: dict[str, Any]) -> dict[str, Any]:
    """An error too big for one message keeps its innermost frames and traceback tail."""
    return dict(
        body,
        frames=body["frames"][-200:],
        traceback=body["traceback"][-65536:],
        chain=body["chain"][:50],
    )


def _interrupt_main() -> Optional[str]:
    """Raise KeyboardInterrupt in the main thread, as Ctrl-C would. A real SIGINT (sent to
    the main thread only) also interrupts a blocking sleep or read; a flag alone would not."""
    handler = signal.getsignal(signal.SIGINT)
    if not callable(handler):
        return f"SIGINT is not handled by Python here ({handler!r}); stop the process by signal"
    main = threading.main_thread().ident
    if main is None:
        return "no main thread"
    signal.pthread_kill(main, signal.SIGINT)
    return None


def route_address(endpoint: str) -> Optional[str]:
    """This host's address on the route to a tcp endpoint (a UDP socket's connect() picks
    it and sends nothing): how a client names a rank of another host. None for loopback or
    when there is no route."""
    import socket

    host, _, port = endpoint[len("tcp://") :].rpartition(":")
    host = host.strip("[]")
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect((host, int(port)))
            addr = str(s.getsockname()[0])
    except (OSError, ValueError):
        return None
    return None if addr.startswith("127.") or addr == "::1" else addr


class _prompt_start:
    """Shorten the GIL switch interval while the beacon imports, connects and says hello.

    Each import makes system calls that release the GIL; a script busy in Python code
    takes it back at once, and the beacon waits out a whole switch interval (5 ms) to get
    it again. Its ~25 ms of imports took 300-400 ms beside a spinning main thread here, and
    over a second on a loaded machine: the job stayed "starting" and its stall clock armed
    that much late. At 0.5 ms the same start takes ~80 ms. The interval is put back after
    (runtime.restore_switch_interval; a child forked meanwhile does it too)."""

    __slots__ = ()

    def __enter__(self) -> None:
        before = sys.getswitchinterval()
        if before > START_SWITCH_S:
            sys.setswitchinterval(START_SWITCH_S)
            # as read back: kept in microseconds inside, so not always the float given
            STATE.start_switch = (before, sys.getswitchinterval())

    def __exit__(self, *exc: object) -> None:
        runtime.restore_switch_interval()
