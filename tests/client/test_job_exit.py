"""bridge/job_exit.py on its own, with a real process: its end is seen through the pidfd the
hub polls, the pidfd is closed when the watch stops, and the OOM facts are given only for a
SIGKILL nobody here sent. The whole path (a killed job's report) is the fault matrix's and
tests/client/test_outcomes.py's."""

import os
import select
import signal
import subprocess
import sys

import pytest

from trainbridge.bridge.job_exit import ExitWatch


class Hub:
    """The hub's side of the watch: the fds it polls, and calls posted to its thread."""

    def __init__(self):
        self.fds, self.calls = {}, []

    def add_fd(self, fd, callback, owner=None):
        self.fds[fd] = (callback, owner)

    def remove_fd(self, fd):
        del self.fds[fd]

    def call(self, fn):
        self.calls.append(fn)


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no pidfd on this platform")
def test_the_end_is_seen_through_the_pidfd_and_the_fd_closed_after():
    hub, ended = Hub(), []
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                            stdin=subprocess.PIPE)  # fmt: skip
    try:
        watch = ExitWatch(hub)
        watch.start(proc, lambda: ended.append(proc.poll()), owner="the job")
        fd = watch.pidfd
        assert fd is not None and hub.fds[fd][1] == "the job"
        assert select.select([fd], [], [], 0)[0] == []  # runs: not readable
        proc.stdin.close()  # the child reads EOF and ends
        assert select.select([fd], [], [], 30)[0] == [fd], "no exit within 30 s"
        hub.fds[fd][0]()  # what the hub does when the fd is readable
        assert ended == [0]
        watch.stop()
        assert watch.pidfd is None and hub.fds == {}
        with pytest.raises(OSError):
            os.fstat(fd)  # closed
        watch.stop()  # a second stop does nothing
    finally:
        proc.kill()
        proc.wait(10)


def test_oom_facts_only_for_a_sigkill_nobody_here_sent():
    watch = ExitWatch(Hub())
    watch.oom_before = None  # a cgroup that could not be read: unknown, not "no"
    assert watch.oom(0, None, sigkill_sent=False) == {"oom_kills": None}
    assert watch.oom(None, "SIGKILL", sigkill_sent=True) == {"oom_kills": None}
    assert watch.oom(None, "SIGKILL", sigkill_sent=False) == {"oom_kills": None, "oom_killed": None}
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    watch.start(proc, lambda: None, owner=None)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    watch.stop()
    found = watch.oom(None, "SIGKILL", sigkill_sent=False)
    if watch.oom_before is None:  # this machine's cgroup has no OOM counter to read
        assert found == {"oom_kills": None, "oom_killed": None}
    else:  # nothing was killed for memory meanwhile
        assert found == {"oom_kills": 0, "oom_killed": False}, found
