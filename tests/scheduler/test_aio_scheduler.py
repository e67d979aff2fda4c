"""aio.Scheduler: the same queue from asyncio code, the loop never blocked."""

import asyncio

from trainbridge.bridge import aio

from .conftest import WAIT_S, child


def test_submit_attach_and_wait_from_asyncio(store_path):
    async def main():
        async with aio.Scheduler(
            store=store_path, slots={"jobs": 1, "gpus": []}, tick=0.1
        ) as sched:
            job_id = await sched.submit(child("steps", 3))
            queued = await sched.submit(child("forever"))
            job = await sched.attach(job_id)
            kinds = [event["event"] async for event in job.events()]
            report = await job.wait(WAIT_S)
            assert (await sched.get(queued))["state"] in ("queued", "starting", "running")
            assert await sched.cancel(queued)
            cancelled = await (await sched.attach(queued)).wait(WAIT_S)
            return kinds, report, cancelled, await sched.jobs()

    kinds, report, cancelled, rows = asyncio.run(main())
    assert kinds[-1] == "end" and "output" in kinds
    assert report.outcome == "succeeded"
    assert cancelled["outcome"] == "cancelled"
    assert [r["outcome"] for r in rows] == ["cancelled", "succeeded"]
