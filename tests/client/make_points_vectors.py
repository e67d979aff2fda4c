"""Writes vectors/points.json: which points of a metric series are kept when there are too
many (protocol/points.py keep, and its twin node-client/src/points.js).

{name, n, limit, values: {metric: [value, ...]}, kept: [index, ...]}. Values that are not
finite are the strings "NaN", "Infinity", "-Infinity"; any other string is a string. The
expectations are written by the Python rule and reviewed by hand: tests/client/test_points.py
and node-client/test/points.test.js run them."""

import json
import math
import os
import sys

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
sys.path.insert(0, ROOT)

from trainbridge.protocol import points  # noqa: E402 - after the path

NAN, INF = float("nan"), float("inf")


def strict(value):
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def cases():
    yield "few points: all kept", 5, 9, {"loss": [5, 4, 3, 2, 1]}
    falling = [10 - i * 0.01 for i in range(1000)]
    spike = list(falling)
    spike[617] = 50.0
    yield "a spike of one step in 1,000 kept at 30", 1000, 30, {"loss": spike}
    dip = list(falling)
    dip[3] = -5.0
    yield "a dip of one step kept", 1000, 30, {"loss": dip}
    nan = list(falling)
    nan[500] = NAN
    yield "a NaN is kept, with the run's low and high", 1000, 30, {"loss": nan}
    yield (
        "the metric that moved most in a run decides its points",
        12,
        6,
        {
            "loss": [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 9],
            "lr": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6],
        },
    )
    yield (
        "a run with no number keeps its last point",
        9,
        6,
        {"acc": [None, None, None, None, 0.5, None, None, "<Tensor>", None]},
    )
    yield "flat series: each run keeps one point", 10, 6, {"loss": [2.0] * 10}
    yield "infinity is not finite", 7, 3, {"loss": [1, 2, INF, 3, 4, -INF, 5]}


def main() -> None:
    out = []
    for name, n, limit, values in cases():
        kept = points.keep(n, values, limit)
        out.append(
            {
                "name": name,
                "n": n,
                "limit": limit,
                "values": {k: [strict(v) for v in series] for k, series in values.items()},
                "kept": kept,
            }
        )
    path = os.path.join(ROOT, "vectors", "points.json")
    with open(path, "w", encoding="ascii") as f:
        json.dump({"cases": out}, f, indent=1, allow_nan=False)
        f.write("\n")
    print(f"wrote {len(out)} cases to {path}")


if __name__ == "__main__":
    main()
