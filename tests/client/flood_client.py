"""A client process for the flood test (tests/client/test_flood.py): it supervises a child
that waits for a gate file, prints {"endpoint", "job", "pid"} once the child said hello,
then the job's report, then stays until its stdin closes (so the test can read its peak
RSS after the job)."""

import json
import os
import sys
import threading

from trainbridge import bridge

gate = sys.argv[1]
child = (
    f"import os, time\nfrom trainbridge import worker\nworker.progress(1, 2)\n"
    f"while not os.path.exists({gate!r}):\n    time.sleep(0.01)\nworker.progress(2, 2)\n"
)
hello = threading.Event()


def on_event(event):
    if event["event"] == "message" and event["kind"] == "hello":
        hello.set()


job = bridge.launch([sys.executable, "-c", child], zero_code=False, on_event=on_event)
if not hello.wait(60):
    sys.exit("no hello")
print(json.dumps({"endpoint": job.hub.endpoint, "job": job.id, "pid": os.getpid()}), flush=True)
report = job.wait(600)
print(json.dumps(report, default=str), flush=True)
sys.stdin.read()
