"""Off Linux: the worker imports and works in-band; the clients refuse at
import with one sentence. Another OS is stood in for by a Python whose sys.platform says
darwin and which has no SIGUSR1 and no os.pidfd_open, as on macOS."""

import os
import subprocess
import sys

from trainbridge import bridge

NOT_LINUX = """\
import os, signal, sys
sys.platform = "darwin"
del signal.SIGUSR1
if hasattr(os, "pidfd_open"):
    del os.pidfd_open
"""


def user_env():
    return {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


def test_the_worker_degrades_to_in_band_reporting_without_sigusr1():
    code = (
        NOT_LINUX
        + """\
from trainbridge import worker
with worker.stage("train"):
    for step in range(1, 4):
        worker.progress(step, 3)
print("enabled:", worker.enabled())
"""
    )
    job = bridge.launch(
        [sys.executable, "-c", code], env=user_env(), zero_code=False, startup_timeout=30
    )
    report = job.wait(60)
    assert report["outcome"] == "succeeded", report["summary"]
    assert report["worker"]["hello"] and not report["worker"]["dump_signal"]  # no SIGUSR1
    assert [s["name"] for s in report["stages"]] == ["train"]
    assert report["progress"]["step"] == 3 and "enabled: True" in report["log_tail"]


def test_the_python_client_refuses_at_import_with_one_sentence():
    done = subprocess.run(
        [sys.executable, "-c", NOT_LINUX + "from trainbridge import bridge"],
        capture_output=True,
        text=True,
        env=user_env(),
        timeout=60,
    )
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(
        "ImportError: the trainbridge client (trainbridge.bridge, the "
        "`trainbridge` command) supports Linux only and this is darwin"
    ), last
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            NOT_LINUX
            + "from trainbridge.__main__ import main; sys.exit(main(['run', '--', 'true']))",
        ],
        capture_output=True,
        text=True,
        env=user_env(),
        timeout=60,
    )
    assert done.returncode == 125 and done.stderr.count("\n") == 1, done.stderr
    assert "supports Linux only" in done.stderr and "Traceback" not in done.stderr
