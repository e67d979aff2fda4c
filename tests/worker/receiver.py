"""A minimal client for worker tests: a ROUTER on an ipc path that decodes every message
with the codec, acks last words like a real client, and lets a test send commands.

One thread owns the socket; the test thread talks to it through a queue and waits on a
condition (with deadlines) for the messages it expects.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, Callable, Optional

import zmq

from trainbridge.protocol import codec

REPO = Path(__file__).resolve().parents[2]


class Received:
    __slots__ = ("msg", "routing_id", "at")

    def __init__(self, msg: codec.Message, routing_id: bytes, at: float):
        self.msg, self.routing_id, self.at = msg, routing_id, at

    @property
    def kind(self) -> str:
        return self.msg.kind

    @property
    def body(self) -> dict[str, Any]:
        return self.msg.body


class Receiver:
    def __init__(
        self,
        directory: str,
        job: str = "job-1",
        ack: bool = True,
        rcvhwm: int = 1000,
        slow: Optional[Callable[[], None]] = None,
    ):
        self.job = job
        self.key = os.urandom(32)
        self.endpoint = f"ipc://{directory}/w.sock"
        self.ack = ack
        self.slow = slow  # called before each message is read: makes the reader slow
        self.messages: list[Received] = []
        self.rejected: list[str] = []
        self.replays: list[codec.Message] = []
        self.batches: list[int] = []  # the record count of each `logs` message
        self._last_seq: dict[bytes, int] = {}
        self.cond = threading.Condition()
        self._outbox: deque = deque()
        self._seq = 0
        self._stop = False
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.RCVHWM, rcvhwm)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.bind(self.endpoint)
        self.thread = threading.Thread(target=self._run, name="test-receiver", daemon=True)
        self.thread.start()

    # --- the socket thread ---------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop:
            while self._outbox:
                rid, kind, body, done = self._outbox.popleft()
                done.append(self._send_frames(rid, kind, body))
                with self.cond:
                    self.cond.notify_all()
            if not self.sock.poll(10):
                continue
            while True:
                if self.slow is not None:
                    self.slow()
                try:
                    frames = self.sock.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                self._handle(frames)

    def _handle(self, frames: list[bytes]) -> None:
        routing_id, rest = frames[0], frames[1:]
        try:
            msg = codec.decode(rest, self.key, expect="worker")
        except codec.ProtocolError as exc:
            with self.cond:
                self.rejected.append(exc.reason)
            return
        if self.ack and msg.kind in codec.FINAL_KINDS:
            self._send_frames(routing_id, "ack", {"to": msg.seq})  # replays are acked again
        verdict, self._last_seq[routing_id] = codec.check_seq(
            self._last_seq.get(routing_id, 0), msg.seq
        )
        with self.cond:
            if verdict == "replay":  # last words resent before our ack arrived
                self.replays.append(msg)
            elif msg.kind == "logs":  # as a client does: one `log` per record, in order
                self.batches.append(len(msg.body["records"]))
                now = time.monotonic()
                self.messages.extend(
                    Received(msg._replace(kind="log", body=record), routing_id, now)
                    for record in msg.body["records"]
                )
            else:
                self.messages.append(Received(msg, routing_id, time.monotonic()))
            self.cond.notify_all()

    def _send_frames(self, routing_id: bytes, kind: str, body: dict[str, Any]) -> int:
        self._seq += 1
        self.sock.send_multipart(
            [routing_id] + codec.encode(kind, self._seq, body, self.key, self.job)
        )
        return self._seq

    # --- the test's side -------------------------------------------------------------------
    def env(self, **settings: str) -> dict[str, str]:
        """The child's environment: this machine's, minus any TRAINBRIDGE_*, plus ours."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINBRIDGE_")}
        env.update(
            TRAINBRIDGE_ENDPOINT=self.endpoint,
            TRAINBRIDGE_JOB_ID=self.job,
            TRAINBRIDGE_KEY=self.key.hex(),
            PYTHONPATH=str(REPO),
        )
        env.update({f"TRAINBRIDGE_{k.upper()}": str(v) for k, v in settings.items()})
        return env

    def command(
        self,
        kind: str,
        body: Optional[dict[str, Any]] = None,
        routing_id: Optional[bytes] = None,
        timeout: float = 5.0,
    ) -> int:
        """Send a command to the worker (the first one that said hello); returns its seq.
        The socket thread encodes it, so seqs go out in order with the acks."""
        rid = routing_id or self.wait_for(lambda r: r.kind == "hello").routing_id
        done: list[int] = []
        self._outbox.append((rid, kind, body or {}, done))
        deadline = time.monotonic() + timeout
        with self.cond:
            while not done:
                left = deadline - time.monotonic()
                assert left > 0, f"command {kind} was not sent within {timeout}s"
                self.cond.wait(left)
        return done[0]

    def wait_for(self, pred: Callable[[Received], bool], timeout: float = 10.0) -> Received:
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for r in self.messages:
                    if pred(r):
                        return r
                left = deadline - time.monotonic()
                if left <= 0:
                    kinds = [r.kind for r in self.messages]
                    raise AssertionError(f"no matching message within {timeout}s; got {kinds}")
                self.cond.wait(left)

    def of_kind(self, kind: str) -> list[Received]:
        with self.cond:
            return [r for r in self.messages if r.kind == kind]

    def kinds(self) -> list[str]:
        with self.cond:
            return [r.kind for r in self.messages]

    def close(self) -> None:
        self._stop = True
        self.thread.join(timeout=5)
        self.sock.close()
        self.ctx.term()


def run_python(
    script: str,
    env: dict[str, str],
    cwd: str,
    timeout: float = 30.0,
    args: Optional[list[str]] = None,
) -> subprocess.CompletedProcess:
    path = Path(cwd) / "script.py"
    path.write_text(script)
    return subprocess.run(
        [sys.executable, str(path)] + (args or []),
        env=env,
        cwd=cwd,
        capture_output=True,
        timeout=timeout,
    )


def release(child: subprocess.Popen, timeout: float = 10) -> int:
    """Let a child started by start_python past its `sys.stdin.read(1)`; its exit status."""
    child.stdin.write(b"x")
    child.stdin.close()
    return child.wait(timeout=timeout)


def start_python(script: str, env: dict[str, str], cwd: str) -> subprocess.Popen:
    path = Path(cwd) / "script.py"
    path.write_text(script)
    return subprocess.Popen(
        [sys.executable, str(path)],
        env=env,
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def read_line(stream, timeout: float) -> bytes:
    """One line from a child's pipe, or an AssertionError after `timeout` seconds."""
    import select

    deadline = time.monotonic() + timeout
    line = b""
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        ready, _, _ = select.select([stream], [], [], max(0.0, left))
        assert ready, f"no line within {timeout}s (got {line!r})"
        chunk = os.read(stream.fileno(), 1)
        assert chunk, f"stream closed (got {line!r})"
        line += chunk
    return line
