"""The supervised job of the parent-death tests: it starts a grandchild (a plain `sleep`,
no worker: only the group kill can end it), writes the job's pids to a file, then sleeps.

    job_child.py PIDS_FILE [ignore_term] [report_survival SECONDS]

ignore_term: SIGTERM is ignored here and (inherited across exec) by the grandchild, so only
the SIGKILL after the grace ends them. report_survival: once this process sees that its
parent (the client) is gone, it waits SECONDS and writes PIDS_FILE + ".survived": a job that
should have been ended never gets to write it.
"""

import json
import os
import signal
import subprocess
import sys
import time

pids_file = sys.argv[1]
options = sys.argv[2:]
if "ignore_term" in options:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
grandchild = subprocess.Popen(["sleep", "300"])
info = {"pids": [os.getpid(), grandchild.pid], "job_id": os.environ.get("TRAINBRIDGE_JOB_ID")}
with open(pids_file + ".tmp", "w", encoding="ascii") as f:
    json.dump(info, f)
os.replace(pids_file + ".tmp", pids_file)  # the test never reads half a file

survive_s = None
if "report_survival" in options:
    survive_s = float(options[options.index("report_survival") + 1])
parent = os.getppid()
while True:
    time.sleep(0.05)
    if survive_s is not None and os.getppid() != parent:
        time.sleep(survive_s)  # part of the scenario: a job that outlives the client
        with open(pids_file + ".survived", "w", encoding="ascii") as f:
            f.write("yes\n")
        survive_s = None
