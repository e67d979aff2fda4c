"""The command line: `python -m trainbridge.bridge.doctor` and `trainbridge doctor`."""

import json
import os
import subprocess
import sys

from .conftest import REPO, base_env, by_name


def run_doctor(args, env, cwd, timeout=60):
    return subprocess.run(
        [sys.executable, "-m", "trainbridge.bridge.doctor"] + args,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=timeout,
    )


def test_json_output_is_ascii_and_exit_status_follows_the_verdicts(bare_python, tmp_path):
    env = base_env(PYTHONPATH=REPO)
    ok = run_doctor(["--json", "--timeout", "10"], env, str(tmp_path))
    report = json.loads(ok.stdout.decode("ascii"))  # ASCII-only, else this raises
    assert report["schema"] == "trainbridge.doctor/1"
    assert ok.returncode == report["exit_code"] == 0
    for row in report["checks"]:
        assert set(row) == {"name", "verdict", "detail", "fix", "facts", "duration_s", "stack"}
        assert row["verdict"] in ("ok", "warn", "fail", "hung", "skip")

    broken = run_doctor(["--json", "--python", bare_python, "--timeout", "10"], env, str(tmp_path))
    report = json.loads(broken.stdout.decode("ascii"))
    assert broken.returncode == report["exit_code"] == 1
    assert by_name(report)["torch"]["verdict"] == "fail"


def test_table_names_every_check_with_verdict_and_fix(bare_python, tmp_path):
    env = base_env(PYTHONPATH=REPO, CUDA_VISIBLE_DEVICES="7")
    out = run_doctor(["--python", bare_python, "--timeout", "10"], env, str(tmp_path))
    text = out.stdout.decode("utf-8")
    assert out.returncode == 1
    for name in (
        "python",
        "encoding",
        "stdout_buffering",
        "cuda_visible_devices",
        "torch",
        "reach_hf_endpoint",
    ):
        assert name in text
    assert "not installed" in text and "CUDA_VISIBLE_DEVICES=7" in text
    assert "fix the fail/hung rows before training" in text


def test_table_survives_an_ascii_console_and_non_ascii_text():
    import io

    from trainbridge.bridge.doctor.cli import render

    report = {
        "python": "/venv/\u8bad\u7ec3/python",
        "ok": False,
        "duration_s": 1.0,
        "summary": {"ok": 0, "warn": 0, "fail": 0, "hung": 1, "skip": 0},
        "checks": [
            {
                "name": "torch",
                "verdict": "hung",
                "detail": "in /data/\u8bad\u7ec3",
                "fix": "x",
                "facts": {},
                "duration_s": 1.0,
                "stack": 'File "/data/\u8bad\u7ec3/sitecustomize.py", line 5 in find_spec',
            }
        ],
    }
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="ascii", errors="strict")
    render(report, file=out)
    out.flush()
    text = raw.getvalue().decode("ascii")
    assert "\\u8bad\\u7ec3/sitecustomize.py" in text and "hung" in text


def test_extra_host_flag(bare_python, tmp_path, silent_server):
    env = base_env(PYTHONPATH=REPO)
    out = run_doctor(
        [
            "--json",
            "--python",
            bare_python,
            "--connect-timeout",
            "0.5",
            "--host",
            "http://127.0.0.1:%d" % silent_server,
        ],
        env,
        str(tmp_path),
    )
    row = by_name(json.loads(out.stdout))["reach_host:127.0.0.1:%d" % silent_server]
    assert row["verdict"] == "fail" and row["facts"]["error"] == "timed out"
    assert out.returncode == 1


def test_trainbridge_doctor_command(tmp_path):
    """`trainbridge doctor` (bridge/cli.py) is the same command: this machine, no GPU, CPU torch."""
    exe = os.path.join(os.path.dirname(sys.executable), "trainbridge")
    out = subprocess.run(
        [exe, "doctor", "--json", "--timeout", "30"],
        env=base_env(),
        cwd=str(tmp_path),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
    )
    report = json.loads(out.stdout.decode("ascii"))
    assert out.returncode == report["exit_code"] == 0
    rows = by_name(report)
    assert (
        rows["torch"]["facts"]["version"].startswith("2.13.0")
        and rows["torch"]["facts"]["cuda"] is None
    )
    assert rows["nvidia_driver"]["verdict"] == "warn"
