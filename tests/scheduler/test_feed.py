"""vectors/feed.json through bridge/feed.py (node-client/test/feed.test.js runs the same
cases): how a face finds "now" and "from event N" in a job's numbered events file."""

import json
import os

import pytest

from trainbridge.bridge import feed

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CASES = json.load(open(os.path.join(ROOT, "vectors", "feed.json"), encoding="ascii"))["cases"]


def build(case, path):
    """The case's file, written as the vector's 'about' says."""
    with open(path, "wb") as f:
        for item in case["lines"]:
            first, last = item.get("seqs", [None, None])
            for seq in [None] if first is None else range(first, last + 1):
                line = item["line"]
                if seq is not None:
                    mod, unit = item.get("pad", [1, 0])
                    pad = "x" * unit if seq % mod == 0 else ""
                    line = line.replace("{seq}", str(seq)).replace("{pad}", pad)
                f.write(line.encode("ascii") + b"\n")
        f.write(case.get("partial", "").encode("ascii"))


def line_at(path, offset):
    with open(path, "rb") as f:
        f.seek(offset)
        return f.readline()


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_feed_vectors(case, tmp_path):
    path = str(tmp_path / "events.jsonl")
    if case["lines"] or case.get("partial"):
        build(case, path)
    expect = case["expect"]
    if expect["last_seq"] == "FeedError":
        with pytest.raises(feed.FeedError, match="no event number"):
            feed.last_seq(path)
    else:
        assert feed.last_seq(path) == expect["last_seq"]
    offset, status = feed.last_status(path)
    assert (status or {}).get("t") == expect["last_status_t"]
    size = os.path.getsize(path) if os.path.exists(path) else 0
    assert offset == size - len(case.get("partial", ""))  # the end of the last whole line
    for n, seq in expect["from"]:
        if seq == "FeedError":
            with pytest.raises(feed.FeedError, match="attach from the start or from now"):
                feed.offset_of(path, n)
            continue
        at = feed.offset_of(path, n)
        if seq is None:
            assert at == offset, (n, at)
        else:
            assert feed.seq_of(line_at(path, at)) == seq, (n, at)


@pytest.mark.parametrize("bad", [0, -1, 1.5, "3", True, None])
def test_an_event_number_is_a_positive_integer(bad, tmp_path):
    with pytest.raises(ValueError, match="an event number is an integer from 1"):
        feed.offset_of(str(tmp_path / "events.jsonl"), bad)


def test_encode_puts_the_number_first_and_is_ascii():
    line = feed.encode(7, {"event": "output", "text": "\u4e2d\u6587", "seq": 99, "t": 1.0})
    assert line.startswith('{"seq": 7, "event": "output"') and line.endswith("\n")
    assert line.isascii() and feed.seq_of(line.encode()) == 7


def test_a_writer_killed_mid_line_leaves_a_torn_line_whose_number_is_used(tmp_path):
    """Reconciliation ends a lost keeper's half line before it appends the job's end, and
    numbers that end after the half line's number (scheduled.append_end_event)."""
    path = str(tmp_path / "events.jsonl")
    with open(path, "w", encoding="ascii") as f:
        f.write(feed.encode(1, {"event": "state", "state": "running"}))
        f.write(feed.encode(2, {"event": "output", "text": "x" * 300})[:40])
    assert feed.torn(path) and not feed.torn(str(tmp_path / "missing"))
    assert (feed.last_seq(path), feed.last_seq(path, torn=True)) == (1, 2)
    from trainbridge.bridge import scheduled

    scheduled.append_end_event({"events_path": path}, {"outcome": "lost"})
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    assert lines[-1] == b"" and feed.seq_of(lines[-2]) == 3 and b'"end"' in lines[-2]
    assert feed.offset_of(path, 3) == os.path.getsize(path) - len(lines[-2]) - 1
