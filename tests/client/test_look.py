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
    with pytest.raises(ValueError, match="unknown look reason 'stall'"):
        look.judge("stall", {"t": 0}, {"t": 1, "procs": []})
