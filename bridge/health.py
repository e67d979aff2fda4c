"""Training health: a metric the job reports that becomes NaN or an infinity (a loss that
diverged). Pure, and judged once: the supervisor folds each of the lead's progress messages in
(bridge/job_facts.py), publishes a `health` event for each new entry, and the report keeps the
entries (`report.health`, docs/CLIENT.md "Training health"). The one implementation (a Node
face renders the `health` events); vectors/health.json pins it.

A metric is said once: the first report in which it is not finite. The worker sends the
latest progress a few times a second, not every step, so the steps between the last finite
report and this one were not seen: the entry says "at step N" only when N follows the last
finite step, and "by step N" otherwise.
"""

from __future__ import annotations

import math
from typing import Any, Optional

from trainbridge.bridge.jsonform import text_of
from trainbridge.bridge.report_text import fmt

KEPT = 32  # metrics said at most (a job that reports thousands of metrics says the first ones)


def initial() -> dict[str, Any]:
    """The health record of a job that has reported nothing: `entries` (the report's list) and
    `finite` ({metric: [step, value]}, the last finite report of each metric not yet said)."""
    return {"entries": [], "finite": {}, "said": []}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def text(entry: dict[str, Any]) -> str:
    metric, step, value = entry["metric"], entry["step"], text_of(entry["value"])
    last, last_step = entry["last_finite"], entry["last_finite_step"]
    if last is None:
        return f"{metric} was {value} from its first report (step {fmt(step)})"
    follows = _number(step) and _number(last_step) and step == last_step + 1
    return (
        f"{metric} became {value} {'at' if follows else 'by'} step {fmt(step)} "
        f"(it was {fmt(last)} at step {fmt(last_step)})"
    )


def observe(record: dict[str, Any], step: Any, metrics: Any) -> list[dict[str, Any]]:
    """Fold one progress report (its step and metrics) into the record; return the new entries
    (each: metric, value, step, last_finite, last_finite_step, text)."""
    new: list[dict[str, Any]] = []
    if not isinstance(metrics, dict):
        return new
    finite, said = record["finite"], record["said"]
    for name, value in metrics.items():
        if not _number(value) or name in said:
            continue
        if not isinstance(value, float) or math.isfinite(value):
            if len(finite) < KEPT or name in finite:
                finite[name] = [step, value]
            continue
        if len(said) >= KEPT:
            continue
        last: Optional[list[Any]] = finite.pop(name, None)
        entry: dict[str, Any] = {
            "metric": str(name),
            "value": value,
            "step": step,
            "last_finite": None if last is None else last[1],
            "last_finite_step": None if last is None else last[0],
        }
        entry["text"] = text(entry)
        said.append(name)
        new.append(entry)
    record["entries"].extend(new)
    return new


def stops(entry: dict[str, Any], stop_on: Any) -> bool:
    """Whether the user asked to stop the job on this entry: stop_on is a list of metric
    names, where "*" stands for every metric."""
    return bool(stop_on) and ("*" in stop_on or entry["metric"] in stop_on)
