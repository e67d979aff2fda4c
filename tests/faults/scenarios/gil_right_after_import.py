"""Native code holds the GIL right after `import worker`, before the beacon thread could say
hello (once known only at the startup timeout, as a startup hang with no stack).
The line is printed before the import so the time to know counts from it."""
import ctypes
import sys

print("importing the worker, then holding the GIL", flush=True)
from trainbridge import worker  # imported for its effect: the beacon starts


def hold_gil_at_once():
    libc = ctypes.PyDLL(None)
    while True:
        libc.sleep(3600)


hold_gil_at_once()
sys.exit(0)
