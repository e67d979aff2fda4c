"""The Python client as a drop-in: launch(stdin="pipe"), raw output
chunks besides the line events, and two-way messages (job.send / worker.send)."""

import os
import signal
import sys
import time

import pytest

from tests.client.conftest import ROOT, WAIT_S, assert_tree_gone, on_hub, validate_report
from trainbridge import bridge

GBK = "\u4e2d\u6587".encode("gbk")
ECHO = r"""
import sys
import threading
data = sys.stdin.buffer.read()           # until EOF
out = sys.stdout.buffer
out.write(b"[%d]" % len(data) + data)
out.write(b"prompt> 50%\r")
out.write(GBK)
out.write(bytes(range(256)))
out.write(b"tail without newline")
"""


def py(code, **extra):
    return [sys.executable, "-c", f"GBK = {GBK!r}\n" + code]


def test_stdin_pipe_and_raw_output_are_byte_exact_besides_the_lines():
    job = bridge.launch(py(ECHO), stdin="pipe", raw=True, startup_timeout=WAIT_S)
    sent = b"abc\xff\r\n" + GBK + b"no newline at the end"
    job.stdin.write(sent)
    job.stdin.close()  # EOF
    chunks = list(job.stdout)
    report = job.wait(WAIT_S)
    assert report is not None and report.outcome == "succeeded"
    validate_report(report)
    expected = (
        b"[%d]" % len(sent)
        + sent
        + b"prompt> 50%\r"
        + GBK
        + bytes(range(256))
        + b"tail without newline"
    )
    assert b"".join(chunks) == expected
    assert job.stderr.read() == b""
    # The same bytes as lines for events and the report.
    assert report["log_tail"][-1].endswith("tail without newline")
    assert_tree_gone(job)


def test_raw_chunks_arrive_before_the_line_is_complete():
    code = (
        "import sys\nsys.stdout.write('name? '); sys.stdout.flush()\n"
        "print('hi', sys.stdin.readline().strip())\n"
    )
    job = bridge.launch(
        [sys.executable, "-c", code], stdin="pipe", raw=True, startup_timeout=WAIT_S
    )
    first = job.stdout.next_chunk(WAIT_S)
    assert first == b"name? "  # a prompt without a newline, delivered at once
    job.stdin.write(b"ada\n")
    job.stdin.close()
    assert job.stdout.read() == b"hi ada\n"
    assert job.wait(WAIT_S).outcome == "succeeded"


def test_stdin_defaults_to_devnull_and_rejects_unknown_modes():
    job = bridge.launch(
        [sys.executable, "-c", "import sys; print(repr(sys.stdin.read()))"],
        raw=True,
        startup_timeout=WAIT_S,
    )
    assert job.stdin is None and job.stdout.read() == b"''\n"
    job.wait(WAIT_S)
    with pytest.raises(bridge.LaunchError, match="stdin must be one of"):
        bridge.launch([sys.executable, "-c", "pass"], stdin="tty")


CHECKPOINT = r"""
from trainbridge import worker
import time
worker.send({"ready": True, "path": "C:\\runs\\\u6a21\u578b"})
for step in range(2000):
    worker.progress(step, 2000)
    msg = worker.receive(timeout=0.01)          # a safe point in the training loop
    if msg is None:
        continue
    if msg == "stop":
        break
    if msg.get("cmd") == "checkpoint":
        worker.send({"saved": "/ckpt/step-%d.pt" % step, "asked": msg["id"]})
"""


def test_two_way_messages_in_order_with_non_ascii_values():
    events = []
    job = bridge.launch(
        [sys.executable, "-c", CHECKPOINT], on_event=events.append, startup_timeout=WAIT_S
    )
    job.send({"cmd": "checkpoint", "id": 1})  # before the hello: held, then sent in order
    job.send({"cmd": "checkpoint", "id": 2})
    answers = []
    for event in job.events(timeout=WAIT_S):
        if event["event"] == "message" and event["kind"] == "user":
            answers.append(event["body"]["data"])
            if len(answers) == 3:
                job.send("stop")
    report = job.wait(WAIT_S)
    assert report.outcome == "succeeded"
    assert answers[0] == {"ready": True, "path": "C:\\runs\\\u6a21\u578b"}
    assert [a["asked"] for a in answers[1:]] == [1, 2]
    assert all(a["saved"].startswith("/ckpt/step-") for a in answers[1:])
    with pytest.raises(RuntimeError, match="has ended"):
        job.send("late")


def test_on_message_handler_and_limits():
    code = r"""
from trainbridge import worker
import threading
got = threading.Event()
box = []
@worker.on_message
def handle(data):
    box.append(data)
    got.set()
worker.send("hello")
assert got.wait(30)
try:
    worker.send("x" * (2 << 20))
except ValueError as exc:
    worker.send({"refused": str(exc)[:40]})
worker.send({"echo": box[0]})
"""
    job = bridge.launch([sys.executable, "-c", code], startup_timeout=WAIT_S)
    answers = []
    for event in job.events(timeout=WAIT_S):
        if event["event"] == "message" and event["kind"] == "user":
            answers.append(event["body"]["data"])
            if event["body"]["data"] == "hello":
                job.send([1, 2.5, None, "\u00e9"])
    assert job.wait(WAIT_S).outcome == "succeeded"
    assert answers[0] == "hello"
    assert answers[1]["refused"].startswith("worker.send: cannot send")
    assert answers[2] == {"echo": [1, 2.5, None, "\u00e9"]}
    with pytest.raises(ValueError, match="cannot send"):
        job.send(b"x" * (2 << 20))


def test_a_handler_that_raises_is_a_nonfatal_error_and_the_script_goes_on():
    code = r"""
from trainbridge import worker
import threading
done = threading.Event()
@worker.on_message
def handle(data):
    if data == "bad":
        done.set()
        raise ValueError("handler cannot take " + data)
worker.send("ready")
assert done.wait(30)
worker.send("after")
"""
    job = bridge.launch([sys.executable, "-c", code], startup_timeout=WAIT_S)
    errors = []
    for event in job.events(timeout=WAIT_S):
        if event["event"] == "message" and event["kind"] == "user":
            if event["body"]["data"] == "ready":
                job.send("bad")
        if event["event"] == "message" and event["kind"] == "error":
            errors.append(event["body"])
    report = job.wait(WAIT_S)
    assert report.outcome == "succeeded", report.summary
    assert len(errors) == 1, errors
    assert errors[0]["type"] == "ValueError" and errors[0]["fatal"] is False
    assert errors[0]["message"] == "handler cannot take bad"
    assert errors[0]["fields"] == {"where": "worker.on_message handler"}
    assert errors[0]["frames"][-1]["function"] == "handle"


def test_worker_send_without_a_client_is_a_no_op():
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINBRIDGE_")}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from trainbridge import worker; print(worker.send({'a': 1}), worker.receive())",
        ],
        capture_output=True,
        env=env,
        cwd=ROOT,
        timeout=WAIT_S,
    )
    assert done.stdout == b"False None\n", done.stderr


def test_the_checkpoint_demo_runs_under_the_python_client():
    import subprocess

    done = subprocess.run(
        [sys.executable, os.path.join(ROOT, "examples", "checkpoint_gui.py")],
        capture_output=True,
        cwd=ROOT,
        timeout=WAIT_S,
    )
    assert done.returncode == 0, done.stderr
    assert b"checkpoint saved at /" in done.stdout and b"outcome: succeeded" in done.stdout


def test_a_full_inbox_counts_what_it_could_not_keep():
    code = r"""
from trainbridge import worker
from trainbridge.worker import messages
from trainbridge.worker.runtime import STATE
import time
worker.send("go")
deadline = time.monotonic() + 30
while STATE.dropped.get("user", 0) < 5 and time.monotonic() < deadline:
    time.sleep(0.01)
kept = 0
while worker.receive() is not None:
    kept += 1
worker.send({"kept": kept, "dropped": STATE.dropped.get("user", 0)})
"""
    job = bridge.launch([sys.executable, "-c", code], startup_timeout=WAIT_S)
    answers = []
    for event in job.events(timeout=WAIT_S):
        if event["event"] == "message" and event["kind"] == "user":
            answers.append(event["body"]["data"])
            if event["body"]["data"] == "go":
                for i in range(1005):
                    job.send(i)
    report = job.wait(WAIT_S)
    assert report.outcome == "succeeded"
    assert answers[-1] == {"kept": 1000, "dropped": 5}
    assert report["dropped"]["user"] == 5 and report["protocol"]["undelivered"] == {}
    assert "inbox was full: the worker dropped 5 job.send() messages" in report["summary"]


def test_asyncio_form_sends_and_receives_messages():
    import asyncio

    from trainbridge.bridge import aio

    async def main():
        job = await aio.launch([sys.executable, "-c", CHECKPOINT], startup_timeout=WAIT_S)
        job.send({"cmd": "checkpoint", "id": 7})
        answers = []
        async for event in job.events():
            if event["event"] == "message" and event["kind"] == "user":
                answers.append(event["body"]["data"])
                if len(answers) == 2:
                    job.send("stop")
        return answers, await job.wait(WAIT_S)

    answers, report = asyncio.run(main())
    assert report.outcome == "succeeded" and answers[1]["asked"] == 7


def test_messages_wait_for_a_hello_up_to_a_limit():
    job = bridge.launch(
        [sys.executable, "-c", "import time; time.sleep(30)"], zero_code=False, startup_timeout=None
    )
    try:
        for i in range(1000):
            job.send(i)
        with pytest.raises(RuntimeError, match="wait for the worker's hello"):
            job.send(1000)
    finally:
        job.cancel(grace=0)
        report = job.wait(WAIT_S)
        assert report is not None
    # No hello ever came: the 1,000 that waited for one are counted, not lost unseen.
    assert report["protocol"]["undelivered"] == {"user": 1000}, report["protocol"]


def test_sends_to_a_stopped_worker_wait_and_are_all_delivered_or_counted():
    # The worker is SIGSTOPped, so its queues fill and the hub's sends must wait (zmq
    # ROUTER_MANDATORY: Again). Every message is then delivered (kept or counted as
    # dropped by the worker's full inbox) or counted undelivered: none vanishes.
    n = 6000
    code = (
        r"""
from trainbridge import worker
from trainbridge.worker.runtime import STATE
import time
n = %d
worker.send("go")
deadline = time.monotonic() + 60
kept = 0
while kept + STATE.dropped.get("user", 0) < n and time.monotonic() < deadline:
    if worker.receive(timeout=0.1) is not None:
        kept += 1
worker.send({"kept": kept, "dropped": STATE.dropped.get("user", 0)})
"""
        % n
    )
    job = bridge.launch([sys.executable, "-c", code], startup_timeout=WAIT_S)
    answers = []
    for event in job.events(timeout=WAIT_S):
        if event["event"] == "message" and event["kind"] == "user":
            answers.append(event["body"]["data"])
            if event["body"]["data"] == "go":
                os.kill(job.pid, signal.SIGSTOP)
                try:
                    for i in range(n):
                        job.send("x" * 1000 + str(i))
                    waited = on_hub(job.hub, lambda: job.channel.waited)
                finally:
                    os.kill(job.pid, signal.SIGCONT)
    report = job.wait(WAIT_S)
    assert report.outcome == "succeeded"
    assert waited > 0  # the send path really backed up
    assert report["protocol"]["undelivered"] == {}
    assert answers[-1]["kept"] + answers[-1]["dropped"] == n, answers[-1]


def test_sends_held_for_a_stopped_worker_are_bounded_and_the_rest_counted():
    # A worker that takes nothing (SIGSTOPped) while the parent keeps sending: the hub
    # holds at most HELD_USER_LIMIT job.send() messages for it (memory stays bounded), and
    # every one past that is counted in protocol.undelivered and said in the summary.
    from trainbridge.bridge import channel

    n = channel.HELD_USER_LIMIT + 12_000  # more than zmq's queues and the held limit take
    code = r"""
import threading
from trainbridge import worker
from trainbridge.worker.runtime import STATE
# A handler, not receive(): the inbox that receive() reads drops past its own bound, and a
# "done" dropped there would be counted as one of the test's messages.
kept, done = [0], threading.Event()
@worker.on_message
def take(data):
    if data == "done":
        done.set()
    else:
        kept[0] += 1
worker.send("go")
done.wait(60)
worker.send({"kept": kept[0], "dropped": STATE.dropped.get("user", 0)})
"""
    job = bridge.launch([sys.executable, "-c", code], startup_timeout=WAIT_S)
    answers, most_held = [], None
    for event in job.events(timeout=WAIT_S):
        if event["event"] == "message" and event["kind"] == "user":
            answers.append(event["body"]["data"])
            if event["body"]["data"] == "go":
                os.kill(job.pid, signal.SIGSTOP)
                try:
                    for i in range(n):
                        job.send(i)
                    most_held = on_hub(
                        job.hub,
                        lambda: max((len(q) for q in job.channel.held.values()), default=0),
                    )
                finally:
                    os.kill(job.pid, signal.SIGCONT)
                # Once nothing is held any more, "done" cannot be past the held limit.
                deadline = time.monotonic() + WAIT_S
                while on_hub(job.hub, lambda: bool(job.channel.held)):
                    assert time.monotonic() < deadline, "held sends never drained"
                    time.sleep(0.05)  # polling a condition with a deadline
                job.send("done")
    report = job.wait(WAIT_S)
    assert report.outcome == "succeeded"
    undelivered = report["protocol"]["undelivered"].get("user", 0)
    assert most_held is not None and most_held <= channel.HELD_USER_LIMIT, most_held
    assert undelivered > 0, report["protocol"]
    assert answers[-1]["kept"] + answers[-1]["dropped"] + undelivered == n, (answers[-1], n)
    assert f"{undelivered} job.send() messages never reached the worker" in report.summary


def test_sends_the_worker_never_got_are_said_in_the_summary():
    from trainbridge.bridge.report_text import losses

    said = losses({"protocol": {"undelivered": {"user": 2, "cancel": 1}}})
    assert said == [
        "1 'cancel' message never reached the worker: its process was gone or the job "
        "ended first (report 'protocol.undelivered').",
        "2 job.send() messages never reached the worker: its process was gone, it took none "
        "while 10,000 waited, or the job ended first (report 'protocol.undelivered').",
    ]
