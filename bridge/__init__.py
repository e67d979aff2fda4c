"""trainbridge client side: launch and supervise a training process (docs/CLIENT.md).

    from trainbridge import bridge
    job = bridge.launch(["python", "train.py"], stall_timeout=600, log_path="train.log")
    for event in job.events():
        ...
    report = job.wait()

The asyncio form of the same thing is bridge.aio.
"""

from trainbridge.bridge.job import Job, Report, launch
from trainbridge.bridge.launcher import LaunchError

__all__ = ["Job", "LaunchError", "Report", "launch"]
