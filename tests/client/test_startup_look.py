"""The look at the startup deadline, the pure part: vectors/startup_look.json, which
node-client/test/startup_look.test.js runs too (real processes: test_deadlines.py)."""

import json
import os

import pytest

from trainbridge.bridge import startup_look

CASES = json.load(
    open(
        os.path.join(os.path.dirname(__file__), "..", "..", "vectors", "startup_look.json"),
        encoding="ascii",
    )
)["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_two_samples_in_a_verdict_out(case):
    assert startup_look.judge(case["before"], case["after"]) == case["verdict"]


def test_the_vectors_cover_both_verdicts_and_every_reason():
    whys = {c["verdict"]["why"].split(" ")[0] for c in CASES}
    assert {True, False} == {c["verdict"]["working"] for c in CASES}
    assert {"no", "its", "it"} <= whys
