"""A native deadlock with the GIL held: ctypes.PyDLL keeps the GIL and no signal ends a
pthread mutex wait, so no Python runs again: not the beacon (no in-band dump), not the
SIGUSR1 handler. The stall deadline comes long before the freeze watchdog: the stack is
SIGUSR2's, faulthandler's C dump of the main thread."""
import ctypes

from trainbridge import worker
from _common import say, wait_for_go


def hold_gil():
    say("locking a mutex twice in C with the GIL held")
    libc = ctypes.PyDLL(None)
    mutex = ctypes.create_string_buffer(64)  # zeroed: PTHREAD_MUTEX_INITIALIZER
    libc.pthread_mutex_lock(mutex)
    libc.pthread_mutex_lock(mutex)


with worker.stage("model"):
    wait_for_go()
    worker.progress(1, 10)
    hold_gil()
