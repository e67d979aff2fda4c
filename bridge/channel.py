"""One job's side of the protocol, behind the hub: decode and check what its workers send
(intake.judge), count what was rejected or lost, ack last words, refuse a worker that
speaks another protocol major, and number and send the client's commands, holding them
while a worker's queue is full. The hub routes each message to its job's Channel.

The one implementation: a Node process's jobs are served here too, through
bridge/jobserve.py (docs/CLIENT.md, "The job server").
"""

from __future__ import annotations

import collections
import time
from typing import Any, Callable, Optional

import zmq

from trainbridge.bridge import intake
from trainbridge.bridge.hub import Hub, frames_size
from trainbridge.protocol import codec

REPLY_KINDS = ("ack", "refuse")  # not counted as undelivered: the worker's own wait covers them
# job.send() messages held for one worker whose queue is full (a stopped or stuck worker)
# past SNDHWM: at most this many, and this many bytes; more are dropped and counted in
# protocol.undelivered (docs/PROTOCOL.md "Limits"). Commands are never dropped here.
HELD_USER_LIMIT = 10_000
HELD_USER_BYTES = 64 * 1024 * 1024


class Channel:
    """One job's side of the protocol: decode, check, count, ack, send commands."""

    def __init__(
        self,
        hub: Hub,
        job_id: str,
        key: bytes,
        on_message: Callable[[bytes, int, codec.Message], None],
        on_refused: Callable[[str], None],
    ):
        self.hub = hub
        self.job_id = job_id
        self.key = key
        self.on_message = on_message
        self.on_refused = on_refused
        self.rejected: dict[str, int] = collections.Counter()
        self.lost = 0  # messages missing in seq gaps
        self.last_seq: dict[bytes, int] = {}
        self.peers: dict[bytes, int] = {}  # routing id -> rank, for commands
        self.seq = 0  # our own per-job sequence
        # routing id -> [(kind, frames)] a full peer queue could not take yet, sent in order
        self.held: dict[bytes, collections.deque[tuple[str, Any]]] = {}
        self.held_user: dict[bytes, tuple[int, int]] = {}  # routing id -> (count, bytes) held
        self.undelivered: dict[str, int] = collections.Counter()  # kind -> sent to a gone peer
        self.waited = 0  # times a full peer queue made a send wait
        self._keys = {job_id: key}  # what intake.judge verifies with

    def receive(self, routing_id: bytes, frames: list[bytes]) -> None:
        verdict = intake.judge(routing_id, frames, self._keys, self.last_seq)
        if verdict["ack"] is not None:
            self._send_to(routing_id, "ack", {"to": verdict["ack"]})
        if verdict["reject"] is not None:
            self.rejected[verdict["reject"]] += 1
            intake.note_rejected(
                self.hub.budget,
                routing_id.decode("latin-1"),
                frames_size(frames),
                verdict["reject"],
                time.monotonic(),
            )
            if verdict["refuse"] is not None:
                self._send_to(
                    routing_id,
                    "refuse",
                    {
                        "reason": f"this client speaks protocol v{codec.PROTOCOL_MAJOR} only "
                        f"({verdict['refuse']})",
                        "supported": list(codec.SUPPORTED_MAJORS),
                    },
                )
                self.on_refused(verdict["refuse"])
            return
        self.last_seq[routing_id] = verdict["last_seq"]
        self.lost += verdict["lost"]
        self.peers[routing_id] = verdict["rank"]
        self.on_message(routing_id, verdict["rank"], verdict["message"])

    def command(self, kind: str, body: Optional[dict[str, Any]] = None) -> Optional[int]:
        """Send a command to every process of the job that said hello; returns its seq."""
        if not self.peers:
            return None
        seq = None
        for routing_id in list(self.peers):
            seq = self._send_to(routing_id, kind, body or {})
        return seq

    def send_to(self, routing_id: bytes, kind: str, body: dict[str, Any]) -> int:
        """Send to one process of the job (job.send() goes to the lead only)."""
        return self._send_to(routing_id, kind, body)

    def _send_to(self, routing_id: bytes, kind: str, body: dict[str, Any]) -> int:
        self.seq += 1
        frames = codec.encode(kind, self.seq, body, self.key, self.job_id)
        if self.held.get(routing_id):
            self._hold(routing_id, kind, frames)  # behind what waits already: order is kept
        elif not self._try(routing_id, kind, frames):
            self.waited += 1
            self._hold(routing_id, kind, frames)
        return self.seq

    def _hold(self, routing_id: bytes, kind: str, frames: Any) -> None:
        """Queue a send behind what waits for this worker; a job.send() message past the
        held limits is dropped and counted instead (the others are few: never dropped)."""
        queue = self.held.setdefault(routing_id, collections.deque())
        if kind == "user":
            size = sum(len(part) for part in frames)
            count, held = self.held_user.get(routing_id, (0, 0))
            if queue and (count >= HELD_USER_LIMIT or held + size > HELD_USER_BYTES):
                self.undelivered[kind] += 1
                return
            self.held_user[routing_id] = (count + 1, held + size)
        queue.append((kind, frames))

    def _sent_held(self, routing_id: bytes, kind: str, frames: Any) -> None:
        if kind == "user":
            count, held = self.held_user[routing_id]
            self.held_user[routing_id] = (count - 1, held - sum(len(part) for part in frames))

    def _try(self, routing_id: bytes, kind: str, frames: Any) -> bool:
        """Send now; False when the peer's queue is full (try again later). A peer that is
        gone cannot take it: counted in `undelivered` (the report's protocol.undelivered)."""
        try:
            self.hub.send(routing_id, frames)
        except zmq.Again:
            return False
        except zmq.ZMQError:
            self._not_delivered(kind)
        return True

    def _not_delivered(self, kind: str) -> None:
        # An ack or refuse to a worker that is gone is worthless to it (it waits no more).
        if kind not in REPLY_KINDS:
            self.undelivered[kind] += 1

    def flush(self) -> None:
        """Send what full peer queues held, in order, as far as they take it now."""
        for routing_id, queue in list(self.held.items()):
            while queue and self._try(routing_id, *queue[0]):
                self._sent_held(routing_id, *queue.popleft())
            if not queue:
                del self.held[routing_id]
                self.held_user.pop(routing_id, None)

    def give_up(self) -> None:
        """The job ended: what is still held will never be sent; count it."""
        for queue in self.held.values():
            for kind, _ in queue:
                self._not_delivered(kind)
        self.held.clear()
        self.held_user.clear()
