"""bridge/jobserve.py, the Node client's supervisor: jobs launched and judged by the Python Job,
spoken to in JSON lines over a real `python -m trainbridge.bridge.jobserve` process.

Each test starts jobserve, launches small Python children through it and waits (with a
deadline, never a sleep) for the lines it writes: each job's events numbered from 1, its
end with the report, the replies; and that no process of a job outlives jobserve, whether
its stdin closes, it is signalled or it is SIGKILLed.
"""

import base64
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

from tests.client.conftest import ROOT, SCHEMA

WAIT_S = 30  # a generous upper bound: a test that needs it has failed anyway
GONE_S = 15  # a job's processes are gone this soon after jobserve's end


def served_env():
    """The environment jobserve runs in (its jobs inherit it): trainbridge from this checkout,
    and none of an outer job's TRAINBRIDGE_* variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINBRIDGE_")}
    env["PYTHONPATH"] = ROOT
    return env


def start_jobserve(waiting=b""):
    """python -m trainbridge.bridge.jobserve with its three pipes; `waiting`: requests already
    in its stdin when it starts (as a Node client's first launch is, written as it spawns)."""
    stdin: Any = subprocess.PIPE
    if waiting:
        read_end, write_end = os.pipe()
        os.write(write_end, waiting)  # a few requests: far below the pipe's 64 KiB
        stdin = read_end
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainbridge.bridge.jobserve"],
        cwd=ROOT,
        env=served_env(),
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    if waiting:
        os.close(read_end)
        proc.stdin = os.fdopen(write_end, "wb")
    return proc


class JobServe:
    """A running jobserve: requests go to its stdin, its stdout's lines are collected (each
    checked to be ASCII JSON) by a thread, and wait() finds one with a deadline.

    The tests name jobs "sleeper", "one", ...; on the wire each name gets this jobserve's
    suffix, and the lines read have it taken off again. A job id must be unique on the
    machine: a Job that ends looks for its escaped processes by the id in their environment
    (launcher.Tree.adopt_escapees), so two tests running at once with one id would end each
    other's jobs (as the Node client's ids are, the suffix is random).

    With first(js), the requests it sends are in jobserve's stdin before it starts."""

    def __init__(self, first=None):
        self.suffix = f"-{secrets.token_hex(4)}"
        self.proc = None
        self._waiting = b""
        if first is not None:
            first(self)  # send_raw() keeps them until the process exists
        self.proc = start_jobserve(self._waiting)
        self.pid = self.proc.pid
        self.lines = []
        self.problems = []  # lines that were not ASCII JSON objects
        self.eof = False
        self.cond = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.errors = b""
        self.err_reader = threading.Thread(target=self._read_errors, daemon=True)
        self.err_reader.start()

    def _read(self):
        for raw in self.proc.stdout:
            try:
                assert raw.endswith(b"\n") and raw.isascii(), raw[:200]
                line = json.loads(raw)
                assert isinstance(line, dict), raw[:200]
            except (AssertionError, ValueError) as exc:
                self.problems.append(repr(exc))
                continue
            if isinstance(line.get("job"), str):
                line["job"] = line["job"].replace(self.suffix, "")
            for key in ("error", "message"):
                if isinstance(line.get(key), str):
                    line[key] = line[key].replace(self.suffix, "")
            with self.cond:
                self.lines.append(line)
                self.cond.notify_all()
        with self.cond:
            self.eof = True
            self.cond.notify_all()

    def _read_errors(self):
        self.errors = self.proc.stderr.read()

    def send(self, *objs):
        """Request lines, written together (one write: read together)."""
        data = b""
        for obj in objs:
            if isinstance(obj.get("job"), str):
                obj = {**obj, "job": obj["job"] + self.suffix}
            data += json.dumps(obj).encode("utf-8") + b"\n"
        self.send_raw(data)

    def send_raw(self, data):
        if self.proc is None:  # before the start: waiting in its stdin when it starts
            self._waiting += data
            return
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def wait(self, pred, timeout=WAIT_S, what="a line"):
        """The first line (in order) for which pred(line) holds."""
        deadline = time.monotonic() + timeout
        with self.cond:
            seen = 0
            while True:
                for line in self.lines[seen:]:
                    if pred(line):
                        return line
                seen = len(self.lines)
                left = deadline - time.monotonic()
                if self.eof or left <= 0:
                    raise AssertionError(
                        f"no {what} within {timeout} s (eof: {self.eof}); last lines: "
                        f"{[short(x) for x in self.lines[-5:]]}; stderr: {self.errors[-2000:]!r}"
                    )
                self.cond.wait(left)

    def event(self, job, kind, timeout=WAIT_S, **fields):
        return self.wait(
            lambda x: (
                x.get("job") == job
                and x.get("event") == kind
                and all(x.get(k) == v for k, v in fields.items())
            ),
            timeout,
            f"{kind!r} of {job}",
        )

    def message(self, job, kind):
        """The job's first worker message of this kind (hello, progress, stage, ...)."""
        return self.wait(
            lambda x: x.get("job") == job and x.get("event") == "message" and x["kind"] == kind,
            what=f"a {kind} message of {job}",
        )

    def output(self, job, text):
        return self.wait(
            lambda x: x.get("job") == job and x.get("event") == "output" and x["text"] == text,
            what=f"the output line {text!r} of {job}",
        )

    def end(self, job):
        return self.event(job, "end")

    def request_errors(self):
        return [x for x in self.lines if x.get("event") == "request_error"]

    def of(self, job):
        with self.cond:
            return [x for x in self.lines if x.get("job") == job]

    def launch(self, job, path, args=(), **fields):
        self.send(self.launch_request(job, path, args, **fields))

    def launch_request(self, job, path, args=(), **fields):
        request = {
            "op": "launch",
            "job": job,
            "key": secrets.token_hex(32),
            "command": [sys.executable, path, *args],
            "cwd": ROOT,
            "env": None,
            "config": {"startup_timeout": 20, "heartbeat_timeout": 5, "kill_grace": 1},
            "log_path": None,
            "tail_lines": None,
            "zero_code": False,  # the scripts import the worker themselves
            "stdin": "devnull",
            "raw": False,
            "python_env": True,
            "log_timestamps": False,
            "stop_on_nan": None,
        }
        request.update(fields)
        return request

    def close_stdin(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass

    def finish(self, timeout=WAIT_S):
        """Close its stdin and wait for its exit status."""
        self.close_stdin()
        code = self.proc.wait(timeout)
        self.reader.join(WAIT_S)
        self.err_reader.join(WAIT_S)
        assert not self.problems, self.problems
        return code


def short(line):
    text = json.dumps(line)
    return text if len(text) < 300 else text[:300] + "..."


@pytest.fixture
def serve():
    started = []

    def make(first=None):
        """first(js): requests written as jobserve starts, before its ready line (a Node
        client writes its first launch so)."""
        js = JobServe(first)
        started.append(js)
        ready = js.wait(lambda x: x.get("event") == "ready", what="the ready line")
        assert js.lines[0] is ready
        return js

    yield make
    for js in started:
        if js.proc.poll() is None:
            js.close_stdin()
            try:
                js.proc.wait(WAIT_S)
            except subprocess.TimeoutExpired:
                js.proc.kill()
                js.proc.wait()


def numbered(lines):
    """The numbered events of one job's lines, checked to be 1..N in order."""
    events = [x for x in lines if "seq" in x]
    assert [x["seq"] for x in events] == list(range(1, len(events) + 1))
    return events


def validate(report):
    import jsonschema

    jsonschema.validate(report, SCHEMA)


def start_time(pid):
    """(starttime, state) of a process from /proc, or None when there is none."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()
    return int(fields[19]), fields[0].decode()


def alive(pid, started):
    """Whether the process that had this start time still runs (a zombie has ended)."""
    now = start_time(pid)
    return now is not None and now[0] == started and now[1] != "Z"


def wait_gone(pids, timeout=GONE_S):
    """Wait until none of the processes (pid -> start time) runs; returns those left."""
    deadline = time.monotonic() + timeout
    while True:
        left = [pid for pid, started in pids.items() if alive(pid, started)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.02)  # polling /proc with a deadline: nothing tells us a stranger died


TRAIN = """
    from trainbridge import worker
    with worker.stage("train"):
        for i in range(3):
            worker.progress(i + 1, 3, loss=0.5 / (i + 1))
            print(f"step {i + 1} \\u00e9")
"""

SLEEPER = """
    import time
    from trainbridge import worker
    worker.progress(1, 10)
    time.sleep(60)
"""


def test_the_ready_line_and_a_job_numbered_from_1_to_its_end(serve, script):
    js = serve()
    ready = js.lines[0]
    assert ready == {
        "event": "ready",
        "pid": js.pid,
        "version": 1,
        "python": sys.executable,
        "early": None,
    }
    js.launch("job-a", script(TRAIN))
    end = js.end("job-a")
    events = numbered(js.of("job-a"))
    assert events[-1] is end and events[0]["event"] == "spawn"
    assert end["outcome"] == end["report"]["outcome"] == "succeeded"
    validate(end["report"])
    assert end["report"]["progress"]["step"] == 3
    texts = [x["text"] for x in events if x["event"] == "output"]
    assert texts == ["step 1 \u00e9", "step 2 \u00e9", "step 3 \u00e9"]  # \u escapes on the wire
    kinds = [x["kind"] for x in events if x["event"] == "message"]
    assert "stage" in kinds and "progress" in kinds
    states = [x["state"] for x in events if x["event"] == "state"]
    assert states[0] == "starting" and states[-1] == "ended"
    assert js.finish() == 0


def test_two_jobs_at_once_are_each_numbered_from_1(serve, script):
    js = serve()
    path = script(TRAIN)
    js.launch("one", path)
    js.launch("two", path)
    for job in ("one", "two"):
        end = js.end(job)
        assert end["report"]["outcome"] == "succeeded"
        events = numbered(js.of(job))
        assert events[-1] is end
    assert js.finish() == 0


def test_a_job_that_raises_ends_failed_with_its_error(serve, script):
    js = serve()
    js.launch(
        "raises",
        script("""
            from trainbridge import worker
            with worker.stage("load"):
                raise ValueError("no such dataset")
        """),
    )
    report = js.end("raises")["report"]
    assert report["outcome"] == "failed"
    assert report["error"]["type"] == "ValueError"
    assert "no such dataset" in report["error"]["message"]
    validate(report)
    assert js.finish() == 0


def test_cancel_ends_a_sleeping_job_cancelled(serve, script):
    js = serve()
    js.launch("sleeper", script(SLEEPER))
    js.message("sleeper", "progress")
    js.send({"op": "cancel", "job": "sleeper", "grace": 1, "reason": "the user pressed stop"})
    report = js.end("sleeper")["report"]
    assert report["outcome"] == "cancelled"
    assert report["cancel"]["reason"] == "the user pressed stop"
    numbered(js.of("sleeper"))
    # An ended job: its cancel is ignored, a request is answered that it is not running.
    js.send({"op": "cancel", "job": "sleeper", "grace": None, "reason": None})
    js.send({"op": "ping", "job": "sleeper", "timeout": 1, "request": 5})
    reply = js.event("sleeper", "reply", request=5)
    assert reply["ok"] is False and reply["error"] == "no running job sleeper"
    assert js.finish() == 0


def test_send_reaches_the_script_and_is_acknowledged(serve, script):
    js = serve()
    js.launch(
        "receiver",
        script("""
            from trainbridge import worker
            worker.progress(1, 2)
            got = worker.receive(timeout=20)
            print("got", sorted(got.items()))
        """),
    )
    js.message("receiver", "hello")
    js.send({"op": "send", "job": "receiver", "data": {"lr": 0.5, "note": "\u00fc"}, "request": 1})
    reply = js.event("receiver", "reply", request=1)
    assert reply["ok"] is True and "error" not in reply
    js.output("receiver", "got [('lr', 0.5), ('note', '\u00fc')]")
    assert js.end("receiver")["report"]["outcome"] == "succeeded"
    assert js.finish() == 0


def test_ping_and_dump_stacks_are_answered(serve, script):
    js = serve()
    js.launch(
        "asked",
        script("""
            import time
            from trainbridge import worker
            def waiting_here():
                time.sleep(60)
            worker.progress(1, 10)
            waiting_here()
        """),
    )
    js.message("asked", "progress")
    js.send({"op": "ping", "job": "asked", "timeout": 5, "request": "p1"})
    js.send({"op": "dump_stacks", "job": "asked", "timeout": 5, "request": "d1"})
    ping = js.event("asked", "reply", request="p1")
    assert ping["ok"] is True and isinstance(ping["rtt_s"], float) and ping["rtt_s"] >= 0
    stacks = js.event("asked", "reply", request="d1")
    assert stacks["ok"] is True and "waiting_here" in stacks["stacks"]
    js.send({"op": "remote_env", "job": "asked", "address": "127.0.0.1", "port": 0, "request": 3})
    refused = js.event("asked", "reply", request=3)
    assert refused["ok"] is False and "loopback" in refused["error"]
    address = local_address()
    if address is not None:
        js.send({"op": "remote_env", "job": "asked", "address": address, "request": 4})
        env = js.event("asked", "reply", request=4)["env"]
        assert env["TRAINBRIDGE_ENDPOINT"].startswith(f"tcp://{address}:")
        assert env["TRAINBRIDGE_JOB_ID"] == "asked" + js.suffix and env["TRAINBRIDGE_SERVER_KEY"]
    js.send({"op": "cancel", "job": "asked", "grace": 1, "reason": None})
    assert js.end("asked")["report"]["outcome"] == "cancelled"
    assert js.finish() == 0


def local_address():
    """An IPv4 address of this host that is not loopback, or None."""
    import socket

    import psutil

    for addresses in psutil.net_if_addrs().values():
        for a in addresses:
            if a.family == socket.AF_INET and not a.address.startswith("127."):
                return a.address
    return None


def test_a_user_signal_makes_the_jobs_end_cancelled(serve, script):
    js = serve()
    js.launch("signalled", script(SLEEPER))
    pid = js.event("signalled", "spawn")["pid"]
    js.message("signalled", "progress")
    js.send({"op": "user_signal", "job": "signalled", "signal": "SIGTERM", "reason": "kill()"})
    # The client sends the signal itself; the request must reach jobserve first: a ping
    # after it is answered after it was handled (one request loop, in order).
    js.send({"op": "ping", "job": "signalled", "request": "first"})
    js.event("signalled", "reply", request="first")
    os.kill(pid, signal.SIGTERM)
    report = js.end("signalled")["report"]
    assert report["outcome"] == "cancelled"
    assert report["cancel"]["by"] == "signal" and report["cancel"]["signal"] == "SIGTERM"
    assert report["cancel"]["reason"] == "kill()"
    assert js.finish() == 0


def test_a_user_signal_jobserve_sends_right_after_the_launch_is_a_cancel(serve, script):
    # The python-shell adapter's kill() right after its constructor: launch and the signal
    # in one breath. jobserve notes it, then sends it: the exit is the user's stop (sent by
    # the client on hearing of the spawn, the exit could come before the note: "crashed").
    js = serve()
    js.launch("stopped", script(SLEEPER))
    js.send(
        {
            "op": "user_signal",
            "job": "stopped",
            "signal": "SIGKILL",
            "reason": "kill()",
            "send": True,
        }
    )
    report = js.end("stopped")["report"]
    assert report["outcome"] == "cancelled", report["summary"]
    assert (report["signal"], report["cancel"]["by"], report["cancel"]["signal"]) == (
        "SIGKILL",
        "signal",
        "SIGKILL",
    )
    assert js.finish() == 0


def test_a_kill_read_with_its_launch_stops_the_script_before_its_first_line(serve, script):
    """python-shell's kill() right after its constructor kills a process that has not run
    a line of the script yet (spawn, then kill, in one tick). Ours asked jobserve for the
    launch and the signal in one write; the signal was handled after the launch, once the
    Job was attached (the first job: once the judge was loaded, its process started early),
    and a loaded machine's script had printed by then. A stop read with its launch is sent
    the moment the process exists: on a fresh jobserve and on a ready one alike."""
    first_line = script("""
        import time
        print("started", flush=True)
        time.sleep(60)
    """)

    def together(js, job):
        kill = {"op": "user_signal", "job": job, "signal": "SIGKILL", "reason": "kill()"}
        js.send(js.launch_request(job, first_line), {**kill, "send": True})

    js = serve(first=lambda js: together(js, "at-start"))
    assert js.lines[0]["early"] is None, "a launch with its stop waiting is not started early"
    together(js, "when-ready")
    for job in ("at-start", "when-ready"):
        report = js.end(job)["report"]
        assert report["outcome"] == "cancelled", report["summary"]
        assert (report["signal"], report["cancel"]["signal"]) == ("SIGKILL", "SIGKILL"), report
        assert report["cancel"]["reason"] == "kill()", report["cancel"]
        said = [x for x in js.of(job) if x.get("event") in ("output", "lines")]
        assert said == [], f"the script ran before the kill: {said}"
        assert js.event(job, "spawn")["pid"] not in (None, 0)
    assert not js.request_errors(), js.request_errors()
    assert js.finish() == 0


def test_stdin_pipe_data_reaches_the_script(serve, script):
    js = serve()
    js.launch(
        "piped",
        script("""
            import sys
            line = sys.stdin.buffer.readline()
            print("read", line.decode("utf-8").strip().upper(), flush=True)
            rest = sys.stdin.buffer.read()
            print("then", len(rest), "bytes and eof")
        """),
        stdin="pipe",
    )
    data = "hello \u00e9\n".encode("utf-8")
    js.send({"op": "stdin", "job": "piped", "data": base64.b64encode(data).decode("ascii")})
    js.output("piped", "read HELLO \u00c9")
    js.send({"op": "stdin", "job": "piped", "data": base64.b64encode(b"x" * 100).decode("ascii")})
    js.send({"op": "stdin_end", "job": "piped"})
    js.output("piped", "then 100 bytes and eof")
    assert js.end("piped")["report"]["outcome"] == "succeeded"
    # stdin for a job without a pipe, or an ended one: ignored, never fatal.
    js.send({"op": "stdin", "job": "piped", "data": "AAAA"})
    js.send({"op": "stdin_end", "job": "nobody"})
    js.send({"op": "ping", "job": "nobody", "request": 2})
    assert js.event("nobody", "reply", request=2)["error"] == "no running job nobody"
    assert js.finish() == 0


def test_raw_chunks_are_exactly_the_bytes_printed(serve, script):
    out = "\u4e2d\u6587 gbk\n".encode("gbk") + b"\xff\xfe not utf-8\r\nno newline at the end"
    err = b"err \x80\x81\n" + "\u00e9t\u00e9\n".encode("latin-1")
    js = serve()
    js.launch(
        "raw",
        script(f"""
            import sys
            from trainbridge import worker
            worker.progress(1, 1)
            sys.stdout.buffer.write({out!r}); sys.stdout.buffer.flush()
            sys.stderr.buffer.write({err!r}); sys.stderr.buffer.flush()
        """),
        raw=True,
    )
    assert js.end("raw")["report"]["outcome"] == "succeeded"
    lines = js.of("raw")
    for stream, expected in (("stdout", out), ("stderr", err)):
        chunks = [x for x in lines if x["event"] == "raw" and x["stream"] == stream]
        assert b"".join(base64.b64decode(x["data"]) for x in chunks) == expected
        ends = [i for i, x in enumerate(lines) if x["event"] == "raw_end" and x["stream"] == stream]
        assert len(ends) == 1 and lines.index(chunks[-1]) < ends[0]
        assert all("seq" not in x for x in chunks)
    # The usual numbered output events come too.
    texts = [x["text"] for x in numbered(lines) if x["event"] == "output"]
    assert "no newline at the end" in texts
    assert js.finish() == 0


def test_launch_failures_are_said_and_nothing_else_comes_for_that_job(serve, script):
    js = serve()
    missing = "/nonexistent/trainbridge-no-such-program"
    js.send({"op": "launch", "job": "missing", "key": secrets.token_hex(32), "command": [missing]})
    failed = js.event("missing", "launch_failed")
    assert failed["error"] == "LaunchError"
    assert missing in failed["message"] and "No such file" in failed["message"]
    js.launch("missing", script(TRAIN))  # the id is taken
    js.launch("badconfig", script(TRAIN), config={"stall_timout": 5})
    js.launch("badkey", script(TRAIN), key="not hex")
    js.launch("bad/id", script(TRAIN))
    js.launch("badstdin", script(TRAIN), stdin="inherit")
    failures = {}
    for job in ("badconfig", "badkey", "bad/id", "badstdin"):
        failures[job] = js.event(job, "launch_failed")
    assert "unknown setting 'stall_timout'" in failures["badconfig"]["message"]
    assert failures["badkey"]["error"] == "ValueError"
    assert "[A-Za-z0-9._-]" in failures["bad/id"]["message"]
    assert "devnull, pipe" in failures["badstdin"]["message"]
    js.send({"op": "ping", "job": "missing", "request": "after"})
    assert js.event("missing", "reply", request="after")["error"] == "no running job missing"
    taken = [x for x in js.of("missing") if x["event"] == "launch_failed"]
    assert len(taken) == 2 and "already in use" in taken[1]["message"]
    assert [x["event"] for x in js.of("missing")] == ["launch_failed", "launch_failed", "reply"]
    for job in ("badconfig", "badkey", "bad/id", "badstdin"):
        assert len(js.of(job)) == 1
    assert js.finish() == 0


def test_a_bad_request_is_answered_and_the_server_goes_on(serve, script):
    js = serve()
    js.send_raw(b"this is not json\n")
    js.send_raw(b"\xff\xfe not utf-8\n")
    js.send_raw(b"[1, 2]\n")
    js.send({"op": "explode", "job": "x"})
    js.send({"op": "ping"})
    js.send({"op": "ping", "job": "x", "timeout": "soon", "request": 7})
    js.send({"op": "user_signal", "job": "x", "signal": "SIGBOGUS", "reason": "r"})
    js.wait(lambda x: len(js.request_errors()) >= 7, what="7 request_errors")
    errors = js.request_errors()
    assert "not a JSON line" in errors[0]["error"]
    assert "not a JSON line" in errors[1]["error"]
    assert "JSON object" in errors[2]["error"]
    assert "unknown op 'explode'" in errors[3]["error"] and errors[3]["job"] == "x"
    assert "'job'" in errors[4]["error"]
    assert "timeout" in errors[5]["error"] and errors[5]["request"] == 7
    assert "SIGBOGUS" in errors[6]["error"]
    js.launch("after", script(TRAIN))
    assert js.end("after")["report"]["outcome"] == "succeeded"
    assert js.finish() == 0


def test_a_flood_of_output_comes_whole_and_in_order(serve, script):
    lines = 10_000
    js = serve()
    js.launch(
        "flood",
        script(f"""
            from trainbridge import worker
            worker.progress(0, 1)
            for i in range({lines}):
                print("line", i)
            worker.progress(1, 1)
        """),
    )
    assert js.end("flood")["report"]["outcome"] == "succeeded"
    events = numbered(js.of("flood"))
    texts = [x["text"] for x in events if x["event"] == "output"]
    assert texts == [f"line {i}" for i in range(lines)]
    assert js.finish() == 0


GRANDCHILD = """
    import subprocess, sys, time
    from trainbridge import worker
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    print("child", child.pid, flush=True)
    worker.progress(1, 10)
    time.sleep(60)
"""


def running_tree(js, job):
    """pid -> start time of the job's process and the child it started (it runs now)."""
    spawn = js.event(job, "spawn")
    js.message(job, "progress")
    child = js.wait(
        lambda x: x.get("job") == job and x.get("event") == "output" and "child" in x["text"],
        what="the child's pid",
    )
    pids = {spawn["pid"]: None, int(child["text"].split()[1]): None}
    for pid in pids:
        seen = start_time(pid)
        assert seen is not None and seen[1] != "Z", f"{pid} is not running"
        pids[pid] = seen[0]
    return pids


def test_stdin_eof_cancels_the_jobs_writes_their_end_and_exits_0(serve, script):
    js = serve()
    js.launch("left", script(GRANDCHILD))
    pids = running_tree(js, "left")
    js.close_stdin()
    end = js.end("left")
    assert end["report"]["outcome"] == "cancelled"
    assert end["report"]["cancel"]["reason"] == "the process that launched it ended"
    assert js.finish() == 0
    assert not wait_gone(pids, timeout=3), "a process of the job outlived jobserve"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_cancels_the_jobs_and_exits_0(serve, script, sig):
    js = serve()
    js.launch("termed", script(GRANDCHILD))
    pids = running_tree(js, "termed")
    js.proc.send_signal(sig)
    end = js.end("termed")
    assert end["report"]["outcome"] == "cancelled"
    assert sig.name in end["report"]["cancel"]["reason"]
    assert js.proc.wait(WAIT_S) == 0
    assert js.finish() == 0
    assert not wait_gone(pids, timeout=3), "a process of the job outlived jobserve"


def test_a_sigkilled_jobserve_leaves_no_training_process(serve, script):
    js = serve()
    js.launch("orphan", script(GRANDCHILD))
    pids = running_tree(js, "orphan")
    js.proc.send_signal(signal.SIGKILL)
    assert js.proc.wait(WAIT_S) == -signal.SIGKILL
    left = wait_gone(pids)
    assert not left, f"still running {GONE_S} s after jobserve was SIGKILLed: {left}"


def test_jobserve_imports_only_what_the_supervisor_needs():
    code = (
        "import sys, trainbridge.bridge.jobserve; "
        "print(sorted(m for m in ('psutil', 'rich', 'pynvml', 'sqlite3', 'zmq', "
        "'trainbridge.bridge.job') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=served_env(), capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stderr.decode("ascii", "replace")
    assert done.stdout.strip() == b"[]"


ENV_OF = """
    import json, os
    from trainbridge import worker
    with worker.stage("train"):
        worker.progress(1, 1)
    names = sorted(k for k in os.environ if k.startswith("TRAINBRIDGE_"))
    shared = {k: os.environ.get(k) for k in ("TRAINBRIDGE_ENDPOINT", "TRAINBRIDGE_CLIENT_PID",
        "TRAINBRIDGE_HEARTBEAT_S", "TRAINBRIDGE_STALL_S", "PYTHONPATH", "PYTHONUNBUFFERED")}
    print(json.dumps([names, shared]))
"""


def test_a_launch_waiting_at_start_runs_before_the_judge_loads_and_is_judged_the_same(
    serve, script
):
    """A cold Node launch() waited for jobserve's imports (zmq, the judge) before its child
    even started. A launch that is waiting when jobserve starts is spawned first (Early), with
    the environment the Job gives every job; the hub holds what its worker says until the Job
    attaches it. The same command launched the usual way gets the same environment and
    the same judgement."""
    path = script(ENV_OF)
    js = serve(first=lambda js: js.launch("early", path, config={"stall_timeout": 60}))
    assert js.lines[0]["early"] == "early" + js.suffix
    js.launch("usual", path, config={"stall_timeout": 60})
    ends = {job: js.end(job)["report"] for job in ("early", "usual")}
    outputs = {}
    for job in ("early", "usual"):
        events = numbered(js.of(job))
        assert events[0]["event"] == "spawn"
        outputs[job] = json.loads(next(x["text"] for x in events if x["event"] == "output"))
        assert any(x["event"] == "message" and x["kind"] == "hello" for x in events), job
    assert outputs["early"] == outputs["usual"]
    names, shared = outputs["early"]
    assert "TRAINBRIDGE_CRASH_FILE" in names and "TRAINBRIDGE_KEY" in names
    assert shared["TRAINBRIDGE_CLIENT_PID"] == str(js.pid)
    assert shared["TRAINBRIDGE_STALL_S"] == "30.0"  # the stall deadline's half, as launch()'s
    for field in ("outcome", "exit_code", "stage", "progress", "diagnosis"):
        assert ends["early"][field] == ends["usual"][field], field
    stages = {job: [(s["name"], s["status"]) for s in ends[job]["stages"]] for job in ends}
    assert stages["early"] == stages["usual"] == [("train", "ok")]
    assert ends["early"]["outcome"] == "succeeded"
    assert js.finish() == 0


def test_a_job_started_early_is_timed_from_its_spawn_not_from_its_job(serve, script, tmp_path):
    """The early job's Job is made once the judge is loaded, 0.1-0.2 s after the spawn: its
    deadlines and its duration count from the spawn (Job's spawned_at), so the report's
    duration covers the whole life the script itself measured."""
    marks = tmp_path / "marks"
    path = script(
        f"import time\nstart = time.monotonic()\ntime.sleep(0.5)\n"
        f"open({str(marks)!r}, 'w').write(repr(time.monotonic() - start))"
    )
    js = serve(first=lambda js: js.launch("timed", path))
    assert js.lines[0]["early"] == "timed" + js.suffix
    report = js.end("timed")["report"]
    lived = float(marks.read_text())  # from its first line to its last, as it measured
    assert report["duration_s"] >= lived, (report["duration_s"], lived)
    assert js.finish() == 0


def test_a_waiting_launch_that_cannot_start_fails_as_any_launch(serve, script, tmp_path):
    """Early spawns only what would simply start: a missing program, a log file that cannot
    be written or a bad field goes the usual way and is said the usual way."""
    missing = "/nonexistent/trainbridge-no-such-program"
    unwritable = str(tmp_path / "no-such-dir" / "train.log")

    def first(js):
        js.send(
            {"op": "launch", "job": "missing", "key": secrets.token_hex(32), "command": [missing]}
        )

    js = serve(first=first)
    assert js.lines[0]["early"] is None
    failed = js.event("missing", "launch_failed")
    assert failed["error"] == "LaunchError" and "No such file" in failed["message"]
    assert js.finish() == 0
    js = serve(first=lambda js: js.launch("log", script(TRAIN), log_path=unwritable))
    assert js.lines[0]["early"] is None
    failed = js.event("log", "launch_failed")
    assert "cannot write the log file" in failed["message"], failed
    assert js.finish() == 0
    js = serve(first=lambda js: js.launch("badconfig", script(TRAIN), config={"stall": 1}))
    assert js.lines[0]["early"] is None
    assert "unknown setting 'stall'" in js.event("badconfig", "launch_failed")["message"]
    assert js.finish() == 0


def test_a_jobserve_that_cannot_load_its_judge_leaves_no_early_job_running(tmp_path, script):
    """The first job is spawned before zmq is imported: if that import then fails, the job
    must not run on unwatched. A zmq that is found but does not import stands in for a
    broken install."""
    fake = tmp_path / "zmq"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('this zmq is broken')\n")
    env = served_env()
    env["PYTHONPATH"] = f"{tmp_path}{os.pathsep}{ROOT}"
    sleeper = script("import time\ntime.sleep(60)")
    request = {
        "op": "launch",
        "job": f"broken-{secrets.token_hex(4)}",
        "key": secrets.token_hex(32),
        "command": [sys.executable, sleeper],
        "zero_code": False,
    }
    done = subprocess.run(
        [sys.executable, "-m", "trainbridge.bridge.jobserve"],
        cwd=ROOT,
        env=env,
        input=json.dumps(request).encode() + b"\n",
        capture_output=True,
        timeout=WAIT_S,
    )
    assert done.returncode != 0
    assert b"this zmq is broken" in done.stderr
    assert f"job {request['job']}, started early, is stopped".encode() in done.stderr
    assert b'"ready"' not in done.stdout
    # It was started (early), and it is gone: no process has the job's id in its environment.
    from trainbridge.bridge import launcher

    deadline = time.monotonic() + GONE_S
    while launcher.job_marked_pids(request["job"]) and time.monotonic() < deadline:
        time.sleep(0.02)  # polling /proc with a deadline
    assert not launcher.job_marked_pids(request["job"])


@pytest.mark.parametrize("width", [0, 60_000], ids=["short lines", "long lines"])
def test_a_client_that_stops_reading_gets_a_count_not_an_unbounded_queue(tmp_path, script, width):
    """A Node client whose event loop is blocked reads nothing while its job prints a flood:
    jobserve queued every line for it, without a bound. Past OUT_BACKLOG_MAX waiting lines the
    output events are counted, and a numbered "dropped" event says how many before the job's
    next event; every line is either delivered or counted, and the rest of the feed comes.
    Long lines (up to 64 KiB each) are bounded by their text too (OUT_BACKLOG_CHARS): fewer
    than OUT_BACKLOG_MAX of them were held whole, more than a GiB at the most."""
    from trainbridge.bridge import jobserve

    if width:
        lines = 2 * jobserve.OUT_BACKLOG_CHARS // width  # far fewer than OUT_BACKLOG_MAX
        assert lines < jobserve.OUT_BACKLOG_MAX
    else:
        lines = 3 * jobserve.OUT_BACKLOG_MAX
    done = tmp_path / "done"
    flood = script(
        f"import pathlib, sys\npad = ' ' + 'x' * {width} if {width} else ''\n"
        f"for i in range({lines}):\n    sys.stdout.write(f'line {{i}}{{pad}}\\n')\n"
        f"sys.stdout.flush()\npathlib.Path({str(done)!r}).touch()"
    )
    proc = start_jobserve()
    job = f"flood-{secrets.token_hex(4)}"
    request = {"op": "launch", "job": job, "key": secrets.token_hex(32)}
    request.update(command=[sys.executable, flood], zero_code=False)
    proc.stdin.write(json.dumps(request).encode() + b"\n")
    proc.stdin.flush()
    deadline = time.monotonic() + 120  # the flood is printed and read while nobody reads us
    while not done.exists():
        assert time.monotonic() < deadline, "the flood was not printed within 120 s"
        time.sleep(0.05)  # polling a file with a deadline: the child says nothing else
    events: list = []  # now read, up to the job's end; then EOF ends jobserve

    def read():
        for raw in iter(proc.stdout.readline, b""):
            events.append(json.loads(raw))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + WAIT_S
    while not any(x.get("event") == "end" for x in events[-3:]):
        assert time.monotonic() < deadline, f"no end within {WAIT_S} s"
        time.sleep(0.02)  # polling the reader's list with a deadline
    proc.stdin.close()
    assert proc.wait(WAIT_S) == 0, proc.stderr.read()[-2000:]
    reader.join(WAIT_S)
    mine = numbered([x for x in events if x.get("job") == job])
    texts = [x["text"] for x in mine if x["event"] == "output"]
    dropped = [x for x in mine if x["event"] == "dropped"]
    assert dropped, "a flood past the bound is counted and said"
    assert all(x["kinds"] == {"output": x["count"]} for x in dropped)
    assert len(texts) + sum(x["count"] for x in dropped) == lines
    assert texts == sorted(texts, key=lambda t: int(t.split()[1])), "in order, with gaps"
    assert mine[-1]["event"] == "end" and mine[-1]["report"]["outcome"] == "succeeded"
    assert mine[-1]["report"]["log_tail"][-1].startswith(f"line {lines - 1}")


def test_a_shutdown_before_the_waiting_launch_was_handled_stops_its_early_job(tmp_path):
    """A signal can end jobserve between its early start and the handling of that request:
    the request is then refused (shutting down), so its process must not run on."""
    from trainbridge.bridge import jobserve, launcher

    job_id = f"early-stop-{secrets.token_hex(4)}"
    request = {"op": "launch", "job": job_id, "key": secrets.token_hex(32)}
    request.update(command=["sleep", "60"], zero_code=False)
    runtime_dir = launcher.make_runtime_dir()
    early = jobserve.Early.spawn([json.dumps(request).encode()], runtime_dir)
    assert early is not None, "a launch that would simply start is started early"
    started = start_time(early.proc.pid)
    out = jobserve.Out(os.open(os.devnull, os.O_WRONLY))
    server = jobserve.Server(out)
    server.early = early
    server.shutdown("its supervisor (jobserve) got SIGTERM")
    assert not wait_gone({early.proc.pid: started[0]}), "the early job still runs"
    assert not os.path.exists(os.path.join(runtime_dir, job_id)), "its files are gone"
    out.close()
    shutil.rmtree(runtime_dir)  # no hub was made in it: only its owner file is left


def test_a_numbered_line_is_the_feeds_line_with_the_job():
    """jobserve builds its lines in one step (an output flood's cost): exactly the line
    feed.encode writes for the event with "job" added, NaN and non-ASCII text included."""
    from trainbridge.bridge import feed, jobserve

    events = [
        {"event": "output", "stream": "stdout", "text": "\u00e9 \u4e2d \ud83d\ude00", "t": 1.5},
        {"event": "status", "status": {"metrics": {"loss": float("nan")}, "step": 3}, "t": 2.0},
        {"event": "end", "outcome": "failed", "report": {"error": None, "x": [1, {"y": None}]}},
        {"event": "odd", "seq": 99, "job": "other", "value": float("-inf"), "obj": object()},
    ]
    for seq, event in enumerate(events, 1):
        line = jobserve.encode("job-1", seq, event)
        body = {"job": "job-1", **event}
        body["job"] = "job-1"  # the event's own "job" (none has one) does not replace it
        assert line == feed.encode(seq, body)
        assert line.isascii() and line.endswith("}\n") and line.count("\n") == 1


def test_a_line_after_stdout_closed_is_counted_and_said(capsys):
    """jobserve's stdout writer after close(): a late event is not in the feed, so it is
    counted and said on stderr (the Node client keeps jobserve's stderr), not dropped
    without a word."""
    from trainbridge.bridge import jobserve

    read, write = os.pipe()
    out = jobserve.Out(write)
    out.event("job-1", 1, {"event": "output", "text": "before"})
    out.close()
    out.event("job-1", 2, {"event": "end", "outcome": "succeeded"})
    os.close(write)
    with os.fdopen(read, "rb") as f:
        written = f.read().decode("ascii").splitlines()
    assert len(written) == 1 and '"before"' in written[0], written
    assert out.late == 1
    err = capsys.readouterr().err
    assert "a 'end' line of job job-1 came after stdout closed (1 so far)" in err, err


def test_a_run_of_output_events_is_one_lines_line_for_a_client_that_asked():
    """Out merges a job's consecutive output events of one stream, taken in one batch, into
    one `lines` line when its launch asked ("lines": true, the Node client); one event stays
    as it is, and a job that did not ask gets one line per event (an older client reads those)."""
    from trainbridge.bridge import jobserve

    out = jobserve.Out(os.open(os.devnull, os.O_WRONLY))
    out.merging.add("j1")

    def output(stream, n):
        return {
            "event": "output",
            "stream": stream,
            "text": f"l{n}",
            "encoding": "utf-8",
            "end": "lf",
            "line": n,
            "t": 1.0,
        }

    batch = [
        ("j1", 1, output("stdout", 1)),
        ("j1", 2, output("stdout", 2)),
        ("j2", 1, output("stdout", 1)),  # another job, not asking: its own line
        ("j1", 3, output("stdout", 3)),
        ("j1", 4, output("stderr", 1)),  # another stream: a run of its own
        ("j1", 5, {"event": "status", "t": 1.0}),
        ("j1", 6, output("stdout", 4)),
    ]
    lines = [json.loads(line) for line in out._encode(batch)]
    out.close()
    shape = [
        (d["job"], d["seq"], d["event"], d.get("first"), d.get("lines") or d.get("text"))
        for d in lines
    ]
    assert shape == [
        ("j1", 2, "lines", 1, [["l1", "utf-8", "lf", 1], ["l2", "utf-8", "lf", 2]]),
        ("j2", 1, "output", None, "l1"),
        ("j1", 3, "output", None, "l3"),
        ("j1", 4, "output", None, "l1"),
        ("j1", 5, "status", None, None),
        ("j1", 6, "output", None, "l4"),
    ]
