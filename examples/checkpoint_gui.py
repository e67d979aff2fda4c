"""The GUI side of the two-way message demo, with the Python client: when the script says
it is ready, ask it for a checkpoint; print the path it answers with; then ask it to stop.

    python examples/checkpoint_gui.py
"""

import os
import sys

from trainbridge import bridge

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "checkpoint_train.py")

job = bridge.launch([sys.executable, SCRIPT, "2000"], startup_timeout=60)
for event in job.events():
    if event["event"] != "message" or event["kind"] != "user":
        continue
    data = event["body"]["data"]
    if data.get("ready"):
        job.send({"cmd": "checkpoint", "id": 1})
    elif "checkpoint" in data:
        print(f"checkpoint saved at {data['checkpoint']} (step {data['step']})")
        job.send({"cmd": "stop"})
    elif "stopping" in data:
        print(f"the script stops at step {data['stopping']}")
report = job.wait()
print(f"outcome: {report.outcome}")
sys.exit(0 if report.outcome == "succeeded" else 1)
