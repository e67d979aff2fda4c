"""The CLI's plain (non-TTY) view prints every output line, or says exactly which lines it
left out and where the complete log is: nothing is lost silently."""

import os
import re
import subprocess
import sys
import time

from tests.client.conftest import ROOT

N = 300_000


def test_a_reader_that_falls_behind_is_told_exactly_which_lines_it_missed(tmp_path):
    done = tmp_path / "printed"
    log = tmp_path / "job.log"
    child = (
        f"import sys\nfor i in range(1, {N + 1}): print(i)\nsys.stdout.flush()\n"
        f"open({str(done)!r}, 'w').close()\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    with open(tmp_path / "stderr", "wb") as err:
        cli = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "trainbridge",
                "run",
                "--log",
                str(log),
                "--",
                sys.executable,
                "-c",
                child,
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=err,
        )
        try:
            # Nobody reads the CLI's stdout until the child has printed everything: the
            # view blocks on a full pipe while the job goes on, as behind a slow terminal.
            deadline = time.monotonic() + 120
            while not done.exists():
                assert cli.poll() is None and time.monotonic() < deadline
                time.sleep(0.05)
            out = cli.stdout.read().decode()
            assert cli.wait(60) == 0
        finally:
            cli.kill()
            cli.wait()
    notes = (tmp_path / "stderr").read_text()
    printed = [int(line) for line in out.splitlines() if line.isdigit()]
    missed = []
    for note in re.findall(r"not shown here: ([^(]*) \(this view fell behind", notes):
        for first, last in re.findall(r"stdout lines? (\d+)(?:-(\d+))?", note):
            missed.extend(range(int(first), int(last or first) + 1))
    assert missed, f"the view fell behind, so it must say so: {notes[-2000:]}"
    assert sorted(printed + missed) == list(range(1, N + 1)), "every line printed or named"
    assert f"every line is in {log}" in notes
    lines = log.read_text().splitlines()
    assert lines[:N] == [str(i) for i in range(1, N + 1)]
    assert lines[N:] == [line for line in lines[N:] if line.startswith("[trainbridge] ")], (
        "after the output, only the log's own verdict"
    )
