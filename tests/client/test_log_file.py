"""The log file (--log, log_path): a progress bar is one line per update at most once a
second, and the file ends with the verdict and the stacks (node-client/test/api.test.js
checks the same for Node)."""

import os
import sys

from tests.client.conftest import WAIT_S
from trainbridge import bridge

BAR = """\
import sys, time
print("start", flush=True)
for i in range(41):
    sys.stderr.write(f"\\rbar {i}/40"); sys.stderr.flush(); time.sleep(0.005)
sys.stderr.write("\\n")
print("end", flush=True)
"""


def run(code, tmp_path):
    log = tmp_path / "job.log"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    report = bridge.launch([sys.executable, "-c", code], env=env, log_path=str(log)).wait(WAIT_S)
    return report, log.read_text(encoding="utf-8").splitlines()


def test_a_fast_bar_is_its_first_redraw_and_its_final_line_then_the_verdict(tmp_path):
    report, lines = run(BAR, tmp_path)
    assert report["outcome"] == "succeeded"
    assert report["output"]["lines"]["stderr"] == 41  # every redraw was read
    assert lines[-1] == f"[trainbridge] {report['summary']}"
    # stdout and stderr are two pipes: only each stream's own order is fixed.
    assert [line for line in lines if not line.startswith("bar")][:-1] == ["start", "end"]
    bar = [line for line in lines if line.startswith("bar")]
    assert bar[0] == "bar 0/40" and bar[-1] == "bar 40/40", bar
    # One redraw per second at most (the bar takes ~0.3 s; more only on a loaded machine).
    assert len(bar) <= 2 + int(report["duration_s"]), bar


def test_a_crash_leaves_its_stack_in_the_log(tmp_path):
    report, lines = run("import ctypes\nprint('before', flush=True)\nctypes.string_at(0)", tmp_path)
    assert report["outcome"] == "crashed"
    at = lines.index(f"[trainbridge] {report['summary']}")
    assert lines[:at] == ["before"] and lines[at + 1] == "[trainbridge] stacks:"
    tail = "\n".join(lines[at + 2 :])
    assert "Fatal Python error: Segmentation fault" in tail and "string_at" in tail
    assert tail == report["stacks"].rstrip("\n")
