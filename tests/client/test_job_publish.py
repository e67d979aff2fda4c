"""bridge/job_publish.py on its own: every event reaches the queue and each listener in
order; a listener that raises is removed and said in the job's log while the others go on; a
job made with events=False keeps none and says how to read them; a `logs` batch is one `log`
event per record. The whole path is the client tests' (test_events, test_dropin)."""

import pytest

from trainbridge.bridge.job_publish import Publisher


class Hub:
    def __init__(self):
        self.asked = []

    def io_only(self, what):
        self.asked.append(what)


def test_each_event_to_the_queue_and_every_listener_in_order():
    heard, logged = [], []
    pub = Publisher(Hub(), True, heard.append, logged.append)
    second = []
    pub.add(second.append)
    pub.publish({"event": "state", "state": "running"})
    pub.publish_all([{"event": "a", "t": 1.0}, {"event": "b", "t": 2.0}])
    kinds = [e["event"] for e in heard]
    assert kinds == ["state", "a", "b"] and [e["event"] for e in second] == kinds
    assert isinstance(heard[0]["t"], float)  # stamped when it had no time
    assert [pub.queue().next_event(0)["event"] for _ in range(3)] == kinds
    assert logged == []


def test_a_listener_that_raises_is_removed_and_said_and_the_others_still_hear():
    heard, logged = [], []

    def broken(event):
        raise ValueError("boom")

    pub = Publisher(Hub(), False, broken, logged.append)
    pub.add(heard.append)
    pub.publish({"event": "a"})
    pub.publish({"event": "b"})
    assert [e["event"] for e in heard] == ["a", "b"]
    assert len(logged) == 1 and "failed and was removed: ValueError: boom" in logged[0]


def test_without_events_nothing_is_kept_and_events_says_how_to_get_them():
    pub = Publisher(Hub(), False, None, print)
    assert not pub.wanted()  # an output line then makes no event
    with pytest.raises(RuntimeError, match="events=True"):
        pub.queue()
    pub.add(lambda e: None)
    assert pub.wanted()


def test_a_logs_batch_is_a_log_message_per_record_with_one_time_and_the_publish_is_checked():
    hub = Hub()
    heard = []
    pub = Publisher(hub, False, heard.append, print)
    pub.publish_records(1, [{"msg": "x"}, {"msg": "y"}], {"rank": 1})
    assert [(e["kind"], e["rank"], e["body"]["msg"]) for e in heard] == [
        ("log", 1, "x"),
        ("log", 1, "y"),
    ]
    assert heard[0]["t"] == heard[1]["t"] and heard[0]["sender"] == {"rank": 1}
    assert hub.asked == ["a job's publish"]  # the I/O thread's, checked under the tests
