"""A script with no progress source: it prints for 3 s (activity), then waits forever
(a hang's idle time counts from the last line, not from the worker's last progress). Not a matrix
row (the leading "_"): tests/client/test_deadlines.py and node-client/test/e2e.test.js run it."""
import threading
import time

from trainbridge import worker

with worker.stage("eval"):
    end = time.monotonic() + 3
    while time.monotonic() < end:
        print("still evaluating", flush=True)
        time.sleep(0.2)
    threading.Event().wait(60)
