"""Training health and strict JSON, the pure parts: vectors/health.json (the rule) and
bridge/jsonform.py (NaN and the infinities on every JSON face)."""

import json
import math
import os

import pytest

from trainbridge.bridge import feed, health, jsonform, report_text

CASES = json.load(
    open(
        os.path.join(os.path.dirname(__file__), "..", "..", "vectors", "health.json"),
        encoding="ascii",
    )
)["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_reports_in_entries_out(case):
    record = health.initial()
    said = [
        health.observe(
            record, r["step"], jsonform.revive({"metrics": dict(r["metrics"])})["metrics"]
        )
        for r in case["reports"]
    ]
    assert json.loads(jsonform.dumps(said)) == case["said"]
    assert json.loads(jsonform.dumps(record["entries"])) == [e for s in case["said"] for e in s]


def test_stop_on_names_the_metrics_or_every_one():
    entry = {"metric": "loss"}
    assert health.stops(entry, ["loss"]) and health.stops(entry, ["*"])
    assert not health.stops(entry, ["acc"]) and not health.stops(entry, None)
    assert not health.stops(entry, [])


def test_strict_json_keeps_nan_and_the_infinities_apart_from_null():
    event = {
        "event": "status",
        "metrics": {"loss": math.nan, "lr": math.inf, "neg": -math.inf, "never": None},
        "text": "NaN",
    }
    line = jsonform.dumps(event)
    assert "NaN," not in line and "Infinity," not in line  # no bare tokens: strict JSON
    json.loads(line, parse_constant=lambda token: pytest.fail(f"bare {token} in {line}"))
    back = jsonform.loads(line)
    metrics = back["metrics"]
    assert math.isnan(metrics["loss"]) and metrics["lr"] == math.inf and metrics["neg"] == -math.inf
    assert metrics["never"] is None
    assert back["text"] == "NaN"  # a string outside a number's place stays text


def test_a_chunk_of_feed_lines_reads_back_as_each_line_does():
    """loads_lines (attach()'s catch-up: a chunk in one call) gives what loads() gives for
    each line, NaN and the infinities included; a line that is not JSON fails the chunk."""
    events = [
        {"seq": 1, "event": "status", "metrics": {"loss": math.nan, "lr": 0.1}},
        {"seq": 2, "event": "output", "text": "NaN"},
        {"seq": 3, "event": "health", "metric": "loss", "value": -math.inf, "text": "-inf"},
    ]
    lines = [jsonform.dumps(e).encode() for e in events]
    chunk = jsonform.loads_lines(lines)
    one_by_one = [jsonform.loads(line) for line in lines]
    assert repr(chunk) == repr(one_by_one)  # repr: nan != nan
    assert math.isnan(chunk[0]["metrics"]["loss"]) and chunk[2]["value"] == -math.inf
    assert chunk[1]["text"] == "NaN"
    with pytest.raises(ValueError):
        jsonform.loads_lines([lines[0], lines[1][:10], lines[2]])
    with pytest.raises(ValueError):  # two values on one line: not a feed line
        jsonform.loads_lines([b'{"seq": 1}, {"seq": 2}'])


def test_health_entries_and_the_health_event_are_read_back_as_numbers():
    entry = {"metric": "loss", "value": math.nan, "last_finite": 2.5, "text": "NaN"}
    end = jsonform.loads(jsonform.dumps({"event": "end", "report": {"health": [entry]}}))
    assert math.isnan(end["report"]["health"][0]["value"])
    event = jsonform.loads(jsonform.dumps(dict(entry, event="health")))
    assert math.isnan(event["value"]) and event["text"] == "NaN"


def test_a_feed_line_and_a_report_file_are_strict_json():
    line = feed.encode(7, {"event": "status", "metrics": {"loss": math.nan}})
    assert line == '{"seq": 7, "event": "status", "metrics": {"loss": "NaN"}}\n'
    text = report_text.to_json({"progress": {"metrics": {"loss": -math.inf}}}, indent=None)
    assert text == '{"progress": {"metrics": {"loss": "-Infinity"}}}'


def test_other_value_errors_are_not_hidden():
    loop: list = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular"):
        jsonform.dumps(loop)
