"""Writes vectors/health.json: the training-health rule (bridge/health.py observe, the one
implementation): progress reports in, the entries said after each out.

{name, reports: [{step, metrics}], said: [[entry, ...] after each report]}. Numbers that are
not finite are in their strict form ("NaN", "Infinity": bridge/jsonform.py); the runners read
the metrics back with jsonform.revive and compare strict forms. The expectations are written
by the Python client and reviewed by hand: tests/client/test_health.py runs them."""

import json
import os
import sys

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
sys.path.insert(0, ROOT)

from trainbridge.bridge import health  # noqa: E402 - after the path
from trainbridge.bridge.jsonform import finite_form  # noqa: E402 - after the path

NAN, INF = float("nan"), float("inf")


def cases():
    yield "finite all along: nothing said", [(1, {"loss": 2.5}), (2, {"loss": 2.25})]
    yield (
        "the next step after the last finite one: 'at step'",
        [
            (10, {"loss": 0.5}),
            (11, {"loss": NAN}),
        ],
    )
    yield "steps between not reported: 'by step'", [(10, {"loss": 0.5}), (14, {"loss": NAN})]
    yield "not finite from the first report", [(3, {"loss": -INF})]
    yield (
        "said once, even when it comes back and goes again",
        [
            (1, {"loss": 1.5}),
            (2, {"loss": NAN}),
            (3, {"loss": 1.25}),
            (4, {"loss": INF}),
        ],
    )
    yield (
        "a whole number before, then NaN; strings, booleans and None are no numbers",
        [
            (1, {"tokens": 3, "phase": "warmup", "done": False, "lr": None}),
            (2, {"tokens": NAN, "phase": "NaN-like text", "done": True}),
        ],
    )
    yield (
        "a float step and a step that is not a number",
        [
            (1.5, {"loss": 0.25}),
            (2.5, {"loss": NAN}),
            ("epoch 3", {"grad": INF}),
        ],
    )
    yield (
        "two metrics in one report, in the report's order",
        [
            (1, {"b": 1.0, "a": 1.0}),
            (2, {"b": NAN, "a": -INF}),
        ],
    )
    many = {f"m{i:02d}": NAN for i in range(health.KEPT + 3)}
    yield f"at most {health.KEPT} metrics are said", [(1, many)]


def main():
    out = []
    for name, reports in cases():
        record = health.initial()
        said = [health.observe(record, step, dict(metrics)) for step, metrics in reports]
        out.append(
            finite_form(
                {
                    "name": name,
                    "reports": [{"step": s, "metrics": m} for s, m in reports],
                    "said": said,
                }
            )
        )
    path = os.path.join(ROOT, "vectors", "health.json")
    with open(path, "w", encoding="ascii") as fh:
        json.dump(
            {
                "about": "progress reports in -> training-health entries out (bridge/health.py); "
                "tests/client/make_health_vectors.py",
                "cases": out,
            },
            fh,
            indent=1,
            ensure_ascii=True,
            allow_nan=False,
        )
        fh.write("\n")
    print(f"wrote {os.path.normpath(path)}: {len(out)} cases")


if __name__ == "__main__":
    main()
