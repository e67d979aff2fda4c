"""Per-rank rows and the root cause (bridge/ranks.py) against vectors/ranks.json, the
contract node-client/test/ranks.test.js runs too."""

import json
import os

import pytest

from trainbridge.bridge import ranks

VECTORS = json.load(open(os.path.join(os.path.dirname(__file__), "..", "..", "vectors",
                                      "ranks.json"), encoding="ascii"))["cases"]


@pytest.mark.parametrize("case", VECTORS, ids=[c["name"] for c in VECTORS])
def test_rows_and_root_cause(case):
    state = ranks.initial()
    for key, kind, body, ts in case["messages"]:
        ranks.observe(state, key, kind, body, ts)
    rows = ranks.table(state)
    assert [{k: r[k] for k in ("rank", "role", "pid", "state", "stage", "progress")}
            for r in rows] == case["rows"]
    cause = ranks.root_cause(rows)
    if case["root_cause"] is None:
        assert cause is None
    else:
        assert cause["rank"] == case["root_cause"]["rank"]
        assert cause["summary"] == case["root_cause"]["summary"]
        assert {str(c["rank"]): c["why"] for c in cause["consequences"]} \
            == case["root_cause"]["why"]
