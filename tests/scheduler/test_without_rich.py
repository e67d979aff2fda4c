"""rich is optional: without it the jobs table and doctor's table are plain lines
with the same columns and verdicts, and `run`'s summary is one uncoloured line."""

import sys

import pytest

from trainbridge.bridge import cli_views
from trainbridge.bridge.cli import main
from trainbridge.bridge.doctor import cli as doctor_cli

from .conftest import child, wait_for


@pytest.fixture
def no_rich(monkeypatch):
    for name in [m for m in sys.modules if m == "rich" or m.startswith("rich.")] + ["rich"]:
        monkeypatch.setitem(sys.modules, name, None)  # `import rich...` raises ImportError


def test_the_jobs_table_is_plain_columns_without_rich(no_rich, store_path, capsys):
    assert main(["submit", "--store", store_path, "--name", "plain", "--", *child("steps", 1)]) == 0
    job_id = capsys.readouterr().out.strip()

    def listed():
        assert main(["jobs", "--store", store_path]) == 0
        return capsys.readouterr().out

    out = wait_for(lambda: "succeeded" in listed() and listed(), what="the job listed as ended")
    header, row = out.splitlines()[:2]
    assert header.split() == [
        "ID", "NAME", "STATE", "OUTCOME", "STAGE", "PROGRESS", "TRY", "GPUS", "SUBMITTED", "COMMAND"
    ]  # fmt: skip
    assert row.split()[:4] == [job_id, "plain", "ended", "succeeded"], row
    assert row.index("succeeded") == header.index("OUTCOME")  # aligned under its column


def test_doctor_and_the_summary_are_plain_lines_without_rich(no_rich, capsys):
    report = {
        "python": "/venv/bin/python",
        "checks": [
            {"name": "import zmq", "verdict": "ok", "detail": "27.3", "fix": None, "stack": None},
            {
                "name": "import torch",
                "verdict": "hung",
                "detail": "no answer in 10 s",
                "fix": "check the proxy",
                "stack": 'File "x.py", line 1',
            },
        ],
        "summary": {"ok": 1, "warn": 0, "fail": 0, "hung": 1, "skip": 0},
        "duration_s": 10.2,
        "ok": False,
    }
    doctor_cli.render(report)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "trainbridge doctor: /venv/bin/python"
    assert lines[1].split() == ["ok", "import", "zmq:", "27.3"]
    assert "hung" in lines[2] and "(fix: check the proxy)" in lines[2]
    assert "--- import torch: hung" in lines and 'File "x.py", line 1' in lines
    assert lines[-1].startswith("1 ok, 0 warn, 0 fail, 1 hung, 0 skip in 10.2 s: fix the")
    view = cli_views.make_view(["python", "train.py"])
    assert isinstance(view, cli_views.PlainView)
    cli_views.print_summary(view.console, {"summary": "Job succeeded after 1.0 s."})
    assert capsys.readouterr().out == "trainbridge: Job succeeded after 1.0 s.\n"
