"""bridge/job_outbox.py on its own: job.send()'s messages wait for the lead's hello in order,
at most OUTBOX_LIMIT with a message that says what to check, and what never went is counted
for the report. The whole path (a script's receive(), a job that never said hello) is
tests/client/test_dropin.py's."""

import pytest

from trainbridge.bridge.job_outbox import OUTBOX_LIMIT, Outbox


class Channel:
    def __init__(self):
        self.sent = []

    def send_to(self, routing_id, kind, body):
        self.sent.append((routing_id, kind, body))


def test_held_in_order_and_sent_to_the_lead():
    box, channel = Outbox(), Channel()
    for n in range(3):
        box.hold(n, lead_present=False)
    box.send(channel, b"lead")
    assert channel.sent == [(b"lead", "user", {"data": n}) for n in range(3)]
    box.send(channel, b"lead")  # nothing twice
    assert len(channel.sent) == 3


def test_full_before_any_hello_says_what_to_check():
    box = Outbox()
    for n in range(OUTBOX_LIMIT):
        box.hold(n, lead_present=False)
    with pytest.raises(RuntimeError, match="does the script import trainbridge.worker"):
        box.hold("one more", lead_present=False)
    box.hold("with a lead", lead_present=True)  # about to be sent: no limit


def test_what_never_went_is_counted_once():
    box = Outbox()
    box.hold("a", lead_present=False)
    box.hold("b", lead_present=False)
    assert box.drop() == 2 and box.drop() == 0
