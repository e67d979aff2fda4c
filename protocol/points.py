"""Which points of a metric series to keep when there are too many to send or to draw: the
rule behind the progress message's `points` (worker/beacon.py) and the dashboard's curves
(node-client/src/points.js, its twin; vectors/points.json pins both). Pure.

The points are cut into equal runs of consecutive points, at most `limit // 3` of them; each
run keeps at most three: its first value that is not finite (NaN, inf: a divergence is never
thinned away), and the lowest and the highest value of the metric that moved most in that run,
relative to the metric's whole range. So a spike of one step survives any thinning, which
every-other-point or the latest-value-wins would drop.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Optional


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def keep(n: int, values: Mapping[str, Sequence[Any]], limit: int) -> list[int]:
    """The indices (ascending) of the points to keep of `n`, whose metrics are `values`
    (name -> n values; None or a string where a point has no number)."""
    if n <= limit:
        return list(range(n))
    runs = max(1, limit // 3)
    spans = {}
    for name, series in values.items():
        finite = [v for v in series if _finite(v)]
        spans[name] = max(finite) - min(finite) if finite else 0.0
    kept: list[int] = []
    for r in range(runs):
        lo, hi = r * n // runs, (r + 1) * n // runs
        chosen: set[int] = set()
        odd: Optional[int] = None
        best: Optional[tuple[float, int, int]] = None
        for name, series in values.items():
            low = high = None
            for i in range(lo, hi):
                v = series[i]
                if _number(v) and not _finite(v):
                    odd = i if odd is None else min(odd, i)
                elif _finite(v):
                    if low is None or v < series[low]:
                        low = i
                    if high is None or v > series[high]:
                        high = i
            if low is None or high is None:
                continue
            span = spans[name]
            moved = (series[high] - series[low]) / span if span > 0 else 0.0
            if best is None or moved > best[0]:
                best = (moved, low, high)
        if odd is not None:
            chosen.add(odd)
        if best is not None:
            chosen.update(best[1:])
        if not chosen:
            chosen.add(hi - 1)  # no number in the run: its last point says where it was
        kept.extend(sorted(chosen))
    return kept
