"""Not a scenario: the other process of the file-lock rows (matrix `needs: lock_holder`). It
takes an exclusive flock on argv[1], says so, and holds it until it is killed, as a second
job sharing a download cache would."""
import fcntl
import sys
import time

with open(sys.argv[1], "a") as held:
    fcntl.flock(held, fcntl.LOCK_EX)
    print("locked", flush=True)
    while True:
        time.sleep(60)
