"""The asyncio form: the same job, awaited; events as an async iterator."""

import asyncio
import sys

from trainbridge.bridge import aio


def test_async_events_and_report(script):
    path = script("""
        from trainbridge import worker
        with worker.stage("train"):
            for i in range(3):
                worker.progress(i + 1, 3)
        print("done")
    """)

    async def main():
        job = await aio.launch([sys.executable, path], zero_code=False)
        seen = [event async for event in job.events()]
        report = await job.wait(timeout=20)
        return seen, report

    seen, report = asyncio.run(main())
    assert report["outcome"] == "succeeded"
    assert [e["state"] for e in seen if e["event"] == "state"] == ["starting", "running", "ended"]
    assert any(e["event"] == "output" and e["text"] == "done" for e in seen)
    assert seen[-1]["event"] == "end" and seen[-1]["report"] is report


def test_async_cancel(script):
    path = script("""
        import threading; from trainbridge import worker
        worker.progress(1, 2)
        threading.Event().wait(60)
    """)

    async def main():
        job = await aio.launch([sys.executable, path], zero_code=False)
        async for event in job.events():
            if event["event"] == "message" and event["kind"] == "progress":
                stacks = await job.dump_stacks(timeout=5)
                assert await job.ping(timeout=5) is not None
                job.cancel(grace=1)
        return stacks, await job.wait(timeout=20)

    stacks, report = asyncio.run(main())
    assert "MainThread" in stacks
    assert report["outcome"] == "cancelled"
