"""Output capture: any bytes decode, every line is an event and a log line, floods stay
bounded, and a grandchild holding the pipes open does not keep the report waiting."""

import os
import sys

import psutil
import pytest

from tests.client.conftest import assert_tree_gone, validate_report
from trainbridge import bridge


def test_a_job_without_events_keeps_none_and_listeners_still_hear_every_line(run):
    """events=False (the keeper, the Node job server, run --transparent: they listen, or
    only wait): nothing is queued for events(), which says why it cannot be read; on_event
    hears every line, and the report's tail and counts are whole."""
    heard = []
    code = "for i in range(3000):\n    print('line', i)\n"
    job, r = run(code, on_event=heard.append, events=False)
    assert [e["text"] for e in heard if e["event"] == "output"] == [
        f"line {i}" for i in range(3000)
    ]
    assert r["outcome"] == "succeeded" and r["log_tail"][-1] == "line 2999"
    assert r["output"]["lines"]["stdout"] == 3000
    with pytest.raises(RuntimeError, match="events=False"):
        job.next_event(0)
    with pytest.raises(RuntimeError, match="events=True"):
        next(iter(job.events()))
    quiet, r = run(code, events=False)  # nobody listening: lines counted, the tail decoded
    assert r["log_tail"][-1] == "line 2999" and r["output"]["lines"]["stdout"] == 3000


def test_gbk_and_invalid_utf8_lines(run, tmp_path):
    log = tmp_path / "job.log"
    events = []
    job, r = run(
        """
        import sys
        out = sys.stdout.buffer
        out.write("utf-8 \\u4e2d\\u6587\\n".encode("utf-8"))
        out.write("gbk \\u4e2d\\u6587\\n".encode("gbk"))
        out.write(b"bad \\xff\\xfe end\\n")
        out.write(b"bar 10%\\rbar 50%\\rbar 100%\\n")
        out.write(b"crlf\\r\\nno newline at the end")
        out.flush()
    """,
        log_path=str(log),
        on_event=events.append,
    )
    texts = [e["text"] for e in events if e["event"] == "output"]
    assert texts == [
        "utf-8 \u4e2d\u6587",
        "gbk \u4e2d\u6587",
        "bad \udcff\udcfe end",
        "bar 10%",
        "bar 50%",
        "bar 100%",
        "crlf",
        "no newline at the end",
    ]
    # The tail keeps the last redraw of a progress bar, not every frame of it.
    assert r["log_tail"] == [
        "utf-8 \u4e2d\u6587",
        "gbk \u4e2d\u6587",
        "bad \udcff\udcfe end",
        "bar 100%",
        "crlf",
        "no newline at the end",
    ]
    logged = log.read_text(encoding="utf-8").splitlines()
    # The log keeps a bar's redraws at most once a second (vectors/redraws.json): "bar 50%"
    # came within the second and its final line followed. It ends with the verdict.
    assert logged == [
        "utf-8 \u4e2d\u6587",
        "gbk \u4e2d\u6587",
        "bad \\udcff\\udcfe end",
        "bar 10%",
        "bar 100%",
        "crlf",
        "no newline at the end",
        f"[trainbridge] {r['summary']}",
    ]


def test_log_file_is_written_while_the_job_runs(run, tmp_path):
    log = tmp_path / "live.log"
    seen = []

    def on_event(event):
        # When the child's second line arrives, its first is already on disk.
        if event["event"] == "output" and event["text"] == "second":
            seen.append(log.read_text(encoding="utf-8"))

    job, r = run(
        """
        print("first")
        print("second")
    """,
        log_path=str(log),
        on_event=on_event,
    )
    assert seen and seen[0].startswith("first\n")


def test_output_flood_keeps_client_memory_bounded(script, tmp_path):
    size_mb = 100
    path = script(f"""
        import os
        line = b"x" * 4095 + b"\\n"
        block = line * 256  # 1 MiB
        for _ in range({size_mb}):
            os.write(1, block)
    """)
    me = psutil.Process()
    rss_before = me.memory_info().rss
    peak = [rss_before]
    count = [0]

    def on_event(event):
        count[0] += 1
        if count[0] % 2000 == 0:
            peak[0] = max(peak[0], me.memory_info().rss)

    job = bridge.launch(
        [sys.executable, path],
        log_path=str(tmp_path / "flood.log"),
        on_event=on_event,
        zero_code=False,
    )
    r = job.wait(120)
    peak[0] = max(peak[0], me.memory_info().rss)
    validate_report(r)
    assert r["outcome"] == "succeeded", r["summary"]
    assert r["output"]["bytes"]["stdout"] == size_mb * 1024 * 1024
    assert r["output"]["lines"]["stdout"] == size_mb * 256
    footer = f"[trainbridge] {r['summary']}\n".encode()  # the verdict ends the log
    assert os.path.getsize(tmp_path / "flood.log") == size_mb * 1024 * 1024 + len(footer)
    assert len(r["log_tail"]) <= 40
    growth_mb = (peak[0] - rss_before) / 2**20
    # 100 MB went through; the client kept at most its bounded queue and tail of it.
    assert growth_mb < 60, f"client RSS grew by {growth_mb:.0f} MB"
    assert_tree_gone(job)


def test_grandchild_holding_the_pipes_does_not_delay_the_report(script):
    path = script("""
        import subprocess, sys
        # The grandchild inherits stdout/stderr and outlives us, in its own session.
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                         start_new_session=True)
        print("child done", flush=True)
    """)
    job = bridge.launch([sys.executable, path], zero_code=False)
    r = job.wait(20)
    validate_report(r)
    assert r["outcome"] == "succeeded" and r["log_tail"] == ["child done"]
    assert len(r["leftovers"]) == 1
    assert_tree_gone(job)


def test_a_slow_consumer_gets_a_dropped_count_not_unbounded_memory(script):
    from trainbridge.bridge.job_events import EVENT_QUEUE

    path = script(f"""
        import sys
        sys.stdout.write("line\\n" * {EVENT_QUEUE + 5000})
    """)
    job = bridge.launch([sys.executable, path], zero_code=False)
    report = job.wait(30)  # nobody read the events meanwhile
    events = list(job.events(timeout=5))
    assert events[0]["event"] == "dropped" and events[0]["count"] > 0
    # It says exactly what went: per kind, and which output lines (numbered per stream).
    dropped, first_kept = events[0], next(e for e in events if e["event"] == "output")
    assert sum(dropped["kinds"].values()) == dropped["count"]
    assert dropped["lines"] == {"stdout": [1, first_kept["line"] - 1]}
    assert dropped["kinds"]["output"] == first_kept["line"] - 1
    assert len(events) <= EVENT_QUEUE + 1
    assert events[-1]["event"] == "end" and events[-1]["report"] is report
    assert report["output"]["lines"]["stdout"] == EVENT_QUEUE + 5000


def test_stage_records_stay_bounded(run):
    from trainbridge.bridge.job_facts import STAGES_KEPT

    job, r = run(f"""
        from trainbridge import worker
        with worker.stage("train"):
            for i in range({STAGES_KEPT + 200}):
                with worker.stage("step"):
                    pass
    """)
    assert r["outcome"] == "succeeded"
    assert len(r["stages"]) <= STAGES_KEPT and r["stages_dropped"] >= 200
    assert r["stages"][0]["name"] == "train"  # open stages are kept
