"""bridge/job_actions.py's ACTIONS on their own: what the job does for each of the machine's
actions, driven on a stand-in for the Job with no process, hub or socket. Every action the
machine's vectors emit has an entry. The whole path is the client tests'."""

import json
import os
import re

import pytest

from trainbridge.bridge.job_actions import ACTIONS, JobActions

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


class Room(JobActions):
    def __init__(self):
        self.channel = Channel()
        self.tree = Tree()
        self.m = {"hang": {"stage": "load"}}
        self.facts = {"cancel": {"reason": "user"}, "signals_sent": [], "dump_pids": [],
                      "native_dump_pids": [], "ranks": {"procs": {}}}  # fmt: skip
        self.crash_file = ""
        self.did = []

    def _publish(self, event):
        self.did.append(("publish", event))

    def _publish_status(self):
        self.did.append(("status",))

    def _live_diagnose(self, force=False):
        self.did.append(("look now", force))

    def _start_snapshot(self):
        self.did.append(("snapshot",))

    def _start_look(self, reason):
        self.did.append(("look", reason))

    def _drain(self):
        self.did.append(("drain",))

    def _finish(self):
        self.did.append(("finish",))


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


def test_the_asks_remember_their_seqs():
    room = Room()
    room._perform({"do": "dump_stacks"})
    assert room._hang_seqs == range(11, 13) and room._dump_seq == 12
    room._perform({"do": "cancel"})
    assert room.channel.sent[-1] == ("cancel", {"reason": "user"})
    assert room._cancel_seqs == range(13, 15)


@pytest.mark.parametrize("name", ["SIGTERM", "SIGKILL"])
def test_a_stop_signal_goes_to_the_whole_tree_and_is_recorded(name):
    import signal

    room = Room()
    room._perform({"do": "signal", "signal": name})
    assert room.facts["signals_sent"] == [name]
    assert room.did == [("publish", {"event": "signal", "signal": name})]
    assert room.tree.signals == [getattr(signal, name)]


def test_look_drain_and_finish_are_handed_on():
    room = Room()
    for action in ({"do": "look", "reason": "startup"}, {"do": "drain"}, {"do": "finish"}):
        room._perform(action)
    assert room.did == [("look", "startup"), ("drain",), ("finish",)]
