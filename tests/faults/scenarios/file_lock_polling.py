"""Polling a lock file that another process holds, as the filelock package does for
huggingface_hub's download cache: try, sleep, try again (FAULT_LOCK_PATH; the test runs the
holder). The main thread sleeps; the verdict names who holds the lock."""
import fcntl
import os
import time

from trainbridge import worker
from _common import say


def wait_for_cache_lock(path):
    lock = open(path, "a")
    say(f"waiting for the lock on {path}")
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return lock
        except BlockingIOError:
            time.sleep(0.05)


with worker.stage("download"):
    wait_for_cache_lock(os.environ["FAULT_LOCK_PATH"])
