"""bridge/job_end.py's steps on their own, on a stand-in for the Job with no process, hub or
socket: the drain reads what is left and notes when it began; its end closes the pipes and
tells the machine; an exit is heard only once the process has one; a job that ended is not
failed again. The whole path (a job's end to its report) is the client tests' and the fault
matrix's."""

import threading

from trainbridge.bridge.job_end import Ending


class Part:
    """A part of the stand-in Job that records each call made on it."""

    def __init__(self, did, name):
        self._did, self._name = did, name

    def __getattr__(self, method):
        return lambda *args: self._did.append((self._name, method, *args))


class Job:
    def __init__(self):
        self.did = []
        self.hub = Part(self.did, "hub")
        self.output = Part(self.did, "output")
        self.actions = Part(self.did, "actions")
        self.tree = None
        self.proc = None
        self.facts = {}


def test_the_drain_reads_what_is_left_and_its_end_tells_the_machine():
    job = Job()
    ending = Ending(job)
    assert ending.drain_started is None
    ending.drain()
    assert job.did == [("hub", "drain_router"), ("output", "read_all")]
    assert ending.drain_started is not None  # machine.drain_wait() counts from here
    job.did.clear()
    ending.drained(12.5)
    assert ending.drain_started is None
    assert job.did == [
        ("output", "close_pipes"),
        ("actions", "step", {"type": "drained", "t": 12.5}),
    ]


class Running:
    returncode = None

    def poll(self):
        return None


def test_an_exit_is_heard_only_once_the_process_has_one():
    job = Job()
    ending = Ending(job)
    ending.on_exit_ready()  # no process yet
    job.proc = Running()
    ending.on_exit_ready()  # a pidfd that woke early: still running
    assert job.did == [] and job.facts == {}


def test_a_job_that_ended_is_not_failed_again():
    job = Job()
    ending = Ending(job)
    ending.finished.set()
    ending.fail_internal(RuntimeError("late"))
    assert job.did == [] and "internal_error" not in job.facts
    assert isinstance(ending.finished, threading.Event)  # what job.wait() waits on
