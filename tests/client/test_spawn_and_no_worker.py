"""The spawn event and zero-code mode that cannot load, as node-client's
test/api.test.js checks them for Node."""

import os
import subprocess
import sys

from tests.client.conftest import WAIT_S, validate_report
from trainbridge import bridge


def user_env():
    return {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


def test_spawn_is_the_first_event_and_names_pid_and_command():
    events = []
    cmd = [sys.executable, "-c", "print('trained')"]
    job = bridge.launch(cmd, env=user_env(), on_event=events.append)
    report = job.wait(WAIT_S)
    assert report["outcome"] == "succeeded"
    assert events[0] == {"event": "spawn", "pid": job.pid, "command": cmd, "t": events[0]["t"]}
    assert report["worker"]["off"] is None and report["worker"]["hello"]


def test_a_training_venv_without_pyzmq_is_a_no_worker_event_and_report_worker_off(tmp_path):
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    bare = str(venv / "bin" / "python")
    events = []
    # The README's own usage: the worker API imports, its calls do nothing.
    script = (
        "from trainbridge import worker\n"
        "with worker.stage('fit'):\n    worker.progress(1, 1)\nprint('trained')"
    )
    job = bridge.launch([bare, "-c", script], env=user_env(), on_event=events.append)
    report = job.wait(WAIT_S)
    validate_report(report)
    reasons = [e["reason"] for e in events if e["event"] == "no_worker"]
    assert reasons == [
        f"[trainbridge] zero-code mode is off in this process: ImportError: pyzmq and msgpack "
        f"not installed for {bare}; run `{bare} -m pip install pyzmq msgpack` to turn it on"
    ]
    assert report["worker"]["off"] == reasons[0] and not report["worker"]["hello"]
    assert report["outcome"] == "succeeded" and "trained" in report["log_tail"]
