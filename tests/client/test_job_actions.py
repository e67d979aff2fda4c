"""bridge/job_actions.py's ACTIONS on their own: what the job does for each of the machine's
actions, driven on a stand-in for the Job with no process, hub or socket. Every action the
machine's vectors emit has an entry. The whole path is the client tests'."""

import json
import os
import re

import pytest

from trainbridge.bridge.job_actions import ACTIONS, Actions
from trainbridge.bridge.job_asks import Asks

VECTORS = os.path.join(os.path.dirname(__file__), "..", "..", "vectors", "machine.json")


class Channel:
    def __init__(self):
        self.seq = 10
        self.sent = []

    def command(self, kind, body=None):
        self.seq += 2  # two processes asked
        self.sent.append((kind, body))
        return self.seq


class Tree:
    def __init__(self):
        self.signals = []

    def signal(self, signum):
        self.signals.append(signum)


class Job:
    """A stand-in for the Job: the state the actions read, and the other parts they hand work
    to (the publisher, the ending), which only record what they were asked."""

    def __init__(self):
        self.channel = Channel()
        self.tree = Tree()
        self.m = {"hang": {"stage": "load"}}
        self.facts = {"cancel": {"reason": "user"}, "signals_sent": [], "dump_pids": [],
                      "native_dump_pids": [], "ranks": {"procs": {}}, "tail_at_hang": None,
                      "tail": [{"stream": "stdout", "text": "step 3", "end": "lf"}],
                      "lines": {"stdout": 7, "stderr": 2}}  # fmt: skip
        self.crash_file = ""
        self.asks = Asks()
        self.did = []
        self.publisher = Recorder(self.did, publish=lambda event: ("publish", event))
        self.ending = Recorder(
            self.did, start_snapshot=lambda: ("snapshot",), drain=lambda: ("drain",),
            finish=lambda: ("finish",),
        )  # fmt: skip


class Recorder:
    """A part whose methods only record (name=fn: fn's answer is what is recorded)."""

    def __init__(self, did, **methods):
        for name, fn in methods.items():
            setattr(self, name, lambda *a, fn=fn, **k: did.append(fn(*a, **k)))


class Room(Actions):
    """The actions part on a stand-in Job; its own looks and status recorded, not done."""

    def __init__(self):
        super().__init__(Job())
        self.did = self.job.did

    def publish_status(self):
        self.did.append(("status",))

    def live_diagnose(self, force=False):
        self.did.append(("look now", force))

    def _start_look(self, reason):
        self.did.append(("look", reason))


def test_every_action_the_machine_emits_has_an_entry():
    with open(VECTORS, encoding="ascii") as f:
        emitted = set(re.findall(r'"do": *"([a-z_]+)"', json.dumps(json.load(f))))
    assert emitted and emitted <= set(ACTIONS), emitted - set(ACTIONS)


def test_a_state_is_said_with_the_status_and_a_stall_is_looked_at_at_once():
    room = Room()
    room._perform({"do": "state", "state": "running"})
    assert room.did == [("publish", {"event": "state", "state": "running"}), ("status",)]
    room = Room()
    room._perform({"do": "state", "state": "stalled"})
    assert room.did[-1] == ("look now", True)


def test_a_hang_is_said_and_its_evidence_gathered():
    room = Room()
    room._perform({"do": "snapshot", "reason": "stall"})
    assert room.did == [
        ("publish", {"event": "hang", "reason": "stall", "stage": "load"}),
        ("snapshot",),
    ]
    # the tail as it stands at the verdict: what the stop makes it print is kept apart
    assert room.job.facts["tail_at_hang"] == {
        "tail": [{"stream": "stdout", "text": "step 3", "end": "lf"}],
        "lines": 9,
    }


def test_the_asks_remember_their_seqs():
    room = Room()
    room._perform({"do": "dump_stacks"})
    assert room.job.asks.hang_seqs == range(11, 13) and room.job.asks.hang_last == 12
    room._perform({"do": "cancel"})
    assert room.job.channel.sent[-1] == ("cancel", {"reason": "user"})
    assert room.job.asks.cancel_seqs == range(13, 15)


@pytest.mark.parametrize("name", ["SIGTERM", "SIGKILL"])
def test_a_stop_signal_goes_to_the_whole_tree_and_is_recorded(name):
    import signal

    room = Room()
    room._perform({"do": "signal", "signal": name})
    assert room.job.facts["signals_sent"] == [name]
    assert room.did == [("publish", {"event": "signal", "signal": name})]
    assert room.job.tree.signals == [getattr(signal, name)]


def test_look_drain_and_finish_are_handed_on():
    room = Room()
    for action in ({"do": "look", "reason": "startup"}, {"do": "drain"}, {"do": "finish"}):
        room._perform(action)
    assert room.did == [("look", "startup"), ("drain",), ("finish",)]


class Looking(Room):
    """The room at a look's end: its samples are given, and the machine's answer to
    `looked` is the test's (it hangs, or it no longer heeds the look)."""

    def __init__(self, machine_hangs):
        super().__init__()
        from trainbridge.bridge.job_look import Look

        self.job.pid = 4242
        self.job.deadline_look = Look()
        self.job.m = {"hang": None, "exit": None, "last_activity_t": None, "config": {}}
        self.machine_hangs = machine_hangs

    def _sample(self, now):
        proc = {"pid": 4242, "name": "python", "cpu_s": 0.0, "io_bytes": 0, "threads": None}
        return {"t": now, "lines": 0, "lead": 4242, "procs": [proc]}

    def step(self, event):
        self.did.append(("step", event["type"], event["working"]))
        if self.machine_hangs:
            self.job.m = {**self.job.m, "hang": {"reason": event["reason"]}}


@pytest.mark.parametrize("machine_hangs", [True, False])
def test_a_look_that_finds_nothing_is_in_the_report_only_when_it_made_the_hang(machine_hangs):
    room = Looking(machine_hangs)
    room.job.deadline_look.start("startup", room._sample(10.0), 10.0)
    room._end_look(11.0)
    assert room.did == [("step", "looked", False)]  # a Python that did nothing for 1 s
    if machine_hangs:
        assert room.job.facts["look"]["reason"] == "startup"
        assert "started and then did nothing" in room.job.facts["look"]["why"]
    else:  # the job spoke meanwhile: the machine no longer heeds the look
        assert "look" not in room.job.facts
