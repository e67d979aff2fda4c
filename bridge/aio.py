"""The asyncio form of bridge: the same Job, awaited instead of blocked on.

    job = await bridge.aio.launch(["python", "train.py"], stall_timeout=600)
    async for event in job.events():
        ...
    report = await job.wait()

Nothing is decided here: the hub's I/O thread runs the job exactly as for the synchronous
API; this wrapper only wakes the event loop (call_soon_threadsafe) when the job publishes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trainbridge.bridge import machine

# bridge.aio's names: the job wrappers and the job queue's asyncio twin have modules of their
# own (aio_job.py, aio_scheduler.py); this module is their face, and launch().
from trainbridge.bridge.aio_job import AsyncAttachedJob as AsyncAttachedJob
from trainbridge.bridge.aio_job import AsyncJob as AsyncJob
from trainbridge.bridge.aio_scheduler import Scheduler as Scheduler
from trainbridge.bridge.job import launch as _launch
from trainbridge.bridge.job_arguments import check_arguments


async def launch(cmd: Sequence[str], **options: Any) -> AsyncJob:
    """bridge.launch() for asyncio code: same options, returns an AsyncJob."""
    user_callback = options.pop("on_event", None)
    # Bad arguments fail here, on the caller's loop, before a thread or a job exists.
    check_arguments(
        cmd,
        cwd=options.get("cwd"),
        env=options.get("env"),
        log_path=options.get("log_path"),
        on_event=user_callback,
        config={k: v for k, v in options.items() if k in machine.DEFAULTS},
        stop_on_nan=options.get("stop_on_nan"),
    )

    # Spawning blocks briefly (fork/exec and a hop to the I/O thread): not on the loop.
    return await AsyncJob.started(
        lambda on_event: _launch(cmd, on_event=on_event, **options), user_callback
    )
