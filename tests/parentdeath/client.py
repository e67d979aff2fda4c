"""A tiny supervising client, to be SIGKILLed by the parent-death tests.

    client.py PIDS_FILE KILL_GRACE DETACHED(0|1) [via_shell] [job_child options...]

It launches tests/parentdeath/job_child.py through bridge.launch and waits forever.
via_shell: the job's top process is a shell without a worker, which runs job_child.py; only
that Python child (zero-code mode) can notice that the client is gone.
"""

import os
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))  # the repo root: import bridge

from trainbridge import bridge  # noqa: E402 - after sys.path names the repository

pids_file, kill_grace, detached = sys.argv[1], float(sys.argv[2]), sys.argv[3] == "1"
env = dict(os.environ)
env.pop("PYTHONUNBUFFERED", None)  # as real users run
options = sys.argv[4:]
cmd = [sys.executable, os.path.join(HERE, "job_child.py"), pids_file]
if options[:1] == ["via_shell"]:
    options = options[1:]
    # `; exit` keeps the shell from exec-ing Python: it stays the top process.
    cmd = ["sh", "-c", '"$@"; exit $?', "sh", *cmd]
job = bridge.launch(
    cmd + options, env=env, kill_grace=kill_grace, detached=detached, startup_timeout=60
)
threading.Event().wait()  # supervise until killed
