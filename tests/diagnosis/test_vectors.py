"""The diagnosis cases (vectors/diagnosis.json) through bridge/diagnosis.py, the one
implementation of the rules (a Node job is diagnosed there too)."""

import json
import os

import pytest

from trainbridge.bridge import diagnosis

VECTORS = os.path.join(os.path.dirname(__file__), "..", "..", "vectors", "diagnosis.json")
DATA = json.load(open(VECTORS, encoding="ascii"))
CASES = DATA["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_case(case):
    if case["verdict"] == "stage":
        got = diagnosis.stage_at_end(case["facts"]["stages"], case["facts"]["error"])
        assert {"stage": got} == case["expect"]
        return
    verdict = diagnosis.diagnose_end if case["verdict"] == "end" else diagnosis.diagnose_hang
    got = verdict(json.loads(json.dumps(case["facts"])))
    if case["expect"] is None:
        assert got is None
        return
    assert got is not None
    assert got["kind"] == case["kind"]
    for part in case["summary_has"]:
        assert part in got["summary"]
    for part in case["hint_has"]:
        assert part in got["hint"]
    assert {
        "kind": got["kind"],
        "frame": got["evidence"].get("frame"),
        "summary": got["summary"],
        "hint": got["hint"],
    } == case["expect"]
    assert "\n" not in got["summary"] and "\n" not in got["hint"]


def test_every_kind_has_a_row():
    assert DATA["kinds"] == list(diagnosis.kinds())
    assert {c["kind"] for c in CASES if c["kind"]} == set(diagnosis.kinds())


def test_the_vectors_are_what_the_generator_writes():
    """The committed file is the generator's output: no hand edit drifts from its source."""
    import importlib.util

    path = os.path.join(os.path.dirname(__file__), "make_diagnosis_vectors.py")
    spec = importlib.util.spec_from_file_location("make_diagnosis_vectors", path)
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert gen.build() == DATA
