"""A client process for the flood test (tests/client/test_flood.py): it supervises a child
that waits for a gate file, prints {"endpoint", "job", "pid"} once the child said hello,
then the job's report, then stays until its stdin closes (so the test can read its peak
RSS after the job).

The test writes the number of frames it sent as a line on stdin; this client opens the gate
(ending the job) once its job has counted that many rejections, or after 60 s. A frame the
sender handed to its connection can still be in a socket buffer when the test returns from
sending: ending the job then would leave it uncounted by the job (seen 4,996 of 5,000)."""

import json
import os
import sys
import threading
import time

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
expected = int(sys.stdin.readline())
deadline = time.monotonic() + 60
while sum(job.channel.rejected.values()) < expected and time.monotonic() < deadline:
    time.sleep(0.01)  # polling a counter the hub thread fills, with a deadline
open(gate, "w").close()
report = job.wait(600)
print(json.dumps(report, default=str), flush=True)
sys.stdin.read()
