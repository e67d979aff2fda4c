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


def test_an_attached_job_from_asyncio_pings_sends_and_cancels_with_a_reason(store_path):
    """The aio attached job has the attached job's API: ping(), an awaited send() that waits
    for the keeper's reply off the loop (it blocked the loop for up to 5 s), and cancel with
    a reason and a grace, as aio.Scheduler.cancel() has."""

    async def main():
        async with aio.Scheduler(
            store=store_path, slots={"jobs": 2, "gpus": []}, tick=0.1
        ) as sched:
            echo = await sched.attach(await sched.submit(child("echo")))
            async for event in echo.events():
                if event["event"] == "message" and event["kind"] == "hello":
                    break
            assert await echo.ping() is not None
            ticks = 0

            async def ticker():
                nonlocal ticks
                while True:
                    ticks += 1
                    await asyncio.sleep(0.001)  # the loop's pulse, counted while send waits

            pulse = asyncio.ensure_future(ticker())
            await echo.send({"n": 1})
            await echo.send("stop")
            pulse.cancel()
            echoed = [
                e["body"]["data"]["echo"]
                async for e in echo.events()
                if e["event"] == "message" and e["kind"] == "user"
            ]
            first = await sched.attach(await sched.submit(child("forever")))
            async for event in first.events():
                if event["event"] == "status" and event["status"]["step"]:
                    break
            first.cancel(grace=0, reason="from asyncio")
            second = await sched.attach(await sched.submit(child("forever")))
            async for event in second.events():
                if event["event"] == "status" and event["status"]["step"]:
                    break
            assert await sched.cancel(second.id, reason="from the scheduler", grace=0)
            return echoed, ticks, await first.wait(WAIT_S), await second.wait(WAIT_S)

    echoed, ticks, first, second = asyncio.run(main())
    assert echoed == [{"n": 1}, "stop"]
    assert ticks > 0, "the loop ran while send() waited for the keeper"
    assert first["outcome"] == "cancelled" and first["cancel"]["reason"] == "from asyncio"
    assert second["cancel"]["reason"] == "from the scheduler"


def test_the_queue_the_feed_and_retention_from_asyncio(store_path):
    """aio.Scheduler has what Scheduler has (STORE.md says "the same methods, awaited"; pause,
    resume, rerun, jobs(tag) and watch were missing): the change feed as an async iterator."""

    async def main():
        async with aio.Scheduler(store=store_path, slots={"jobs": 1, "gpus": []}, tick=0.1) as s:
            await s.pause()
            assert await s.paused()
            held = await s.submit(child("steps", 1), tags=["aio"])
            assert [r["id"] for r in await s.jobs(tag="aio")] == [held]
            seen = []
            async with await s.watch() as changes:
                await s.resume()
                async for change in changes:
                    seen.append(change)
                    if change.get("id") == held and (change["row"] or {}).get("state") == "ended":
                        break
            again = await s.rerun(held)
            assert (await (await s.attach(again)).wait(WAIT_S))["outcome"] == "succeeded"
            async with await s.watch() as changes:
                await s.set_keep_ended(1)  # the next tick forgets the older of the two
                async for change in changes:
                    if change.get("change") == "removed":
                        break
            assert s.sync.keep_ended == 1
            return seen, await s.forgotten()

    seen, forgotten = asyncio.run(main())
    assert seen[0]["event"] == "queue" and seen[0]["paused"] is True
    assert any(c["event"] == "queue" and c["paused"] is False for c in seen)
    assert seen[-1]["row"]["outcome"] == "succeeded"
    assert forgotten["count"] == 1 and forgotten["keep_ended"] == 1
