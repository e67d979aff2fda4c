"""`trainbridge run` as a person or a GUI runs it: exit statuses, --report, --json."""

import json
import os
import subprocess
import sys

from tests.client.conftest import ROOT, validate_report

TRAINBRIDGE = [sys.executable, "-m", "trainbridge"]


def trainbridge(*args, timeout=60):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    return subprocess.run(
        [*TRAINBRIDGE, *args], cwd=ROOT, env=env, capture_output=True, timeout=timeout
    )


def py(code):
    return [sys.executable, "-c", code]


def test_success_exits_zero_and_writes_the_report(tmp_path):
    report_path = tmp_path / "report.json"
    done = trainbridge("run", "--report", str(report_path), "--", *py("print('hello')"))
    assert done.returncode == 0, done.stderr
    text = report_path.read_text(encoding="ascii")
    report = json.loads(text)
    validate_report(report)
    assert report["outcome"] == "succeeded" and report["log_tail"] == ["hello"]
    assert b"hello" in done.stdout and b"succeeded" in done.stdout


def test_exit_status_is_the_childs():
    done = trainbridge("run", "--", *py("import sys; sys.exit(3)"))
    assert done.returncode == 3


def test_exception_gives_status_1_and_a_summary_that_names_it():
    done = trainbridge("run", "--", *py("raise KeyError('missing_column')"))
    assert done.returncode == 1
    out = done.stdout.decode()
    assert "failed" in out and "KeyError" in out and "python_exception" in out


def test_crash_is_128_plus_the_signal():
    done = trainbridge("run", "--", *py("import ctypes; ctypes.string_at(0)"))
    assert done.returncode == 128 + 11
    assert "SIGSEGV" in done.stdout.decode()


def test_hung_is_124(tmp_path):
    report_path = tmp_path / "hung.json"
    done = trainbridge(
        "run",
        "--stall-timeout",
        "0.5",
        "--kill-grace",
        "0.5",
        "--report",
        str(report_path),
        "--",
        *py(
            "import threading; from trainbridge import worker\nworker.progress(1, 2)\n"
            "threading.Event().wait()"
        ),
    )
    assert done.returncode == 124
    report = json.loads(report_path.read_text(encoding="ascii"))
    assert report["outcome"] == "hung" and report["hang"]["reason"] == "stall"


def test_a_command_not_found_is_127_and_one_not_executable_is_126(tmp_path):
    done = trainbridge("run", "--", "/nonexistent/train.sh")
    assert done.returncode == 127
    assert b"could not start" in done.stderr and b"No such file" in done.stderr
    script = tmp_path / "train.sh"
    script.write_text("echo never\n")
    script.chmod(0o644)
    done = trainbridge("run", "--", str(script))
    assert done.returncode == 126 and b"Permission denied" in done.stderr


def test_trainbridges_own_failure_is_125(tmp_path):
    done = trainbridge(
        "run", "--log", str(tmp_path / "no" / "such" / "dir.log"), "--", *py("print('never')")
    )
    assert done.returncode == 125 and b"never" not in done.stdout


def test_run_help_documents_every_exit_status_and_the_duration_units():
    text = trainbridge("run", "--help").stdout.decode()
    for status in ("128+N", "124", "130", "126", "127", "125"):
        assert f"\n  {status} " in text, status
    assert "90s, 10m, 1h" in text and "--no-zero-code" in text


def test_durations_take_units_and_a_bad_one_is_a_usage_error():
    from trainbridge.bridge.cli import parse_duration

    assert [parse_duration(t) for t in ("90", "2.5", "90s", "10m", "1h", "0")] == [
        90.0,
        2.5,
        90.0,
        600.0,
        3600.0,
        0.0,
    ]
    done = trainbridge("run", "--stall-timeout", "10x", "--", *py("print('never')"))
    assert done.returncode == 2 and b"not a duration" in done.stderr
    done = trainbridge("run", "--stall-timeout=-1m", "--", *py("print('never')"))
    assert done.returncode == 2 and b">= 0" in done.stderr


def test_no_zero_code_leaves_an_unmodified_script_without_a_worker():
    code = "import sys; print('loaded' if 'trainbridge' in sys.modules else 'untouched')"
    events = [
        json.loads(line)
        for line in trainbridge(
            "run", "--json", "--no-zero-code", "--", *py(code)
        ).stdout.splitlines()
    ]
    assert [e["text"] for e in events if e["event"] == "output"] == ["untouched"]
    assert not any(e["event"] == "message" for e in events)
    events = [
        json.loads(line)
        for line in trainbridge("run", "--json", "--", *py(code)).stdout.splitlines()
    ]
    assert [e["text"] for e in events if e["event"] == "output"] == ["loaded"]


def test_version_is_the_packages():
    from trainbridge import __version__

    for args in (("--version",), ("-V",)):
        done = trainbridge(*args)
        assert done.returncode == 0
        assert done.stdout.decode().startswith(f"trainbridge {__version__} ")


def test_json_mode_prints_ascii_event_lines_and_the_report():
    done = trainbridge("run", "--json", "--", *py("print('\\u4e2d\\u6587')"))
    assert done.returncode == 0
    assert done.stdout.isascii()
    events = [json.loads(line) for line in done.stdout.decode("ascii").splitlines()]
    outputs = [e["text"] for e in events if e["event"] == "output"]
    assert outputs == ["\u4e2d\u6587"]
    assert events[-1]["event"] == "end"
    validate_report(events[-1]["report"])


def test_help_documents_the_exit_statuses():
    done = trainbridge("run", "--help")
    text = done.stdout.decode()
    for needle in ("124", "128+N", "125", "130", "--stall-timeout", "--report", "--json"):
        assert needle in text


def test_ctrl_c_cancels_the_job_and_exits_130(tmp_path):
    import signal

    report_path = tmp_path / "cancelled.json"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    proc = subprocess.Popen(
        [
            *TRAINBRIDGE,
            "run",
            "--json",
            "--report",
            str(report_path),
            "--",
            *py(
                "import threading; from trainbridge import worker\n"
                "worker.progress(1, 9)\nthreading.Event().wait()"
            ),
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
    )
    try:
        for line in proc.stdout:  # wait until the child is known to be working
            event = json.loads(line)
            if event["event"] == "message" and event["kind"] == "progress":
                proc.send_signal(signal.SIGINT)
                break
        proc.stdout.read()
        assert proc.wait(timeout=30) == 130
    finally:
        proc.kill()
        proc.wait()
    report = json.loads(report_path.read_text(encoding="ascii"))
    assert report["outcome"] == "cancelled"


def test_the_live_view_prints_every_output_line_above_itself():
    """On a terminal every finished line reaches the scrollback (not just the view's last
    ones), in order."""
    import io

    from rich.console import Console

    from trainbridge import bridge
    from trainbridge.bridge.cli_views import LiveView

    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100, color_system=None)
    code = (
        "import sys\nfor i in range(30): print(f'line {i:02d}')\n"
        "sys.stderr.write('bar 1\\rbar 2\\r'); sys.stderr.flush()\nprint('last')"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    job = bridge.launch(py(code), env=env)
    report = LiveView(console, py(code)).follow(job)
    assert report["outcome"] == "succeeded"
    text = out.getvalue()
    printed = [f"line {i:02d}" for i in range(30)] + ["last"]
    positions = [text.find(line + "\n") for line in printed]
    assert -1 not in positions and positions == sorted(positions), positions


def test_the_plain_summary_is_not_wrapped_at_80_columns():
    long = "x" * 150
    done = trainbridge("run", "--", *py(f"raise RuntimeError('{long}')"))
    assert done.returncode == 1
    summary = [
        line for line in done.stdout.decode().splitlines() if line.startswith("trainbridge: ")
    ]
    assert len(summary) == 1 and long in summary[0], done.stdout.decode()[-600:]


def test_run_help_says_what_the_startup_deadline_really_covers():
    """The help once said the deadline "only counts for scripts that import worker",
    while `bash -c 'sleep 150'` was killed at 120 s, and it never named the heartbeat
    deadline that holds a worker loaded but not yet heard."""
    out = subprocess.run(
        [sys.executable, "-m", "trainbridge", "run", "--help"], capture_output=True, text=True
    )
    text = " ".join(out.stdout.split())
    assert "only counts for scripts that import worker" not in text
    assert "S seconds with no hello from any process of the command" in text
    assert "a tree with no Python yet" in text and "is starting and gets S more" in text
    assert "a Python process doing nothing is hung" in text and "0 disables" in text
    assert "held to --heartbeat-timeout" in text
