"""vectors/points.json: which points of a metric series are kept (protocol/points.py; the Node
twin node-client/src/points.js runs the same vectors)."""

import json
import os

import pytest

from trainbridge.protocol import points

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
with open(os.path.join(ROOT, "vectors", "points.json"), encoding="ascii") as f:
    CASES = json.load(f)["cases"]
NOT_FINITE = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


def revive(series):
    return [NOT_FINITE.get(v, v) if isinstance(v, str) else v for v in series]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_points_vector(case):
    values = {name: revive(series) for name, series in case["values"].items()}
    assert points.keep(case["n"], values, case["limit"]) == case["kept"]


def test_never_more_than_the_limit():
    values = {"loss": [((i * 7919) % 1000) / 10 for i in range(10_000)], "lr": [1e-3] * 10_000}
    for limit in (3, 30, 512, 4000):
        kept = points.keep(10_000, values, limit)
        assert len(kept) <= limit and kept == sorted(set(kept))


def test_health_reads_every_point_and_an_older_latest_value_adds_nothing():
    """A progress message queued behind a log carries the progress made before it, and the
    points taken when it was sent (newer): the older latest value is not observed last."""
    from trainbridge.bridge import health, job_facts

    record = health.initial()
    body = {
        "step": 3,
        "metrics": {"loss": 0.5, "acc": 0.1},
        "points": {
            "steps": [3, 4, 5],
            "metrics": {"loss": [0.5, float("nan"), 0.25], "acc": [0.1, 0.2, 0.3]},
        },
    }
    job_facts.observe_points(record, body)
    [entry] = record["entries"]
    assert (entry["step"], entry["last_finite_step"]) == (4, 3)
    assert record["finite"]["acc"] == [5, 0.3]  # not [3, 0.1]: the latest value was older
