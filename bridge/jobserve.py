"""The Node client's supervisor: its launched jobs, judged by the Python Job, over JSON lines.

    python -m trainbridge.bridge.jobserve

One jobserve process serves every job one Node client process launches, over its stdio, as
bridge/storeserve.py serves a store. The Node client renders the feed it writes instead of
judging the jobs itself: the deadlines, hang evidence, diagnosis and report are exactly
those of bridge.launch. Only what the supervisor needs is imported (pyzmq, msgpack, the
stdlib).

stdin: requests, one JSON object per line (UTF-8). stdout: one ASCII JSON object per line
(bridge/jsonform.py: strict, NaN as "NaN"). stderr: jobserve's own failures only.

    {"event": "ready", "pid": P, "version": 1, "python": sys.executable, "early": ID}
                                                                          the first line
(It comes once the judge is loaded. `early`: the job of a launch request that was waiting
when jobserve started, and whose command it started then, before loading the judge (Early);
else null.)

Every event a job publishes (its on_event: state, spawn, output, message, status, hang,
signal, ..., end with the report) is one line, numbered per job from 1 as a keeper's events
file numbers them (bridge/feed.py encode, `seq` first): {"seq": N, "job": ID, "event": ...}.
A launch with "lines": true (the Node client's) gets a run of consecutive output events of one
stream, as they are written together, as one line: {"seq": LAST, "job": ID, "event": "lines",
"first": FIRST, "stream": S, "lines": [[text, encoding, end, line], ...], "t": T}, the events
FIRST..LAST (a flood's lines cost one encode, not one each).
A client that stops reading (its event loop blocked) does not make jobserve hold every line:
past OUT_BACKLOG_MAX waiting lines (or OUT_BACKLOG_CHARS of their text) a job's `output` events
are counted instead, and a numbered
{"event": "dropped", "count": N, "kinds": {"output": N}} comes before that job's next event.
Lines of jobserve's own have no `seq`:
  {"job": ID, "event": "launch_failed", "error": CLASS, "message": TEXT}  (nothing else then)
  {"job": ID, "event": "reply", "request": R, "op": OP, "ok": bool, ...}  (send, ping,
      dump_stacks, remote_env; "error": TEXT when not ok)
  {"job": ID, "event": "raw", "stream": S, "data": BASE64}, {"job": ID, "event": "raw_end",
      "stream": S}  (raw jobs: the output's bytes as read, besides the output events)
  {"event": "request_error", "error": TEXT, ...the request's job, op and request if any}

Requests ({"op": ...}): launch {job, key, command, cwd, env, config, log_path, tail_lines,
zero_code, stdin: devnull|pipe, raw, python_env, log_timestamps, stop_on_nan}; cancel {job,
grace, reason}; user_signal {job, signal, reason, send: bool (jobserve sends the job's process
the signal after noting it; read with the job's launch, it is sent the moment the process
exists)}; send {job, data, request}; ping {job,
timeout, request}; dump_stacks {job, timeout, request}; remote_env {job, address, port,
request}; stdin {job, data: base64}; stdin_end {job}. A request for a job that is not running
is answered {"ok": false, "error": "no running job ID"} (cancel, user_signal and stdin ones
are ignored).

Its end: stdin's EOF (the client is gone or done), or SIGTERM / SIGINT / SIGHUP: every job
still running is cancelled, their ends are written (while stdout is open), and jobserve
exits 0. The jobs carry TRAINBRIDGE_CLIENT_PID = jobserve's pid, so if jobserve is
SIGKILLed their workers end them: no training process outlives it.
"""

from __future__ import annotations

import base64
import binascii
import collections
import json
import math
import os
import re
import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Optional

# Light imports only: the first job is spawned before the judge (zmq, the Job) is loaded.
from trainbridge.bridge import feed, jobenv, jsonform, launcher, machine, private_files
from trainbridge.bridge.batches import Batches
from trainbridge.bridge.job_arguments import TAIL_LINES, check_arguments, with_stalled_after

if TYPE_CHECKING:
    from trainbridge.bridge.job import Job

VERSION = 1
FLUSH_EVERY_S = 0.02  # while events keep coming, one write to stdout per this period
# Written at once: what a client waits on, or what changes what it shows.
URGENT_EVENTS = (
    "ready",
    "state",
    "hang",
    "signal",
    "stalled",
    "cancel",
    "no_worker",
    "launch_failed",
    "reply",
    "request_error",
    "raw_end",
    "end",
)
# Events waiting for a client that stopped reading (its event loop blocked): beyond this many,
# a job's output lines are not queued as events but counted, and a numbered "dropped" event
# says how many once the queue has room (the log file and the report's tail have them all).
# About 20 MiB of events; everything else (state, status, messages, the end) always goes.
OUT_BACKLOG_MAX = 20_000
OUT_BACKLOG_CHARS = 32 * 1024 * 1024  # and past this much waiting output text (long lines)
CLOSE_WAIT_S = 10.0  # at the end: how long the last lines may take to go (a client that
# stopped reading must not keep jobserve, and nothing else, alive)
READ_SIZE = 64 * 1024  # requests are read this much at a time
PING_TIMEOUT_S = 2.0  # ping and dump_stacks, when the request gives no timeout
EOF_REASON = "the process that launched it ended"
JOB_ID = re.compile(r"[A-Za-z0-9._-]{1,64}\Z")  # as the worker checks TRAINBRIDGE_JOB_ID
KEY_HEX = re.compile(r"[0-9a-f]{64}\Z")
# the signals a client sends the job's process itself to stop it (a python-shell kill()); a
# dump signal (SIGUSR1, SIGUSR2) is not a cancel
USER_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGKILL")
STDIN_MODES = ("devnull", "pipe")  # not "inherit": jobserve's stdin is the request pipe
IPC_PATH_MAX = 100  # as bridge/hub.py: sun_path is 108 bytes on Linux


def say(text: str) -> None:
    """One line on stderr: jobserve's own failures (ASCII; never raises)."""
    try:
        sys.stderr.write(f"trainbridge jobserve: {text}\n".encode("ascii", "replace").decode())
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


class RequestError(Exception):
    """A request that cannot be carried out as written (a missing or wrong field)."""


class Out(threading.Thread):
    """stdout: whole lines, in the order they were put, from any thread. put() only queues
    (the hub's I/O thread calls it for every event); this thread encodes and writes them in
    batches (bridge/batches.py: a line to an idle writer at once, an URGENT_EVENTS line at
    once, a flood at most one write every FLUSH_EVERY_S), so an output flood costs the
    supervision little. Once a write fails (the client is gone), the rest is dropped:
    nothing raises into a job."""

    def __init__(self, fd: int):
        super().__init__(name="trainbridge-jobserve-out", daemon=True)
        self.fd = fd
        # (job id or None, seq or None, event); raw chunks: (job id, None, (stream, bytes))
        self.batches: Batches[tuple[Optional[str], Optional[int], Any]] = Batches(FLUSH_EVERY_S)
        self.broken = False
        self.late = 0  # lines put after close(): not in the feed, said on stderr
        self.merging: set[str] = set()  # jobs whose client reads `lines` (launch's flag)
        self._chars_lock = threading.Lock()
        self._chars = 0  # of the output events' text waiting (put, not yet taken)
        self.start()

    def put(self, job_id: Optional[str], seq: Optional[int], event: Any, urgent: bool) -> None:
        if not self.batches.put((job_id, seq, event), urgent):
            self.late += 1
            kind = event.get("event") if isinstance(event, dict) else "raw"
            say(f"a {kind!r} line of job {job_id} came after stdout closed ({self.late} so far)")

    def crowded(self) -> bool:
        """Whether OUT_BACKLOG_MAX lines, or OUT_BACKLOG_CHARS of output text, wait already
        (the client is not reading): a line may be 64 KiB, so the count alone let a flood
        of long lines hold more than a GiB."""
        return len(self.batches) >= OUT_BACKLOG_MAX or self._chars >= OUT_BACKLOG_CHARS

    def line(self, obj: dict[str, Any]) -> None:
        """One unnumbered line of jobserve's own."""
        self.put(None, None, obj, obj.get("event") in URGENT_EVENTS)

    def event(self, job_id: str, seq: int, event: dict[str, Any]) -> None:
        """One numbered event of a job."""
        if event.get("event") == "output":
            with self._chars_lock:
                self._chars += _text_chars(event)
        self.put(job_id, seq, event, event.get("event") in URGENT_EVENTS)

    def raw(self, job_id: str, stream: str, chunk: Optional[bytes]) -> None:
        """A raw job's chunk as read (None: the stream's end)."""
        self.put(job_id, None, (stream, chunk), chunk is None)

    def run(self) -> None:
        closed = False
        while not closed:
            batch, closed = self.batches.take()
            taken = sum(_text_chars(event) for _, _, event in batch if _is_output(event))
            if taken:
                with self._chars_lock:
                    self._chars -= taken
            if batch and not self.broken:
                self._write("".join(self._encode(batch)).encode("ascii", "replace"))

    def _encode(self, batch: list[tuple[Optional[str], Optional[int], Any]]) -> list[str]:
        """The batch's lines; a run of a job's consecutive output events on one stream is
        one `lines` line for a client that asked (a flood's lines cost one encode, not one
        each): {"seq": LAST, "job", "event": "lines", "first": FIRST, "stream",
        "lines": [[text, encoding, end, line], ...], "t"}, seq FIRST..LAST being theirs."""
        out: list[str] = []
        run: list[tuple[Optional[str], Optional[int], Any]] = []
        for item in batch:
            job_id, seq, event = item
            if (
                job_id in self.merging
                and isinstance(event, dict)
                and event.get("event") == "output"
                and seq is not None
            ):
                last = run[-1] if run else None
                if last is not None and (
                    last[0] != job_id or last[2]["stream"] != event["stream"] or last[1] != seq - 1
                ):
                    out.append(_run_line(run))
                    run = []
                run.append(item)
                continue
            if run:
                out.append(_run_line(run))
                run = []
            out.append(encode(*item))
        if run:
            out.append(_run_line(run))
        return out

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self.fd, view) :]
        except OSError as exc:
            self.broken = True  # the client is gone: what comes after is dropped
            say(f"stdout closed ({type(exc).__name__}: {exc}); the rest of the feed is dropped")

    def close(self, timeout: float = CLOSE_WAIT_S) -> None:
        """Write what is pending (up to `timeout`), then take no more."""
        self.batches.close()
        self.join(timeout)


def _is_output(event: Any) -> bool:
    return isinstance(event, dict) and event.get("event") == "output"


def _text_chars(event: dict[str, Any]) -> int:
    text = event.get("text")
    return len(text) if isinstance(text, str) else 0


def dumps(obj: Any) -> str:
    """jsonform.dumps(obj, default=str), as feed.encode writes a line, with one encoder for
    all (json.dumps with options builds one per call: twice the cost, in an output flood)."""
    try:
        return ENCODER.encode(obj)
    except ValueError as exc:
        if not str(exc).startswith("Out of range float"):
            raise
        return jsonform.dumps(obj, default=str)  # NaN and the infinities as strings


ENCODER = json.JSONEncoder(ensure_ascii=True, allow_nan=False, default=str)


def encode(job_id: Optional[str], seq: Optional[int], event: Any) -> str:
    """One line of stdout (never raises: a line that cannot be encoded says so instead). A
    numbered one is feed.encode(seq, {"job": job_id, **event}), built in one step."""
    try:
        if job_id is None:
            return dumps(event) + "\n"
        if isinstance(event, tuple):
            stream, chunk = event
            if chunk is None:
                return dumps({"job": job_id, "event": "raw_end", "stream": stream}) + "\n"
            data = base64.b64encode(chunk).decode("ascii")
            return dumps({"job": job_id, "event": "raw", "stream": stream, "data": data}) + "\n"
        body = {"seq": seq, "job": job_id, **event}
        body["seq"], body["job"] = seq, job_id  # first, whatever the event holds
        return dumps(body) + "\n"
    except Exception as exc:  # noqa: BLE001 - one bad event must not stop the feed
        bad: dict[str, Any] = {"job": job_id} if job_id is not None else {}
        bad["event"] = event.get("event") if isinstance(event, dict) else "raw"
        bad["encode_error"] = f"{type(exc).__name__}: {exc}"
        return feed.encode(seq, bad) if seq is not None else jsonform.dumps(bad) + "\n"


def _run_line(run: list[tuple[Optional[str], Optional[int], Any]]) -> str:
    """One output event as it is, or a run of them as one `lines` line (Out._encode)."""
    if len(run) == 1:
        return encode(*run[0])
    job_id, first, event = run[0]
    lines = [[e["text"], e.get("encoding"), e["end"], e["line"]] for _, _, e in run]
    body = {"stream": event["stream"], "lines": lines, "t": run[-1][2].get("t")}
    return encode(job_id, run[-1][1], {"event": "lines", "first": first, **body})


class RawSink:
    """A raw job's job.stdout / job.stderr: each chunk the I/O thread feeds goes out as a
    "raw" line at once, in order, instead of waiting in memory for a reader."""

    def __init__(self, out: Out, job_id: str, name: str):
        self.out = out
        self.job_id = job_id
        self.name = name

    def feed(self, chunk: Optional[bytes]) -> None:
        self.out.raw(self.job_id, self.name, chunk or None)


class StdinFeeder(threading.Thread):
    """Writes a stdin="pipe" job's stdin from its own thread, so a child that does not read
    it never blocks the request loop. A failed write (the child closed it or ended) drops
    the rest; None closes it."""

    def __init__(self, job: Job):
        super().__init__(name=f"trainbridge-jobserve-stdin-{job.id}", daemon=True)
        self.job = job
        self.cond = threading.Condition()
        self.queue: collections.deque[Optional[bytes]] = collections.deque()
        self.start()

    def put(self, data: Optional[bytes]) -> None:
        with self.cond:
            self.queue.append(data)
            self.cond.notify()

    def run(self) -> None:
        pipe = self.job.stdin
        failed = pipe is None
        while True:
            with self.cond:
                while not self.queue:
                    self.cond.wait()
                data = self.queue.popleft()
            if data is None:
                if pipe is not None:
                    try:
                        pipe.close()
                    except (OSError, ValueError):
                        pass
                return
            if failed or pipe is None:
                continue
            view = memoryview(data)
            try:
                while view:
                    view = view[pipe.write(view) or 0 :]
            except (OSError, ValueError):
                failed = True  # a broken pipe, or closed at the job's end


class Served:
    """One launched job: its Job, its feed's numbering, its stdin writer."""

    def __init__(self, job_id: str):
        self.id = job_id
        self.seq = 0
        self.dropped = 0  # output lines not queued while the client did not read (Out.crowded)
        self.job: Optional[Job] = None
        self.lock = threading.Lock()  # ended and stdin: the I/O thread's end, the requests
        self.ended = False
        self.stdin: Optional[StdinFeeder] = None
        self.stop_sent: Optional[str] = None  # a user signal sent at the spawn (first_stop)

    def feed_stdin(self, chunk: Optional[bytes]) -> None:
        """Queue bytes for the job's stdin (None: close it); ignored once it ended or
        without a pipe."""
        with self.lock:
            if self.ended or self.job is None or self.job.stdin is None:
                return
            if self.stdin is None:
                self.stdin = StdinFeeder(self.job)
        self.stdin.put(chunk)

    def end(self) -> None:
        """The I/O thread, at the job's end: its stdin writer (if any) ends too."""
        with self.lock:
            self.ended = True
            feeder = self.stdin
        if feeder is not None:
            feeder.put(None)


class Server:
    def __init__(self, out: Out):
        self.out = out
        self.launch_lock = threading.Lock()  # launches, and the shutdown's start
        self.closing = False
        self.used: set[str] = set()  # every job id launched or tried: never numbered twice
        self.jobs_lock = threading.Lock()  # brief: the I/O thread takes it at a job's end
        self.jobs: dict[str, Served] = {}  # running (or starting) jobs
        self.early: Optional[Early] = None  # the first job's process, spawned before the judge

    # --- requests (the reader thread) ------------------------------------------------------
    def handle_line(self, raw: bytes, later: Sequence[bytes] = ()) -> None:
        """One request line; `later`: the lines read with it, after it (not handled yet)."""
        request: Any = None
        try:
            try:
                request = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as exc:
                raise RequestError(f"not a JSON line ({exc})") from None
            if not isinstance(request, dict):
                raise RequestError(f"a request is a JSON object, not {type(request).__name__}")
            self.handle(request, later)
        except RequestError as exc:
            answer: dict[str, Any] = {"event": "request_error", "error": str(exc)}
            if isinstance(request, dict):
                for key in ("op", "job", "request"):
                    if key in request:
                        answer[key] = request[key]
            self.out.line(answer)
        except Exception as exc:  # noqa: BLE001 - a bug here must not end the other jobs
            say(f"request failed: {type(exc).__name__}: {exc}")
            self.out.line(
                {"event": "request_error", "error": f"internal: {type(exc).__name__}: {exc}"}
            )

    def handle(self, request: dict[str, Any], later: Sequence[bytes] = ()) -> None:
        op = request.get("op")
        handler = OPS.get(op) if isinstance(op, str) else None
        if handler is None:
            raise RequestError(f"unknown op {op!r}; the ops are {', '.join(sorted(OPS))}")
        job_id = request.get("job")
        if not isinstance(job_id, str):
            raise RequestError(f"{op}: 'job' must be a job id (a string), got {job_id!r}")
        if op == "launch":  # a stop already waiting behind it is applied at the spawn
            self.op_launch(job_id, request, first_stop(job_id, later))
        else:
            handler(self, job_id, request)

    def running(self, job_id: str) -> Optional[Served]:
        with self.jobs_lock:
            served = self.jobs.get(job_id)
        if served is None or served.job is None or served.job.done():
            return None
        return served

    def reply(
        self, job_id: str, request: dict[str, Any], error: Optional[str], **fields: Any
    ) -> None:
        answer = {"job": job_id, "event": "reply", "request": request.get("request")}
        answer.update(op=request.get("op"), ok=error is None, **fields)
        if error is not None:
            answer["error"] = error
        self.out.line(answer)

    def ask(
        self, job_id: str, request: dict[str, Any], work: Callable[[Job], dict[str, Any]]
    ) -> None:
        """Answer a request for a running job on a thread of its own (the request loop never
        waits on a worker): work(job) -> the reply's fields ("error" for a failure)."""
        served = self.running(job_id)
        if served is None or served.job is None:
            self.reply(job_id, request, f"no running job {job_id}")
            return
        job = served.job

        def answer() -> None:
            try:
                fields = work(job)
            except Exception as exc:  # noqa: BLE001 - every failure is an answer
                fields = {"error": f"{type(exc).__name__}: {exc}"}
            self.reply(job_id, request, fields.pop("error", None), **fields)

        name = f"trainbridge-jobserve-{request.get('op')}"
        threading.Thread(target=answer, name=name, daemon=True).start()

    def op_launch(
        self, job_id: str, request: dict[str, Any], stop: Optional[tuple[str, str]] = None
    ) -> None:
        with self.launch_lock:
            try:
                if self.closing:
                    raise RuntimeError("jobserve is shutting down: no new jobs")
                if job_id in self.used:
                    raise ValueError(f"job id {job_id!r} is already in use")
                self.used.add(job_id)
                self._launch(job_id, request, stop)
            except Exception as exc:  # noqa: BLE001 - any failure to start is the client's answer
                self.out.line(
                    {
                        "job": job_id,
                        "event": "launch_failed",
                        "error": type(exc).__name__,
                        "message": str(exc),
                    }
                )

    def _launch(
        self, job_id: str, request: dict[str, Any], stop: Optional[tuple[str, str]]
    ) -> None:
        """stop: (signal, reason) of a user_signal for this job read with its launch (a
        python-shell kill() right after the constructor): sent the moment the process
        exists, before it runs any of its own code, as python-shell's own spawn-then-kill;
        handled in its turn, it is noted again but not sent twice."""
        from trainbridge.bridge.job import Job

        # The first request's process, spawned early: the first line handled is that request.
        early, self.early = self.early, None
        try:
            spec = parse_launch(job_id, request)
        except BaseException:
            if early is not None:
                early.discard()
            raise
        proc = early.proc if early is not None else None
        served = Served(job_id)
        if spec.flags["lines"]:
            self.out.merging.add(job_id)
        try:
            job = Job(
                spec.command,
                cwd=spec.cwd,
                env=spec.env,
                config=with_stalled_after(spec.config),
                log_path=spec.log_path,
                on_event=self._feed(job_id, served),
                tail_lines=spec.tail_lines,
                stdin=spec.stdin,
                raw=spec.flags["raw"],
                zero_code=spec.flags["zero_code"],
                python_env=spec.flags["python_env"],
                ident=(job_id, bytes.fromhex(spec.key)),
                log_timestamps=spec.flags["log_timestamps"],
                stop_on_nan=spec.stop_on_nan,
                sample_resources=spec.flags["sample_resources"],
                spawned_at=early.spawned_at if early is not None else None,
                events=False,  # on_event is the feed; nothing reads events()
            )
        except BaseException:
            if early is not None:
                early.discard()  # spawned for a job that cannot be made: it goes
            raise
        if spec.flags["raw"]:  # each chunk goes out as it is read, not held for a reader
            job.stdout = RawSink(self.out, job_id, "stdout")  # type: ignore[assignment]
            job.stderr = RawSink(self.out, job_id, "stderr")  # type: ignore[assignment]
        served.job = job
        with self.jobs_lock:  # before start(): its first events may come before it returns
            self.jobs[job_id] = served
        served.stop_sent = stop[0] if stop is not None else None
        try:
            job.start(proc, stop=stop)
        except BaseException:
            with self.jobs_lock:
                self.jobs.pop(job_id, None)
            if early is not None:
                early.discard()
            shutil.rmtree(job.dir, ignore_errors=True)  # made for the id by Job()
            raise
        if early is not None and job.hub.endpoint != early.endpoint:
            # The hub could not bind the ipc path the first job was given: its worker cannot
            # reach us, and the report says so (as `run --transparent` does).
            job.no_worker(f"the hub could not bind {early.endpoint}")

    def _feed(self, job_id: str, served: Served) -> Callable[[dict[str, Any]], None]:
        """The Job's listener: each event to the client, numbered; output dropped while the
        client's pipe is crowded, counted and said with the next event that goes."""
        out = self.out

        def on_event(event: dict[str, Any]) -> None:  # the hub's I/O thread
            if event.get("event") == "output" and out.crowded():
                served.dropped += 1  # said, numbered, with the next event that goes
                return
            try:  # a listener that raises is removed by the Job: the feed would stop
                if served.dropped:
                    n, served.dropped = served.dropped, 0
                    served.seq += 1
                    notice = {"event": "dropped", "count": n, "kinds": {"output": n}}
                    out.event(job_id, served.seq, {**notice, "t": event.get("t")})
                served.seq += 1
                out.event(job_id, served.seq, event)
                if event.get("event") == "end":
                    with self.jobs_lock:
                        self.jobs.pop(job_id, None)
                    out.merging.discard(job_id)  # its lines before the end went out unmerged
                    served.end()
            except Exception as exc:  # noqa: BLE001 - said, and the feed goes on
                say(f"job {job_id}: event {served.seq} failed: {type(exc).__name__}: {exc}")

        return on_event

    def op_cancel(self, job_id: str, request: dict[str, Any]) -> None:
        grace = request.get("grace")
        if grace is not None and not seconds(grace, zero=True):
            raise RequestError(f"cancel: grace must be a number of seconds or null, got {grace!r}")
        reason = request.get("reason")
        if reason is not None and not isinstance(reason, str):
            raise RequestError(f"cancel: reason must be a string or null, got {reason!r}")
        served = self.running(job_id)
        if served is not None and served.job is not None:
            served.job.cancel(grace, reason)

    def op_user_signal(self, job_id: str, request: dict[str, Any]) -> None:
        name, reason, send = user_signal_of(request)
        served = self.running(job_id)
        if served is not None and served.job is not None:
            job = served.job
            job.note_user_signal(name, reason)
            if served.stop_sent == name:  # sent at the spawn (read with the launch)
                served.stop_sent = None
            elif send and job.pid is not None:
                # At once, after the note was queued for the I/O thread: that thread runs its
                # queued calls before it reads an exit (bridge/hub.py _once), so the exit is
                # judged as the user's signal. A client that sent it itself on hearing of the
                # spawn raced the note (the exit came first: "crashed"); one queued behind the
                # note came late (the script printed first, python-shell's did not).
                _signal(job.pid, getattr(signal, name))

    def op_send(self, job_id: str, request: dict[str, Any]) -> None:
        if "data" not in request:
            raise RequestError("send: 'data' is missing")
        data = request["data"]
        served = self.running(job_id)
        if served is None or served.job is None:
            self.reply(job_id, request, f"no running job {job_id}")
            return
        try:
            served.job.send(data)  # queued for the I/O thread: never waits
        except Exception as exc:  # noqa: BLE001 - ValueError (too large), RuntimeError (ended)
            self.reply(job_id, request, f"{type(exc).__name__}: {exc}")
        else:
            self.reply(job_id, request, None)

    def op_ping(self, job_id: str, request: dict[str, Any]) -> None:
        timeout = wait_of(request)

        def ping(job: Job) -> dict[str, Any]:
            rtt = job.ping(timeout)
            if rtt is None:
                return {"rtt_s": None, "error": "no answer from the worker (no hello yet, or busy)"}
            return {"rtt_s": round(rtt, 6)}

        self.ask(job_id, request, ping)

    def op_dump_stacks(self, job_id: str, request: dict[str, Any]) -> None:
        timeout = wait_of(request)
        self.ask(job_id, request, lambda job: {"stacks": job.dump_stacks(timeout)})

    def op_remote_env(self, job_id: str, request: dict[str, Any]) -> None:
        address = request.get("address")
        if not isinstance(address, str):
            raise RequestError(f"remote_env: address must be a string, got {address!r}")
        port = request.get("port")
        port = 0 if port is None else port
        if type(port) is not int or not 0 <= port <= 65535:
            raise RequestError(f"remote_env: port must be 0-65535, got {port!r}")
        self.ask(job_id, request, lambda job: {"env": job.remote_env(address, port)})

    def op_stdin(self, job_id: str, request: dict[str, Any]) -> None:
        data = request.get("data")
        if not isinstance(data, str):
            raise RequestError("stdin: 'data' must be base64 text")
        try:
            chunk = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise RequestError("stdin: 'data' is not base64") from None
        if chunk:
            self._stdin(job_id, chunk)

    def op_stdin_end(self, job_id: str, request: dict[str, Any]) -> None:
        self._stdin(job_id, None)

    def _stdin(self, job_id: str, chunk: Optional[bytes]) -> None:
        served = self.running(job_id)
        if served is not None:  # else ended or unknown: ignored
            served.feed_stdin(chunk)

    # --- the end (the main thread) ---------------------------------------------------------
    def shutdown(self, reason: str) -> None:
        """Cancel every job still running and wait for their ends (each written as it comes)."""
        with self.launch_lock:
            self.closing = True
            early, self.early = self.early, None
        if early is not None:  # started before its request was handled: it is refused now
            early.discard()
        with self.jobs_lock:
            served = [s for s in self.jobs.values() if s.job is not None]
        for s in served:
            assert s.job is not None
            s.job.cancel(None, reason)
        for s in served:
            assert s.job is not None
            s.job.wait()


OPS: dict[str, Callable[[Server, str, dict[str, Any]], None]] = {
    "launch": Server.op_launch,
    "cancel": Server.op_cancel,
    "user_signal": Server.op_user_signal,
    "send": Server.op_send,
    "ping": Server.op_ping,
    "dump_stacks": Server.op_dump_stacks,
    "remote_env": Server.op_remote_env,
    "stdin": Server.op_stdin,
    "stdin_end": Server.op_stdin_end,
}


class Spec(NamedTuple):
    """A launch request, checked (parse_launch)."""

    command: list[str]
    key: str
    cwd: Optional[str]
    env: Optional[dict[str, str]]
    config: dict[str, Any]
    log_path: Optional[str]
    tail_lines: int
    stop_on_nan: Any
    stdin: str
    flags: dict[str, bool]


FLAGS = (
    ("zero_code", True),
    ("raw", False),
    ("python_env", True),
    ("log_timestamps", False),
    ("sample_resources", False),
    ("lines", False),  # the client reads `lines`: consecutive output events merged (Out)
)


def parse_launch(job_id: str, request: dict[str, Any]) -> Spec:
    """A launch request's fields, checked as launch() checks its arguments (ValueError or
    TypeError saying which is wrong). Light: it runs before the judge is loaded."""
    if not JOB_ID.match(job_id) or job_id in (".", ".."):
        raise ValueError(f"a job id is 1-64 characters of [A-Za-z0-9._-], not {job_id!r}")
    key = request.get("key")
    if not isinstance(key, str) or not KEY_HEX.match(key):
        raise ValueError("key must be 64 lowercase hex digits (32 random bytes)")
    cmd: Any = request.get("command")  # a list of strings once check_arguments passed
    cwd = request.get("cwd")
    env = request.get("env")
    config = request.get("config")
    config = {} if config is None else config
    log_path = request.get("log_path")
    tail_lines = request.get("tail_lines")
    tail_lines = TAIL_LINES if tail_lines is None else tail_lines
    stop_on_nan = request.get("stop_on_nan")
    flags = {}
    for name, default in FLAGS:
        value = request.get(name)
        if value is not None and not isinstance(value, bool):
            raise TypeError(f"{name} must be true or false, got {value!r}")
        flags[name] = default if value is None else value
    stdin = request.get("stdin") or "devnull"
    if stdin not in STDIN_MODES:
        raise ValueError(f"stdin must be one of {', '.join(STDIN_MODES)}, not {stdin!r}")
    check_arguments(
        cmd,
        cwd=cwd,
        env=env,
        config=config,
        log_path=log_path,
        tail_lines=tail_lines,
        stop_on_nan=stop_on_nan,
    )
    return Spec(list(cmd), key, cwd, env, config, log_path, tail_lines, stop_on_nan, stdin, flags)


class Early:
    """The first launch request's process, spawned before the judge is imported (that import
    is most of jobserve's start-up: a cold Node launch() waited for it before its child even
    started). It gets the environment the Job would give it (launcher.job_env) with the ipc
    endpoint the hub will bind in `runtime_dir`; the hub holds what its worker says until the
    Job attaches it (Hub.expect), as `run --transparent` does. spawn() returns None whenever
    the request would not simply start (a bad field, a log file that cannot be written, a
    command that cannot start, an ipc path too long): the request then goes the usual way,
    which says why."""

    def __init__(self, job_id: str, proc: Any, endpoint: str, runtime_dir: str, spawned_at: float):
        self.job_id = job_id
        self.spawned_at = spawned_at  # time.monotonic(): the Job's clock starts here
        self.proc = proc
        self.endpoint = endpoint
        self.runtime_dir = runtime_dir

    @classmethod
    def spawn(cls, lines: Sequence[bytes], runtime_dir: str) -> Optional[Early]:
        """lines: the whole request lines waiting; the first is the launch. None too when a
        stop for it waits behind it (the usual way sends it at the spawn: first_stop)."""
        try:
            request = json.loads(lines[0].decode("utf-8"))
            if not isinstance(request, dict) or request.get("op") != "launch":
                return None
            job_id = request.get("job")
            if not isinstance(job_id, str) or first_stop(job_id, lines[1:]) is not None:
                return None
            spec = parse_launch(job_id, request)
        except Exception:  # noqa: BLE001 - whatever is wrong, the usual way says it
            return None
        sock = os.path.join(runtime_dir, "hub.sock")
        if len(sock) > IPC_PATH_MAX:
            return None  # the hub binds tcp then: its key and port are known only later
        endpoint = f"ipc://{sock}"
        job_dir = os.path.join(runtime_dir, job_id)
        if spec.log_path is not None:
            try:  # a log that cannot be written is found before the command runs
                os.close(private_files.open_append(spec.log_path))
            except OSError:
                return None
        full = machine.initial(with_stalled_after(spec.config), 0.0)["config"]
        variables = jobenv.variables(
            endpoint,
            job_id,
            bytes.fromhex(spec.key),
            os.path.join(job_dir, "crash.txt"),
            full,
            client_pid=os.getpid(),
        )
        env = launcher.job_env(
            spec.env, variables, None, spec.flags["python_env"], spec.flags["zero_code"]
        )
        try:
            os.mkdir(job_dir, 0o700)
            spawned_at = time.monotonic()
            proc = launcher.spawn(spec.command, spec.cwd, env, stdin=spec.stdin)
        except (OSError, launcher.LaunchError):
            shutil.rmtree(job_dir, ignore_errors=True)
            return None
        return cls(job_id, proc, endpoint, runtime_dir, spawned_at)

    def discard(self) -> None:
        """Its job could not be made after all: the process and its group go at once."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # launcher.spawn: a session of its own
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except Exception:  # noqa: BLE001 - SIGKILLed: it goes
            pass
        shutil.rmtree(os.path.join(self.runtime_dir, self.job_id), ignore_errors=True)


def user_signal_of(request: dict[str, Any]) -> tuple[str, str, bool]:
    """A user_signal request's (signal, reason, send), checked; RequestError says what is
    wrong. The one reading of it: handled in its turn, or read ahead with its launch."""
    name = request.get("signal")
    if not isinstance(name, str) or name not in USER_SIGNALS:
        raise RequestError(
            f"user_signal: signal must be one of {', '.join(USER_SIGNALS)}, got {name!r}"
        )
    reason = request.get("reason")
    if reason is None:
        reason = f"the client sent the job {name}"
    if not isinstance(reason, str):
        raise RequestError(f"user_signal: reason must be a string, got {reason!r}")
    send = request.get("send", False)
    if not isinstance(send, bool):
        raise RequestError(f"user_signal: send must be true or false, got {send!r}")
    return name, reason, send


def first_stop(job_id: str, later: Sequence[bytes]) -> Optional[tuple[str, str]]:
    """(signal, reason) of the first user_signal request with send for `job_id` among
    `later` (request lines not handled yet), if any: a stop the client asked before it could
    know of the spawn. Lines that do not parse or do not check are left to their turn (which
    says why)."""
    marker = b'"user_signal"'
    wanted = job_id.encode("utf-8", "replace")
    for raw in later:
        if marker not in raw or wanted not in raw:
            continue  # most lines: no parse
        try:
            request = json.loads(raw.decode("utf-8"))
            if not isinstance(request, dict) or request.get("op") != "user_signal":
                continue
            if request.get("job") != job_id:
                continue
            name, reason, send = user_signal_of(request)
        except (UnicodeDecodeError, ValueError, RequestError):
            continue
        if send:
            return name, reason
    return None


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except OSError:
        pass  # already gone: its exit decides


def seconds(value: Any, zero: bool = False) -> bool:
    """A finite number of seconds (> 0, or >= 0 with zero)."""
    if type(value) not in (int, float) or not math.isfinite(value):
        return False
    return bool(value >= 0 if zero else value > 0)


def wait_of(request: dict[str, Any]) -> float:
    timeout = request.get("timeout")
    if timeout is None:
        return PING_TIMEOUT_S
    if not seconds(timeout, zero=True):  # 0: only an answer already there (none)
        raise RequestError(
            f"{request.get('op')}: timeout must be a number of seconds >= 0, got {timeout!r}"
        )
    return float(timeout)


def read_lines(fd: int, start: bytes = b"") -> Iterator[list[bytes]]:
    """The lines of fd until EOF, without their newlines, after those of `start` (bytes read
    already), as the batches read together (a request may look at those after it). os.read,
    not sys.stdin: a daemon thread blocked in a buffered read holds its lock, and the
    interpreter's exit aborts on it (SIGABRT, "could not acquire lock for
    <_io.BufferedReader name='<stdin>'>")."""
    buf = bytearray(start)
    if b"\n" in buf:
        last = buf.rfind(b"\n") + 1
        whole, buf = bytes(buf[: last - 1]), buf[last:]
        yield whole.split(b"\n")
    while True:
        chunk = os.read(fd, READ_SIZE)
        if not chunk:
            break
        old = len(buf)
        buf += chunk
        cut = buf.find(b"\n", old)
        if cut < 0:
            continue
        last = buf.rfind(b"\n") + 1
        whole, buf = bytes(buf[: last - 1]), buf[last:]
        yield whole.split(b"\n")
    if buf:
        yield [bytes(buf)]


def waiting_requests(fd: int) -> bytes:
    """What is already written to fd (the requests' pipe), without waiting for more."""
    import select

    try:
        readable, _, _ = select.select([fd], [], [], 0)
        return os.read(fd, READ_SIZE) if readable else b""
    except OSError:
        return b""  # the reader meets the same error and says it


def main(argv: Optional[list[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args:
        print("usage: python -m trainbridge.bridge.jobserve (requests on stdin)", file=sys.stderr)
        return 2
    # The end comes through this pipe: a byte from the reader at EOF, or from a signal
    # handler (a write takes no lock, so a handler may run anywhere in the main thread).
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    why: list[str] = []

    def on_signal(signum: int, _frame: Any) -> None:
        why.append(f"its supervisor (jobserve) got {signal.Signals(signum).name}")
        try:
            os.write(wake_w, b"s")
        except OSError:
            pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    # The wire gets its own fd, and fd 1 is stderr from now on: a stray print (a library's,
    # a C extension's) cannot tear a line of it.
    wire = os.dup(sys.stdout.fileno())
    try:
        os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    except OSError:
        pass
    out = Out(wire)
    server = Server(out)
    # The client writes its first launch as it starts us: when it is there already, its
    # command starts now, while the judge is imported (Early).
    first, early = waiting_requests(sys.stdin.fileno()), None
    runtime_dir = launcher.make_runtime_dir()
    if b"\n" in first:
        early = Early.spawn(first.split(b"\n")[:-1], runtime_dir)
    try:  # the judge, loaded before "ready": a prepared server launches at once
        from trainbridge.bridge.hub import Hub
        from trainbridge.bridge.job import Job  # noqa: F401 - its import is the cost

        Hub.get(runtime_dir, expect=early.job_id if early is not None else None)
    except BaseException:
        if early is not None:  # no judge for it after all: it must not run on unwatched
            early.discard()
            say(f"cannot load the supervisor: job {early.job_id}, started early, is stopped")
        raise
    server.early = early
    out.line(
        {
            "event": "ready",
            "pid": os.getpid(),
            "version": VERSION,
            "python": sys.executable,
            "early": early.job_id if early is not None else None,
        }
    )

    def read_requests() -> None:
        try:
            for lines in read_lines(sys.stdin.fileno(), first):
                for i, raw in enumerate(lines):
                    if raw.strip():
                        server.handle_line(raw, lines[i + 1 :])
        except (OSError, ValueError) as exc:
            say(f"cannot read requests ({type(exc).__name__}: {exc}): ending as at EOF")
        finally:  # whatever ended the loop, the jobs end and jobserve exits
            why.append(EOF_REASON)
            try:
                os.write(wake_w, b"e")
            except OSError:
                pass

    threading.Thread(
        target=read_requests, name="trainbridge-jobserve-requests", daemon=True
    ).start()
    while not why:
        os.read(wake_r, 64)  # a signal's handler runs in here (PEP 475 retries the read)
    server.shutdown(why[0])
    out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
