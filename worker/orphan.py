"""The job without its client: noticing that the supervising client is gone, and ending
the job's whole process group when it is (used by the beacon thread)."""

from __future__ import annotations

import os
import signal
import time

TYPE_CHECKING = False  # typing costs milliseconds at `import worker`
if TYPE_CHECKING:
    from typing import Optional


class ParentWatch:
    """Notices that the supervising client (TRAINBRIDGE_CLIENT_PID) is gone.

    Each process watches the client through a pidfd, which the beacon polls and which
    becomes readable when the client exits; once opened it names that very process, never
    a later one with the same pid (Linux 5.3+). The job's top process (the client is its
    parent) checks that the client was still its parent after opening it; without pidfds
    it checks os.getppid() every PARENT_POLL_S instead: when the client dies, the kernel
    re-parents the process to init or a subreaper, so the parent pid changes, and no pid
    reuse can fool that. Deeper processes (torchrun's ranks, Python started by a shell
    script) without pidfds do not watch; the top process still does if it has a worker.

    Not a parent-death signal (prctl PR_SET_PDEATHSIG): it fires when the *thread* that
    spawned the child ends, and bridge.launch may be called from a short-lived thread."""

    __slots__ = ("client_pid", "top", "fd", "lost")

    def __init__(self, client_pid: int):
        self.client_pid = client_pid
        self.top = os.getppid() == client_pid
        self.fd: Optional[int] = None
        self.lost = False  # the client was gone before we looked
        try:
            self.fd = os.pidfd_open(client_pid)
        except ProcessLookupError:
            self.lost = True
        except (AttributeError, OSError):  # an old kernel, or no pidfd_open in this Python
            pass
        if self.top and os.getppid() != client_pid:
            # Gone while we opened it: the fd may name a later process with its pid.
            self.lost = True

    @property
    def polls(self) -> bool:
        """True when only os.getppid(), checked every PARENT_POLL_S, can tell (no pidfd)."""
        return self.fd is None and self.top and not self.lost

    def gone(self) -> bool:
        if self.lost:
            return True
        if self.fd is not None:
            import select  # a C module, loaded with zmq already

            return bool(select.select([self.fd], [], [], 0)[0])
        return self.top and os.getppid() != self.client_pid


REAPER = "/bin/sh"


def end_process_group(pgid: int, grace_s: float, message: str) -> None:
    """SIGTERM to the group now and SIGKILL after grace_s, even though this process is in
    the group and may well die of the SIGTERM: a tiny reaper in a session of its own (so
    the group's signals miss it) sleeps out the grace and sends the SIGKILL. It is started
    with posix_spawn (no Python fork of a big, threaded training process, no at-fork hooks)
    and with /dev/null as its stdio (it must not hold the dead client's pipes)."""
    reaper = None
    if grace_s > 0:
        try:
            devnull = os.devnull
            reaper = os.posix_spawn(
                REAPER,
                ["sh", "-c", f"sleep {grace_s:.3f}; kill -KILL -{pgid} 2>/dev/null"],
                {"PATH": os.defpath},
                setsid=True,
                file_actions=[
                    (os.POSIX_SPAWN_OPEN, 0, devnull, os.O_RDWR, 0),
                    (os.POSIX_SPAWN_DUP2, 0, 1),
                    (os.POSIX_SPAWN_DUP2, 0, 2),
                ],
            )
        except (AttributeError, OSError, NotImplementedError):
            reaper = None
    # The stderr pipe's reader may be the dead client: a failed write changes nothing.
    try:
        os.write(
            2,
            (
                message + (f" (SIGTERM to process group {pgid}, SIGKILL after {grace_s:g} s)\n")
            ).encode("ascii", "backslashreplace"),
        )
    except OSError:
        pass
    try:
        os.killpg(pgid, signal.SIGKILL if grace_s <= 0 else signal.SIGTERM)
    except OSError:
        return
    if grace_s > 0 and reaper is None:
        # No reaper: this thread sends the SIGKILL, which works while this process lives
        # (its script ignores or handles SIGTERM); the rest of the group otherwise only
        # gets the SIGTERM.
        time.sleep(grace_s)
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:
            pass
