"""Two-way application messages between the training script and its client (PROTOCOL.md,
"user"): worker.send(), worker.on_message(), worker.receive().

Outgoing messages ride the beacon's ordered queue with the stages, progress and logs, so
the client sees them in the order the script made them. At most SEND_QUEUE_LIMIT wait to
be sent: send() then waits for room (backpressure) and raises TimeoutError when none came.
Incoming messages go to the handlers registered with on_message() (called on the beacon's
thread: keep them short, hand work to the training loop) or, when there are none, to an
inbox that the training loop polls with receive() at its own safe points. An inbox of
INBOX_LIMIT messages is full: later ones are counted in the heartbeat's `dropped.user`,
never lost silently.
"""

from __future__ import annotations

import threading
import time
from collections import deque

from trainbridge.worker import runtime
from trainbridge.worker.runtime import STATE

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Optional

SEND_QUEUE_LIMIT = 1000
INBOX_LIMIT = 1000
_SIZE_KEY = b"\0" * 32

_lock = threading.Condition()
_pending = [0]  # user messages queued, not yet handed to libzmq
_inbox: deque[Any] = deque()
_handlers: list[Callable[[Any], None]] = []


def send(data: Any, timeout: Optional[float] = 10.0) -> bool:
    """Queue `data` (JSON-like: dict, list, str, number, bool, None) for the client.

    Returns False when the script is not supervised (nothing to send to). Raises
    ValueError when the message is larger than the protocol allows (1 MiB packed), and
    TimeoutError when SEND_QUEUE_LIMIT messages are still waiting after `timeout` s."""
    config = STATE.config
    if not STATE.enabled or config is None:  # enabled: configured
        return False
    from trainbridge.protocol import codec

    try:  # the size (and encodability) is judged now, on the caller's thread, signed as sent
        codec.encode(
            "user",
            1,
            {"data": data},
            _SIZE_KEY,
            config.job,
            sender=config.routing_id.decode("ascii"),
        )
    except codec.ProtocolError as exc:
        raise ValueError(f"worker.send: cannot send this message ({exc})") from None
    deadline = None if timeout is None else time.monotonic() + timeout
    with _lock:
        while _pending[0] >= SEND_QUEUE_LIMIT:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise TimeoutError(
                    f"worker.send: {SEND_QUEUE_LIMIT} messages are still "
                    f"waiting to be sent after {timeout} s; is the client "
                    "reading them?"
                )
            _lock.wait(left if left is None else min(left, 0.05))
        _pending[0] += 1
    runtime.enqueue_event("user", {"data": data})
    beacon = STATE.beacon
    if beacon is not None:
        beacon.wake()
    return True


def sent_one() -> None:
    """The beacon handed one user message to libzmq: room for another."""
    with _lock:
        _pending[0] = max(0, _pending[0] - 1)
        _lock.notify()


def on_message(handler: Callable[[Any], None]) -> Callable[[Any], None]:
    """Call handler(data) for each message from the client (usable as a decorator)."""
    _handlers.append(handler)
    return handler


def receive(timeout: Optional[float] = 0) -> Any:
    """The next message from the client, or None when none came within `timeout` s
    (0: do not wait, None: wait for ever). Messages go here only while no handler is
    registered with on_message()."""
    deadline = None if timeout is None else time.monotonic() + timeout
    with _lock:
        while not _inbox:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            _lock.wait(left)
        return _inbox.popleft()


def deliver(data: Any) -> None:
    """Beacon thread: a message from the client arrived."""
    handlers = list(_handlers)
    if handlers:
        for handler in handlers:
            try:
                handler(data)
            except Exception as exc:  # noqa: BLE001 - the handler's bug goes to the client
                try:
                    runtime.report_error(exc, {"where": "worker.on_message handler"})
                except BaseException as bug:  # noqa: BLE001 - reporting must never break it
                    runtime.internal_error("error", bug)
        return
    with _lock:
        if len(_inbox) >= INBOX_LIMIT:
            STATE.dropped["user"] = STATE.dropped.get("user", 0) + 1
            return
        _inbox.append(data)
        _lock.notify_all()
