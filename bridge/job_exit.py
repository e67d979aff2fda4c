"""How a job learns that its process ended, and what the kernel says of that end: a pidfd
the hub polls with the job's other sockets (else a thread that waits for the process, where
there is no pidfd), and the cgroup's OOM kill count from before the process ran, which the
exit is compared with (bridge/oom.py).

A part of bridge.job.Job that owns its state (the pidfd, the count before) and is given the
hub and what to call at the exit. I/O thread only, as every part of a Job (the waiting
thread, where there is one, only posts the call to it)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable, Optional

from trainbridge.bridge import launcher, oom

if TYPE_CHECKING:
    import subprocess

    from trainbridge.bridge.hub import Hub


class ExitWatch:
    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self.pidfd: Optional[int] = None  # polled by the hub while the process runs
        self.oom_before: Optional[int] = None  # the cgroup's OOM kills before it ran

    def start(self, proc: subprocess.Popen[bytes], on_exit: Callable[[], None], owner: Any) -> None:
        """Watch `proc`: `on_exit()` runs on the I/O thread once it has ended (and may run
        again after that: it checks). `owner`: the job, whom the hub fails if on_exit raises."""
        self.oom_before = oom.oom_kill_count(proc.pid)
        self.pidfd = launcher.open_pidfd(proc.pid)
        if self.pidfd is not None:
            self.hub.add_fd(self.pidfd, on_exit, owner=owner)
        else:
            launcher.watch_exit_in_thread(proc, lambda: self.hub.call(on_exit))

    def stop(self) -> None:
        """No more watching: the process has ended, or the job is given up."""
        if self.pidfd is not None:
            self.hub.remove_fd(self.pidfd)
            os.close(self.pidfd)
            self.pidfd = None

    def oom(
        self, exit_code: Optional[int], exit_signal: Optional[str], sigkill_sent: bool
    ) -> dict[str, Any]:
        """What the OOM killer did, for the facts record: oom_killed (a SIGKILL nobody here
        sent, with the count risen: True; None when unknown), only for such a SIGKILL; and
        oom_kills, the processes it took in the cgroup while a job that ended badly ran."""
        out: dict[str, Any] = {
            "oom_kills": oom.kills_since(self.oom_before, exit_code, exit_signal)
        }
        if exit_signal == "SIGKILL" and not sigkill_sent:
            out["oom_killed"] = oom.oom_killed(self.oom_before, oom.oom_kill_count())
        return out
