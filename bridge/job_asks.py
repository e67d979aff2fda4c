"""What a job asked its processes and awaits the answer to: a caller's dump_stacks or ping
(Job._ask, which waits on a held lock), the hang's dump_stacks (the machine's "dump_stacks"
action: its first answer is the machine's "dumped"; the ranks that answered need no
per-rank fallback, bridge/job_dumps.py) and the in-band cancel (its answer is the lead's).

A part of bridge.job.Job that owns its state and is told each ask's seqs (channel.command
sends one command to every process that said hello, one seq each, and returns the last).
I/O thread only, as every part of a Job."""

from __future__ import annotations

from typing import Any, Optional


class Asks:
    def __init__(self) -> None:
        # command seq -> [a held Lock, the reply body]: a caller waits on the lock (Job._ask)
        self.callers: dict[int, list[Any]] = {}
        self.hang_seqs: range = range(0)  # the hang's dump_stacks, one seq per process
        self.hang_last: Optional[int] = None  # its last seq, until that one is answered
        self.hang_answered: set[bytes] = set()  # routing ids that answered it with stacks
        self.cancel_seqs: range = range(0)  # the in-band cancel in flight

    def caller(self, seq: int, box: list[Any]) -> None:
        """A caller waits for the answer to `seq`: box is [a held Lock, None]."""
        self.callers[seq] = box

    def hang_dump(self, first: int, last: Optional[int]) -> None:
        """The hang's dump_stacks went out as seqs first..last (None: nobody to ask)."""
        self.hang_last = last
        self.hang_seqs = _seqs(first, last)

    def cancel(self, first: int, last: Optional[int]) -> None:
        """The in-band cancel went out as seqs first..last (None: nobody to ask)."""
        self.cancel_seqs = _seqs(first, last)

    def reply(self, routing_id: bytes, body: dict[str, Any]) -> bool:
        """A reply from any process of the job: a waiting caller gets its body and is woken;
        an answer with stacks to the hang's dump_stacks marks its sender answered. True when
        it answers the hang's last seq (the machine's "dumped", said once)."""
        to: Any = body.get("to")  # the command's seq, an int by protocol/schema.py
        if to in self.hang_seqs and body.get("stacks"):
            self.hang_answered.add(routing_id)
        box = self.callers.pop(to, None)
        if box is not None:
            box[1] = body
            box[0].release()  # the asking caller's held lock (Job._ask)
        if to is not None and to == self.hang_last:
            self.hang_last = None
            return True
        return False

    def cancel_answered(self, body: dict[str, Any]) -> bool:
        """Whether `body` (the lead's reply) answers the in-band cancel; it is then no
        longer awaited."""
        if body.get("to") not in self.cancel_seqs:
            return False
        self.cancel_seqs = range(0)
        return True


def _seqs(first: int, last: Optional[int]) -> range:
    """The seqs one command went out as (channel.command: one per process, the last
    returned; None when nobody was asked)."""
    return range(first, last + 1) if last is not None else range(0)
