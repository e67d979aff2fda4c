"""bridge.aio's jobs: AsyncJob wraps a launched Job (bridge.aio.launch) or an attached one
(bridge.aio.Scheduler.attach, AsyncAttachedJob) for asyncio code: the same job, awaited
instead of blocked on. The hub's I/O thread runs the job exactly as for the synchronous
API; the wrapper only wakes the event loop (call_soon_threadsafe) when the job publishes.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Callable, Optional, TypeVar, Union

from trainbridge.bridge.report import Report

if TYPE_CHECKING:
    from trainbridge.bridge.attach import Attached
    from trainbridge.bridge.job import Job

A = TypeVar("A", bound="AsyncJob")
OnEvent = Callable[[dict[str, Any]], None]


class AsyncJob:
    def __init__(self, job: Union[Job, Attached], loop: asyncio.AbstractEventLoop):
        self.job = job
        self._loop = loop
        self._wakeup = asyncio.Event()
        self._ended: asyncio.Future[Report] = loop.create_future()

    @classmethod
    async def started(
        cls: type[A],
        start: Callable[[OnEvent], Any],
        user_callback: Optional[OnEvent] = None,
    ) -> A:
        """Run start(on_event), which launches or attaches and returns the synchronous job,
        off the loop (it blocks briefly: fork/exec, a hop to the I/O thread, a keeper's
        reply), and wrap what it returns. The wrapper hears every event from then on, and an
        end that came before it existed resolves it on creation."""
        loop = asyncio.get_running_loop()
        holder: dict[str, A] = {}

        def on_event(event: dict[str, Any]) -> None:
            if user_callback is not None:
                user_callback(event)
            wrapper = holder.get("job")
            if wrapper is not None:
                wrapper._on_event(event)
            elif event["event"] == "end":  # ended before the wrapper existed
                loop.call_soon_threadsafe(_late_end, holder, event["report"])

        job = await loop.run_in_executor(None, start, on_event)
        holder["job"] = wrapper = cls(job, loop)
        if job.done() and job.report is not None:
            wrapper._resolve(job.report)
        return wrapper

    # Called on the hub's I/O thread for every event.
    def _on_event(self, event: dict[str, Any]) -> None:
        self._loop.call_soon_threadsafe(self._wakeup.set)
        if event["event"] == "end":
            self._loop.call_soon_threadsafe(self._resolve, event["report"])

    def _resolve(self, report: Report) -> None:
        if not self._ended.done():
            self._ended.set_result(report)

    @property
    def id(self) -> str:
        return str(self.job.id)

    @property
    def pid(self) -> Optional[int]:
        return self.job.pid

    @property
    def state(self) -> str:
        return self.job.state

    async def wait(self, timeout: Optional[float] = None) -> Report:
        """The report, once the job ended (asyncio.TimeoutError after `timeout`)."""
        return await asyncio.wait_for(asyncio.shield(self._ended), timeout)

    async def events(self) -> AsyncIterator[dict[str, Any]]:
        """The same events as Job.events(), without blocking the loop."""
        while True:
            self._wakeup.clear()
            event = self.job.next_event(0)
            if event is None:
                await self._wakeup.wait()
                continue
            yield event
            if event["event"] == "end":
                return

    def cancel(self, grace: Optional[float] = None, reason: Optional[str] = None) -> None:
        """Job.cancel(grace, reason); it does not wait for the end (await wait() for that)."""
        self.job.cancel(grace=grace, reason=reason)

    def send(self, data: Any) -> None:
        """Job.send(): a message to the script (never blocks: it is queued)."""
        self.job.send(data)

    async def dump_stacks(self, timeout: float = 2.0) -> Optional[str]:
        return await self._loop.run_in_executor(
            None, functools.partial(self.job.dump_stacks, timeout)
        )

    async def ping(self, timeout: float = 2.0) -> Optional[float]:
        return await self._loop.run_in_executor(None, functools.partial(self.job.ping, timeout))


class AsyncAttachedJob(AsyncJob):
    """aio.Scheduler.attach(): an attached job (bridge/attach.py) for asyncio code. Its send()
    is awaited: it waits for the keeper's reply, off the loop."""

    def __init__(self, job: Attached, loop: asyncio.AbstractEventLoop):
        super().__init__(job, loop)
        self.attached = job

    async def send(self, data: Any, timeout: float = 5.0) -> None:  # type: ignore[override]
        """The attached job's send(): resolves once the keeper took the message."""
        await self._loop.run_in_executor(None, functools.partial(self.attached.send, data, timeout))


def _late_end(holder: dict[str, A], report: Report) -> None:
    if "job" in holder:
        holder["job"]._resolve(report)
