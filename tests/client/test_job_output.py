"""bridge/job_output.py's Output on its own: a part that owns the output's state and is told
what it needs (the facts record, the hub, publish, step), driven here without a process or
a hub: chunks fed as `run --transparent` feeds them, the log file, its write failure."""

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from trainbridge.bridge import job_facts
from trainbridge.bridge.job_output import PSEUDO_FDS, Output, open_log
from trainbridge.bridge.streams import ChunkStream


class NoHub:
    def __init__(self):
        self.removed = []

    def add_fd(self, fd, callback, owner=None):
        raise AssertionError("no fd is read here: the chunks are fed")

    def remove_fd(self, fd):
        self.removed.append(fd)


def make(tmp_path, log_fd=None, raw=None, stalled=False, listening=True, tail_lines=10):
    facts = job_facts.initial("job-x", ["python"], None, 0.0, 0.0, tail_lines)
    published, stepped = [], []
    output = Output(
        facts,
        NoHub(),
        log_fd,
        str(tmp_path / "job.log"),
        False,
        lambda stream: raw if stream == "stdout" else None,
        published.append,
        stepped.append,
        lambda: stalled,
        lambda: listening,
    )
    output.attach(None, read_pipes=False, owner=None)
    return output, facts, published, stepped


def test_fed_chunks_become_lines_in_the_tail_the_log_and_the_feed(tmp_path):
    log = open_log(str(tmp_path / "job.log"))
    raw = ChunkStream("stdout")
    output, facts, published, stepped = make(tmp_path, log_fd=log, raw=raw)
    assert output.open
    output.feed("stdout", b"epoch 1\nepo")
    output.feed("stdout", b"ch 2\n\xd6\xd0\xce\xc4\n")  # GBK bytes, decoded as such
    output.feed("stderr", b"Fatal Python error: Segmentation fault\n")
    output.feed("stdout", b"")
    output.feed("stderr", b"")
    assert not output.open and output.hub.removed == [PSEUDO_FDS["stdout"], PSEUDO_FDS["stderr"]]
    lines = [(e["stream"], e["text"], e["encoding"]) for e in published if e["event"] == "output"]
    assert lines == [
        ("stdout", "epoch 1", "utf-8"),
        ("stdout", "epoch 2", "utf-8"),
        ("stdout", "\u4e2d\u6587", "gbk"),
        ("stderr", "Fatal Python error: Segmentation fault", "utf-8"),
    ]
    assert [t["text"] for t in facts["tail"]] == [text for _, text, _ in lines]
    assert facts["lines"] == {"stdout": 3, "stderr": 1}
    assert facts["bytes"] == {"stdout": 21, "stderr": 39}
    assert facts["fatal_lines"] == ["Fatal Python error: Segmentation fault"]
    assert stepped and all(e["type"] == "output" for e in stepped)  # activity for the machine
    assert b"".join(iter(raw)) == b"epoch 1\nepoch 2\n\xd6\xd0\xce\xc4\n"  # the bytes as read
    output.end_log("-- the verdict --")
    output.write_log("after the end")  # closed with the footer: nothing more goes in
    text = (tmp_path / "job.log").read_text(encoding="utf-8")
    assert text.splitlines() == [
        "epoch 1",
        "epoch 2",
        "\u4e2d\u6587",
        "Fatal Python error: Segmentation fault",
        "-- the verdict --",
    ]
    assert facts["log_lines"] == 5


def test_a_log_write_that_fails_stops_the_log_not_the_output(tmp_path):
    read_only = os.open(str(tmp_path / "ro.log"), os.O_RDONLY | os.O_CREAT, 0o600)
    output, facts, published, _ = make(tmp_path, log_fd=read_only)
    output.feed("stdout", b"one\ntwo\n")
    output.feed("stdout", b"three\n")
    errors = [e for e in published if e["event"] == "log_error"]
    assert len(errors) == 1 and errors[0]["from_line"] == 1, errors
    assert facts["log_error"]["path"] == str(tmp_path / "job.log")
    texts = [e["text"] for e in published if e["event"] == "output"]
    assert texts == ["one", "two", "three"]  # every line still reaches the feed


def test_a_stalled_job_hears_of_each_output_at_once(tmp_path):
    """Output is activity: the machine hears of it at most every OUTPUT_EVENT_S, but at once
    while the job is stalled (a line may end the stall)."""
    output, _, _, stepped = make(tmp_path, stalled=True)
    for n in range(3):
        output.feed("stdout", b"line %d\n" % n)
    assert len(stepped) == 3
    output2, _, _, stepped2 = make(tmp_path)
    for n in range(3):
        output2.feed("stdout", b"line %d\n" % n)
    assert len(stepped2) == 1


@settings(max_examples=300, deadline=None)
@given(
    chunks=st.lists(
        st.lists(st.sampled_from([b"step\n", b"\r40%", b"\r", b"x", b"\n", b"\xd6\xd0\n"])).map(
            b"".join
        ),
        max_size=8,
    ),
    tail_lines=st.integers(1, 6),
    stderr=st.booleans(),
)
def test_with_nobody_listening_the_tail_and_counts_are_the_same(
    tmp_path_factory, chunks, tail_lines, stderr
):
    """run --transparent: no log, no listener, so a stdout line is only counted and decoded
    if the tail keeps it; the tail and the counts are those every line would have made."""
    tmp = tmp_path_factory.mktemp("out")
    seen = {}
    for listening in (True, False):
        output, facts, published, _ = make(tmp, listening=listening, tail_lines=tail_lines)
        for chunk in chunks:
            output.feed("stdout", chunk)
            if stderr:
                output.feed("stderr", b"warn\r")
        output.feed("stdout", b"")
        output.feed("stderr", b"")
        seen[listening] = (list(facts["tail"]), dict(facts["lines"]))
        if not listening:
            assert not [e for e in published if e["event"] == "output"]
    assert seen[False] == seen[True]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.lists(st.sampled_from([b"a", b" ", b"\xe4\xb8\xad", b"\xd6\xd0", b"\xff", b"\xe4"])).map(
            b"".join
        ),
        max_size=8,
    )
)
def test_a_chunks_lines_decode_as_each_alone(datas):
    """One decode for a chunk's lines when they are all UTF-8 gives what each line's own
    decode gives (UTF-8, GBK or escaped), for any mix."""
    from trainbridge.bridge.job_output import _decode_all
    from trainbridge.bridge.lines import RawLine, decode_line

    raws = [RawLine(data, "lf") for data in datas]
    assert _decode_all(raws) == [(*decode_line(data), "lf") for data in datas]
