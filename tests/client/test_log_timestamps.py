"""With log_timestamps (CLI --log-timestamps) every output line in the log
file starts with its UTC time; the verdict still closes the log (test_log_file.py)."""

import re
import sys

from trainbridge import bridge

HANGS_AFTER_TWO_LINES = """
    import time
    from trainbridge import worker
    with worker.stage("train"):
        worker.progress(1, 10)
        print("epoch 1", flush=True)
        print("epoch 2", flush=True)
        time.sleep(60)
"""
STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z "


def test_each_output_line_is_stamped(script, tmp_path):
    log = tmp_path / "job.log"
    job = bridge.launch(
        [sys.executable, script(HANGS_AFTER_TWO_LINES)],
        log_path=str(log),
        log_timestamps=True,
        stall_timeout=1.5,
        zero_code=False,
    )
    r = job.wait(30)
    assert r["outcome"] == "hung"
    lines = log.read_text(encoding="utf-8").splitlines()
    assert all(re.match(STAMP, line) for line in lines[:2]), lines
    assert [re.sub(STAMP, "", line) for line in lines[:2]] == ["epoch 1", "epoch 2"]
    assert f"[trainbridge] {r['summary']}" in lines  # the verdict, as without stamps


def test_without_timestamps_the_lines_are_as_printed(script, tmp_path):
    log = tmp_path / "job.log"
    r = bridge.launch(
        [sys.executable, script('print("hello", flush=True)')], log_path=str(log), zero_code=False
    ).wait(30)
    assert log.read_text(encoding="utf-8").splitlines()[:2] == [
        "hello",
        f"[trainbridge] {r['summary']}",
    ]
