"""What many threads put and one writer thread takes in batches: a job's feed on its way to
the keeper's events file or to a client's stdout, the fields of a store row.

The rule, in one place: an item that reaches an idle writer (nothing taken for `every`
seconds) is taken at once, so a lone event waits for nothing; while items keep coming they
are taken together, at most one batch every `every` seconds, so a flood costs one write per
period; an urgent item is taken at once. The writer does the writing (and its retries):
this holds no I/O."""

from __future__ import annotations

import math
import threading
import time
from typing import Callable, Generic, TypeVar

T = TypeVar("T")


class Batches(Generic[T]):
    def __init__(self, every: float, clock: Callable[[], float] = time.monotonic):
        self.every = every
        self._clock = clock
        self._cond = threading.Condition()
        self._items: list[T] = []
        self._urgent = False
        self._closed = False
        self._taken_t = -math.inf  # when the writer last took a batch

    def put(self, item: T, urgent: bool = False) -> bool:
        """Queue an item (any thread); False once closed (the item is not queued)."""
        with self._cond:
            if self._closed:
                return False
            self._items.append(item)
            if urgent:
                self._urgent = True
            if urgent or len(self._items) == 1:
                self._cond.notify()
            return True

    def __len__(self) -> int:
        # No lock: a list's length is read in one step, and a flood asks once per item
        # (the job server's crowded()); take() swaps the list, so this is a moment's count.
        return len(self._items)

    def take(self, retry_after: float = 0.0) -> tuple[list[T], bool]:
        """The writer's wait: (the items, in the order put; whether it is closed) once a
        batch is due, or at once when closed. With `retry_after` (a write failed and the
        writer holds what it must try again), it waits that long, urgent items or not, and
        then takes what came, even nothing."""
        with self._cond:
            if retry_after > 0:
                end = self._clock() + retry_after
                while not self._closed and (left := end - self._clock()) > 0:
                    self._cond.wait(left)
            else:
                while not self._closed and not self._urgent:
                    if not self._items:
                        self._cond.wait()  # idle: no wake-up until an item comes
                        continue
                    left = self._taken_t + self.every - self._clock()
                    if left <= 0:
                        break
                    self._cond.wait(left)  # more may come: one batch for all
            items, self._items, self._urgent = self._items, [], False
            self._taken_t = self._clock()
            return items, self._closed

    def close(self) -> None:
        """Take no more; the writer's take() returns at once from now on."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
