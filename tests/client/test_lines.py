"""Output line splitting and decoding: the shared vectors, plus properties the vectors
cannot show (any chunking gives the same lines; decoding is reversible)."""

import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainbridge.bridge.lines import LineSplitter, decode_line, line_bytes, log_text

VECTORS = os.path.join(os.path.dirname(__file__), "..", "..", "vectors", "lines.json")
CASES = json.load(open(VECTORS, encoding="ascii"))["cases"]


def split_all(chunks, max_line):
    splitter = LineSplitter(max_line)
    return [line for chunk in chunks for line in splitter.feed(chunk)] + splitter.flush()


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_vector(case):
    chunks = [bytes.fromhex(h) for h in case["chunks_hex"]]
    got = []
    for line in split_all(chunks, case["max_line"]):
        text, encoding = decode_line(line.data)
        got.append({"hex": line.data.hex(), "end": line.end, "encoding": encoding, "text": text})
    assert got == case["lines"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_vector_lines_do_not_depend_on_chunking(case):
    whole = b"".join(bytes.fromhex(h) for h in case["chunks_hex"])
    one_by_one = [whole[i : i + 1] for i in range(len(whole))]
    assert split_all([whole], case["max_line"]) == split_all(one_by_one, case["max_line"])


stream = st.lists(
    st.sampled_from([b"a", b"\n", b"\r", b"\xe4\xb8\xad", b"\xd6\xd0", b"\xff", b"xyz"]),
    max_size=60,
).map(b"".join)


@settings(max_examples=300, deadline=None)
@given(data=stream, cuts=st.lists(st.integers(0, 200), max_size=8), max_line=st.integers(4, 16))
def test_any_chunking_gives_the_same_lines(data, cuts, max_line):
    points = sorted({c % (len(data) + 1) for c in cuts})
    chunks = [data[a:b] for a, b in zip([0] + points, points + [len(data)])]
    assert split_all(chunks, max_line) == split_all([data], max_line)


class ByteLoop(LineSplitter):
    """The splitter with its one-call path for chunks without "\r" turned off."""

    def _feed_lf(self, raw):
        return None


@settings(max_examples=500, deadline=None)
@given(data=stream, cuts=st.lists(st.integers(0, 200), max_size=8), max_line=st.integers(4, 16))
def test_the_bulk_split_gives_the_loops_lines(data, cuts, max_line):
    """A chunk with no "\r" is split in one call (a flood's 8 KiB writes); the lines are
    those of the terminator-by-terminator loop, however the stream is cut."""
    points = sorted({c % (len(data) + 1) for c in cuts})
    chunks = [data[a:b] for a, b in zip([0] + points, points + [len(data)])]
    looped = ByteLoop(max_line)
    expect = [line for chunk in chunks for line in looped.feed(chunk)] + looped.flush()
    assert split_all(chunks, max_line) == expect


@settings(max_examples=300, deadline=None)
@given(data=stream, max_line=st.integers(4, 16))
def test_lines_keep_every_byte_but_terminators(data, max_line):
    lines = split_all([data], max_line)
    assert all(len(line.data) <= max_line for line in lines)
    kept = b"".join(line.data for line in lines)
    assert kept == data.replace(b"\r", b"").replace(b"\n", b"")


@given(st.binary(max_size=64))
def test_decoding_never_raises_and_is_reversible(data):
    text, encoding = decode_line(data)
    assert line_bytes(text, encoding) == data
    log_text(text).encode("utf-8")  # a log line is always writable as UTF-8


def test_log_text_makes_undecodable_bytes_visible():
    text, encoding = decode_line(b"bad \xff")
    assert encoding == "escaped"
    assert log_text(text) == "bad \\udcff"
