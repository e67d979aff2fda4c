"""A stand-in for a GUI with a job list: `gui_many.py STORE [CMD_JSON ...]` owns a ticking
Scheduler on STORE, submits each CMD_JSON (a JSON list) given, then attaches to every job of
the store that has not ended and prints one line per event, "<job id> <event> [text]", until
it is killed. Prints "ready" once it follows them all."""

import json
import sys
import threading

from trainbridge import bridge

lock = threading.Lock()


def show(job_id, event):
    text = event.get("text", "") if event["event"] == "output" else ""
    with lock:
        print(job_id, event["event"], text, flush=True)


sched = bridge.Scheduler(store=sys.argv[1], slots={"jobs": 2, "gpus": []}, tick=0.1)
for cmd in sys.argv[2:]:
    sched.submit(json.loads(cmd))
followed = [
    sched.attach(row["id"], on_event=lambda e, i=row["id"]: show(i, e))
    for row in sched.jobs()
    if row["state"] != "ended"
]
with lock:
    print("ready", flush=True)
threading.Event().wait()
