"""Bad arguments and bugs stay with their own job: every entry point
refuses bad arguments with a clear LaunchError before anything is registered or spawned,
and an exception while the hub handles one job fails that job alone (`internal`)."""

import asyncio
import json
import math
import os
import subprocess
import sys
import threading

import psutil
import pytest

from tests.client.conftest import ROOT, WAIT_S, assert_tree_gone, validate_report
from tests.codec.vectors import untag
from trainbridge import bridge
from trainbridge.bridge import aio, machine
from trainbridge.bridge.hub import Hub

CONFIG = json.load(open(os.path.join(ROOT, "vectors", "config.json"), encoding="ascii"))


@pytest.mark.parametrize("case", CONFIG["cases"], ids=lambda c: c["name"])
def test_config_vectors(case):
    problem = machine.config_problem(untag(case["config"]))
    assert (list(problem) if problem else None) == case["problem"]


def children():
    return {p.pid for p in psutil.Process().children(recursive=True)}


BAD = [
    ("w -h", {}, "not a string"),
    (
        ["true"],
        {"startup_timeout": "30"},
        "startup_timeout must be a number of seconds or None (off), got '30'",
    ),
    (["true"], {"kill_grace": math.nan}, "kill_grace must be a finite number of seconds"),
    (["true"], {"heartbeat_timeout": math.inf}, "heartbeat_timeout must be a finite number"),
    (["true"], {"kill_grace": -1}, "kill_grace must be >= 0 seconds, got -1"),
    (["true"], {"stall_timeout": True}, "stall_timeout must be a number of seconds"),
    (["true"], {"cancel_grace": None}, "cancel_grace must be a number of seconds, got None"),
    (["true", None], {}, "command argument 1 must be a string, got None"),
    (["true", 3], {}, "command argument 1 must be a string, got 3"),
    ([], {}, "non-empty list"),
    (["true"], {"env": {"A": None}}, "env['A'] must be a string, got None"),
    (["true"], {"env": {"A": 1}}, "env['A'] must be a string, got 1"),
    (["true"], {"env": {1: "x"}}, "env keys must be non-empty strings"),
    (["true"], {"cwd": 3}, "cwd must be a path"),
    (["true"], {"on_event": "print"}, "on_event must be a function"),
    (["true"], {"stalld_after": 1}, "unknown setting 'stalld_after'"),
]


@pytest.mark.parametrize("cmd, options, message", BAD, ids=lambda v: repr(v)[:40])
def test_launch_refuses_bad_arguments_before_anything_exists(cmd, options, message):
    hub = Hub.get()
    jobs_before, before = dict(hub.jobs), children()
    dirs_before = set(os.listdir(hub.runtime_dir))
    with pytest.raises(bridge.LaunchError, match=None) as info:
        bridge.launch(cmd, **options)
    assert message in str(info.value), str(info.value)
    assert str(info.value).isascii()
    assert hub.jobs == jobs_before and children() == before  # nothing registered or spawned
    assert set(os.listdir(hub.runtime_dir)) == dirs_before


def test_aio_launch_refuses_bad_arguments():
    with pytest.raises(bridge.LaunchError, match="startup_timeout must be a number"):
        asyncio.run(aio.launch(["true"], startup_timeout="30"))


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("--kill-grace", "nan", "finite"),
        ("--kill-grace", "-1", ">= 0"),
        ("--stall-timeout", "nan", "finite"),
        ("--heartbeat-timeout", "inf", "finite"),
        ("--startup-timeout", "-2", ">= 0"),
    ],
)
def test_cli_refuses_bad_durations_before_it_starts_anything(flag, value, message, tmp_path):
    marker = tmp_path / "ran"
    trainbridge = os.path.join(os.path.dirname(sys.executable), "trainbridge")
    out = subprocess.run(
        [
            trainbridge,
            "run",
            flag,
            value,
            "--",
            sys.executable,
            "-c",
            f"open({str(marker)!r}, 'w')",
        ],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert message in out.stderr and flag in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
    assert not marker.exists()


def test_a_bug_while_handling_one_job_fails_it_alone(script):
    """Two real jobs on one hub; handling job A raises (injected: every hub entry into A
    fails from its first progress on). A ends failed/internal with its tree gone; B goes on
    and succeeds; the hub still serves a third job after."""
    gate = script("")
    slow = script("""
        import os, time
        from trainbridge import worker
        worker.progress(1, total=2)
        while not os.path.exists(os.environ["TB_GATE"]):
            time.sleep(0.005)
        worker.progress(2, total=2)
    """)
    a = bridge.launch(
        [sys.executable, slow],
        zero_code=False,
        cwd=ROOT,
        env={**os.environ, "TB_GATE": gate + ".a"},
    )
    b = bridge.launch(
        [sys.executable, slow],
        zero_code=False,
        cwd=ROOT,
        env={**os.environ, "TB_GATE": gate + ".b"},
    )
    failing = threading.Event()

    def broken(*args, **kwargs):
        raise RuntimeError("injected bug")

    original = a.next_wakeup

    def next_wakeup():
        if a.progress is not None:
            failing.set()
            broken()
        return original()

    a.next_wakeup = next_wakeup
    report_a = a.wait(WAIT_S)
    assert report_a is not None, "job A never got a report: the hub died with it"
    validate_report(report_a)
    assert failing.is_set()
    assert report_a["outcome"] == "failed"
    assert report_a["diagnosis"]["kind"] == "internal", report_a["diagnosis"]
    assert "injected bug" in report_a["diagnosis"]["summary"]
    error = report_a["error"]
    assert "RuntimeError" in error["traceback"] or error["type"] == "RuntimeError"
    assert_tree_gone(a)

    open(gate + ".b", "w").close()
    report_b = b.wait(WAIT_S)
    assert report_b is not None, "job B never got a report after A's bug"
    assert report_b["outcome"] == "succeeded", report_b["summary"]
    assert report_b["progress"]["step"] == 2
    assert_tree_gone(b)
    c = bridge.launch([sys.executable, "-c", "print('third')"], zero_code=False)
    report_c = c.wait(WAIT_S)
    assert report_c is not None and report_c["outcome"] == "succeeded"
