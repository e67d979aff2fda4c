"""The job state machine against the shared trace tables (vectors/machine.json)."""

import json
import os

import pytest

from trainbridge.bridge import machine

VECTORS = os.path.join(os.path.dirname(__file__), "..", "..", "vectors", "machine.json")
CASES = json.load(open(VECTORS, encoding="ascii"))["cases"]


def same_time(a, b):
    return (a is None and b is None) or (a is not None and b is not None and abs(a - b) < 1e-9)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_trace(case):
    state = machine.initial(case["config"], case["t0"])
    assert state["state"] == case["initial"]["state"]
    assert same_time(machine.next_deadline(state), case["initial"]["deadline"])
    for i, expect in enumerate(case["steps"]):
        before, frozen = state, json.dumps(state, sort_keys=True)
        state, actions = machine.step(state, expect["event"])
        where = f"step {i}: {expect['event']}"
        assert json.dumps(before, sort_keys=True) == frozen, f"{where} changed its input state"
        assert json.dumps(state) and json.loads(json.dumps(state)) == state, where
        assert state["state"] == expect["state"], where
        assert actions == expect["actions"], where
        assert same_time(machine.next_deadline(state), expect["deadline"]), (
            f"{where}: deadline {machine.next_deadline(state)}"
        )
        assert machine.live_look_due(state) == expect["live_look"], where
    assert state["outcome"] == case["outcome"]
    assert state["hang"] == case["hang"]


def test_step_does_not_mutate_its_input():
    state = machine.initial({"startup_timeout": 1}, 0)
    frozen = json.dumps(state, sort_keys=True)
    machine.step(state, {"type": "hello", "t": 0.5, "dump_signal": True})
    machine.step(state, {"type": "timer", "t": 5})
    assert json.dumps(state, sort_keys=True) == frozen


def test_unknown_config_and_events_are_rejected():
    with pytest.raises(ValueError):
        machine.initial({"startup_timout": 1})
    with pytest.raises(ValueError):
        machine.step(machine.initial(), {"type": "helo", "t": 0})


LEAD = json.load(
    open(
        os.path.join(os.path.dirname(__file__), "..", "..", "vectors", "lead.json"),
        encoding="ascii",
    )
)


@pytest.mark.parametrize("case", LEAD["lead"], ids=lambda c: c["name"])
def test_lead_vectors(case):
    assert (
        machine.choose_lead(
            case["present"], case["launched_pid"], case.get("launched_loaded", False)
        )
        == case["lead"]
    )


@pytest.mark.parametrize("case", LEAD["launcher"], ids=lambda c: " ".join(c["argv"]))
def test_launcher_vectors(case):
    assert machine.is_launcher({"argv": case["argv"]}) is case["launcher"]


def test_drain_vectors():
    """The drain's end (machine.drain_wait, pinned by vectors/drain.json): the pipes done,
    and the lead's bye, every connection's end notice, or a quiet socket."""
    path = os.path.join(os.path.dirname(__file__), "..", "..", "vectors", "drain.json")
    with open(path) as f:
        cases = json.load(f)["cases"]
    for case in cases:
        assert machine.drain_wait(**case["in"]) == case["wait_s"], case["name"]
