"""Native code that holds the GIL: ctypes.PyDLL does not release it, so even the worker's
beacon thread cannot run. A signal can cut sleep() short, hence the loop."""
import ctypes

from trainbridge import worker
from _common import say, wait_for_go


def hold_gil():
    say("sleeping in C with the GIL held")
    libc = ctypes.PyDLL(None)
    while True:
        libc.sleep(3600)


with worker.stage("model"):
    wait_for_go()
    hold_gil()
