"""A process that owns a ticking Scheduler on a store until it is killed: `host.py STORE`.
Prints "ready" once its Scheduler is up."""

import sys
import threading

from trainbridge import bridge

sched = bridge.Scheduler(store=sys.argv[1], tick=0.1)
print("ready", flush=True)
threading.Event().wait()
