"""The script side of the two-way message demo: a training loop that, at its own safe
points, looks for a message from the GUI and answers "save a checkpoint now" with the path.

Run it through examples/checkpoint_gui.py (Python) or node-client/examples/checkpoint_gui.js.
"""

import os
import sys
import tempfile
import time

from trainbridge import worker

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 200
out_dir = tempfile.mkdtemp(prefix="trainbridge-ckpt-")

with worker.stage("train"):
    worker.send({"ready": True, "steps": STEPS})
    for step in range(STEPS):
        time.sleep(0.005)  # the "work" of one step
        worker.progress(step + 1, STEPS)
        msg = worker.receive()  # a safe point: between two steps
        if msg is None:
            continue
        if msg.get("cmd") == "checkpoint":
            path = os.path.join(out_dir, f"step-{step + 1}.pt")
            with open(path, "wb") as f:  # a real script: torch.save(state, path)
                f.write(b"weights")
            worker.send({"checkpoint": path, "step": step + 1, "id": msg.get("id")})
        elif msg.get("cmd") == "stop":
            worker.send({"stopping": step + 1})
            break
for name in os.listdir(out_dir):  # the demo leaves nothing behind
    os.remove(os.path.join(out_dir, name))
os.rmdir(out_dir)
