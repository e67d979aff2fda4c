# Rank 0 of launcher/torchrun: one step; once the client says this rank leads (the test
# opens the gate), it dies with no last words.
import os
import signal
import time

from trainbridge import worker

worker.progress(1, total=3)
gate = os.environ["TB_GATE_RANK"]
deadline = time.monotonic() + 60
while not os.path.exists(gate):
    if time.monotonic() > deadline:
        raise SystemExit("the client never made rank 0 the lead")
    time.sleep(0.01)
os.kill(os.getpid(), signal.SIGKILL)
