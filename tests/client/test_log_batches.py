"""The worker batches log records (`logs`, PROTOCOL.md); the client hands each record to
listeners and to events() as its own `log` message, in order, as if it had come alone."""

from tests.client.conftest import message


def test_batched_records_reach_listeners_one_by_one_in_order(run):
    seen, batches = [], []

    def on_event(event):
        if event["event"] == "message" and event["kind"] in ("log", "stage"):
            body = event["body"]
            seen.append(
                body["message"] if event["kind"] == "log" else f"{body['event']} {body['name']}"
            )
            if event["kind"] == "log":
                batches.append(sorted(body))
        assert not (event["event"] == "message" and event["kind"] == "logs"), "never a batch"

    job, r = run(
        """
        from trainbridge import worker
        for i in range(2000):
            worker.log(f"record {i}", i=i)
        with worker.stage("after"):
            worker.log("last", level="warning")
    """,
        on_event=on_event,
    )
    assert r["outcome"] == "succeeded"
    assert seen == [f"record {i}" for i in range(2000)] + ["begin after", "last", "end after"]
    # Each record is a whole `log` body (level, message, created, fields), as a lone one is.
    assert batches[0] == ["created", "fields", "level", "message"]
    events = list(job.events(timeout=0))
    logs = [e["body"] for e in events if message("log")(e)]
    assert [b["message"] for b in logs] == [f"record {i}" for i in range(2000)] + ["last"]
    assert logs[5]["fields"] == {"i": 5} and logs[-1]["level"] == "warning"
