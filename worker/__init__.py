"""trainbridge worker: runs inside the training process and tells the supervising client
what the process is doing (docs/WORKER.md).

    from trainbridge import worker

    with worker.stage("load model", budget=600):
        model = load()
    for step in range(steps):
        train_step()
        worker.progress(step + 1, steps, loss=loss)

When the process was started by a trainbridge client (TRAINBRIDGE_* environment
variables), importing this package starts a background beacon thread; otherwise every call
here is a cheap no-op and the script runs exactly as without trainbridge. Importing it
never imports zmq, msgpack, psutil or torch on the calling thread.
"""

from __future__ import annotations

import os as _os
import sys as _sys
import time as _time

from trainbridge.worker import runtime as _runtime
from trainbridge.worker.runtime import SERIES as _SERIES
from trainbridge.worker.runtime import SERIES_CAP as _SERIES_CAP
from trainbridge.worker.runtime import SERIES_FULL as _SERIES_FULL
from trainbridge.worker.runtime import SLOT as _SLOT
from trainbridge.worker.runtime import STATE as _STATE

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (milliseconds)

if TYPE_CHECKING:  # typing costs milliseconds at import; annotations are strings here
    from typing import Any, Callable, Optional, TypeVar

    _F = TypeVar("_F", bound=Callable[..., Any])

__all__ = [
    "stage",
    "progress",
    "log",
    "error",
    "enabled",
    "send",
    "artifact",
    "on_message",
    "receive",
    "LogHandler",
]


def enabled() -> bool:
    """True while this process reports to a trainbridge client."""
    return _STATE.enabled


def progress(step: Any, total: Any = None, **metrics: Any) -> None:
    """Record the latest step (and optional total and metrics: numbers or short strings).

    The hot path: one tuple stored in a slot (and a flag read); with metrics, one append.
    The beacon thread sends the latest value at most every 250 ms, with every call's metrics
    since the last send, so calling this on every iteration is fine."""
    _SLOT[0] = value = (step, total, metrics)
    if metrics:  # runtime.add_point, inline: this is the hot path
        if len(_SERIES) < _SERIES_CAP:
            _SERIES.append(value)
        else:
            _SERIES_FULL[0] += 1
    if _STATE.idle_progress:
        _runtime.nudge()  # the beacon sleeps until its next heartbeat: send this now


def _progress_off(step: Any, total: Any = None, **metrics: Any) -> None:
    return None


_progress_off.__doc__ = progress.__doc__


def _end_status(exc: Any) -> str:
    """How a stage ended: "ok", "error", or "cancelled" when the job's cancel (the
    KeyboardInterrupt it raises in the main thread) ended it: the user's own action, not a
    failure of the stage (a GUI draws it so)."""
    if exc is None:
        return "ok"
    if _STATE.cancelled and isinstance(exc, KeyboardInterrupt):
        return "cancelled"
    return "error"


class stage:
    """A named phase of the job, as a context manager or a decorator; stages nest.

        with worker.stage("download", budget=300): ...

        @worker.stage("evaluate")
        def evaluate(): ...

    `budget` (seconds) is passed to the client, which may treat a stage that overruns it
    as hung. The end message says ok or error and how long the stage took."""

    __slots__ = ("name", "budget", "_open")

    def __init__(self, name: str, budget: Optional[float] = None):
        self.name = str(name)
        self.budget = budget
        # (depth, start) per entry, so one object can be re-entered
        self._open: list[tuple[Any, float]] = []

    def __enter__(self) -> stage:
        try:
            depth = _runtime.stage_begin(self.name, self.budget)
            if depth is not None:
                self._open.append((depth, _time.monotonic()))
        except BaseException as exc:  # noqa: BLE001 - the script must never fail in our code
            _runtime.internal_error("stage begin", exc)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if not self._open:
            return
        try:
            depth, start = self._open.pop()
            if exc is not None and not hasattr(exc, "__trainbridge_stage__"):
                try:  # the innermost stage an exception escaped from names its stage
                    exc.__trainbridge_stage__ = self.name
                except Exception:  # noqa: BLE001 - exceptions without a __dict__
                    pass
            _runtime.stage_end(
                self.name, depth, _end_status(exc), round(_time.monotonic() - start, 6)
            )
        except BaseException as failure:  # noqa: BLE001 - never replace the script's exception
            _runtime.internal_error("stage end", failure)

    def __call__(self, func: _F) -> _F:
        import functools

        name, budget = self.name, self.budget

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with stage(name, budget):
                return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


_LEVELS = ("debug", "info", "warning", "error", "critical")
_LOG_QUEUE_LIMIT = _runtime.LOG_QUEUE_LIMIT


def log(message: Any, level: str = "info", **fields: Any) -> None:
    """Send one log record. When 10,000 messages wait to be sent, the call waits (up to
    TRAINBRIDGE_LOG_WAIT_S, 5 s) for room, as a write to a full pipe would; only then is the
    record dropped, and counted (docs/WORKER.md)."""
    if not _STATE.enabled:
        return
    try:
        body = {
            "level": level if level in _LEVELS else "info",
            "message": str(message),
            "created": _time.time(),
        }
        if fields:
            body["fields"] = fields
        events = _STATE.events
        if len(events) < _LOG_QUEUE_LIMIT and not _STATE.log_gave_up:
            events.append(("log", body, _SLOT[0]))  # runtime.enqueue_log() when there is room
            if _STATE.idle:
                _runtime.nudge()
        else:
            _runtime.enqueue_log(body)
    except BaseException as exc:  # noqa: BLE001 - logging must never break the script
        _runtime.internal_error("log", exc)


def error(exc_or_message: Any, **fields: Any) -> None:
    """Report a non-fatal error (an exception you caught, or a message); the script goes
    on. Fatal errors need no call: uncaught exceptions are reported by themselves."""
    if not _STATE.enabled:
        return
    try:
        _runtime.report_error(exc_or_message, fields, skip=1)
    except BaseException as exc:  # noqa: BLE001 - reporting must never break the script
        _runtime.internal_error("error", exc)


def artifact(path: Any, kind: Optional[str] = None, step: Any = None) -> bool:
    """Say that the job made a file: a checkpoint, a sample image, any file (kind: one of
    "checkpoint", "image", "file"; by default from its name). The client lists it in the
    report and the dashboard shows it (images as a gallery, checkpoints to download); step
    defaults to the latest progress step. False when not supervised. Zero-code mode says so
    itself for torch.save and PIL's Image.save to a path."""
    from trainbridge.worker import artifacts

    return artifacts.record(path, kind, step)


def send(data: Any, timeout: Optional[float] = 10.0) -> bool:
    """Send a message (any JSON-like value) to the client: job.send()'s other direction.
    In order with stages, progress and logs; False when not supervised. See
    worker/messages.py for the limits (ValueError: too large; TimeoutError: no room)."""
    if not _STATE.enabled:
        return False
    from trainbridge.worker import messages

    return messages.send(data, timeout)


def on_message(handler: Any) -> Any:
    """Call handler(data) on the worker's thread for each message the client sends with
    job.send() (keep it short). Without a handler, messages wait for receive()."""
    from trainbridge.worker import messages

    return messages.on_message(handler)


def receive(timeout: Optional[float] = 0) -> Any:
    """The next message the client sent with job.send(), or None when none came within
    `timeout` seconds (0: just look; None: wait). For a training loop's safe points."""
    from trainbridge.worker import messages

    return messages.receive(timeout)


def __getattr__(name: str) -> Any:
    # logging is imported only by scripts that ask for the handler.
    if name == "LogHandler":
        from trainbridge.worker.logs import LogHandler

        return LogHandler
    raise AttributeError(f"module 'worker' has no attribute {name!r}")


def _in_multiprocessing_child() -> bool:
    """A spawn/forkserver child inherits our variables and re-imports the main module
    (and so `worker`): it must not connect as its parent (same job and rank)."""
    process = _sys.modules.get("multiprocessing.process")
    if process is None:
        return False
    try:
        return process.parent_process() is not None or bool(
            getattr(process.current_process(), "_inheriting", False)
        )
    except Exception:  # noqa: BLE001 - private multiprocessing state: unknown means "not a child"
        return False


def _start() -> None:
    if not _os.environ.get("TRAINBRIDGE_ENDPOINT") or _in_multiprocessing_child():
        return  # not supervised (or a helper process of a supervised one): a no-op worker
    from trainbridge.worker.config import from_env

    config, problem = from_env(_os.environ)
    if problem:
        _sys.stderr.write(f"[trainbridge] worker disabled: {problem}\n")
    if config is None:
        return
    try:
        from trainbridge.worker import hooks
        from trainbridge.worker.beacon import Beacon

        _STATE.config = config
        _STATE.enabled = True
        hooks.install(config)
        beacon = Beacon(config)
        _STATE.beacon = beacon
        beacon.start()
        beacon.go.set()  # only now: see Beacon.run
    except BaseException as exc:  # noqa: BLE001 - the script runs on, unsupervised
        _runtime.internal_error("start", exc)
        _runtime.disable()


_start()
if not _STATE.enabled:
    progress = _progress_off
