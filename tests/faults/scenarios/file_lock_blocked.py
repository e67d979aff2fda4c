"""Blocked in flock() on a cache's lock file that another process holds (FAULT_LOCK_PATH;
the test runs the holder): the verdict names the holder, not only the waiting frame."""
import fcntl
import os

from trainbridge import worker
from _common import say


def take_cache_lock(path):
    with open(path, "a") as lock:
        say(f"taking the lock on {path}")
        fcntl.flock(lock, fcntl.LOCK_EX)


with worker.stage("download"):
    take_cache_lock(os.environ["FAULT_LOCK_PATH"])
