"""Runs one command under the Python client (bridge) and prints its report as JSON, so the
Node tests can hold the two clients' reports side by side.

    python_report.py '{"stall_timeout": 1, "_cancel_after_progress": true}' -- CMD ARGS...
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from trainbridge.bridge.job import launch
from trainbridge.bridge.report_text import to_json

config = json.loads(sys.argv[1])
cancel_after_progress = config.pop("_cancel_after_progress", False)
go_file = config.pop("_go_file", None)  # created when the client has the message below
# worker message kinds to see in order, comma-separated, each a kind or "stage:NAME"
go_on = [w for w in (config.pop("_go_on", None) or "").split(",") if w]
cmd = sys.argv[sys.argv.index("--") + 1 :]
job = launch(cmd, **config)
if cancel_after_progress or go_file:
    for event in job.events():
        if (
            go_file
            and event["event"] == "message"
            and go_on[0] in (event["kind"], f"stage:{event['body'].get('name')}")
        ):
            go_on.pop(0)
            if not go_on:
                open(go_file, "w").close()
                go_file = None
        if cancel_after_progress and event["event"] == "message" and event["kind"] == "progress":
            job.cancel()
            break
        if event["event"] == "end" or not (go_file or cancel_after_progress):
            break
report = job.wait()
sys.stdout.write(to_json(report))
