"""A tiny supervising client, to be SIGKILLed by the parent-death tests.

    client.py PIDS_FILE KILL_GRACE DETACHED(0|1) [job_child options...]

It launches tests/parentdeath/job_child.py through bridge.launch and waits forever.
"""

import os
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))  # the repo root: import bridge

import bridge  # noqa: E402

pids_file, kill_grace, detached = sys.argv[1], float(sys.argv[2]), sys.argv[3] == "1"
env = dict(os.environ)
env.pop("PYTHONUNBUFFERED", None)  # as real users run
job = bridge.launch([sys.executable, os.path.join(HERE, "job_child.py"), pids_file,
                     *sys.argv[4:]], env=env, kill_grace=kill_grace, detached=detached,
                    startup_timeout=60)
threading.Event().wait()  # supervise until killed
