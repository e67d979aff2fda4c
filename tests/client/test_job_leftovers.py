"""bridge/job_leftovers.py and the finish that uses it, with real processes: the end waits for
its SIGKILLed leftovers through pidfds the hub polls (or by looking on ticks where there is no
pidfd), not on the I/O thread, and builds the report once they are gone or the wait's deadline
passed; a wait given up closes its fds. The whole path (a job whose child outlives it, and
nothing of it left at the end) is tests/client/test_outcomes.py's and the fault matrix's."""

import os
import select
import signal
import subprocess
import sys
import time

import pytest

from trainbridge.bridge import launcher
from trainbridge.bridge.job_end import Ending
from trainbridge.bridge.job_leftovers import POLL_S, LeftoverWait

CHILD = (
    "import subprocess, sys, time\n"
    "p = subprocess.Popen(['sleep', '120'])\n"
    "print(p.pid, flush=True)\n"
    "time.sleep(120)\n"
)


class Hub:
    """The hub's side: the fds it would poll, with what to call when one is readable."""

    def __init__(self):
        self.fds = {}

    def add_fd(self, fd, on_ready, owner=None):
        self.fds[fd] = on_ready

    def remove_fd(self, fd):
        del self.fds[fd]

    def poll_once(self, timeout_s):
        """One round of the hub's poll: call what is ready within timeout_s."""
        poller = select.poll()
        for fd in self.fds:
            poller.register(fd, select.POLLIN)
        for fd, _ in poller.poll(timeout_s * 1000):
            self.fds[fd]()


class Kept(launcher.Tree):
    """A real tree whose signals are recorded, not sent: its leftover lives until the test
    ends it, so what the end does while it lives is seen for sure."""

    def __init__(self, pid):
        super().__init__(pid, None)
        self.sent = []

    def signal(self, sig, include_root=True):
        self.sent.append((sig, include_root))
        return 1


@pytest.fixture
def tree():
    """A parent whose child would outlive it: (the Tree, the child's pid)."""
    parent = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    t = Kept(parent.pid)
    t.refresh()
    assert child in t.known
    yield t, child
    for pid in (child, parent.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    parent.wait(10)
    parent.stdout.close()


def end_of(pid):
    """Wait (up to 10 s) until `pid` has ended, on a pidfd of the test's own."""
    fd = os.pidfd_open(pid)
    try:
        assert select.select([fd], [], [], 10)[0], f"process {pid} did not end"
    finally:
        os.close(fd)


def test_the_wait_ends_when_the_pidfd_says_the_leftover_is_gone(tree):
    t, child = tree
    hub, over = Hub(), []
    wait = LeftoverWait(hub)
    assert wait.start(t, lambda: over.append(True), owner=None)
    assert len(hub.fds) == 1 and wait.due() == wait.deadline
    hub.poll_once(0)  # alive: nothing ready
    assert over == []
    os.kill(child, signal.SIGKILL)
    hub.poll_once(10)
    assert over == [True] and hub.fds == {} and wait.deadline is None


def test_without_pidfds_the_ticks_look_until_it_is_gone(tree, monkeypatch):
    t, child = tree
    monkeypatch.setattr(launcher, "open_pidfd", lambda pid: None)
    hub, over = Hub(), []
    wait = LeftoverWait(hub)
    assert wait.start(t, lambda: over.append(True), owner=None)
    assert hub.fds == {} and wait.due() <= time.monotonic() + POLL_S
    wait.tick(time.monotonic())
    assert over == []  # still alive
    os.kill(child, signal.SIGKILL)
    end_of(child)
    wait.tick(time.monotonic())
    assert over == [True]


def test_the_deadline_ends_the_wait_and_a_wait_given_up_closes_its_fds(tree):
    t, _ = tree
    hub, over = Hub(), []
    wait = LeftoverWait(hub)
    assert wait.start(t, lambda: over.append(True), owner=None, timeout=0.5)
    fd = next(iter(hub.fds))
    wait.tick(wait.deadline)  # the leftover outlived the wait: the report goes out anyway
    assert over == [True] and hub.fds == {}
    with pytest.raises(OSError):
        os.fstat(fd)  # given back
    assert wait.start(t, lambda: over.append("again"), owner=None)
    wait.stop()
    assert hub.fds == {} and wait.due() is None
    wait.tick(time.monotonic() + 5)
    assert over == [True]  # a stopped wait calls nothing


class Job:
    def __init__(self, tree):
        self.hub = Hub()
        self.tree = tree


class Recorded(Ending):
    """The end with its report recorded, not built (no channel, no facts here)."""

    reported = 0

    def _report(self):
        self.reported += 1


def test_the_finish_kills_the_leftovers_and_reports_once_they_are_gone_not_before(tree):
    t, child = tree
    job = Job(t)
    ending = Recorded(job)
    ending.finish()
    assert t.sent == [(signal.SIGKILL, False)]  # the leftovers, not the launched process
    assert ending.reported == 0 and ending.due() is not None  # returned: the hub runs on
    assert ending.tick(time.monotonic())  # its tick is the end's while it waits
    os.kill(child, signal.SIGKILL)
    job.hub.poll_once(10)
    assert ending.reported == 1 and ending.due() is None and not ending.tick(time.monotonic())


def test_a_failed_job_holds_the_thread_for_its_leftovers_at_most_the_bound(tree):
    t, child = tree
    ending = Recorded(Job(t))
    ending.finish(hold=True)  # fail_internal: nothing of the job may run on meanwhile
    # The leftover (its SIGKILL only recorded here) outlived the bound: the report went out.
    assert t.sent == [(signal.SIGKILL, False)] and any(p.pid == child for p in t.alive(False))
    assert ending.reported == 1 and ending.due() is None and ending.leftovers.deadline is None
