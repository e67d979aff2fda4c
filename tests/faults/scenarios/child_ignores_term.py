"""A child that ignores SIGTERM; the parent waits on it forever."""
import subprocess
import sys

from trainbridge import worker
from _common import say

CHILD = ("import signal, sys, time\n"
         "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
         "print('child ignoring SIGTERM', flush=True)\n"
         "time.sleep(3600)\n")


def wait_for_child():
    child = subprocess.Popen([sys.executable, "-c", CHILD])
    say(f"waiting for child {child.pid}")
    child.wait()


with worker.stage("data"):
    wait_for_child()
