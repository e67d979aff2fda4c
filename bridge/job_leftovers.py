"""The end's wait for a job's leftovers: the processes of its tree that outlived it are
SIGKILLed at the finish, and the report waits until they are gone (bounded: KILL_WAIT_S) so
that it can say nothing of the job is left. A SIGKILLed process is not gone at once: it frees
its memory first (about 0.2 s a GiB here), longer in an uninterruptible wait or on a starved
machine.

The wait holds no thread: the hub polls a pidfd per leftover with its other fds, and the job's
tick ends the wait at its deadline (or looks again every POLL_S where the kernel gives no
pidfd). Before, the end waited on the hub's I/O thread, and every other job of the hub went
unheard meanwhile. A part of bridge.job.Job's Ending; I/O thread only."""

from __future__ import annotations

import functools
import os
import time
from typing import TYPE_CHECKING, Any, Callable, Optional

from trainbridge.bridge import launcher

if TYPE_CHECKING:
    from trainbridge.bridge.hub import Hub

KILL_WAIT_S = 1.0  # how long the end waits for SIGKILLed leftovers to be gone
POLL_S = 0.01  # without pidfds: how often the tree is looked at while the wait lasts


class LeftoverWait:
    """job.ending.leftovers: at most one wait at a time, over once."""

    def __init__(self, hub: Hub) -> None:
        self._hub = hub
        self._fds: set[int] = set()
        self._tree: Optional[launcher.Tree] = None
        self._then: Optional[Callable[[], None]] = None
        self.deadline: Optional[float] = None  # None: not waiting

    def start(
        self,
        tree: launcher.Tree,
        then: Callable[[], None],
        owner: Any,
        timeout: float = KILL_WAIT_S,
    ) -> bool:
        """Wait for `tree`'s processes but its root, then call `then()` once (from the hub's
        poll or the job's tick). False, and `then` is not called, when none of them runs.
        `owner`: the job, which the hub fails (internal) if `then` raises."""
        alive = tree.alive(include_root=False)
        if not alive:
            return False
        self._tree, self._then = tree, then
        self.deadline = time.monotonic() + timeout
        for proc in alive:
            fd = launcher.open_pidfd(proc.pid)  # None: gone already, or no pidfd here
            if fd is not None:
                self._fds.add(fd)
                self._hub.add_fd(fd, functools.partial(self._gone, fd), owner=owner)
        return True

    def due(self) -> Optional[float]:
        """When the job's tick should look: the deadline, or sooner without pidfds."""
        if self.deadline is None or self._fds:
            return self.deadline
        return min(self.deadline, time.monotonic() + POLL_S)

    def tick(self, now: float) -> None:
        if self.deadline is None or self._tree is None:
            return
        if now >= self.deadline or (not self._fds and not self._tree.alive(include_root=False)):
            self._over()

    def stop(self) -> None:
        """No more waiting, and `then` is not called: the fds given back to the kernel."""
        for fd in list(self._fds):
            self._close(fd)
        self._tree, self._then, self.deadline = None, None, None

    def _gone(self, fd: int) -> None:
        """A leftover's pidfd became readable: it has ended."""
        self._close(fd)
        if not self._fds and self._tree is not None and not self._tree.alive(include_root=False):
            self._over()

    def _close(self, fd: int) -> None:
        self._fds.discard(fd)
        self._hub.remove_fd(fd)
        os.close(fd)

    def _over(self) -> None:
        then = self._then
        self.stop()
        if then is not None:
            then()
