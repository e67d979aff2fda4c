"""A stand-in for a GUI that owns a Scheduler: `gui.py STORE -- CMD...` submits CMD, prints
the job id, then follows the job's events (printing one line per event) until killed."""

import sys

from trainbridge import bridge

store = sys.argv[1]
cmd = sys.argv[3:]
sched = bridge.Scheduler(store=store, slots={"jobs": 4, "gpus": []})
job_id = sched.submit(cmd)
print(job_id, flush=True)
job = sched.attach(job_id)
for event in job.events():
    print(event["event"], flush=True)
