"""bridge.aio.Scheduler: bridge.Scheduler for asyncio code, the same methods awaited.

    sched = bridge.aio.Scheduler(store="jobs.db")
    job_id = await sched.submit(["python", "train.py"])
    job = await sched.attach(job_id)          # an AsyncJob, as bridge.aio.launch() returns
    async for event in job.events():
        ...
    report = await job.wait()

Store calls and process starts run in the default executor, so the loop never waits on
SQLite or fork/exec; the attached job is bridge.aio.AsyncJob over the same Attached handle.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Callable, Optional, TypeVar, Union

from trainbridge.bridge.aio_job import AsyncAttachedJob
from trainbridge.bridge.scheduler import Scheduler as _Scheduler

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from trainbridge.bridge.scheduler import SubmitOptions

T = TypeVar("T")


class Scheduler:
    def __init__(self, *args: Any, **kwargs: Any):
        """As bridge.Scheduler (opening the store and one reconciliation happen here)."""
        self.sync = _Scheduler(*args, **kwargs)
        self.path = self.sync.path

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, functools.partial(fn, *args, **kwargs))

    async def submit(self, cmd: Any, **options: Unpack[SubmitOptions]) -> str:
        """Scheduler.submit, off the event loop (the options: scheduler.SubmitOptions)."""
        return await self._run(self.sync.submit, cmd, **options)

    async def jobs(
        self, state: Optional[Any] = None, limit: Optional[int] = None, tag: Optional[str] = None
    ) -> list[dict[str, Any]]:
        return await self._run(self.sync.jobs, state, limit, tag)

    async def get(self, job_id: str) -> Optional[dict[str, Any]]:
        return await self._run(self.sync.get, job_id)

    async def cancel(
        self, job_id: str, reason: Optional[str] = None, grace: Optional[float] = None
    ) -> bool:
        return await self._run(self.sync.cancel, job_id, reason, grace)

    async def forget(self, job_id: str) -> bool:
        return await self._run(self.sync.forget, job_id)

    async def rerun(self, job_id: str, env: Optional[Mapping[str, str]] = None) -> str:
        return await self._run(self.sync.rerun, job_id, env)

    async def pause(self) -> None:
        await self._run(self.sync.pause)

    async def resume(self) -> None:
        await self._run(self.sync.resume)

    async def paused(self) -> bool:
        return await self._run(lambda: self.sync.paused)

    async def forgotten(self) -> dict[str, Any]:
        return await self._run(self.sync.forgotten)

    async def set_keep_ended(self, keep_ended: Optional[int]) -> None:
        """The store's retention (Scheduler.keep_ended's setter), for every process."""

        def put() -> None:
            self.sync.keep_ended = keep_ended

        await self._run(put)

    async def watch(self) -> AsyncWatch:
        """Scheduler.watch() as an async iterator: `async for change in await s.watch()`."""
        return AsyncWatch(await self._run(self.sync.watch))

    async def attach(self, job_id: str, since: Union[str, int] = "start") -> AsyncAttachedJob:
        """Scheduler.attach() as an AsyncAttachedJob (its send() is awaited)."""
        return await AsyncAttachedJob.started(
            lambda on_event: self.sync.attach(job_id, on_event, since)
        )

    async def close(self) -> None:
        await self._run(self.sync.close)

    async def __aenter__(self) -> Scheduler:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


class AsyncWatch:
    """The job list's change feed (bridge/watch.py), awaited: next(timeout), async for,
    close(). Each wait runs in the loop's executor; closing ends an iteration."""

    def __init__(self, watch: Any):
        self.sync = watch

    async def next(self, timeout: Optional[float] = None) -> Optional[dict[str, Any]]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, self.sync.next, timeout)

    def __aiter__(self) -> AsyncWatch:
        return self

    async def __anext__(self) -> dict[str, Any]:
        change = await self.next(None)
        if change is None:
            raise StopAsyncIteration
        return change

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self.sync.close)

    async def __aenter__(self) -> AsyncWatch:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()
