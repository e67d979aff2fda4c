"""vectors/redraws.json: a progress bar's redraws reach the log file at most once per
second."""

import json
import os

import pytest

from trainbridge.bridge.lines import RedrawThrottle

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CASES = json.load(open(os.path.join(ROOT, "vectors", "redraws.json"), encoding="ascii"))["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_redraw_vectors(case):
    throttle = RedrawThrottle(case["interval"])
    log = []
    for stream, text, end, t in case["lines"]:
        log += throttle.feed(stream, text, end, t)
    log += throttle.flush()
    assert log == case["log"]
