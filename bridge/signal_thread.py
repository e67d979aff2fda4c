"""Signals handled on a thread of their own, never in a handler that takes a lock.

A Python signal handler runs in the main thread between any two bytecodes, and nested in
another handler when a second signal comes while the first runs. A handler that sets an
Event, starts a Thread or writes through a queue takes a lock (threading.Lock is not
re-entrant): a second signal that lands while the first handler holds it deadlocks the main
thread for good. A keeper sent a burst of SIGUSR1 and SIGUSR2 (dumps and requests asked at
once) hung so, and its job's cancel was never carried out.

Here the C-level handler writes the signal's number to a pipe (signal.set_wakeup_fd: no
Python runs for it, no lock is taken), the Python-level handler does nothing, and
SignalThread reads the pipe and calls on_signal(signum) for each, in order, outside any
handler. It also needs no wake-up of the main thread: the byte is written the moment the
signal arrives, whatever the main thread is doing.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterable
from typing import Any, Callable


def _nothing(signum: int, frame: Any) -> None:
    """The Python-level handler: the work is SignalThread's (a handler must be installed for
    the C-level one, which writes to the wakeup fd, to run at all)."""


class SignalThread(threading.Thread):
    """on_signal(signum) for every signal of install()'s, on this thread, in the order
    they came. One per process: the wakeup fd is the process's."""

    def __init__(self, on_signal: Callable[[int], None], name: str) -> None:
        super().__init__(name=name, daemon=True)
        self._on_signal = on_signal
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)  # the C handler must never block

    def install(self, signals: Iterable[int]) -> None:
        """Main thread only (signal.signal's rule): route `signals` here and start."""
        for signum in signals:
            signal.signal(signum, _nothing)
        # A full pipe (tens of thousands of signals unread) drops bytes without a word:
        # signals of each kind are waiting already.
        signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        self.start()

    def run(self) -> None:
        while True:
            try:
                data = os.read(self._read, 512)
            except OSError:
                return
            if not data:
                return
            for signum in data:
                try:
                    self._on_signal(signum)
                except Exception as exc:  # noqa: BLE001 - the next signal must still be heard
                    _say(f"handling signal {signum} failed: {type(exc).__name__}: {exc}")


def _say(text: str) -> None:
    try:
        print(f"trainbridge: {text}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass  # stderr gone (a full disk under keeper.log): nothing else to tell
