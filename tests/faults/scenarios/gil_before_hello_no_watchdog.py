"""As gil_right_after_import.py, with the worker's GIL-freeze watchdog cancelled (as when it
has already fired, or was disarmed across a fork): only the native dump (SIGUSR2, which the
worker registers at import) can name the blocking frame before hello."""
import ctypes
import faulthandler
import sys

print("importing the worker, then holding the GIL", flush=True)
from trainbridge import worker  # noqa: E402,F401

faulthandler.cancel_dump_traceback_later()


def hold_gil_without_watchdog():
    libc = ctypes.PyDLL(None)
    while True:
        libc.sleep(3600)


hold_gil_without_watchdog()
sys.exit(0)
