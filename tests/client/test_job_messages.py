"""bridge/job_messages.py's steps on their own: what the machine hears of the lead's message,
by kind (LEAD_STEPS), and of another process's, driven on a stand-in for the Job with no
process, hub or socket. The whole path (a worker's message to the report) is the client tests'."""

from trainbridge.bridge import job_messages
from trainbridge.bridge.job_asks import Asks
from trainbridge.bridge.job_look import Look
from trainbridge.bridge.job_messages import LEAD_STEPS, Messages


class Job:
    """A stand-in for the Job: the state the messages part reads, and the other parts it
    hands work to (the actions, the publisher), which only record what they were asked."""

    def __init__(self, awaiting_ranks, cancel_seqs):
        self.facts = {"dump_pids": [812], "native_dump_pids": [], "cancel": None}
        self.m = {"awaiting_ranks": awaiting_ranks, "exit": None}
        self.asks = Asks()
        self.asks.cancel_seqs = cancel_seqs
        self.deadline_look = Look()
        self.did = []
        self.actions = Recorder(self.did)
        self.publisher = Recorder(self.did)


class Recorder:
    def __init__(self, did):
        self.did = did

    def step(self, event):
        self.did.append(("step", {k: v for k, v in event.items() if k != "t"}))

    def live_diagnose(self):
        self.did.append(("live_diagnose",))

    def publish(self, event):
        self.did.append(("publish", event["event"]))


class Room(Messages):
    """The messages part on a stand-in Job; its outbox and leaving recorded, not done."""

    def __init__(self, awaiting_ranks=False, cancel_seqs=range(0)):
        super().__init__(Job(awaiting_ranks, cancel_seqs))
        self.did = self.job.did

    def send_outbox(self):
        self.did.append(("outbox",))

    def _leave(self, routing_id, now):
        self.did.append(("leave", routing_id))


def lead_says(room, kind, body):
    LEAD_STEPS.get(kind, Messages._lead_beat)(room, b"w1", kind, body, 5.0)
    return room.did


def test_the_leads_hello_starts_the_job_and_sends_what_waited():
    did = lead_says(Room(), "hello", {"pid": 812})
    assert did[0][0] == "step" and did[0][1]["type"] == "hello"
    assert did[0][1]["dump_signal"] is True and did[0][1]["awaits_ranks"] is False
    assert did[1] == ("outbox",)


def test_the_leads_stage_carries_its_name_depth_and_budget():
    body = {"event": "begin", "name": "load", "depth": 1, "budget_s": 30}
    assert lead_says(Room(), "stage", body) == [
        ("step", {"type": "stage", "event": "begin", "name": "load", "depth": 1, "budget_s": 30})
    ]


def test_the_leads_progress_error_and_bye():
    assert lead_says(Room(), "progress", {"step": 3}) == [("step", {"type": "progress"})]
    error = {"fatal": True, "kind": "exception", "exit_code": None}
    assert lead_says(Room(), "error", error) == [
        ("step", {"type": "error", "fatal": True, "kind": "exception", "exit_code": None})
    ]
    # a bye is the machine's, and the process can no longer lead
    did = lead_says(Room(), "bye", {"reason": "done", "exit_code": 0})
    assert did == [("step", {"type": "bye", "reason": "done", "exit_code": 0}), ("leave", b"w1")]


def test_a_reply_to_the_cancel_is_its_answer_and_a_beat():
    room = Room(cancel_seqs=range(7, 8))
    room.job.facts["cancel"] = {"reason": "user"}
    did = lead_says(room, "reply", {"to": 7, "ok": False, "error": "busy"})
    assert ("publish", "cancel") in did
    assert ("step", {"type": "cancel_refused", "reason": "busy"}) in did
    assert did[-1] == ("step", {"type": "beat"})
    # a dump's reply is only a beat
    assert lead_says(Room(), "reply", {"to": 3}) == [("step", {"type": "beat"})]


def test_any_other_kind_of_the_lead_is_a_beat():
    for kind in ("log", "metric", "artifact"):
        assert lead_says(Room(), kind, {}) == [("step", {"type": "beat"})]


def test_a_heartbeat_that_shows_work_says_so(monkeypatch):
    monkeypatch.setattr(job_messages.machine, "live_look_due", lambda m: True)
    room = Room()
    room.job.deadline_look.heartbeat({"work": 4}, 1.0)  # the lead's last heartbeat counted 4
    did = lead_says(room, "heartbeat", {"work": 5, "stack": "x"})
    assert did == [("step", {"type": "beat", "work": True}), ("live_diagnose",)]
    did = lead_says(Room(), "heartbeat", {"work": 5})  # a first count: nothing to compare
    assert did[-2] == ("step", {"type": "beat"})


def test_another_process_moves_the_job_only_by_a_ranks_hello_or_a_bye():
    room = Room(awaiting_ranks=True)
    room._from_another(b"r1", "hello", {"world_size": 2}, 5.0)
    assert room.did == [("step", {"type": "hello", "dump_signal": True})]
    room = Room(awaiting_ranks=False)
    room._from_another(b"r1", "hello", {"world_size": 2}, 5.0)  # the job has started already
    room._from_another(b"r1", "progress", {"step": 1}, 5.0)
    room._from_another(b"r1", "error", {"fatal": True}, 5.0)
    assert room.did == []
    room._from_another(b"r1", "bye", {}, 5.0)
    assert room.did == [("leave", b"r1")]


def test_a_remote_ranks_wait_is_timed_by_its_own_monotonic_clock():
    """Another host's rank stamps its monotonic clock (mt), whose origin is not ours: the
    least (receipt - mt) seen from it is the offset plus the quickest delivery, and each
    message waited what it took beyond that. Neither host's wall clock (here 600 s apart)
    enters; the rate of a rank read from a backlog is the job's, not the reader's."""
    from types import SimpleNamespace

    from trainbridge.protocol.codec import Message

    room = Room()
    room.boot = "this-boot"
    room.job.election = SimpleNamespace(present={b"w1": {"remote": True, "boot": "their-boot"}})
    offset = 1000.0  # their monotonic clock reads ours + 1000 s

    def waited(sent, received):
        msg = Message(kind="progress", body={}, job="j", seq=1, ts=sent + 600.0, mt=sent + offset)
        return room._waited(b"w1", msg, received)

    assert waited(4.99, 5.0) == 0.0  # the first: the quickest delivery so far
    assert abs(waited(5.5, 8.5) - 2.99) < 1e-9  # held 3 s (a backlog): 2.99 beyond it
    assert waited(9.0, 9.005) == 0.0  # a quicker one: the new least
    assert abs(waited(9.5, 9.515) - 0.01) < 1e-9
    # A new process behind the same routing id says hello: its clock starts anew.
    room._least.pop(b"w1")
    assert waited(20.0, 20.5) == 0.0
    # On this boot and not remote: the shared clock, used as it is.
    room.job.election.present[b"w1"] = {"boot": "this-boot"}
    msg = Message(kind="progress", body={}, job="j", seq=2, ts=0.0, mt=7.0)
    assert room._waited(b"w1", msg, 9.5) == 2.5
    # No mt (an older worker): the wall clock's ts decides (status.sent_at).
    old = Message(kind="progress", body={}, job="j", seq=3, ts=1.0)
    assert room._waited(b"w1", old, 9.5) is None
