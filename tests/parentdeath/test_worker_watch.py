"""The worker's side alone: a stand-in client (a process that only spawns the job and
sleeps) is SIGKILLed; the job's worker says so on stderr (a file here, so the test can read
it) and ends its process group."""

import os
import signal
import subprocess
import sys
import textwrap

from tests.parentdeath.test_parentdeath import live, wait_for
from tests.worker.conftest import receiver  # noqa: F401 - the fixture

JOB = (
    "import time; from trainbridge import worker\nassert worker.enabled()\n"
    "while True:\n    time.sleep(0.05)\n"
)

STAND_IN = textwrap.dedent("""
    import os, subprocess, sys, threading
    env = dict(os.environ, TRAINBRIDGE_CLIENT_PID=str(os.getpid()))
    child = subprocess.Popen([sys.executable, "-c", sys.argv[1]], env=env,
                             stderr=open(sys.argv[2], "wb"), start_new_session=True)
    print(child.pid, flush=True)
    threading.Event().wait()
""")


def test_the_worker_says_why_it_ends_the_job(receiver, tmp_path):  # noqa: F811 - the fixture
    stderr_file = tmp_path / "stderr.txt"
    env = receiver.env(kill_grace_s="0.5")
    client = subprocess.Popen(
        [sys.executable, "-c", STAND_IN, JOB, str(stderr_file)], env=env, stdout=subprocess.PIPE
    )
    job_pid = int(client.stdout.readline())
    try:
        hello = receiver.wait_for(lambda r: r.kind == "hello" and r.body["pid"] == job_pid)
        assert hello.body["detached"] is False
        client.send_signal(signal.SIGKILL)
        client.wait(timeout=5)
        wait_for(lambda: not live([job_pid]), 0.5 + 2, "the job to end")
    finally:
        for pid in live([job_pid]):
            os.kill(pid, signal.SIGKILL)
        client.stdout.close()
    text = stderr_file.read_text(encoding="ascii")
    assert (
        f"[trainbridge] the supervising client (pid {client.pid}) is gone; ending the job "
        f"(SIGTERM to process group {job_pid}, SIGKILL after 0.5 s)"
    ) in text
