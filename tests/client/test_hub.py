"""The hub's protocol duties, against a hand-written peer (a child that speaks the wire
with protocol/codec.py directly): seq checks, replays re-acked, rejections counted by reason,
refuse on an unsupported version, and one ROUTER serving several jobs at once."""

import contextlib
import sys

from tests.client.conftest import WAIT_S, assert_tree_gone, on_hub, validate_report
from trainbridge import bridge

PEER = """
import os, sys, time, msgpack, zmq
job, key = os.environ["TRAINBRIDGE_JOB_ID"], bytes.fromhex(os.environ["TRAINBRIDGE_KEY"])
endpoint = os.environ.pop("TRAINBRIDGE_ENDPOINT")  # so importing worker starts no beacon
from trainbridge.protocol import codec
ctx = zmq.Context()
sock = ctx.socket(zmq.DEALER)
sock.setsockopt(zmq.LINGER, 0)
sock.setsockopt(zmq.ROUTING_ID, f"{job}/0".encode())
sock.connect(endpoint)
HELLO = {"pid": os.getpid(), "argv": sys.argv, "cwd": os.getcwd(), "python": {}, "host": "h",
         "env": {}, "packages": {}, "proto": "1.0", "worker": "test", "heartbeat_s": 1.0}

def send(kind, seq, body, key=key):
    sock.send_multipart(codec.encode(kind, seq, body, key, job))

def receive(timeout=10):
    if not sock.poll(int(timeout * 1000)):
        raise SystemExit("no answer from the client")
    return codec.decode(sock.recv_multipart(), key, expect="client")
"""


def test_replays_are_reacked_and_rejections_counted(script):
    path = script(
        PEER
        + """
send("hello", 1, HELLO, key=b"k" * 32)              # bad signature: ignored, counted
send("hello", 1, HELLO)
send("progress", 5, {"step": 1, "total": 2, "metrics": {}})   # a gap of 3
send("bye", 6, {"exit_code": 0, "reason": "normal"})
first = receive()
send("bye", 6, {"exit_code": 0, "reason": "normal"})          # our ack was "lost": resend
second = receive()
print(first.kind, first.body["to"], second.kind, second.body["to"], flush=True)
"""
    )
    job = bridge.launch([sys.executable, path], zero_code=False)
    r = job.wait(20)
    validate_report(r)
    assert r["outcome"] == "succeeded", (r["summary"], r["log_tail"], r["protocol"])
    assert r["log_tail"] == ["ack 6 ack 6"]
    assert r["protocol"] == {
        "rejected": {"bad_signature": 1, "replay": 1},
        "lost": 3,
        "foreign_hello": 0,
        "unrouted": 0,
        "undelivered": {},
        "unsent": 0,
    }
    assert r["progress"]["step"] == 1


def test_a_message_replayed_through_another_routing_id_is_refused(script):
    """Seq is judged per routing id; the signed sender ("from") ties a message to its own,
    so frames captured from one sender and replayed through a fresh routing id (where a
    fresh seq would accept them) are refused as bad_sender and counted."""
    path = script(
        PEER
        + """
me = f"{job}/0/{os.getpid()}"
sock.close()
sock = ctx.socket(zmq.DEALER)
sock.setsockopt(zmq.LINGER, 0)
sock.setsockopt(zmq.ROUTING_ID, me.encode())
sock.connect(endpoint)
hello = codec.encode("hello", 1, HELLO, key, job, sender=me)
step = codec.encode("progress", 2, {"step": 1, "total": 2, "metrics": {}}, key, job, sender=me)
sock.send_multipart(hello)
sock.send_multipart(step)
thief_id = f"{job}/0/1"
thief = ctx.socket(zmq.DEALER)
thief.setsockopt(zmq.LINGER, 0)
thief.setsockopt(zmq.ROUTING_ID, thief_id.encode())
thief.connect(endpoint)
thief.send_multipart(hello)   # the same frames, through another routing id of the job
thief.send_multipart(step)
thief.send_multipart([b"one frame"])
# Its own last words, acked once the hub has judged everything before them on this pipe.
thief.send_multipart(codec.encode("bye", 1, {"exit_code": 0, "reason": "normal"}, key, job,
                                  sender=thief_id))
if not thief.poll(10000):
    raise SystemExit("no ack for the thief's own bye")
sock.send_multipart(codec.encode("bye", 3, {"exit_code": 0, "reason": "normal"}, key, job,
                                 sender=me))
print(receive().kind, flush=True)
thief.close()
"""
    )
    events = []
    job = bridge.launch([sys.executable, path], zero_code=False, on_event=events.append)
    r = job.wait(20)
    validate_report(r)
    assert r["outcome"] == "succeeded", (r["summary"], r["log_tail"], r["protocol"])
    assert r["log_tail"] == ["ack"]
    assert r["protocol"]["rejected"] == {"bad_sender": 2, "bad_frames": 1}, r["protocol"]
    steps = [e for e in events if e["event"] == "message" and e["kind"] == "progress"]
    assert len(steps) == 1, steps
    assert r["worker"]["leads"] == [job.pid]


def test_unsupported_version_is_refused_and_the_job_fails(script):
    path = script(
        PEER
        + """
import hmac, hashlib, signal
# Before the hello: the refusal's SIGTERM can come as soon as the hello is out. The handler
# only notes it; the main thread reads the refusal and says it, then goes on as a worker
# left unsupervised would, until the client ends it. Every way out is os._exit: an
# interpreter's own exit can hang in zmq's context teardown with the socket still open.
# (The handler read the refusal itself before; twice in hunts the job was SIGKILLed 5 s
# after its SIGTERM with nothing printed.)
termed = []
signal.signal(signal.SIGTERM, lambda signum, frame: termed.append(signum))
envelope = msgpack.packb({"body": HELLO, "job": job, "kind": "hello", "seq": 1, "ts": 0,
                          "v": 2}, use_bin_type=True)
sock.send_multipart([envelope, hmac.new(key, envelope, hashlib.sha256).digest()])
try:
    refusal = receive(timeout=10)
except SystemExit as exc:
    print(exc, flush=True)
    os._exit(2)
print(refusal.kind, refusal.body["supported"], flush=True)
deadline = time.monotonic() + 60
while not termed and time.monotonic() < deadline:
    time.sleep(0.05)  # the main thread runs Python often, so the handler's note is seen
os._exit(1)
"""
    )
    # The grace is the peer's time to say what it got and leave (os._exit) on the SIGTERM.
    job = bridge.launch([sys.executable, path], zero_code=False, kill_grace=5.0)
    r = job.wait(20)
    assert r is not None, (job.m, list(job.events(timeout=0)))
    validate_report(r)
    assert r["outcome"] == "failed"
    # Once in a hunt (-n 3, quiet) the tail was empty: what ended it says which side failed.
    why = {k: r[k] for k in ("signal", "signals_sent", "duration_s", "protocol", "output")}
    assert r["log_tail"] == ["refuse [1]"], why
    assert r["signals_sent"] == ["SIGTERM"] and r["exit_code"] == 1, why  # the client ended it
    assert r["protocol"]["rejected"] == {"unsupported_version": 1}
    assert r["error"]["type"] == "UnsupportedProtocol" and "v2" in r["error"]["message"]
    assert_tree_gone(job)


def test_one_router_serves_many_jobs_at_once(script):
    path = script("""
        import sys; from trainbridge import worker
        for i in range(20):
            worker.progress(i + 1, 20, job=sys.argv[1])
    """)
    jobs = [bridge.launch([sys.executable, path, str(n)], zero_code=False) for n in range(4)]
    assert len({job.hub for job in jobs}) == 1 and len({job.id for job in jobs}) == 4
    reports = [job.wait(30) for job in jobs]
    for n, r in enumerate(reports):
        assert r["outcome"] == "succeeded"
        assert r["progress"] == {"step": 20, "total": 20, "metrics": {"job": str(n)}}


def test_runtime_dir_is_private():
    import os
    import stat

    from trainbridge.bridge.hub import Hub

    hub = Hub.get()
    mode = stat.S_IMODE(os.stat(hub.runtime_dir).st_mode)
    assert mode == 0o700
    assert hub.endpoint.startswith(("ipc://", "tcp://127.0.0.1:"))


def test_a_hello_read_before_its_job_is_registered_is_kept_for_it():
    """`run --transparent` spawns before it loads the client: the hub binds, and the child's
    hello can be read before the job is registered. Held for the expected job and handed to
    it once attached, it counts: before, it was dropped (the report had no environment, two
    messages `lost`)."""
    import os
    import subprocess
    import time

    from trainbridge.bridge import jobenv, machine
    from trainbridge.bridge.hub import Hub
    from trainbridge.bridge.job import Job
    from trainbridge.bridge.launcher import make_runtime_dir

    runtime_dir = make_runtime_dir()
    job_id, key = f"job-{os.urandom(6).hex()}", os.urandom(32)
    os.mkdir(os.path.join(runtime_dir, job_id), 0o700)
    crash = os.path.join(runtime_dir, job_id, "crash.txt")
    env = dict(os.environ)
    endpoint = f"ipc://{runtime_dir}/hub.sock"
    env.update(jobenv.variables(endpoint, job_id, key, crash, dict(machine.DEFAULTS), os.getpid()))
    cmd = [sys.executable, "-c", "from trainbridge import worker; import sys; sys.stdin.read()"]
    proc = subprocess.Popen(
        cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    hub = Hub(runtime_dir, expect=job_id)  # a hub of its own, as the wrapper's process has
    try:
        deadline = time.monotonic() + 30
        while hub.held(job_id) == 0:  # the hello has been read, and no job is registered
            assert proc.poll() is None and time.monotonic() < deadline, "no hello was read"
            time.sleep(0.01)
        assert hub.unrouted == 0
        job = Job(cmd, hub=hub, python_env=False, ident=(job_id, key)).start(proc)
        assert hub.held(job_id) == 0  # handed over when attached
        proc.stdin.close()
        report = job.wait(30)
    finally:
        hub.close()
    validate_report(report)
    assert report["outcome"] == "succeeded"
    assert report["environment"] is not None and report["environment"]["python"]
    assert not any(report["protocol"].values()), report["protocol"]
    assert_tree_gone(job)


def test_what_an_expected_job_gets_before_it_is_attached_is_bounded():
    from trainbridge.bridge import hub as hub_module

    early = hub_module._Early()
    for _ in range(hub_module.EARLY_MAX_MESSAGES + 3):
        early.hold([b"r", b"x" * 10])
    assert len(early.frames) == hub_module.EARLY_MAX_MESSAGES and early.over == 3
    big = hub_module._Early()
    big.hold([b"r", b"x" * hub_module.EARLY_MAX_BYTES])
    assert big.frames == [] and big.over == 1


def test_input_dropped_over_budget_before_its_job_is_attached_is_in_that_jobs_report(
    monkeypatch,
):
    """A sender that failed authentication, once the window's budget of such input is
    spent, has its messages dropped unverified. For a job expected but not attached yet,
    each went to the hub's `unrouted`, a count the job's report takes from its own start,
    so the job's report did not show it: now the job's `over_budget` does."""
    import os
    import time

    from trainbridge.bridge import intake

    monkeypatch.setattr(intake, "UNAUTH_WINDOW_S", 3600.0)  # the window cannot roll over
    with _expected_job() as (hub, job_id, send, attach):

        def spent():  # as after 16 MiB of this sender's forged messages
            hub.budget["suspects"][f"{job_id}/0"] = True
            hub.budget["t"], hub.budget["bytes"] = time.monotonic(), intake.UNAUTH_BUDGET_BYTES

        on_hub(hub, spent)
        send([b"forged", os.urandom(100)])
        report = attach()
    validate_report(report)
    assert report["protocol"]["rejected"].get("over_budget") == 1, report["protocol"]
    assert report["protocol"]["unrouted"] == 0, report["protocol"]


def test_what_came_for_an_expected_job_never_attached_is_counted_by_the_hub():
    """A job that fails before it is attached has no report to take what was kept for it:
    it goes to the hub's `unrouted` (the count every other report shows for its time)."""
    with _expected_job() as (hub, job_id, send, _):
        send([b"forged", b"x" * 100])
        on_hub(hub, lambda: hub.remove_job(job_id))
        assert hub.held(job_id) == 0 and hub.unrouted == 1


@contextlib.contextmanager
def _expected_job():
    """A hub of its own expecting a job (as `run --transparent`'s process has), a peer that
    sends as the job's rank 0 (send(frames) returns once the hub has read it), and attach(),
    which starts the job on a process that says nothing and returns its report."""
    import os
    import subprocess
    import time

    import zmq

    from trainbridge.bridge.hub import Hub
    from trainbridge.bridge.job import Job
    from trainbridge.bridge.launcher import make_runtime_dir

    runtime_dir = make_runtime_dir()
    job_id, key = f"job-{os.urandom(6).hex()}", os.urandom(32)
    os.mkdir(os.path.join(runtime_dir, job_id), 0o700)
    hub = Hub(runtime_dir, expect=job_id)
    ctx = zmq.Context()
    dealer = ctx.socket(zmq.DEALER)
    dealer.setsockopt(zmq.IDENTITY, f"{job_id}/0".encode())
    dealer.setsockopt(zmq.LINGER, 0)
    dealer.connect(hub.endpoint)

    def send(frames):
        before = hub.held(job_id)
        dealer.send_multipart(frames)
        deadline = time.monotonic() + WAIT_S
        while hub.held(job_id) == before:
            assert time.monotonic() < deadline, "the hub read nothing"
            time.sleep(0.01)  # polling the hub's count, with a deadline

    def attach():
        cmd = [sys.executable, "-c", "import sys; sys.stdin.read()"]
        proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        job = Job(cmd, hub=hub, python_env=False, ident=(job_id, key)).start(proc)
        proc.stdin.close()
        report = job.wait(WAIT_S)
        assert report is not None, job.state
        assert_tree_gone(job)
        return report

    try:
        yield hub, job_id, send, attach
    finally:
        dealer.close()
        ctx.term()
        hub.close()


def test_a_turn_of_the_reactor_asks_only_the_jobs_it_touched():
    """With 200 jobs, asking every job for its next wakeup and ticking it on every turn
    was a fifth of the I/O thread's time: a job is asked again only after something of it
    was handled, and ticked only when its wakeup is due."""
    import threading
    import time

    from trainbridge.bridge.hub import Hub

    class Idle:
        def __init__(self, n):
            self.id, self.asked, self.ticked = f"idle-{n}", 0, 0

        def next_wakeup(self):
            self.asked += 1
            return None

        def tick(self, now):
            self.ticked += 1

        def paused(self, seconds):  # the hub's job interface (bridge/job_actions.py)
            pass

    class Clock:  # due every 5 ms: it makes the reactor turn
        id, turns, done = "clock", 0, threading.Event()

        def next_wakeup(self):
            return time.monotonic() + 0.005

        def tick(self, now):
            self.turns += 1
            if self.turns >= 20:
                self.done.set()

        def paused(self, seconds):
            pass

    idle, clock = [Idle(n) for n in range(50)], Clock()
    hub = Hub()
    try:
        hub.call(lambda: [hub.add_job(job) for job in (*idle, clock)])
        assert clock.done.wait(30), "the clock job was not ticked 20 times"
        asked = [job.asked for job in idle]
    finally:
        hub.close()
    assert max(asked) <= 2, asked  # once when added (and once if a call came meanwhile)
    assert all(job.ticked == 0 for job in idle)


def test_a_job_whose_pipes_closed_is_not_kept_for_the_pipe_linger(monkeypatch):
    """After the exit the drain waits at most PIPE_LINGER_S for pipes a grandchild may hold;
    once they are closed the job ends at the next turn. The reactor ticks a job only when
    its next wakeup is due, so that wakeup must say so (it said the linger's end: every
    death -> report took the whole 0.2 s, p50 3.7 -> 204 ms in the benchmark)."""
    from trainbridge.bridge import machine

    monkeypatch.setattr(machine, "PIPE_LINGER_S", 30.0)
    monkeypatch.setitem(machine.DEFAULTS, "drain_timeout", 30.0)  # else it ends the wait at 1 s
    job = bridge.launch([sys.executable, "-c", "pass"], zero_code=False)
    report = job.wait(10)  # far under the linger: it ended once its pipes were closed
    assert report is not None, f"still {job.state} 10 s after a child that exits at once"
    assert report["outcome"] == "succeeded"


def test_a_jobs_state_touched_off_the_io_thread_raises_under_the_tests_setting(monkeypatch):
    """Only the I/O thread touches a Job (docs/ARCHITECTURE.md, "Threads"); with
    TRAINBRIDGE_CHECK_THREADS=1, which tests/conftest.py sets for every test and the keepers
    and job servers they start, a Job's machine step or publish on another thread raises."""
    import pytest

    from trainbridge.bridge.hub import Hub

    hub = Hub.get()
    assert hub.check_threads
    with pytest.raises(AssertionError, match="ran on thread 'MainThread', not the hub's I/O"):
        hub.io_only("a job's publish")

    def on_io():
        hub.io_only("a job's publish")
        return "ok"

    assert on_hub(hub, on_io) == "ok"
    monkeypatch.setattr(hub, "check_threads", False)  # a user's process: no check, no cost
    hub.io_only("a job's publish")
