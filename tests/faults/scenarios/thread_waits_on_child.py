"""The main thread waits on a queue that a feeder thread fills from a subprocess that never
finishes: the wait chain's end is the feeder's child, not the main thread's queue."""
import queue
import subprocess
import sys
import threading

from trainbridge import worker
from _common import say

batches = queue.Queue()


def feed():
    out = subprocess.run([sys.executable, "-c", "import time; time.sleep(600)"],
                         capture_output=True)
    batches.put(out.stdout)


with worker.stage("data"):
    threading.Thread(target=feed, name="feeder", daemon=True).start()
    say("waiting for a batch")
    batch = batches.get()
