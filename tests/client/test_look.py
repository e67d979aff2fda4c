"""The look before a hang is declared, the pure part: vectors/look.json, which
node-client/test/look.test.js runs too (real processes: test_deadlines.py)."""

import json
import os

import pytest

from trainbridge.bridge import look

CASES = json.load(
    open(
        os.path.join(os.path.dirname(__file__), "..", "..", "vectors", "look.json"),
        encoding="ascii",
    )
)["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_two_samples_in_a_verdict_out(case):
    assert look.judge(case["reason"], case["before"], case["after"]) == case["verdict"]


def test_an_unknown_reason_is_refused():
    with pytest.raises(ValueError, match="unknown look reason 'stage_budget'"):
        look.judge("stage_budget", {"t": 0}, {"t": 1, "procs": []})


VECTORS = json.load(
    open(
        os.path.join(os.path.dirname(__file__), "..", "..", "vectors", "look.json"),
        encoding="ascii",
    )
)


@pytest.mark.parametrize("case", VECTORS["heard"], ids=[c["name"] for c in VECTORS["heard"]])
def test_the_leads_heartbeats_folded_in(case):
    track, worked = {}, []
    for t, body in case["beats"]:
        track, w = look.heard(track, body, t)
        worked.append(w)
    assert worked == case["worked"]
    assert track == case["track"]


@pytest.mark.parametrize(
    "case", VECTORS["stall_wheres"], ids=[c["name"] for c in VECTORS["stall_wheres"]]
)
def test_the_places_of_a_stall_window(case):
    assert look.stall_wheres(case["wheres"], case["start"]) == case["out"]
