"""The stage box: a native crash right after a stage began is still placed in that stage,
by both clients (the stage message had no time to leave the process)."""

import os
import sys

import psutil

from trainbridge import bridge

CRASH_AT_STAGE_START = (
    "import ctypes; from trainbridge import worker\n"
    "with worker.stage('data'):\n"
    "    pass\n"
    "with worker.stage('model \\u6a21\\u578b'):\n"
    "    with worker.stage('load'):\n"
    "        ctypes.string_at(0)\n"
)


def test_crash_right_after_a_stage_began_is_placed_in_it():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    job = bridge.launch([sys.executable, "-c", CRASH_AT_STAGE_START], env=env, zero_code=False)
    report = job.wait(60)
    assert report is not None
    assert report["outcome"] == "crashed" and report["signal"] == "SIGSEGV", report["outcome"]
    assert report["stage"] == "load"
    assert not psutil.Process().children(recursive=True)


def test_stage_box_reading_is_strict_about_its_end(tmp_path):
    from trainbridge.bridge.report_files import read_stage_box

    crash = str(tmp_path / "crash.txt")
    with open(f"{crash}.stages.7", "wb") as f:
        f.write(b"outer\nmodel \\u6a21\\u578b\n.\nstale\n.\n")
    assert read_stage_box(crash, 7) == ["outer", "model \u6a21\u578b"]
    with open(f"{crash}.stages.8", "wb") as f:
        f.write(b"outer\nmod")  # torn: no closing line
    assert read_stage_box(crash, 8) is None
    assert read_stage_box(crash, 9) is None  # none written
